"""The rolling update of docs/how-to/revisions.md, with that page's files: Debian's nginx
(deploy/nginx/nginx.conf, as in test_proxy.py) in front of three `serve` replicas on one
PostgreSQL database, and conversations taking turns through it all along.

The replicas start with revision 1 alone. Step 1 ships revision 2 beside it with no weight,
step 2 moves the weights to revision 2; at each step every replica in turn is restarted
(SIGTERM: it drains, then starts again on the same port) or reloaded (SIGHUP), and the next
one only once every conversation has completed a turn since. The replicas share one
definitions directory, written once per step: a replica reads it only when it starts or
reloads, so until its turn it keeps what it read before.

No turn is refused for its revision and none is lost: every turn completes, after sends
refused with ABORTED or UNAVAILABLE (a draining replica's), which the client repeats under
the same turn id. Nobody moves in step 1; every session ends on revision 2 with the state
its commands imply and its whole history; the replicas' migration counters add up to the
number of sessions, all of which started on revision 1.
"""

from __future__ import annotations

import asyncio
import secrets
import signal
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import grpc
import pytest

from agentskit_chat.fakemodel import FakeModelServer
from agentskit_chat_client import ChatClient
from tests.deploy.conversations import (
    DEFINITION,
    DONE,
    SCRIPT,
    Conversation,
    Progress,
    Roll,
    history_problems,
    metrics_url,
    migration_counts,
    sent_again,
    turn_problems,
    until,
    write_step,
)
from tests.deploy.nginx import Call, Nginx
from tests.deploy.replicas import Replicas, Store, migrate, slow_reply
from tests.postgres import Cluster

REPLICAS: Final = 3
SESSIONS: Final = 24
CHUNKS, CHUNK_DELAY = 16, 0.05
SERVE_FLAGS: Final = (
    *("--turn-timeout", "10", "--lease-ttl", "12"),
    *("--keepalive-time", "1"),
    *("--metrics-listen", "127.0.0.1:0"),
)
AFTER: Final = len(SCRIPT)
"""Turns each conversation sends once the roll is done: one of each command."""
MAX_TURNS: Final = 300
"""Turns of one conversation at most (600 messages, under the history's 1,000)."""
STEP_TIMEOUT: Final = 60.0
SCENARIO_TIMEOUT: Final = 300.0
COUNTER_TIMEOUT: Final = 30.0
RELOADED: Final = {1: "definitions reloaded: revised desk", 2: "definitions reloaded: updated desk"}
"""What a replica logs once a SIGHUP at each step took: revision 2 added, then weights."""
SERVED: Final = {
    1: [(1, 100, ()), (2, 0, (1,))],
    2: [(1, 0, ()), (2, 100, (1,))],
}
"""What every replica serves after each step: (revision, weight, migrates_from)."""
MIGRATED: Final = (
    ("agentskit_chat_definition_id", DEFINITION),
    ("agentskit_chat_migration_from_revision", "1"),
    ("agentskit_chat_migration_outcome", "migrated"),
    ("agentskit_chat_migration_to_revision", "2"),
)


@pytest.fixture
def store(postgres: Cluster, tmp_path: Path) -> Iterator[Store]:
    name = f"rolling_{secrets.token_hex(4)}"
    url = postgres.create_database(name)
    password_file = tmp_path / "store-password"
    password_file.write_text(postgres.password + "\n")
    password_file.chmod(0o600)
    try:
        yield migrate(url, password_file)
    finally:
        postgres.drop_database(name)


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer(default=slow_reply(CHUNKS, CHUNK_DELAY)) as server:
        yield server


@dataclass(slots=True)
class Observed:
    """What the roll saw between the steps."""

    served: dict[int, list[list[tuple[int, int, tuple[int, ...]]]]] = field(default_factory=dict)
    """Step -> each replica's served revisions after it."""
    stored_revisions: dict[int, Counter[int]] = field(default_factory=dict)
    """Step -> the conversations' sessions by stored revision after it."""
    new_session_revision: dict[int, int] = field(default_factory=dict)
    """Step -> the revision a session created after it got."""
    seconds: list[float] = field(default_factory=list)
    """How long each restart or reload took, then the wait for a turn of each session."""


