"""The React renderer (examples/react, the AI SDK's `useChat`) in headless Chromium.

The renderer is typechecked and bundled with its pinned tools, served by `serve --web-root`
on the HTTP listener beside the `/ai-sdk/` front it talks to (and from a plain static server
whose origin `--cors-origin` allows), and its browser tests
(examples/react/test, node:test driving Debian's chromium through playwright-core) then run
deterministic and agentic turns against the fake model, a command button, regenerate, stop,
a failed turn, a reload in the middle of an answer, a chat across origins and a page without
a token, with no console error anywhere but the refused request's. Tool calls run on two
chats of tests/web/react_tools.py, on a fake model of their own: the page's `local_time`
runs in the browser and the answer goes on by itself, and a call that waits for approval
is approved (it then runs) or denied (it never does); the model gets each result.
Node.js and chromium are required (`make chromium` installs chromium) unless
CONTRACT_SKIP_TOOLCHAINS names `node`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from agentskit_chat.fakemodel import (
    Call,
    Ending,
    FakeModelServer,
    HttpResponse,
    RecordedRequest,
    Reply,
    Script,
    ToolCalls,
)
from tests.conformance.harness import live_server
from tests.contract.tooling import ROOT, run
from tests.web import react_tools
from tests.web.test_renderer import (
    ARTIFACTS,
    CHROMIUM,
    SUMMARY,
    TOP_LEVEL_TEST,
    _require_browser,
    static_site,
)

TESTS = ROOT / "examples" / "react" / "test"
SCREENSHOT = ARTIFACTS / "react-renderer.png"
TOOL_SCREENSHOTS = tuple(
    ARTIFACTS / f"react-{name}.png"
    for name in ("tool-call", "approval-request", "approved", "denied")
)

STREAM_TEXT = "Describe the weather slowly"
STREAM_ANSWER = Reply(chunks=("Sunny ", "with a ", "light ", "breeze."), delay=0.3)
STORY_TEXT = "Tell me a short story"
STORY_ANSWER = Reply(chunks=("Once upon a time, ", "a session ", "kept its state."))
STALL_TEXT = "Think about it for a long while"
FAIL_TEXT = "Ask a model that is down"
SLOW_TEXT = "Explain it at length and slowly"
SLOW_ANSWER = Reply(
    chunks=(*(f"Part {n} of a long answer. " for n in range(1, 13)), "The end."),
    delay=0.25,
)
MARKUP_TEXT = "Show <i>markup</i> as text"
MARKUP_ANSWER = Reply(chunks=('<img src="x" onerror="window.injected = 1">', " and <b>bold</b>"))
ANSWERS: dict[str, Script] = {
    STREAM_TEXT: STREAM_ANSWER,
    STORY_TEXT: STORY_ANSWER,
    # One delta, then nothing until the page stops the answer.
    STALL_TEXT: Reply(chunks=("Let me think",), ending=Ending.STALL),
    FAIL_TEXT: HttpResponse(500, '{"error": {"message": "the model is down"}}'),
    # Long enough to reload the page while it streams.
    SLOW_TEXT: SLOW_ANSWER,
    # Markup in a message and in an answer, which the page must show as text.
    MARKUP_TEXT: MARKUP_ANSWER,
}

TIME_TEXT = "What time is it here?"
TIME_ARGUMENTS = '{"locale": "en-GB"}'
TIME_CALL = "call_time"
TIME_ANSWER = f"The fake model got 1 tool result ({TIME_CALL})."
"""The fake model's reply to a tool result (its `after_tools` default)."""
TOOL_ANSWERS: dict[str, Script] = {
    TIME_TEXT: ToolCalls(calls=(Call("local_time", TIME_ARGUMENTS, id=TIME_CALL),)),
    STORY_TEXT: STORY_ANSWER,
}
PAGE_TIME = {"timeZone": "Europe/Paris", "utcOffset": "+01:00", "iso": "2026-12-04T15:30:00+01:00"}
"""What the page's local_time answers on the browser's fixed clock (its wording aside)."""
DENIED = "The user denied this tool call."

__all__ = ["static_site"]  # the static server fixture of the reference renderer's test


