"""An interrupted turn on the wire: a turn whose process stopped while a server tool ran
is reported by GetTurn and ListTurns as failed `interrupted`, naming the calls whose
outcome is unknown, and a repeated turn id answers that failure without running anything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc
from agentskit_chat.conversation import Lease, PendingCall
from agentskit_chat_client import PendingToolCall, Submit

from .conftest import Live, live, run


async def died_running(env: Live, session_id: str, *calls: PendingCall) -> None:
    """Store the session as a process leaves it when it dies while `calls` run: a lease,
    lapsed since, that names them."""
    records = env.service._records
    loaded = await records.load(session_id)
    lapsed = Lease("t-dead", "gone", 1, "submit", 0, "u-dead", running=calls)
    assert await records.save(loaded, loaded.record.evolve(lease=lapsed)) is not None


def test_get_turn_and_list_turns_name_the_calls_of_unknown_outcome(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env, grpc.aio.insecure_channel(env.target) as channel:
            stub: Any = chat_pb2_grpc.ChatServiceStub(channel)
            sid = (await env.client.create_session("probe")).session_id
            calls = (
                PendingCall("c1", "cancel_order", "server"),
                PendingCall("c2", "refund", "server"),
            )
            await died_running(env, sid, *calls)

            got = await stub.GetTurn(pb.GetTurnRequest(session_id=sid, turn_id="t-dead"))
            record = got.turn
            assert record.outcome == pb.TURN_OUTCOME_FAILED
            assert (record.failure.code, record.failure.retryable) == ("interrupted", True)
            assert [(c.tool_call_id, c.name, c.wait) for c in record.unknown_tool_calls] == [
                ("c1", "cancel_order", pb.TOOL_WAIT_SERVER),
                ("c2", "refund", pb.TOOL_WAIT_SERVER),
            ]
            assert list(record.pending_tool_calls) == []
            listed = await stub.ListTurns(pb.ListTurnsRequest(session_id=sid))
            assert [t.turn_id for t in listed.turns] == ["t-dead"]
            assert listed.turns[0].unknown_tool_calls == record.unknown_tool_calls

            seen = await env.client.get_turn(sid, "t-dead")
            assert seen.unknown_tool_calls == (
                PendingToolCall("c1", "cancel_order", "server"),
                PendingToolCall("c2", "refund", "server"),
            )
            before = env.dump()
            repeated = await env.client.run_turn(sid, Submit("again"), turn_id="t-dead")
            assert repeated.started is not None
            assert repeated.started.duplicate
            assert repeated.failed is not None
            assert (repeated.failed.code, repeated.failed.retryable) == ("interrupted", True)
            assert env.probe.model_calls == []  # nothing ran
            assert env.dump() == before  # a repeat writes nothing

            later = await env.client.run_turn(sid, Submit("hello"), turn_id="t2")
            assert later.ok
            kept = await env.client.get_turn(sid, "t-dead")  # now written, as it was read
            assert kept.unknown_tool_calls == seen.unknown_tool_calls
            assert kept.failure == seen.failure

    run(scenario())
