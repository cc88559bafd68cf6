"""`serve` security: tokens, the loopback rule, TLS and mTLS, reloads, file modes."""

from __future__ import annotations

import argparse
import asyncio
import signal
import stat
from pathlib import Path

import grpc
import pytest

from agentskit_chat.cli import parser
from agentskit_chat.cli._security import is_loopback, security_from
from agentskit_chat.cli._serve import settings_from
from agentskit_chat.transport import token_digest
from agentskit_chat_client import ChatClient, ChatError, Submit, TLSConfig
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import run_cli
from tests.transport.certs import Authority

TOKEN = "serve-token-abcdefghijklmnop"
ROTATED = "serve-token-rotated-qrstuvwxyz"


def write_tokens(path: Path, *tokens: str) -> Path:
    entries = "".join(
        f"  - {{sha256: {token_digest(t)}, tenant: t{i}}}\n" for i, t in enumerate(tokens)
    )
    path.write_text("tokens:\n" + entries, encoding="utf-8")
    return path


def serve_args(*argv: str) -> argparse.Namespace:
    return parser().parse_args(["serve", *argv])


def test_serve_refuses_a_non_loopback_address_without_tokens(tmp_path: Path) -> None:
    result = run_cli("serve", "--listen", "0.0.0.0:0", "--state-dir", str(tmp_path))
    assert result.returncode == 2
    assert "refusing to listen on 0.0.0.0:0 without authentication" in result.stderr
    assert "--auth-tokens" in result.stderr
    assert "--insecure-no-auth" in result.stderr
    assert "listening" not in result.stdout
    assert not (tmp_path / "sessions.db").exists()


def test_only_tokens_or_the_explicit_flag_open_a_non_loopback_address(tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens.yaml", TOKEN)
    assert security_from(serve_args("--listen", "0.0.0.0:50051", "--insecure-no-auth"))
    assert security_from(serve_args("--listen", "[::]:1", "--auth-tokens", str(tokens)))
    with pytest.raises(ValueError, match="refusing to listen"):
        security_from(serve_args("--listen", "10.0.0.5:50051"))
    with pytest.raises(ValueError, match="--tls-cert and --tls-key go together"):
        security_from(serve_args("--tls-cert", "cert.pem"))
    with pytest.raises(ValueError, match="--tls-client-ca needs"):
        security_from(serve_args("--tls-client-ca", "ca.pem"))


@pytest.mark.parametrize(
    ("listen", "loopback"),
    [
        ("127.0.0.1:50051", True),
        ("127.3.2.1:0", True),
        ("[::1]:0", True),
        ("localhost:50051", True),
        ("0.0.0.0:50051", False),
        ("[::]:50051", False),
        (":50051", False),
        ("chat.example.com:443", False),
        ("192.168.1.2:1", False),
    ],
)
def test_loopback_addresses(listen: str, loopback: bool) -> None:
    assert is_loopback(listen) is loopback


def test_serve_refuses_an_unusable_tokens_file(tmp_path: Path) -> None:
    bad = tmp_path / "tokens.yaml"
    bad.write_text("tokens: [{sha256: 1234, tenant: a}]\n", encoding="utf-8")
    result = run_cli("serve", "--state-dir", str(tmp_path), "--auth-tokens", str(bad))
    assert result.returncode == 2
    assert "tokens[0].sha256: must be 64 hex digits" in result.stderr


def test_tokens_from_the_environment_and_rotation_on_sighup(
    launch: Launcher, tmp_path: Path
) -> None:
    tokens = write_tokens(tmp_path / "tokens.yaml", TOKEN)
    server = launch(tmp_path / "state", env={"AGENTSKIT_CHAT_AUTH_TOKENS": str(tokens)})
    assert "bearer tokens" in server.stdout

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=20) as anonymous:
            with pytest.raises(ChatError) as caught:
                await anonymous.list_definitions()
            assert caught.value.code == grpc.StatusCode.UNAUTHENTICATED
        async with ChatClient(server.target, timeout=20, token=TOKEN) as client:
            sid = (await client.create_session("support")).session_id
            assert (await client.run_turn(sid, Submit("/start"))).text
            write_tokens(tokens, ROTATED)
            server.send(signal.SIGHUP)
            await server.wait_output_async("tokens reloaded")
            with pytest.raises(ChatError) as caught:
                await client.get_session(sid)
            assert caught.value.code == grpc.StatusCode.UNAUTHENTICATED
        async with ChatClient(server.target, timeout=20, token=ROTATED) as rotated:
            # The new token acts for the same tenant: its sessions carry on.
            assert (await rotated.get_session(sid)).session.session_id == sid

    asyncio.run(scenario())
    server.send(signal.SIGTERM)
    assert server.wait() == 0
    for secret in (TOKEN, ROTATED, token_digest(TOKEN), token_digest(ROTATED)):
        assert secret not in server.stdout
        assert secret not in server.stderr


