"""ChatClient against a real in-process gRPC server hosting a scripted fake service."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterable
from contextlib import aclosing
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import grpc.aio
import pytest

from agentskit.chat.v1 import chat_pb2
from agentskit_chat_client import (
    ChatClient,
    ChatError,
    Dispatch,
    Edit,
    HistoryMode,
    Message,
    MigrationBlocked,
    Regenerate,
    Retry,
    RouteInfo,
    ServedRevision,
    Snapshot,
    StateInfo,
    Submit,
    TextDelta,
    Transition,
    TurnCompleted,
    TurnDecision,
    TurnEvent,
    TurnFailed,
    TurnStarted,
    Usage,
)
from tests.client.fake_service import EPOCH, Abort, FakeChatService, event, serving

SAFETY_TIMEOUT = 10.0


async def drain(stream: AsyncIterable[TurnEvent], into: list[TurnEvent] | None = None) -> None:
    """Consume ``stream``, appending every event to ``into``."""
    async for item in stream:
        if into is not None:
            into.append(item)


def _session_pb(**overrides: Any) -> chat_pb2.Session:
    fields: dict[str, Any] = {
        "session_id": "s1",
        "definition_id": "support",
        "definition_revision": 3,
        "history_mode": chat_pb2.HISTORY_MODE_SERVER,
        "snapshot": chat_pb2.Snapshot(
            state="idle", allowed_events=["start", "help"], actions=["start"]
        ),
        "cursor": 7,
    }
    fields.update(overrides)
    return chat_pb2.Session(**fields)


def _definition_pb() -> chat_pb2.Definition:
    return chat_pb2.Definition(
        id="support",
        revision=3,
        description="Support chat",
        initial_state="idle",
        states=[
            chat_pb2.StateInfo(
                name="idle",
                transitions=[chat_pb2.Transition(event="start", target="collecting")],
                actions=["start"],
            ),
            chat_pb2.StateInfo(name="collecting"),
        ],
        routes=[
            chat_pb2.RouteInfo(
                id="start",
                event="start",
                kind=chat_pb2.TURN_KIND_DETERMINISTIC,
                matcher="command",
            ),
            chat_pb2.RouteInfo(
                id="oops",
                event="repair",
                states=["collecting"],
                kind=chat_pb2.TURN_KIND_REPAIRED,
                matcher="pattern",
            ),
        ],
        model_adapter="echo",
    )


def _turn_events(turn_id: str = "t1") -> list[chat_pb2.StreamTurnResponse]:
    return [
        event(
            1,
            turn_id,
            started=chat_pb2.TurnStarted(operation=chat_pb2.OPERATION_SUBMIT, user_message_id="m1"),
        ),
        event(
            2,
            turn_id,
            decision=chat_pb2.TurnDecision(
                kind=chat_pb2.TURN_KIND_AGENTIC, from_state="idle", to_state="idle"
            ),
        ),
        event(3, turn_id, delta=chat_pb2.TextDelta(text="Hel")),
        event(4, turn_id, delta=chat_pb2.TextDelta(text="lo.")),
        event(
            5,
            turn_id,
            completed=chat_pb2.TurnCompleted(
                assistant_message_id="a1",
                content="Hello.",
                snapshot=chat_pb2.Snapshot(state="idle", allowed_events=["start"]),
                cursor=9,
                usage=chat_pb2.Usage(input_tokens=12, output_tokens=3),
            ),
        ),
    ]


BUSY = Abort(
    grpc.StatusCode.ABORTED,
    "Another turn holds the session.",
    reason="ERROR_REASON_SESSION_BUSY",
    metadata={"retry_after_ms": "250"},
)


# Unary methods -------------------------------------------------------------------------


def test_list_definitions_converts_states_and_routes(service, run):
    service.replies["ListDefinitions"] = chat_pb2.ListDefinitionsResponse(
        definitions=[_definition_pb(), chat_pb2.Definition(id="zeta", revision=1)]
    )

    definitions = run(lambda client: client.list_definitions())

    assert [definition.id for definition in definitions] == ["support", "zeta"]
    support = definitions[0]
    assert support.revision == 3
    assert support.description == "Support chat"
    assert support.initial_state == "idle"
    assert support.model_adapter == "echo"
    assert support.states == (
        StateInfo("idle", (Transition("start", "collecting"),), ("start",)),
        StateInfo("collecting", (), ()),
    )
    assert support.routes == (
        RouteInfo("start", "start", (), "deterministic", "command"),
        RouteInfo("oops", "repair", ("collecting",), "repaired", "pattern"),
    )
    assert service.requests == [chat_pb2.ListDefinitionsRequest()]


def test_get_definition_sends_the_id(service, run):
    service.replies["GetDefinition"] = chat_pb2.GetDefinitionResponse(definition=_definition_pb())

    definition = run(lambda client: client.get_definition("support"))

    assert definition.id == "support"
    assert definition.routes[0].kind == "deterministic"
    assert service.requests == [chat_pb2.GetDefinitionRequest(definition_id="support")]


def test_definitions_list_their_served_revisions(service, run):
    described = _definition_pb()
    described.served_revisions.add(revision=2, weight=0)
    described.served_revisions.add(revision=3, weight=100, migrates_from=[1, 2])
    service.replies["GetDefinition"] = chat_pb2.GetDefinitionResponse(definition=described)

    definition = run(lambda client: client.get_definition("support"))

    assert definition.served_revisions == (
        ServedRevision(revision=2, weight=0),
        ServedRevision(revision=3, weight=100, migrates_from=(1, 2)),
    )


def test_get_definition_asks_for_a_revision(service, run):
    service.replies["GetDefinition"] = chat_pb2.GetDefinitionResponse(definition=_definition_pb())

    run(lambda client: client.get_definition("support", revision=0))
    run(lambda client: client.get_definition("support", revision=2))

    first, second = service.requests
    assert first.HasField("revision")
    assert first.revision == 0
    assert second == chat_pb2.GetDefinitionRequest(definition_id="support", revision=2)


def test_get_definition_without_a_revision_leaves_it_unset(service, run):
    service.replies["GetDefinition"] = chat_pb2.GetDefinitionResponse(definition=_definition_pb())

    run(lambda client: client.get_definition("support"))

    assert not service.requests[0].HasField("revision")


def test_create_session_pins_a_revision(service, run):
    service.replies["CreateSession"] = chat_pb2.CreateSessionResponse(
        session=_session_pb(definition_revision=1)
    )

    session = run(lambda client: client.create_session("support", revision=1))

    assert session.definition_revision == 1
    assert service.requests == [
        chat_pb2.CreateSessionRequest(
            definition_id="support",
            history_mode=chat_pb2.HISTORY_MODE_SERVER,
            definition_revision=1,
        )
    ]
    assert service.requests[0].HasField("definition_revision")


def test_an_unserved_revision_raises_revision_mismatch(service, run):
    service.aborts["CreateSession"] = Abort(
        grpc.StatusCode.FAILED_PRECONDITION,
        "The definition revision is not served.",
        reason="ERROR_REASON_REVISION_MISMATCH",
        metadata={"definition_revision": "9"},
    )

    with pytest.raises(ChatError) as raised:
        run(lambda client: client.create_session("support", revision=9))

    assert raised.value.code is grpc.StatusCode.FAILED_PRECONDITION
    assert raised.value.reason == "ERROR_REASON_REVISION_MISMATCH"
    assert raised.value.metadata == {"definition_revision": "9"}


def test_a_session_says_why_it_stayed_on_its_revision(service, run):
    service.replies["GetSession"] = chat_pb2.GetSessionResponse(
        session=_session_pb(
            definition_revision=1,
            migration_blocked=chat_pb2.MigrationBlocked(revision=2, code="replay"),
        )
    )

    history = run(lambda client: client.get_session("s1"))

    assert history.session.migration_blocked == MigrationBlocked(revision=2, code="replay")


def test_create_session_defaults_to_server_history_and_a_server_chosen_id(service, run):
    service.replies["CreateSession"] = chat_pb2.CreateSessionResponse(session=_session_pb())

    session = run(lambda client: client.create_session("support"))

    assert session.session_id == "s1"
    assert session.definition_id == "support"
    assert session.definition_revision == 3
    assert session.history_mode is HistoryMode.SERVER
    assert session.snapshot == Snapshot("idle", ("start", "help"), ("start",))
    assert session.cursor == 7
    assert session.migration_blocked is None
    assert not service.requests[0].HasField("definition_revision")
    assert service.requests == [
        chat_pb2.CreateSessionRequest(
            definition_id="support", history_mode=chat_pb2.HISTORY_MODE_SERVER
        )
    ]


def test_create_session_passes_session_id_and_client_history(service, run):
    service.replies["CreateSession"] = chat_pb2.CreateSessionResponse(
        session=_session_pb(session_id="mine", history_mode=chat_pb2.HISTORY_MODE_CLIENT)
    )

    session = run(
        lambda client: client.create_session(
            "support", session_id="mine", history_mode=HistoryMode.CLIENT
        )
    )

    assert session.session_id == "mine"
    assert session.history_mode is HistoryMode.CLIENT
    assert service.requests == [
        chat_pb2.CreateSessionRequest(
            definition_id="support",
            session_id="mine",
            history_mode=chat_pb2.HISTORY_MODE_CLIENT,
        )
    ]


def test_get_session_returns_the_session_and_its_messages(service, run):
    service.replies["GetSession"] = chat_pb2.GetSessionResponse(
        session=_session_pb(),
        messages=[
            chat_pb2.Message(id="m1", role=chat_pb2.ROLE_USER, content="/start"),
            chat_pb2.Message(id="a1", role=chat_pb2.ROLE_ASSISTANT, content="Name?"),
        ],
    )

    history = run(lambda client: client.get_session("s1"))

    assert history.session.session_id == "s1"
    assert history.messages == (
        Message("m1", "user", "/start"),
        Message("a1", "assistant", "Name?"),
    )
    assert service.requests == [chat_pb2.GetSessionRequest(session_id="s1")]


def test_delete_session_sends_the_id(service, run):
    result = run(lambda client: client.delete_session("s1"))

    assert result is None
    assert service.requests == [chat_pb2.DeleteSessionRequest(session_id="s1")]


def test_truncate_history_sends_the_kept_message_and_returns_the_rest(service, run):
    service.replies["TruncateHistory"] = chat_pb2.TruncateHistoryResponse(
        session=_session_pb(cursor=8),
        messages=[chat_pb2.Message(id="m1", role=chat_pb2.ROLE_USER, content="/start")],
    )

    async def scenario(client: ChatClient):
        kept = await client.truncate_history("s1", "m1")
        await client.truncate_history("s1")
        return kept

    history = run(scenario)

    assert history.session.cursor == 8
    assert history.messages == (Message("m1", "user", "/start"),)
    assert service.requests == [
        chat_pb2.TruncateHistoryRequest(session_id="s1", last_kept_message_id="m1"),
        chat_pb2.TruncateHistoryRequest(session_id="s1"),
    ]


# Turn streams --------------------------------------------------------------------------


def test_stream_turn_decodes_every_event_in_order(service, run):
    service.events = _turn_events()

    async def scenario(client: ChatClient):
        return [item async for item in client.stream_turn("s1", Submit("hi"), turn_id="t1")]

    events = run(scenario)

    assert [type(item) for item in events] == [
        TurnStarted,
        TurnDecision,
        TextDelta,
        TextDelta,
        TurnCompleted,
    ]
    assert [item.sequence for item in events] == [1, 2, 3, 4, 5]
    assert [item.time for item in events] == [
        EPOCH + timedelta(milliseconds=n) for n in range(1, 6)
    ]
    assert all(item.time.tzinfo is UTC for item in events)
    assert all((item.session_id, item.turn_id) == ("s1", "t1") for item in events)
    started, decision, first, second, completed = events
    assert started == TurnStarted(
        session_id="s1",
        turn_id="t1",
        sequence=1,
        time=EPOCH + timedelta(milliseconds=1),
        operation="submit",
        user_message_id="m1",
        duplicate=False,
    )
    assert isinstance(decision, TurnDecision)
    assert (decision.kind, decision.route_id, decision.from_state, decision.to_state) == (
        "agentic",
        None,
        "idle",
        "idle",
    )
    assert not decision.replayed
    assert isinstance(first, TextDelta)
    assert isinstance(second, TextDelta)
    assert first.text + second.text == "Hello."
    assert isinstance(completed, TurnCompleted)
    assert completed.assistant_message_id == "a1"
    assert completed.content == "Hello."
    assert completed.snapshot == Snapshot("idle", ("start",), ())
    assert completed.cursor == 9
    assert completed.usage == Usage(input_tokens=12, output_tokens=3)


def test_deterministic_completion_has_no_usage_and_names_the_route(service, run):
    service.events = [
        event(
            1,
            started=chat_pb2.TurnStarted(
                operation=chat_pb2.OPERATION_RETRY, user_message_id="m1", duplicate=True
            ),
        ),
        event(
            2,
            decision=chat_pb2.TurnDecision(
                kind=chat_pb2.TURN_KIND_DETERMINISTIC,
                route_id="start",
                from_state="idle",
                to_state="collecting",
                replayed=True,
            ),
        ),
        event(
            3,
            completed=chat_pb2.TurnCompleted(
                assistant_message_id="a1",
                content="Name?",
                snapshot=chat_pb2.Snapshot(state="collecting"),
                cursor=4,
            ),
        ),
    ]

    result = run(lambda client: client.run_turn("s1", Retry(), turn_id="t1"))

    assert result.started is not None
    assert result.started.operation == "retry"
    assert result.started.duplicate
    assert result.decision is not None
    assert result.decision.kind == "deterministic"
    assert result.decision.route_id == "start"
    assert result.decision.to_state == "collecting"
    assert result.decision.replayed
    assert result.completed is not None
    assert result.completed.usage is None
    assert result.text == ""


def test_run_turn_collects_the_stream(service, run):
    service.events = _turn_events("t9")

    result = run(lambda client: client.run_turn("s1", Submit("hi"), turn_id="t9"))

    assert result.turn_id == "t9"
    assert result.ok
    assert result.started is not None
    assert result.started.user_message_id == "m1"
    assert result.decision is not None
    assert result.decision.kind == "agentic"
    assert result.text == "Hello."
    assert result.completed is not None
    assert result.completed.content == "Hello."
    assert result.failed is None
    assert [item.sequence for item in result.events] == [1, 2, 3, 4, 5]


def test_run_turn_reports_a_failed_turn_without_raising(service, run):
    service.events = [
        event(1, started=chat_pb2.TurnStarted(operation=chat_pb2.OPERATION_SUBMIT)),
        event(2, decision=chat_pb2.TurnDecision(kind=chat_pb2.TURN_KIND_AGENTIC)),
        event(3, delta=chat_pb2.TextDelta(text="partial")),
        event(
            4,
            failed=chat_pb2.TurnFailed(
                code="model_failed", message="The model failed.", retryable=True
            ),
        ),
    ]

    result = run(lambda client: client.run_turn("s1", Submit("hi")))

    assert not result.ok
    assert result.completed is None
    assert result.started is not None
    assert result.started.user_message_id is None
    assert result.failed is not None
    assert isinstance(result.failed, TurnFailed)
    assert (result.failed.code, result.failed.message, result.failed.retryable) == (
        "model_failed",
        "The model failed.",
        True,
    )
    assert result.failed.sequence == 4
    assert result.text == "partial"


def test_events_without_a_known_variant_are_skipped(service, run):
    service.events = [event(1), event(2, delta=chat_pb2.TextDelta(text="x"))]

    async def scenario(client: ChatClient):
        return [item async for item in client.submit("s1", "hi")]

    events = run(scenario)

    assert [(type(item), item.sequence) for item in events] == [(TextDelta, 2)]


def test_a_fresh_turn_id_is_generated_for_every_turn(service, run):
    async def scenario(client: ChatClient):
        first = await client.run_turn("s1", Submit("one"))
        second = await client.run_turn("s1", Submit("two"))
        async for _ in client.submit("s1", "three"):
            pass
        return first, second

    first, second = run(scenario)

    turn_ids = [request.turn_id for request in service.requests]
    assert len(turn_ids) == 3
    assert len(set(turn_ids)) == 3
    assert all(re.fullmatch(r"[0-9a-f]{32}", turn_id) for turn_id in turn_ids)
    assert [first.turn_id, second.turn_id] == turn_ids[:2]


def test_an_explicit_turn_id_is_sent_unchanged(service, run):
    run(lambda client: client.run_turn("s1", Regenerate(), turn_id="turn-42"))

    assert service.requests == [
        chat_pb2.StreamTurnRequest(
            session_id="s1", turn_id="turn-42", regenerate=chat_pb2.RegenerateOperation()
        )
    ]


def test_helpers_send_their_operation(service, run):
    history = [Message("m1", "user", "hi")]

    async def scenario(client: ChatClient):
        streams = [
            client.submit("s1", "hello", message_id="m9", turn_id="t1"),
            client.retry("s1", turn_id="t2"),
            client.retry("s1", "m1", turn_id="t3"),
            client.edit("s1", "m1", "changed", turn_id="t4"),
            client.regenerate("s1", "a1", turn_id="t5"),
            client.dispatch("s1", history, turn_id="t6"),
        ]
        for stream in streams:
            async for _ in stream:
                pass

    run(scenario)

    requests = service.requests
    assert all(isinstance(request, chat_pb2.StreamTurnRequest) for request in requests)
    assert [(request.turn_id, request.WhichOneof("operation")) for request in requests] == [
        ("t1", "submit"),
        ("t2", "retry"),
        ("t3", "retry"),
        ("t4", "edit"),
        ("t5", "regenerate"),
        ("t6", "dispatch"),
    ]
    assert requests[0].submit == chat_pb2.SubmitOperation(content="hello", message_id="m9")
    assert requests[1].retry == chat_pb2.RetryOperation()
    assert requests[2].retry == chat_pb2.RetryOperation(message_id="m1")
    assert requests[3].edit == chat_pb2.EditOperation(message_id="m1", content="changed")
    assert requests[4].regenerate == chat_pb2.RegenerateOperation(message_id="a1")
    assert len(requests[5].dispatch.messages) == 1


def test_dispatch_sends_the_whole_history_with_roles(service, run):
    history = [
        Message("sys", "system", "Be brief."),
        Message("m1", "user", "/start"),
        Message("a1", "assistant", "Name?"),
        Message("tool1", "tool", "{}"),
        Message("m2", "user", "/name Ada"),
    ]

    run(lambda client: client.run_turn("s1", Dispatch(history), turn_id="t1"))

    (request,) = service.requests
    assert request.WhichOneof("operation") == "dispatch"
    assert list(request.dispatch.messages) == [
        chat_pb2.Message(id="sys", role=chat_pb2.ROLE_SYSTEM, content="Be brief."),
        chat_pb2.Message(id="m1", role=chat_pb2.ROLE_USER, content="/start"),
        chat_pb2.Message(id="a1", role=chat_pb2.ROLE_ASSISTANT, content="Name?"),
        chat_pb2.Message(id="tool1", role=chat_pb2.ROLE_TOOL, content="{}"),
        chat_pb2.Message(id="m2", role=chat_pb2.ROLE_USER, content="/name Ada"),
    ]


def test_edit_operation_is_sent_by_stream_turn(service, run):
    async def scenario(client: ChatClient):
        async for _ in client.stream_turn("s1", Edit("m1", "new"), turn_id="t1"):
            pass

    run(scenario)

    assert service.requests == [
        chat_pb2.StreamTurnRequest(
            session_id="s1",
            turn_id="t1",
            edit=chat_pb2.EditOperation(message_id="m1", content="new"),
        )
    ]


# Errors --------------------------------------------------------------------------------


UNARY_CALLS = {
    "ListDefinitions": lambda client: client.list_definitions(),
    "GetDefinition": lambda client: client.get_definition("support"),
    "CreateSession": lambda client: client.create_session("support"),
    "GetSession": lambda client: client.get_session("s1"),
    "DeleteSession": lambda client: client.delete_session("s1"),
    "TruncateHistory": lambda client: client.truncate_history("s1", "m1"),
}


@pytest.mark.parametrize("method", sorted(UNARY_CALLS))
def test_every_unary_method_raises_chat_error_with_error_info(service, run, method):
    service.aborts[method] = BUSY

    async def scenario(client: ChatClient):
        with pytest.raises(ChatError) as caught:
            await UNARY_CALLS[method](client)
        return caught.value

    error = run(scenario)

    assert error.code is grpc.StatusCode.ABORTED
    assert error.reason == "ERROR_REASON_SESSION_BUSY"
    assert error.domain == "chat.agentskit.dev"
    assert error.message == "Another turn holds the session."
    assert dict(error.metadata) == {"retry_after_ms": "250"}
    assert error.retry_after_ms == 250
    assert isinstance(error.__cause__, grpc.aio.AioRpcError)


def test_error_info_metadata_is_passed_through(service, run):
    service.aborts["GetSession"] = Abort(
        grpc.StatusCode.INVALID_ARGUMENT,
        "session_id is malformed.",
        reason="ERROR_REASON_INVALID_ARGUMENT",
        metadata={"field": "session_id"},
    )

    async def scenario(client: ChatClient):
        with pytest.raises(ChatError) as caught:
            await client.get_session("bad id")
        return caught.value

    error = run(scenario)

    assert error.code is grpc.StatusCode.INVALID_ARGUMENT
    assert error.reason == "ERROR_REASON_INVALID_ARGUMENT"
    assert error.metadata == {"field": "session_id"}
    assert error.retry_after_ms is None


def test_an_error_without_status_details_has_no_reason(service, run):
    service.aborts["DeleteSession"] = Abort(grpc.StatusCode.INTERNAL, "boom")

    async def scenario(client: ChatClient):
        with pytest.raises(ChatError) as caught:
            await client.delete_session("s1")
        return caught.value

    error = run(scenario)

    assert error.code is grpc.StatusCode.INTERNAL
    assert error.message == "boom"
    assert error.reason is None
    assert error.domain is None
    assert error.metadata == {}
    assert error.retry_after_ms is None


def test_a_stream_rejected_before_any_event_raises_chat_error(service, run):
    service.stream_abort = Abort(
        grpc.StatusCode.NOT_FOUND, "No such session.", reason="ERROR_REASON_SESSION_NOT_FOUND"
    )

    async def scenario(client: ChatClient):
        received: list[TurnEvent] = []
        with pytest.raises(ChatError) as caught:
            await drain(client.submit("missing", "hi"), received)
        return received, caught.value

    received, error = run(scenario)

    assert received == []
    assert error.code is grpc.StatusCode.NOT_FOUND
    assert error.reason == "ERROR_REASON_SESSION_NOT_FOUND"


def test_an_error_in_the_middle_of_a_stream_raises_from_iteration(service, run):
    service.events = _turn_events()[:3]
    service.stream_abort = Abort(
        grpc.StatusCode.UNAVAILABLE,
        "The server is shutting down.",
        reason="ERROR_REASON_SHUTTING_DOWN",
        metadata={"retry_after_ms": "1000"},
    )

    async def scenario(client: ChatClient):
        received: list[TurnEvent] = []
        with pytest.raises(ChatError) as caught:
            await drain(client.submit("s1", "hi", turn_id="t1"), received)
        return received, caught.value

    received, error = run(scenario)

    assert [item.sequence for item in received] == [1, 2, 3]
    assert error.code is grpc.StatusCode.UNAVAILABLE
    assert error.reason == "ERROR_REASON_SHUTTING_DOWN"
    assert error.retry_after_ms == 1000


def test_run_turn_raises_chat_error_for_a_failed_call(service, run):
    service.events = _turn_events()[:2]
    service.stream_abort = Abort(
        grpc.StatusCode.ABORTED,
        "A turn with this id is running.",
        reason="ERROR_REASON_TURN_IN_PROGRESS",
        metadata={"retry_after_ms": "40"},
    )

    async def scenario(client: ChatClient):
        with pytest.raises(ChatError) as caught:
            await client.run_turn("s1", Submit("hi"))
        return caught.value

    error = run(scenario)

    assert error.reason == "ERROR_REASON_TURN_IN_PROGRESS"
    assert error.retry_after_ms == 40


def test_the_client_deadline_becomes_chat_error(service):
    service.stream_hold = True

    async def main() -> ChatError:
        async with serving(service) as target, ChatClient(target, timeout=0.2) as client:
            with pytest.raises(ChatError) as caught:
                await drain(client.submit("s1", "hi"))
            return caught.value

    error = asyncio.run(main())

    assert error.code is grpc.StatusCode.DEADLINE_EXCEEDED
    assert error.reason is None


def test_an_unreachable_server_becomes_chat_error():
    async def main() -> ChatError:
        async with ChatClient("127.0.0.1:1", timeout=SAFETY_TIMEOUT) as client:
            with pytest.raises(ChatError) as caught:
                await client.list_definitions()
            return caught.value

    error = asyncio.run(main())

    assert error.code is grpc.StatusCode.UNAVAILABLE


# Cancellation --------------------------------------------------------------------------


def _hold_after_start(service: FakeChatService) -> None:
    service.events = _turn_events()[:1]
    service.stream_hold = True


def test_breaking_out_of_the_stream_cancels_the_server_call(service, run):
    _hold_after_start(service)

    async def scenario(client: ChatClient):
        received = []
        async for item in client.submit("s1", "hi"):
            received.append(item)
            break
        await asyncio.wait_for(service.stream_cancelled.wait(), SAFETY_TIMEOUT)
        return received

    received = run(scenario)

    assert [type(item) for item in received] == [TurnStarted]
    assert service.stream_cancelled.is_set()


def test_closing_the_stream_cancels_the_server_call(service, run):
    _hold_after_start(service)

    async def scenario(client: ChatClient):
        async with aclosing(client.submit("s1", "hi")) as stream:
            async for _ in stream:
                break
        await asyncio.wait_for(service.stream_cancelled.wait(), SAFETY_TIMEOUT)

    run(scenario)

    assert service.stream_cancelled.is_set()


def test_an_exception_in_the_loop_body_cancels_the_server_call(service, run):
    _hold_after_start(service)

    async def consume_and_fail(client: ChatClient) -> None:
        async for _ in client.submit("s1", "hi"):
            raise LookupError

    async def scenario(client: ChatClient):
        with pytest.raises(LookupError):
            await consume_and_fail(client)
        await asyncio.wait_for(service.stream_cancelled.wait(), SAFETY_TIMEOUT)

    run(scenario)

    assert service.stream_cancelled.is_set()


def test_cancelling_the_consuming_task_cancels_the_server_call(service, run):
    _hold_after_start(service)

    async def scenario(client: ChatClient):
        first_event = asyncio.Event()

        async def consume() -> None:
            async for _ in client.submit("s1", "hi"):
                first_event.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(first_event.wait(), SAFETY_TIMEOUT)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(service.stream_cancelled.wait(), SAFETY_TIMEOUT)

    run(scenario)

    assert service.stream_cancelled.is_set()


# Options and channels ------------------------------------------------------------------


def test_default_and_per_call_metadata_are_sent(service):
    async def main() -> None:
        async with (
            serving(service) as target,
            ChatClient(target, metadata=[("x-tenant", "acme")]) as client,
        ):
            await client.get_session("s1", metadata=[("x-request-id", "r1")])
            await drain(client.submit("s1", "hi", metadata=[("x-request-id", "r2")]))
            await client.delete_session("s1")

    asyncio.run(main())

    assert [
        (metadata.get("x-tenant"), metadata.get("x-request-id")) for metadata in service.metadata
    ] == [("acme", "r1"), ("acme", "r2"), ("acme", None)]


def test_a_per_call_timeout_overrides_the_default(service):
    service.stream_hold = True

    async def main() -> ChatError:
        async with (
            serving(service) as target,
            ChatClient(target, timeout=SAFETY_TIMEOUT) as client,
        ):
            with pytest.raises(ChatError) as caught:
                await drain(client.submit("s1", "hi", timeout=0.2))
            return caught.value

    error = asyncio.run(main())

    assert error.code is grpc.StatusCode.DEADLINE_EXCEEDED


def test_a_client_over_a_caller_channel_leaves_it_open(service):
    async def main() -> None:
        async with serving(service) as target, grpc.aio.insecure_channel(target) as channel:
            async with ChatClient(channel) as client:
                assert client.channel is channel
                await client.list_definitions()
            await ChatClient(channel).list_definitions()

    asyncio.run(main())

    assert len(service.requests) == 2


def test_a_client_closes_the_channel_it_owns(service):
    async def main() -> None:
        async with serving(service) as target:
            client = ChatClient(target)
            await client.list_definitions()
            await client.close()
            await client.close()
            with pytest.raises(grpc.aio.UsageError):
                await client.list_definitions()

    asyncio.run(main())


def test_timestamps_are_utc_datetimes(service, run):
    moment = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    response = event(1, delta=chat_pb2.TextDelta(text="x"))
    response.time.FromDatetime(moment)
    service.events = [response]

    async def scenario(client: ChatClient):
        return [item async for item in client.submit("s1", "hi")]

    (delta,) = run(scenario)

    assert delta.time == moment
    assert delta.time.utcoffset() == timedelta(0)
