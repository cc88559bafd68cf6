"""Store URLs: which backend and file each names, and what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentskit_chat.storage import (
    MemoryStore,
    SqliteStore,
    Store,
    StoreUnavailableError,
    default_store_url,
    open_store,
    sqlite_path,
    state_dir_from_env,
)

from .conftest import run, session


def _opened(url: str) -> Store:
    async def body() -> Store:
        store = await open_store(url)
        await store.close()
        return store

    return run(body())


@pytest.mark.parametrize("url", ["memory://", "MEMORY://", "memory:"])
def test_memory_urls_open_a_memory_store(url: str) -> None:
    assert isinstance(_opened(url), MemoryStore)


def test_absolute_sqlite_url_opens_that_file(tmp_path: Path) -> None:
    path = tmp_path / "dir" / "sessions.db"
    store = _opened(f"sqlite://{path}")
    assert isinstance(store, SqliteStore)
    assert store.path == path
    assert path.is_file()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:relative/path.db", Path("relative/path.db")),
        ("sqlite:store.sqlite", Path("store.sqlite")),
        ("sqlite:///abs/path.db", Path("/abs/path.db")),
        ("SQLite:///abs/path.db", Path("/abs/path.db")),
        ("sqlite:/abs/path.db", Path("/abs/path.db")),
        ("sqlite:///with%20space/x.db", Path("/with space/x.db")),
        ("relative/path.db", Path("relative/path.db")),
        ("/abs/path.sqlite", Path("/abs/path.sqlite")),
        ("state.sqlite3", Path("state.sqlite3")),
        ("Upper.DB", Path("Upper.DB")),
    ],
)
def test_sqlite_paths(url: str, expected: Path) -> None:
    assert sqlite_path(url) == expected


def test_relative_sqlite_url_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = _opened("sqlite:var/sessions.db")
    assert isinstance(store, SqliteStore)
    assert (tmp_path / "var" / "sessions.db").is_file()


def test_plain_db_path_opens_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "plain.db"
    store = _opened(str(path))
    assert isinstance(store, SqliteStore)
    assert path.is_file()


@pytest.mark.parametrize(
    "url",
    [
        "",
        "mysql://db.example/chat",
        "ftp://files.example/x.db",
        "file:///tmp/x.db",
        "memory://named",
        "/var/lib/sessions",
        "sessions.txt",
        ".db",
        "sqlite:",
        "sqlite://",
        "sqlite:///",
        "sqlite://host/x.db",
        "sqlite:///x.db?mode=ro",
        "sqlite:///x.db#frag",
    ],
)
def test_unsupported_urls_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match="sqlite"):
        run(open_store(url))


def test_refusal_names_the_accepted_schemes() -> None:
    with pytest.raises(ValueError, match="mysql") as refusal:
        run(open_store("mysql://db.example/chat"))
    accepted_schemes = (
        "memory://",
        "sqlite:///",
        "sqlite:relative",
        ".db",
        ".sqlite",
        "postgresql://",
    )
    for accepted in accepted_schemes:
        assert accepted in str(refusal.value)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://alice:hunter2-secret@127.0.0.1:1/chat",
        "postgresql://alice:hunter2-secret@127.0.0.1:1/chat?sslmode=disable",
        "postgresql://127.0.0.1:1/chat?password=hunter2-secret",
        "postgresql://alice:hunter2-secret@127.0.0.1:1/chat?nonsense=1",
        "postgresql://alice:hunter2-secret@[/chat",
        "redis://:hunter2-secret@cache.example/0",
        "mysql://alice:p%40ss:hunter2-secret@db.example/chat",
        "sqlite://alice:hunter2-secret@host/x.db",
        "sqlite:///x.db?key=hunter2-secret",
    ],
)
def test_refusals_never_echo_a_password(url: str) -> None:
    with pytest.raises((ValueError, StoreUnavailableError), match=r"\w") as refusal:
        run(open_store(url))
    assert "hunter2" not in str(refusal.value)


def test_refusal_keeps_the_user_and_host() -> None:
    with pytest.raises(ValueError, match="mysql") as refusal:
        run(open_store("mysql://alice:hunter2@db.example:5432/chat"))
    assert "alice:***@db.example:5432/chat" in str(refusal.value)


@pytest.mark.parametrize("directory", ["/srv/chat state", "/odd/50%/dir", "/plain"])
def test_default_url_round_trips(directory: str) -> None:
    url = default_store_url(Path(directory))
    assert url.startswith("sqlite:///")
    assert sqlite_path(url) == Path(directory) / "sessions.db"


def test_default_url_of_a_relative_directory() -> None:
    url = default_store_url(Path("var"))
    assert url == "sqlite:var/sessions.db"
    assert sqlite_path(url) == Path("var/sessions.db")


def test_default_url_opens_a_working_store(tmp_path: Path) -> None:
    async def body() -> bool:
        store = await open_store(default_store_url(tmp_path / "state"))
        try:
            await store.create(session())
            return await store.load("s1") == session()
        finally:
            await store.close()

    assert run(body())
    assert (tmp_path / "state" / "sessions.db").is_file()


def test_state_dir_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTSKIT_CHAT_STATE_DIR", "/srv/agentskit")
    assert state_dir_from_env() == Path("/srv/agentskit")
    monkeypatch.setenv("AGENTSKIT_CHAT_STATE_DIR", "")
    assert state_dir_from_env() == Path("var")
    monkeypatch.delenv("AGENTSKIT_CHAT_STATE_DIR")
    assert state_dir_from_env() == Path("./var")
