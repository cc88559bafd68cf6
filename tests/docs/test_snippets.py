"""The documentation's client programs run as written against a live `serve` with the fake
model.

A snippet is a fence right after `<!-- snippet: LANGUAGE -->` (see tests/docs/pages.py), on a
tutorial page (the README shows the same programs: tests/docs/test_examples.py): a whole
program that reads the server's address from AGENTSKIT_CHAT_TARGET and a bearer token from
AGENTSKIT_CHAT_TOKEN, creates a session of the `support` chat, prints `session ID`, streams
one agentic turn printing its deltas, and exits non-zero, naming the error reason, when a
call is refused. RUNNERS maps each language to the function that runs such a program; a
language gets its runner in the same change that adds its snippet.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from agentskit_chat.fakemodel import FakeModelServer, Reply
from agentskit_chat.transport import token_digest
from agentskit_chat_client import ChatClient
from tests import parallel
from tests.cli.conftest import Launcher
from tests.cli.conftest import launch as launch
from tests.cli.fixtures.serving import EXAMPLES, Server, base_env
from tests.contract.tooling import require_toolchain
from tests.docs.pages import README, ROOT, Block, marked
from tests.programs import (
    GO_ENV,
    TYPESCRIPT_CLIENT,
    build_typescript_client,
    go_program,
    typescript_program,
)

TOKEN = "docs-snippet-token-0123456789"
JOKE = Reply(chunks=("Why did ", "the stream ", "cross the road? ", "To reach the other side."))
RUN_TIMEOUT = 120.0
"""Seconds a snippet may take, compiling included; generous, since the machine may be busy."""

Runner = Callable[[Block, Path, Mapping[str, str]], subprocess.CompletedProcess[str]]


def run_python(
    block: Block, workdir: Path, env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    """The snippet saved as a script and run by this interpreter (the client is installed)."""
    script = workdir / "snippet.py"
    script.write_text(block.code, encoding="utf-8")
    return _run([sys.executable, str(script)], workdir, env)


def run_typescript(
    block: Block, workdir: Path, env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    """The snippet compiled as an ES module against the built client package, run by node
    (with the client's build held still meanwhile: tests/parallel.py)."""
    require_toolchain("node", "node", "npm")
    with parallel.typescript_client():
        if not (TYPESCRIPT_CLIENT / "dist" / "src" / "index.js").exists() or not _built:
            build_typescript_client()
            _built.append(True)
        program = typescript_program(workdir, block.code)
        return _run(["node", str(program)], workdir, env)


_built: list[bool] = []


def run_go(block: Block, workdir: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """The snippet as the main package of a module using the client through `replace`."""
    require_toolchain("go", "go")
    go_program(workdir, block.code)
    built = _run(["go", "build", "-o", "program", "."], workdir, {**env, **GO_ENV})
    assert built.returncode == 0, built.stderr
    return _run([str(workdir / "program")], workdir, env)


RUNNERS: dict[str, Runner] = {"python": run_python, "typescript": run_typescript, "go": run_go}


def runner_for(language: str) -> Runner:
    """The runner of `language`'s snippets; LookupError names the missing one."""
    try:
        return RUNNERS[language]
    except KeyError:
        raise LookupError(
            f"the documentation has a {language} snippet but RUNNERS in {__name__} has no runner "
            "for it"
        ) from None


def _run(
    argv: list[str], workdir: Path, env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=workdir,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


SNIPPETS = [block for block in marked("snippet") if block.path != README]


def _id(block: Block) -> str:
    page = block.path.stem if block.path else "text"
    return f"{block.name}-{page}-line{block.line}"


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


@pytest.fixture
def server(launch: Launcher, model: FakeModelServer, tmp_path: Path) -> Server:
    """`serve` over the example definitions with their model swapped for the fake model,
    requiring TOKEN."""
    definitions = tmp_path / "definitions"
    definitions.mkdir()
    for source in EXAMPLES.glob("*.yaml"):
        if source.name.endswith(".test.yaml"):
            continue
        text = source.read_text(encoding="utf-8").replace("$schema: ../../", f"$schema: {ROOT}/")
        fake = f"model: {{adapter: openai, base_url: '{model.url}', model: fake-model}}"
        text, swapped = re.subn(r"^model: .*$", fake, text, flags=re.M)
        assert swapped == 1, source
        (definitions / source.name).write_text(text, encoding="utf-8")
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(f"tokens:\n  - {{sha256: {token_digest(TOKEN)}, tenant: docs}}\n")
    return launch(
        tmp_path / "state", "--definitions", str(definitions), "--auth-tokens", str(tokens)
    )


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[_id(block) for block in SNIPPETS])
def test_the_snippet_streams_a_turn_and_reports_a_refusal(
    snippet: Block, server: Server, model: FakeModelServer, tmp_path: Path
) -> None:
    assert snippet.name is not None
    run = runner_for(snippet.name)
    workdir = tmp_path / "snippet"
    workdir.mkdir()
    env = base_env({"AGENTSKIT_CHAT_TARGET": server.target})

    refused = run(snippet, workdir, env)
    assert refused.returncode != 0, refused.stdout
    assert "ERROR_REASON_UNAUTHENTICATED" in refused.stdout + refused.stderr, refused
    assert model.requests == []

    model.enqueue(JOKE)
    done = run(snippet, workdir, {**env, "AGENTSKIT_CHAT_TOKEN": TOKEN})
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    found = re.search(r"^session (\S+)", done.stdout, re.M)
    assert found is not None, done.stdout
    assert JOKE.text in done.stdout, done.stdout  # the deltas, printed one after the other
    assert len(model.requests) == 1
    stored = asyncio.run(_messages(server.target, found.group(1)))
    assert stored == [("user", "Tell me a joke"), ("assistant", JOKE.text)]


async def _messages(target: str, session_id: str) -> list[tuple[str, str]]:
    async with ChatClient(target, token=TOKEN, timeout=30) as client:
        history = await client.get_session(session_id)
    return [(message.role, message.content) for message in history.messages]


@pytest.mark.parametrize(
    "snippet",
    [block for block in SNIPPETS if block.name == "python"],
    ids=_id,
)
def test_a_refusal_without_a_reason_prints_the_code_and_message(
    snippet: Block, tmp_path: Path
) -> None:
    """No server listens on port 1: the refusal comes from the network and has no ErrorInfo
    reason, so the program must not print one (it once printed `UNAVAILABLE None: ...`)."""
    env = base_env({"AGENTSKIT_CHAT_TARGET": "127.0.0.1:1"})
    refused = run_python(snippet, tmp_path, env)
    assert refused.returncode == 1, refused.stdout
    assert refused.stderr.startswith("UNAVAILABLE: "), refused.stderr
    assert "None" not in refused.stderr
    assert "Traceback" not in refused.stderr


def test_the_tutorials_have_a_snippet_in_every_language_and_a_runner_for_each() -> None:
    assert {block.name for block in SNIPPETS} == {"python", "typescript", "go"}
    for block in SNIPPETS:
        assert block.name in RUNNERS, runner_for(str(block.name))


def test_snippets_are_found_by_their_marker_and_language() -> None:
    text = (
        "intro\n\n<!-- snippet: python -->\n```python\nprint('py')\n```\n\n"
        "```python\nnot = 'marked'\n```\n"
        "<!-- snippet: typescript -->\n```ts\nconsole.log('ts');\nconsole.log(1);\n```\n"
        '<!-- snippet: go -->\n\n```go\nfmt.Println("too far from its marker")\n```\n'
        "<!-- commands: grpcurl -->\n```sh\ngrpcurl list\n```\n"
    )
    found = [(b.name, b.info, b.code, b.line) for b in marked("snippet", text)]
    assert found == [
        ("python", "python", "print('py')\n", 4),
        ("typescript", "ts", "console.log('ts');\nconsole.log(1);\n", 12),
    ]
    assert [b.code for b in marked("commands", text)] == ["grpcurl list\n"]


def test_a_language_without_a_runner_is_named() -> None:
    assert runner_for("python") is run_python
    with pytest.raises(LookupError, match="a cobol snippet but RUNNERS"):
        runner_for("cobol")
