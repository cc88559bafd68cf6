"""A turn stream whose client stops reading, on the HTTP listener: its sends wait for the
client, the turn is given up at its timeout (the session is free again), and the call
ends on the wire: with its status for a client that reads again, else by a reset stream
(HTTP/2) or a closed connection (HTTP/1.1). The client's own deadline ends it too."""

from __future__ import annotations

import asyncio
import json
import select
import socket
from dataclasses import dataclass, field
from pathlib import Path

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import pytest

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.service import Limits
from tests.transport.conftest import Probe, once_released, run
from tests.transport.test_limits import MiB
from tests.transport.web.conftest import web_live
from tests.transport.web.wire import END_STREAM, SERVICE, TRAILERS, envelope, frames, stream
from tests.waiting import until

STALL_LIMITS = Limits(
    turn_timeout=1.0,
    lease_ttl=60.0,
    max_output_bytes=3 * MiB + MiB // 2,
    max_history_bytes=1000,
    max_history_messages=10,
)
PATIENT_LIMITS = Limits(
    turn_timeout=60.0,
    lease_ttl=120.0,
    max_output_bytes=3 * MiB + MiB // 2,
    max_history_bytes=1000,
    max_history_messages=10,
)
WINDOW = 1024
BUFFERED = 256 * 1024
"""More than an HTTP/2 stream may hold for its client: 32 KiB and the event being sent (an
HTTP/1.1 connection: 64 KiB, 16 KiB in its socket, and what the client's socket takes)."""
CONNECT = "application/connect+proto"
GRPC_WEB = "application/grpc-web+proto"
GRPC = "application/grpc"


def flood(session_id: str) -> bytes:
    """A StreamTurn body whose answer streams until the output limit."""
    request = pb.StreamTurnRequest(
        session_id=session_id, turn_id="stalled", submit=pb.SubmitOperation(content="/flood 60000")
    )
    return envelope(request.SerializeToString())


@dataclass
class RawH2:
    """A StreamTurn call from a raw HTTP/2 client whose stream window is 1 KiB, reopened
    only by `read_rest`."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    connection: h2.connection.H2Connection
    stream_id: int
    data: bytearray = field(default_factory=bytearray)
    trailers: dict[bytes, bytes] = field(default_factory=dict)
    reset: int | None = None
    ended: bool = False
    closed: bool = False

    @classmethod
    async def start(
        cls, port: int, body: bytes, content_type: str, *headers: tuple[str, str]
    ) -> RawH2:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        config = h2.config.H2Configuration(client_side=True, header_encoding=None)
        connection = h2.connection.H2Connection(config)
        connection.initiate_connection()
        connection.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: WINDOW})
        stream_id = connection.get_next_available_stream_id()
        connection.send_headers(
            stream_id,
            [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", SERVICE + "StreamTurn"),
                (":authority", f"127.0.0.1:{port}"),
                ("content-type", content_type),
                ("te", "trailers"),
                *headers,
            ],
        )
        connection.send_data(stream_id, body, end_stream=True)
        writer.write(connection.data_to_send())
        return cls(reader, writer, connection, stream_id)

    @property
    def over(self) -> bool:
        return self.ended or self.reset is not None or self.closed

    async def watch(self, seconds: float = 30, *, acknowledge: bool = False) -> None:
        """Take frames until the stream is over (or `seconds` pass); the data is only
        acknowledged, reopening the window, when `acknowledge`."""
        try:
            async with asyncio.timeout(seconds):
                while not self.over:
                    chunk = await self.reader.read(65536)
                    if not chunk:
                        self.closed = True
                        break
                    for event in self.connection.receive_data(chunk):
                        self._take(event, acknowledge)
                    self.writer.write(self.connection.data_to_send())
        except TimeoutError:
            pass

    async def read_rest(self) -> None:
        """Read again: open the stream's window wide and take everything to the end."""
        self.connection.increment_flow_control_window(8 * MiB, self.stream_id)
        self.connection.increment_flow_control_window(8 * MiB)
        self.writer.write(self.connection.data_to_send())
        await self.watch(acknowledge=True)

    async def list_definitions(self) -> int:
        """A unary Connect call on another stream of the connection; its HTTP status."""
        stream_id = self.connection.get_next_available_stream_id()
        self.connection.send_headers(
            stream_id,
            [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", SERVICE + "ListDefinitions"),
                (":authority", "test"),
                ("content-type", "application/json"),
            ],
        )
        self.connection.send_data(stream_id, b"{}", end_stream=True)
        self.writer.write(self.connection.data_to_send())
        status = 0
        async with asyncio.timeout(30):
            while True:
                chunk = await self.reader.read(65536)
                assert chunk, "the connection was closed"
                for event in self.connection.receive_data(chunk):
                    if getattr(event, "stream_id", None) != stream_id:
                        self._take(event, acknowledge=False)
                        continue
                    if isinstance(event, h2.events.ResponseReceived):
                        status = int(dict(event.headers)[b":status"])
                    elif isinstance(event, h2.events.DataReceived):
                        self.connection.acknowledge_received_data(
                            event.flow_controlled_length, stream_id
                        )
                    elif isinstance(event, h2.events.StreamEnded):
                        return status
                self.writer.write(self.connection.data_to_send())

    def close(self) -> None:
        self.writer.close()

    def _take(self, event: h2.events.Event, acknowledge: bool) -> None:
        if isinstance(event, h2.events.DataReceived) and event.stream_id == self.stream_id:
            self.data += event.data
            if acknowledge:
                self.connection.acknowledge_received_data(
                    event.flow_controlled_length, event.stream_id
                )
        elif isinstance(event, h2.events.TrailersReceived):
            self.trailers = dict(event.headers)
        elif isinstance(event, h2.events.StreamEnded):
            self.ended = True
        elif isinstance(event, h2.events.StreamReset):
            self.reset = event.error_code
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.closed = True


