"""What the corpus covers: every operation of the format, every error reason a client can
cause on a healthy server, and well-formed scenarios that every runner reads alike."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentskit.chat.v1 import chat_pb2 as pb
from tests.cli.fixtures.serving import REPO

from .harness import DEFINITIONS as DEFINITIONS_DIR
from .harness import SCENARIOS as SCENARIOS_DIR
from .harness import CorpusError, load_scenarios, model_answers

SCENARIOS = load_scenarios()
OPERATIONS = frozenset(
    {
        "list_definitions",
        "get_definition",
        "create_session",
        "get_session",
        "delete_session",
        "stream_turn",
        "await",
        "cancel",
        "truncate_history",
        "get_turn",
        "list_turns",
        "watch_turn",
        "cancel_turn",
        "watch_session",
        "ended",
    }
)
OPTIONS = frozenset({"expect", "capture", "token", "deadline_ms", "eventually"})
TURN_OPERATIONS = ("submit", "retry", "edit", "regenerate", "dispatch", "tool_results")
BACKGROUND_OPERATIONS = ("stream_turn", "watch_turn", "watch_session")
INTEGER_ARGUMENTS = (
    *("expected_cursor", "page_size", "after_sequence", "after_cursor"),
    *("definition_revision", "revision"),
)
SERVER_SIDE = {
    # reason: (why a client cannot cause it on a healthy server, the tests that produce it)
    "ERROR_REASON_SESSION_CORRUPT": (
        "needs a damaged stored record",
        "tests/transport/test_store_faults.py",
    ),
    "ERROR_REASON_WATCH_BEHIND": (
        "needs a watcher slower than the server's bound",
        "tests/service/test_session_watch.py",
    ),
    "ERROR_REASON_SHUTTING_DOWN": ("needs the server to be draining", "tests/cli/test_drain.py"),
    "ERROR_REASON_STORE_UNAVAILABLE": ("needs a failing store", "tests/cli/test_replicas.py"),
    "ERROR_REASON_DEADLINE_EXCEEDED": (
        "a client deadline ends the call with the DEADLINE_EXCEEDED status only "
        "(deadline-exceeded.yaml); a server-side turn timeout is a `failed` event",
        "tests/transport/test_errors.py",
    ),
}


def _steps() -> Iterator[tuple[str, Mapping[str, Any]]]:
    for scenario in SCENARIOS:
        for step in scenario.body["steps"]:
            yield scenario.name, step


_TEXT_ARGUMENTS = frozenset(
    {
        *("content", "turn_id", "message_id", "session", "session_id", "definition_id", "id"),
        *("until_turn", "tool_call_id", "name", "description", "arguments", "reason"),
        "tool_choice",
    }
)


def _texts(value: object) -> Iterator[object]:
    """Every argument that is text by the format (ids, contents), wherever it is nested."""
    if isinstance(value, dict):
        for key, child in value.items():
            if key in _TEXT_ARGUMENTS or key == "last_kept_message_id":
                yield child
            else:
                yield from _texts(child)
    elif isinstance(value, list):
        for child in value:
            yield from _texts(child)


def _reasons(value: object) -> Iterator[str]:
    if isinstance(value, Mapping):
        error = value.get("error")
        if isinstance(error, Mapping) and isinstance(error.get("reason"), str):
            yield error["reason"]
        for child in value.values():
            yield from _reasons(child)


def test_the_corpus_is_big_enough_and_every_scenario_says_what_it_covers() -> None:
    assert len(SCENARIOS) >= 30
    for scenario in SCENARIOS:
        assert isinstance(scenario.body.get("description"), str), scenario.name
        assert scenario.body.get("covers"), scenario.name


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_every_step_has_one_known_operation_and_known_options(scenario: Any) -> None:
    for index, step in enumerate(scenario.body["steps"]):
        operations = [key for key in step if key not in OPTIONS]
        assert len(operations) == 1, (index, step)
        assert operations[0] in OPERATIONS, (index, step)
        if operations[0] == "stream_turn":
            kinds = [k for k in TURN_OPERATIONS if k in step["stream_turn"]]
            assert len(kinds) == 1, (index, step)
            if step.get("eventually"):
                assert "turn_id" in step["stream_turn"], (index, "repeated turns name a turn id")
            _check_tools(index, step["stream_turn"])
        assert step.get("token", "") in ("", "none", "invalid", "limited"), (index, step)
        expect = step.get("expect", {})
        assert isinstance(expect, dict), (index, "expect is a mapping")
        assert isinstance(expect.get("events", []), list), (index, "events is a list")
        assert expect.get("error") != "absent", (index, "leave error out instead")
        arguments = step[operations[0]]
        if operations[0] in BACKGROUND_OPERATIONS and "background" in arguments:
            assert "capture" not in step, (index, "a background step takes no capture")
        if operations[0] == "stream_turn":
            mode = arguments.get("on_disconnect", "cancel")
            assert mode in ("continue", "cancel"), (index, "on_disconnect: continue or cancel")
        if operations[0] in ("watch_turn", "cancel_turn"):
            assert {"session", "turn_id"} <= set(arguments), (index, "session and turn_id")
        if operations[0] == "watch_session":
            assert isinstance(arguments.get("until_turn"), str), (index, "until_turn is required")
        if isinstance(arguments, dict):
            for name in INTEGER_ARGUMENTS:
                value = arguments.get(name, 0)
                assert (isinstance(value, int) and not isinstance(value, bool)) or (
                    isinstance(value, str) and re.fullmatch(r"-?[0-9]+|\$[A-Za-z_]\w*", value)
                ), (index, f"{name} is an integer or a decimal string")
        for text in _texts(step[operations[0]]):
            assert isinstance(text, str), (index, f"{text!r} must be a string")


def _check_tools(index: int, arguments: Mapping[str, Any]) -> None:
    """Tool arguments as the format writes them: declarations with a name and a schema
    mapping, booleans where the contract has booleans."""
    for tool in arguments.get("tools", []):
        assert isinstance(tool, dict), (index, tool)
        assert isinstance(tool.get("name"), str), (index, tool)
        assert isinstance(tool.get("parameters", {}), dict), (index, "parameters is a mapping")
    parallel = arguments.get("parallel_tool_calls", False)
    assert isinstance(parallel, bool), (index, "parallel_tool_calls is a boolean")
    answers = arguments.get("tool_results") or arguments.get("dispatch") or {}
    for approval in answers.get("approvals", []):
        assert isinstance(approval.get("approved"), bool), (index, "approved is a boolean")


def test_the_tool_observations_are_checked_somewhere() -> None:
    """Tool events, their `toolCalls` observation, approvals and both ways of answering a
    call (tool_results on server-held history, dispatch of tool messages on client-held)."""
    expected = [step.get("expect", {}) for _, step in _steps()]
    assert any("toolCalls" in expect for expect in expected)
    kinds = {kind.rstrip("+*") for expect in expected for kind in expect.get("events", [])}
    assert kinds >= {"tool_call_started", "tool_call_delta", "tool_call_ended"}
    covers = {tag for scenario in SCENARIOS for tag in scenario.body["covers"]}
    assert covers >= {"tools", "approval", "approve", "deny", "tool_results", "tool messages"}


def test_every_operation_and_turn_kind_is_exercised() -> None:
    used = {key for _, step in _steps() for key in step if key not in OPTIONS}
    assert used >= OPERATIONS
    turns = {k for _, step in _steps() for k in TURN_OPERATIONS if k in step.get("stream_turn", {})}
    assert turns == set(TURN_OPERATIONS)


def test_the_calls_that_outlive_a_stream_are_covered() -> None:
    """Reattach, cancel and watch each have scenarios, and the new stream observations are
    checked somewhere: a cut stream (`cancel` of a continued turn) captured and reattached."""
    covers = {tag for scenario in SCENARIOS for tag in scenario.body["covers"]}
    assert covers >= {"watch_turn", "cancel_turn", "watch_session", "on_disconnect", "reattach"}
    modes = {
        step["stream_turn"].get("on_disconnect") for _, step in _steps() if "stream_turn" in step
    }
    assert modes >= {"continue", "cancel", None}
    expected = [step.get("expect", {}) for _, step in _steps()]
    for observed in ("sequences", "lastSequence", "gapless", "sessions", "turns"):
        assert any(observed in expect for expect in expected), observed
    assert any(
        "cancel" in step and "lastSequence" in (step.get("capture") or {}).values()
        for _, step in _steps()
    ), "no scenario reattaches after the sequence a cut stream saw"


def test_revisions_are_pinned_described_and_migrated() -> None:
    """Both revision arguments are sent, and the scenarios observe what revisions change:
    the served revisions, a session's revision and a session that stays on its own."""
    arguments = {
        name
        for _, step in _steps()
        for operation, body in step.items()
        if operation in ("create_session", "get_definition") and isinstance(body, dict)
        for name in body
    }
    assert {"definition_revision", "revision"} <= arguments
    expected = repr([step.get("expect", {}) for _, step in _steps()])
    for observed in ("servedRevisions", "migratesFrom", "definitionRevision", "migrationBlocked"):
        assert observed in expected, observed
    covers = {tag for scenario in SCENARIOS for tag in scenario.body["covers"]}
    assert covers >= {"revisions", "pin", "migration", "migration_blocked"}


