"""Bearer tokens: checked before anything else runs, for every RPC but health."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2

from agentskit_chat.transport import Authenticator, TokenFileError, load_tokens, token_digest
from agentskit_chat_client import ChatClient, ChatError, Submit

from .conftest import health_status, live, refused, run
from .rpcs import RPCS, Rpc, call_raw

TOKEN_A = "token-of-tenant-a-0123456789"
TOKEN_B = "token-of-tenant-b-9876543210"


def tokens_file(path: Path, entries: list[tuple[str, str]], extra: str = "") -> Path:
    lines = ["tokens:"]
    for token, tenant in entries:
        lines += [f"  - sha256: {token_digest(token)}", f"    tenant: {tenant}"]
    path.write_text("\n".join(lines) + "\n" + extra, encoding="utf-8")
    return path


def authenticator(tmp_path: Path) -> Authenticator:
    return Authenticator(tokens_file(tmp_path / "tokens.yaml", [(TOKEN_A, "a"), (TOKEN_B, "b")]))


@pytest.mark.parametrize(
    "metadata",
    [
        (),
        (("authorization", "Bearer not-a-known-token"),),
        (("authorization", TOKEN_A),),  # no scheme
        (("authorization", f"Basic {TOKEN_A}"),),
        (("authorization", "Bearer "),),
    ],
    ids=["missing", "unknown", "no-scheme", "basic", "empty"],
)
def test_every_rpc_refuses_a_call_without_a_valid_token(tmp_path: Path, metadata) -> None:
    async def scenario() -> None:
        async with live(tmp_path, authenticator=authenticator(tmp_path), token=TOKEN_A) as env:
            sid = (await env.client.create_session("support")).session_id
            before = env.dump()
            for rpc in RPCS:
                # A request that does not even decode: refused before it is looked at.
                for data in (b"", b"\xff\xff\xff"):
                    code, details, responses = await call_raw(
                        env.client.channel, rpc, data, metadata
                    )
                    assert code == grpc.StatusCode.UNAUTHENTICATED, rpc.name
                    assert details == "missing or invalid credentials"
                    assert responses == []
            error = await refused(ChatClient(env.target).get_session(sid))
            assert error.code == grpc.StatusCode.UNAUTHENTICATED
            assert error.reason == "ERROR_REASON_UNAUTHENTICATED"
            assert env.dump() == before

    run(scenario())


def test_a_valid_token_opens_every_rpc_and_health_stays_open(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path, authenticator=authenticator(tmp_path), token=TOKEN_A) as env:
            definitions = await env.client.list_definitions()
            assert "support" in [d.id for d in definitions]
            sid = (await env.client.create_session("support")).session_id
            result = await env.client.run_turn(sid, Submit("/start"))
            assert result.text == "What is your name?"
            async with grpc.aio.insecure_channel(env.target) as bare:
                assert await health_status(bare, "") == health_pb2.HealthCheckResponse.SERVING

    run(scenario())


def test_an_unknown_method_is_refused_like_a_known_one_without_a_token(tmp_path: Path) -> None:
    """Without a valid token nothing is looked up: an unknown method, of either shape, gets
    UNAUTHENTICATED as a real one does; with a token it is UNIMPLEMENTED."""
    unknown = [
        Rpc("Nope", "/agentskit.chat.v1.ChatService/Nope", streaming=False),
        Rpc("Stream", "/agentskit.chat.v1.ChatService/StreamNope", streaming=True),
        Rpc("Other", "/other.v1.Service/Method", streaming=False),
    ]

    async def scenario() -> None:
        async with (
            live(tmp_path, authenticator=authenticator(tmp_path), token=TOKEN_A) as env,
            grpc.aio.insecure_channel(env.target) as channel,
        ):
            for rpc in unknown:
                for metadata in ((), (("authorization", "Bearer not-a-known-token"),)):
                    code, details, responses = await call_raw(channel, rpc, b"", metadata)
                    assert code == grpc.StatusCode.UNAUTHENTICATED, rpc.path
                    assert details == "missing or invalid credentials"
                    assert responses == []
                accepted = (("authorization", f"Bearer {TOKEN_A}"),)
                code, _, _ = await call_raw(channel, rpc, b"", accepted)
                assert code == grpc.StatusCode.UNIMPLEMENTED, rpc.path
            # Health stays open, known or not.
            health = Rpc("Nope", "/grpc.health.v1.Health/Nope", streaming=False)
            assert (await call_raw(channel, health, b""))[0] == grpc.StatusCode.UNIMPLEMENTED

    run(scenario())


async def _list_services(
    channel: grpc.aio.Channel, metadata: tuple[tuple[str, str], ...]
) -> list[str]:
    info = channel.stream_stream(
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    names: list[str] = []
    async for response in info(iter([request]), metadata=metadata):
        names += [s.name for s in response.list_services_response.service]
    return names


def test_reflection_needs_a_token_like_every_other_service(tmp_path: Path) -> None:
    async def scenario() -> None:
        auth = authenticator(tmp_path)
        async with (
            live(tmp_path, authenticator=auth, token=TOKEN_A) as env,
            grpc.aio.insecure_channel(env.target) as channel,
        ):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await _list_services(channel, ())
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
            names = await _list_services(channel, (("authorization", f"Bearer {TOKEN_A}"),))
            assert "agentskit.chat.v1.ChatService" in names

    run(scenario())


def test_reflection_can_be_turned_off(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path, reflection_enabled=False) as env:
            async with grpc.aio.insecure_channel(env.target) as channel:
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await _list_services(channel, ())
                assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
            assert await env.client.list_definitions()

    run(scenario())


def test_reload_swaps_the_tokens_and_a_bad_file_keeps_the_old_ones(tmp_path: Path) -> None:
    async def scenario() -> None:
        auth = authenticator(tmp_path)
        async with live(tmp_path, authenticator=auth, token=TOKEN_A) as env:
            sid = (await env.client.create_session("support")).session_id
            rotated = "rotated-token-for-tenant-a-42"
            tokens_file(auth.path, [(rotated, "a")])
            assert auth.reload() is True
            error = await refused(env.client.get_session(sid))
            assert error.code == grpc.StatusCode.UNAUTHENTICATED
            async with ChatClient(env.target, token=rotated) as client:
                assert (await client.get_session(sid)).session.session_id == sid
                auth.path.write_text("tokens: [{sha256: nothex, tenant: a}]\n", encoding="utf-8")
                assert auth.reload() is False
                assert (await client.get_session(sid)).session.session_id == sid

    run(scenario())


def test_tokens_and_digests_never_reach_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    async def scenario() -> None:
        auth = authenticator(tmp_path)
        async with live(tmp_path, authenticator=auth, token=TOKEN_A) as env:
            await env.client.create_session("support")
            for token in (TOKEN_B + "x", TOKEN_A):
                async with ChatClient(env.target, token=token) as client:
                    with contextlib.suppress(ChatError):
                        await client.list_definitions()
            auth.path.write_text(f"tokens: [{{sha256: {token_digest(TOKEN_A)}}}]\n")
            assert auth.reload() is False
            auth.path.write_text(
                f"tokens: [{{sha256: '{TOKEN_A}', tenant: a}}]\n", encoding="utf-8"
            )
            assert auth.reload() is False

    run(scenario())
    text = caplog.text
    assert "tokens reload refused" in text
    for secret in (TOKEN_A, TOKEN_B, token_digest(TOKEN_A), token_digest(TOKEN_B)):
        assert secret not in text


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[]", "expected a mapping with a `tokens` list"),
        ("tokens: [{sha256: abc, tenant: a}]", "tokens[0].sha256: must be 64 hex digits"),
        (f"tokens: [{{sha256: {'a' * 64}, tenant: ' x'}}]", "tokens[0].tenant"),
        (f"tokens: [{{sha256: {'a' * 64}, tenant: a, role: admin}}]", "unknown keys ['role']"),
        (
            f"tokens: [{{sha256: {'a' * 64}, tenant: a}}, {{sha256: {'A' * 64}, tenant: b}}]",
            "tokens[1]: repeats the digest",
        ),
        ("tokens: [{sha256: x", "not valid YAML or JSON"),
        (f"tokens: [{{sha256: {'a' * 64}, tenant: a, rates: {{}}}}]", "tokens[0].rates: must map"),
        (
            f"tokens: [{{sha256: {'a' * 64}, tenant: a, rates: {{turns: fast}}}}]",
            "tokens[0].rates.turns: must be a number",
        ),
        (
            f"tokens: [{{sha256: {'a' * 64}, tenant: a, rates: {{turns: 0}}}}]",
            "tokens[0].rates.turns: must be positive",
        ),
        (
            f"tokens: [{{sha256: {'a' * 64}, tenant: a, rates: {{turns_burst: 3}}}}]",
            "tokens[0].rates.turns_burst: needs turns",
        ),
        (
            f"tokens: [{{sha256: {'a' * 64}, tenant: a,"
            " rates: {sessions: 1, sessions_burst: 0.5}}]",
            "tokens[0].rates.sessions_burst: must be a whole number",
        ),
        (
            f"tokens: [{{sha256: {'a' * 64}, tenant: a, rates: {{turns: 1}}}},"
            f" {{sha256: {'b' * 64}, tenant: a}}]",
            "tokens[1].rates: differ from an earlier entry of the same tenant",
        ),
    ],
)
def test_a_bad_tokens_file_is_refused_with_its_entry_named(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(TokenFileError) as caught:
        load_tokens(path)
    assert message in str(caught.value)
    assert "a" * 64 not in str(caught.value)


TOKEN_LIMITED = "token-of-tenant-a-support-only-42"


def test_a_restricted_token_learns_only_that_a_tenants_session_id_is_taken(
    tmp_path: Path,
) -> None:
    """Session ids are one namespace per tenant (SECURITY.md): a token restricted to some
    definitions cannot reach a session of another definition of its tenant, but creating a
    session under that id answers ALREADY_EXISTS exactly as for an id of its own, and
    changes nothing."""
    path = tokens_file(
        tmp_path / "tokens.yaml",
        [(TOKEN_A, "a")],
        f"  - {{sha256: {token_digest(TOKEN_LIMITED)}, tenant: a, definitions: [support]}}\n",
    )

    def shape(error: ChatError) -> tuple[object, ...]:
        return error.code, error.reason, error.message, dict(error.metadata)

    async def scenario() -> None:
        async with (
            live(tmp_path, authenticator=Authenticator(path), token=TOKEN_A) as env,
            ChatClient(env.target, token=TOKEN_LIMITED) as limited,
        ):
            await env.client.create_session("probe", session_id="hidden")
            await env.client.run_turn("hidden", Submit("/count"), turn_id="t1")
            await limited.create_session("support", session_id="mine")
            before = env.dump()
            # Every read of the hidden session answers as for an id nobody has ...
            hidden = await refused(limited.get_session("hidden"))
            assert shape(hidden) == shape(await refused(limited.get_session("nobody")))
            assert hidden.code == grpc.StatusCode.NOT_FOUND
            # ... but its id is taken: the same answer as for the token's own session.
            taken = await refused(limited.create_session("support", session_id="hidden"))
            assert taken.code == grpc.StatusCode.ALREADY_EXISTS
            assert taken.reason == "ERROR_REASON_SESSION_EXISTS"
            own = await refused(limited.create_session("support", session_id="mine"))
            assert shape(taken) == shape(own)  # nothing of the definition, state or history
            assert env.dump() == before
            assert (await env.client.get_turn("hidden", "t1")).outcome == "completed"
            assert (await limited.create_session("support", session_id="free")).cursor == 0

    run(scenario())
