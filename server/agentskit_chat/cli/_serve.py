"""`agentskit-chat serve`: host definitions over gRPC until SIGTERM or SIGINT, then drain."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import secrets
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from agentskit_chat.conversation import ConfigError
from agentskit_chat.models import AdapterRegistry, SamplingCaps
from agentskit_chat.service import (
    HEARTBEAT_SECONDS,
    PUBLISH_LEASE_SECONDS,
    Catalog,
    ChatService,
    Limits,
    WatchSettings,
)
from agentskit_chat.service._watchers import (
    MAX_WATCHERS_PER_SESSION,
    MAX_WATCHERS_PER_TENANT,
    Watchers,
)
from agentskit_chat.storage import (
    StoreError,
    default_store_url,
    open_store,
    state_dir_from_env,
)
from agentskit_chat.telemetry import (
    Telemetry,
    TelemetrySettings,
    configure_logging,
    configure_telemetry,
    settings_from_env,
)
from agentskit_chat.transport import RunningServer, TlsFileError, TokenFileError, start_server
from agentskit_chat.transport.web import HttpSettings

from . import _workers
from ._definitions import gather
from ._http import add_http_arguments, http_from
from ._keys import load_or_create_key, warn_if_key_file_exposed
from ._mesh import MeshSettings, add_mesh_arguments, mesh_from
from ._reload import Reloader
from ._security import (
    Security,
    SecuritySettings,
    add_security_arguments,
    build_security,
    security_from,
)
from ._server_tools import ServedTools
from ._store import (
    add_durability_arguments,
    add_store_arguments,
    describe_store,
    sqlite_synchronous,
    store_password,
)

log = logging.getLogger("agentskit_chat.serve")

DEFAULT_LISTEN = "127.0.0.1:50051"
DEFAULT_DEFINITIONS = "examples/definitions"


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"AGENTSKIT_CHAT_{name}", default)


ENVIRONMENT = """environment variables (flags win):
  AGENTSKIT_CHAT_LISTEN, AGENTSKIT_CHAT_DEFINITIONS, AGENTSKIT_CHAT_DEFINITIONS_MODULES
  (comma-separated), AGENTSKIT_CHAT_STATE_DIR, AGENTSKIT_CHAT_STORE,
  AGENTSKIT_CHAT_STORE_PASSWORD_FILE, AGENTSKIT_CHAT_STORE_PASSWORD,
  AGENTSKIT_CHAT_SQLITE_SYNCHRONOUS (normal or full), AGENTSKIT_CHAT_GRACE,
  AGENTSKIT_CHAT_TURN_TIMEOUT, AGENTSKIT_CHAT_LOG_FORMAT (json or console),
  AGENTSKIT_CHAT_AUTH_TOKENS, AGENTSKIT_CHAT_TLS_CERT, AGENTSKIT_CHAT_TLS_KEY,
  AGENTSKIT_CHAT_TLS_CLIENT_CA, AGENTSKIT_CHAT_METRICS_LISTEN, AGENTSKIT_CHAT_DRAIN_DELAY,
  AGENTSKIT_CHAT_DIGEST_KEY (hex), AGENTSKIT_CHAT_DIGEST_KEY_FILE,
  AGENTSKIT_CHAT_HTTP_LISTEN, AGENTSKIT_CHAT_CORS_ORIGINS (comma-separated),
  AGENTSKIT_CHAT_WEB_ROOT, AGENTSKIT_CHAT_MAX_WATCHERS_PER_SESSION,
  AGENTSKIT_CHAT_MAX_WATCHERS_PER_TENANT, AGENTSKIT_CHAT_WATCH_HEARTBEAT,
  AGENTSKIT_CHAT_RPC_SPANS (on or off), AGENTSKIT_CHAT_REVISION_LEASE,
  AGENTSKIT_CHAT_SAMPLING_MAX_TOKENS, AGENTSKIT_CHAT_SAMPLING_MAX_TEMPERATURE

telemetry: spans and metrics go over OTLP/gRPC when OTEL_EXPORTER_OTLP_ENDPOINT (or
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / _METRICS_ENDPOINT) is set; the other standard
  OTEL_* variables apply. Nothing is exported by default. --metrics-listen serves the
  metrics for Prometheus to scrape, with or without OTLP. --rpc-spans off leaves each
  call's SERVER span to a mesh proxy; the turn span then continues the caller's trace.

