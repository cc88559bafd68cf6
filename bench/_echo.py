"""A bare grpc.aio server-streaming echo: one request in, four small responses out.

`python -m bench._echo [--listen HOST:PORT] [--replies 4|2]` prints `listening on
HOST:PORT` once bound (port 0 picks a free port) and serves until SIGTERM or SIGINT, then
stops and exits 0. It is the baseline of bench/service.py: gRPC and asyncio costs without
any service work. A deterministic turn streams four messages over gRPC (started, decision,
one delta, completed: about 84, 64, 48 and 85 bytes for the benchmark's `/ping`, 57 to 114 for
the support example's `/start` and `/name Ada`), so the echo streams four replies of the
`/ping` turn's sizes by default; `--replies 2` streams the two short replies it used to.
With `--traced` it adds what `serve` adds for tracing when the `OTEL_*` environment asks
for export: the service's gRPC server interceptor, a SERVER span and an
`rpc.server.call.duration` point per call, and the export of both; the difference is that
interceptor's own cost per call.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, Final

import grpc

if TYPE_CHECKING:
    from agentskit_chat.telemetry import Telemetry

SERVICE: Final = "bench.Echo"
METHOD: Final = "Stream"
PATH: Final = f"/{SERVICE}/{METHOD}"
TURN_SIZES: Final = (84, 64, 48, 85)
"""Serialized sizes of a `/ping` turn's StreamTurn messages: started, decision, delta,
completed."""
REPLY_SETS: Final = {
    4: tuple(f"pong-{i}".encode().ljust(size, b".") for i, size in enumerate(TURN_SIZES, 1)),
    2: (b"pong-1", b"pong-2"),
}
"""The replies by count: four like a turn's messages (the default), or two short ones."""
REPLIES: Final = REPLY_SETS[4]


def handlers(replies: tuple[bytes, ...] = REPLIES) -> dict[str, grpc.RpcMethodHandler[Any, Any]]:
    """The echo's only method, answering any request with `replies`, bytes passed through
    unserialized."""

    async def stream(
        request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> AsyncIterator[bytes]:
        for reply in replies:
            yield reply

    return {METHOD: grpc.unary_stream_rpc_method_handler(stream)}


async def serve(
    listen: str, telemetry: Telemetry | None = None, replies: tuple[bytes, ...] = REPLIES
) -> int:
    """Serve on `listen` until a stop signal; return the exit status."""
    interceptors = [] if telemetry is None else telemetry.server_interceptors()
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)], interceptors=interceptors)
    methods = handlers(replies)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, methods),))
    server.add_registered_method_handlers(SERVICE, methods)
    port = server.add_insecure_port(listen)
    if port == 0:
        raise OSError(f"cannot listen on {listen}")
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    print(f"listening on {listen.rsplit(':', 1)[0]}:{port}", flush=True)
    await stop.wait()
    await server.stop(1.0)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m bench._echo`."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--listen", default="127.0.0.1:0", help="host:port [%(default)s]")
    parser.add_argument(
        "--traced", action="store_true", help="trace every call as `serve` does (OTEL_* env)"
    )
    parser.add_argument(
        "--replies",
        type=int,
        choices=sorted(REPLY_SETS),
        default=len(REPLIES),
        help="replies per call [%(default)s]",
    )
    args = parser.parse_args(argv)
    replies = REPLY_SETS[args.replies]
    if not args.traced:
        return asyncio.run(serve(args.listen, replies=replies))
    from agentskit_chat.telemetry import configure_telemetry, settings_from_env

    telemetry = configure_telemetry(settings_from_env())
    if telemetry.tracer_provider is None:
        parser.error("--traced needs span export: set OTEL_EXPORTER_OTLP_ENDPOINT")
    try:
        return asyncio.run(serve(args.listen, telemetry, replies))
    finally:
        telemetry.shutdown()


if __name__ == "__main__":
    raise SystemExit(main())
