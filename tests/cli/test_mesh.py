"""`serve` as one replica of several: the drain delay after SIGTERM, connections that age
out, and the digest key shared through the environment or a mounted file."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentskit_chat_client import ChatClient, ChatError, Retry, Submit, TurnCompleted
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import (
    EXAMPLES,
    SLOW_MODULE,
    Gate,
    collect,
    health_status,
    run_cli,
    terminal,
)
from tests.waiting import EVENT_WAIT, until

NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVING = health_pb2.HealthCheckResponse.SERVING
KEY = "5e" * 32
DEFINITIONS = ("--definitions", str(EXAMPLES))


async def wait_until_refused(client: ChatClient, session_id: str, timeout: float) -> ChatError:
    """Submit turns until one is refused; the refusal."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            await client.run_turn(session_id, Submit("/start"))
        except ChatError as error:
            return error
        assert time.monotonic() < deadline, "turns were never refused"
        await asyncio.sleep(0.1)


def test_after_sigterm_turns_are_served_for_the_drain_delay_while_health_says_not_serving(
    launch: Launcher, gate: Gate, tmp_path: Path
) -> None:
    """A slow turn stays in flight throughout, so the server is still up once it refuses."""
    args = (*DEFINITIONS, "--definitions-module", SLOW_MODULE, "--drain-delay", "4")
    server = launch(tmp_path / "state", *args, env=gate.env)

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            sid = (await client.create_session("support")).session_id
            slow = (await client.create_session("slow")).session_id
            in_flight = asyncio.ensure_future(collect(client, slow, Submit("slow")))
            await gate.wait_calls(1)
            server.send(signal.SIGTERM)
            signalled = time.monotonic()
            while await health_status(server.target) != NOT_SERVING:
                await asyncio.sleep(0.02)
            served = await client.run_turn(sid, Submit("/start"))
            assert served.ok  # within the delay: the server refuses turns after it
            refused = await wait_until_refused(client, sid, timeout=EVENT_WAIT)
            assert refused.code == grpc.StatusCode.UNAVAILABLE
            assert refused.reason == "ERROR_REASON_SHUTTING_DOWN"
            assert time.monotonic() - signalled >= 4
            gate.open()
            assert isinstance(terminal(await in_flight), TurnCompleted)

    asyncio.run(scenario())
    assert server.wait() == 0
    assert "agentskit-chat stopped" in server.stdout


def test_sigint_skips_the_drain_delay(launch: Launcher, tmp_path: Path) -> None:
    server = launch(tmp_path / "state", *DEFINITIONS, "--drain-delay", "120")
    server.send(signal.SIGINT)
    assert server.wait(timeout=20) == 0


async def watch_lasts(target: str, seconds: float) -> bool:
    """Whether a health Watch stream on a new connection stays open for `seconds`."""
    async with grpc.aio.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        watch = stub.Watch(health_pb2.HealthCheckRequest(service=""))  # type: ignore[attr-defined]
        first = await watch.read()
        assert first.status == SERVING
        try:
            async with asyncio.timeout(seconds):
                await watch.read()  # nothing changes: only the connection ending returns
        except TimeoutError:
            watch.cancel()
            return True
        except grpc.aio.AioRpcError:
            pass
        assert await watch.code() == grpc.StatusCode.UNAVAILABLE
        return False


def test_a_connection_is_closed_once_it_reaches_the_maximum_age(
    launch: Launcher, tmp_path: Path
) -> None:
    aging = launch(
        tmp_path / "aging",
        *DEFINITIONS,
        "--max-connection-age",
        "1",
        "--max-connection-age-grace",
        "0.5",
    )
    lasting = launch(tmp_path / "lasting", *DEFINITIONS)

    async def scenario() -> None:
        assert not await watch_lasts(aging.target, EVENT_WAIT)
        assert await watch_lasts(lasting.target, 3)
        async with ChatClient(aging.target, timeout=30) as client:  # clients reconnect
            session = await client.create_session("support")
            channel = client.channel
            await until(
                lambda: channel.get_state() != grpc.ChannelConnectivity.READY,
                "the aged connection's close",
            )
            assert (await client.run_turn(session.session_id, Submit("/start"))).ok

    asyncio.run(scenario())


