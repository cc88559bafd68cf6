"""`python -m agentskit_chat.healthcheck` against a real gRPC health service."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from agentskit_chat import healthcheck

CHAT_SERVICE = "agentskit.chat.v1.ChatService"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@dataclass
class HealthServer:
    servicer: health.HealthServicer
    port: int

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture
def health_server() -> Iterator[HealthServer]:
    executor = ThreadPoolExecutor(max_workers=2)
    server = grpc.server(executor)
    try:
        servicer = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        assert port > 0
        server.start()
        yield HealthServer(servicer, port)
    finally:
        server.stop(None).wait()
        executor.shutdown(wait=True)


@pytest.fixture
def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def probe(*argv: str) -> int:
    return healthcheck.main([*argv, "--timeout", "5"])


def test_serving_exits_zero(
    health_server: HealthServer, capsys: pytest.CaptureFixture[str]
) -> None:
    health_server.servicer.set("", SERVING)

    assert probe("--target", health_server.target) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert "SERVING" in out


def test_not_serving_exits_one(
    health_server: HealthServer, capsys: pytest.CaptureFixture[str]
) -> None:
    health_server.servicer.set("", NOT_SERVING)

    assert probe("--target", health_server.target) == 1
    assert "NOT_SERVING" in capsys.readouterr().out


def test_named_service(health_server: HealthServer) -> None:
    health_server.servicer.set("", SERVING)
    health_server.servicer.set(CHAT_SERVICE, NOT_SERVING)

    assert probe("--target", health_server.target, "--service", CHAT_SERVICE) == 1
    health_server.servicer.set(CHAT_SERVICE, SERVING)
    assert probe("--target", health_server.target, "--service", CHAT_SERVICE) == 0


def test_unknown_service_exits_one(
    health_server: HealthServer, capsys: pytest.CaptureFixture[str]
) -> None:
    health_server.servicer.set("", SERVING)

    assert probe("--target", health_server.target, "--service", "no.such.Service") == 1
    assert "NOT_FOUND" in capsys.readouterr().out


def test_nothing_listening_exits_one(closed_port: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert probe("--target", f"127.0.0.1:{closed_port}") == 1
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert "UNAVAILABLE" in out


def test_default_target_uses_listen_port(
    health_server: HealthServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    health_server.servicer.set("", SERVING)
    monkeypatch.setenv("AGENTSKIT_CHAT_LISTEN", f"0.0.0.0:{health_server.port}")

    assert probe() == 0


@pytest.mark.parametrize(
    ("listen", "target"),
    [
        (None, "127.0.0.1:50051"),
        ("", "127.0.0.1:50051"),
        ("0.0.0.0:6000", "127.0.0.1:6000"),
        ("[::]:6001", "127.0.0.1:6001"),
        ("localhost:0", "127.0.0.1:50051"),
        ("localhost:http", "127.0.0.1:50051"),
        ("127.0.0.1:70000", "127.0.0.1:50051"),
    ],
)
def test_default_target(listen: str | None, target: str) -> None:
    environ = {} if listen is None else {"AGENTSKIT_CHAT_LISTEN": listen}
    assert healthcheck.default_target(environ) == target


@pytest.mark.parametrize("argv", [["--timeout", "0"], ["--timeout", "soon"], ["--bogus"]])
def test_unusable_arguments_exit_one(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert healthcheck.main(argv) == 1
    assert capsys.readouterr().err