signals: SIGTERM/SIGINT drain and stop (SIGTERM after --drain-delay); SIGHUP reloads the
  definitions, the tokens file and the TLS certificates."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `serve`; most default to an AGENTSKIT_CHAT_* environment variable."""
    parser.epilog = ENVIRONMENT
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    limits = Limits()
    parser.add_argument(
        "--listen",
        default=_env("LISTEN", DEFAULT_LISTEN),
        help="host:port to listen on; port 0 picks a free port [%(default)s]",
    )
    parser.add_argument(
        "--definitions",
        default=_env("DEFINITIONS", DEFAULT_DEFINITIONS),
        help="directory of YAML/JSON definitions; empty for none [%(default)s]",
    )
    parser.add_argument(
        "--definitions-module",
        action="append",
        default=[m for m in (_env("DEFINITIONS_MODULES") or "").split(",") if m],
        metavar="MODULE",
        help="Python module that defines chats in code; repeatable",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=state_dir_from_env(),
        help="directory of the SQLite store and the digest key [./var]",
    )
    add_store_arguments(parser)
    add_durability_arguments(parser)
    parser.add_argument(
        "--migrate",
        action="store_true",
        help="apply missing PostgreSQL schema migrations before serving",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=float(_env("GRACE", "10") or 10),
        help="seconds in-flight turns may finish after SIGTERM [%(default)s]",
    )
    parser.add_argument(
        "--revision-lease",
        type=float,
        default=float(_env("REVISION_LEASE", str(PUBLISH_LEASE_SECONDS)) or 0),
        help="seconds the revisions this server publishes in the store count as served"
        " after it stops renewing them, so other servers serve their sessions; 0 neither"
        " publishes nor reads them [%(default)s]",
    )
    parser.add_argument(
        "--turn-timeout",
        type=float,
        default=float(_env("TURN_TIMEOUT", str(limits.turn_timeout)) or limits.turn_timeout),
        help="seconds one turn may run [%(default)s]",
    )
    parser.add_argument(
        "--lease-ttl",
        type=float,
        default=None,
        help="seconds a turn's lease lasts; must exceed the turn timeout [turn timeout + 15]",
    )
    parser.add_argument("--max-input-bytes", type=int, default=limits.max_input_bytes)
    parser.add_argument("--max-history-messages", type=int, default=limits.max_history_messages)
    parser.add_argument("--max-request-bytes", type=int, default=4 * 1024 * 1024)
    parser.add_argument(
        "--max-output-bytes",
        type=int,
        default=limits.max_output_bytes,
        help="size of one answer; past it the turn fails with output_limit [%(default)s]",
    )
    parser.add_argument(
        "--max-tools",
        type=int,
        default=limits.max_tools,
        help="tools one turn may declare; more is RESOURCE_EXHAUSTED [%(default)s]",
    )
    parser.add_argument(
        "--max-tool-schema-bytes",
        type=int,
        default=limits.max_tool_schema_bytes,
        help="size of one declared tool's description and parameters schema; more is "
        "RESOURCE_EXHAUSTED [%(default)s]",
    )
    parser.add_argument(
        "--max-tool-calls",
        type=int,
        default=limits.max_tool_calls,
        help="tool calls one model answer may make; past it the turn fails with tool_limit "
        "[%(default)s]",
    )
    parser.add_argument(
        "--max-tool-rounds",
        type=int,
        default=limits.max_tool_rounds,
        help="rounds of server tool calls one turn may run before the model must answer; "
        "past it the turn fails with tool_rounds [%(default)s]",
    )
    parser.add_argument(
        "--max-tool-arguments-bytes",
        type=int,
        default=limits.max_tool_arguments_bytes,
        help="size of one tool call's arguments; past it the turn fails with tool_limit "
        "[%(default)s]",
    )
    caps = limits.sampling_caps
    parser.add_argument(
        "--sampling-max-tokens",
        type=int,
        default=int(_env("SAMPLING_MAX_TOKENS", str(caps.max_tokens)) or caps.max_tokens),
        help="a caller's output token limit for the model is lowered to this [%(default)s]",
    )
    parser.add_argument(
        "--sampling-max-temperature",
        type=float,
        default=float(_env("SAMPLING_MAX_TEMPERATURE", "") or caps.max_temperature),
        help="a caller's sampling temperature is lowered to this (0-2) [%(default)s]",
    )
    parser.add_argument(
        "--telemetry-console",
        action="store_true",
        help="also write spans and metrics to stderr, for local debugging",
    )
    parser.add_argument(
        "--metrics-listen",
        default=_env("METRICS_LISTEN"),
        metavar="HOST:PORT",
        help="serve a Prometheus scrape endpoint at http://HOST:PORT/metrics [none]",
    )
    parser.add_argument(
        "--rpc-spans",
        choices=("on", "off"),
        default=_env("RPC_SPANS", "on"),
        help="a SERVER span per gRPC and Connect call; off when a mesh proxy (Envoy, Linkerd, "
        "Istio) already makes one: the turn span then continues the caller's trace and "
        "carries rpc.method [%(default)s]",
    )
    parser.add_argument(
        "--log-format",
        choices=("json", "console"),
        default=_env("LOG_FORMAT"),
        help="log lines on stdout [json, or console on a terminal]",
    )
    add_security_arguments(parser)
    add_mesh_arguments(parser)
    add_http_arguments(parser)
    _workers.add_arguments(parser)
    add_watch_arguments(parser)


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """Resolved settings of one `serve` run."""

    listen: str
    definitions: Path | None
    modules: tuple[str, ...]
    store_url: str
    key_path: Path | None
    grace: float
    limits: Limits
    max_request_bytes: int
    telemetry: TelemetrySettings = field(default_factory=TelemetrySettings)
    log_json: bool | None = None
    """JSON log lines; None picks console on a terminal and JSON otherwise."""
    security: SecuritySettings = field(default_factory=SecuritySettings)
    mesh: MeshSettings = field(default_factory=MeshSettings)
    store_password: str | None = field(default=None, repr=False)
    """The PostgreSQL password, kept out of the URL and of every log line."""
    migrate: bool = False
    """Apply missing PostgreSQL schema migrations before serving."""
    http: HttpSettings | None = None
    """The HTTP listener for browsers; None when off."""
    sqlite_synchronous: str = "normal"
    """SQLite's durability: `normal` or `full` (see `SqliteStore`)."""
    watch: WatchLimits = field(default_factory=lambda: WatchLimits())
    """Bounds and pace of WatchTurn and WatchSession streams."""
    revision_lease: float | None = PUBLISH_LEASE_SECONDS
    """How long published revisions count as served unrenewed; None: not published."""


