"""`serve --http-listen`: the HTTP listener for browsers from the command line."""

from __future__ import annotations

import json
import re
import signal
import socket
import struct
import time
from pathlib import Path

import httpx
import pytest

from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import EXAMPLES, run_cli

HTTP_LISTENING = re.compile(r"agentskit-chat http listening on 127\.0\.0\.1:(\d+) \(([^)]*)\)")
ORIGIN = "http://renderer.example:5173"


def test_the_listener_comes_from_the_environment_and_drains_on_sigterm(
    launch: Launcher, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<!doctype html><title>chat</title>", encoding="utf-8")
    env = {
        "AGENTSKIT_CHAT_HTTP_LISTEN": "127.0.0.1:0",
        "AGENTSKIT_CHAT_CORS_ORIGINS": f"{ORIGIN},http://other.example",
        "AGENTSKIT_CHAT_WEB_ROOT": str(site),
    }
    server = launch(tmp_path / "state", "--definitions", str(EXAMPLES), env=env)
    found = HTTP_LISTENING.search(server.stdout)
    assert found is not None, server.stdout
    assert found.group(2) == f"connect and grpc-web, 2 CORS origins, static files from {site}"
    base = f"http://127.0.0.1:{found.group(1)}"
    with httpx.Client(base_url=base, timeout=30) as http:
        response = http.post(
            "/agentskit.chat.v1.ChatService/ListDefinitions",
            content=b"{}",
            headers={"Content-Type": "application/json", "Origin": ORIGIN},
        )
        assert response.status_code == 200
        assert {d["id"] for d in response.json()["definitions"]} == {"coffee", "support", "orders"}
        assert response.headers["access-control-allow-origin"] == ORIGIN
        assert "<title>chat</title>" in http.get("/").text
    server.send(signal.SIGTERM)
    assert server.wait() == 0
    assert "agentskit-chat stopped" in server.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--cors-origin", ORIGIN), "--cors-origin and --web-root need --http-listen"),
        (
            ("--http-listen", "127.0.0.1:0", "--cors-origin", "renderer.example"),
            "CORS origin 'renderer.example' must be http(s)://host[:port] with no path",
        ),
        (
            ("--http-listen", "127.0.0.1:0", "--cors-origin", "https://a.example/app"),
            "must be http(s)://host[:port] with no path",
        ),
        (("--http-listen", "127.0.0.1:0", "--web-root", "/nonexistent/site"), "not a directory"),
        (("--http-listen", "127.0.0.1", "--workers", "2"), "--http-listen '127.0.0.1' is not"),
        (("--http-listen", "nowhere"), "cannot listen on nowhere"),
    ],
)
def test_settings_that_cannot_work_are_refused(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    result = run_cli("serve", "--listen", "127.0.0.1:0", "--state-dir", str(tmp_path), *args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_a_taken_http_port_is_refused(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--state-dir",
            str(tmp_path),
            "--http-listen",
            f"127.0.0.1:{port}",
        )
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_taken_grpc_port_is_refused_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("serve", "--listen", f"127.0.0.1:{port}", "--state-dir", str(tmp_path))
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}: the address is in use" in result.stderr
    assert "Traceback" not in result.stderr


def test_workers_share_the_http_port(launch: Launcher, tmp_path: Path) -> None:
    server = launch(
        tmp_path / "state", "--workers", "2", "--http-listen", "127.0.0.1:0", log_level="INFO"
    )
    found = HTTP_LISTENING.search(server.stdout)
    assert found is not None, server.stdout
    assert found.group(2) == "2 workers, connect and grpc-web"
    assert server.stdout.count("http listening on") == 1
    rpc = f"http://127.0.0.1:{found.group(1)}/agentskit.chat.v1.ChatService/"
    for index in range(24):  # a new connection each time: the kernel spreads them
        with httpx.Client(timeout=30) as http:
            created = http.post(rpc + "CreateSession", json={"definitionId": "support"})
            sid = created.json()["session"]["sessionId"]
            body = json.dumps(
                {"sessionId": sid, "turnId": f"t{index}", "submit": {"content": "/start"}}
            )
            answered = http.post(
                rpc + "StreamTurn",
                content=struct.pack(">BI", 0, len(body)) + body.encode(),
                headers={"content-type": "application/connect+json"},
            )
            assert b'"completed"' in answered.content
    deadline = time.monotonic() + 30
    while len(records := server.records("turn")) < 24:
        assert time.monotonic() < deadline, server.stdout
        time.sleep(0.05)
    assert len({record["pid"] for record in records}) == 2
    server.send(signal.SIGTERM)
    assert server.wait() == 0
