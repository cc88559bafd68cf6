"""Property tests: random chats driven by random client-side history edits (DESIGN §2).

Each example builds a random valid definition with `define_chat` (2-6 states, random
transitions, command/exact/pattern/handler routes, state restrictions, repaired/fallback
kinds, callable responses and handlers that count their calls and some that raise on input
containing "boom") and applies a random sequence of client operations to a message history:

- submit(content): append a user message with a fresh id, dispatch, append the reply;
- retry / regenerate: drop the assistant messages after the last user message, dispatch;
- edit(i, content): replace a user message's content (same id), drop what follows, dispatch;
- save_edit(i, content): replace a user message's content in place without dispatching
  (rule 8: "an edit saved without dispatch"); the next dispatch reconciles it;
- truncate(n): keep the first n messages without dispatching.

After every step the session is checked against the rules:

1. its state is the replay of its retained decisions, in history order, from the initial
   state through `transition`; every decision starts where the replay stands, belongs to a
   user message of the last committed history and carries that message's input digest;
2. a replay calls no callback, and re-dispatching an unchanged history after a route answered
   replays the same decision instead of calling the model;
3. a FailureOutcome leaves the session state exactly as it was;
4. truncate and save_edit never change the session state;
5. the state survives `encode_session_record` / `decode_session_record` unchanged, and a
   session resumed from the decoded record (no checkpoints) resolves the next dispatch
   exactly like the live session.

Every dispatch is also compared with a small independent model of rules 1-4, 6 and 7
(`expect`), including the exact number of callback calls. Two more properties aim the
generator at the rarer cases: retrying right after every routed turn, and editing an earlier
turn in place before retrying or continuing (which is where a replay from the wrong state or
a stale decision would show).

Invariant 4 holds by construction for an in-process ChatSession (truncate and save_edit never
reach it); what the rules require of those mutations is that the *next* dispatch reconciles
them, which invariant 1 and the model check.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agentskit_chat.conversation import (
    ROUTE_FAILED,
    Accepted,
    ChatDefinition,
    ChatSession,
    ConversationSnapshot,
    ConversationState,
    Decision,
    DelegateOutcome,
    FailureOutcome,
    InputDigester,
    Message,
    Outcome,
    Role,
    RouteContext,
    RouteOutcome,
    SessionRecord,
    StatechartInstance,
    TurnKind,
    TurnOutcome,
    command_route,
    create_chat_session,
    create_instance,
    decode_session_record,
    define_chat,
    encode_session_record,
    exact_route,
    handler_route,
    normalize_exact,
    pattern_route,
    transition,
)

KEY = b"property-test-digest-key-0123456789"
SESSION = "prop-session"
DIGESTER = InputDigester(KEY)

STATE_NAMES = ("idle", "open", "waiting", "escalated", "closed", "archived")
EVENTS = ("go", "back", "escalate", "close")
ACTIONS = ("show_menu", "notify", "log")
COMMANDS = ("/start", "/help", "/close", "/boom")
EXACT_TEXTS = ("hello there", "Talk to a human", "boom box")
PATTERN_PREFIXES = ("order", "ticket", "boom")
HANDLER_PREFIXES = ("please", "hey", "boom")
MISSES = ("", "hi", "boom", "/START")

MATCHERS = ("command", "exact", "pattern", "handler")
TEXT_RESPONSES = ("literal", "message_id", "callable")
GROUP_RESPONSES = (*TEXT_RESPONSES, "group")


# --- random definitions ---------------------------------------------------------------------


@dataclass(frozen=True)
class RouteSpec:
    id: str
    matcher: str
    """command | exact | pattern | handler."""
    value: str
    """The command, the exact text, the pattern prefix or the handler prefix."""
    event: str
    states: tuple[str, ...] | None
    kind: str
    response: str
    """literal | message_id | group | callable."""
    raises: bool
    """The route's callbacks (handler, callable response) raise on input containing "boom"."""


@dataclass(frozen=True)
class ChatSpec:
    initial: str
    transitions: dict[str, dict[str, str]]
    actions: dict[str, tuple[str, ...]]
    routes: tuple[RouteSpec, ...]


