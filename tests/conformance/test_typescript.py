"""The corpus and the TypeScript client's own tests through `node --test`.

`npm test --workspace client/typescript` compiles the client with `tsc --strict` and runs
its tests: one per scenario file (test/conformance.test.ts) plus the unit and live tests,
all against the harness's server with the TypeScript tenant's token. Node.js is required
unless CONTRACT_SKIP_TOOLCHAINS names `node`.
"""

from __future__ import annotations

import re

from tests.contract.tooling import NODE_BIN, ROOT, require_toolchain, run

from .harness import LiveServer, load_scenarios

CLIENT = ROOT / "client" / "typescript"
SUMMARY = re.compile(r"^(?:#|\u2139) (tests|pass|fail|cancelled|skipped|todo) (\d+)$", re.M)
PASSED = re.compile(r"^ok \d+ - (.+)$", re.M)
TOP_LEVEL_TEST = re.compile(r"^test\(", re.M)


def _unit_tests() -> int:
    """The client's own tests: the top-level `test(` calls of every test file but the corpus."""
    files = [p for p in (CLIENT / "test").glob("*.test.ts") if p.name != "conformance.test.ts"]
    return sum(len(TOP_LEVEL_TEST.findall(p.read_text(encoding="utf-8"))) for p in files)


def test_typescript_client_runs_the_corpus(conformance_server: LiveServer) -> None:
    require_toolchain("node", "node", "npm", NODE_BIN / "tsc")
    done = run(
        ["npm", "test", "--workspace", "client/typescript"],
        env=conformance_server.env("typescript"),
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    counts = {name: int(value) for name, value in SUMMARY.findall(done.stdout)}
    scenarios = [scenario.name for scenario in load_scenarios()]
    unit = _unit_tests()
    print(f"typescript: {counts} ({len(scenarios)} scenarios, {unit} client tests)")
    assert counts.get("tests") == len(scenarios) + unit, output
    assert counts.get("pass") == counts.get("tests"), output
    assert not counts.get("skipped"), output
    assert not counts.get("todo"), output
    passed = set(PASSED.findall(done.stdout))
    assert [name for name in scenarios if name not in passed] == [], output
