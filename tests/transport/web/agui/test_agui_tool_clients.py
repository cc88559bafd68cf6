"""Frontend tools driven by the official AG-UI packages (tests/frameworks/agui/tools.test.mjs)
through a live listener and the probe model: HttpAgent's tool round, an interrupt and its
resume, and the binary encoding of tool events. Node.js is required unless
CONTRACT_SKIP_TOOLCHAINS names `node`."""

from __future__ import annotations

import asyncio
import logging
import os
import re
from pathlib import Path

import pytest

from tests.contract.tooling import ROOT, SKIP_ENV, TIMEOUT, require_toolchain
from tests.transport.conftest import CANARY, run
from tests.transport.web.conftest import web_live

SCRIPT = ROOT / "tests" / "frameworks" / "agui" / "tools.test.mjs"
SUMMARY = re.compile(r"^# (tests|pass|fail) (\d+)$", re.M)


def test_httpagent_runs_frontend_tools_against_a_live_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if "node" in os.environ.get(SKIP_ENV, "").replace(",", " ").split():
        pytest.skip(f"needs Node.js; skipped by {SKIP_ENV}")
    require_toolchain("node", "node")
    caplog.set_level(logging.INFO)

    async def scenario() -> tuple[int, str, str]:
        async with web_live(tmp_path) as web:
            node = await asyncio.create_subprocess_exec(
                "node",
                "--test",
                "--test-reporter=tap",
                str(SCRIPT),
                cwd=ROOT,
                env={
                    **os.environ,
                    "AGUI_URL": web.url,
                    "AGUI_DEFINITION": "probe",
                    "AGUI_APPROVE_DEFINITION": "probe-approve",
                    "AGUI_SECRET": CANARY,
                },
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(node.communicate(), TIMEOUT)
            return node.returncode or 0, out.decode(), err.decode()

    code, out, err = run(scenario())
    assert code == 0, out + err
    counts = {name: int(value) for name, value in SUMMARY.findall(out)}
    expected = len(re.findall(r"^test\(", SCRIPT.read_text(), re.M))
    assert counts.get("pass") == expected, out + err
    assert all(CANARY not in r.getMessage() for r in caplog.records)
