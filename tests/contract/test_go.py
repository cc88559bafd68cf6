"""Plain `protoc --go_out` (no buf managed mode) generates Go code that builds and decodes.

The contract and the vendored google.rpc files are generated with their own go_package
options into a scratch GOPATH-style tree; each import path root becomes a local module, and
a small program (go/testdata/main.go) decodes a status the way the server encodes it.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path

from tests.contract.tooling import (
    PROTOC_GEN_GO,
    ROOT,
    VENDORED,
    contract_files,
    protoc,
    require_toolchain,
    run,
    sample_status,
    service_methods,
)

PINS = ROOT / "tools"
"""The Go module pinning protoc-gen-go, whose protobuf runtime the generated code builds with."""
TESTDATA = ROOT / "tests" / "contract" / "go" / "testdata"
MODULES = {
    "agentskit.dev/chat/client/go": ["agentskit/chat/v1/chat.pb.go"],
    "google.golang.org/genproto/googleapis/rpc": [
        "errdetails/error_details.pb.go",
        "status/status.pb.go",
    ],
}


def protobuf_version() -> str:
    found = re.search(r"google\.golang\.org/protobuf (v\S+)", (PINS / "go.mod").read_text())
    assert found, "tools/go.mod no longer pins google.golang.org/protobuf"
    return found.group(1)


def go_mod(module: str, requires: dict[str, str], replaces: dict[str, str] | None = None) -> str:
    lines = [f"module {module}", "", "go 1.24", "", "require ("]
    lines += [f"\t{path} {version}" for path, version in requires.items()]
    lines += [")", ""]
    lines += [f"replace {path} => {target}" for path, target in (replaces or {}).items()]
    return "\n".join(lines) + "\n"


def test_protoc_go_out_generates_the_contract_and_its_error_types(tmp_path: Path) -> None:
    require_toolchain("go", "go", PROTOC_GEN_GO)
    gen = tmp_path / "gen"
    gen.mkdir()
    protoc(
        f"--plugin=protoc-gen-go={PROTOC_GEN_GO}",
        f"--go_out={gen}",
        files=[*contract_files(), *VENDORED],
    )
    generated = sorted(p.relative_to(gen).as_posix() for p in gen.rglob("*.go"))
    assert generated == sorted(f"{m}/{f}" for m, files in MODULES.items() for f in files)

    protobuf = {"google.golang.org/protobuf": protobuf_version()}
    for module in MODULES:
        (gen / module / "go.mod").write_text(go_mod(module, protobuf))
    (tmp_path / "go.mod").write_text(
        go_mod(
            "agentskit.dev/chat/tests/contract/decode",
            {**dict.fromkeys(MODULES, "v0.0.0"), **protobuf},
            {module: f"./gen/{module}" for module in MODULES},
        )
    )
    shutil.copy(PINS / "go.sum", tmp_path / "go.sum")
    shutil.copy(TESTDATA / "main.go", tmp_path / "main.go")

    env = {"GOFLAGS": "-mod=readonly -buildvcs=false", "GOWORK": "off"}
    packages = ["./...", *(f"{module}/..." for module in MODULES)]
    run(["go", "vet", *packages], cwd=tmp_path, env=env)
    run(["go", "build", "-o", "decode", "."], cwd=tmp_path, env=env)

    wire, expected = sample_status()
    done = run([tmp_path / "decode", base64.b64encode(wire).decode()], cwd=tmp_path)
    assert json.loads(done.stdout) == {**expected, "methods": service_methods(tmp_path)}