async def roll_out(
    replicas: Replicas,
    target: str,
    definitions: Path,
    model_url: str,
    how: str,
    conversations: list[Conversation],
) -> Observed:
    roll = Roll()
    progress = Progress([0] * len(conversations))
    observed = Observed()
    loads = [asyncio.ensure_future(c.run(roll, progress, AFTER, MAX_TURNS)) for c in conversations]
    try:
        await progress.each_one_more(STEP_TIMEOUT)  # every session exists and took a turn
        for step in (1, 2):
            write_step(definitions, model_url, step)
            roll.step = step
            for n in range(REPLICAS):
                began = time.monotonic()
                if how == "restart":
                    assert await asyncio.to_thread(replicas.restart, n, signal.SIGTERM) == 0
                else:
                    server = replicas.servers[n]
                    assert server is not None
                    server.send(signal.SIGHUP)
                    await server.wait_output_async(RELOADED[step])
                rolled = time.monotonic()
                await progress.each_one_more(STEP_TIMEOUT)
                observed.seconds += [round(rolled - began, 2), round(time.monotonic() - rolled, 2)]
            observed.served[step] = [await served(address) for address in replicas.addresses]
            async with ChatClient(target, timeout=30) as client:
                revisions = [
                    (await client.get_session(c.session_id)).session.definition_revision
                    for c in conversations
                ]
                observed.stored_revisions[step] = Counter(revisions)
                new = await client.create_session(DEFINITION)
                observed.new_session_revision[step] = new.definition_revision
        roll.step = DONE
        await asyncio.wait_for(asyncio.gather(*loads), STEP_TIMEOUT)
    finally:
        for load in loads:
            load.cancel()
    return observed


async def served(address: str) -> list[tuple[int, int, tuple[int, ...]]]:
    """The served revisions one replica lists in GetDefinition."""
    async with ChatClient(address, timeout=10) as client:
        definition = await client.get_definition(DEFINITION)
    return [(s.revision, s.weight, s.migrates_from) for s in definition.served_revisions]


@dataclass(frozen=True, slots=True)
class Stored:
    """A session as the service has it at the end."""

    revision: int
    state: str
    blocked: bool
    messages: tuple[tuple[str, str, str], ...]


async def stored(target: str, conversations: list[Conversation]) -> dict[str, Stored]:
    found = {}
    async with ChatClient(target, timeout=10) as client:
        for conversation in conversations:
            got = await client.get_session(conversation.session_id)
            found[conversation.session_id] = Stored(
                got.session.definition_revision,
                got.session.snapshot.state,
                got.session.migration_blocked is not None,
                tuple((m.id, m.role, m.content) for m in got.messages),
            )
    return found


async def migrations_counted(urls: list[str]) -> dict[tuple[tuple[str, str], ...], float]:
    """The replicas' migration counters, once the migrated ones add up to SESSIONS (the
    count of a turn is added as it ends, just after its last event went out)."""

    def enough() -> bool:
        return migration_counts(urls).get(MIGRATED, 0.0) >= SESSIONS

    try:
        await until(enough, COUNTER_TIMEOUT, "the migrations counted")
    except AssertionError as error:
        raise AssertionError(f"{error}: {migration_counts(urls)}") from None
    return migration_counts(urls)


@pytest.mark.parametrize("how", ["restart", "reload"])
def test_a_rolling_update_moves_every_session_to_revision_2_and_refuses_no_turn(
    store: Store, model: FakeModelServer, tmp_path: Path, how: str
) -> None:
    answer = "".join(slow_reply(CHUNKS, CHUNK_DELAY).chunks)
    definitions = tmp_path / "definitions"
    write_step(definitions, model.url, 0)
    replicas = Replicas(tmp_path / "replicas", store, definitions, REPLICAS, SERVE_FLAGS)
    try:
        replicas.start_all()
        with Nginx(tmp_path / "nginx", replicas.addresses) as proxy:
            conversations = [Conversation(n, proxy.target) for n in range(SESSIONS)]
            observed = asyncio.run(
                asyncio.wait_for(
                    roll_out(replicas, proxy.target, definitions, model.url, how, conversations),
                    SCENARIO_TIMEOUT,
                )
            )
            at_end = asyncio.run(stored(proxy.target, conversations))
        calls = proxy.calls()
        urls = [metrics_url(server.stdout) for server in replicas.servers if server is not None]
        counted = asyncio.run(migrations_counted(urls))
    finally:
        replicas.close()

    problems = [p for c in conversations for p in c.problems]
    assert not problems, "\n".join(problems)
    broken = [call for c in conversations for call in c.log.calls if call.code != "OK"]
    assert [call for call in broken if not sent_again(call)] == []  # names only the odd ones
    if how == "reload":
        assert broken == []  # a reload refuses nothing and cuts no stream
    assert {c.revision_at_start for c in conversations} == {1}
    for conversation in conversations:
        found = turn_problems(conversation, answer)
        assert not found, "\n".join(found)
        assert len(conversation.turns) >= 2 * REPLICAS + AFTER
        session = at_end[conversation.session_id]
        assert (session.revision, session.blocked) == (2, False), conversation.index
        assert session.state == conversation.turns[-1].completed.snapshot.state
        found = history_problems(conversation, session.messages)
        assert not found, "\n".join(found)
    # Step 1 moved nobody and new sessions still got revision 1; step 2 moved everyone.
    assert observed.served == {step: [SERVED[step]] * REPLICAS for step in SERVED}
    assert observed.stored_revisions[1] == Counter({1: SESSIONS})
    assert observed.new_session_revision == {1: 1, 2: 2}
    assert counted == {MIGRATED: SESSIONS}
    assert not refused_for_revision(calls)
    report(how, conversations, calls, counted, observed.seconds)


