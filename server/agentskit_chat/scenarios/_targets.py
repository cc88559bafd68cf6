"""Where conversation tests run: the application service in-process, or a live server.

Both answer the same few questions in the same terms (Observation), so a test file means
the same thing against either. In-process, agentic turns are answered by a ScriptedModel
(no model is called); against a live server, by whatever model the server configured.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import replace
from typing import Protocol

from agentskit_chat.conversation import ChatDefinition, ConversationSnapshot
from agentskit_chat.service import (
    Catalog,
    ChatService,
    Completed,
    Decided,
    Edit,
    Failed,
    Operation,
    Regenerate,
    Retry,
    ServiceError,
    Submit,
    TurnRequest,
)
from agentskit_chat.storage import HistoryMode, MemoryStore
from agentskit_chat_client import (
    ChatClient,
    ChatError,
    Snapshot,
    TLSConfig,
    TurnDecision,
    TurnOperation,
)
from agentskit_chat_client import Edit as ClientEdit
from agentskit_chat_client import Regenerate as ClientRegenerate
from agentskit_chat_client import Retry as ClientRetry
from agentskit_chat_client import Submit as ClientSubmit

from ._observe import Observation
from ._scripted import ScriptedModel
from ._spec import Step

_PREFIX = "ERROR_REASON_"


class Target(Protocol):
    """A place to run cases: sessions, turns, truncation and the history's message ids."""

    canned_replies: bool
    """Whether a step's canned `model` reply is what the model answers."""

    async def start_session(self, definition_id: str) -> tuple[str, str | None]:
        """A new session: its id and None, or "" and the reason it was refused."""
        ...

    async def turn(self, session_id: str, step: Step, message_id: str | None) -> Observation:
        """Run the step's operation (not `truncate`) on `message_id`."""
        ...

    async def truncate(self, session_id: str, last_kept: str | None) -> Observation:
        """Drop every message after `last_kept` (all when None)."""
        ...

    async def history(self, session_id: str) -> list[tuple[str, str]]:
        """The retained messages' (id, role), oldest first."""
        ...

    async def end_session(self, session_id: str) -> None:
        """Delete the session."""
        ...

    async def close(self) -> None:
        """Release everything."""
        ...


def _short(reason: str) -> str:
    return reason.removeprefix(_PREFIX)


def _from_snapshot(snapshot: ConversationSnapshot | Snapshot) -> Observation:
    events = (
        snapshot.events if isinstance(snapshot, ConversationSnapshot) else snapshot.allowed_events
    )
    return Observation(state=snapshot.state, actions=tuple(snapshot.actions), events=tuple(events))


def _decided(observed: Observation, decided: Decided | TurnDecision | None) -> Observation:
    if decided is None:
        return observed
    return replace(
        observed,
        kind=str(decided.kind),
        route=decided.route_id,
        from_state=decided.from_state,
        replayed=decided.replayed,
    )