@st.composite
def chats(draw) -> ChatSpec:
    names = STATE_NAMES[: draw(st.integers(2, 6))]
    initial = draw(st.sampled_from(names))
    transitions: dict[str, dict[str, str]] = {}
    actions: dict[str, tuple[str, ...]] = {}
    # Events often lead to one state wherever they fire ("close" closes), so different
    # states share transitions, which is where replaying from the wrong state goes unseen.
    usual = {event: draw(st.sampled_from(names)) for event in EVENTS}
    for name in names:
        events = draw(st.lists(st.sampled_from(EVENTS), unique=True, min_size=1, max_size=4))
        transitions[name] = {
            event: draw(
                st.one_of(st.just(usual[event]), st.just(usual[event]), st.sampled_from(names))
            )
            for event in events
        }
        actions[name] = tuple(draw(st.lists(st.sampled_from(ACTIONS), unique=True, max_size=2)))
    declared = sorted({event for on in transitions.values() for event in on})
    routes = []
    for index in range(draw(st.integers(1, 8))):
        matcher = draw(st.sampled_from(MATCHERS))
        value = draw(
            st.sampled_from(
                {
                    "command": COMMANDS,
                    "exact": EXACT_TEXTS,
                    "pattern": PATTERN_PREFIXES,
                    "handler": HANDLER_PREFIXES,
                }[matcher]
            )
        )
        responses = GROUP_RESPONSES if matcher in ("pattern", "handler") else TEXT_RESPONSES
        restricted = st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True)
        routes.append(
            RouteSpec(
                id=f"r{index}",
                matcher=matcher,
                value=value,
                event=draw(st.sampled_from(declared)),
                states=draw(st.one_of(st.none(), st.none(), restricted.map(tuple))),
                kind=draw(
                    st.sampled_from(("deterministic", "deterministic", "repaired", "fallback"))
                ),
                response=draw(st.sampled_from(responses)),
                raises=draw(st.booleans()),
            )
        )
    return ChatSpec(initial, transitions, actions, tuple(routes))


class Calls:
    """Counts every route callback (handler or callable response) of one definition."""

    def __init__(self) -> None:
        self.count = 0


def pattern_of(prefix: str) -> str:
    return f"{re.escape(prefix)} (?P<arg>[a-z0-9]+)"


def handler_groups(prefix: str, text: str) -> dict[str, str] | None:
    return {"arg": text[len(prefix) :].strip()} if text.startswith(prefix) else None


def template_of(route: RouteSpec) -> str:
    return {
        "literal": f"{route.id} ok {{{{braces}}}}",
        "message_id": f"{route.id} for {{message_id}} in {{session_id}}",
        "group": f"{route.id} got {{arg}}",
    }[route.response]


def expected_response(route: RouteSpec, text: str, message_id: str, groups: dict[str, str]) -> str:
    if route.response == "callable":
        return f"{route.id} saw {len(text)} chars for {message_id}"
    return {
        "literal": f"{route.id} ok {{braces}}",
        "message_id": f"{route.id} for {message_id} in {SESSION}",
        "group": f"{route.id} got {groups.get('arg', '')}",
    }[route.response]


def build(chat: ChatSpec) -> tuple[ChatDefinition, Calls]:
    calls = Calls()

    def respond(route: RouteSpec) -> Any:
        def produce(text: str, context: RouteContext) -> str:
            calls.count += 1
            if route.raises and "boom" in text:
                raise RuntimeError("response exploded")
            return f"{route.id} saw {len(text)} chars for {context.message_id}"

        return produce if route.response == "callable" else template_of(route)

    def handle(route: RouteSpec) -> Any:
        def handler(text: str, context: RouteContext) -> dict[str, str] | bool:
            calls.count += 1
            if route.raises and "boom" in text:
                raise ValueError("handler exploded")
            return handler_groups(route.value, text) or False

        return handler

    routes = []
    for r in chat.routes:
        common: dict[str, Any] = {
            "id": r.id,
            "event": r.event,
            "response": respond(r),
            "states": r.states,
            "kind": r.kind,
        }
        if r.matcher == "command":
            routes.append(command_route(command=r.value, **common))
        elif r.matcher == "exact":
            routes.append(exact_route(text=r.value, **common))
        elif r.matcher == "pattern":
            routes.append(pattern_route(pattern=pattern_of(r.value), **common))
        else:
            routes.append(handler_route(handler=handle(r), **common))
    definition = define_chat(
        id="prop-chat",
        conversation={
            "initial": chat.initial,
            "states": {
                name: {"on": on, "actions": list(chat.actions[name])}
                for name, on in chat.transitions.items()
            },
            "routes": routes,
        },
    )
    return definition, calls