def test_tls_with_client_certificates_and_certificate_reload(
    launch: Launcher, tmp_path: Path
) -> None:
    first = Authority(tmp_path, "first-ca")
    second = Authority(tmp_path, "second-ca")
    server_cert = first.issue("server", server=True)
    client_cert = first.issue("client", server=False)
    server = launch(
        tmp_path / "state",
        "--tls-cert", str(server_cert.cert),
        "--tls-key", str(server_cert.key),
        "--tls-client-ca", str(first.cert),
    )  # fmt: skip
    assert "mtls" in server.stdout
    with_cert = TLSConfig(
        root_certificates=first.cert_pem,
        client_certificate=client_cert.cert_pem,
        client_private_key=client_cert.key_pem,
    )

    async def fails(tls: bool | TLSConfig) -> grpc.StatusCode:
        async with ChatClient(server.target, timeout=5, tls=tls) as client:
            with pytest.raises(ChatError) as caught:
                await client.list_definitions()
            return caught.value.code

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=20, tls=with_cert) as client:
            sid = (await client.create_session("support")).session_id
            assert (await client.run_turn(sid, Submit("/start"))).text
        assert await fails(TLSConfig(root_certificates=first.cert_pem)) == (
            grpc.StatusCode.UNAVAILABLE
        )
        assert await fails(False) == grpc.StatusCode.UNAVAILABLE
        # A certificate from another CA replaces the first on SIGHUP.
        renewed = second.issue("server", server=True)
        server_cert.cert.write_bytes(renewed.cert_pem)
        server_cert.key.write_bytes(renewed.key_pem)
        server.send(signal.SIGHUP)
        await server.wait_output_async("TLS certificates reloaded")
        assert await fails(with_cert) == grpc.StatusCode.UNAVAILABLE
        renewed_client = TLSConfig(
            root_certificates=second.cert_pem,
            client_certificate=client_cert.cert_pem,
            client_private_key=client_cert.key_pem,
        )
        async with ChatClient(server.target, timeout=20, tls=renewed_client) as client:
            assert (await client.get_session(sid)).session.session_id == sid

    asyncio.run(scenario())


def test_serve_refuses_a_key_that_is_not_the_certificates(tmp_path: Path) -> None:
    authority = Authority(tmp_path)
    one, other = authority.issue("one", server=True), authority.issue("other", server=True)
    result = run_cli(
        "serve", "--state-dir", str(tmp_path / "state"),
        "--tls-cert", str(one.cert), "--tls-key", str(other.key),
    )  # fmt: skip
    assert result.returncode == 2
    assert "does not belong to certificate" in result.stderr


def test_the_state_directory_and_its_files_are_owner_only(launch: Launcher, tmp_path: Path) -> None:
    state = tmp_path / "state"
    server = launch(state)

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=20) as client:
            sid = (await client.create_session("support")).session_id
            await client.run_turn(sid, Submit("/start"))

    asyncio.run(scenario())
    server.send(signal.SIGTERM)
    assert server.wait() == 0
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    for name in ("sessions.db", "digest.key"):
        assert stat.S_IMODE((state / name).stat().st_mode) == 0o600, name


def test_limit_and_rate_flags_reach_the_settings() -> None:
    settings = settings_from(
        serve_args(
            "--max-output-bytes", "2048",
            "--rate-turns", "5", "--rate-turns-burst", "7",
            "--rate-sessions", "0.5",
            "--max-connections", "9", "--max-streams-per-connection", "3",
            "--max-connection-idle", "30", "--no-reflection",
        )
    )  # fmt: skip
    assert settings.limits.max_output_bytes == 2048
    rates = settings.security.rates
    assert rates.turns is not None
    assert (rates.turns.per_second, rates.turns.burst) == (5, 7)
    assert rates.sessions is not None
    assert (rates.sessions.per_second, rates.sessions.burst) == (0.5, 10)
    connections = settings.security.connections
    assert (connections.max_connections, connections.max_streams_per_connection) == (9, 3)
    assert connections.max_idle_seconds == 30
    assert settings.security.reflection is False
    defaults = settings_from(serve_args())
    assert defaults.security.rates.turns is None
    assert defaults.security.rates.sessions is None
    assert defaults.security.reflection is True


def test_serve_refuses_an_output_limit_that_would_break_stock_clients(tmp_path: Path) -> None:
    result = run_cli("serve", "--state-dir", str(tmp_path), "--max-output-bytes", "4000000")
    assert result.returncode == 2
    assert "exceed 4194304 bytes" in result.stderr


def test_the_http_listener_obeys_the_loopback_rule(tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens.yaml", TOKEN)
    with pytest.raises(ValueError, match=r"listen on 0\.0\.0\.0:0 without auth"):
        security_from(serve_args("--http-listen", "0.0.0.0:0"))
    with pytest.raises(ValueError, match=r"refusing to listen on \[::\]:8080"):
        security_from(serve_args("--http-listen", "[::]:8080"))
    assert security_from(serve_args("--http-listen", "127.0.0.1:0"))
    assert security_from(serve_args("--http-listen", "0.0.0.0:0", "--insecure-no-auth"))
    assert security_from(serve_args("--http-listen", "0.0.0.0:0", "--auth-tokens", str(tokens)))
    result = run_cli("serve", "--http-listen", "0.0.0.0:0", "--state-dir", str(tmp_path / "state"))
    assert result.returncode == 2
    assert "refusing to listen on 0.0.0.0:0 without authentication" in result.stderr
    assert "listening" not in result.stdout
    assert not (tmp_path / "state" / "sessions.db").exists()


def test_the_handshake_timeout_flag_reaches_the_limits() -> None:
    connections = security_from(serve_args("--handshake-timeout", "1.5")).connections
    assert connections.handshake_seconds == 1.5
    assert ("grpc.server_handshake_timeout_ms", 1500) in connections.options()
    assert security_from(serve_args()).connections.handshake_seconds == 5.0
    with pytest.raises(ValueError, match="handshake timeout must be positive"):
        security_from(serve_args("--handshake-timeout", "0"))
