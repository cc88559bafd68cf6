"""Per-tenant token buckets on turns and session creation, answered with RetryInfo."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc
from agentskit_chat.service import (
    Principal,
    Rate,
    Rated,
    RateLimiter,
    RateLimits,
    ServiceError,
    acting_as,
)
from agentskit_chat.transport import Authenticator, token_digest
from agentskit_chat_client import ChatClient, Submit

from .conftest import live, refused, run

TOKEN_A = "rate-tenant-a-token-0000000"
TOKEN_B = "rate-tenant-b-token-1111111"


def two_tenants(tmp_path: Path) -> Authenticator:
    path = tmp_path / "tokens.yaml"
    path.write_text(
        "tokens:\n"
        f"  - {{sha256: {token_digest(TOKEN_A)}, tenant: a}}\n"
        f"  - {{sha256: {token_digest(TOKEN_B)}, tenant: b}}\n",
        encoding="utf-8",
    )
    return Authenticator(path)


def retry_info(error: grpc.aio.AioRpcError) -> error_details_pb2.RetryInfo:
    trailers = dict(error.trailing_metadata() or ())
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    for detail in status.details:
        info = error_details_pb2.RetryInfo()
        if detail.Unpack(info):
            return info
    raise AssertionError("no RetryInfo")


def test_turns_over_the_rate_are_refused_per_tenant_with_a_retry_delay(tmp_path: Path) -> None:
    async def scenario() -> None:
        rates = RateLimits(turns=Rate(per_second=0.5, burst=2))
        auth = two_tenants(tmp_path)
        async with live(tmp_path, authenticator=auth, token=TOKEN_A, rates=rates) as env:
            sid = (await env.client.create_session("support")).session_id
            await env.client.run_turn(sid, Submit("/start"))
            await env.client.run_turn(sid, Submit("/name Ada"))
            before = env.dump()
            error = await refused(env.client.stream_turn(sid, Submit("/start")))
            assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert error.reason == "ERROR_REASON_RATE_LIMITED"
            assert error.metadata["limit"] == "turns"
            assert 0 < int(error.metadata["retry_after_ms"]) <= 2000
            assert env.dump() == before
            stub = chat_pb2_grpc.ChatServiceStub(env.client.channel)
            request = pb.StreamTurnRequest(
                session_id=sid, turn_id="t9", submit=pb.SubmitOperation(content="/start")
            )
            call: Any = stub.StreamTurn(request, metadata=(("authorization", f"Bearer {TOKEN_A}"),))
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                async for _ in call:
                    pass
            delay = retry_info(caught.value).retry_delay
            assert 0 < delay.ToMilliseconds() <= 2000
            async with ChatClient(env.target, token=TOKEN_B) as other:  # its own bucket
                mine = (await other.create_session("support")).session_id
                assert (await other.run_turn(mine, Submit("/start"))).text

    run(scenario())


def test_session_creation_over_the_rate_is_refused_and_stores_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        rates = RateLimits(sessions=Rate(per_second=0.1, burst=1))
        async with live(tmp_path, rates=rates) as env:
            await env.client.create_session("support", session_id="first")
            error = await refused(env.client.create_session("support", session_id="second"))
            assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert error.metadata["limit"] == "sessions"
            assert env.raw("SELECT session_id FROM sessions") == [("first",)]
            assert (await env.client.run_turn("first", Submit("/start"))).text  # turns: no limit

    run(scenario())


def test_a_tenant_with_its_own_rates_in_the_tokens_file_is_limited_alone(tmp_path: Path) -> None:
    async def scenario() -> None:
        path = tmp_path / "tokens.yaml"
        path.write_text(
            "tokens:\n"
            f"  - {{sha256: {token_digest(TOKEN_A)}, tenant: a,"
            " rates: {turns: 0.01, turns_burst: 1, sessions: 0.01, sessions_burst: 2}}\n"
            f"  - {{sha256: {token_digest(TOKEN_B)}, tenant: b}}\n",
            encoding="utf-8",
        )
        auth = Authenticator(path)
        async with live(tmp_path, authenticator=auth, token=TOKEN_A) as env:  # no server rates
            sid = (await env.client.create_session("support")).session_id
            await env.client.run_turn(sid, Submit("/start"))
            error = await refused(env.client.stream_turn(sid, Submit("/name Ada")))
            assert (error.code, error.reason) == (
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                "ERROR_REASON_RATE_LIMITED",
            )
            assert error.metadata["limit"] == "turns"
            assert error.retry_delay is not None
            await env.client.create_session("support")
            error = await refused(env.client.create_session("support"))
            assert error.metadata["limit"] == "sessions"
            async with ChatClient(env.target, token=TOKEN_B) as other:  # unlimited
                mine = (await other.create_session("support")).session_id
                for content in ("/start", "/name Ada", "hello", "again"):
                    await other.run_turn(mine, Submit(content))

    run(scenario())


def test_a_tenants_own_rate_replaces_the_servers_for_that_kind_only() -> None:
    now = [0.0]
    limiter = RateLimiter(
        RateLimits(turns=Rate(per_second=1, burst=1), sessions=Rate(per_second=1, burst=1)),
        clock=lambda: now[0],
    )
    generous = Principal("big", rates=RateLimits(turns=Rate(per_second=1, burst=3)))
    with acting_as(generous):
        for _ in range(3):
            limiter.check(Rated.TURNS)
        with pytest.raises(ServiceError):
            limiter.check(Rated.TURNS)
        limiter.check(Rated.SESSIONS)
        with pytest.raises(ServiceError):  # sessions: the server's rate
            limiter.check(Rated.SESSIONS)


def test_a_bucket_refills_at_its_rate() -> None:
    now = [100.0]
    limiter = RateLimiter(RateLimits(turns=Rate(per_second=2, burst=2)), clock=lambda: now[0])
    with acting_as(Principal("t")):
        limiter.check(Rated.TURNS)
        limiter.check(Rated.TURNS)
        with pytest.raises(ServiceError) as caught:
            limiter.check(Rated.TURNS)
        assert caught.value.metadata["retry_after_ms"] == "500"
        now[0] += 0.5
        limiter.check(Rated.TURNS)
        with pytest.raises(ServiceError):
            limiter.check(Rated.TURNS)
        now[0] += 60  # idle: back to the burst, no more
        limiter.check(Rated.TURNS)
        limiter.check(Rated.TURNS)
        with pytest.raises(ServiceError):
            limiter.check(Rated.TURNS)
        limiter.check(Rated.SESSIONS)  # unlimited
    with acting_as(Principal("other")):
        limiter.check(Rated.TURNS)


def test_rates_are_off_by_default() -> None:
    limiter = RateLimiter()
    for _ in range(1000):
        limiter.check(Rated.TURNS)
        limiter.check(Rated.SESSIONS)
    with pytest.raises(ValueError, match="positive"):
        Rate(per_second=0)
