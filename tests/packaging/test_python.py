"""docs/install.md for Python: the server's and the client's wheels, each installed into a
new virtual environment outside the checkout; the installed server serves the example
definitions and the page's program, run with the installed client, streams a turn from it.
Each sdist builds, outside the checkout, the same wheel."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.fixtures.serving import Server

from .install import assert_printed_a_turn, block, clean_env, run, save_program


def _serve(directory: Path, checkout: Path) -> Server:
    """The page's `serve` line, as written, in `directory` (where the reader made `server`);
    the listening address comes from the environment, so a free port is used."""
    env = clean_env(
        checkout, {"AGENTSKIT_CHAT_LISTEN": "127.0.0.1:0", "AGENTSKIT_CHAT_DRAIN_DELAY": "0"}
    )
    stderr_path = directory / "serve.stderr"
    stderr = stderr_path.open("wb")
    process = subprocess.Popen(
        ["sh", "-eu", "-c", "exec " + block("commands", "serve").strip()],
        cwd=directory,
        env=env,
        stdout=subprocess.PIPE,
        stderr=stderr,
    )
    server = Server(process, stderr, stderr_path)
    server.wait_listening()
    return server


@pytest.fixture
def installed_server(tmp_path: Path, checkout: Path) -> Iterator[Server]:
    where = tmp_path / "server-home"
    result = run("server", where, clean_env(checkout))
    assert "ok  support r1" in result.stdout, result.stdout
    server = _serve(where, checkout)
    try:
        yield server
    finally:
        server.close()


def _installed_from(python: Path, module: str) -> Path:
    found = subprocess.run(
        [str(python), "-c", f"import {module}; print({module}.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return Path(found.stdout.strip())


def test_the_wheels_install_serve_and_answer_the_documented_program(
    tmp_path: Path, checkout: Path, installed_server: Server
) -> None:
    server_python = tmp_path / "server-home" / "server" / "bin" / "python"
    assert _installed_from(server_python, "agentskit_chat").is_relative_to(tmp_path)
    reader = tmp_path / "reader"
    env = clean_env(checkout, {"AGENTSKIT_CHAT_TARGET": installed_server.target})
    run("python-install", reader, env)
    assert _installed_from(
        reader / "venv" / "bin" / "python", "agentskit_chat_client"
    ).is_relative_to(reader / "venv")
    save_program("python", reader)
    printed = run("python-run", reader, env)
    assert_printed_a_turn(printed.stdout)


def _wheel_files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return {name for name in archive.namelist() if ".dist-info/" not in name}


@pytest.mark.parametrize("name", ["agentskit_chat_client", "agentskit_chat"])
def test_each_sdist_builds_the_wheel_make_dist_built(
    tmp_path: Path, checkout: Path, name: str
) -> None:
    """pip builds the sdist outside the checkout (an isolated PEP 517 build) into a wheel
    holding exactly the files of the one `make dist` built."""
    sdist = checkout / "dist" / f"{name}-0.1.0.tar.gz"
    with tarfile.open(sdist) as archive:
        top = {member.split("/")[1] for member in archive.getnames() if "/" in member}
    assert "tests" not in top  # the sources and their metadata, not the test suite
    assert "README.md" in top
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            str(tmp_path),
            str(sdist),
        ],
        cwd=tmp_path,
        env=clean_env(checkout),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob(f"{name}-0.1.0-*.whl")
    expected = _wheel_files(checkout / "dist" / f"{name}-0.1.0-py3-none-any.whl")
    assert _wheel_files(wheel) == expected
    assert any(path.endswith("/py.typed") for path in expected)
