"""The corpus through the Go client, and the Go client's own checks.

`go vet` and `go test` run in client/go with the live server's environment, so the Go
runner (client/go/chatclient/conformance_test.go) runs every scenario; the runnable example
and the README's snippet run against the same server. Without Go these tests fail unless
CONTRACT_SKIP_TOOLCHAINS names "go".
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

from tests.contract.tooling import ROOT, require_toolchain, run
from tests.programs import go_program

from .harness import CORPUS, SCENARIOS, LiveServer

MODULE = ROOT / "client" / "go"
README = MODULE / "README.md"


def _go_env(server: LiveServer) -> dict[str, str]:
    flags = os.environ.get("GOFLAGS", "")
    return {
        **server.env("go"),
        # go.sum pins every module; nothing may change go.mod or go.sum during a test run.
        "GOFLAGS": f"{flags} -mod=readonly -buildvcs=false".strip(),
        "GOWORK": "off",
    }


def _client_env(server: LiveServer) -> dict[str, str]:
    env = server.env("go")
    return {
        "AGENTSKIT_CHAT_TARGET": env["AGENTSKIT_CHAT_CONFORMANCE_TARGET"],
        "AGENTSKIT_CHAT_TOKEN": env["AGENTSKIT_CHAT_CONFORMANCE_TOKEN"],
    }


def test_go_vet_and_tests_run_the_whole_corpus(conformance_server: LiveServer) -> None:
    require_toolchain("go", "go", "gofmt")
    env = _go_env(conformance_server)
    unformatted = run(["gofmt", "-l", "."], cwd=MODULE).stdout.split()
    assert not unformatted, f"gofmt -w these files in client/go: {unformatted}"
    run(["go", "vet", "./..."], cwd=MODULE, env=env)
    done = run(["go", "test", "-count=1", "-timeout=300s", "-v", "./..."], cwd=MODULE, env=env)

    scenarios = sorted(path.stem for path in SCENARIOS.glob("*.yaml"))
    passed = sorted(re.findall(r"^\s*--- PASS: TestConformance/(\S+)", done.stdout, re.M))
    tests = re.findall(r"^--- PASS: (\S+)", done.stdout, re.M)
    print(f"go: {len(passed)} of {len(scenarios)} scenarios passed, {len(tests)} go tests passed")
    assert passed == scenarios, done.stdout

    # The runner's matcher decides every shared matching case (go test names a subtest
    # with its spaces as underscores).
    cases = yaml.safe_load((CORPUS / "matching-cases.yaml").read_text(encoding="utf-8"))
    decided = re.findall(r"^\s*--- PASS: TestMatchingCases/(\S+)", done.stdout, re.M)
    assert sorted(decided) == sorted(case["name"].replace(" ", "_") for case in cases)


def test_go_example_runs(conformance_server: LiveServer) -> None:
    require_toolchain("go", "go")
    env = {**_go_env(conformance_server), **_client_env(conformance_server)}
    done = run(["go", "run", "./example"], cwd=MODULE, env=env)
    assert "What is your name?" in done.stdout
    assert "[collecting] next: finish" in done.stdout


def test_go_readme_snippet_runs_with_a_replace_directive(
    conformance_server: LiveServer, tmp_path: Path
) -> None:
    """The snippet as a program of its own module, using the client through `replace` as
    the README's install section says: refused without a token, a turn streamed with one."""
    require_toolchain("go", "go")
    (snippet,) = re.findall(r"```go\n(package main\n.*?)```", README.read_text(), re.S)
    go_program(tmp_path, snippet)
    env = {**_go_env(conformance_server), **_client_env(conformance_server)}
    run(["go", "build", "-o", "snippet", "."], cwd=tmp_path, env=env)

    refused = run(
        [tmp_path / "snippet"], cwd=tmp_path, env={**env, "AGENTSKIT_CHAT_TOKEN": ""}, check=False
    )
    assert refused.returncode == 1, refused
    assert "chat: UNAUTHENTICATED ERROR_REASON_UNAUTHENTICATED: " in refused.stderr, refused

    done = run([tmp_path / "snippet"], cwd=tmp_path, env=env)
    assert re.search(r"^session \S+ in state idle$", done.stdout, re.M), done.stdout
    assert "\ncompleted in state idle\n" in done.stdout, done.stdout
