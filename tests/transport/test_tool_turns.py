"""A tool round on the wire: declared tools, tool call events, the tool results operation,
the calls on GetSession and ListTurns, and each refusal's status and ErrorInfo reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
import pytest

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc
from agentskit_chat.service import Limits
from agentskit_chat_client import ChatError
from agentskit_chat_client._errors import from_rpc_error

from .conftest import CANARY, Live, live, run

TOOLS = [
    pb.ToolDeclaration(
        name="weather",
        description="The weather in a city",
        parameters_json=json.dumps({"type": "object", "properties": {"city": {"type": "string"}}}),
    ),
    pb.ToolDeclaration(name="clock"),
]


async def stream(stub: Any, request: pb.StreamTurnRequest) -> list[pb.StreamTurnResponse]:
    return [response async for response in stub.StreamTurn(request, timeout=30)]


async def refusal(stub: Any, request: pb.StreamTurnRequest) -> ChatError:
    try:
        await stream(stub, request)
    except grpc.aio.AioRpcError as error:
        return from_rpc_error(error)
    raise AssertionError("the turn was not refused")


async def session(
    stub: Any, mode: pb.HistoryMode.ValueType = pb.HISTORY_MODE_SERVER, definition: str = "probe"
) -> str:
    created = await stub.CreateSession(
        pb.CreateSessionRequest(definition_id=definition, history_mode=mode)
    )
    return str(created.session.session_id)


def ask(session_id: str, turn_id: str) -> pb.StreamTurnRequest:
    return pb.StreamTurnRequest(
        session_id=session_id,
        turn_id=turn_id,
        submit=pb.SubmitOperation(content="/tools"),
        tools=TOOLS,
        tool_choice="auto",
    )


def results(session_id: str, turn_id: str, *answers: tuple[str, str]) -> pb.StreamTurnRequest:
    return pb.StreamTurnRequest(
        session_id=session_id,
        turn_id=turn_id,
        tool_results=pb.ToolResultsOperation(
            results=[pb.ToolResult(tool_call_id=c, content=text) for c, text in answers]
        ),
        tools=TOOLS,
    )


def kinds(responses: list[pb.StreamTurnResponse]) -> list[str]:
    return [str(r.WhichOneof("event")) for r in responses]


def test_a_tool_round_over_grpc(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env, grpc.aio.insecure_channel(env.target) as channel:
            stub: Any = chat_pb2_grpc.ChatServiceStub(channel)
            sid = await session(stub)
            first = await stream(stub, ask(sid, "t1"))
            assert kinds(first) == [
                "started",
                "decision",
                "tool_call_started",
                "tool_call_started",
                "tool_call_delta",
                "tool_call_delta",
                "tool_call_delta",
                "tool_call_delta",
                "tool_call_ended",
                "tool_call_ended",
                "completed",
            ]
            assert [r.sequence for r in first] == list(range(1, 12))
            ended = [r.tool_call_ended for r in first if r.HasField("tool_call_ended")]
            assert [(e.tool_call_id, e.arguments, e.wait) for e in ended] == [
                ("call-0", '{"n":0}', pb.TOOL_WAIT_RESULT),
                ("call-1", '{"n":1}', pb.TOOL_WAIT_RESULT),
            ]
            done = first[-1].completed
            assert done.finish_reason == "tool_calls"
            assert [c.name for c in done.tool_calls] == ["weather", "clock"]
            assert [p.tool_call_id for p in done.pending_tool_calls] == ["call-0", "call-1"]
            turns = await stub.ListTurns(pb.ListTurnsRequest(session_id=sid))
            assert [p.name for p in turns.turns[0].pending_tool_calls] == ["weather", "clock"]

            second = await stream(stub, results(sid, "t2", ("call-0", "sunny"), ("call-1", "9:00")))
            assert second[-1].completed.content == "2 tool results"
            assert second[0].started.operation == pb.OPERATION_TOOL_RESULTS
            got = await stub.GetSession(pb.GetSessionRequest(session_id=sid))
            roles = [m.role for m in got.messages]
            assert roles == [
                pb.ROLE_USER,
                pb.ROLE_ASSISTANT,
                pb.ROLE_TOOL,
                pb.ROLE_TOOL,
                pb.ROLE_ASSISTANT,
            ]
            assert [c.id for c in got.messages[1].tool_calls] == ["call-0", "call-1"]
            assert [m.tool_call_id for m in got.messages[2:4]] == ["call-0", "call-1"]
            assert env.probe.route_calls == []  # no route saw the continuation

            repeat = await stream(stub, ask(sid, "t1"))  # the first turn id again
            assert repeat[0].started.duplicate
            assert [
                r.tool_call_ended.arguments for r in repeat if r.HasField("tool_call_ended")
            ] == [
                '{"n":0}',
                '{"n":1}',
            ]
            assert len(env.probe.model_calls) == 2  # the repeat asked the model nothing

    run(scenario())


def test_watching_a_tool_turn_sees_the_same_events(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env, grpc.aio.insecure_channel(env.target) as channel:
            stub: Any = chat_pb2_grpc.ChatServiceStub(channel)
            sid = await session(stub)
            first = await stream(stub, ask(sid, "t1"))
            watched = [
                r
                async for r in stub.WatchTurn(
                    pb.WatchTurnRequest(session_id=sid, turn_id="t1", after_sequence=3), timeout=30
                )
            ]
            assert [(r.sequence, r.WhichOneof("event")) for r in watched] == [
                (r.sequence, r.WhichOneof("event")) for r in first[3:]
            ]

    run(scenario())


async def _pending_session(env: Live, stub: Any) -> str:
    sid = await session(stub)
    await stream(stub, ask(sid, "t1"))
    return sid


@pytest.mark.parametrize(
    ("answers", "code", "reason"),
    [
        (
            (("call-0", CANARY), ("nope", CANARY)),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ERROR_REASON_TOOL_CALL_UNKNOWN",
        ),
        (
            (("call-0", CANARY),),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ERROR_REASON_TOOL_CALLS_UNANSWERED",
        ),
    ],
    ids=["unknown-call", "unanswered"],
)
def test_results_that_do_not_fit_are_refused_and_change_nothing(
    tmp_path: Path, answers: tuple[tuple[str, str], ...], code: grpc.StatusCode, reason: str
) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env, grpc.aio.insecure_channel(env.target) as channel:
            stub: Any = chat_pb2_grpc.ChatServiceStub(channel)
            sid = await _pending_session(env, stub)
            before = env.dump()
            error = await refusal(stub, results(sid, "t2", *answers))
            assert (error.code, error.reason) == (code, reason)
            assert CANARY not in str(error)
            assert env.dump() == before

    run(scenario())


def test_results_without_pending_calls_are_a_failed_precondition(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env, grpc.aio.insecure_channel(env.target) as channel:
            stub: Any = chat_pb2_grpc.ChatServiceStub(channel)
            sid = await session(stub)
            before = env.dump()
            error = await refusal(stub, results(sid, "t1", ("call-0", "x")))
            assert error.code == grpc.StatusCode.FAILED_PRECONDITION
            assert error.reason == "ERROR_REASON_NO_PENDING_TOOL_CALLS"
            assert env.dump() == before

    run(scenario())


@pytest.mark.parametrize(
    ("tools", "choice", "code", "field"),
    [
        (
            [pb.ToolDeclaration(name="bad name")],
            "",
            grpc.StatusCode.INVALID_ARGUMENT,
            "tools[0].name",
        ),
        (
            [pb.ToolDeclaration(name="w", parameters_json="{not json")],
            "",
            grpc.StatusCode.INVALID_ARGUMENT,
            "tools[0].parameters_json",
        ),
        (TOOLS, "missing_tool", grpc.StatusCode.INVALID_ARGUMENT, "tool_choice"),
        (
            [pb.ToolDeclaration(name=f"t{i}") for i in range(3)],
            "",
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            None,
        ),
        (
            [pb.ToolDeclaration(name="big", description="d" * 600)],
            "",
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            None,
        ),
    ],
    ids=["name", "schema-not-json", "choice", "too-many", "schema-too-large"],
)
def test_bad_tool_declarations_are_refused(
    tmp_path: Path,
    tools: list[pb.ToolDeclaration],
    choice: str,
    code: grpc.StatusCode,
    field: str | None,
) -> None:
    async def scenario() -> None:
        limits = Limits(max_tools=2, max_tool_schema_bytes=512)
        async with (
            live(tmp_path, limits=limits) as env,
            grpc.aio.insecure_channel(env.target) as channel,
        ):
            stub: Any = chat_pb2_grpc.ChatServiceStub(channel)
            sid = await session(stub)
            before = env.dump()
            request = pb.StreamTurnRequest(
                session_id=sid,
                turn_id="t1",
                submit=pb.SubmitOperation(content="/tools"),
                tools=tools,
                tool_choice=choice,
            )
            error = await refusal(stub, request)
            assert error.code == code
            if field is not None:
                assert error.metadata["field"] == field
            else:
                assert error.metadata["limit"] in {"tools", "tool_schema_bytes"}
            assert env.dump() == before

    run(scenario())


def test_a_client_held_round_keeps_no_tool_content_in_the_store(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env, grpc.aio.insecure_channel(env.target) as channel:
            stub: Any = chat_pb2_grpc.ChatServiceStub(channel)
            sid = await session(stub, pb.HISTORY_MODE_CLIENT)
            user = pb.Message(id="u1", role=pb.ROLE_USER, content="/tools")
            first = await stream(
                stub,
                pb.StreamTurnRequest(
                    session_id=sid,
                    turn_id="t1",
                    dispatch=pb.DispatchOperation(messages=[user]),
                    tools=TOOLS,
                ),
            )
            done = first[-1].completed
            answer = pb.Message(
                id=done.assistant_message_id, role=pb.ROLE_ASSISTANT, tool_calls=done.tool_calls
            )
            tool_messages = [
                pb.Message(id=f"r{i}", role=pb.ROLE_TOOL, content=CANARY, tool_call_id=c.id)
                for i, c in enumerate(done.tool_calls)
            ]
            second = await stream(
                stub,
                pb.StreamTurnRequest(
                    session_id=sid,
                    turn_id="t2",
                    dispatch=pb.DispatchOperation(messages=[user, answer, *tool_messages]),
                    tools=TOOLS,
                ),
            )
            assert second[-1].completed.content == "2 tool results"
            bad = pb.Message(
                id="a9",
                role=pb.ROLE_ASSISTANT,
                tool_calls=[pb.ToolCall(id="c9", name="weather", arguments="{not json")],
            )
            error = await refusal(
                stub,
                pb.StreamTurnRequest(
                    session_id=sid,
                    turn_id="t3",
                    dispatch=pb.DispatchOperation(messages=[user, bad]),
                ),
            )
            assert error.metadata["field"] == "dispatch.messages[1].tool_calls[0].arguments"
        data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
        assert CANARY.encode() not in data

    run(scenario())


def test_pending_calls_survive_a_restart_of_the_server(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env, grpc.aio.insecure_channel(env.target) as channel:
            stub: Any = chat_pb2_grpc.ChatServiceStub(channel)
            sid = await _pending_session(env, stub)
        async with live(tmp_path) as env, grpc.aio.insecure_channel(env.target) as channel:
            stub = chat_pb2_grpc.ChatServiceStub(channel)
            got = await stub.GetSession(pb.GetSessionRequest(session_id=sid))
            assert [c.arguments for c in got.messages[1].tool_calls] == ['{"n":0}', '{"n":1}']
            second = await stream(stub, results(sid, "t2", ("call-0", "a"), ("call-1", "b")))
            assert second[-1].completed.content == "2 tool results"

    run(scenario())


def approve(
    session_id: str, turn_id: str, approved: bool, *answers: tuple[str, str]
) -> pb.StreamTurnRequest:
    request = results(session_id, turn_id, *answers)
    request.tool_results.approvals.append(
        pb.ToolApproval(tool_call_id="call-1", approved=approved, reason=CANARY)
    )
    return request


def test_a_tool_marked_for_approval_waits_for_a_decision(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env, grpc.aio.insecure_channel(env.target) as channel:
            stub: Any = chat_pb2_grpc.ChatServiceStub(channel)
            created = await stub.CreateSession(
                pb.CreateSessionRequest(definition_id="probe-approve")
            )
            sid = created.session.session_id
            first = await stream(stub, ask(sid, "t1"))
            ended = [r.tool_call_ended for r in first if r.HasField("tool_call_ended")]
            assert [e.wait for e in ended] == [pb.TOOL_WAIT_RESULT, pb.TOOL_WAIT_APPROVAL]
            done = first[-1].completed
            assert done.finish_reason == "tool_approval"
            assert [(p.name, p.wait) for p in done.pending_tool_calls] == [
                ("weather", pb.TOOL_WAIT_RESULT),
                ("clock", pb.TOOL_WAIT_APPROVAL),
            ]
            before = env.dump()
            error = await refusal(stub, results(sid, "t2", ("call-0", "sunny")))
            assert error.reason == "ERROR_REASON_TOOL_CALLS_UNANSWERED"  # no decision on clock
            assert env.dump() == before

            approved = await stream(stub, approve(sid, "t2", True, ("call-0", "sunny")))
            assert approved[-1].completed.finish_reason == "tool_calls"  # clock: run it now
            assert [p.tool_call_id for p in approved[-1].completed.pending_tool_calls] == ["call-1"]
            third = await stream(stub, results(sid, "t3", ("call-1", "9:00")))
            assert third[-1].completed.content == "2 tool results"

    run(scenario())


def test_a_denied_call_reaches_the_model_as_a_denied_result(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env, grpc.aio.insecure_channel(env.target) as channel:
            stub: Any = chat_pb2_grpc.ChatServiceStub(channel)
            created = await stub.CreateSession(
                pb.CreateSessionRequest(definition_id="probe-approve")
            )
            sid = created.session.session_id
            await stream(stub, ask(sid, "t1"))
            denied = await stream(stub, approve(sid, "t2", False, ("call-0", "sunny")))
            assert denied[-1].completed.content == "2 tool results"
            got = await stub.GetSession(pb.GetSessionRequest(session_id=sid))
            assert [m.tool_call_id for m in got.messages if m.role == pb.ROLE_TOOL] == [
                "call-0",
                "call-1",
            ]

    run(scenario())


def test_a_client_held_approval_round_keeps_the_earlier_result(tmp_path: Path) -> None:
    """An approved call runs after the other call was answered: the history then holds both
    results, the first answered by an earlier turn."""

    async def scenario() -> None:
        async with live(tmp_path) as env, grpc.aio.insecure_channel(env.target) as channel:
            stub: Any = chat_pb2_grpc.ChatServiceStub(channel)
            sid = await session(stub, pb.HISTORY_MODE_CLIENT, "probe-approve")
            user = pb.Message(id="u1", role=pb.ROLE_USER, content="/tools")

            def dispatch(turn_id: str, *messages: pb.Message, **extra: Any) -> pb.StreamTurnRequest:
                operation = pb.DispatchOperation(messages=[user, *messages], **extra)
                return pb.StreamTurnRequest(
                    session_id=sid, turn_id=turn_id, dispatch=operation, tools=TOOLS
                )

            first = (await stream(stub, dispatch("t1")))[-1].completed
            answer = pb.Message(
                id=first.assistant_message_id, role=pb.ROLE_ASSISTANT, tool_calls=first.tool_calls
            )
            weather = pb.Message(id="r0", role=pb.ROLE_TOOL, content="sunny", tool_call_id="call-0")
            yes = pb.ToolApproval(tool_call_id="call-1", approved=True)
            second = (await stream(stub, dispatch("t2", answer, weather, approvals=[yes])))[-1]
            assert [p.tool_call_id for p in second.completed.pending_tool_calls] == ["call-1"]
            clock = pb.Message(id="r1", role=pb.ROLE_TOOL, content="9:00", tool_call_id="call-1")
            third = await stream(stub, dispatch("t3", answer, weather, clock))
            assert third[-1].completed.content == "2 tool results"
            stray = pb.Message(id="r9", role=pb.ROLE_TOOL, content=CANARY, tool_call_id="call-9")
            error = await refusal(stub, dispatch("t4", answer, weather, clock, stray))
            assert error.reason == "ERROR_REASON_TOOL_CALL_UNKNOWN"

    run(scenario())