# --- random operations ----------------------------------------------------------------------


def hits(route: RouteSpec) -> list[str]:
    """Inputs `route` matches, some of which make its callbacks raise."""
    v = route.value
    if route.matcher == "command":
        return [v, v]
    if route.matcher == "exact":
        return [v, f"  {v.upper()} ", v.replace(" ", "   ")]
    if route.matcher == "pattern":
        return [f"{v} 42", f"{v} abc", f"{v} boom"]
    return [v, f"{v} boom", f"{v} more"]


def near_misses(route: RouteSpec) -> list[str]:
    v = route.value
    return {
        "command": [f"{v} ", f"{v} boom"],
        "exact": [f"{v}!"],
        "pattern": [f"{v} two words"],
        "handler": [f"x{v}"],
    }[route.matcher]


def triggers(route: RouteSpec) -> list[str]:
    """Inputs near `route`: matches, near misses and inputs that make its callbacks raise."""
    return hits(route) + near_misses(route)


def contents(chat: ChatSpec) -> st.SearchStrategy[str]:
    """Mostly inputs near the chat's routes (duplicates weight the matches), some noise."""
    known = [t for route in chat.routes for t in triggers(route)] + list(MISSES)
    noise = st.text(st.characters(codec="utf-8"), max_size=8)
    likely = st.sampled_from(known)
    return st.one_of(likely, likely, likely, noise)


OPERATIONS = ("submit", "submit", "submit", "retry", "regenerate", "edit", "save_edit", "truncate")

Op = tuple[str, int, str]


@st.composite
def scenarios(draw) -> tuple[ChatSpec, list[Op]]:
    chat = draw(chats())
    text = contents(chat)
    ops = draw(
        st.lists(
            st.tuples(st.sampled_from(OPERATIONS), st.integers(0, 30), text),
            min_size=3,
            max_size=30,
        )
    )
    return chat, ops


# --- the model: rules 1-4, 6 and 7 without checkpoints --------------------------------------


@dataclass(frozen=True)
class Expected:
    outcome: type
    instance: StatechartInstance
    """The position the dispatch commits (for a failure, the rebuilt one; not compared)."""
    decisions: tuple[Decision, ...]
    decision: Decision | None = None
    replayed: bool = False
    route_id: str | None = None
    calls: int = 0


def eligible(chat: ChatSpec, route: RouteSpec, state: str) -> bool:
    allowed = route.states is None or state in route.states
    return allowed and route.event in chat.transitions[state]


def derives(route: RouteSpec) -> bool:
    """Whether the response is a template over a declarative matcher (not stored in records)."""
    return route.matcher != "handler" and route.response != "callable"


def full(decisions: Any) -> list[tuple[Decision, str]]:
    """Decisions with their responses (Decision equality ignores the response)."""
    return [(d, d.response) for d in decisions]


def match_groups(route: RouteSpec, text: str) -> dict[str, str] | None:
    if route.matcher == "command":
        return {} if text == route.value else None
    if route.matcher == "exact":
        return {} if normalize_exact(text) == normalize_exact(route.value) else None
    if route.matcher == "pattern":
        found = re.fullmatch(pattern_of(route.value), text)
        return None if found is None else found.groupdict()
    return handler_groups(route.value, text)