def test_every_definition_file_is_served_by_its_id_and_revision() -> None:
    """The harness serves every file of definitions/; no two define one id and revision."""
    seen: dict[tuple[str, int], str] = {}
    for path in sorted(DEFINITIONS_DIR.glob("*.yaml")):
        body = yaml.safe_load(path.read_text(encoding="utf-8"))
        key = (body["id"], body.get("revision", 1))
        assert key not in seen, f"{path.name} and {seen[key]} define {key}"
        seen[key] = path.name
    assert sorted(DEFINITIONS_DIR.iterdir()) == sorted(DEFINITIONS_DIR.glob("*.yaml"))


def test_every_error_reason_is_covered_or_produced_by_a_named_test() -> None:
    expected = {reason for _, step in _steps() for reason in _reasons(step.get("expect"))}
    reasons = {name for name, _ in pb.ErrorReason.items() if name != "ERROR_REASON_UNSPECIFIED"}
    assert expected <= reasons, expected - reasons
    missing = reasons - expected - set(SERVER_SIDE)
    assert not missing, f"no scenario expects {sorted(missing)}"
    for reason, (_, test_file) in SERVER_SIDE.items():
        assert reason not in expected, f"{reason} is covered now: drop it from SERVER_SIDE"
        assert reason.removeprefix("ERROR_REASON_") in (REPO / test_file).read_text(), reason


def test_model_inputs_are_unique_across_the_corpus(tmp_path: Path) -> None:
    assert model_answers(SCENARIOS)
    clash = tmp_path / "clash"
    clash.mkdir()
    for name in ("a", "b"):
        (clash / f"{name}.yaml").write_text(
            'description: x\nmodel: {"same input": {chunks: [x]}}\nsteps: []\n'
        )
    with pytest.raises(CorpusError, match="already used by a"):
        model_answers(load_scenarios(clash))


def test_no_scenario_uses_a_plain_scalar_that_yaml_versions_read_differently() -> None:
    """PyYAML reads YAML 1.1 (`yes` is true); the TypeScript and Go parsers read YAML 1.2."""
    ambiguous = re.compile(r"(?:[:\[,-]\s*)(yes|no|on|off|y|n)\s*(?:$|[,\]}#])", re.I | re.M)
    for path in sorted(SCENARIOS_DIR.glob("*.yaml")):
        found = ambiguous.search(path.read_text(encoding="utf-8"))
        assert found is None, f"{path.name}: quote {found.group(1)!r}" if found else ""
