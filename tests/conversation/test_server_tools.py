"""`mcp_servers` and server tools in a definition: what is read, and every refusal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from agentskit_chat.conversation import (
    DEFAULT_TOOL_TIMEOUT,
    ConfigError,
    ErrorCode,
    HttpServerSpec,
    ServerToolSpec,
    StdioServerSpec,
    definition_schema,
    load_definition,
    parse_definition,
)

CONVERSATION = {"initial": "idle", "states": {"idle": {}}}


def chat(**sections: Any) -> dict[str, Any]:
    return {"id": "shop", "revision": 1, "conversation": CONVERSATION, **sections}


def refusal(data: dict[str, Any]) -> list[tuple[ErrorCode, str]]:
    with pytest.raises(ConfigError) as error:
        parse_definition(data)
    return [(d.code, d.path) for d in error.value.diagnostics]


def test_servers_and_server_tools_are_read() -> None:
    definition = parse_definition(
        chat(
            mcp_servers={
                "orders": {"command": "orders-mcp", "args": ["--db", "x"], "env": {"LEVEL": "1"}},
                "billing": {"url": "https://billing.example/mcp", "token_env": "BILLING_TOKEN"},
            },
            tools={
                "lookup_order": {"server": "orders", "timeout": 5},
                "refund": {"server": "billing", "approval": True},
                "show_card": {},
            },
        )
    )
    assert definition.mcp_servers == {
        "orders": StdioServerSpec("orders", "orders-mcp", ("--db", "x"), {"LEVEL": "1"}),
        "billing": HttpServerSpec(
            "billing", "https://billing.example/mcp", token_env="BILLING_TOKEN"
        ),
    }
    assert definition.server_tools == {
        "lookup_order": ServerToolSpec("lookup_order", "orders", 5.0),
        "refund": ServerToolSpec("refund", "billing", DEFAULT_TOOL_TIMEOUT, approval=True),
    }
    assert definition.approvals == {"refund"}


def test_a_definition_without_servers_has_none() -> None:
    definition = parse_definition(chat(tools={"show_card": {"approval": True}}))
    assert definition.mcp_servers == {}
    assert definition.server_tools == {}
    assert definition.approvals == {"show_card"}


def test_a_token_file_is_relative_to_the_definition_file(tmp_path: Path) -> None:
    path = tmp_path / "shop.yaml"
    path.write_text(
        "id: shop\nrevision: 1\n"
        "conversation: {initial: idle, states: {idle: {}}}\n"
        "mcp_servers: {billing: {url: 'http://127.0.0.1:9/mcp', token_file: billing.token}}\n"
        "tools: {refund: {server: billing}}\n",
        encoding="utf-8",
    )
    server = load_definition(path).mcp_servers["billing"]
    assert isinstance(server, HttpServerSpec)
    assert server.token_file == str(tmp_path / "billing.token")


@pytest.mark.parametrize(
    ("servers", "tools", "expected"),
    [
        (
            {},
            {"lookup_order": {"server": "orders"}},
            [(ErrorCode.UNKNOWN_MCP_SERVER, "tools.lookup_order.server")],
        ),
        (
            {"orders": {"command": "orders-mcp", "url": "http://127.0.0.1:9/mcp"}},
            {"lookup_order": {"server": "orders"}},
            [(ErrorCode.INVALID_MCP_SERVER, "mcp_servers.orders")],
        ),
        (
            {"orders": {"args": ["x"]}},
            {"lookup_order": {"server": "orders"}},
            [(ErrorCode.INVALID_MCP_SERVER, "mcp_servers.orders")],
        ),
        (
            {"orders": {"url": "http://127.0.0.1:9/mcp", "token": "s3cret"}},
            {"lookup_order": {"server": "orders"}},
            [(ErrorCode.LITERAL_SECRET, "mcp_servers.orders.token")],
        ),
        (
            {"orders": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "x"}}},
            {"lookup_order": {"server": "orders"}},
            [(ErrorCode.LITERAL_SECRET, "mcp_servers.orders.headers")],
        ),
        (
            {"orders": {"url": "http://h/mcp", "token_file": "t", "token_env": "T"}},
            {"lookup_order": {"server": "orders"}},
            [(ErrorCode.INVALID_MCP_SERVER, "mcp_servers.orders")],
        ),
        (
            {"orders": {"url": "ftp://h/mcp"}},
            {"lookup_order": {"server": "orders"}},
            [(ErrorCode.INVALID_MCP_SERVER, "mcp_servers.orders.url")],
        ),
        (
            {"orders": {"url": "http://h/mcp", "token_env": "not a name"}},
            {"lookup_order": {"server": "orders"}},
            [(ErrorCode.INVALID_MCP_SERVER, "mcp_servers.orders.token_env")],
        ),
        (
            {"orders": {"command": 7}},
            {"lookup_order": {"server": "orders"}},
            [(ErrorCode.INVALID_TYPE, "mcp_servers.orders.command")],
        ),
        (
            {"orders": {"command": "orders-mcp", "args": "x"}},
            {"lookup_order": {"server": "orders"}},
            [(ErrorCode.INVALID_TYPE, "mcp_servers.orders.args")],
        ),
        (
            {"orders": {"command": "orders-mcp", "env": {"LEVEL": 1}}},
            {"lookup_order": {"server": "orders"}},
            [(ErrorCode.INVALID_TYPE, "mcp_servers.orders.env.LEVEL")],
        ),
        (
            {"orders": {"command": "orders-mcp", "token_env": "T"}},
            {"lookup_order": {"server": "orders"}},
            [(ErrorCode.UNKNOWN_KEY, "mcp_servers.orders.token_env")],
        ),
        (
            {"orders": "orders-mcp"},
            {"lookup_order": {"server": "orders"}},
            [(ErrorCode.INVALID_TYPE, "mcp_servers.orders")],
        ),
        (
            {"or ders": {"command": "orders-mcp"}},
            {},
            [(ErrorCode.INVALID_MCP_SERVER, "mcp_servers.or ders")],
        ),
        (
            {"orders": {"command": "orders-mcp"}},
            {"lookup_order": {"server": "orders", "timeout": 0}},
            [(ErrorCode.INVALID_TOOL_TIMEOUT, "tools.lookup_order.timeout")],
        ),
        (
            {"orders": {"command": "orders-mcp"}},
            {"lookup_order": {"server": "orders", "timeout": "5s"}},
            [(ErrorCode.INVALID_TOOL_TIMEOUT, "tools.lookup_order.timeout")],
        ),
        (
            {},
            {"show_card": {"timeout": 5}},
            [(ErrorCode.INVALID_TOOL_TIMEOUT, "tools.show_card.timeout")],
        ),
        (
            {"orders": {"command": "orders-mcp"}},
            {"lookup_order": {"server": 3}},
            [
                (ErrorCode.INVALID_TYPE, "tools.lookup_order.server"),
                (ErrorCode.UNUSED_MCP_SERVER, "mcp_servers.orders"),
            ],
        ),
        (
            {"orders": {"command": "orders-mcp"}},
            {"show_card": {}},
            [(ErrorCode.UNUSED_MCP_SERVER, "mcp_servers.orders")],
        ),
    ],
    ids=[
        "unknown-server",
        "command-and-url",
        "neither",
        "literal-token",
        "literal-headers",
        "two-token-sources",
        "not-http",
        "bad-token-env",
        "command-type",
        "args-type",
        "env-type",
        "token-on-stdio",
        "server-not-mapping",
        "server-name",
        "zero-timeout",
        "timeout-type",
        "timeout-without-server",
        "server-type",
        "unused-server",
    ],
)
def test_invalid_declarations_get_specific_diagnostics(
    servers: dict[str, Any], tools: dict[str, Any], expected: list[tuple[ErrorCode, str]]
) -> None:
    assert refusal(chat(mcp_servers=servers, tools=tools)) == expected


def test_a_literal_secret_is_not_echoed_in_the_diagnostic() -> None:
    data = chat(
        mcp_servers={"orders": {"url": "http://h/mcp", "token": "s3cret-value"}},
        tools={"lookup_order": {"server": "orders"}},
    )
    with pytest.raises(ConfigError) as error:
        parse_definition(data)
    assert "s3cret-value" not in str(error.value)
    assert "token_file" in str(error.value)


def test_the_schema_accepts_servers_and_server_tools() -> None:
    jsonschema.validate(
        chat(
            mcp_servers={
                "orders": {"command": "orders-mcp", "args": ["x"], "env": {"A": "1"}},
                "billing": {"url": "https://billing.example/mcp", "token_file": "b.token"},
            },
            tools={
                "lookup_order": {"server": "orders", "timeout": 2.5},
                "refund": {"server": "billing"},
            },
        ),
        definition_schema(),
    )


@pytest.mark.parametrize(
    "server",
    [
        {"url": "http://h/mcp", "token": "s3cret"},
        {"command": "x", "url": "http://h/mcp"},
        {"url": "http://h/mcp", "token_file": "t", "token_env": "T"},
        {"args": []},
    ],
    ids=["literal-token", "both", "two-token-sources", "neither"],
)
def test_the_schema_refuses_what_the_loader_refuses(server: dict[str, Any]) -> None:
    data = chat(mcp_servers={"orders": server}, tools={"lookup_order": {"server": "orders"}})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, definition_schema())