def test_replicas_with_the_same_key_from_the_environment_and_a_file_replay_each_other(
    launch: Launcher, tmp_path: Path
) -> None:
    store = f"sqlite://{tmp_path / 'shared.db'}"
    key_file = tmp_path / "secret" / "digest-key"
    key_file.parent.mkdir()
    key_file.write_text(KEY + "\n")
    from_env = launch(
        tmp_path / "a", *DEFINITIONS, "--store", store, env={"AGENTSKIT_CHAT_DIGEST_KEY": KEY}
    )
    from_file = launch(
        tmp_path / "b", *DEFINITIONS, "--store", store, "--digest-key-file", str(key_file)
    )
    generated = launch(tmp_path / "c", *DEFINITIONS, "--store", store)

    async def scenario() -> None:
        async with (
            ChatClient(from_env.target, timeout=30) as first,
            ChatClient(from_file.target, timeout=30) as second,
            ChatClient(generated.target, timeout=30) as other,
        ):
            sid = (await first.create_session("support")).session_id
            assert (await first.run_turn(sid, Submit("/start"))).ok
            again = await second.run_turn(sid, Retry())
            assert again.decision is not None
            assert again.decision.replayed  # the digest of the input matched
            done = await second.run_turn(sid, Submit("/name Ada"))
            assert done.text == "Welcome, Ada."
            control = (await first.create_session("support")).session_id
            assert (await first.run_turn(control, Submit("/start"))).ok
            elsewhere = await other.run_turn(control, Retry())
            assert elsewhere.decision is not None
            assert not elsewhere.decision.replayed  # another key: the digest did not match

    asyncio.run(scenario())
    assert not (tmp_path / "a" / "digest.key").exists()
    assert not (tmp_path / "b" / "digest.key").exists()
    assert (tmp_path / "c" / "digest.key").exists()


def serve_args(tmp_path: Path, *extra: str) -> list[str]:
    return ["serve", "--listen", "127.0.0.1:0", "--state-dir", str(tmp_path), *DEFINITIONS, *extra]


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_serve_refuses_a_shared_store_with_a_key_generated_on_this_host(
    tmp_path: Path, scheme: str
) -> None:
    url = f"{scheme}://app:s3cret-pw@db.example:5432/chat"
    result = run_cli(*serve_args(tmp_path, "--store", url))
    assert result.returncode == 2
    output = result.stdout + result.stderr
    assert "AGENTSKIT_CHAT_DIGEST_KEY" in output
    assert "--digest-key-file" in output
    assert "same key" in output
    assert "s3cret-pw" not in output
    assert "listening" not in output
    assert not (tmp_path / "digest.key").exists()


@pytest.mark.parametrize(
    ("env", "flag", "message"),
    [
        ({"AGENTSKIT_CHAT_DIGEST_KEY": "not-hex-" + KEY}, False, "not hold a hex-encoded key"),
        ({"AGENTSKIT_CHAT_DIGEST_KEY": "ab" * 8}, False, "shorter than 16 bytes"),
        ({"AGENTSKIT_CHAT_DIGEST_KEY": KEY}, True, "given twice"),
        ({}, True, "cannot read the digest key file"),
    ],
)
def test_serve_refuses_an_unusable_digest_key_without_showing_it(
    tmp_path: Path, env: dict[str, str], flag: bool, message: str
) -> None:
    extra = ("--digest-key-file", str(tmp_path / "missing")) if flag else ()
    result = run_cli(*serve_args(tmp_path, *extra), env=env)
    assert result.returncode == 2
    output = result.stdout + result.stderr
    assert message in output
    assert KEY not in output
    assert "listening" not in output


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--drain-delay", "-1", "--drain-delay must not be negative"),
        ("--keepalive-time", "0", "keepalive time and timeout must be positive"),
        ("--max-connection-age", "-5", "must not be negative"),
    ],
)
def test_serve_refuses_unusable_connection_settings(
    tmp_path: Path, flag: str, value: str, message: str
) -> None:
    result = run_cli(*serve_args(tmp_path, flag, value))
    assert result.returncode == 2
    assert message in result.stderr
    assert "listening" not in result.stdout
