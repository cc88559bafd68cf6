"""Running cases: in-process and against a live server, the same file means the same thing."""

from __future__ import annotations

import asyncio
import secrets
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import pytest

from agentskit_chat.conversation import define_chat, load_definitions
from agentskit_chat.models import OFFLINE_REPLY
from agentskit_chat.scenarios import (
    CaseResult,
    InProcessTarget,
    RemoteTarget,
    Target,
    TestFile,
    junit_xml,
    load_test_file,
    parse_test_file,
    run_file,
    text_report,
)
from agentskit_chat.service import Catalog, ChatService
from agentskit_chat.storage import MemoryStore
from agentskit_chat.transport import start_server
from tests.cli.fixtures.serving import EXAMPLES

T = TypeVar("T")
DEFINITIONS = list(load_definitions(EXAMPLES).values())


@asynccontextmanager
async def live_target() -> AsyncIterator[Target]:
    service = ChatService(Catalog(DEFINITIONS), MemoryStore(), digest_key=secrets.token_bytes(32))
    server = await start_server(service, "127.0.0.1:0")
    target = RemoteTarget(f"127.0.0.1:{server.port}", timeout=10)
    try:
        yield target
    finally:
        await target.close()
        await server.drain(1.0)


@asynccontextmanager
async def in_process_target() -> AsyncIterator[Target]:
    target = InProcessTarget(DEFINITIONS)
    try:
        yield target
    finally:
        await target.close()


TARGETS = {"in-process": in_process_target, "live": live_target}


def run_with(kind: str, scenario: Callable[[Target], Awaitable[T]]) -> T:
    async def main() -> T:
        async with TARGETS[kind]() as target:
            return await scenario(target)

    return asyncio.run(main())


def results_of(kind: str, data: dict[str, Any]) -> list[CaseResult]:
    test_file = parse_test_file(data, file="t.test.yaml")
    return run_with(kind, lambda target: run_file(target, test_file))


def one_case(*steps: dict[str, Any], definition: str = "support") -> dict[str, Any]:
    return {"definition": definition, "cases": [{"name": "case", "steps": list(steps)}]}


@pytest.mark.parametrize("kind", TARGETS)
def test_the_example_test_files_pass_on_both_targets(kind: str) -> None:
    for path in sorted(EXAMPLES.glob("*.test.yaml")):
        test_file = load_test_file(path)

        async def scenario(target: Target, test_file: TestFile = test_file) -> list[CaseResult]:
            return await run_file(target, test_file)

        results = run_with(kind, scenario)
        assert [r.name for r in results if not r.passed] == [], text_report(results)
        assert len(results) == len(test_file.cases)


@pytest.mark.parametrize("kind", TARGETS)
def test_a_wrong_expectation_fails_at_its_step_and_later_steps_do_not_run(kind: str) -> None:
    (result,) = results_of(
        kind,
        one_case(
            {"submit": "/start"},
            {"submit": "/name Ada", "expect": {"state": "collecting", "text": "Welcome, Bob."}},
            {"submit": "/never-run"},
        ),
    )
    assert not result.passed
    assert result.ran == 2
    assert result.steps == 3
    assert result.failure is not None
    assert result.failure.index == 2
    found = {m.name: (m.expected, m.actual) for m in result.failure.mismatches}
    assert found == {
        "state": ("collecting", "complete"),
        "text": ("Welcome, Bob.", "Welcome, Ada."),
    }
    report = text_report([result])
    assert "step 2 of 3: submit '/name Ada'" in report
    assert "- Welcome, Bob." in report
    assert "+ Welcome, Ada." in report
    assert report.endswith("0 passed, 1 failed\n")


