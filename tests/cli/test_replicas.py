"""Several `serve` processes sharing one PostgreSQL database, as replicas behind one address.

Each replica has a state directory of its own; they share the digest key, given in the
environment to some and in a key file to others. Each test gets a fresh database, migrated
with `agentskit-chat migrate`.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import grpc
import pytest

from agentskit_chat_client import (
    ChatClient,
    ChatError,
    Retry,
    Submit,
    TurnCompleted,
    TurnDecision,
    TurnEvent,
    TurnFailed,
)
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import (
    Gate,
    Server,
    collect,
    complete_when_free,
    ended_by,
    run_cli,
    slow_args,
    terminal,
)
from tests.postgres import Cluster
from tests.waiting import EVENT_WAIT, until

SHORT_TURNS = ("--turn-timeout", "2", "--lease-ttl", "3")
LEASES = (3.0, 6.0, 12.0, 24.0, 48.0)
"""Lease lengths tried in turn (each turn timeout a second shorter): the killed turn's lease
must outlast the kill for the survivor's refusal to be checked, and a busy machine is slower
at it. The refusal check itself is by the turns' recorded start times, not by a pause."""
DIGEST_KEY = "5f" * 32


@dataclass(frozen=True)
class Database:
    """A migrated database of its own and the file holding its password."""

    url: str
    password_file: Path


@pytest.fixture
def database(postgres: Cluster, tmp_path: Path) -> Iterator[Database]:
    name = f"replicas_{secrets.token_hex(4)}"
    url = postgres.create_database(name)
    password_file = tmp_path / "store-password"
    password_file.write_text(postgres.password + "\n")
    password_file.chmod(0o600)
    try:
        migrated = run_cli("migrate", "--store", url, "--store-password-file", str(password_file))
        assert migrated.returncode == 0, migrated.stderr
        yield Database(url, password_file)
    finally:
        postgres.drop_database(name)


def replicas(
    launch: Launcher,
    count: int,
    database: Database,
    state_dir: Path,
    gate: Gate,
    *extra: str,
    url: str | None = None,
) -> list[Server]:
    """`count` replicas over `database`, each with a state directory of its own. The first
    reads the password and the digest key from files named by flags, the others from the
    environment."""
    key_file = state_dir / "shared-digest.key"
    key_file.parent.mkdir(parents=True, exist_ok=True)
    key_file.write_text(DIGEST_KEY + "\n")
    started = []
    for n in range(count):
        env = dict(gate.env)
        store = ["--store", url or database.url]
        if n == 0:
            store += ["--store-password-file", str(database.password_file)]
            store += ["--digest-key-file", str(key_file)]
        else:
            env["AGENTSKIT_CHAT_STORE_PASSWORD_FILE"] = str(database.password_file)
            env["AGENTSKIT_CHAT_DIGEST_KEY"] = DIGEST_KEY
        own = state_dir / f"replica-{n}"
        started.append(launch(own, *slow_args(*extra), *store, env=env, wait=False))
    for server in started:
        server.wait_listening()
    return started


def decisions(events: Sequence[TurnEvent]) -> list[TurnDecision]:
    return [e for e in events if isinstance(e, TurnDecision)]


