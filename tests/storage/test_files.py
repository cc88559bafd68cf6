"""What the SQLite store creates on disk is owner-only whatever the umask; what it finds
open to others it leaves as it is, with one warning."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agentskit_chat.storage import open_sqlite_store, private_dir
from agentskit_chat.storage._files import _WARNED, create_private_file, exposure


@contextmanager
def umask(mask: int) -> Iterator[None]:
    before = os.umask(mask)
    try:
        yield
    finally:
        os.umask(before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def open_and_close(path: Path) -> None:
    async def scenario() -> None:
        store = await open_sqlite_store(path)
        await store.close()

    asyncio.run(scenario())


@pytest.fixture(autouse=True)
def fresh_warnings() -> Iterator[None]:
    _WARNED.clear()
    yield
    _WARNED.clear()


def test_a_store_under_umask_000_creates_every_missing_directory_0700_and_files_0600(
    tmp_path: Path,
) -> None:
    database = tmp_path / "a" / "b" / "state" / "sessions.db"
    existing = mode(tmp_path)
    with umask(0):
        open_and_close(database)
    for directory in (tmp_path / "a", tmp_path / "a" / "b", database.parent):
        assert mode(directory) == 0o700, directory
    assert mode(database) == 0o600
    for name in ("sessions.db-wal", "sessions.db-shm"):
        if (database.parent / name).exists():
            assert mode(database.parent / name) == 0o600, name
    assert mode(tmp_path) == existing  # the existing parent is left as it was


def test_a_umask_that_takes_owner_bits_away_does_not_change_the_modes(tmp_path: Path) -> None:
    with umask(0o377):
        created = private_dir(tmp_path / "x" / "y")
        assert create_private_file(tmp_path / "x" / "y" / "key", b"secret\n")
    assert created == [tmp_path / "x", tmp_path / "x" / "y"]
    assert mode(tmp_path / "x") == 0o700
    assert mode(tmp_path / "x" / "y") == 0o700
    assert mode(tmp_path / "x" / "y" / "key") == 0o600
    assert (tmp_path / "x" / "y" / "key").read_bytes() == b"secret\n"
    assert not create_private_file(tmp_path / "x" / "y" / "key", b"other\n")
    assert (tmp_path / "x" / "y" / "key").read_bytes() == b"secret\n"


def test_an_existing_open_directory_is_kept_and_named_in_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o755)
    with caplog.at_level(logging.WARNING, logger="agentskit_chat.storage"):
        open_and_close(state / "sessions.db")
        open_and_close(state / "sessions.db")
    assert mode(state) == 0o755
    assert mode(state / "sessions.db") == 0o600
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert str(state) in warnings[0]
    assert "others (mode 0755)" in warnings[0]
    assert len(warnings[0]) <= 300


def test_an_open_database_file_is_named_in_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    database = tmp_path / "sessions.db"
    open_and_close(database)
    database.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="agentskit_chat.storage"):
        open_and_close(database)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"the sqlite store's file {database} is open to others (mode 0644): make it 0600,"
        " or group-only for a group of the server's"
    ]
    assert mode(database) == 0o644


@pytest.mark.parametrize("directory_mode", [0o700, 0o750, 0o770, 0o2770])
def test_group_access_for_the_servers_own_group_is_not_flagged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, directory_mode: int
) -> None:
    """The image's state directory (0750) and a Kubernetes fsGroup volume (2770 style)."""
    state = tmp_path / "state"
    state.mkdir()
    os.chown(state, -1, os.getegid())
    state.chmod(directory_mode)
    with caplog.at_level(logging.WARNING, logger="agentskit_chat.storage"):
        open_and_close(state / "sessions.db")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert mode(state) == directory_mode


def test_world_access_is_flagged_even_on_a_group_volume(tmp_path: Path) -> None:
    """A Kubernetes emptyDir with fsGroup is 2777: others can write there."""
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o2777)
    assert exposure(state) == "others (mode 2777)"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another group needs root")
def test_group_access_for_another_group_is_flagged(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("00" * 32)
    other = max([os.getegid(), *os.getgroups()]) + 4242
    os.chown(key, -1, other)
    key.chmod(0o640)
    assert exposure(key) == f"group {other} (mode 0640)"
    key.chmod(0o600)
    assert exposure(key) is None
