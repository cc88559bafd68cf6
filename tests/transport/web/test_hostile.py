"""Hostile HTTP input, over real sockets: each gets a 4xx (or a closed connection where the
protocol leaves no room for one) and at most one short WARNING line, never a traceback or
anything the client sent; a flood of them costs the log a few lines."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from agentskit_chat.transport import Authenticator, token_digest
from agentskit_chat.transport.web.boundary import logbound as _logbound
from tests.transport.conftest import run
from tests.waiting import until

from .conftest import WebLive, web_live
from .raw import H2, Log, captured, http1, request, statuses
from .wire import SERVICE, envelope

CANARY = "cnry-5e1d-hostile"
LIST = (SERVICE + "ListDefinitions").encode()
JSON = (b"content-type", b"application/json")


def _port(web: WebLive) -> int:
    assert web.env.server.http is not None
    return web.env.server.http.port


async def _settle(log: Log, lines: int = 1) -> None:
    """Wait until the log has `lines` warnings, then a moment for more (a line too many
    would show; no observable says that none is on its way)."""
    await until(lambda: len(log.warnings()) >= lines, f"{lines} warnings")
    await asyncio.sleep(0.2)


def _tokens(tmp_path: Path) -> Authenticator:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(f"tokens:\n  - sha256: {token_digest('t')}\n    tenant: a\n", "utf-8")
    return Authenticator(tokens)


def test_a_call_with_a_header_that_is_not_utf8_is_400_with_one_short_line(
    tmp_path: Path,
) -> None:
    secret = CANARY.encode() + b"\xff\xfe"

    async def scenario(authenticator: Authenticator | None) -> None:
        with captured() as log:
            async with web_live(tmp_path, authenticator=authenticator) as web:
                port = _port(web)
                for name in (b"x-note", b"authorization", b"content-type"):
                    log.mark()
                    headers = (
                        [JSON, (name, secret)] if name != b"content-type" else [(name, secret)]
                    )
                    answer = await asyncio.to_thread(
                        http1, port, request(b"POST", LIST, headers, b"{}")
                    )
                    assert statuses(answer) == [400], answer
                    assert b"invalid_argument" in answer
                    await _settle(log)
                    assert len(log.warnings()) == 1, log.text()
                    log.assert_bounded(CANARY)

                log.mark()

                def over_h2() -> tuple[int, bytes]:
                    client = H2(port)
                    stream = client.headers(b"POST", LIST, [JSON, (b"x-note", secret)], end=True)
                    result = client.read(until=stream)
                    client.close()
                    return result.statuses[stream], result.bodies.get(stream, b"")

                status, body = await asyncio.to_thread(over_h2)
                assert status == 400
                assert b"invalid_argument" in body
                await _settle(log)
                assert len(log.warnings()) == 1, log.text()
                log.assert_bounded(CANARY)

    run(scenario(None))
    run(scenario(_tokens(tmp_path)))


def test_static_files_and_health_ignore_undecodable_header_values(tmp_path: Path) -> None:
    root = tmp_path / "site"
    root.mkdir()
    (root / "index.html").write_text("<title>renderer</title>", "utf-8")

    async def scenario() -> None:
        with captured() as log:
            async with web_live(tmp_path, web_root=root) as web:
                log.mark()
                cookie = [(b"cookie", b"theme=\xe9t\xe9")]  # a browser's Latin-1 cookie
                for path in (b"/", b"/healthz"):
                    answer = await asyncio.to_thread(
                        http1, _port(web), request(b"GET", path, cookie)
                    )
                    assert statuses(answer) == [200], answer
                assert log.warnings() == []

    run(scenario())


def test_websocket_upgrades_are_refused_with_403(tmp_path: Path) -> None:
    upgrade = [
        (b"Upgrade", b"websocket"),
        (b"Connection", b"Upgrade"),
        (b"Sec-WebSocket-Key", base64.b64encode(b"0123456789abcdef")),
        (b"Sec-WebSocket-Version", b"13"),
    ]

    async def scenario() -> None:
        with captured() as log:
            async with web_live(tmp_path) as web:
                port = _port(web)
                for path in (b"/", LIST):
                    log.mark()
                    answer = await asyncio.to_thread(
                        http1, port, request(b"GET", path, upgrade, close=False), timeout=5
                    )
                    assert statuses(answer) == [403], answer
                    await _settle(log)
                    assert len(log.warnings()) == 1, log.text()
                    log.assert_bounded()

                log.mark()

                def extended_connect() -> int:
                    client = H2(port)
                    stream = client.headers(
                        b"CONNECT",
                        b"/",
                        [(b":protocol", b"websocket"), (b"sec-websocket-version", b"13")],
                    )
                    result = client.read(until=stream)
                    client.close()
                    return result.statuses[stream]

                assert await asyncio.to_thread(extended_connect) == 403
                await _settle(log)
                assert len(log.warnings()) == 1, log.text()
                log.assert_bounded()

    run(scenario())


def test_a_malformed_http2_settings_upgrade_costs_one_short_line(tmp_path: Path) -> None:
    """Hypercorn answers `101 Switching Protocols` before it decodes `HTTP2-Settings`, so
    the connection is closed; what h2 raises then is logged as one line."""
    bad_settings = (
        b"!!" + CANARY.encode() + b"\xff",  # not base64
        base64.urlsafe_b64encode(CANARY.encode()),  # base64, not a SETTINGS payload
    )

    async def scenario() -> None:
        with captured() as log:
            async with web_live(tmp_path) as web:
                for settings in bad_settings:
                    log.mark()
                    headers = [
                        (b"Connection", b"Upgrade, HTTP2-Settings"),
                        (b"Upgrade", b"h2c"),
                        (b"HTTP2-Settings", settings),
                    ]
                    answer = await asyncio.to_thread(
                        http1, _port(web), request(b"GET", b"/healthz", headers, close=False)
                    )
                    assert statuses(answer) == [101], answer  # then closed
                    await _settle(log)
                    assert len(log.warnings()) == 1, log.text()
                    log.assert_bounded(CANARY)

    run(scenario())


def test_an_early_answer_waits_for_the_body_and_keeps_the_http2_connection(
    tmp_path: Path,
) -> None:
    """A POST to a path that takes none is answered 405 once its body has been read, so
    its DATA reaches an open stream and the connection goes on serving."""

    def early_answer(port: int) -> tuple[int, int]:
        client = H2(port)
        stream = client.headers(b"POST", b"/" + CANARY.encode(), [JSON])
        for _ in range(3):
            client.conn.send_data(stream, CANARY.encode() * 10)
            client.flush()
        client.conn.end_stream(stream)
        client.flush()
        result = client.read(until=stream)
        health = client.headers(b"GET", b"/healthz", end=True)
        result = client.read(until=health)
        client.close()
        return result.statuses[stream], result.statuses[health]

    async def scenario() -> None:
        with captured() as log:
            async with web_live(tmp_path) as web:
                log.mark()
                assert await asyncio.to_thread(early_answer, _port(web)) == (405, 200)
                await asyncio.sleep(0.3)
                assert log.warnings() == []
                log.assert_bounded(CANARY)

    run(scenario())


def test_data_after_the_drain_bound_costs_one_short_line(tmp_path: Path) -> None:
    """A body that does not end within the drain's bound gets its 405 anyway; DATA it sends
    after that makes Hypercorn fail the connection (a KeyError in its HTTP/2 code), which
    the listener logs as one short line."""

    def late_data(port: int) -> tuple[int, bool]:
        client = H2(port)
        stream = client.headers(b"POST", b"/" + CANARY.encode(), [JSON])
        result = client.read(until=stream)
        client.conn.send_data(stream, CANARY.encode() * 10)
        client.flush()
        result = client.read()
        client.close()
        return result.statuses[stream], result.closed

    async def scenario() -> None:
        with captured() as log:
            async with web_live(tmp_path, drain_seconds=0.3) as web:
                log.mark()
                assert await asyncio.to_thread(late_data, _port(web)) == (405, True)
                await _settle(log)
                assert len(log.warnings()) == 1, log.text()
                assert "protocol error: KeyError at " in log.warnings()[0]["event"]
                log.assert_bounded(CANARY)

    run(scenario())


def test_grpc_over_http1_is_refused_with_415(tmp_path: Path) -> None:
    async def scenario() -> None:
        with captured() as log:
            async with web_live(tmp_path) as web:
                log.mark()
                grpc = [(b"content-type", b"application/grpc")]
                answer = await asyncio.to_thread(
                    http1, _port(web), request(b"POST", LIST, grpc, envelope(b""))
                )
                assert statuses(answer) == [415], answer
                await _settle(log)
                assert len(log.warnings()) == 1, log.text()
                log.assert_bounded()

    run(scenario())


def test_a_rapid_reset_costs_no_log_and_the_connection_keeps_serving(tmp_path: Path) -> None:
    def rapid_reset(port: int) -> int:
        client = H2(port)
        for _ in range(200):
            stream = client.headers(b"POST", LIST, [JSON])
            client.conn.send_data(stream, b"{}", end_stream=True)
            client.conn.reset_stream(stream)
        client.flush()
        last = client.headers(b"GET", b"/healthz", end=True)
        result = client.read(until=last)
        client.close()
        return result.statuses[last]

    async def scenario() -> None:
        with captured() as log:
            async with web_live(tmp_path) as web:
                log.mark()
                assert await asyncio.to_thread(rapid_reset, _port(web)) == 200
                await asyncio.sleep(0.5)
                assert log.warnings() == []
                log.assert_bounded()

    run(scenario())


def test_connect_errors_do_not_echo_header_values(tmp_path: Path) -> None:
    """connectrpc quotes some header values in its messages; the listener masks them."""
    unary_json = {"content-type": "application/json"}
    stream_json = {"content-type": "application/connect+json"}
    grpc_web = {"content-type": "application/grpc-web+proto", "x-grpc-web": "1"}
    cases: list[tuple[dict[str, str], bytes, Callable[[httpx.Response], Any]]] = [
        ({**unary_json, "content-encoding": CANARY}, b"{}", lambda r: r.json()["code"]),
        ({**unary_json, "connect-timeout-ms": CANARY}, b"{}", lambda r: r.json()["code"]),
        ({**unary_json, "connect-timeout-ms": "9" * 11}, b"{}", lambda r: r.json()["code"]),
        ({**unary_json, "connect-protocol-version": CANARY}, b"{}", lambda r: r.json()["code"]),
        (
            {**stream_json, "connect-content-encoding": CANARY},
            envelope(b"{}"),
            lambda r: json.loads(r.content[5:])["error"]["code"],
        ),
        ({**grpc_web, "grpc-encoding": CANARY}, envelope(b""), lambda r: _grpc_status(r)),
        ({**grpc_web, "grpc-timeout": CANARY}, envelope(b""), lambda r: _grpc_status(r)),
    ]
    expected = [
        "unimplemented",
        "invalid_argument",
        "invalid_argument",
        "invalid_argument",
        "unimplemented",
        "12",
        "3",
    ]

    async def scenario() -> None:
        with captured() as log:
            async with web_live(tmp_path) as web:
                log.mark()
                for (headers, body, code), want in zip(cases, expected, strict=True):
                    method = (
                        "StreamTurn"
                        if "connect+json" in headers["content-type"]
                        else ("ListDefinitions")
                    )
                    response = await web.http.post(SERVICE + method, content=body, headers=headers)
                    raw = response.content + str(response.headers).encode()
                    assert CANARY.encode() not in raw, headers
                    assert b"99999999999" not in raw
                    assert code(response) == want, (headers, response.content)
                log.assert_bounded(CANARY)

    run(scenario())


def test_case_variants_of_known_values_are_masked_too(tmp_path: Path) -> None:
    """connectrpc names compressions exactly as it spells them: `GZIP` or `Identity` is
    unknown to it and would be quoted back, so the listener masks it like any other."""
    variants = ["GZIP", "Gzip", "Identity", "ZSTD"]
    cases: list[tuple[dict[str, str], bytes, Callable[[httpx.Response], Any], str]] = []
    for variant in variants:
        unary = {"content-type": "application/json", "content-encoding": variant}
        stream = {"content-type": "application/connect+json", "connect-content-encoding": variant}
        grpc = {
            "content-type": "application/grpc-web+proto",
            "x-grpc-web": "1",
            "grpc-encoding": variant,
        }
        cases += [
            (unary, b"{}", lambda r: r.json()["code"], "unimplemented"),
            (stream, envelope(b"{}"), _stream_code, "unimplemented"),
            (grpc, envelope(b""), _grpc_status, "12"),
        ]

    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            for headers, body, code, want in cases:
                streaming = "connect+json" in headers["content-type"]
                method = "StreamTurn" if streaming else "ListDefinitions"
                response = await web.http.post(SERVICE + method, content=body, headers=headers)
                raw = response.content + str(response.headers).encode()
                variant = next(v for k, v in headers.items() if k.endswith("encoding"))
                assert variant.encode() not in raw, headers
                assert code(response) == want, (headers, response.content)

    run(scenario())


def test_empty_and_valid_encoding_and_timeout_headers_still_work(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            for headers in (
                {"content-encoding": "", "connect-timeout-ms": ""},
                {"content-encoding": "identity", "connect-timeout-ms": "30000"},
                {"connect-protocol-version": "1"},
            ):
                response = await web.http.post(
                    SERVICE + "ListDefinitions",
                    content=b"{}",
                    headers={"content-type": "application/json", **headers},
                )
                assert response.status_code == 200, (headers, response.content)
                assert response.json()["definitions"]

    run(scenario())


def _stream_code(response: httpx.Response) -> str:
    return str(json.loads(response.content[5:])["error"]["code"])


def _grpc_status(response: httpx.Response) -> str:
    if "grpc-status" in response.headers:
        return response.headers["grpc-status"]
    trailers = response.content[5:].decode()
    return trailers.split("grpc-status:")[1].split("\r\n")[0].strip()


def test_a_flood_of_refused_requests_writes_a_few_lines(tmp_path: Path) -> None:
    """200 refused calls, one connection each: every one is 400; the log gets the
    burst, then, once the bucket refills, one line counting what was held back."""
    now = [0.0]
    limit = _logbound.RateLimit(clock=lambda: now[0])
    flood = 200

    def send_flood(port: int) -> list[int]:
        refused = request(b"POST", LIST, [JSON, (b"x-note", b"\xff")], b"{}")
        return [status for _ in range(flood) for status in statuses(http1(port, refused))]

    async def scenario() -> None:
        with captured(limit) as log:
            async with web_live(tmp_path) as web:
                log.mark()
                assert await asyncio.to_thread(send_flood, _port(web)) == [400] * flood
                await until(lambda: len(log.warnings()) >= _logbound.BURST, "the burst's lines")
                assert len(log.warnings()) == _logbound.BURST, log.text()
                now[0] += _logbound.REFILL_SECONDS
                answer = await asyncio.to_thread(
                    http1, _port(web), request(b"POST", LIST, [JSON, (b"x-note", b"\xff")], b"{}")
                )
                assert statuses(answer) == [400]
                await until(lambda: len(log.warnings()) > _logbound.BURST, "the refilled line")
                warnings = log.warnings()
                assert len(warnings) == _logbound.BURST + 1
                suppressed = flood - _logbound.BURST
                assert f"({suppressed} similar lines suppressed)" in warnings[-1]["event"]
                log.assert_bounded()

    run(scenario())