def test_react_renderer_in_a_real_browser(
    tmp_path: Path, static_site: tuple[Path, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    _require_browser()
    site, static_port = static_site
    for path in (SCREENSHOT, *TOOL_SCREENSHOTS):
        path.unlink(missing_ok=True)
    run(["npm", "run", "build", "--workspace", "examples/react", "--", "--outdir", str(site)])
    allowed = f"http://127.0.0.1:{static_port}"
    serve_args = ["--web-root", str(site), "--cors-origin", allowed]
    serve_args += ["--definitions-module", react_tools.__name__]
    live = tmp_path / "live"
    live.mkdir()
    with (
        FakeModelServer(answers=TOOL_ANSWERS) as tools_model,
        monkeypatch.context() as patched,
    ):
        patched.setenv(react_tools.MODEL_ENV, tools_model.url)
        done = _run_browser_tests(live, serve_args, allowed)
        tool_requests = list(tools_model.requests)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    counts = {name: int(value) for name, value in SUMMARY.findall(done.stdout)}
    print(f"React renderer in chromium: {counts}")
    expected = sum(
        len(TOP_LEVEL_TEST.findall(path.read_text(encoding="utf-8")))
        for path in TESTS.glob("*.test.mjs")
    )
    assert counts.get("tests") == expected, output
    assert counts.get("pass") == expected, output
    assert not counts.get("skipped"), output
    assert not counts.get("todo"), output
    for path in (SCREENSHOT, *TOOL_SCREENSHOTS):
        assert path.stat().st_size > 0, path
    _assert_tool_results(tool_requests)


def _assert_tool_results(requests: list[RecordedRequest]) -> None:
    """Every request of the tool chats declared the page's local_time; the model got the
    page's output for the call run (the tool round and the approved call) and the denial for
    the denied one, in that order."""
    results: list[object] = []
    for request in requests:
        body = request.body
        assert isinstance(body, dict)
        declared = [tool["function"]["name"] for tool in body.get("tools") or []]
        assert declared == ["local_time"], declared
        last = body["messages"][-1]
        if last["role"] == "tool":
            assert last["tool_call_id"] == TIME_CALL
            content = last["content"]
            results.append(DENIED if content == DENIED else json.loads(content))
    assert len(results) == 3, results
    *ran, denied = results
    for output in ran:
        assert isinstance(output, dict)
        assert {key: output[key] for key in PAGE_TIME} == PAGE_TIME, output
        assert "15:30:00" in output["localTime"], output
    assert denied == DENIED


def _run_browser_tests(
    live: Path, serve_args: list[str], allowed: str
) -> subprocess.CompletedProcess[str]:
    with live_server(live, serve_args=serve_args, answers=ANSWERS) as server:
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
                "AGENTSKIT_REACT_URL": f"{server.http_url}/",
                "AGENTSKIT_REACT_CROSS_URL": f"{allowed}/?server={server.http_url}",
                "AGENTSKIT_REACT_TOKEN": server.tokens["typescript"],
                "AGENTSKIT_REACT_DEFINITION": "conformance",
                "AGENTSKIT_REACT_ARTIFACTS": str(ARTIFACTS),
                "AGENTSKIT_REACT_CHROMIUM": shutil.which(CHROMIUM) or CHROMIUM,
                "AGENTSKIT_REACT_STREAM_TEXT": STREAM_TEXT,
                "AGENTSKIT_REACT_STREAM_ANSWER": STREAM_ANSWER.text,
                "AGENTSKIT_REACT_STORY_TEXT": STORY_TEXT,
                "AGENTSKIT_REACT_STORY_ANSWER": STORY_ANSWER.text,
                "AGENTSKIT_REACT_STALL_TEXT": STALL_TEXT,
                "AGENTSKIT_REACT_FAIL_TEXT": FAIL_TEXT,
                "AGENTSKIT_REACT_SLOW_TEXT": SLOW_TEXT,
                "AGENTSKIT_REACT_SLOW_ANSWER": SLOW_ANSWER.text,
                "AGENTSKIT_REACT_MARKUP_TEXT": MARKUP_TEXT,
                "AGENTSKIT_REACT_MARKUP_ANSWER": MARKUP_ANSWER.text,
                "AGENTSKIT_REACT_TOOLS_DEFINITION": react_tools.TOOLS,
                "AGENTSKIT_REACT_APPROVAL_DEFINITION": react_tools.APPROVAL,
                "AGENTSKIT_REACT_TIME_TEXT": TIME_TEXT,
                "AGENTSKIT_REACT_TIME_ARGUMENTS": TIME_ARGUMENTS,
                "AGENTSKIT_REACT_TIME_ANSWER": TIME_ANSWER,
            },
            check=False,
        )