def settings_from(args: argparse.Namespace) -> ServeSettings:
    """Settings from parsed flags."""
    state_dir: Path = args.state_dir
    store_url = args.store or default_store_url(state_dir)
    lease = args.lease_ttl if args.lease_ttl is not None else args.turn_timeout + 15
    return ServeSettings(
        listen=args.listen,
        definitions=Path(args.definitions) if args.definitions else None,
        modules=tuple(args.definitions_module),
        store_url=store_url,
        key_path=None if store_url.startswith("memory:") else state_dir / "digest.key",
        grace=args.grace,
        limits=Limits(
            max_input_bytes=args.max_input_bytes,
            max_history_messages=args.max_history_messages,
            max_output_bytes=args.max_output_bytes,
            max_tools=args.max_tools,
            max_tool_schema_bytes=args.max_tool_schema_bytes,
            max_tool_calls=args.max_tool_calls,
            max_tool_rounds=args.max_tool_rounds,
            max_tool_arguments_bytes=args.max_tool_arguments_bytes,
            turn_timeout=args.turn_timeout,
            lease_ttl=lease,
            sampling_caps=SamplingCaps(args.sampling_max_tokens, args.sampling_max_temperature),
        ),
        max_request_bytes=args.max_request_bytes,
        telemetry=settings_from_env(
            console=args.telemetry_console,
            prometheus_listen=args.metrics_listen or None,
            rpc_spans=_rpc_spans(args.rpc_spans),
        ),
        log_json=None if args.log_format is None else args.log_format == "json",
        security=security_from(args),
        mesh=mesh_from(args, store_url),
        store_password=store_password(args),
        migrate=args.migrate,
        http=http_from(args),
        sqlite_synchronous=sqlite_synchronous(args),
        watch=watch_limits_from(args),
        revision_lease=_revision_lease(args.revision_lease),
    )


def _revision_lease(value: float) -> float | None:
    if value < 0:
        raise ValueError("--revision-lease must be 0 or more seconds")
    return value or None