def expect(chat: ChatSpec, state: ConversationState, history: list[Message]) -> Expected:
    """What dispatching `history` against `state` must do, from the rules alone."""
    users = [m for m in history if m.role == Role.USER]
    current, version, kept = chat.initial, 0, []
    for message in users[:-1]:
        d = state.decisions.get(message.id)
        if (
            d is None
            or d.from_state != current
            or d.input_digest != DIGESTER.digest(message.content)
        ):
            continue
        if chat.transitions[current].get(d.event) != d.to_state:
            continue
        current, version = d.to_state, version + 1
        kept.append(d)
    here = StatechartInstance(SESSION, current, version)
    if not users:
        return Expected(DelegateOutcome, here, tuple(kept))
    last = users[-1]
    digest = DIGESTER.digest(last.content)
    prior = state.decisions.get(last.id)
    if (
        prior is not None
        and prior.input_digest == digest
        and prior.from_state == current
        and chat.transitions[current].get(prior.event) == prior.to_state
    ):
        replayed = prior
        if prior.derived:  # A template response is re-rendered from the input, not stored.
            route = next(r for r in chat.routes if r.id == prior.route_id)
            groups = match_groups(route, last.content)
            assert groups is not None, "an unchanged input stopped matching its route"
            response = expected_response(route, last.content, last.id, groups)
            replayed = replace(prior, response=response)
        moved = StatechartInstance(SESSION, prior.to_state, version + 1)
        return Expected(RouteOutcome, moved, (*kept, replayed), replayed, replayed=True)
    calls = 0
    for route in chat.routes:
        if not eligible(chat, route, current):
            continue
        explodes = route.raises and "boom" in last.content
        if route.matcher == "handler":
            calls += 1
            if explodes:
                return Expected(FailureOutcome, here, (), route_id=route.id, calls=calls)
        groups = match_groups(route, last.content)
        if groups is None:
            continue
        if route.response == "callable":
            calls += 1
            if explodes:
                return Expected(FailureOutcome, here, (), route_id=route.id, calls=calls)
        target = chat.transitions[current][route.event]
        decision = Decision(
            message_id=last.id,
            input_digest=digest,
            route_id=route.id,
            kind=TurnKind(route.kind),
            event=route.event,
            from_state=current,
            to_state=target,
            response=expected_response(route, last.content, last.id, groups),
            derived=derives(route),
        )
        moved = StatechartInstance(SESSION, target, version + 1)
        return Expected(
            RouteOutcome, moved, (*kept, decision), decision, route_id=route.id, calls=calls
        )
    return Expected(DelegateOutcome, here, tuple(kept), calls=calls)


# --- invariants -----------------------------------------------------------------------------


def assert_replays(
    definition: ChatDefinition, state: ConversationState, committed: list[Message]
) -> None:
    """Invariant 1: the state is the replay of its decisions over the committed history."""
    users = [m for m in committed if m.role == Role.USER]
    position = {m.id: i for i, m in enumerate(users)}
    content = {m.id: m.content for m in users}
    ids = list(state.decisions)
    assert set(ids) <= set(position), "a decision outlived its user message"
    assert ids == sorted(ids, key=position.__getitem__), "decisions are not in history order"
    chart = definition.compiled.chart
    instance = create_instance(chart, id=SESSION)
    for message_id in ids:
        decision = state.decisions[message_id]
        assert decision.message_id == message_id
        assert decision.input_digest == DIGESTER.digest(content[message_id]), "stale decision kept"
        assert decision.from_state == instance.state, "decision does not start at the replay"
        moved = transition(chart, instance, decision.event)
        assert isinstance(moved, Accepted)
        assert moved.to_state == decision.to_state
        instance = moved.instance
    assert state.instance == instance, "state differs from the replay of its decisions"


def assert_round_trips(definition: ChatDefinition, state: ConversationState) -> ConversationState:
    """Invariant 5: a persisted record decodes to the same state and decisions."""
    record = SessionRecord(
        session_id=SESSION,
        definition_id=definition.id,
        revision=definition.revision,
        conversation=state,
    )
    data = encode_session_record(record)
    decoded = decode_session_record(data, definition=definition, session_id=SESSION)
    assert decoded.conversation.instance == state.instance
    assert list(decoded.conversation.decisions.items()) == list(state.decisions.items())
    for decision in state.decisions.values():
        restored = decoded.conversation.decisions[decision.message_id]
        assert restored.derived == decision.derived
        if not decision.derived:
            assert restored.response == decision.response
    stored = json.loads(data)["decisions"]
    assert [d["response"] is None for d in stored] == [
        d.derived for d in state.decisions.values()
    ], "a template response was stored"
    assert encode_session_record(decoded) == data
    return decoded.conversation


def summary(outcome: Outcome) -> tuple[Any, ...]:
    """What two sessions must agree on for the same dispatch."""
    if isinstance(outcome, RouteOutcome):
        return ("route", outcome.decision, outcome.response, outcome.replayed, outcome.snapshot)
    if isinstance(outcome, DelegateOutcome):
        return ("delegate", outcome.message_id, outcome.messages, outcome.snapshot)
    return ("failure", outcome.route_id, outcome.message_id, outcome.snapshot)


