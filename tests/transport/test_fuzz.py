"""Random and mutated requests to every RPC, random definition files to the loader.

Nothing may crash or hang the server, no answer may be UNKNOWN or INTERNAL, and a refused
request leaves the stored state byte-identical.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.conversation import ConfigError, load_definition, load_definitions
from agentskit_chat_client import HistoryMode

from .background import Background
from .conftest import EXAMPLES, Live, live
from .rpcs import RPCS, Rpc

SESSIONS = ("fz-server", "fz-client")
FORBIDDEN = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL, grpc.StatusCode.DEADLINE_EXCEEDED}

SEEDS: dict[str, list[bytes]] = {
    "ListDefinitions": [pb.ListDefinitionsRequest().SerializeToString()],
    "GetDefinition": [pb.GetDefinitionRequest(definition_id="support").SerializeToString()],
    "CreateSession": [
        pb.CreateSessionRequest(definition_id="support", session_id="fz-new").SerializeToString(),
        pb.CreateSessionRequest(
            definition_id="orders", history_mode=pb.HISTORY_MODE_CLIENT
        ).SerializeToString(),
    ],
    "GetSession": [pb.GetSessionRequest(session_id=s).SerializeToString() for s in SESSIONS],
    "DeleteSession": [pb.DeleteSessionRequest(session_id="fz-new").SerializeToString()],
    "TruncateHistory": [
        pb.TruncateHistoryRequest(
            session_id="fz-server", last_kept_message_id="m1"
        ).SerializeToString()
    ],
    "GetTurn": [pb.GetTurnRequest(session_id="fz-server", turn_id="t1").SerializeToString()],
    "ListTurns": [
        pb.ListTurnsRequest(session_id="fz-server", page_size=2).SerializeToString(),
        pb.ListTurnsRequest(session_id="fz-server", page_token="not-a-token").SerializeToString(),
    ],
    "StreamTurn": [
        pb.StreamTurnRequest(
            session_id="fz-server", turn_id="t1", submit=pb.SubmitOperation(content="/start")
        ).SerializeToString(),
        pb.StreamTurnRequest(
            session_id="fz-server",
            turn_id="t2",
            edit=pb.EditOperation(message_id="m1", content="x"),
        ).SerializeToString(),
        pb.StreamTurnRequest(
            session_id="fz-server", turn_id="t3", retry=pb.RetryOperation(), expected_cursor=1
        ).SerializeToString(),
        pb.StreamTurnRequest(
            session_id="fz-client",
            turn_id="t4",
            dispatch=pb.DispatchOperation(
                messages=[pb.Message(id="m1", role=pb.ROLE_USER, content="/start")]
            ),
        ).SerializeToString(),
        pb.StreamTurnRequest(
            session_id="fz-server",
            turn_id="t5",
            submit=pb.SubmitOperation(content="/start"),
            on_disconnect=pb.DISCONNECT_MODE_CONTINUE,
        ).SerializeToString(),
    ],
    "WatchTurn": [
        pb.WatchTurnRequest(session_id="fz-server", turn_id="t1").SerializeToString(),
        pb.WatchTurnRequest(
            session_id="fz-server", turn_id="t5", after_sequence=2
        ).SerializeToString(),
    ],
    "CancelTurn": [pb.CancelTurnRequest(session_id="fz-server", turn_id="t1").SerializeToString()],
    # A watch of a known session never ends by itself: the seed names none (NOT_FOUND), and
    # no few mutations of it name one.
    "WatchSession": [
        pb.WatchSessionRequest(session_id="no-such-watched-session").SerializeToString(),
        pb.WatchSessionRequest(
            session_id="no-such-watched-session", after_cursor=3
        ).SerializeToString(),
    ],
}


async def _sessions(env: Live) -> None:
    await env.client.create_session("support", session_id="fz-server")
    await env.client.create_session(
        "support", session_id="fz-client", history_mode=HistoryMode.CLIENT
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Live, grpc.Channel]]:
    directory = tmp_path_factory.mktemp("fuzz")
    definitions = list(load_definitions(EXAMPLES).values())
    with Background(lambda: live(directory, definitions=definitions), _sessions) as env:
        channel = grpc.insecure_channel(env.target)
        try:
            yield env, channel
        finally:
            channel.close()


def call(channel: grpc.Channel, rpc: Rpc, data: bytes) -> grpc.StatusCode:
    try:
        if rpc.streaming:
            stream: Any = channel.unary_stream(rpc.path)
            for _ in stream(data, timeout=20):
                pass
        else:
            unary: Any = channel.unary_unary(rpc.path)
            unary(data, timeout=20)
    except grpc.RpcError as error:
        code: grpc.StatusCode = error.code()
        return code
    return grpc.StatusCode.OK


@st.composite
def mutated(draw: st.DrawFn, seed: bytes) -> bytes:
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 4))):
        position = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["flip", "cut", "insert", "delete", "byte"]))
        if action == "flip" and position < len(data):
            data[position] ^= 1 << draw(st.integers(0, 7))
        elif action == "cut":
            del data[position:]
        elif action == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=8))
        elif action == "delete" and position < len(data):
            del data[position]
        elif position < len(data):
            data[position] = draw(st.sampled_from([0x00, 0x80, 0xFF, 0xC3, 0x0A, 0x12, 0x7F]))
    return bytes(data)


@st.composite
def rpc_requests(draw: st.DrawFn) -> tuple[Rpc, bytes]:
    rpc = draw(st.sampled_from(RPCS))
    seed = draw(st.sampled_from(SEEDS.get(rpc.name, [b""])))
    data = draw(st.one_of(st.binary(max_size=64), mutated(seed), st.just(seed)))
    return rpc, data


def test_the_seeds_cover_every_rpc() -> None:
    assert set(SEEDS) == {rpc.name for rpc in RPCS}


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(request=rpc_requests())
def test_random_and_mutated_requests_never_crash_or_leak_state(
    server: tuple[Live, grpc.Channel], request: tuple[Rpc, bytes]
) -> None:
    env, channel = server
    rpc, data = request
    before = env.dump()
    code = call(channel, rpc, data)
    assert code not in FORBIDDEN, (rpc.name, data)
    if code != grpc.StatusCode.OK:
        assert env.dump() == before, (rpc.name, data, code)
    assert call(channel, RPCS[0], b"") == grpc.StatusCode.OK  # still serving


DEFINITION = (EXAMPLES / "support.yaml").read_bytes()


@settings(max_examples=300, deadline=None)
@given(
    content=st.one_of(
        st.binary(max_size=256),
        st.text(max_size=256).map(lambda text: text.encode("utf-8", "surrogatepass")),
        mutated(DEFINITION),
    ),
    suffix=st.sampled_from([".yaml", ".json"]),
)
def test_random_definition_files_are_refused_with_a_config_error(
    tmp_path_factory: pytest.TempPathFactory, content: bytes, suffix: str
) -> None:
    path = tmp_path_factory.mktemp("definitions", numbered=True) / f"chat{suffix}"
    path.write_bytes(content)
    diagnostics: tuple[object, ...] = ()
    try:
        definition = load_definition(path)
    except ConfigError as error:
        diagnostics = tuple(error.diagnostics)
    else:
        diagnostics = (definition.id,)  # a file that happens to be a valid chat
    assert diagnostics
