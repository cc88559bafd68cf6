"""The HTTP listener with the server's TLS files: HTTPS, HTTP/2 by ALPN, and mTLS."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
import ssl
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentskit_chat.transport import ConnectionLimits, ServerTls, TlsFiles
from agentskit_chat.transport.web import HttpSettings
from tests.transport.certs import Authority
from tests.transport.conftest import live, run
from tests.transport.test_limits import closed_by_peer

from .raw import captured

LIST = "/agentskit.chat.v1.ChatService/ListDefinitions"


def _context(ca: Path, client: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    if client is not None:
        context.load_cert_chain(str(client[0]), str(client[1]))
    return context


def test_the_listener_speaks_https_and_http2_by_alpn(tmp_path: Path) -> None:
    ca = Authority(tmp_path)
    server = ca.issue("server", server=True)
    tls = ServerTls(TlsFiles(server.cert, server.key))

    async def scenario() -> None:
        async with live(tmp_path, tls=tls, http=HttpSettings("127.0.0.1:0")) as env:
            assert env.server.http is not None
            base = f"https://127.0.0.1:{env.server.http.port}"
            async with httpx.AsyncClient(
                base_url=base, verify=_context(ca.cert), http2=True, timeout=30
            ) as http:
                response = await http.post(
                    LIST, content=b"{}", headers={"content-type": "application/json"}
                )
                assert response.status_code == 200
                assert response.http_version == "HTTP/2"
                assert "support" in {d["id"] for d in response.json()["definitions"]}
            async with httpx.AsyncClient(base_url=base, timeout=30) as untrusting:
                with pytest.raises(httpx.ConnectError):
                    await untrusting.get("/healthz")

    run(scenario())


def test_with_a_client_ca_every_client_needs_a_certificate(tmp_path: Path) -> None:
    ca = Authority(tmp_path)
    server = ca.issue("server", server=True)
    client = ca.issue("renderer", server=False)
    tls = ServerTls(TlsFiles(server.cert, server.key, ca.cert))

    async def scenario() -> None:
        async with live(tmp_path, tls=tls, http=HttpSettings("127.0.0.1:0")) as env:
            assert env.server.http is not None
            base = f"https://127.0.0.1:{env.server.http.port}"
            trusted = _context(ca.cert, (client.cert, client.key))
            async with httpx.AsyncClient(base_url=base, verify=trusted, timeout=30) as http:
                assert (await http.get("/healthz")).status_code == 200
            async with httpx.AsyncClient(
                base_url=base, verify=_context(ca.cert), timeout=30
            ) as anonymous:
                with pytest.raises(
                    (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)
                ):
                    await anonymous.get("/healthz")

    run(scenario())


def _client_hello(ca: Path) -> bytes:
    """The first bytes a TLS client sends (its ClientHello), made by a real handshake."""
    hello = ssl.MemoryBIO()
    connection = _context(ca).wrap_bio(ssl.MemoryBIO(), hello, server_hostname="127.0.0.1")
    with contextlib.suppress(ssl.SSLWantReadError):
        connection.do_handshake()
    return hello.read()


def _handshaken_then_silent(port: int, ca: Path) -> bool:
    """Finish the TLS handshake, send no request; whether the server then closes."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=20) as raw,
        _context(ca).wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.settimeout(20)
        try:
            return tls.recv(1) == b""
        except (ConnectionResetError, ssl.SSLError):
            return True
        except TimeoutError:
            return False


def test_silent_and_unfinished_handshakes_are_closed_without_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Sockets that send nothing, half a handshake, or a whole handshake and no request are
    all closed at the handshake timeout, as over plain TCP, and cost no ERROR, traceback or
    finaliser failure; a real client is served afterwards."""
    ca = Authority(tmp_path)
    server = ca.issue("server", server=True)
    tls = ServerTls(TlsFiles(server.cert, server.key))
    hello = _client_hello(ca.cert)
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)

    async def scenario() -> None:
        connections = ConnectionLimits(max_connections=8, handshake_seconds=0.5)
        with captured() as log:
            async with live(
                tmp_path, tls=tls, http=HttpSettings("127.0.0.1:0"), connections=connections
            ) as env:
                assert env.server.http is not None
                port = env.server.http.port
                log.mark()
                silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
                half = socket.create_connection(("127.0.0.1", port))
                half.sendall(hello[: len(hello) // 2])
                unfinished = socket.create_connection(("127.0.0.1", port))
                unfinished.sendall(hello)  # and never answers the server's reply
                for sock in [*silent, half, unfinished]:
                    with sock:
                        assert await asyncio.to_thread(closed_by_peer, sock, 20)
                assert await asyncio.to_thread(_handshaken_then_silent, port, ca.cert)
                async with httpx.AsyncClient(
                    base_url=f"https://127.0.0.1:{port}", verify=_context(ca.cert), timeout=30
                ) as http:
                    assert (await http.get("/healthz")).status_code == 200
                await asyncio.sleep(0.2)
                assert log.warnings() == [], log.text()
                log.assert_bounded()

    run(scenario())
    caplog.clear()  # pytest's records would keep the connections' objects alive
    gc.collect()
    assert unraisable == []  # no connection's writer failed to finalise (stderr stays clean)
