"""The tool calls of one model answer, gathered from its chunks within the server's limits."""

from __future__ import annotations

from agentskit_chat.conversation import PendingCall, ToolCall
from agentskit_chat.models import ToolCallDeltaChunk, ToolCallStartChunk

from ._limits import Limits, utf8_size
from ._types import ToolDelta, ToolEnded, ToolStarted


class ToolCalls:
    """Calls in the order the model started them; their arguments as the deltas came."""

    def __init__(
        self,
        limits: Limits,
        approvals: frozenset[str] = frozenset(),
        served: frozenset[str] = frozenset(),
    ) -> None:
        self._limits = limits
        self._approvals = approvals
        """The tools whose calls wait for approval (the definition's `tools` policy)."""
        self._served = served
        """The server tools the service runs itself, within the turn."""
        self._names: dict[str, str] = {}
        self._arguments: dict[str, list[str]] = {}
        self._sizes: dict[str, int] = {}

    def add(self, chunk: ToolCallStartChunk | ToolCallDeltaChunk) -> ToolStarted | ToolDelta | None:
        """The event of `chunk`; None when it takes the answer past a limit (calls per
        answer, argument bytes per call) or continues a call that never started."""
        if isinstance(chunk, ToolCallStartChunk):
            if chunk.call_id in self._names or len(self._names) >= self._limits.max_tool_calls:
                return None
            self._names[chunk.call_id] = chunk.name
            self._arguments[chunk.call_id] = []
            self._sizes[chunk.call_id] = 0
            return ToolStarted(chunk.call_id, chunk.name, self._wait(chunk.name))
        parts = self._arguments.get(chunk.call_id)
        if parts is None:
            return None
        size = self._sizes[chunk.call_id] + utf8_size(chunk.arguments)
        if size > self._limits.max_tool_arguments_bytes:
            return None
        self._sizes[chunk.call_id] = size
        parts.append(chunk.arguments)
        return ToolDelta(chunk.call_id, chunk.arguments)

    def made(self) -> tuple[ToolCall, ...]:
        """Every call of the answer, complete."""
        return tuple(
            ToolCall(call_id, name, "".join(self._arguments[call_id]))
            for call_id, name in self._names.items()
        )

    def ended(self) -> tuple[ToolEnded, ...]:
        """The end event of every call, in order, once the answer is complete."""
        return tuple(ToolEnded(c.id, c.arguments, self._wait(c.name)) for c in self.made())

    def pending(self) -> tuple[PendingCall, ...]:
        """The calls the answer waits on: every call the service does not run, for the
        client to run, or first for a person to approve when the definition marks its
        tool so."""
        return tuple(
            PendingCall(call_id, name, wait)
            for call_id, name in self._names.items()
            if (wait := self._wait(name)) != SERVER
        )

    def served(self) -> tuple[ToolCall, ...]:
        """The calls the service runs in the turn (server tools needing no approval)."""
        return tuple(c for c in self.made() if self._wait(c.name) == SERVER)

    def _wait(self, name: str) -> str:
        if name in self._approvals:
            return "approval"
        return SERVER if name in self._served else "result"


SERVER = "server"
"""The wait of a server tool's call: the service runs it within the turn."""