async def flooding(probe: Probe) -> None:
    """Once the turn runs: the model streamed its first chunk."""
    await until(lambda: probe.flooded > 0, "the model's first chunk")


def streamed(probe: Probe) -> int:
    """What the model streamed in all, once the turn is over (its model stream closed):
    had the stream not waited for its client, the model would have streamed up to the
    output limit."""
    assert probe.model_closed.is_set(), "the turn is not over"
    return probe.flooded


@pytest.mark.parametrize("content_type", [CONNECT, GRPC_WEB, GRPC])
def test_an_unread_http2_stream_waits_for_its_client_then_is_reset(
    tmp_path: Path, content_type: str
) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path, limits=STALL_LIMITS) as web:
            sid = (await web.env.client.create_session("probe")).session_id
            assert web.env.server.http is not None
            call = await RawH2.start(web.env.server.http.port, flood(sid), content_type)
            try:
                await flooding(web.env.probe)
                # The stream's wait holds up no other stream of its connection.
                assert await call.list_definitions() == 200
                # The turn is given up at its timeout: the session is free again.
                assert (await once_released(web.env.client, sid, "hello")).text == "model answer"
                assert streamed(web.env.probe) <= BUFFERED, "the stream did not wait for its client"
                await call.watch()
                assert call.reset == h2.errors.ErrorCodes.CANCEL, call
                assert len(call.data) <= WINDOW, "the client's window was not respected"
                # Only the stream was reset: its connection still serves calls.
                assert await call.list_definitions() == 200
            finally:
                call.close()

    run(scenario())


def test_a_client_that_reads_again_after_a_stall_gets_deadline_exceeded(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path, limits=STALL_LIMITS) as web:
            sid = (await web.env.client.create_session("probe")).session_id
            assert web.env.server.http is not None
            call = await RawH2.start(web.env.server.http.port, flood(sid), CONNECT)
            try:
                await flooding(web.env.probe)
                assert (await once_released(web.env.client, sid, "hello")).text == "model answer"
                await call.read_rest()
                assert call.reset is None, call
                assert call.ended, call
                found = frames(bytes(call.data))
                assert found[:-1], "the events sent before the stall were lost"
                flags, payload = found[-1]
                assert flags & END_STREAM
                error = json.loads(payload)["error"]
                assert error["code"] == "deadline_exceeded"
                assert "not reading" in error["message"]
            finally:
                call.close()

    run(scenario())


