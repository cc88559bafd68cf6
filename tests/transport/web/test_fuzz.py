"""Random and mutated requests to the HTTP listener over real sockets, HTTP/1.1 and HTTP/2:
methods, paths, headers (any bytes), framing and Connect envelopes.

Nothing may crash or hang the listener; no answer may be 5xx (but the 501 the Connect
protocol gives an unknown `Content-Encoding`, with its `unimplemented` error); the log gets
at most one line per request, each short, none with a traceback or anything the request carried; a
refused call leaves the stored state byte-identical.

`make test` runs a short version; AGENTSKIT_CHAT_HTTP_FUZZ_EXAMPLES sets a longer one.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.conversation import load_definitions
from agentskit_chat.transport.web import HttpSettings
from agentskit_chat.transport.web.boundary import logbound as _logbound
from tests.transport.background import Background
from tests.transport.conftest import EXAMPLES, Live, live

from .raw import H2, Log, captured, request, statuses
from .wire import SERVICE, envelope

EXAMPLES_RUN = int(os.environ.get("AGENTSKIT_CHAT_HTTP_FUZZ_EXAMPLES", "200"))
CANARY = "cnry-9b2e-fuzz"
OUTSIDE = "outside-the-root-4d1c"
METHODS = [
    "ListDefinitions",
    "GetDefinition",
    "CreateSession",
    "GetSession",
    "DeleteSession",
    "TruncateHistory",
    "GetTurn",
    "ListTurns",
    "StreamTurn",
]
HEADER_NAMES = [
    b"content-type",
    b"content-encoding",
    b"connect-content-encoding",
    b"connect-accept-encoding",
    b"accept-encoding",
    b"grpc-encoding",
    b"grpc-accept-encoding",
    b"connect-timeout-ms",
    b"grpc-timeout",
    b"connect-protocol-version",
    b"authorization",
    b"origin",
    b"access-control-request-method",
    b"x-grpc-web",
    b"traceparent",
    b"upgrade",
    b"http2-settings",
    b"cookie",
    b"x-" + CANARY.encode(),
]
CONTENT_TYPES = [
    b"application/json",
    b"application/proto",
    b"application/connect+json",
    b"application/connect+proto",
    b"application/grpc-web+proto",
    b"application/grpc-web-text",
    b"application/grpc",
    b"text/plain",
]
LIST = (SERVICE + "ListDefinitions").encode()
JSON = (b"content-type", b"application/json")
SEGMENTS = [
    "index.html",
    "assets",
    "app.js",
    ".env",
    "link.txt",
    "hidden.txt",
    "..",
    "%2e%2e",
    "%2f",
    "%00",
    "%ff",
    "%",
    "healthz",
    CANARY,
]
SEEDS = [
    pb.StreamTurnRequest(
        session_id="fz", turn_id="t1", submit=pb.SubmitOperation(content=CANARY)
    ).SerializeToString(),
    pb.CreateSessionRequest(definition_id="support", session_id="fz-new").SerializeToString(),
    json.dumps({"sessionId": "fz", "turnId": "t", "submit": {"content": CANARY}}).encode(),
    json.dumps({"definitionId": "support", "sessionId": "fz-new"}).encode(),
]


@dataclass
class Served:
    env: Live
    port: int
    log: Log


async def _session(env: Live) -> None:
    await env.client.create_session("support", session_id="fz")


def _site(directory: Path) -> Path:
    root = directory / "site"
    (root / "assets").mkdir(parents=True)
    (root / "index.html").write_text("<title>renderer</title>", "utf-8")
    (root / "assets" / "app.js").write_text("console.log(1)", "utf-8")
    (root / ".env").write_text(f"SECRET={CANARY}", "utf-8")
    (root / "hidden.txt").symlink_to(root / ".env")
    (directory / "outside.txt").write_text(OUTSIDE, "utf-8")
    (root / "link.txt").symlink_to(directory / "outside.txt")
    return root


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("http-fuzz")
    definitions = list(load_definitions(EXAMPLES).values())
    http = HttpSettings("127.0.0.1:0", frozenset({"https://app.example"}), str(_site(directory)))
    # Every line is let through, so the test sees each one a request causes.
    with (
        captured(_logbound.RateLimit(burst=10**9)) as log,
        Background(lambda: live(directory, definitions=definitions, http=http), _session) as env,
    ):
        assert env.server.http is not None
        yield Served(env, env.server.http.port, log)


@dataclass
class Attempt:
    transport: str
    method: bytes
    path: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes
    framing: str


header_values = st.one_of(
    st.binary(max_size=48).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")),
    st.sampled_from(
        [
            b"gzip",
            b"identity",
            b"1",
            b"1000",
            b"99999999999",
            b"10S",
            b"Bearer x",
            b"https://app.example",
            b"POST",
            b"websocket",
            b"h2c",
            b"AAMAAABkAARAAAAAAAIAAAAA",
            b"\xff\xfe",
            b"\xe9t\xe9",
        ]
    ),
    st.just(CANARY.encode()),
)


@st.composite
def mutated(draw: st.DrawFn, seed: bytes) -> bytes:
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 4))):
        position = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["flip", "cut", "insert", "byte"]))
        if action == "flip" and position < len(data):
            data[position] ^= 1 << draw(st.integers(0, 7))
        elif action == "cut":
            del data[position:]
        elif action == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=8))
        elif position < len(data):
            data[position] = draw(st.sampled_from([0x00, 0x80, 0xFF, 0xC3, 0x7F]))
    return bytes(data)


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    seed = draw(st.sampled_from(SEEDS))
    payload = draw(st.one_of(st.just(seed), mutated(seed), st.binary(max_size=64)))
    kind = draw(st.sampled_from(["plain", "envelope", "envelopes", "bad-envelope", "empty"]))
    if kind == "plain":
        return payload
    if kind == "envelope":
        return envelope(payload, draw(st.sampled_from([0, 1, 2, 0x80, 0xFF])))
    if kind == "envelopes":
        return envelope(payload) + envelope(payload) + envelope(b"{}", 2)
    if kind == "bad-envelope":
        size = draw(st.integers(0, 2**32 - 1)).to_bytes(4, "big")
        return bytes([draw(st.integers(0, 255))]) + size + payload
    return b""


@st.composite
def paths(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["rpc", "rpc-odd", "static", "health", "raw"]))
    if kind == "rpc":
        return (SERVICE + draw(st.sampled_from(METHODS))).encode()
    if kind == "rpc-odd":
        tail = draw(st.text(max_size=20).map(lambda t: t.encode("utf-8", "surrogatepass")))
        return SERVICE.encode() + tail.replace(b" ", b"%20")
    if kind == "health":
        return b"/healthz"
    if kind == "static":
        segments = draw(
            st.lists(
                st.one_of(
                    st.sampled_from(SEGMENTS),
                    st.integers(1, 400).map(lambda n: "a" * n),
                    st.text(min_size=1, max_size=12),
                ),
                max_size=5,
            )
        )
        text = "/" + "/".join(segments)
        return text.encode("utf-8", "surrogatepass").replace(b" ", b"%20")
    return b"/" + draw(st.binary(max_size=40)).replace(b" ", b"").replace(b"\r", b"")


@st.composite
def attempts(draw: st.DrawFn) -> Attempt:
    path = draw(paths())
    usual = [b"POST"] if path.startswith(SERVICE.encode()) else [b"GET", b"HEAD"]
    method = draw(st.sampled_from([*usual, *usual, b"POST", b"GET", b"OPTIONS", b"PUT", b"BREW"]))
    if draw(st.integers(0, 9)) == 0:  # now and then any bytes
        method = draw(
            st.binary(min_size=1, max_size=8).filter(lambda b: not set(b) & set(b" \r\n"))
        )
    headers = []
    if draw(st.booleans()):
        headers.append((b"content-type", draw(st.sampled_from(CONTENT_TYPES))))
    extra = st.tuples(st.sampled_from(HEADER_NAMES), header_values)
    headers += draw(st.lists(extra, max_size=5))
    return Attempt(
        transport=draw(st.sampled_from(["h1", "h2"])),
        method=method,
        path=path,
        headers=headers,
        body=draw(bodies()) if method not in (b"GET", b"HEAD") or draw(st.booleans()) else b"",
        framing=draw(st.sampled_from(["length", "chunked", "bad-chunked", "short", "long"])),
    )


def _http1(port: int, attempt: Attempt) -> tuple[list[int], bool, bytes]:
    """The statuses of the answer; whether no answer is acceptable (a truncated body); the
    answer."""
    body, framing = attempt.body, attempt.framing
    headers = list(attempt.headers)
    if framing == "chunked":
        headers.append((b"transfer-encoding", b"chunked"))
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n"
    elif framing == "bad-chunked":
        headers.append((b"transfer-encoding", b"chunked"))
        body = b"zz\r\n" + body
    elif framing == "short":
        headers.append((b"content-length", b"%d" % (len(body) + 7)))
    elif framing == "long":
        headers.append((b"content-length", b"%d" % (len(body) // 2)))
    raw = request(attempt.method, attempt.path, headers)
    if framing == "length" and body:
        raw = request(attempt.method, attempt.path, headers, body)
    else:
        raw += body
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            answer += chunk
    return statuses(answer), framing in ("short", "bad-chunked"), answer


def _http2(port: int, attempt: Attempt) -> tuple[list[int], bool, bytes]:
    client = H2(port, timeout=15)
    try:
        stream = client.headers(attempt.method, attempt.path, attempt.headers, end=not attempt.body)
        if attempt.body:
            client.conn.send_data(stream, attempt.body, end_stream=attempt.framing != "short")
            client.flush()
        result = client.read(until=stream, quiet=None if attempt.framing != "short" else 3)
    finally:
        client.close()
    found = [result.statuses[stream]] if stream in result.statuses else []
    # No answer is acceptable when h2 refused the frames (GOAWAY, RST) or the body is unfinished.
    silent = result.goaway or result.closed or result.resets > 0 or attempt.framing == "short"
    return found, silent, result.bodies.get(stream, b"")


@settings(
    max_examples=EXAMPLES_RUN,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(attempt=attempts())
@example(Attempt("h1", b"GET", b"/hidden.txt", [], b"", "length"))  # a link to a hidden file
@example(Attempt("h2", b"GET", b"/" + b"a" * 300, [], b"", "length"))  # a name too long
@example(Attempt("h1", b"POST", LIST, [JSON, (b"x-a", b"\xff")], b"{}", "length"))
@example(
    Attempt("h2", b"POST", LIST, [JSON, (b"content-encoding", CANARY.encode())], b"{}", "length")
)
@example(
    Attempt(
        "h1", b"GET", b"/", [(b"upgrade", b"websocket"), (b"connection", b"upgrade")], b"", "length"
    )
)
@example(Attempt("h1", b"POST", LIST, [(b"content-type", b"application/grpc")], b"", "length"))
def test_random_http_requests_get_no_5xx_and_bounded_log_lines(
    served: Served, attempt: Attempt
) -> None:
    served.log.mark()
    before = served.env.dump()
    send = _http1 if attempt.transport == "h1" else _http2
    found, silent, answer = send(served.port, attempt)
    assert found or silent, attempt
    assert b"SECRET=" not in answer, attempt  # a hidden file
    assert OUTSIDE.encode() not in answer, attempt  # a file outside the root
    for status in found:  # 501 only as Connect's `unimplemented` (an unknown compression)
        assert status < 500 or (status == 501 and b'"unimplemented"' in answer), (found, attempt)
    if not found or found[0] >= 400:
        assert served.env.dump() == before, attempt
    served.log.assert_bounded(CANARY, "SECRET")
    assert len(served.log.warnings()) <= 2, served.log.text()  # its own, and one still late


def test_the_fuzzed_listener_still_serves(served: Served) -> None:
    found, _, _ = _http1(served.port, Attempt("h1", b"GET", b"/healthz", [], b"", "length"))
    assert found == [200]
    lines = served.log.raw_lines()
    assert all(len(line.encode()) <= 300 for line in lines)
