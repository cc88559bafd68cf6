"""CORS: configured origins only, each exactly; preflights name what Connect and gRPC-Web
send; other origins get no CORS headers."""

from __future__ import annotations

from pathlib import Path

from tests.transport.conftest import run
from tests.transport.web.conftest import web_live
from tests.transport.web.wire import SERVICE, unary

ALLOWED = "http://renderer.example:8080"


def _preflight(origin: str, method: str = "POST") -> dict[str, str]:
    return {
        "origin": origin,
        "access-control-request-method": method,
        "access-control-request-headers": "authorization,content-type,connect-protocol-version",
    }


def test_a_preflight_from_an_allowed_origin_names_what_clients_send(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path, cors=frozenset({ALLOWED})) as web:
            response = await web.http.options(SERVICE + "StreamTurn", headers=_preflight(ALLOWED))
            assert response.status_code == 204
            headers = response.headers
            assert headers["access-control-allow-origin"] == ALLOWED
            assert set(headers["access-control-allow-methods"].split(", ")) == {"GET", "POST"}
            allowed = {h.lower() for h in headers["access-control-allow-headers"].split(", ")}
            assert {
                "authorization",
                "content-type",
                "connect-protocol-version",
                "connect-timeout-ms",
                "grpc-timeout",
                "x-grpc-web",
                "x-user-agent",
                "traceparent",
            } <= allowed
            assert "Origin" in headers["vary"]
            assert int(headers["access-control-max-age"]) > 0
            assert "access-control-allow-credentials" not in headers

    run(scenario())


def test_responses_to_an_allowed_origin_expose_trailers_and_details(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path, cors=frozenset({ALLOWED})) as web:
            response = await unary(web.http, "ListDefinitions", {}, origin=ALLOWED)
            assert response.status_code == 200
            assert response.headers["access-control-allow-origin"] == ALLOWED
            exposed = {
                h.lower() for h in response.headers["access-control-expose-headers"].split(", ")
            }
            assert {"grpc-status", "grpc-message", "grpc-status-details-bin"} <= exposed
            assert response.headers.get_list("vary") == ["Accept-Encoding, Origin"]

    run(scenario())


def test_other_origins_get_no_cors_headers(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path, cors=frozenset({ALLOWED})) as web:
            for origin in ("http://evil.example", "http://renderer.example:8081", "null"):
                preflight = await web.http.options(
                    SERVICE + "StreamTurn", headers=_preflight(origin)
                )
                assert preflight.status_code == 403
                assert not [h for h in preflight.headers if h.startswith("access-control-")]
                response = await unary(web.http, "ListDefinitions", {}, origin=origin)
                assert not [h for h in response.headers if h.startswith("access-control-")]

    run(scenario())


def test_no_origin_is_allowed_unless_configured(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            preflight = await web.http.options(
                SERVICE + "ListDefinitions", headers=_preflight(ALLOWED)
            )
            assert preflight.status_code == 403
            assert "access-control-allow-origin" not in preflight.headers

    run(scenario())