def refused_for_revision(calls: list[Call]) -> list[Call]:
    """Calls nginx saw end FAILED_PRECONDITION."""
    return [call for call in calls if call.grpc_status == "9"]


def report(
    how: str,
    conversations: list[Conversation],
    calls: list[Call],
    counted: dict[tuple[tuple[str, str], ...], float],
    seconds: list[float],
) -> None:
    """The figures of the run, shown with `pytest -s`."""
    turns = sum(len(c.turns) for c in conversations)
    refusals = Counter(f"{r.code} {r.reason}" for c in conversations for r in c.refusals)
    broken = Counter(
        f"{call.method} {call.code} {call.reason}"
        for c in conversations
        for call in c.log.calls
        if call.code != "OK"
    )
    reattaches = sum(call.method == "WatchTurn" for c in conversations for call in c.log.calls)
    statuses = Counter(call.grpc_status for call in calls if call.method == "StreamTurn")
    print(
        f"\n{how}: {len(conversations)} sessions, {turns} turns completed, "
        f"refusals retried: {dict(refusals) or 0}, calls the client made again: {dict(broken)}, "
        f"WatchTurn calls: {reattaches}, roll seconds: {seconds}, "
        f"StreamTurn statuses at nginx: {dict(statuses)}, "
        f"migrated: {sum(counted.values()):.0f}"
    )


ONE_STEP_SESSIONS: Final = 4
ONE_STEP_TURNS: Final = 4 * REPLICAS


@pytest.mark.parametrize("published", [True, False], ids=["published", "unpublished"])
def test_in_one_step_every_replica_serves_both_revisions_while_they_are_published(
    store: Store, model: FakeModelServer, tmp_path: Path, published: bool
) -> None:
    """An update in one step: revision 2 replaces revision 1 in its file on one replica
    (declaring the migration), while the others still serve revision 1 alone; nginx passes
    calls to the replicas in turn. Sessions that move there are served by the others from
    the revision 2 it publishes in the store, and it reads revision 1 sessions with what
    they publish (and migrates them). Without publishing (`--revision-lease 0`) sessions
    are refused both ways."""
    definitions = tmp_path / "definitions"
    write_step(definitions, model.url, 0)
    flags = SERVE_FLAGS if published else (*SERVE_FLAGS, "--revision-lease", "0")
    replicas = Replicas(tmp_path / "replicas", store, definitions, REPLICAS, flags)
    try:
        replicas.start_all()
        with Nginx(tmp_path / "nginx", replicas.addresses) as proxy:
            conversations = [Conversation(n, proxy.target) for n in range(ONE_STEP_SESSIONS)]

            async def scenario() -> dict[str, Stored]:
                async with ChatClient(proxy.target, timeout=30) as client:
                    for conversation in conversations:
                        await conversation.create(client)
                write_step(definitions, model.url, 3)
                first = replicas.servers[0]
                assert first is not None
                first.send(signal.SIGHUP)
                await first.wait_output_async(RELOADED[1])  # it serves revision 2 alone
                roll, progress = Roll(DONE), Progress([0] * ONE_STEP_SESSIONS)
                await asyncio.gather(
                    *(c.run(roll, progress, ONE_STEP_TURNS, ONE_STEP_TURNS) for c in conversations)
                )
                return await stored(proxy.target, conversations) if published else {}

            at_end = asyncio.run(asyncio.wait_for(scenario(), SCENARIO_TIMEOUT))
        calls = proxy.calls()
    finally:
        replicas.close()
    errors = [error for c in conversations for error in c.errors]
    assert {c.revision_at_start for c in conversations} == {1}
    if not published:
        assert errors, "no session was refused"
        for error in errors:
            assert error.code == grpc.StatusCode.FAILED_PRECONDITION, error
            assert error.reason == "ERROR_REASON_REVISION_MISMATCH"
            # Revision 1 on replica 0, which cannot read a session to migrate it; revision
            # 2 on the others, for a session that moved.
            assert error.metadata["definition_revision"] in {"1", "2"}
        return
    assert errors == []
    assert not refused_for_revision(calls)
    for conversation in conversations:
        assert len(conversation.turns) == ONE_STEP_TURNS, conversation.index
        session = at_end[conversation.session_id]
        assert session.state == conversation.turns[-1].completed.snapshot.state
    # Replica 0 moved those it served a turn of (in turn with the others: all, or nearly).
    assert 2 in {at_end[c.session_id].revision for c in conversations}
