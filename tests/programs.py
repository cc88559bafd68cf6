"""Programs written against the TypeScript and Go clients, built the way a user would.

A Go program is a module of its own that requires the client through a `replace` directive
(as client/go/README.md says to); a TypeScript program is an ES module compiled with the
repository's `tsc` against the built `@agentskit/chat-client` workspace package.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GO_MODULE = ROOT / "client" / "go"
GO_MODULE_PATH = "agentskit.dev/chat/client/go"
GO_ENV = {"GOFLAGS": "-mod=readonly -buildvcs=false", "GOWORK": "off"}
"""go.sum pins every module; nothing may change go.mod or go.sum while a program builds."""
TYPESCRIPT_CLIENT = ROOT / "client" / "typescript"
TIMEOUT = 600.0


def go_program(workdir: Path, code: str) -> None:
    """`code` as the main package of a module in `workdir` that uses the Go client."""
    (workdir / "main.go").write_text(code, encoding="utf-8")
    # The client module's requirements, which its go.sum pins, plus the client itself.
    requirements = (GO_MODULE / "go.mod").read_text(encoding="utf-8").split("\n", 1)[1]
    (workdir / "go.mod").write_text(
        f"module example.com/program\n{requirements}\n"
        f"require {GO_MODULE_PATH} v0.0.0\n\nreplace {GO_MODULE_PATH} => {GO_MODULE}\n",
        encoding="utf-8",
    )
    (workdir / "go.sum").write_bytes((GO_MODULE / "go.sum").read_bytes())


def build_typescript_client() -> None:
    """`npm run build` of the client workspace (tsc into client/typescript/dist)."""
    subprocess.run(
        ["npm", "run", "--silent", "build", "--workspace", "client/typescript"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=TIMEOUT,
    )


def typescript_program(workdir: Path, code: str) -> Path:
    """`code` compiled as an ES module in `workdir`; the JavaScript file to run with node."""
    (workdir / "program.ts").write_text(code, encoding="utf-8")
    (workdir / "package.json").write_text(json.dumps({"type": "module"}), encoding="utf-8")
    options = {
        "strict": True,
        "target": "es2022",
        "module": "nodenext",
        "moduleResolution": "nodenext",
        "types": ["node"],
        "outDir": "out",
    }
    (workdir / "tsconfig.json").write_text(
        json.dumps({"compilerOptions": options, "files": ["program.ts"]}), encoding="utf-8"
    )
    modules = workdir / "node_modules"
    if not modules.exists():
        os.symlink(ROOT / "node_modules", modules)
    subprocess.run(
        [str(ROOT / "node_modules" / ".bin" / "tsc"), "-p", str(workdir)],
        cwd=workdir,
        check=True,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    return workdir / "out" / "program.js"
