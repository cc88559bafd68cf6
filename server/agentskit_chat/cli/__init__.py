"""The `agentskit-chat` command: serve, migrate, validate, demo, chat, graph, test."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from agentskit_chat import __version__

from . import _chat, _demo, _graph, _migrate, _scenarios, _serve, _validate


def parser() -> argparse.ArgumentParser:
    """The command-line parser."""
    root = argparse.ArgumentParser(
        prog="agentskit-chat", description="AgentsKit Chat session service."
    )
    root.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    root.add_argument("--log-level", default="INFO", help="logging level [%(default)s]")
    commands = root.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve chat definitions over gRPC")
    _serve.add_arguments(serve)
    serve.set_defaults(run=_serve.run)
    migrate = commands.add_parser("migrate", help="bring the session store's schema up to date")
    _migrate.add_arguments(migrate)
    migrate.set_defaults(run=_migrate.run)
    validate = commands.add_parser("validate", help="check definitions and list every error")
    _validate.add_arguments(validate)
    validate.set_defaults(run=_validate.run)
    demo = commands.add_parser("demo", help="walk a scripted conversation against a live server")
    _demo.add_arguments(demo)
    demo.set_defaults(run=_demo.run)
    chat = commands.add_parser("chat", help="talk to a chat from a terminal")
    _chat.add_arguments(chat)
    chat.set_defaults(run=_chat.run)
    graph = commands.add_parser("graph", help="draw a definition's states as Mermaid or DOT")
    _graph.add_arguments(graph)
    graph.set_defaults(run=_graph.run)
    tests = commands.add_parser("test", help="run conversation test files (*.test.yaml)")
    _scenarios.add_arguments(tests)
    tests.set_defaults(run=_scenarios.run)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `agentskit-chat` command."""
    args = parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # `serve --workers` passes it on
    if args.command != "serve":  # serve writes structured log lines to stdout instead
        logging.basicConfig(
            level=args.log_level.upper(),
            stream=sys.stderr,
            format="%(levelname)s %(name)s: %(message)s",
        )
    if logging.getLevelName(args.log_level.upper()) != logging.DEBUG:
        logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per model call is noise
    try:
        status: int = args.run(args)
        sys.stdout.flush()
    except BrokenPipeError:
        return _stdout_closed()
    return status


BROKEN_PIPE = 141
"""The status of a command whose output was closed early (`| head`): 128 + SIGPIPE, as a
shell reports a program that SIGPIPE ended."""


def _stdout_closed() -> int:
    """The reader of stdout left: stop quietly. What is still buffered goes to /dev/null,
    so the flush at exit does not raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    return BROKEN_PIPE
