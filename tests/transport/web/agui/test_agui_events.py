"""The AG-UI events of a turn's events: the state document, its patch, and event ids that
depend only on the turn's own events."""

from __future__ import annotations

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.transport.web.agui._events import TurnEvents, patch, state_document

DEFINITION = pb.Definition(
    id="d",
    initial_state="idle",
    states=[
        pb.StateInfo(name="idle", transitions=[pb.Transition(event="go", target="busy")]),
        pb.StateInfo(name="busy", actions=["stop"]),
    ],
    routes=[
        pb.RouteInfo(id="go", event="go", input_text="/go"),
        pb.RouteInfo(id="pattern", event="go", input_text=""),
        pb.RouteInfo(id="elsewhere", event="go", states=["busy"], input_text="/x"),
    ],
)


def _turn() -> list[pb.StreamTurnResponse]:
    return [
        pb.StreamTurnResponse(sequence=1, started=pb.TurnStarted(assistant_message_id="a1")),
        pb.StreamTurnResponse(
            sequence=2,
            decision=pb.TurnDecision(
                kind=pb.TURN_KIND_DETERMINISTIC, route_id="go", from_state="idle", to_state="busy"
            ),
        ),
        pb.StreamTurnResponse(sequence=3, delta=pb.TextDelta(text="he")),
        pb.StreamTurnResponse(sequence=4, delta=pb.TextDelta(text="")),
        pb.StreamTurnResponse(sequence=5, delta=pb.TextDelta(text="llo")),
        pb.StreamTurnResponse(
            sequence=6,
            completed=pb.TurnCompleted(
                assistant_message_id="a1", content="hello", snapshot=pb.Snapshot(state="busy")
            ),
        ),
    ]


def test_the_state_document_offers_the_eligible_commands() -> None:
    assert state_document(DEFINITION, "idle") == {
        "definitionId": "d",
        "revision": DEFINITION.revision,
        "state": "idle",
        "allowedEvents": ["go"],
        "actions": [],
        "commands": [{"route": "go", "input": "/go", "event": "go"}],
    }
    assert state_document(DEFINITION, "busy")["commands"] == []
    assert state_document(DEFINITION, "gone")["allowedEvents"] == []


def test_a_patch_replaces_what_changed() -> None:
    before = state_document(DEFINITION, "idle")
    after = state_document(DEFINITION, "busy")
    ops = patch(before, after)
    assert {op["path"] for op in ops} == {"/state", "/allowedEvents", "/actions", "/commands"}
    assert all(op["op"] == "replace" for op in ops)
    assert patch(after, after) == []
    assert len(patch(None, after)) == len(after)


def test_ids_follow_the_turn_and_a_replay_gives_the_same_ones() -> None:
    baseline = state_document(DEFINITION, "idle")
    translator = TurnEvents("t", "r", DEFINITION, baseline)
    events = [item for event in _turn() for item in translator.translate(event)]
    assert [(i, e["type"]) for i, e in events] == [
        ("2.0", "CUSTOM"),
        ("3.0", "TEXT_MESSAGE_START"),
        ("3.1", "TEXT_MESSAGE_CONTENT"),
        ("5.1", "TEXT_MESSAGE_CONTENT"),
        ("6.2", "TEXT_MESSAGE_END"),
        ("6.3", "STATE_DELTA"),
        ("6.4", "RUN_FINISHED"),
    ]
    assert all(e["messageId"] == "a1" for _, e in events if "messageId" in e)
    # On a resume (baseline unknown) the decision's from-state stands for it: same events.
    resumed = TurnEvents("t", "r", DEFINITION, None)
    again = [item for event in _turn() for item in resumed.translate(event)]
    assert again == events
    positions = [tuple(int(p) for p in i.split(".")) for i, _ in events]
    assert positions == sorted(set(positions))


def test_an_answer_without_deltas_is_sent_whole_and_a_failure_is_run_error() -> None:
    translator = TurnEvents("t", "r", DEFINITION, state_document(DEFINITION, "idle"))
    done = pb.StreamTurnResponse(
        sequence=3,
        completed=pb.TurnCompleted(content="all", snapshot=pb.Snapshot(state="idle")),
    )
    assert [(i, e["type"]) for i, e in translator.translate(done)] == [
        ("3.0", "TEXT_MESSAGE_START"),
        ("3.1", "TEXT_MESSAGE_CONTENT"),
        ("3.2", "TEXT_MESSAGE_END"),
        ("3.4", "RUN_FINISHED"),
    ]
    failed = pb.StreamTurnResponse(
        sequence=2, failed=pb.TurnFailed(code="model_failed", message="The model failed.")
    )
    ((event_id, event),) = TurnEvents("t", "r", DEFINITION, None).translate(failed)
    assert (event_id, event) == (
        "2.0",
        {"type": "RUN_ERROR", "message": "The model failed.", "code": "model_failed"},
    )