def test_a_grpc_web_client_that_reads_again_gets_its_status_in_the_trailers(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path, limits=STALL_LIMITS) as web:
            sid = (await web.env.client.create_session("probe")).session_id
            assert web.env.server.http is not None
            call = await RawH2.start(web.env.server.http.port, flood(sid), GRPC_WEB)
            try:
                await flooding(web.env.probe)
                assert (await once_released(web.env.client, sid, "hello")).text == "model answer"
                await call.read_rest()
                assert call.reset is None, call
                assert call.ended, call
                flags, payload = frames(bytes(call.data))[-1]
                assert flags & TRAILERS
                trailers = dict(
                    line.split(":", 1) for line in payload.decode().strip().split("\r\n")
                )
                assert trailers["grpc-status"].strip() == "4"
            finally:
                call.close()

    run(scenario())


@pytest.mark.parametrize(
    ("content_type", "deadline"),
    [(CONNECT, ("connect-timeout-ms", "1500")), (GRPC, ("grpc-timeout", "1500m"))],
)
def test_the_clients_deadline_ends_an_unread_stream_on_the_wire(
    tmp_path: Path, content_type: str, deadline: tuple[str, str]
) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path, limits=PATIENT_LIMITS) as web:
            sid = (await web.env.client.create_session("probe")).session_id
            assert web.env.server.http is not None
            call = await RawH2.start(web.env.server.http.port, flood(sid), content_type, deadline)
            try:
                await flooding(web.env.probe)
                await call.watch()
                assert call.reset == h2.errors.ErrorCodes.CANCEL, call
                # The turn ended at the deadline, long before its own timeout.
                assert (await once_released(web.env.client, sid, "hello")).text == "model answer"
                assert streamed(web.env.probe) <= BUFFERED, "the stream did not wait for its client"
            finally:
                call.close()

    run(scenario())


def test_an_unread_http1_stream_waits_then_its_connection_is_closed(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path, limits=STALL_LIMITS) as web:
            sid = (await web.env.client.create_session("probe")).session_id
            assert web.env.server.http is not None
            body = flood(sid)
            sock = socket.create_connection(("127.0.0.1", web.env.server.http.port))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            try:
                head = (
                    f"POST {SERVICE}StreamTurn HTTP/1.1\r\nhost: test\r\n"
                    f"content-type: {CONNECT}\r\ncontent-length: {len(body)}\r\n\r\n"
                )
                sock.sendall(head.encode() + body)
                await flooding(web.env.probe)
                assert (await once_released(web.env.client, sid, "hello")).text == "model answer"
                assert streamed(web.env.probe) <= 2 * BUFFERED, (
                    "the stream did not wait for its client"
                )
                poll = select.poll()
                poll.register(sock, select.POLLRDHUP | select.POLLHUP | select.POLLERR)
                # The connection is closed, though nothing was read.
                await until(lambda: bool(poll.poll(0)), "the connection's close")
            finally:
                sock.close()

    run(scenario())


@pytest.mark.parametrize("http2", [True, False])
def test_a_client_that_reads_gets_the_whole_stream(tmp_path: Path, http2: bool) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path, limits=PATIENT_LIMITS, http2=http2) as web:
            sid = (await web.env.client.create_session("probe")).session_id
            result = await stream(
                web.http,
                "StreamTurn",
                {"sessionId": sid, "turnId": "read", "submit": {"content": "/flood 60000"}},
            )
            deltas = sum(len(m["delta"]["text"]) for m in result.messages if "delta" in m)
            # The turn ran to its output limit (the chunk past it is not streamed).
            assert web.env.probe.flooded - 60000 <= deltas < web.env.probe.flooded
            assert result.messages[-1]["failed"]["code"] == "output_limit"
            assert result.error is None

    run(scenario())
