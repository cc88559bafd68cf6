"""The decision log: what a route decided for one user message, keyed by its identity."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from ._statechart import StatechartInstance
from ._types import TurnKind

MIN_KEY_BYTES: Final = 16


@dataclass(frozen=True, slots=True)
class Decision:
    """A route's decision for one user message; the input is kept only as a keyed digest."""

    message_id: str
    input_digest: str
    """HMAC-SHA256 of the input under the deployment key, hex encoded."""
    route_id: str
    kind: TurnKind
    event: str
    from_state: str
    to_state: str
    response: str = field(repr=False, compare=False)
    """The response that was streamed; replayed on retry and regenerate."""
    derived: bool = False
    """True when the response is a pure function of the input (a template over a declarative
    matcher): replays re-render it, and session records never store it."""


class InputDigester:
    """Keyed digests of inputs, so decisions can recognise an input without storing it."""

    __slots__ = ("_base",)

    def __init__(self, key: bytes) -> None:
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(f"the digest key must be at least {MIN_KEY_BYTES} bytes")
        self._base = hmac.new(key, digestmod=hashlib.sha256)

    def digest(self, text: str) -> str:
        """Hex HMAC-SHA256 of `text`."""
        mac = self._base.copy()
        mac.update(text.encode("utf-8", "surrogatepass"))
        return mac.hexdigest()


HistoryKey = tuple[tuple[str, ...], int]
"""User message ids in order, and a fingerprint of their contents (process-local)."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The position and decisions that the user messages identified by `key` rebuild to."""

    key: HistoryKey
    instance: StatechartInstance
    decisions: Mapping[str, Decision]


@dataclass(frozen=True, slots=True)
class ConversationState:
    """A session's conversation progress: its chart instance and retained decisions.

    `checkpoints` only let the next dispatch skip a rebuild. Their content fingerprints use
    the process's string hashing, so they are never persisted or compared across processes.
    """

    instance: StatechartInstance
    decisions: Mapping[str, Decision] = field(default_factory=lambda: MappingProxyType({}))
    """Decisions by user message id, in history order."""
    checkpoints: tuple[Checkpoint, ...] = field(default=(), repr=False, compare=False)

    @property
    def state(self) -> str:
        """The current state name."""
        return self.instance.state