def _rpc_spans(value: str) -> bool:
    if value not in ("on", "off"):  # An environment variable skips argparse's choices.
        raise ValueError(f"--rpc-spans must be on or off, not {value!r}")
    return value == "on"


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM/SIGINT; exit 0 after draining, 2 on a configuration error."""
    try:
        settings = settings_from(args)
    except ValueError as exc:
        print(f"agentskit-chat: {exc}", file=sys.stderr)
        return 2
    worker = _workers.WorkerLink.from_args(args)
    fields = worker.log_fields() if worker else None
    configure_logging(args.log_level.upper(), json=settings.log_json, fields=fields)
    if worker is None:
        warn_if_key_file_exposed(args.digest_key_file)
    if args.workers != 1:
        if settings.telemetry.prometheus_listen is not None:
            print(
                "agentskit-chat: --metrics-listen serves one process's metrics; with --workers "
                "export them over OTLP instead",
                file=sys.stderr,
            )
            return 2
        key_path = None if settings.mesh.digest_key is not None else settings.key_path
        stop_within = settings.grace + settings.mesh.drain_delay
        return _workers.supervise(args, settings.store_url, key_path, stop_within)
    try:
        telemetry = configure_telemetry(settings.telemetry)
    except (OSError, ValueError) as exc:
        print(f"agentskit-chat: cannot serve metrics: {exc}", file=sys.stderr)
        return 2
    if telemetry.prometheus is not None:
        print(
            f"agentskit-chat metrics at http://{telemetry.prometheus.address}/metrics", flush=True
        )
    telemetry.install_global()  # Route code's own spans and metrics go out with ours.
    try:
        return asyncio.run(serve(settings, telemetry=telemetry, worker=worker))
    finally:
        telemetry.shutdown()


async def serve(
    settings: ServeSettings,
    adapters: AdapterRegistry | None = None,
    *,
    telemetry: Telemetry | None = None,
    worker: _workers.WorkerLink | None = None,
) -> int:
    """Serve `settings` until a stop signal, then drain and return the exit status.

    As a `worker` of `serve --workers`, the port is shared and the parent prints the
    listening and stopped lines.
    """
    adapters = adapters or AdapterRegistry()
    telemetry = telemetry or Telemetry()
    try:
        security = build_security(settings.security)
        definitions = gather(settings.definitions, settings.modules, adapters)
        store = await open_store(
            settings.store_url,
            password=settings.store_password,
            migrate=settings.migrate,
            sqlite_synchronous=settings.sqlite_synchronous,
        )
    except (TokenFileError, TlsFileError) as exc:
        print(f"agentskit-chat: {exc}", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"agentskit-chat: {exc}", file=sys.stderr)
        return 2
    except StoreError as exc:
        print(f"agentskit-chat: {exc}", file=sys.stderr)
        return 1
    server_tools = ServedTools(telemetry.tool_observer())
    if not await server_tools.start(definitions):
        await store.close()
        return 2
    key = settings.mesh.digest_key
    if key is None:
        key = (
            load_or_create_key(settings.key_path) if settings.key_path else secrets.token_bytes(32)
        )
    service = ChatService(
        Catalog(definitions),
        store,
        digest_key=key,
        adapters=adapters,
        limits=settings.limits,
        observer=telemetry.observer,
        rates=settings.security.rates,
        watchers=settings.watch.watchers(),
        publish_lease=settings.revision_lease,
        server_tools=server_tools,
    )
    service.watch_settings = settings.watch.settings()
    try:
        running = await _start(service, settings, security, telemetry, worker)
    except OSError as exc:
        print(f"agentskit-chat: {exc}", file=sys.stderr)
        await service.close()
        await server_tools.close()
        return 2
    await service.publish_revisions()
    gc.freeze()  # Definitions and modules live as long as the process: keep them out of GC.
    host = settings.listen.rsplit(":", 1)[0]
    stop = asyncio.Event()
    delay = 0.0  # SIGTERM (an orchestrator) waits the drain delay, SIGINT (Ctrl-C) does not.

    def stop_on(signum: signal.Signals) -> None:
        nonlocal delay
        if not stop.is_set():
            delay = settings.mesh.drain_delay if signum == signal.SIGTERM else 0.0
        stop.set()

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop_on, signum)
    reloader = Reloader(service, settings.definitions, adapters, server_tools)

    def reload() -> None:
        security.reload()
        reloader.request()

    loop.add_signal_handler(signal.SIGHUP, reload)
    description = (
        f"{len(definitions)} definitions,"
        f" store {describe_store(settings.store_url, settings.sqlite_synchronous)}, "
        f"{security.describe()}"
    )
    if running.http is not None and settings.http is not None and worker is None:
        http_host = settings.http.listen.rsplit(":", 1)[0]
        print(
            f"agentskit-chat http listening on {http_host}:{running.http.port} "
            f"({_http_description(settings.http)})",
            flush=True,
        )
    if worker is None:
        print(f"agentskit-chat listening on {host}:{running.port} ({description})", flush=True)
    else:
        worker.ready(description, stop.set)
    await stop.wait()
    if delay > 0:
        log.info("stopping: NOT_SERVING, still serving new turns for %.1f s", delay)
    log.info("stopping: draining turns for up to %.1f s", settings.grace)
    await running.drain(settings.grace, delay)
    await server_tools.close()
    if worker is None:
        print("agentskit-chat stopped", flush=True)
    return 0


async def _start(
    service: ChatService,
    settings: ServeSettings,
    security: Security,
    telemetry: Telemetry,
    worker: _workers.WorkerLink | None,
) -> RunningServer:
    return await start_server(
        service,
        settings.listen,
        max_request_bytes=settings.max_request_bytes,
        interceptors=telemetry.server_interceptors(),
        authenticator=security.authenticator,
        tls=security.tls,
        connections=settings.security.connections,
        lifetime=settings.mesh.lifetime,
        reflection_enabled=settings.security.reflection,
        reuse_port=worker is not None,
        http=settings.http,
        http_interceptors=[telemetry.connect_interceptor()],
        http_telemetry=telemetry.http_telemetry(),
    )


def _http_description(http: HttpSettings) -> str:
    parts = ["connect and grpc-web"]
    origins = len(http.cors_origins)
    parts.append(f"{origins} CORS origin{'' if origins == 1 else 's'}")
    if http.web_root is not None:
        parts.append(f"static files from {http.web_root}")
    return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class WatchLimits:
    """How many watches (WatchTurn and WatchSession streams) one process serves per session
    and per tenant, and how often an idle session watch sends a heartbeat."""

    per_session: int = MAX_WATCHERS_PER_SESSION
    per_tenant: int = MAX_WATCHERS_PER_TENANT
    heartbeat: float = HEARTBEAT_SECONDS

    def __post_init__(self) -> None:
        if self.per_session < 1 or self.per_tenant < 1:
            raise ValueError("--max-watchers-per-session and -per-tenant must be at least 1")
        if self.heartbeat <= 0:
            raise ValueError("--watch-heartbeat must be positive")

    def watchers(self) -> Watchers:
        """The process's watcher counts under these bounds."""
        return Watchers(per_session=self.per_session, per_tenant=self.per_tenant)

    def settings(self) -> WatchSettings:
        """The session watches' settings."""
        return WatchSettings(heartbeat=self.heartbeat)


