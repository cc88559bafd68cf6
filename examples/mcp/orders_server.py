"""An order desk's MCP server, for the `shop` chat beside it: `python3 orders_server.py`
speaks MCP over stdio (the service starts it as a child process).

`lookup_order` answers from a small in-memory table; `cancel_order` has a side effect, so
it keeps what it did by the idempotency key the service sends in each call's `_meta`
(`agentskit.turn_id` and `agentskit.call_id`): a call repeated with the same key answers
what the first one did instead of doing it again.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer

ORDERS = {
    "A-17": "2 items, shipped on Monday, arriving Thursday",
    "B-42": "1 item, waiting for payment",
    "C-99": "3 items, delivered",
}

server = MCPServer("orders")
done: dict[tuple[str, str], str] = {}
"""What each cancellation did, by its idempotency key."""


@server.tool()
def lookup_order(order_id: str) -> str:
    """Look an order up by its id (like A-17): its items and where it is."""
    found = ORDERS.get(order_id.strip().upper())
    return f"Order {order_id}: {found}." if found else f"There is no order {order_id}."


@server.tool()
def cancel_order(order_id: str, ctx: Context) -> str:
    """Cancel an order that has not shipped yet."""
    meta = dict(ctx.request_context.meta or {})
    key = (str(meta.get("agentskit.turn_id", "")), str(meta.get("agentskit.call_id", "")))
    if key in done:
        return done[key]  # the same call again: what it did the first time
    status = ORDERS.get(order_id.strip().upper())
    if status is None:
        answer = f"There is no order {order_id}."
    elif "shipped" in status or "delivered" in status:
        answer = f"Order {order_id} has shipped; it can no longer be cancelled."
    else:
        ORDERS[order_id.strip().upper()] = "cancelled"
        answer = f"Order {order_id} is cancelled."
    done[key] = answer
    return answer


if __name__ == "__main__":
    server.run()
