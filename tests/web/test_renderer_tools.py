"""Tool calls in the reference web renderer (examples/web), in headless Chromium.

The renderer is built as in tests/web/test_renderer.py and served by `serve --web-root`
with the two chats of tests/web/renderer_tools.py, on a fake model of their own. Its tool
tests (examples/web/test-tools, node:test driving Debian's chromium through playwright-core)
ask what time it is: the model calls the page's `local_time`, which runs in the browser, its
card shows the call and its result, and the answer after the result streams; a call that
waits for approval is approved (it then runs) or denied with a reason (it never does); a
reload shows the stored cards, and asks again for a call that still waits; a second window
shows the first one's calls and runs none of them. The model must get the page's
declaration with every request, the page's output for each call run and the denial, with
its reason, for the one denied.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from agentskit_chat.fakemodel import (
    Call,
    FakeModelServer,
    RecordedRequest,
    Reply,
    Script,
    ToolCalls,
)
from tests.conformance.harness import live_server
from tests.contract.tooling import ROOT, run
from tests.web import renderer_tools
from tests.web.test_renderer import (
    ARTIFACTS,
    CHROMIUM,
    SUMMARY,
    TOP_LEVEL_TEST,
    _require_browser,
)

TESTS = ROOT / "examples" / "web" / "test-tools"
SCREENSHOT = ARTIFACTS / "web-tools.png"

TIME_TEXT = "What time is it here?"
TIME_ARGUMENTS = '{"locale": "en-GB"}'
TOOL_ANSWERS: dict[str, Script] = {
    # A fresh call id each time: one session may ask twice.
    TIME_TEXT: ToolCalls(calls=(Call("local_time", TIME_ARGUMENTS),)),
}
AFTER_TOOLS = Reply(chunks=("Thanks, ", "I read ", "the tool's ", "answer."), delay=0.3)
"""The model's answer to any tool result: in chunks far enough apart to show one by one."""
PAGE_TIME = {"timeZone": "Europe/Paris", "utcOffset": "+01:00", "iso": "2026-12-04T15:30:00+01:00"}
"""What the page's local_time answers on the browser's fixed clock (its wording aside)."""
DENY_REASON = "Not now, thanks"
DENIED = f"The user denied this tool call. Reason: {DENY_REASON}"


def test_renderer_tool_calls_in_a_real_browser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _require_browser()
    SCREENSHOT.unlink(missing_ok=True)
    site = tmp_path / "site"
    run(["npm", "run", "build", "--workspace", "examples/web", "--", "--outdir", str(site)])
    serve_args = ["--web-root", str(site), "--definitions-module", renderer_tools.__name__]
    live = tmp_path / "live"
    live.mkdir()
    with (
        FakeModelServer(answers=TOOL_ANSWERS, after_tools=AFTER_TOOLS) as model,
        monkeypatch.context() as patched,
    ):
        patched.setenv(renderer_tools.MODEL_ENV, model.url)
        done = _run_browser_tests(live, serve_args)
        requests = list(model.requests)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    counts = {name: int(value) for name, value in SUMMARY.findall(done.stdout)}
    print(f"web renderer's tool calls in chromium: {counts}")
    expected = sum(
        len(TOP_LEVEL_TEST.findall(path.read_text(encoding="utf-8")))
        for path in TESTS.glob("*.test.mjs")
    )
    assert counts.get("tests") == expected, output
    assert counts.get("pass") == expected, output
    assert not counts.get("skipped"), output
    assert not counts.get("todo"), output
    assert SCREENSHOT.stat().st_size > 0
    _assert_tool_results(requests)


def _assert_tool_results(requests: list[RecordedRequest]) -> None:
    """Every request declared the page's local_time; the model got the page's output once
    for each call run (the tool round's, an approved one in each approval test, the one a
    second window watched) and the denial with its reason once, each answering the call
    just made."""
    results: list[object] = []
    for request in requests:
        body = request.body
        assert isinstance(body, dict)
        declared = [tool["function"]["name"] for tool in body.get("tools") or []]
        assert declared == ["local_time"], declared
        messages = body["messages"]
        last = messages[-1]
        if last["role"] == "tool":
            [call] = messages[-2]["tool_calls"]
            assert last["tool_call_id"] == call["id"]
            assert call["function"] == {"name": "local_time", "arguments": TIME_ARGUMENTS}
            content = last["content"]
            results.append(content if content == DENIED else json.loads(content))
    ran = [result for result in results if result != DENIED]
    assert len(ran) == 4, results
    for output in ran:
        assert isinstance(output, dict)
        assert {key: output[key] for key in PAGE_TIME} == PAGE_TIME, output
        assert "15:30:00" in output["localTime"], output
    assert results.count(DENIED) == 1, results


def _run_browser_tests(live: Path, serve_args: list[str]) -> subprocess.CompletedProcess[str]:
    with live_server(live, serve_args=serve_args) as server:
        return run(
            [
                "node",
                "--test",
                "--test-force-exit",
                "--test-concurrency=1",
                "--test-reporter=tap",
                str(TESTS),
            ],
            env={
                "AGENTSKIT_WEB_URL": f"{server.http_url}/",
                "AGENTSKIT_WEB_TOKEN": server.tokens["typescript"],
                "AGENTSKIT_WEB_ARTIFACTS": str(ARTIFACTS),
                "AGENTSKIT_WEB_CHROMIUM": shutil.which(CHROMIUM) or CHROMIUM,
                "AGENTSKIT_WEB_TOOLS_DEFINITION": renderer_tools.TOOLS,
                "AGENTSKIT_WEB_APPROVAL_DEFINITION": renderer_tools.APPROVAL,
                "AGENTSKIT_WEB_TIME_TEXT": TIME_TEXT,
                "AGENTSKIT_WEB_TIME_ARGUMENTS": TIME_ARGUMENTS,
                "AGENTSKIT_WEB_TOOLS_ANSWER": AFTER_TOOLS.text,
                "AGENTSKIT_WEB_DENY_REASON": DENY_REASON,
            },
            check=False,
        )
