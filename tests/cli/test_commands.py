"""`validate`, `demo`, and `serve` refusing a broken configuration; every command that
prints stopping quietly when its reader leaves."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli.fixtures.serving import (
    EXAMPLES,
    FIXTURES,
    REPO,
    SLOW_MODULE,
    base_env,
    command,
    run_cli,
)

BROKEN = FIXTURES / "broken"
UNKNOWN_ADAPTER = FIXTURES / "unknown_adapter"
BROKEN_ERRORS = [
    ("bad_initial.yaml", "conversation.initial", "unknown_initial_state"),
    ("bad_pattern.json", "conversation.routes[0].pattern", "invalid_pattern"),
    ("duplicate_route.yaml", "conversation.routes[1].id", "duplicate_route_id"),
    ("route_state.yaml", "conversation.routes[0].states[0]", "unknown_route_state"),
]
ADAPTER_ERROR = ("chat.yaml", "model.adapter", "invalid_model")


def assert_reported(output: str, directory: Path, file: str, path: str, code: str) -> None:
    """One line of `output` names the file, the path inside it and the code."""
    prefix = f"{directory / file}: {path}: "
    lines = [line for line in output.splitlines() if prefix in line]
    assert any(line.endswith(f"[{code}]") for line in lines), (prefix, code, output)


def test_validate_lists_the_example_definitions() -> None:
    result = run_cli("validate", str(EXAMPLES))
    assert result.returncode == 0, result.stderr
    assert re.search(r"^ok  orders r1: 5 states, 8 routes \(", result.stdout, re.M)
    assert re.search(r"^ok  support r1: 3 states, 2 routes \(", result.stdout, re.M)
    assert result.stderr == ""


def test_validate_checks_definitions_modules_too() -> None:
    result = run_cli("validate", str(EXAMPLES), "--definitions-module", SLOW_MODULE)
    assert result.returncode == 0, result.stderr
    listed = re.findall(r"^ok  (\S+) r1:", result.stdout, re.M)
    assert listed == ["coffee", "orders", "slow", "support"]


def test_validate_reports_every_error_with_file_path_and_code() -> None:
    result = run_cli("validate", str(BROKEN))
    assert result.returncode == 1
    assert "ok  " not in result.stdout
    assert f"{len(BROKEN_ERRORS)} definition errors:" in result.stderr
    for file, path, code in BROKEN_ERRORS:
        assert_reported(result.stderr, BROKEN, file, path, code)


def test_validate_reports_an_unknown_model_adapter() -> None:
    result = run_cli("validate", str(UNKNOWN_ADAPTER))
    assert result.returncode == 1
    assert_reported(result.stderr, UNKNOWN_ADAPTER, *ADAPTER_ERROR)
    assert "offline" in result.stderr


def test_validate_reports_an_unknown_adapter_beside_other_errors(tmp_path: Path) -> None:
    for source in [*BROKEN.iterdir(), *UNKNOWN_ADAPTER.iterdir()]:
        shutil.copy(source, tmp_path / source.name)
    result = run_cli("validate", str(tmp_path))
    assert result.returncode == 1
    for file, path, code in BROKEN_ERRORS:
        assert_reported(result.stderr, tmp_path, file, path, code)
    assert_reported(result.stderr, tmp_path, *ADAPTER_ERROR)


def test_validate_takes_one_file_as_graph_and_test_do() -> None:
    result = run_cli("validate", str(EXAMPLES / "support.yaml"))
    assert result.returncode == 0, result.stderr
    assert re.findall(r"^ok  (\S+) r1:", result.stdout, re.M) == ["support"]
    assert result.stderr == ""
    broken = run_cli("validate", str(BROKEN / "bad_initial.yaml"))
    assert broken.returncode == 1
    assert "not a directory" not in broken.stderr
    assert "1 definition error:" in broken.stderr
    assert_reported(broken.stderr, BROKEN, *BROKEN_ERRORS[0])
    adapter = run_cli("validate", str(UNKNOWN_ADAPTER / ADAPTER_ERROR[0]))
    assert adapter.returncode == 1
    assert_reported(adapter.stderr, UNKNOWN_ADAPTER, *ADAPTER_ERROR)


def test_validate_checks_a_file_and_modules_together(tmp_path: Path) -> None:
    with_module = run_cli(
        "validate", str(EXAMPLES / "orders.yaml"), "--definitions-module", SLOW_MODULE
    )
    assert with_module.returncode == 0, with_module.stderr
    assert re.findall(r"^ok  (\S+) r1:", with_module.stdout, re.M) == ["orders", "slow"]
    clash = tmp_path / "clash.yaml"
    clash.write_text(
        (EXAMPLES / "support.yaml").read_text(encoding="utf-8").replace("id: support", "id: slow")
    )
    duplicate = run_cli("validate", str(clash), "--definitions-module", SLOW_MODULE)
    assert duplicate.returncode == 1
    assert "definition 'slow' revision 1 is also defined in" in duplicate.stderr
    assert "[duplicate_definition]" in duplicate.stderr


def test_validate_names_a_missing_path() -> None:
    result = run_cli("validate", "no-such-definitions.yaml")
    assert result.returncode == 1
    assert "no-such-definitions.yaml: cannot read file" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_refuses_broken_definitions_without_starting(tmp_path: Path) -> None:
    result = run_cli(
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--state-dir",
        str(tmp_path),
        "--definitions",
        str(BROKEN),
    )
    assert result.returncode == 2
    assert "listening" not in result.stdout
    for file, path, code in BROKEN_ERRORS:
        assert_reported(result.stderr, BROKEN, file, path, code)
    assert not (tmp_path / "sessions.db").exists()


@pytest.mark.parametrize("how", ["flag", "environment"])
@pytest.mark.parametrize(
    ("url", "status", "reported"),
    [
        ("mysql://user:secret@db.example:5432/chat", 2, "unsupported store URL"),
        ("postgres://user:secret@127.0.0.1:1/chat", 1, "postgresql store connect failed"),
    ],
)
def test_serve_refuses_a_store_it_cannot_use_without_showing_its_password(
    tmp_path: Path, how: str, url: str, status: int, reported: str
) -> None:
    args = ["serve", "--listen", "127.0.0.1:0", "--state-dir", str(tmp_path)]
    args += ["--definitions", str(EXAMPLES)]
    env = {"AGENTSKIT_CHAT_DIGEST_KEY": "ab" * 32}  # a shared store needs a given key
    if how == "flag":
        args += ["--store", url]
    else:
        env["AGENTSKIT_CHAT_STORE"] = url
    result = run_cli(*args, env=env)
    assert result.returncode == status
    output = result.stdout + result.stderr
    assert reported in output
    assert "db.example" in output or "127.0.0.1" in output
    assert "secret" not in output
    assert "listening" not in output


def test_demo_walks_the_scripted_conversation() -> None:
    result = run_cli("demo", "--own-server")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    steps = [
        r"> submit '/start'\n\s+kind deterministic\s+route start\s+idle -> collecting\n"
        r"\s+response: What is your name\?",
        r"> submit '/name Ada'\n\s+kind deterministic\s+route finish\s+collecting -> complete\n",
        r"> retry the last message\n\s+kind deterministic\s+route finish\s+"
        r"collecting -> complete\s+\(replayed: [^)]*\)\n\s+response: Welcome, Ada\.",
        r"> submit 'Tell me a joke'\n\s+kind agentic\s+route -\s+complete -> complete\n",
        r"> edit the first message to 'hello'\n\s+kind agentic\s+route -\s+idle -> idle\n",
        r"> submit '/start' again\n\s+kind deterministic\s+route start\s+idle -> collecting\n",
        r"session now in state 'collecting' with 4 messages",
        r"> submit '/retrun' \(a known typo\)\n\s+kind repaired\s+route begin-typo\s+"
        r"browsing -> identifying\n",
        r"> submit '/help'\n\s+kind fallback\s+route help\s+identifying -> identifying\n",
    ]
    position = 0
    for step in steps:
        found = re.compile(step).search(out, position)
        assert found is not None, (step, out[position:])
        position = found.end()
    assert out.count("(replayed:") == 1
    assert "failed:" not in out


@pytest.mark.parametrize(
    ("args", "stdin"),
    [
        (("chat", "--definition", "support", "--definitions", str(EXAMPLES)), "/start\n"),
        (("graph", str(EXAMPLES / "orders.yaml")), ""),
        (("validate", str(EXAMPLES)), ""),
        (("test", str(EXAMPLES)), ""),
    ],
    ids=["chat", "graph", "validate", "test"],
)
def test_a_closed_stdout_ends_the_command_quietly(args: tuple[str, ...], stdin: str) -> None:
    """`agentskit-chat ... | head -0`: the reader is gone before the first line is written,
    so the first write fails with EPIPE; the command exits 141 (128 + SIGPIPE, what a shell
    shows for a program SIGPIPE ended) without a traceback."""
    process = subprocess.Popen(
        command(*args),
        cwd=REPO,
        env=base_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    process.stdout.close()  # the only read end: every write to the pipe now fails
    _, stderr = process.communicate(stdin, timeout=60)
    assert process.returncode == 141, stderr
    assert stderr == ""
