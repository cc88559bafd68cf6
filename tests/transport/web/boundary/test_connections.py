"""The HTTP listener's connections: capped like gRPC's, and closed when they send no request."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

from agentskit_chat.transport import ConnectionLimits, RunningServer
from agentskit_chat.transport.web import HttpSettings
from tests.transport.conftest import live, run
from tests.transport.test_limits import closed_by_peer
from tests.waiting import EVENT_WAIT

HEALTH = b"GET /healthz HTTP/1.1\r\nHost: chat\r\n\r\n"
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # an empty SETTINGS frame


def healthy(sock: socket.socket) -> bool:
    """Ask /healthz on `sock`; whether it answers 200."""
    sock.settimeout(20)
    try:
        sock.sendall(HEALTH)
        answer = b""
        while b"SERVING\n" not in answer:
            chunk = sock.recv(65_536)
            if not chunk:
                return False
            answer += chunk
    except OSError:
        return False
    return answer.startswith(b"HTTP/1.1 200 ")


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=20)


def http_port(server: RunningServer) -> int:
    assert server.http is not None
    return server.http.port


def test_connections_past_the_cap_are_closed_until_one_ends(tmp_path: Path) -> None:
    async def scenario() -> None:
        connections = ConnectionLimits(max_connections=2, handshake_seconds=30)
        async with live(tmp_path, http=HttpSettings("127.0.0.1:0"), connections=connections) as env:
            port = http_port(env.server)
            first, second = connect(port), connect(port)
            try:
                assert await asyncio.to_thread(healthy, first)
                assert await asyncio.to_thread(healthy, second)
                for _ in range(5):  # no matter how many try
                    with connect(port) as third:
                        assert await asyncio.to_thread(closed_by_peer, third, 20)
                assert await asyncio.to_thread(healthy, first)  # the open ones still serve
                first.close()
                give_up = time.monotonic() + EVENT_WAIT
                while True:  # the listener counts the closed connection out
                    with connect(port) as again:
                        if await asyncio.to_thread(healthy, again):
                            break
                    assert time.monotonic() < give_up, "a closed connection still counted"
                    await asyncio.sleep(0.05)
            finally:
                first.close()
                second.close()

    run(scenario())


def slow_headers(sock: socket.socket, seconds: float) -> bool:
    """Send a request head one header every 50 ms for up to `seconds`, never ending it;
    whether the server closed the connection meanwhile."""
    until = time.monotonic() + seconds
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: chat\r\n")
        while time.monotonic() < until:
            sock.sendall(b"X-Slow: 1\r\n")
            time.sleep(0.05)
    except OSError:
        return True
    return closed_by_peer(sock, 0.1)


def test_a_connection_without_a_whole_request_in_time_is_closed(tmp_path: Path) -> None:
    """Silent sockets, slowly sent headers and an HTTP/2 preface without a request are all
    closed at the handshake timeout; a connection that sent its request stays open idle."""

    async def scenario() -> None:
        connections = ConnectionLimits(max_connections=3, handshake_seconds=0.5)
        async with live(tmp_path, http=HttpSettings("127.0.0.1:0"), connections=connections) as env:
            port = http_port(env.server)
            with connect(port) as served:
                assert await asyncio.to_thread(healthy, served)
                with connect(port) as silent:
                    assert await asyncio.to_thread(closed_by_peer, silent, 20)
                with connect(port) as slow:
                    assert await asyncio.to_thread(slow_headers, slow, 20)
                with connect(port) as h2:
                    h2.sendall(H2_PREFACE + H2_SETTINGS)
                    assert await asyncio.to_thread(closed_by_peer, h2, 20)
                # The served connection outlived those deadlines and still serves.
                assert await asyncio.to_thread(healthy, served)

    run(scenario())
