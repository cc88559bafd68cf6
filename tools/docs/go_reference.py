"""The Go client's reference: `go doc -all` of its packages, run when the site is built.

Without Go on the machine (CONTRACT_SKIP_TOOLCHAINS=go) the page says so instead; the
strict build still checks every other page.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "client" / "go"
PACKAGES = {"chatclient": "./chatclient"}
TIMEOUT = 120.0


def go_doc(package: str) -> str:
    """`go doc -all PACKAGE` in the client module; go.mod and go.sum are left as they are."""
    env = {**os.environ, "GOFLAGS": "-mod=readonly", "GOWORK": "off"}
    done = subprocess.run(
        ["go", "doc", "-all", package],
        cwd=MODULE,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"go doc -all {package} failed: {done.stderr.strip()}")
    return done.stdout


def go_page() -> str:
    """docs/reference/go-client.md."""
    lines = [
        "# Go client",
        "",
        "Generated with `go doc -all` from the doc comments of the module "
        "`agentskit.dev/chat/client/go` when the site is built. The generated package "
        "`chatv1` holds the contract's messages: see [the contract](contract.md). The "
        "[Go tutorial](../tutorials/go.md) shows the client at work.",
        "",
    ]
    if shutil.which("go") is None:
        return "\n".join(
            [*lines, '!!! warning "Go was not available when this site was built"', ""]
        )
    for name, package in PACKAGES.items():
        text = go_doc(package).replace("```", "` ` `")
        lines += [f"## `{name}`", "", "```text", text.rstrip(), "```", ""]
    return "\n".join(lines)
