"""The AG-UI front driven by the official AG-UI packages (tests/frameworks/agui) through a
live `serve` and the fake model: HttpAgent runs, and the binary encoding decoded by
@ag-ui/proto. Node.js is required unless CONTRACT_SKIP_TOOLCHAINS names `node`."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from agentskit_chat.fakemodel import HttpResponse, Reply, Script
from tests.conformance.harness import live_server
from tests.contract.tooling import ROOT, SKIP_ENV, require_toolchain, run

SCRIPTS = ROOT / "tests" / "frameworks" / "agui"
SUMMARY = re.compile(r"^# (tests|pass|fail) (\d+)$", re.M)
STREAM_TEXT = "Describe the weather in three parts"
FAIL_TEXT = "Ask the model that is down"
ANSWERS: dict[str, Script] = {
    STREAM_TEXT: Reply(chunks=("Sunny ", "with a ", "light breeze.")),
    FAIL_TEXT: HttpResponse(500, '{"error": {"message": "the model is down"}}'),
}


@pytest.mark.parametrize("script", ["http_agent.test.mjs", "binary.test.mjs"])
def test_the_official_agui_clients_against_a_live_server(tmp_path: Path, script: str) -> None:
    if "node" in os.environ.get(SKIP_ENV, "").replace(",", " ").split():
        pytest.skip(f"needs Node.js; skipped by {SKIP_ENV}")
    require_toolchain("node", "node")
    with live_server(tmp_path, answers=ANSWERS) as server:
        done = run(
            ["node", "--test", "--test-reporter=tap", str(SCRIPTS / script)],
            env={
                "AGUI_URL": server.http_url,
                "AGUI_TOKEN": server.tokens["curl"],
                "AGUI_DEFINITION": "conformance",
                "AGUI_STREAM_TEXT": STREAM_TEXT,
                "AGUI_FAIL_TEXT": FAIL_TEXT,
            },
            check=False,
        )
        log = (tmp_path / "serve.log").read_text(encoding="utf-8")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    counts = {name: int(value) for name, value in SUMMARY.findall(done.stdout)}
    expected = len(re.findall(r"^test\(", (SCRIPTS / script).read_text(), re.M))
    assert counts.get("pass") == expected, output
    for text in (STREAM_TEXT, FAIL_TEXT, "Sunny"):
        assert text not in log
