"""Routing under tokens: refusals before anything else, and a refusal's bounded wait for
the body it answers."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from google.rpc import error_details_pb2

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.transport import Authenticator, token_digest
from agentskit_chat.transport.web import HttpSettings
from tests.transport.conftest import live, run
from tests.transport.test_limits import closed_by_peer

from .conftest import web_live
from .wire import SERVICE, grpc_web, reason, stream

ALLOWED = "http://renderer.example:8080"
TOKEN = "web-token-0123456789"


def _tokens(tmp_path: Path) -> Authenticator:
    path = tmp_path / "tokens.yaml"
    path.write_text(f"tokens:\n  - sha256: {token_digest(TOKEN)}\n    tenant: web\n", "utf-8")
    return Authenticator(path)


def _site(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    root.mkdir()
    (root / "index.html").write_text("<!doctype html><title>renderer</title>", encoding="utf-8")
    return root


def test_without_a_token_anything_but_open_paths_is_refused_before_routing(
    tmp_path: Path,
) -> None:
    """Unknown methods, other services, wrong HTTP methods and content types all get the
    same 401 as a known call: nothing tells what exists. Known calls are refused in their
    own protocol. Health, static files and CORS preflights stay open."""
    refused = [
        ("POST", SERVICE + "Nope", "application/json"),
        ("POST", SERVICE + "ListDefinitions", "text/plain"),
        ("POST", SERVICE + "Nope", "application/grpc-web+proto"),
        ("POST", SERVICE + "StreamTurn", "application/json"),  # a unary type on a stream
        ("GET", SERVICE + "ListDefinitions", "application/json"),
        ("PUT", SERVICE + "GetSession", "application/json"),
        ("POST", "/other.v1.Service/Method", "application/json"),
        ("POST", "/healthz", "application/json"),
        ("DELETE", "/index.html", "application/json"),
        ("OPTIONS", "/index.html", "application/json"),  # not a preflight
    ]

    async def scenario() -> None:
        async with web_live(
            tmp_path,
            authenticator=_tokens(tmp_path),
            cors=frozenset({ALLOWED}),
            web_root=_site(tmp_path),
        ) as web:
            before = web.env.dump()
            for method, path, content_type in refused:
                for auth in ({}, {"authorization": "Bearer not-a-token"}):
                    response = await web.http.request(
                        method, path, content=b"{}", headers={"content-type": content_type, **auth}
                    )
                    assert response.status_code == 401, (method, path)
                    assert response.headers["content-type"] == "application/json"
                    error = response.json()
                    assert error["code"] == "unauthenticated"
                    assert error["message"] == "missing or invalid credentials"
                    assert reason(error) == "ERROR_REASON_UNAUTHENTICATED"
            # A real call is refused in the protocol it speaks.
            grpc_web_call = await grpc_web(web.http, "StreamTurn", pb.StreamTurnRequest())
            assert (grpc_web_call.status, grpc_web_call.code) == (200, 16)
            info = grpc_web_call.details()[0]
            assert isinstance(info, error_details_pb2.ErrorInfo)
            assert info.reason == "ERROR_REASON_UNAUTHENTICATED"
            connect_stream = await stream(web.http, "StreamTurn", {"sessionId": "s"})
            assert connect_stream.error is not None
            assert connect_stream.error["code"] == "unauthenticated"
            assert reason(connect_stream.error) == "ERROR_REASON_UNAUTHENTICATED"
            # With a token the same requests reach routing.
            accepted = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
            unknown = await web.http.post(SERVICE + "Nope", content=b"{}", headers=accepted)
            assert unknown.status_code == 404
            post = await web.http.post("/healthz", content=b"{}", headers=accepted)
            assert post.status_code == 405
            # Open without a token.
            health = await web.http.get("/healthz")
            assert (health.status_code, health.text) == (200, "SERVING\n")
            assert (await web.http.head("/healthz")).status_code == 200
            index = await web.http.get("/")
            assert index.status_code == 200
            assert "renderer" in index.text
            assert (await web.http.get("/missing.js")).status_code == 404
            preflight = await web.http.options(
                SERVICE + "Nope",
                headers={"origin": ALLOWED, "access-control-request-method": "POST"},
            )
            assert preflight.status_code == 204
            assert web.env.dump() == before

    run(scenario())


CALL = b"/agentskit.chat.v1.ChatService/ListDefinitions"
STALLED = [
    (CALL, None, b"401"),
    (b"/other.v1.Service/Method", None, b"401"),  # refused outside the RPC path
    (b"/healthz", None, b"401"),
    (b"/healthz", TOKEN, b"405"),  # answered by routing, with a token
]
"""Path, token and the status of a POST whose body does not come."""


def stalled_post(port: int, declared: int, path: bytes = CALL, token: str | None = None) -> bytes:
    """POST `path` declaring a `declared`-byte body and send none of it: the answer's status
    line, once the server has closed the connection; an AssertionError when it does not close
    within 5 s (every drain here is bounded well below that)."""
    auth = b"" if token is None else b"Authorization: Bearer %s\r\n" % token.encode()
    head = (
        b"POST %s HTTP/1.1\r\nHost: chat\r\nContent-Type: application/json\r\n"
        b"%sContent-Length: %d\r\n\r\n" % (path, auth, declared)
    )
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(head)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65_536)
            assert chunk, f"closed without an answer after {answer!r}"
            answer += chunk
        assert closed_by_peer(sock, 5), (path, declared)
        return answer.split(b"\r\n", 1)[0]


def test_a_refusal_waits_for_its_body_only_so_long(tmp_path: Path) -> None:
    """An answer given before a body that does not come (a refused call, a refusal outside
    the RPC path, a 405) waits the drain's time bound once, and one declaring more than the
    drain's byte bound not at all; either connection then closes, so a stalled upload holds
    nothing."""

    async def scenario() -> None:
        settings = HttpSettings("127.0.0.1:0", drain_seconds=0.5)
        async with live(
            tmp_path, http=settings, authenticator=_tokens(tmp_path), max_request_bytes=65_536
        ) as env:
            assert env.server.http is not None
            port = env.server.http.port
            for path, token, status in STALLED:
                for declared in (3_000_000, 60_000):
                    line = await asyncio.to_thread(stalled_post, port, declared, path, token)
                    assert line == b"HTTP/1.1 " + status + b" ", (path, declared)

    run(scenario())


def test_a_body_over_the_drain_bound_is_not_waited_for(tmp_path: Path) -> None:
    """A declared body larger than the drain reads is answered at once, whatever the
    drain's time bound and wherever it was sent."""

    async def scenario() -> None:
        settings = HttpSettings("127.0.0.1:0", drain_seconds=600)
        async with live(
            tmp_path, http=settings, authenticator=_tokens(tmp_path), max_request_bytes=65_536
        ) as env:
            assert env.server.http is not None
            port = env.server.http.port
            for path, token, status in STALLED:
                line = await asyncio.to_thread(stalled_post, port, 70_000, path, token)
                assert line == b"HTTP/1.1 " + status + b" ", path

    run(scenario())
