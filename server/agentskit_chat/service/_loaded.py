"""A session record as this process verified it: what the records, the session cache and
the turns share about one loaded session."""

from __future__ import annotations

from dataclasses import dataclass

from agentskit_chat.conversation import ChatDefinition, SessionRecord
from agentskit_chat.storage import DEFAULT_TENANT, HistoryMode


@dataclass(frozen=True, slots=True)
class Loaded:
    """A verified session record with its definition and storage metadata."""

    definition: ChatDefinition
    record: SessionRecord
    history_mode: HistoryMode
    incarnation: str
    """Tells this session apart from an earlier one with the same id."""
    tenant: str = DEFAULT_TENANT
    """The namespace the session is stored under."""

    @property
    def cursor(self) -> int:
        """The stored cursor this record was read at."""
        return self.record.cursor
