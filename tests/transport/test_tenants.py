"""Two tenants on one server: another tenant's session is exactly a missing one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from agentskit_chat.transport import Authenticator, token_digest
from agentskit_chat_client import ChatClient, ChatError, Retry, Submit

from .conftest import live, refused, run
from .rpcs import RPCS

TOKEN_A = "tenant-a-token-1111111111"
TOKEN_B = "tenant-b-token-2222222222"
TOKEN_LIMITED = "tenant-c-token-3333333333"


def two_tenants(tmp_path: Path) -> Authenticator:
    path = tmp_path / "tokens.yaml"
    path.write_text(
        "tokens:\n"
        f"  - {{sha256: {token_digest(TOKEN_A)}, tenant: a}}\n"
        f"  - {{sha256: {token_digest(TOKEN_B)}, tenant: b}}\n"
        f"  - {{sha256: {token_digest(TOKEN_LIMITED)}, tenant: c, definitions: [support]}}\n",
        encoding="utf-8",
    )
    return Authenticator(path)


def shape(error: ChatError) -> tuple[Any, ...]:
    return error.code, error.reason, error.message, dict(error.metadata)


def test_every_rpc_across_two_tenants(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path, authenticator=two_tenants(tmp_path), token=TOKEN_A) as env:
            a = env.client
            async with ChatClient(env.target, token=TOKEN_B) as b:
                sid = (await a.create_session("support", session_id="shared-id")).session_id
                first = await a.run_turn(sid, Submit("/start"), turn_id="turn-1")
                assert (await a.get_turn(sid, "turn-1")).turn_id == "turn-1"
                before = env.dump()
                stored_a = await env.stored(sid, "a")

                # Each RPC on A's id, from B, answers exactly as for an id nobody has.
                reads: dict[str, Callable[[str], Any]] = {
                    "GetSession": lambda s: b.get_session(s),
                    "DeleteSession": lambda s: b.delete_session(s),
                    "TruncateHistory": lambda s: b.truncate_history(s),
                    "StreamTurn": lambda s: b.stream_turn(s, Submit("/start")),
                    "StreamTurn(retry)": lambda s: b.stream_turn(s, Retry()),
                    "StreamTurn(expected_cursor)": lambda s: b.stream_turn(
                        s, Submit("/start"), expected_cursor=2
                    ),
                    "GetTurn": lambda s: b.get_turn(s, "turn-1"),
                    "ListTurns": lambda s: b.list_turns(s),
                    "DeleteSession(expected_cursor)": lambda s: b.delete_session(
                        s, expected_cursor=2
                    ),
                    "TruncateHistory(expected_cursor)": lambda s: b.truncate_history(
                        s, expected_cursor=2
                    ),
                }
                for name, call in reads.items():
                    other = await refused(call(sid))
                    missing = await refused(call("nobody-has-this-id"))
                    assert other.code == grpc.StatusCode.NOT_FOUND, name
                    assert other.reason == "ERROR_REASON_SESSION_NOT_FOUND", name
                    assert shape(other) == shape(missing), name
                assert env.dump() == before

                # B may create the same id: its own session, revealing nothing of A's.
                mine = await b.create_session("support", session_id="shared-id")
                assert mine.session_id == "shared-id"
                assert mine.cursor == 0
                assert (await b.get_session(sid)).messages == ()
                assert (await b.list_turns(sid)).turns == ()
                not_mine = await refused(b.get_turn(sid, "turn-1"))  # A's turn id, B's session
                assert not_mine.reason == "ERROR_REASON_TURN_NOT_FOUND"
                again = await refused(b.create_session("support", session_id="shared-id"))
                assert again.code == grpc.StatusCode.ALREADY_EXISTS
                b_turn = await b.run_turn(sid, Submit("/start"))
                assert b_turn.completed is not None
                assert first.completed is not None
                assert b_turn.completed.cursor == first.completed.cursor
                await b.truncate_history(sid)

                # A's session is untouched by all of B's work on the same id.
                view = await a.get_session(sid)
                assert [m.content for m in view.messages] == ["/start", "What is your name?"]
                assert await env.stored(sid, "a") == stored_a
                await b.delete_session(sid)
                assert (await a.get_session(sid)).session.session_id == sid
                assert (await a.list_definitions()) == (await b.list_definitions())
                assert env.raw("SELECT tenant FROM sessions") == [("a",)]

    run(scenario())


def test_the_rpc_list_is_the_whole_contract() -> None:
    # A new RPC must be added to the cross-tenant test above, then here.
    assert {rpc.name for rpc in RPCS} == {
        "ListDefinitions",
        "GetDefinition",
        "CreateSession",
        "GetSession",
        "DeleteSession",
        "StreamTurn",
        "TruncateHistory",
        "GetTurn",
        "ListTurns",
        "WatchTurn",  # across tenants: test_live_turns
        "CancelTurn",  # across tenants: test_live_turns
        "WatchSession",
    }


def test_a_token_restricted_to_definitions_sees_only_those(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path, authenticator=two_tenants(tmp_path), token=TOKEN_A) as env:
            everything = {d.id for d in await env.client.list_definitions()}
            assert {"support", "probe"} <= everything
            async with ChatClient(env.target, token=TOKEN_LIMITED) as limited:
                assert [d.id for d in await limited.list_definitions()] == ["support"]
                assert (await limited.get_definition("support")).id == "support"
                hidden = await refused(limited.get_definition("probe"))
                unknown = await refused(limited.get_definition("no-such-chat"))
                assert hidden.reason == "ERROR_REASON_DEFINITION_NOT_FOUND"
                assert shape(hidden) == shape(unknown)
                refused_create = await refused(limited.create_session("probe"))
                assert shape(refused_create) == shape(
                    await refused(limited.create_session("no-such-chat"))
                )
                sid = (await limited.create_session("support")).session_id
                assert (await limited.run_turn(sid, Submit("/start"))).text

    run(scenario())
