"""An in-process chat session: one definition mount with isolated, committed progress."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ._decisions import ConversationState, InputDigester
from ._definition import ChatDefinition
from ._engine import DEFAULT_CALLBACK_TIMEOUT, initial_state, resolve, run_sync
from ._observers import TraceFanout, TraceObserver
from ._outcomes import FailureOutcome, Outcome
from ._responses import RouteTools
from ._types import ConversationSnapshot, Message


class ChatSession:
    """Holds one session's progress and commits every successful dispatch.

    Dispatch is not reentrant: a host that runs turns concurrently serializes them per
    session (the service does so with a lease).
    """

    def __init__(
        self,
        definition: ChatDefinition,
        *,
        session_id: str,
        digest_key: bytes,
        on_trace: Iterable[TraceObserver] | TraceFanout = (),
        callback_timeout: float = DEFAULT_CALLBACK_TIMEOUT,
        state: ConversationState | None = None,
        tools: RouteTools | None = None,
    ) -> None:
        """`tools` runs the server tools that tool routes name (see `resolve`)."""
        if not session_id:
            raise ValueError("session_id must not be empty")
        self.definition = definition
        self.session_id = session_id
        self._digester = InputDigester(digest_key)
        self._fanout = on_trace if isinstance(on_trace, TraceFanout) else TraceFanout(on_trace)
        self._callback_timeout = callback_timeout
        self._tools = tools
        self._state = state if state is not None else initial_state(definition, session_id)
        if self._state.instance.id != session_id:
            raise ValueError("the state belongs to another session")
        if not definition.compiled.chart.has_state(self._state.state):
            raise ValueError("the state is not a state of this definition")

    @property
    def state(self) -> ConversationState:
        """The committed conversation state."""
        return self._state

    @property
    def traces(self) -> TraceFanout:
        """The fanout that delivers this session's trace records."""
        return self._fanout

    def snapshot(self) -> ConversationSnapshot:
        """Current state with its allowed events and actions."""
        return self.definition.snapshot(self._state.state)

    async def dispatch(self, messages: Sequence[Message], *, at: float | None = None) -> Outcome:
        """Resolve the last user message of `messages`; commits unless the outcome failed."""
        outcome = await resolve(
            self.definition,
            self._state,
            messages,
            digester=self._digester,
            callback_timeout=self._callback_timeout,
            at=at,
            tools=self._tools,
        )
        return self._commit(outcome)

    def dispatch_sync(self, messages: Sequence[Message], *, at: float | None = None) -> Outcome:
        """`dispatch` without an event loop; raises AsyncCallbackError on an async callback."""
        outcome = run_sync(
            resolve(
                self.definition,
                self._state,
                messages,
                digester=self._digester,
                callback_timeout=self._callback_timeout,
                allow_async=False,
                at=at,
            )
        )
        return self._commit(outcome)

    def _commit(self, outcome: Outcome) -> Outcome:
        if not isinstance(outcome, FailureOutcome):
            self._state = outcome.state
        self._fanout.publish(outcome.trace)
        return outcome


def create_chat_session(
    definition: ChatDefinition,
    *,
    session_id: str,
    digest_key: bytes,
    on_trace: Iterable[TraceObserver] | TraceFanout = (),
    callback_timeout: float = DEFAULT_CALLBACK_TIMEOUT,
    tools: RouteTools | None = None,
) -> ChatSession:
    """A fresh session of `definition` at its initial state."""
    return ChatSession(
        definition,
        session_id=session_id,
        digest_key=digest_key,
        on_trace=on_trace,
        callback_timeout=callback_timeout,
        tools=tools,
    )