@pytest.mark.parametrize("kind", TARGETS)
def test_an_unexpected_refusal_fails_the_step_even_when_not_asked_about(kind: str) -> None:
    (result,) = results_of(kind, one_case({"regenerate": None, "expect": {"state": "idle"}}))
    assert result.failure is not None
    assert [(m.name, m.expected, m.actual) for m in result.failure.mismatches] == [
        ("error", None, "INVALID_ARGUMENT"),
        ("state", "idle", ""),
    ]
    assert "  error\n            expected nothing\n            actual   'INVALID_ARGUMENT'" in (
        text_report([result])
    )


@pytest.mark.parametrize("kind", TARGETS)
def test_a_message_position_past_the_history_stops_the_case(kind: str) -> None:
    (result,) = results_of(
        kind, one_case({"submit": "/start"}, {"edit": {"message": 2, "text": "x"}})
    )
    assert result.failure is not None
    assert result.failure.problem == "the history holds 1 user messages, not 2"
    (truncated,) = results_of(kind, one_case({"submit": "/start"}, {"truncate": {"keep": 3}}))
    assert truncated.failure is not None
    assert truncated.failure.problem == "the history holds 2 messages, not 3"


@pytest.mark.parametrize("kind", TARGETS)
def test_an_unknown_definition_is_a_case_error(kind: str) -> None:
    (result,) = results_of(kind, one_case({"submit": "hi"}, definition="nowhere"))
    assert result.error == "session of 'nowhere' refused: DEFINITION_NOT_FOUND"
    assert text_report([result]).splitlines()[1:] == [
        "  ERROR case",
        "        session of 'nowhere' refused: DEFINITION_NOT_FOUND",
        "0 passed, 0 failed, 1 error",
    ]


def test_canned_replies_answer_in_process_and_are_not_checked_against_a_live_server() -> None:
    data = one_case(
        {"submit": "hello", "model": "Canned.", "expect": {"kind": "agentic", "text": "Canned."}},
        {"submit": "again", "expect": {"kind": "agentic", "text": OFFLINE_REPLY}},
    )
    (inside,) = results_of("in-process", data)
    assert inside.passed
    assert inside.notes == ()
    (live,) = results_of("live", data)
    assert live.passed
    assert live.notes == ("step 1: text not checked (canned model reply)",)


def test_in_process_runs_never_call_the_configured_model() -> None:
    chat = define_chat(
        id="remote-model",
        model={"adapter": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"},
        conversation={"initial": "a", "states": {"a": {}}},
    )
    test_file = parse_test_file(
        one_case(
            {"submit": "hi", "model": "Offline answer.", "expect": {"text": "Offline answer."}},
            definition="remote-model",
        )
    )

    async def scenario() -> list[CaseResult]:
        target = InProcessTarget([chat])
        try:
            return await run_file(target, test_file)
        finally:
            await target.close()

    (result,) = asyncio.run(scenario())
    assert result.passed, text_report([result])


def test_junit_report_has_a_suite_per_file_and_a_failure_per_failed_case() -> None:
    passing = results_of("in-process", one_case({"submit": "/start", "expect": {"route": "start"}}))
    failing = results_of(
        "in-process", one_case({"submit": "/start", "expect": {"route": "finish"}})
    )
    broken = results_of("in-process", one_case({"submit": "x"}, definition="nowhere"))
    other = [
        CaseResult("u.test.yaml", r.name, r.steps, r.ran, r.seconds, r.failure, r.error)
        for r in failing
    ]
    root = ET.fromstring(junit_xml([*passing, *broken, *other]))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "1", "1")
    suites = root.findall("testsuite")
    assert [(s.get("name"), s.get("tests")) for s in suites] == [
        ("t.test.yaml", "2"),
        ("u.test.yaml", "1"),
    ]
    failure = suites[1].find("testcase/failure")
    assert failure is not None
    assert failure.get("message") == "step 1: route: expected 'finish', got 'start'"
    assert "expected 'finish'" in (failure.text or "")
    error = suites[0].findall("testcase")[1].find("error")
    assert error is not None
    assert "DEFINITION_NOT_FOUND" in (error.get("message") or "")
