"""A probe of the server's gRPC health service, for container health checks.

Run as ``python -m agentskit_chat.healthcheck [--target HOST:PORT] [--service NAME]
[--timeout SECONDS]``. It calls ``grpc.health.v1.Health/Check`` once and exits 0 when the
service reports SERVING and 1 otherwise: another status, an unknown service, no listener,
a timeout or unusable arguments (Docker reserves exit status 2). It prints one line with
the outcome.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Final

import grpc
from grpc_health.v1 import health, health_pb2

LISTEN_ENV: Final = "AGENTSKIT_CHAT_LISTEN"
DEFAULT_PORT: Final = 50051
DEFAULT_TIMEOUT: Final = 3.0
HEALTHY: Final = 0
UNHEALTHY: Final = 1
CHECK_METHOD: Final = f"/{health.SERVICE_NAME}/Check"


def default_target(environ: Mapping[str, str] | None = None) -> str:
    """``127.0.0.1`` with the port of ``$AGENTSKIT_CHAT_LISTEN``.

    The port is the text after the last colon of the listen address; when the variable is
    unset, empty, or its port is not in 1..65535, the port is 50051.
    """
    env: Mapping[str, str] = os.environ if environ is None else environ
    listen = env.get(LISTEN_ENV, "")
    port = DEFAULT_PORT
    _, sep, tail = listen.rpartition(":")
    if sep and tail.isdigit() and 0 < int(tail) < 65536:
        port = int(tail)
    return f"127.0.0.1:{port}"


def _positive(text: str) -> float:
    """`text` as a positive number of seconds, for argparse."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser of the probe."""
    parser = argparse.ArgumentParser(
        prog="python -m agentskit_chat.healthcheck",
        description="Exit 0 when the gRPC health service reports SERVING, 1 otherwise.",
    )
    parser.add_argument(
        "--target",
        default=None,
        help="HOST:PORT to probe [127.0.0.1 and the port of $AGENTSKIT_CHAT_LISTEN, 50051]",
    )
    parser.add_argument(
        "--service",
        default="",
        help="service name to check; empty for the server as a whole [%(default)r]",
    )
    parser.add_argument(
        "--timeout",
        type=_positive,
        default=DEFAULT_TIMEOUT,
        help="seconds to wait for the answer [%(default)s]",
    )
    return parser


def check(target: str, service: str = "", timeout: float = DEFAULT_TIMEOUT) -> tuple[bool, str]:
    """Ask `target` for the health of `service`: (whether it is SERVING, a one-line status)."""
    label = f"{target} service {service!r}"
    options = [("grpc.enable_http_proxy", 0)]
    try:
        with grpc.insecure_channel(target, options=options) as channel:
            call = channel.unary_unary(
                CHECK_METHOD,
                request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb2.HealthCheckResponse.FromString,
            )
            response = call(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    except grpc.RpcError as exc:
        code = exc.code() if isinstance(exc, grpc.Call) else None
        name = code.name if code is not None else "UNKNOWN"
        detail = exc.details() if isinstance(exc, grpc.Call) else None
        suffix = f" ({' '.join(detail.split())})" if detail else ""
        return False, f"{label}: {name}{suffix}"
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
    serving = response.status == health_pb2.HealthCheckResponse.SERVING
    return serving, f"{label}: {status}"


def main(argv: Sequence[str] | None = None) -> int:
    """Probe once and return the exit status: 0 when SERVING, 1 otherwise."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return HEALTHY if exc.code in (0, None) else UNHEALTHY
    target: str = args.target or default_target()
    serving, line = check(target, args.service, args.timeout)
    print(line, flush=True)
    return HEALTHY if serving else UNHEALTHY


if __name__ == "__main__":
    sys.exit(main())
