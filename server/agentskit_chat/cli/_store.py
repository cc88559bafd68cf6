"""Store flags shared by `serve` and `migrate`: the URL and where its password comes from."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Final

from agentskit_chat.storage import (
    DEFAULT_SYNCHRONOUS,
    SYNCHRONOUS_MODES,
    is_postgresql_url,
    redact_url,
)

STORE_ENV: Final = "AGENTSKIT_CHAT_STORE"
PASSWORD_ENV: Final = "AGENTSKIT_CHAT_STORE_PASSWORD"
PASSWORD_FILE_ENV: Final = "AGENTSKIT_CHAT_STORE_PASSWORD_FILE"
SYNCHRONOUS_ENV: Final = "AGENTSKIT_CHAT_SQLITE_SYNCHRONOUS"


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    """`--store` and `--store-password-file`."""
    parser.add_argument(
        "--store",
        default=os.environ.get(STORE_ENV),
        help="store URL: sqlite:PATH, memory:// or postgresql://USER@HOST:PORT/DATABASE"
        " [SQLite in the state directory]",
    )
    parser.add_argument(
        "--store-password-file",
        type=Path,
        default=os.environ.get(PASSWORD_FILE_ENV) or None,
        metavar="PATH",
        help=f"file holding the PostgreSQL password (else ${PASSWORD_ENV}, else libpq's"
        " PGPASSWORD / ~/.pgpass)",
    )


def store_password(args: argparse.Namespace) -> str | None:
    """The PostgreSQL password from `--store-password-file` or the environment, or None.

    ValueError naming the file (never its content) when the file cannot be read.
    """
    path: Path | None = args.store_password_file
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
            raise ValueError(f"cannot read the store password file {path}: {reason}") from None
        password = text.rstrip("\r\n")
        if not password:
            raise ValueError(f"the store password file {path} is empty")
        return password
    return os.environ.get(PASSWORD_ENV) or None


def add_durability_arguments(parser: argparse.ArgumentParser) -> None:
    """`--sqlite-synchronous`: whether a SQLite commit waits for the disk."""
    parser.add_argument(
        "--sqlite-synchronous",
        choices=SYNCHRONOUS_MODES,
        default=os.environ.get(SYNCHRONOUS_ENV) or DEFAULT_SYNCHRONOUS,
        help="SQLite store durability: normal keeps acknowledged turns across a killed"
        " process, full also across power loss (a disk sync per write) [%(default)s]",
    )


def sqlite_synchronous(args: argparse.Namespace) -> str:
    """The `--sqlite-synchronous` choice; ValueError for a bad environment value (argparse
    checks only the flag)."""
    value: str = args.sqlite_synchronous
    if value not in SYNCHRONOUS_MODES:
        raise ValueError(
            f"{SYNCHRONOUS_ENV} must be one of {', '.join(SYNCHRONOUS_MODES)}, not {value!r}"
        )
    return value


def describe_store(url: str, synchronous: str) -> str:
    """The store as the startup line names it: its URL without secrets and, for SQLite,
    its durability."""
    text = redact_url(url)
    if is_postgresql_url(url) or url.lower().startswith("memory:"):
        return text
    return f"{text} (synchronous {synchronous})"
