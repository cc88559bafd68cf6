"""`agentskit-chat migrate`: bring the store's schema to this version, then exit.

PostgreSQL applies its missing versioned migrations under an advisory lock (replicas may
run it at the same time); SQLite migrates its file whenever it is opened, so this only
opens it; the memory store has no schema.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from agentskit_chat import storage
from agentskit_chat.storage import (
    StoreError,
    default_store_url,
    is_postgresql_url,
    open_store,
    redact_url,
    state_dir_from_env,
)

from ._store import add_store_arguments, store_password


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `migrate`."""
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="directory of the default SQLite store [$AGENTSKIT_CHAT_STATE_DIR or ./var]",
    )
    add_store_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Exit 0 when the schema is current, 1 when the store fails, 2 on bad flags."""
    try:
        password = store_password(args)
        url = args.store or default_store_url(args.state_dir or state_dir_from_env())
        return asyncio.run(_migrate(url, password))
    except ValueError as exc:
        print(f"agentskit-chat: {exc}", file=sys.stderr)
        return 2
    except StoreError as exc:
        print(f"agentskit-chat: {exc}", file=sys.stderr)
        return 1


async def _migrate(url: str, password: str | None) -> int:
    if not is_postgresql_url(url):
        store = await open_store(url)
        await store.close()
        print(f"store {redact_url(url)} is at the current schema version")
        return 0
    store = storage.PostgresqlStore(url, password=password)  # loads psycopg
    try:
        before, after = await store.migrate()
    finally:
        await store.close()
    if before == after:
        print(f"store {redact_url(url)} is at schema version {after}; nothing to do")
    else:
        print(f"store {redact_url(url)} migrated from schema version {before} to {after}")
    return 0