def test_turns_spread_across_replicas_and_concurrent_turns_have_one_winner(
    launch: Launcher, gate: Gate, database: Database, tmp_path: Path
) -> None:
    # The default turn timeout: the winner waits at the gate however long the losers take.
    servers = replicas(launch, 3, database, tmp_path / "state", gate)

    async def body() -> None:
        clients = [ChatClient(server.target, timeout=30) for server in servers]
        try:
            session = await clients[0].create_session("slow")
            sid = session.session_id
            gate.open()
            states = []
            for n, client in zip(range(6), itertools.cycle(clients), strict=False):
                done = terminal(await collect(client, sid, Submit(f"turn {n}", message_id=f"u{n}")))
                assert isinstance(done, TurnCompleted), done
                states.append(done.snapshot.state)
            assert states == ["two", "three", "one", "two", "three", "one"]
            views = [await client.get_session(sid) for client in clients]
            assert views[0] == views[1] == views[2]
            assert [m.id for m in views[0].messages][::2] == [f"u{n}" for n in range(6)]

            gate.close()
            racers = [
                asyncio.ensure_future(collect(c, sid, Submit("race", message_id=f"r{n}")))
                for n, c in enumerate(clients)
            ]
            await gate.wait_calls(7)
            # The winner waits at the closed gate: it cannot end before the losers do.
            await until(lambda: sum(r.done() for r in racers) >= 2, "the losers' refusals")
            finished = [racer for racer in racers if racer.done()]
            assert len(finished) == 2, "the losers must be refused while the winner waits"
            for loser in finished:
                error = loser.exception()
                assert isinstance(error, ChatError), error
                assert error.code == grpc.StatusCode.ABORTED
                # Busy when the winner's lease was stored first; a lost compare-and-set
                # when both read the session before either claimed it.
                assert error.reason in ("ERROR_REASON_SESSION_BUSY", "ERROR_REASON_CONFLICT")
            gate.open()
            (winner,) = [racer for racer in racers if not racer.done()]
            done = terminal(await winner)
            assert isinstance(done, TurnCompleted), done
            assert done.snapshot.state == "two"
            assert len(gate.calls()) == 7
            history = await clients[2].get_session(sid)
            assert len(history.messages) == 14
            assert history.session.snapshot.state == "two"
        finally:
            for client in clients:
                await client.close()

    asyncio.run(body())
    for server in servers:
        server.send(signal.SIGTERM)
        assert server.wait() == 0


def test_a_replica_killed_mid_turn_hands_the_session_over_once_the_lease_lapses(
    launch: Launcher, database: Database, tmp_path: Path
) -> None:
    for round_, lease in enumerate(LEASES):
        if kill_and_hand_over(launch, database, tmp_path / f"round-{round_}", lease):
            return
    raise AssertionError("the killed turn's lease never outlasted the kill")


def kill_and_hand_over(launch: Launcher, database: Database, folder: Path, lease: float) -> bool:
    """The scenario with leases of `lease` seconds; False when the machine was too slow for
    it to check anything: the killed turn timed out before the kill, or its lease had
    lapsed (as the turns' recorded start times show) before the survivor was asked."""
    (folder / "gate").mkdir(parents=True)
    gate = Gate(folder / "gate")
    timeouts = ("--turn-timeout", str(lease - 1), "--lease-ttl", str(lease))
    doomed, survivor = replicas(launch, 2, database, folder / "state", gate, *timeouts)

    async def body() -> bool:
        async with (
            ChatClient(doomed.target, timeout=30) as first,
            ChatClient(survivor.target, timeout=30) as second,
        ):
            sid = (await first.create_session("slow")).session_id
            gate.open()
            done = terminal(await collect(first, sid, Submit("first", message_id="u1")))
            assert isinstance(done, TurnCompleted), done
            committed = await second.get_session(sid)

            gate.close()
            second_turn = Submit("second", message_id="u2")
            stream = asyncio.ensure_future(collect(first, sid, second_turn, turn_id="second"))
            await gate.wait_calls(2)
            running = await second.get_turn(sid, "second")
            doomed.send(signal.SIGKILL)
            killed = await ended_by(stream)
            if not isinstance(killed, ChatError):  # it timed out before the kill reached it
                timed_out = terminal(killed)
                assert isinstance(timed_out, TurnFailed), killed
                assert timed_out.code == "deadline_exceeded", killed
                return False
            assert killed.code == grpc.StatusCode.UNAVAILABLE
            if running.outcome != "running":
                return False  # it timed out before it was asked about
            assert running.start_time is not None
            lapses_at = running.start_time + timedelta(seconds=lease)

            early = Submit("too early", message_id="u3")
            busy = await ended_by(collect(second, sid, early, turn_id="too-early"))
            if not isinstance(busy, ChatError):  # it ran: right only once the lease lapsed
                ran = await second.get_turn(sid, "too-early")
                assert ran.start_time is not None
                assert ran.start_time >= lapses_at, (ran, lapses_at)
                return False
            assert busy.reason == "ERROR_REASON_SESSION_BUSY"
            loaded = await second.get_session(sid)
            assert loaded.messages == committed.messages
            assert loaded.session.snapshot == committed.session.snapshot

            gate.open()
            events, _ = await complete_when_free(
                second, sid, Submit("third", message_id="u3"), timeout=lease + EVENT_WAIT
            )
            third = terminal(events)
            assert isinstance(third, TurnCompleted), events
            (decision,) = decisions(events)
            assert (decision.from_state, decision.to_state, decision.replayed) == (
                "two",
                "three",
                False,
            )
            assert gate.calls() == ["u1", "u2", "u3"]
            history = await second.get_session(sid)
            assert [m.id for m in history.messages] == [
                "u1",
                done.assistant_message_id,
                "u3",
                third.assistant_message_id,
            ]

            retried = await collect(second, sid, Retry())
            again = terminal(retried)
            assert isinstance(again, TurnCompleted), retried
            (replay,) = decisions(retried)
            assert replay.replayed
            assert (replay.from_state, replay.to_state) == ("two", "three")
            assert gate.calls() == ["u1", "u2", "u3"]
            return True

    checked = asyncio.run(body())
    assert doomed.wait() == -signal.SIGKILL
    survivor.send(signal.SIGTERM)
    assert survivor.wait() == 0
    return checked


