"""protoc-gen-es generates TypeScript that `tsc --strict` accepts and that decodes errors.

The contract and the vendored google.rpc files are generated with the plugin pinned in
package.json, compiled with the pinned TypeScript (strict, no emit on error) together with
a small program (typescript/decode.ts), which then runs on Node.js.
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

from tests.contract.tooling import (
    NODE_BIN,
    ROOT,
    VENDORED,
    contract_files,
    protoc,
    require_toolchain,
    run,
    sample_status,
    service_methods,
)

PROGRAM = ROOT / "tests" / "contract" / "typescript" / "decode.ts"
GENERATED = [
    "agentskit/chat/v1/chat_pb.ts",
    "google/rpc/error_details_pb.ts",
    "google/rpc/status_pb.ts",
]
TSCONFIG = {
    "compilerOptions": {
        "strict": True,
        "noEmitOnError": True,
        "target": "es2022",
        "module": "nodenext",
        "moduleResolution": "nodenext",
        "outDir": "out",
    },
    "include": ["gen/**/*.ts", "*.ts"],
}


def test_protoc_gen_es_generates_the_contract_and_its_error_types(tmp_path: Path) -> None:
    require_toolchain("node", "node", NODE_BIN / "protoc-gen-es", NODE_BIN / "tsc")
    gen = tmp_path / "gen"
    gen.mkdir()
    protoc(
        f"--plugin=protoc-gen-es={NODE_BIN / 'protoc-gen-es'}",
        f"--es_out={gen}",
        "--es_opt=target=ts",
        files=[*contract_files(), *VENDORED],
    )
    assert sorted(p.relative_to(gen).as_posix() for p in gen.rglob("*.ts")) == GENERATED

    wire, expected = sample_status()
    (tmp_path / "input.ts").write_text(
        f'export const STATUS = "{base64.b64encode(wire).decode()}";\n'
    )
    shutil.copy(PROGRAM, tmp_path / "decode.ts")
    (tmp_path / "tsconfig.json").write_text(json.dumps(TSCONFIG))
    (tmp_path / "package.json").write_text(json.dumps({"private": True, "type": "module"}))
    (tmp_path / "node_modules").symlink_to(ROOT / "node_modules")

    run([NODE_BIN / "tsc", "-p", tmp_path], cwd=tmp_path)
    done = run(["node", tmp_path / "out" / "decode.js"], cwd=tmp_path)
    assert json.loads(done.stdout) == {**expected, "methods": service_methods(tmp_path)}
