"""Raw HTTP/1.1 and HTTP/2 clients for hostile requests, and the server's log as JSON lines.

The clients are blocking (a plain socket; `h2` for HTTP/2 frames, with its own checks of
what it sends switched off) and run in a thread, as the server shares the test's loop.
"""

from __future__ import annotations

import io
import json
import logging
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import structlog

from agentskit_chat.telemetry import configure_logging
from agentskit_chat.transport.web.boundary import logbound as _logbound

MAX_LINE_BYTES = 300


class Log:
    """The JSON lines the server logged since `mark()`."""

    def __init__(self) -> None:
        self.stream = io.StringIO()
        self._start = 0

    def mark(self) -> None:
        self._start = len(self.stream.getvalue())

    def text(self) -> str:
        return self.stream.getvalue()[self._start :]

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.text().splitlines() if line.strip()]

    def raw_lines(self) -> list[str]:
        return [line for line in self.text().splitlines() if line.strip()]

    def warnings(self) -> list[dict[str, Any]]:
        return [line for line in self.lines() if line["level"] in ("warning", "error", "critical")]

    def assert_bounded(self, *secrets: str) -> None:
        """Every line short, none with a traceback or any of `secrets`."""
        text = self.text()
        for line in self.raw_lines():
            assert len(line.encode()) <= MAX_LINE_BYTES, line
        assert "Traceback" not in text
        assert all("exception" not in line for line in self.lines()), text
        for secret in secrets:
            assert secret not in text, secret


@contextmanager
def captured(limit: _logbound.RateLimit | None = None) -> Iterator[Log]:
    """The server's log lines, formatted as `serve` writes them; the listener's rate limit
    replaced by `limit` (a fresh one by default) meanwhile."""
    log = Log()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    saved = _logbound.LIMIT
    _logbound.LIMIT = limit or _logbound.RateLimit()
    client_log = logging.getLogger("httpx")  # the test's client, not the server
    client_level = client_log.level
    client_log.setLevel(logging.WARNING)
    configure_logging(logging.INFO, stream=log.stream, json=True)
    try:
        yield log
    finally:
        _logbound.LIMIT = saved
        client_log.setLevel(client_level)
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
        structlog.reset_defaults()


def http1(port: int, request: bytes, *, timeout: float = 10.0) -> bytes:
    """Send `request` bytes and read the answer until the server closes (or `timeout`)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        return _read_all(sock, timeout)


def _read_all(sock: socket.socket, timeout: float) -> bytes:
    answer = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            break
        if not chunk:
            break
        answer += chunk
    return answer


def statuses(answer: bytes) -> list[int]:
    """The status codes of every HTTP/1.1 response in `answer`."""
    found = []
    for line in answer.split(b"\r\n"):
        if line.startswith(b"HTTP/1.1 ") and line[9:12].isdigit():
            found.append(int(line[9:12]))
    return found


def request(
    method: bytes,
    path: bytes,
    headers: Sequence[tuple[bytes, bytes]] = (),
    body: bytes = b"",
    *,
    close: bool = True,
) -> bytes:
    """An HTTP/1.1 request, with `Content-Length` when there is a body."""
    lines = [method + b" " + path + b" HTTP/1.1", b"Host: 127.0.0.1"]
    if close:
        lines.append(b"Connection: close")
    lines += [name + b": " + value for name, value in headers]
    if body:
        lines.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


@dataclass
class H2Result:
    """What an HTTP/2 exchange brought back."""

    statuses: dict[int, int] = field(default_factory=dict)
    """Stream id: status."""
    bodies: dict[int, bytes] = field(default_factory=dict)
    goaway: bool = False
    closed: bool = False
    """The server closed the connection."""
    resets: int = 0


class H2:
    """One HTTP/2 connection (prior knowledge) spoken frame by frame."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(
                client_side=True,
                header_encoding=None,
                validate_outbound_headers=False,
                normalize_outbound_headers=False,
                validate_inbound_headers=False,
            )
        )
        self.conn.initiate_connection()
        self.result = H2Result()
        self.timeout = timeout
        self.flush()

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data and not self.result.closed:
            try:
                self.sock.sendall(data)
            except (BrokenPipeError, ConnectionResetError):
                self.result.closed = True

    def headers(
        self,
        method: bytes,
        path: bytes,
        extra: Sequence[tuple[bytes, bytes]] = (),
        *,
        end: bool = False,
    ) -> int:
        stream_id: int = self.conn.get_next_available_stream_id()
        pseudo = [(b":method", method), (b":path", path), (b":scheme", b"http")]
        pseudo.append((b":authority", b"127.0.0.1"))
        self.conn.send_headers(stream_id, [*pseudo, *extra], end_stream=end)
        self.flush()
        return stream_id

    def read(self, *, until: int | None = None, quiet: float | None = None) -> H2Result:
        """Read events until stream `until` ends, the server closes, or nothing comes for
        `quiet` seconds (else `timeout`)."""
        self.sock.settimeout(quiet or self.timeout)
        while not self.result.closed:
            try:
                data = self.sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not data:
                self.result.closed = True
                break
            try:
                events = self.conn.receive_data(data)
            except h2.exceptions.ProtocolError:
                self.result.closed = True
                break
            for event in events:
                if self._record(event) == until and until is not None:
                    self.flush()
                    return self.result
            self.flush()
        return self.result

    def _record(self, event: h2.events.Event) -> int | None:
        if isinstance(event, h2.events.ResponseReceived):
            status = dict(event.headers).get(b":status", b"0")
            self.result.statuses[event.stream_id] = int(status)
        elif isinstance(event, h2.events.DataReceived):
            self.result.bodies[event.stream_id] = (
                self.result.bodies.get(event.stream_id, b"") + event.data
            )
            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            return int(event.stream_id)
        elif isinstance(event, h2.events.StreamReset):
            self.result.resets += 1
            return int(event.stream_id)
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.result.goaway = True
        return None

    def close(self) -> None:
        self.sock.close()
