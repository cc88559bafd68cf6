"""The corpus and the TypeScript client's own tests through `node --test`.

`npm test --workspace client/typescript` compiles the client with `tsc --strict` and runs
its tests: one per scenario file and protocol (test/conformance*.test.ts: native gRPC, then
Connect with JSON over HTTP/1.1 and gRPC-Web over HTTP/2 on the HTTP listener, each with a
tenant of its own) plus the unit and live tests, against the harness's server, and the TLS
tests against a `serve` that requires client certificates. Node.js is required unless
CONTRACT_SKIP_TOOLCHAINS names `node`.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import parallel
from tests.cli.fixtures.serving import Server, base_env, command
from tests.contract.tooling import NODE_BIN, ROOT, require_toolchain, run
from tests.transport.certs import Authority

from .harness import LiveServer, load_scenarios

CLIENT = ROOT / "client" / "typescript"
SUMMARY = re.compile(r"^(?:#|\u2139) (tests|pass|fail|cancelled|skipped|todo) (\d+)$", re.M)
PASSED = re.compile(r"^ok \d+ - (.+)$", re.M)
TOP_LEVEL_TEST = re.compile(r"^test\(", re.M)
PROTOCOLS = ("grpc", "connect", "grpcweb")
"""The corpus runs, one test file each (client/typescript/conformance/protocols.ts)."""


def _client_tests() -> int:
    """The client's own tests: the top-level `test(` calls of every test file but the corpus."""
    files = [p for p in (CLIENT / "test").glob("*.test.ts") if not p.name.startswith("conformance")]
    return sum(len(TOP_LEVEL_TEST.findall(p.read_text(encoding="utf-8"))) for p in files)


def _test_name(protocol: str, scenario: str) -> str:
    """A scenario's test name in the run over `protocol`, as protocols.ts `testName` makes it."""
    return scenario if protocol == "grpc" else f"{protocol}: {scenario}"


@pytest.fixture
def tls_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A `serve` on TLS that requires client certificates, and what the TLS test reads."""
    authority = Authority(tmp_path)
    server_cert = authority.issue("server", server=True)
    client_cert = authority.issue("client", server=False)
    argv = command(
        *("serve", "--listen", "127.0.0.1:0", "--state-dir", str(tmp_path / "state")),
        *("--tls-cert", str(server_cert.cert), "--tls-key", str(server_cert.key)),
        *("--tls-client-ca", str(authority.cert)),
    )
    stderr_path = tmp_path / "serve.stderr"
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=base_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            bufsize=0,
        )
        server = Server(process, stderr, stderr_path)
        try:
            server.wait_listening()
            yield {
                "AGENTSKIT_CHAT_TLS_TARGET": server.target,
                "AGENTSKIT_CHAT_TLS_CA": str(authority.cert),
                "AGENTSKIT_CHAT_TLS_CERT": str(client_cert.cert),
                "AGENTSKIT_CHAT_TLS_KEY": str(client_cert.key),
            }
        finally:
            server.close()


def test_typescript_client_runs_the_corpus(
    conformance_server: LiveServer, tls_env: dict[str, str]
) -> None:
    require_toolchain("node", "node", "npm", NODE_BIN / "tsc")
    # `npm test` compiles the client into client/typescript/dist again (tests/parallel.py).
    with parallel.typescript_client():
        done = run(
            ["npm", "test", "--workspace", "client/typescript"],
            env={**conformance_server.env("typescript"), **tls_env},
            check=False,
        )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    counts = {name: int(value) for name, value in SUMMARY.findall(done.stdout)}
    scenarios = [scenario.name for scenario in load_scenarios()]
    own = _client_tests()
    runs = len(PROTOCOLS)
    print(
        f"typescript: {counts} ({len(scenarios)} scenarios x {runs} protocols, {own} client tests)"
    )
    assert counts.get("tests") == len(scenarios) * runs + own, output
    assert counts.get("pass") == counts.get("tests"), output
    assert not counts.get("skipped"), output
    assert not counts.get("todo"), output
    passed = set(PASSED.findall(done.stdout))
    expected = [_test_name(protocol, name) for protocol in PROTOCOLS for name in scenarios]
    assert [name for name in expected if name not in passed] == [], output
