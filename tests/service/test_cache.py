"""The session cache stays within its entry count and its byte budget."""

from __future__ import annotations

from agentskit_chat.conversation import Message, RecordEncoder, Role, SessionRecord, define_chat
from agentskit_chat.service._cache import Entry, SessionCache
from agentskit_chat.service._records import Loaded
from agentskit_chat.storage import HistoryMode

CHAT = define_chat(id="tiny", conversation={"initial": "a", "states": {"a": {}}})


def entry(session_id: str, data: bytes = b"x" * 100) -> Entry:
    loaded = Loaded(CHAT, SessionRecord.new(CHAT, session_id), HistoryMode.SERVER, "i1")
    return Entry(data, loaded, RecordEncoder())


def history(size: int) -> tuple[Message, ...]:
    return (Message("u1", Role.USER, "y" * size),)


def test_the_least_recently_used_entry_goes_first_beyond_the_count() -> None:
    cache = SessionCache(max_entries=2)
    cache.put(entry("s1"))
    cache.put(entry("s2"))
    assert cache.get("s1") is not None  # s2 is now the least recently used
    cache.put(entry("s3"))
    assert cache.get("s2") is None
    assert cache.get("s1") is not None
    assert cache.get("s3") is not None
    assert len(cache) == 2


def test_histories_count_against_the_byte_budget() -> None:
    cache = SessionCache(max_bytes=1_000)
    first, second = entry("s1"), entry("s2")
    cache.put(first)
    cache.put(second)
    assert cache.bytes == 200
    cache.attach(first, history(500))
    assert cache.bytes == 700
    cache.attach(second, history(500))  # 1,200 bytes: the least recently used goes
    assert cache.get("s1") is None
    assert cache.bytes == 600
    cache.put(entry("s2"))  # a newer version replaces the old one and its history
    assert cache.bytes == 100
    cache.pop("s2")
    assert cache.bytes == 0
    assert len(cache) == 0


def test_a_history_for_an_entry_no_longer_held_is_dropped() -> None:
    cache = SessionCache()
    stale = entry("s1")
    cache.put(stale)
    cache.put(entry("s1"))
    cache.attach(stale, history(10))
    assert stale.messages is None
    assert cache.bytes == 100
