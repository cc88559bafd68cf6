"""What this process last saw of each session, bounded by count and by bytes."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from agentskit_chat.conversation import Message, RecordEncoder
from agentskit_chat.storage import DEFAULT_TENANT

if TYPE_CHECKING:
    from ._loaded import Loaded

DEFAULT_ENTRIES: Final = 4096
DEFAULT_BYTES: Final = 64 * 1024 * 1024


@dataclass
class Entry:
    """A session as of the stored bytes `data`, with its encoder and, when known, history."""

    data: bytes = field(repr=False)
    loaded: Loaded
    encoder: RecordEncoder
    messages: tuple[Message, ...] | None = field(default=None, repr=False)
    """The server-held history matching `data`, when known."""
    size: int = 0
    """Bytes this entry is counted for: the record plus the history's text."""


class SessionCache:
    """Least recently used first out, once more than `max_entries` or `max_bytes` are held."""

    def __init__(self, max_entries: int = DEFAULT_ENTRIES, max_bytes: int = DEFAULT_BYTES) -> None:
        self._entries: OrderedDict[tuple[str, str], Entry] = OrderedDict()
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        """Bytes held by all entries."""
        return self._bytes

    def get(self, session_id: str, tenant: str = DEFAULT_TENANT) -> Entry | None:
        """The entry of the tenant's `session_id`, now the most recently used; None when
        not held."""
        key = (tenant, session_id)
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def put(self, entry: Entry) -> None:
        """Hold `entry` in place of any earlier one of its session."""
        key = _key(entry)
        self.pop(key[1], key[0])
        entry.size = _size(entry)
        self._entries[key] = entry
        self._bytes += entry.size
        self._trim()

    def attach(self, entry: Entry, messages: tuple[Message, ...]) -> None:
        """Give a held `entry` its history."""
        if self._entries.get(_key(entry)) is not entry:
            return
        self._bytes -= entry.size
        entry.messages = messages
        entry.size = _size(entry)
        self._bytes += entry.size
        self._trim()

    def pop(self, session_id: str, tenant: str = DEFAULT_TENANT) -> None:
        """Forget the tenant's `session_id`."""
        entry = self._entries.pop((tenant, session_id), None)
        if entry is not None:
            self._bytes -= entry.size

    def _trim(self) -> None:
        while self._entries and (
            len(self._entries) > self._max_entries or self._bytes > self._max_bytes
        ):
            _, oldest = self._entries.popitem(last=False)
            self._bytes -= oldest.size


def _key(entry: Entry) -> tuple[str, str]:
    return entry.loaded.tenant, entry.loaded.record.session_id


def _size(entry: Entry) -> int:
    text = 0 if entry.messages is None else sum(len(m.content) for m in entry.messages)
    return len(entry.data) + text
