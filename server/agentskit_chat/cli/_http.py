"""`serve` flags of the HTTP listener for browsers (Connect and gRPC-Web)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from agentskit_chat.transport.web import HttpSettings, checked_origins


def add_http_arguments(parser: argparse.ArgumentParser) -> None:
    """--http-listen, --cors-origin and --web-root."""
    group = parser.add_argument_group("HTTP listener for browsers (Connect and gRPC-Web)")
    group.add_argument(
        "--http-listen",
        default=os.environ.get("AGENTSKIT_CHAT_HTTP_LISTEN") or None,
        metavar="HOST:PORT",
        help="also serve the contract over Connect and gRPC-Web (HTTP/1.1 and HTTP/2) "
        "at HOST:PORT, with /healthz; port 0 picks a free port [off]",
    )
    group.add_argument(
        "--cors-origin",
        action="append",
        default=[o for o in os.environ.get("AGENTSKIT_CHAT_CORS_ORIGINS", "").split(",") if o],
        metavar="ORIGIN",
        help="a browser origin (https://host[:port]) allowed to call the HTTP listener "
        "from another origin; repeatable [none]",
    )
    group.add_argument(
        "--web-root",
        default=os.environ.get("AGENTSKIT_CHAT_WEB_ROOT") or None,
        metavar="DIR",
        help="also serve the static files under DIR (a web renderer) on the HTTP listener",
    )


def http_from(args: argparse.Namespace) -> HttpSettings | None:
    """The listener's settings; None when off. ValueError names a flag that cannot work."""
    if args.http_listen is None:
        if args.cors_origin or args.web_root:
            raise ValueError("--cors-origin and --web-root need --http-listen")
        return None
    web_root = args.web_root
    if web_root is not None and not Path(web_root).is_dir():
        raise ValueError(f"--web-root {web_root}: not a directory")
    return HttpSettings(args.http_listen, checked_origins(args.cors_origin), web_root)