def assert_matches(chat: ChatSpec, outcome: Outcome, expected: Expected, calls: int) -> None:
    """The dispatch did what the model of the rules predicts, trace and snapshot included."""
    assert type(outcome) is expected.outcome, (outcome, expected)
    assert calls == expected.calls, "unexpected number of callback calls"
    state = outcome.state
    assert outcome.snapshot == ConversationSnapshot(
        state.state, tuple(chat.transitions[state.state]), chat.actions[state.state]
    )
    trace = outcome.trace
    assert trace.session_id == SESSION
    if isinstance(outcome, FailureOutcome):
        route = next(r for r in chat.routes if r.id == expected.route_id)
        assert outcome.route_id == route.id
        assert (outcome.code, trace.outcome, trace.error_code) == (
            ROUTE_FAILED,
            TurnOutcome.FAILED,
            ROUTE_FAILED,
        )
        assert (trace.kind, trace.route_id) == (TurnKind(route.kind), route.id)
        # Nothing moved: trace and snapshot (checked above) name the committed state, which a
        # failure leaves untouched even when the rebuilt position differs (an edited turn).
        assert trace.from_state == trace.to_state == state.state
        return
    assert state.instance == expected.instance
    assert full(state.decisions.values()) == full(expected.decisions)
    if isinstance(outcome, RouteOutcome):
        assert expected.decision is not None
        assert outcome.decision == expected.decision
        assert outcome.response == expected.decision.response
        assert outcome.replayed is expected.replayed
        d = outcome.decision
        assert (trace.kind, trace.route_id, trace.outcome, trace.replayed) == (
            d.kind,
            d.route_id,
            TurnOutcome.COMPLETED,
            outcome.replayed,
        )
        assert (trace.from_state, trace.to_state) == (d.from_state, d.to_state)
    else:
        assert (trace.kind, trace.outcome, trace.route_id) == (
            TurnKind.AGENTIC,
            TurnOutcome.DELEGATED,
            None,
        )
        assert trace.from_state == trace.to_state == state.state


class Client:
    """A client-side history driving one live session, checked after every step."""

    def __init__(self, chat: ChatSpec) -> None:
        self.chat = chat
        self.definition, self.calls = build(chat)
        self.session = create_chat_session(self.definition, session_id=SESSION, digest_key=KEY)
        self.history: list[Message] = []
        self.committed: list[Message] = []
        """The history of the last dispatch that committed (did not fail)."""
        self.last: tuple[list[Message], Outcome] | None = None
        """The history and outcome of the previous dispatch."""
        self.dispatches = 0
        self._next = 0

    def fresh(self, prefix: str) -> str:
        self._next += 1
        return f"{prefix}{self._next}"

    def user_indexes(self) -> list[int]:
        return [i for i, m in enumerate(self.history) if m.role == Role.USER]

    def apply(self, op: Op) -> None:
        name, number, text = op
        before = self.session.state
        if name == "submit":
            self.history.append(Message(self.fresh("u"), Role.USER, text))
            self.dispatch()
        elif name in ("retry", "regenerate"):
            users = self.user_indexes()
            if users:
                del self.history[users[-1] + 1 :]
            self.dispatch()
        elif name in ("edit", "save_edit"):
            users = self.user_indexes()
            if not users:
                return
            index = users[number % len(users)]
            edited = Message(self.history[index].id, Role.USER, text)
            if name == "edit":
                self.history[index:] = [edited]
                self.dispatch()
            else:
                self.history[index] = edited
                self.untouched(before)
        else:
            del self.history[number % (len(self.history) + 1) :]
            self.untouched(before)

    def untouched(self, before: ConversationState) -> None:
        """Invariant 4: a mutation that does not dispatch does not move the machine."""
        assert self.session.state is before
        self.check()

    def dispatch(self) -> None:
        history = list(self.history)
        before = self.session.state
        expected = expect(self.chat, before, history)

        # A session resumed from the persisted record has no checkpoints; it must agree.
        resumed = assert_round_trips(self.definition, before)
        shadow = ChatSession(self.definition, session_id=SESSION, digest_key=KEY, state=resumed)
        shadow_outcome = shadow.dispatch_sync(history)

        calls_before = self.calls.count
        outcome = self.session.dispatch_sync(history)
        calls = self.calls.count - calls_before

        assert summary(shadow_outcome) == summary(outcome), "resumed session diverged"
        assert shadow.state.instance == self.session.state.instance
        assert dict(shadow.state.decisions) == dict(self.session.state.decisions)
        assert_matches(self.chat, outcome, expected, calls)

        # Invariant 2: a replay runs no application code.
        if isinstance(outcome, RouteOutcome) and outcome.replayed:
            assert calls == 0, "a replayed turn called a route callback"
        # Invariant 2: the same history again replays instead of calling the model.
        if self.last is not None and self.last[0] == history:
            previous = self.last[1]
            if isinstance(previous, RouteOutcome):
                assert isinstance(outcome, RouteOutcome), "retry of a routed turn was delegated"
                assert outcome.replayed
                assert outcome.decision == previous.decision
                assert outcome.response == previous.response
                assert calls == 0
            else:
                assert summary(outcome) == summary(previous)
        # Invariant 3: a failure commits nothing.
        if isinstance(outcome, FailureOutcome):
            assert self.session.state is before
            assert outcome.state is before
        else:
            self.committed = history
            assert self.session.state is outcome.state

        self.last = (history, outcome)
        self.dispatches += 1
        replayed = isinstance(outcome, RouteOutcome) and outcome.replayed
        event(f"outcome: {type(outcome).__name__}{' (replayed)' if replayed else ''}")
        if len(before.decisions) > len(expected.decisions):
            event("dispatch pruned a decision")
        if isinstance(outcome, RouteOutcome):
            self.history.append(Message(self.fresh("a"), Role.ASSISTANT, outcome.response))
        elif isinstance(outcome, DelegateOutcome):
            self.history.append(Message(self.fresh("a"), Role.ASSISTANT, "model reply"))
        self.check()

    def check(self) -> None:
        state = self.session.state
        assert_replays(self.definition, state, self.committed)
        assert_round_trips(self.definition, state)
        assert self.session.snapshot() == self.definition.snapshot(state.state)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_random_histories_keep_the_session_consistent(scenario: tuple[ChatSpec, list[Op]]) -> None:
    """Invariants 1-5 and the model hold after every step of any client history."""
    chat, ops = scenario
    client = Client(chat)
    client.check()
    for op in ops:
        client.apply(op)


