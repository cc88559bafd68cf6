"""Store URLs: `memory://`, `sqlite:///abs/path.db`, `sqlite:relative/path.db`, a `.db` path,
or `postgresql://user@host:port/database` (also `postgres://`)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final
from urllib.parse import quote, unquote, urlsplit

from ._ports import Store
from .memory import MemoryStore
from .sqlite import DEFAULT_SYNCHRONOUS, open_sqlite_store

STATE_DIR_ENV: Final = "AGENTSKIT_CHAT_STATE_DIR"
DEFAULT_STATE_DIR: Final = Path("var")
SQLITE_SUFFIXES: Final = (".db", ".sqlite", ".sqlite3")

_ACCEPTED: Final = (
    "memory://, sqlite:///absolute/path.db, sqlite:relative/path.db,"
    " a file path ending in .db, .sqlite or .sqlite3, or postgresql://user@host/database"
)
_SCHEME: Final = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


async def open_store(
    url: str,
    *,
    password: str | None = None,
    migrate: bool = False,
    sqlite_synchronous: str = DEFAULT_SYNCHRONOUS,
) -> Store:
    """Open the store that `url` names; ValueError when the URL is not supported.

    `password` and `migrate` apply to PostgreSQL only: the password goes to the server
    beside the URL, and `migrate` applies missing schema migrations before use (SQLite
    migrates its file on open). `sqlite_synchronous` applies to SQLite only: `normal` or
    `full` (see `SqliteStore`).
    """
    if _is_memory(url):
        return MemoryStore()
    if is_postgresql_url(url):
        from .postgresql import open_postgresql_store  # psycopg: loaded only when used

        return await open_postgresql_store(url, password=password, migrate=migrate)
    return await open_sqlite_store(sqlite_path(url), synchronous=sqlite_synchronous)


def is_postgresql_url(url: str) -> bool:
    """True for `postgresql://` and `postgres://` URLs."""
    scheme = _SCHEME.match(url)
    return scheme is not None and scheme.group(1).lower() in {"postgresql", "postgres"}


def sqlite_path(url: str) -> Path:
    """The file that a SQLite store URL or plain `.db` path names; ValueError otherwise."""
    scheme = _SCHEME.match(url)
    if scheme is None:
        if url.lower().endswith(SQLITE_SUFFIXES) and Path(url).name not in SQLITE_SUFFIXES:
            return Path(url)
        raise _unsupported(url)
    if scheme.group(1).lower() != "sqlite":
        raise _unsupported(url)
    rest = url[scheme.end() :]
    if "?" in rest or "#" in rest:
        raise ValueError(f"sqlite store URL {redact_url(url)!r} must not have a query or fragment")
    if rest.startswith("//"):
        rest = rest[2:]
        if rest and not rest.startswith("/"):
            raise ValueError(
                f"sqlite store URL {redact_url(url)!r} names a host; use sqlite:///absolute/path.db"
            )
    path = unquote(rest)
    if not path or path.endswith("/"):
        raise ValueError(f"sqlite store URL {redact_url(url)!r} names no file")
    return Path(path)


def default_store_url(state_dir: Path) -> str:
    """The SQLite URL of `state_dir / "sessions.db"`."""
    path = (state_dir / "sessions.db").as_posix()
    prefix = "sqlite://" if path.startswith("/") else "sqlite:"
    return prefix + quote(path, safe="/")


def state_dir_from_env() -> Path:
    """`$AGENTSKIT_CHAT_STATE_DIR`, or `./var` when it is unset or empty."""
    return Path(os.environ.get(STATE_DIR_ENV) or DEFAULT_STATE_DIR)


def _is_memory(url: str) -> bool:
    return url.lower() in {"memory://", "memory:"}


def _unsupported(url: str) -> ValueError:
    return ValueError(f"unsupported store URL {redact_url(url)!r}: expected {_ACCEPTED}")


def redact_url(url: str) -> str:
    """`url` without its password, query and fragment."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
    except ValueError:
        scheme = _SCHEME.match(url)
        return f"{scheme.group(1)}:..." if scheme else "..."
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        netloc = f"{user}:***@{host}" if ":" in userinfo else f"{user}@{host}"
    prefix = f"{parts.scheme}:" if parts.scheme else ""
    authority = f"//{netloc}" if netloc or url[len(prefix) :].startswith("//") else ""
    suffix = "?..." if parts.query or parts.fragment else ""
    return f"{prefix}{authority}{parts.path}{suffix}"
