"""Connection options: TLS settings and the bearer token."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from agentskit_chat_client import ChatClient, TLSConfig


def test_a_client_certificate_needs_its_key() -> None:
    with pytest.raises(ValueError, match="go together"):
        TLSConfig(client_certificate=b"cert")
    assert "secret" not in repr(TLSConfig(client_certificate=b"c", client_private_key=b"secret"))


@pytest.mark.parametrize("token", ["", "two words", "line\nbreak"])
def test_a_token_must_be_one_header_word(token: str) -> None:
    with pytest.raises(ValueError, match="token"):
        ChatClient("127.0.0.1:1", token=token)


def test_tls_applies_only_to_a_target_the_client_opens() -> None:
    async def body() -> None:
        channel = grpc.aio.insecure_channel("127.0.0.1:1")
        try:
            with pytest.raises(ValueError, match="tls applies to a target"):
                ChatClient(channel, tls=True)
        finally:
            await channel.close()

    asyncio.run(body())