def add_watch_arguments(parser: argparse.ArgumentParser) -> None:
    """The watcher limits of `serve`: each bounds one process (each worker, each replica)."""
    parser.add_argument(
        "--max-watchers-per-session",
        type=int,
        default=int(_env("MAX_WATCHERS_PER_SESSION") or MAX_WATCHERS_PER_SESSION),
        help="open WatchTurn and WatchSession streams of one session on this process; past "
        "it a new one is RESOURCE_EXHAUSTED [%(default)s]",
    )
    parser.add_argument(
        "--max-watchers-per-tenant",
        type=int,
        default=int(_env("MAX_WATCHERS_PER_TENANT") or MAX_WATCHERS_PER_TENANT),
        help="open WatchTurn and WatchSession streams of one tenant on this process [%(default)s]",
    )
    parser.add_argument(
        "--watch-heartbeat",
        type=float,
        default=float(_env("WATCH_HEARTBEAT") or HEARTBEAT_SECONDS),
        metavar="SECONDS",
        help="an idle WatchSession stream sends a heartbeat after this many seconds "
        "without other messages; keep it under the read timeouts of proxies [%(default)s]",
    )


def watch_limits_from(args: argparse.Namespace) -> WatchLimits:
    """The watch limits from parsed flags."""
    return WatchLimits(
        per_session=args.max_watchers_per_session,
        per_tenant=args.max_watchers_per_tenant,
        heartbeat=args.watch_heartbeat,
    )
