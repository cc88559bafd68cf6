"""The 415 of a known method names the content types that method takes: enveloped Connect
or gRPC-Web for the streaming ones (connectrpc's own answer offers the unary types to every
method). With tokens, a caller without one still gets 401 and learns nothing."""

from __future__ import annotations

from pathlib import Path

from agentskit_chat.transport import Authenticator, token_digest
from agentskit_chat.transport.web.boundary.screen import STREAM_TYPES, UNARY_TYPES
from tests.transport.conftest import run
from tests.transport.web.conftest import web_live
from tests.transport.web.wire import SERVICE, stream

CANARY = "cnry-9a41-media"


def test_a_stream_asked_in_a_unary_type_is_told_the_stream_types(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            before = web.env.dump()
            for content_type in ("application/json", "application/proto"):
                response = await web.http.post(
                    SERVICE + "StreamTurn",
                    content=f'{{"input": "{CANARY}"}}'.encode(),
                    headers={"content-type": content_type},
                )
                assert response.status_code == 415
                assert response.headers["accept-post"] == STREAM_TYPES.decode()
                assert response.text == (
                    "StreamTurn is a streaming method: send enveloped messages as "
                    f"{STREAM_TYPES.decode()}\n"
                )
                assert CANARY not in response.text
            assert web.env.dump() == before
            # The types it names are taken: an enveloped Connect stream gets its answer.
            answer = await stream(web.http, "StreamTurn", {})
            assert answer.status == 200
            assert answer.error is not None  # an empty request, refused in the stream's end
            assert answer.error["code"] == "invalid_argument"

    run(scenario())


def test_a_unary_method_asked_in_a_stream_type_is_told_the_unary_types(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            response = await web.http.post(
                SERVICE + "GetSession",
                content=b"{}",
                headers={"content-type": "application/connect+json"},
            )
            assert response.status_code == 415
            assert response.headers["accept-post"] == UNARY_TYPES.decode()
            assert response.text.startswith("GetSession is a unary method as application/json")
            listed = await web.http.post(
                SERVICE + "ListDefinitions",
                content=b"{}",
                headers={"content-type": "application/json"},
            )
            assert listed.status_code == 200

    run(scenario())


def test_without_a_token_a_wrong_type_is_401_not_415(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(f"tokens:\n  - sha256: {token_digest('t')}\n    tenant: a\n", "utf-8")

    async def scenario() -> None:
        async with web_live(tmp_path, authenticator=Authenticator(tokens)) as web:
            refused = await web.http.post(
                SERVICE + "StreamTurn", content=b"{}", headers={"content-type": "application/json"}
            )
            assert refused.status_code == 401
            assert "accept-post" not in refused.headers
            told = await web.http.post(
                SERVICE + "StreamTurn",
                content=b"{}",
                headers={"content-type": "application/json", "authorization": "Bearer t"},
            )
            assert told.status_code == 415
            assert told.headers["accept-post"] == STREAM_TYPES.decode()

    run(scenario())
