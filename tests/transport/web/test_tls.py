"""The HTTP listener with the server's TLS files: HTTPS, HTTP/2 by ALPN, and mTLS."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest

from agentskit_chat.transport import ServerTls, TlsFiles
from agentskit_chat.transport.web import HttpSettings
from tests.transport.certs import Authority
from tests.transport.conftest import live, run

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