@settings(max_examples=100, deadline=None)
@given(scenarios())
def test_retrying_every_turn_replays_without_callbacks(scenario: tuple[ChatSpec, list[Op]]) -> None:
    """After any step, retrying twice more replays the same routed answer with no callback."""
    chat, ops = scenario
    client = Client(chat)
    for op in ops:
        dispatches = client.dispatches
        client.apply(op)
        if client.dispatches == dispatches or client.last is None:
            continue
        answered = client.last[1]
        if not isinstance(answered, RouteOutcome):
            continue
        for _ in range(2):
            before = client.calls.count
            client.apply(("retry", 0, ""))
            again = client.last[1]
            assert isinstance(again, RouteOutcome)
            assert again.replayed
            assert again.decision == answered.decision
            assert again.response == answered.response
            assert client.calls.count == before


@st.composite
def rewinds(draw) -> tuple[ChatSpec, list[str], list[tuple[int, str, str | None]]]:
    chat = draw(chats())
    near = st.sampled_from([t for route in chat.routes for t in hits(route)])
    turns = draw(st.lists(near, min_size=2, max_size=8))
    back = st.integers(1, 7)  # How many user messages before the last one the edit lands.
    then = st.none() | near  # Retry the last turn, or submit a new one.
    edits = draw(st.lists(st.tuples(back, contents(chat), then), min_size=1, max_size=3))
    return chat, turns, edits


@settings(max_examples=250, deadline=None)
@given(rewinds())
def test_saved_edits_of_earlier_turns_are_reconciled_by_the_next_dispatch(
    scenario: tuple[ChatSpec, list[str], list[tuple[int, str, str | None]]],
) -> None:
    """Rules 7-8: edit an earlier turn in place (later turns kept), then retry or go on.

    The rebuild must drop the edited turn's decision and every later decision that no longer
    starts where the replay stands; the last turn replays only from its recorded from-state.
    """
    chat, turns, edits = scenario
    client = Client(chat)
    for text in turns:
        client.apply(("submit", 0, text))
    for back, text, then in edits:
        users = len(client.user_indexes())
        client.apply(("save_edit", users - 1 - back, text))
        client.apply(("retry", 0, "") if then is None else ("submit", 0, then))
