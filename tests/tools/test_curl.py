"""curl against the HTTP listener of a live `serve`: the README's Connect calls, as written."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from tests.cli.conftest import Launcher
from tests.docs.pages import marked
from tests.tools.conftest import TOKEN

README_HTTP = "127.0.0.1:8080"
"""Where the README's calls look for `make serve`'s HTTP listener."""
HTTP_LISTENING = re.compile(r"http listening on (127\.0\.0\.1:\d+) ")


def readme_calls() -> list[list[str]]:
    """The README's `connect` block, one argv per line."""
    (block,) = (b for b in marked("commands") if b.name == "connect")
    return [shlex.split(line) for line in block.code.splitlines() if line.strip()]


def replay(http: str, token: str | None) -> dict[str, str]:
    """Every README call against `http` (with the bearer token after `curl` except for
    health, as the README says); the outputs by the URL's last part."""
    curl = shutil.which("curl")
    assert curl is not None, "curl is missing: `make tools` installs it"
    outputs = {}
    for argv in readme_calls():
        assert argv[0] == "curl"
        args = [arg.replace(README_HTTP, http) for arg in argv[1:]]
        if token is not None and not args[-1].endswith("/healthz"):
            args = ["-H", f"Authorization: Bearer {token}", *args]
        done = subprocess.run(
            [curl, "--fail-with-body", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, f"{shlex.join(argv)}\n{done.stdout}\n{done.stderr}"
        outputs[args[-1].rsplit("/", 1)[1]] = done.stdout
    return outputs


def check(outputs: dict[str, str]) -> None:
    definitions = json.loads(outputs["ListDefinitions"])["definitions"]
    assert {d["id"] for d in definitions} == {"support", "orders"}
    session = json.loads(outputs["CreateSession"])["session"]
    assert session["definitionId"] == "support"
    assert session["snapshot"]["state"] == "idle"
    assert outputs["healthz"] == "SERVING\n"


def http_address(stdout: str) -> str:
    found = HTTP_LISTENING.search(stdout)
    assert found is not None, stdout
    return found.group(1)


def test_the_readme_calls_run_as_written(launch: Launcher, tmp_path: Path) -> None:
    server = launch(tmp_path / "state", "--http-listen", "127.0.0.1:0")
    check(replay(http_address(server.stdout), None))


def test_the_readme_calls_run_with_a_token(launch: Launcher, tokens: Path, tmp_path: Path) -> None:
    server = launch(
        tmp_path / "state", "--http-listen", "127.0.0.1:0", "--auth-tokens", str(tokens)
    )
    address = http_address(server.stdout)
    check(replay(address, TOKEN))
    curl = shutil.which("curl")
    assert curl is not None
    refused = subprocess.run(
        [
            curl,
            "-sS",
            "-H",
            "Content-Type: application/json",
            "-d",
            "{}",
            f"http://{address}/agentskit.chat.v1.ChatService/ListDefinitions",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert json.loads(refused.stdout)["code"] == "unauthenticated"
