"""DESIGN §2 rules 1-10 and 12, observed through ChatSession dispatches."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from typing import Any

import pytest

from agentskit_chat.conversation import (
    ROUTE_FAILED,
    ROUTE_FAILED_MESSAGE,
    AsyncCallbackError,
    ChatDefinition,
    ChatSession,
    ConversationSnapshot,
    DelegateOutcome,
    FailureOutcome,
    InputDigester,
    InvalidHistoryError,
    Message,
    Role,
    RouteContext,
    RouteOutcome,
    TraceRecord,
    TurnKind,
    TurnOutcome,
    command_route,
    create_chat_session,
    define_chat,
    exact_route,
    handler_route,
    pattern_route,
    transition,
)

from .conftest import KEY, History

STATES = {
    "idle": {"on": {"start": "collecting", "help": "idle"}, "actions": ["start"]},
    "collecting": {"on": {"finish": "complete", "help": "collecting"}, "actions": ["cancel"]},
    "complete": {"actions": ["restart"]},
}


def chat(*routes: object, states: dict[str, object] | None = None) -> ChatDefinition:
    return define_chat(
        id="t", conversation={"initial": "idle", "states": states or STATES, "routes": routes}
    )


def new_session(definition: ChatDefinition, session_id: str = "s1", **kw: object) -> ChatSession:
    return create_chat_session(definition, session_id=session_id, digest_key=KEY, **kw)  # type: ignore[arg-type]


class Counter:
    """A route callback that counts its calls."""

    def __init__(self, result: Any = "ok") -> None:
        self.calls = 0
        self.result = result

    def __call__(self, text: str, context: RouteContext) -> Any:
        self.calls += 1
        return self.result


# Rule 1: declaration order, state restriction and event eligibility.


def test_first_matching_route_in_declaration_order_wins(history: History) -> None:
    session = new_session(
        chat(
            command_route(id="first", command="/go", event="start", response="first"),
            command_route(id="second", command="/go", event="start", response="second"),
        )
    )
    outcome = session.dispatch_sync(history.user("/go"))
    assert isinstance(outcome, RouteOutcome)
    assert outcome.decision.route_id == "first"
    assert outcome.response == "first"


def test_route_restricted_to_other_states_is_skipped(history: History) -> None:
    session = new_session(
        chat(
            command_route(
                id="only-collecting",
                command="/go",
                event="help",
                response="no",
                states=["collecting"],
            ),
            command_route(id="anywhere", command="/go", event="help", response="yes"),
        )
    )
    outcome = session.dispatch_sync(history.user("/go"))
    assert isinstance(outcome, RouteOutcome)
    assert outcome.decision.route_id == "anywhere"


def test_route_whose_event_is_not_allowed_delegates_to_the_model(history: History) -> None:
    counter = Counter()
    session = new_session(
        chat(command_route(id="finish", command="/done", event="finish", response=counter))
    )
    outcome = session.dispatch_sync(history.user("/done"))
    assert isinstance(outcome, DelegateOutcome)
    assert counter.calls == 0
    assert session.snapshot().state == "idle"


def test_a_disallowed_earlier_route_does_not_hide_a_later_allowed_one(history: History) -> None:
    session = new_session(
        chat(
            command_route(id="finish", command="/x", event="finish", response="finish"),
            command_route(id="start", command="/x", event="start", response="start"),
        )
    )
    outcome = session.dispatch_sync(history.user("/x"))
    assert isinstance(outcome, RouteOutcome)
    assert (outcome.decision.route_id, outcome.snapshot.state) == ("start", "collecting")


# Rule 2: a match streams the response, commits the transition and records a decision.


def test_match_commits_transition_and_records_decision(
    session: ChatSession, history: History
) -> None:
    outcome = session.dispatch_sync(history.user("/start"))
    assert isinstance(outcome, RouteOutcome)
    assert outcome.response == "What is your name?"
    assert not outcome.replayed
    decision = session.state.decisions["u1"]
    assert decision == outcome.decision
    assert (decision.route_id, decision.kind, decision.event) == ("start", "deterministic", "start")
    assert (decision.from_state, decision.to_state) == ("idle", "collecting")
    assert decision.input_digest == InputDigester(KEY).digest("/start")
    assert decision.input_digest != "/start"
    assert session.snapshot().state == "collecting"
    assert outcome.trace.kind is TurnKind.DETERMINISTIC


@pytest.mark.parametrize("kind", ["repaired", "fallback"])
def test_trace_kind_is_the_routes_declared_kind(kind: str, history: History) -> None:
    session = new_session(
        chat(exact_route(id="r", text="/strat", event="start", response="ok", kind=kind))
    )
    outcome = session.dispatch_sync(history.user("/strat"))
    assert isinstance(outcome, RouteOutcome)
    assert outcome.trace.kind == kind
    assert outcome.decision.kind == kind


def test_the_machine_not_the_route_chooses_the_target(history: History) -> None:
    session = new_session(
        chat(
            command_route(id="start", command="/start", event="start", response="s"),
            command_route(id="help", command="/help", event="help", response="h"),
        )
    )
    first = session.dispatch_sync(history.user("/help"))
    assert isinstance(first, RouteOutcome)
    assert (first.decision.from_state, first.decision.to_state) == ("idle", "idle")
    session.dispatch_sync(history.user("/start"))
    second = session.dispatch_sync(history.user("/help"))
    assert isinstance(second, RouteOutcome)
    assert (second.decision.from_state, second.decision.to_state) == ("collecting", "collecting")


def test_decision_holds_a_digest_not_the_input(history: History) -> None:
    canary = "CANARY-7f3a"
    session = new_session(
        chat(pattern_route(id="note", pattern=r"/note .+", event="help", response="Noted."))
    )
    outcome = session.dispatch_sync(history.user(f"/note {canary}"))
    assert isinstance(outcome, RouteOutcome)
    assert canary not in repr(dataclasses.astuple(outcome.decision))
    assert canary not in repr(outcome.trace)


# Rule 3: a miss delegates the unchanged request and records an agentic turn.


def test_miss_delegates_unchanged_messages_as_agentic_turn(
    session: ChatSession, history: History
) -> None:
    session.dispatch_sync(history.user("/start"))
    history.assistant("What is your name?")
    messages = history.user("I'd rather talk about the weather")
    outcome = session.dispatch_sync(messages)
    assert isinstance(outcome, DelegateOutcome)
    assert outcome.messages == tuple(messages)
    assert outcome.message_id == messages[-1].id
    trace = outcome.trace
    assert (trace.kind, trace.outcome) == (TurnKind.AGENTIC, TurnOutcome.DELEGATED)
    assert trace.from_state == trace.to_state == "collecting"
    assert trace.route_id is None
    assert session.snapshot().state == "collecting"
    assert messages[-1].id not in session.state.decisions


def test_dispatch_without_user_message_delegates(session: ChatSession) -> None:
    outcome = session.dispatch_sync([Message("sys", Role.SYSTEM, "be brief")])
    assert isinstance(outcome, DelegateOutcome)
    assert outcome.message_id is None


# Rule 4: a failing matcher or response commits nothing and calls no model.


def boom(text: str, context: RouteContext) -> str:
    raise RuntimeError("secret detail " + text)


async def slow(text: str, context: RouteContext) -> str:
    await asyncio.sleep(10)
    return "late"


def overrunning(text: str, context: RouteContext) -> str:
    time.sleep(0.05)
    return "late"


@pytest.mark.parametrize(
    "route",
    [
        command_route(id="r", command="/start", event="start", response=boom),
        handler_route(id="r", handler=boom, event="start", response="never"),  # type: ignore[arg-type]
        command_route(id="r", command="/start", event="start", response=lambda t, c: 42),  # type: ignore[arg-type,return-value]
    ],
    ids=["response-raises", "matcher-raises", "response-not-text"],
)
def test_failing_callback_commits_nothing(route: object, history: History) -> None:
    fallback = Counter()
    session = new_session(
        chat(route, command_route(id="later", command="/start", event="start", response=fallback))
    )
    before = session.state
    outcome = session.dispatch_sync(history.user("/start"))
    assert isinstance(outcome, FailureOutcome)
    assert (outcome.code, outcome.message) == (ROUTE_FAILED, ROUTE_FAILED_MESSAGE)
    assert session.state is before
    assert session.state.decisions == {}
    assert fallback.calls == 0
    assert outcome.trace.outcome is TurnOutcome.FAILED
    assert "secret" not in repr(outcome)


def test_async_response_that_times_out_fails_safely(history: History) -> None:
    definition = chat(command_route(id="r", command="/start", event="start", response=slow))
    session = create_chat_session(
        definition, session_id="s1", digest_key=KEY, callback_timeout=0.01
    )
    outcome = asyncio.run(session.dispatch(history.user("/start")))
    assert isinstance(outcome, FailureOutcome)
    assert session.snapshot().state == "idle"
    assert session.state.decisions == {}


def test_sync_response_that_overruns_its_budget_fails_safely(history: History) -> None:
    definition = chat(command_route(id="r", command="/start", event="start", response=overrunning))
    session = create_chat_session(
        definition, session_id="s1", digest_key=KEY, callback_timeout=0.001
    )
    outcome = session.dispatch_sync(history.user("/start"))
    assert isinstance(outcome, FailureOutcome)
    assert session.snapshot().state == "idle"


def test_async_callbacks_work_when_awaited(history: History) -> None:
    async def respond(text: str, context: RouteContext) -> str:
        await asyncio.sleep(0)
        return f"hello {context.message_id}"

    session = new_session(
        chat(command_route(id="r", command="/start", event="start", response=respond))
    )
    outcome = asyncio.run(session.dispatch(history.user("/start")))
    assert isinstance(outcome, RouteOutcome)
    assert outcome.response == "hello u1"


def test_sync_dispatch_refuses_async_callbacks_without_committing(history: History) -> None:
    async def respond(text: str, context: RouteContext) -> str:
        return "x"

    session = new_session(
        chat(command_route(id="r", command="/start", event="start", response=respond))
    )
    with pytest.raises(AsyncCallbackError):
        session.dispatch_sync(history.user("/start"))
    assert session.snapshot().state == "idle"


# Rule 5: the snapshot is the state, its allowed events in order, and its actions.


def test_snapshot_projects_current_state_only(session: ChatSession, history: History) -> None:
    assert session.snapshot() == ConversationSnapshot("idle", ("start",), ("start",))
    session.dispatch_sync(history.user("/start"))
    assert session.snapshot() == ConversationSnapshot("collecting", ("finish",), ("cancel",))
    assert [f.name for f in dataclasses.fields(ConversationSnapshot)] == [
        "state",
        "events",
        "actions",
    ]


def test_snapshot_events_keep_declaration_order() -> None:
    states = {"a": {"on": {"z": "b", "a": "b", "m": "a"}}, "b": {}}
    definition = define_chat(id="o", conversation={"initial": "a", "states": states})
    assert definition.snapshot("a").events == ("z", "a", "m")


# Rule 6: retry and regenerate replay the recorded decision.


def test_retry_replays_without_calling_the_callback(history: History) -> None:
    counter = Counter("Hello!")
    session = new_session(
        chat(command_route(id="r", command="/start", event="start", response=counter))
    )
    messages = history.user("/start")
    first = session.dispatch_sync(messages)
    retried = session.dispatch_sync(messages)
    regenerated = session.dispatch_sync([*messages])
    assert counter.calls == 1
    for outcome in (retried, regenerated):
        assert isinstance(outcome, RouteOutcome)
        assert outcome.replayed
        assert outcome.response == "Hello!"
        assert outcome.decision == first.decision  # type: ignore[union-attr]
        assert outcome.trace.replayed
    assert session.snapshot().state == "collecting"


def test_regenerate_after_an_assistant_reply_replays(
    session: ChatSession, history: History
) -> None:
    messages = history.user("/start")
    session.dispatch_sync(messages)
    with_reply = history.assistant("What is your name?")
    outcome = session.dispatch_sync(with_reply)
    assert isinstance(outcome, RouteOutcome)
    assert outcome.replayed


def test_changed_input_under_same_id_is_resolved_again(history: History) -> None:
    counter = Counter("fresh")
    session = new_session(
        chat(
            command_route(id="a", command="/start", event="start", response="a"),
            command_route(id="b", command="/begin", event="start", response=counter),
        )
    )
    session.dispatch_sync(history.user("/start"))
    outcome = session.dispatch_sync(history.edit("u1", "/begin"))
    assert isinstance(outcome, RouteOutcome)
    assert not outcome.replayed
    assert outcome.decision.route_id == "b"
    assert counter.calls == 1


def test_decision_from_another_state_is_not_replayed(
    session: ChatSession, history: History
) -> None:
    session.dispatch_sync(history.user("/start"))
    session.dispatch_sync(history.user("/name Ada"))
    assert session.snapshot().state == "complete"
    # A client-held history where the first message changed: /name Ada now meets state idle.
    edited = [Message("u1", Role.USER, "hi"), history.messages[1]]
    outcome = session.dispatch_sync(edited)
    assert isinstance(outcome, DelegateOutcome)
    assert session.snapshot().state == "idle"
    assert session.state.decisions == {}


# Rule 7: prune, rebuild from the initial state, then resolve the last user message.


def test_dispatch_prunes_decisions_of_removed_messages(
    session: ChatSession, history: History
) -> None:
    session.dispatch_sync(history.user("/start"))
    session.dispatch_sync(history.user("/name Ada"))
    outcome = session.dispatch_sync(history.truncate(0) + history.user("hello"))
    assert isinstance(outcome, DelegateOutcome)
    assert session.snapshot().state == "idle"
    assert set(session.state.decisions) == set()


def test_edit_of_an_earlier_message_rebuilds_state_before_resolving(
    session: ChatSession, history: History
) -> None:
    session.dispatch_sync(history.user("/start"))
    history.assistant("What is your name?")
    session.dispatch_sync(history.user("/name Ada"))
    outcome = session.dispatch_sync(history.edit("u1", "/start"))
    assert isinstance(outcome, RouteOutcome)
    assert outcome.replayed  # unchanged input, same rebuilt from-state
    assert session.snapshot().state == "collecting"
    assert list(session.state.decisions) == ["u1"]


def test_earlier_message_with_changed_input_contributes_nothing(history: History) -> None:
    session = new_session(
        chat(
            command_route(id="start", command="/start", event="start", response="s"),
            command_route(id="help", command="/help", event="help", response="h"),
        )
    )
    session.dispatch_sync(history.user("/start"))
    session.dispatch_sync(history.user("/help"))
    edited = [Message("u1", Role.USER, "/START"), history.messages[1]]
    outcome = session.dispatch_sync(edited)
    assert isinstance(outcome, RouteOutcome)
    assert not outcome.replayed  # its recorded from-state was collecting; now it is idle
    assert (outcome.decision.from_state, outcome.decision.to_state) == ("idle", "idle")
    assert list(session.state.decisions) == ["u2"]


def test_rebuild_without_checkpoints_matches_incremental_state(
    support: ChatDefinition, history: History
) -> None:
    session = new_session(support)
    session.dispatch_sync(history.user("/start"))
    session.dispatch_sync(history.user("/name Ada"))
    messages = history.user("thanks")
    stripped = dataclasses.replace(session.state, checkpoints=())
    fresh = ChatSession(support, session_id="s1", digest_key=KEY, state=stripped)
    assert fresh.dispatch_sync(messages).state == session.dispatch_sync(messages).state


# Rule 8: mutations without dispatch do not transition; the next dispatch reconciles.


def test_truncate_and_unsent_edit_do_not_transition(session: ChatSession, history: History) -> None:
    session.dispatch_sync(history.user("/start"))
    before = session.state
    history.truncate(0)
    history.user("/start")
    history.edit("u2", "something else")
    assert session.state is before
    assert session.snapshot().state == "collecting"
    session.dispatch_sync(history.messages)
    assert session.snapshot().state == "idle"


# Rule 9: observers are best-effort.


def test_failing_observer_does_not_change_the_turn(history: History) -> None:
    def broken(record: TraceRecord) -> None:
        raise RuntimeError("observer down")

    seen: list[TraceRecord] = []
    definition = chat(command_route(id="r", command="/start", event="start", response="ok"))
    session = new_session(definition, on_trace=[broken, seen.append])
    outcome = session.dispatch_sync(history.user("/start"))
    assert isinstance(outcome, RouteOutcome)
    assert session.traces.flush(timeout=5)
    assert seen == [outcome.trace]
    assert session.traces.failures == 1


def test_blocked_observer_does_not_delay_the_turn(history: History) -> None:
    release = threading.Event()
    entered = threading.Event()

    def stuck(record: TraceRecord) -> None:
        entered.set()
        release.wait(10)

    definition = chat(command_route(id="r", command="/start", event="start", response="ok"))
    session = new_session(definition, on_trace=[stuck])
    first = session.dispatch_sync(history.user("/start"))
    assert entered.wait(5)
    second = session.dispatch_sync(history.messages)  # returns while the observer is stuck
    assert not release.is_set()
    assert isinstance(first, RouteOutcome)
    assert isinstance(second, RouteOutcome)
    release.set()
    assert session.traces.flush(timeout=5)


def test_full_observer_queue_drops_records_instead_of_waiting(history: History) -> None:
    from agentskit_chat.conversation import TraceFanout

    release = threading.Event()
    fanout = TraceFanout([lambda record: release.wait(10)], capacity=1)
    definition = chat(command_route(id="r", command="/start", event="start", response="ok"))
    session = new_session(definition, on_trace=fanout)
    messages = history.user("/start")
    for _ in range(5):
        session.dispatch_sync(messages)
    assert fanout.dropped >= 3
    release.set()
    assert fanout.flush(timeout=5)


# Rule 10: route responses receive (input, context) with the session and message ids.


def test_responses_receive_input_and_identity_context(history: History) -> None:
    seen: list[tuple[str, RouteContext]] = []

    def respond(text: str, context: RouteContext) -> str:
        seen.append((text, context))
        return f"card-{context.message_id}"

    definition = chat(
        pattern_route(id="r", pattern=r"/start (?P<who>\w+)", event="start", response=respond)
    )
    session = new_session(definition, session_id="sess-9")
    outcome = session.dispatch_sync(history.user("/start Ada"))
    assert isinstance(outcome, RouteOutcome)
    assert outcome.response == "card-u1"
    text, context = seen[0]
    assert text == "/start Ada"
    assert (context.session_id, context.message_id) == ("sess-9", "u1")
    assert dict(context.groups) == {"who": "Ada"}


def test_templates_render_identity_fields_and_replay_identically(history: History) -> None:
    definition = chat(
        command_route(id="r", command="/start", event="start", response="{session_id}/{message_id}")
    )
    one, two = new_session(definition, "a"), new_session(definition, "b")
    messages = history.user("/start")
    first = one.dispatch_sync(messages)
    assert isinstance(first, RouteOutcome)
    assert first.response == "a/u1"
    assert two.dispatch_sync(messages).response == "b/u1"  # type: ignore[union-attr]
    assert one.dispatch_sync(messages).response == "a/u1"  # type: ignore[union-attr]


# Rule 12: sessions are isolated; definitions are immutable and shared.


def test_sessions_of_one_definition_are_isolated(support: ChatDefinition) -> None:
    first, second = new_session(support, "one"), new_session(support, "two")
    first.dispatch_sync([Message("m1", Role.USER, "/start")])
    assert first.snapshot().state == "collecting"
    assert second.snapshot().state == "idle"
    assert second.state.decisions == {}


def test_definitions_are_immutable(support: ChatDefinition) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        support.revision = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        support.conversation.states["idle"] = support.conversation.states["complete"]  # type: ignore[index]
    with pytest.raises(TypeError):
        support.model["adapter"] = "other"  # type: ignore[index]


# Malformed histories are rejected before anything changes.


@pytest.mark.parametrize(
    "messages",
    [
        [Message("", Role.USER, "x")],
        [Message("m", Role.USER, "x"), Message("m", Role.ASSISTANT, "y")],
        [Message("m", "robot", "x")],  # type: ignore[arg-type]
    ],
    ids=["empty-id", "duplicate-id", "unknown-role"],
)
def test_malformed_history_is_rejected(session: ChatSession, messages: list[Message]) -> None:
    before = session.state
    with pytest.raises(InvalidHistoryError):
        session.dispatch_sync(messages)
    assert session.state is before


def test_plain_string_roles_are_accepted(session: ChatSession) -> None:
    outcome = session.dispatch_sync([Message("m1", "user", "/start")])  # type: ignore[arg-type]
    assert isinstance(outcome, RouteOutcome)


# Gaps found by mutation testing.

RESET_STATES = {"a": {"on": {"go": "b", "reset": "a"}}, "b": {"on": {"reset": "a"}}}


def reset_chat(counter: Counter) -> ChatDefinition:
    return define_chat(
        id="reset",
        conversation={
            "initial": "a",
            "states": RESET_STATES,
            "routes": [
                command_route(id="go", command="/go", event="go", response="went"),
                command_route(id="reset", command="/reset", event="reset", response=counter),
            ],
        },
    )


def test_edit_of_last_message_to_a_miss_drops_its_decision(
    session: ChatSession, history: History
) -> None:
    session.dispatch_sync(history.user("/start"))
    outcome = session.dispatch_sync(history.edit("u1", "hello"))
    assert isinstance(outcome, DelegateOutcome)
    assert session.state.decisions == {}
    assert session.snapshot().state == "idle"


def test_replay_requires_equal_from_state_not_just_equal_target(history: History) -> None:
    counter = Counter("reset done")
    session = new_session(reset_chat(counter))
    session.dispatch_sync(history.user("/go"))
    session.dispatch_sync(history.user("/reset"))  # recorded from b
    assert counter.calls == 1
    outcome = session.dispatch_sync([Message("u1", Role.USER, "hello"), history.messages[1]])
    assert isinstance(outcome, RouteOutcome)
    assert not outcome.replayed
    assert outcome.decision.from_state == "a"
    assert counter.calls == 2


def test_rebuild_drops_decision_whose_from_state_differs(history: History) -> None:
    session = new_session(reset_chat(Counter("reset done")))
    session.dispatch_sync(history.user("/go"))
    session.dispatch_sync(history.user("/reset"))
    edited = [
        Message("u1", Role.USER, "hello"),
        history.messages[1],
        Message("u3", Role.USER, "hi"),
    ]
    outcome = session.dispatch_sync(edited)
    assert isinstance(outcome, DelegateOutcome)
    assert session.state.decisions == {}


def test_checkpoint_is_keyed_by_message_ids(session: ChatSession) -> None:
    session.dispatch_sync([Message("u1", Role.USER, "/start")])
    session.dispatch_sync([Message("x1", Role.USER, "/start"), Message("x2", Role.USER, "hi")])
    assert set(session.state.decisions) <= {"x1", "x2"}
    assert session.snapshot().state == "idle"


def test_failure_trace_and_snapshot_describe_the_committed_state(history: History) -> None:
    definition = chat(
        command_route(id="start", command="/start", event="start", response="ok"),
        command_route(id="bad", command="/boom", event="finish", response=boom),
    )
    session = new_session(definition)
    session.dispatch_sync(history.user("/start"))
    outcome = session.dispatch_sync(history.user("/boom"))
    assert isinstance(outcome, FailureOutcome)
    assert outcome.trace.error_code == ROUTE_FAILED
    assert outcome.snapshot == session.snapshot()
    assert outcome.trace.from_state == outcome.trace.to_state == session.snapshot().state


def test_unhashable_ids_or_roles_are_invalid_history(session: ChatSession) -> None:
    for bad in (Message(["x"], Role.USER, "x"), Message("m", ["user"], "x")):  # type: ignore[arg-type]
        with pytest.raises(InvalidHistoryError):
            session.dispatch_sync([bad])


def test_state_of_another_definition_is_refused(support: ChatDefinition) -> None:
    other = define_chat(id="o", conversation={"initial": "zz", "states": {"zz": {}}})
    foreign = create_chat_session(other, session_id="s1", digest_key=KEY).state
    with pytest.raises(ValueError, match="not a state"):
        ChatSession(support, session_id="s1", digest_key=KEY, state=foreign)
    with pytest.raises(ValueError, match="another session"):
        ChatSession(support, session_id="s2", digest_key=KEY, state=new_session(support).state)


def test_delivery_thread_ends_when_idle(history: History) -> None:
    from agentskit_chat.conversation import TraceFanout

    seen: list[TraceRecord] = []
    fanout = TraceFanout([seen.append], idle_seconds=0.01)
    definition = chat(command_route(id="r", command="/start", event="start", response="ok"))
    session = new_session(definition, on_trace=fanout)
    session.dispatch_sync(history.user("/start"))
    assert fanout.flush(timeout=5)
    deadline = time.monotonic() + 5
    while any(t.name == "agentskit-chat-trace" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the delivery thread did not end"
        time.sleep(0.01)
    session.dispatch_sync(history.messages)  # a new record starts a new thread
    assert fanout.flush(timeout=5)
    assert len(seen) == 2


def test_text_with_lone_surrogates_is_routed_not_crashed(history: History) -> None:
    session = new_session(
        chat(pattern_route(id="p", pattern=r"/start (?P<x>.+)", event="start", response="{x}!"))
    )
    outcome = session.dispatch_sync(history.user("/start \ud800z"))
    assert isinstance(outcome, RouteOutcome)
    assert outcome.response == "\ud800z!"
    assert isinstance(session.dispatch_sync(history.user("\udfff")), DelegateOutcome)


def test_appending_one_message_does_not_replay_the_history(
    monkeypatch: pytest.MonkeyPatch, history: History
) -> None:
    session = new_session(
        chat(command_route(id="help", command="/help", event="help", response="h"))
    )
    for _ in range(20):
        session.dispatch_sync(history.user("/help"))
        history.assistant("h")
    calls: list[str] = []
    real = transition

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[2])
        return real(*args, **kwargs)

    monkeypatch.setattr("agentskit_chat.conversation._engine.transition", counting)
    session.dispatch_sync(history.user("/help"))
    assert calls == ["help"]  # only the new message's own transition
    calls.clear()
    changed = [Message("u1", Role.USER, "/help!"), *history.messages[1:]]  # edited in place
    session.dispatch_sync(changed)
    assert len(calls) == 20  # 19 earlier decisions replay, then the last message replays