class InProcessTarget:
    """The application service with a memory store and a ScriptedModel for every adapter."""

    canned_replies = True

    def __init__(
        self, definitions: Sequence[ChatDefinition], *, revision: int | None = None
    ) -> None:
        """`revision`, when given, is the revision every session is created on (refused
        with `REVISION_MISMATCH` where the definition does not serve it); else new
        sessions get the revision the rollout gives them."""
        self.revision = revision
        self.model = ScriptedModel()
        self.service = ChatService(
            Catalog(definitions),
            MemoryStore(),
            digest_key=secrets.token_bytes(32),
            adapters=self.model.registry(),
        )

    async def start_session(self, definition_id: str) -> tuple[str, str | None]:
        try:
            view = await self.service.create_session(
                definition_id, None, HistoryMode.SERVER, self.revision
            )
        except ServiceError as exc:
            return "", _short(exc.reason)
        return view.session_id, None

    async def turn(self, session_id: str, step: Step, message_id: str | None) -> Observation:
        if step.model is not None:
            self.model.queue(session_id, step.model)
        request = TurnRequest(session_id, uuid.uuid4().hex, _operation(step, message_id))
        decided: Decided | None = None
        try:
            async with aclosing(self.service.run_turn(request)) as events:
                async for event in events:
                    if isinstance(event, Decided):
                        decided = event
                    elif isinstance(event, Completed):
                        observed = replace(_from_snapshot(event.snapshot), text=event.content)
                        return _decided(observed, decided)
                    elif isinstance(event, Failed):
                        after = await self._snapshot(session_id)
                        return _decided(replace(after, failed=event.code), decided)
        except ServiceError as exc:
            return Observation(error=_short(exc.reason))
        finally:
            self.model.discard(session_id)
        return Observation(failed="no_outcome")

    async def truncate(self, session_id: str, last_kept: str | None) -> Observation:
        try:
            truncated = await self.service.truncate_history(session_id, last_kept)
        except ServiceError as exc:
            return Observation(error=_short(exc.reason))
        return _from_snapshot(truncated.session.snapshot)

    async def history(self, session_id: str) -> list[tuple[str, str]]:
        history = await self.service.get_session(session_id)
        return [(m.id, str(m.role)) for m in history.messages]

    async def end_session(self, session_id: str) -> None:
        await self.service.delete_session(session_id)

    async def close(self) -> None:
        await self.service.close()

    async def _snapshot(self, session_id: str) -> Observation:
        history = await self.service.get_session(session_id)
        return _from_snapshot(history.session.snapshot)


def _operation(step: Step, message_id: str | None) -> Operation:
    if step.operation == "submit":
        return Submit(step.text or "")
    if step.operation == "retry":
        return Retry(message_id)
    if step.operation == "edit":
        return Edit(message_id or "", step.text or "")
    return Regenerate(message_id)


class RemoteTarget:
    """A live server, through the Python client."""

    canned_replies = False

    def __init__(
        self,
        target: str,
        *,
        timeout: float = 30.0,
        tls: bool | TLSConfig = False,
        token: str | None = None,
    ) -> None:
        self.client = ChatClient(target, timeout=timeout, tls=tls, token=token)

    async def start_session(self, definition_id: str) -> tuple[str, str | None]:
        try:
            session = await self.client.create_session(definition_id)
        except ChatError as exc:
            return "", _refusal(exc)
        return session.session_id, None

    async def turn(self, session_id: str, step: Step, message_id: str | None) -> Observation:
        try:
            result = await self.client.run_turn(session_id, _client_operation(step, message_id))
        except ChatError as exc:
            return Observation(error=_refusal(exc))
        if result.completed is not None:
            observed = replace(
                _from_snapshot(result.completed.snapshot), text=result.completed.content
            )
        else:
            session = await self.client.get_session(session_id)
            failed = result.failed.code if result.failed else "no_outcome"
            observed = replace(_from_snapshot(session.session.snapshot), failed=failed)
        return _decided(observed, result.decision)

    async def truncate(self, session_id: str, last_kept: str | None) -> Observation:
        try:
            history = await self.client.truncate_history(session_id, last_kept)
        except ChatError as exc:
            return Observation(error=_refusal(exc))
        return _from_snapshot(history.session.snapshot)

    async def history(self, session_id: str) -> list[tuple[str, str]]:
        session = await self.client.get_session(session_id)
        return [(m.id, m.role) for m in session.messages]

    async def end_session(self, session_id: str) -> None:
        await self.client.delete_session(session_id)

    async def close(self) -> None:
        await self.client.close()


def _refusal(error: ChatError) -> str:
    return _short(error.reason) if error.reason else error.code.name


def _client_operation(step: Step, message_id: str | None) -> TurnOperation:
    if step.operation == "submit":
        return ClientSubmit(step.text or "")
    if step.operation == "retry":
        return ClientRetry(message_id)
    if step.operation == "edit":
        return ClientEdit(message_id or "", step.text or "")
    return ClientRegenerate(message_id)
