"""`python -m agentskit_chat.fakemodel`: serve the fake model until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import Sequence

from ._core import FakeModel
from ._scripts import DEFAULT_TEXT, Reply, ToolCalls, split_text


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="python -m agentskit_chat.fakemodel",
        description="A fake model speaking the OpenAI Chat Completions streaming protocol; "
        "every request gets the same fixed sentence, and one ending with tool results a "
        "sentence naming how many it got.",
    )
    parser.add_argument(
        "--listen", default="127.0.0.1:0", help="host:port; port 0 picks one [%(default)s]"
    )
    parser.add_argument("--chunks", type=int, default=4, help="chunks per reply [%(default)s]")
    parser.add_argument(
        "--delay", type=float, default=0.0, help="seconds before each chunk [%(default)s]"
    )
    parser.add_argument(
        "--tool-calls",
        action="store_true",
        help="answer a request that offers tools by calling each of them, with example "
        "arguments from its schema streamed in pieces",
    )
    parser.add_argument(
        "--call-tool",
        action="append",
        default=[],
        metavar="NAME",
        help="answer a request that offers the tool NAME by calling it (repeat for more "
        "tools; other requests get the sentence), with example arguments from its schema",
    )
    args = parser.parse_args(argv)
    if args.tool_calls and args.call_tool:
        parser.error("--tool-calls calls every tool; --call-tool names some: use one")
    if not 1 <= args.chunks <= len(DEFAULT_TEXT):
        parser.error(f"--chunks must be between 1 and {len(DEFAULT_TEXT)}")
    if args.delay < 0:
        parser.error("--delay must not be negative")
    host, colon, port = args.listen.rpartition(":")
    if not colon or not port.isdigit():
        parser.error("--listen must be HOST:PORT")
    args.host, args.port = host.strip("[]"), int(port)
    return args


async def serve(host: str, port: int, reply: Reply, tool_reply: ToolCalls | None = None) -> None:
    """Serve `reply` to every request (`tool_reply`, when set, to one that offers tools)
    until SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    model = FakeModel(reply, tool_reply=tool_reply)
    await model.start(host, port)
    try:
        print(f"fake model listening on {model.url}", flush=True)
        await stop.wait()
    finally:
        await model.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point."""
    args = parse_args(argv)
    reply = Reply(chunks=split_text(DEFAULT_TEXT, args.chunks), delay=args.delay)
    tool_reply = None
    if args.tool_calls or args.call_tool:
        tool_reply = ToolCalls(delay=args.delay, only=tuple(args.call_tool))
    asyncio.run(serve(args.host, args.port, reply, tool_reply))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