def test_a_database_restart_under_load_is_unavailable_then_recovers(
    launch: Launcher, gate: Gate, database: Database, postgres: Cluster, tmp_path: Path
) -> None:
    gate.open()
    url = f"{database.url}?connect_timeout=1"
    servers = replicas(launch, 2, database, tmp_path / "state", gate, *SHORT_TURNS, url=url)

    async def body() -> None:
        clients = [ChatClient(server.target, timeout=30) for server in servers]
        try:
            sids = [(await clients[0].create_session("slow")).session_id for _ in range(4)]
            outage = asyncio.Event()
            errors: list[ChatError] = []
            failed: list[TurnFailed] = []
            completed: list[tuple[bool, int]] = []

            async def load(n: int, sid: str) -> None:
                deadline = time.monotonic() + 60
                turn = 0
                while time.monotonic() < deadline and not (outage.is_set() and len(errors) > 4):
                    client = clients[turn % len(clients)]
                    turn += 1
                    try:
                        done = terminal(await collect(client, sid, Submit(f"{n}.{turn}")))
                    except ChatError as error:
                        if error.reason == "ERROR_REASON_SESSION_BUSY":
                            await asyncio.sleep(0.1)
                            continue
                        errors.append(error)
                        await asyncio.sleep(0.05)
                        continue
                    if isinstance(done, TurnFailed):  # a commit the outage refused
                        assert outage.is_set(), done
                        failed.append(done)
                    else:
                        completed.append((outage.is_set(), n))

            loaders = [asyncio.ensure_future(load(n, sid)) for n, sid in enumerate(sids)]
            await until(lambda: bool(completed), "a turn completed before the outage")
            await asyncio.to_thread(postgres.halt)
            outage.set()
            await asyncio.gather(*loaders)
            assert len(errors) > 4
            assert all(e.code == grpc.StatusCode.UNAVAILABLE for e in errors), errors
            assert any(e.reason == "ERROR_REASON_STORE_UNAVAILABLE" for e in errors), errors
            assert all(f.retryable for f in failed), failed
            await asyncio.to_thread(postgres.run_server)

            for n, sid in enumerate(sids):
                for client in clients:
                    events, _ = await _when_store_back(client, sid, f"after {n}")
                    done = terminal(events)
                    assert isinstance(done, TurnCompleted), events
                history = await clients[1].get_session(sid)
                assert history == await clients[0].get_session(sid)
                retried = await collect(clients[n % 2], sid, Retry())
                again = terminal(retried)
                assert isinstance(again, TurnCompleted), retried
                (replay,) = decisions(retried)
                assert replay.replayed
                user = [m for m in history.messages if m.role == "user"]
                assistant = [m for m in history.messages if m.role == "assistant"]
                assert len(user) == len(assistant) >= 2
        finally:
            for client in clients:
                await client.close()

    asyncio.run(body())
    for server in servers:
        server.send(signal.SIGTERM)
        assert server.wait() == 0


async def _when_store_back(
    client: ChatClient, sid: str, content: str, timeout: float = 30.0
) -> tuple[list[TurnEvent], int]:
    """Run a turn, retrying while the store is still coming back or a lease lapses."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await complete_when_free(client, sid, Submit(content))
        except ChatError as error:
            if error.code != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)
