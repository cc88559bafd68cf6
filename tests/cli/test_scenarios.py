"""`agentskit-chat test` as a real process: in-process, against a live `serve`, JUnit XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import EXAMPLES, run_cli

FAILING = """\
definition: support
cases:
  - name: passes
    steps:
      - submit: /start
        expect: {route: start, state: collecting}
  - name: wrong state
    steps:
      - submit: /start
      - submit: /name Ada
        expect: {state: collecting, text: "Welcome, Bob."}
"""


def test_the_example_files_pass_in_process_with_a_junit_report(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    done = run_cli("test", "examples/definitions", "--junit", str(report))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "examples/definitions/coffee.test.yaml"
    assert "  ok    a known typo is repaired without the model (1 step)" in lines
    assert "examples/definitions/support.test.yaml" in lines
    assert lines[-1] == "22 passed, 0 failed"
    root = ET.parse(report).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("22", "0", "0")
    assert [s.get("name") for s in root.iter("testsuite")] == [
        "examples/definitions/coffee.test.yaml",
        "examples/definitions/orders.test.yaml",
        "examples/definitions/support.test.yaml",
    ]


def test_a_failure_prints_a_diff_exits_1_and_is_in_the_junit_report(tmp_path: Path) -> None:
    path = tmp_path / "support.test.yaml"
    path.write_text(FAILING, encoding="utf-8")
    report = tmp_path / "report.xml"
    done = run_cli("test", str(path), "--definitions", str(EXAMPLES), "--junit", str(report))
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[1:] == [
        "  ok    passes (1 step)",
        "  FAIL  wrong state",
        "        step 2 of 2: submit '/name Ada'",
        "          state",
        "            expected 'collecting'",
        "            actual   'complete'",
        "          text  (- expected, + actual)",
        "            - Welcome, Bob.",
        "            ?          ^^^",
        "            + Welcome, Ada.",
        "            ?          ^^^",
        "1 passed, 1 failed",
    ]
    failure = ET.parse(report).getroot().find("testsuite/testcase[@name='wrong state']/failure")
    assert failure is not None
    assert failure.get("message") == (
        "step 2: state: expected 'collecting', got 'complete'; "
        "text: expected 'Welcome, Bob.', got 'Welcome, Ada.'"
    )


def test_an_invalid_file_runs_nothing_and_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.test.yaml"
    path.write_text(
        "definition: support\ncases:\n  - name: x\n    steps:\n      - submit: /start\n"
        "        expect: {kind: clever}\n",
        encoding="utf-8",
    )
    done = run_cli("test", str(path), "--definitions", str(EXAMPLES))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip() == (
        f"{path}: cases[0].steps[0].expect.kind: "
        "kind is one of: deterministic, agentic, repaired, fallback"
    )
    (tmp_path / "empty").mkdir()
    empty = run_cli("test", str(tmp_path / "empty"))
    assert empty.returncode == 2
    assert "no test files" in empty.stderr
    missing = run_cli("test", str(tmp_path / "missing.test.yaml"))
    assert missing.returncode == 2
    assert "missing.test.yaml: cannot read the file" in missing.stderr


def test_the_example_files_pass_against_a_live_server(launch: Launcher) -> None:
    server = launch(None, "--store", "memory://")
    done = run_cli("test", "examples/definitions", "--target", server.target)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "22 passed, 0 failed"
    assert "        note: step 1: text not checked (canned model reply)" in done.stdout


def test_a_failure_against_a_live_server_exits_1(launch: Launcher, tmp_path: Path) -> None:
    server = launch(None, "--store", "memory://")
    path = tmp_path / "support.test.yaml"
    path.write_text(FAILING, encoding="utf-8")
    done = run_cli("test", str(path), "--target", server.target)
    assert done.returncode == 1
    assert "            actual   'complete'" in done.stdout.splitlines()


def test_an_unreachable_server_is_an_error_per_case(tmp_path: Path) -> None:
    path = tmp_path / "support.test.yaml"
    path.write_text(FAILING, encoding="utf-8")
    report = tmp_path / "report.xml"
    done = run_cli("test", str(path), "--target", "127.0.0.1:1", "--junit", str(report))
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1] == "0 passed, 0 failed, 2 errors"
    assert "session of 'support' refused: UNAVAILABLE" in done.stdout
    assert ET.parse(report).getroot().get("errors") == "2"
