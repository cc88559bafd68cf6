"""`serve --workers N`: N server processes sharing one port, supervised by this process.

The parent reads (or creates) the digest key before any worker starts, so all agree on
it; then it reserves the port and starts the workers, each an ordinary `serve` whose gRPC
server binds with SO_REUSEPORT, so the kernel spreads new connections over them. The
first worker starts alone: it creates the store's schema, and a configuration error is
reported once (the parent exits with the worker's status, 2) before the others start. A
worker whose process ends without being asked is started again, after a delay that
doubles while it keeps failing. SIGTERM or SIGINT drains every worker (each runs its own
drain) and the parent exits 0 once all have stopped; SIGHUP is passed on to every running
worker, which reloads as a single server does.

The port: the parent binds it (without listening) before any worker starts, so port 0 is
resolved to one free port that every worker, and every restarted worker, listens on; and
a port another server already holds fails at once, in the parent, with exit status 2.
The parent's socket has SO_REUSEPORT but never listens, so it takes no connections.
`--http-listen` is reserved the same way, and every worker serves it too.

Each worker talks to the parent over one socket pair: it sends its description when it
listens (the parent prints the single `listening on` line from the first one), and it
drains and stops when the parent's end closes, so no worker outlives a killed parent.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from ._keys import load_or_create_key

log = logging.getLogger("agentskit_chat.workers")

FIRST_RESTART_DELAY: Final = 0.25
"""Seconds before a dead worker is started again; doubled per failure in a row."""
MAX_RESTART_DELAY: Final = 15.0
STABLE_SECONDS: Final = 30.0
"""A worker that ran this long before it died starts again after the first delay."""
STOP_MARGIN: Final = 30.0
"""Seconds past the grace that workers get to drain before they are killed."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`--workers`, and the hidden flags the parent starts each worker with."""
    parser.add_argument(
        "--workers",
        type=int,
        default=int(os.environ.get("AGENTSKIT_CHAT_WORKERS") or 1),
        help="server processes sharing the port, supervised by this one; env "
        "AGENTSKIT_CHAT_WORKERS [%(default)s]",
    )
    parser.add_argument("--worker-fd", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker-index", type=int, default=0, help=argparse.SUPPRESS)


class WorkerLink:
    """A worker's end of its socket pair with the parent."""

    def __init__(self, fd: int, index: int) -> None:
        self.index = index
        self._socket = socket.socket(fileno=fd)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> WorkerLink | None:
        """The link when this process is a worker, else None."""
        fd: int | None = args.worker_fd
        return None if fd is None else cls(fd, args.worker_index)

    def log_fields(self) -> dict[str, str | int]:
        """Fields on every log line of this worker."""
        return {"worker": self.index, "pid": os.getpid()}

    def ready(self, description: str, stop: Callable[[], None]) -> None:
        """Tell the parent this worker listens; call `stop` once the parent has gone."""
        self._socket.sendall(description.encode("utf-8") + b"\n")
        self._socket.setblocking(False)
        loop = asyncio.get_running_loop()

        def readable() -> None:
            try:
                if self._socket.recv(64):
                    return  # the parent sends nothing; ignore it if it ever does
            except BlockingIOError:
                return
            except OSError:
                pass
            loop.remove_reader(self._socket.fileno())
            log.warning("the supervising process has gone; stopping")
            stop()

        loop.add_reader(self._socket.fileno(), readable)


@dataclass
class Reservation:
    """The port every worker listens on, held by the parent's bound, silent sockets."""

    host: str
    port: int
    sockets: list[socket.socket] = field(default_factory=list)

    @property
    def listen(self) -> str:
        return f"{self.host}:{self.port}"

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


def reserve(listen: str, flag: str = "--listen") -> Reservation:
    """Bind `listen` (host:port, port 0 for a free one) for the workers; OSError when taken.

    A first plain bind (SO_REUSEADDR only, as servers bind) fails when any server listens
    there, with or without SO_REUSEPORT, or another supervisor holds the port; then the
    socket kept is bound with SO_REUSEPORT alone, which the workers' sockets may join.
    """
    host, sep, port_text = listen.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ValueError(f"{flag} {listen!r} is not HOST:PORT")
    port = int(port_text)
    name = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    infos = socket.getaddrinfo(name or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    reservation = Reservation(host, port)
    seen: set[tuple[int, str | int]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address[0]) in seen:
                continue
            seen.add((family, address[0]))
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind((address[0], reservation.port, *address[2:]))
                reservation.port = probe.getsockname()[1]
            kept = socket.socket(family, kind, proto)
            reservation.sockets.append(kept)
            kept.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            kept.bind((address[0], reservation.port, *address[2:]))
    except OSError as exc:
        reservation.close()
        raise OSError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
    return reservation


@dataclass
class _Worker:
    """One worker slot: its current process and the parent's end of its socket pair."""

    index: int
    process: asyncio.subprocess.Process | None = None
    writer: asyncio.StreamWriter | None = None
    ready: bool = False
    failures: int = 0

    def close_link(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class Supervisor:
    """Starts `count` workers, keeps them running, and passes signals on to them."""

    def __init__(
        self,
        argv: Sequence[str],
        count: int,
        reservation: Reservation,
        grace: float,
        http: Reservation | None = None,
    ) -> None:
        self._argv = list(argv)
        self._reservation = reservation
        self._http = http
        self._grace = grace
        self._workers = [_Worker(index) for index in range(1, count + 1)]
        self._stopping = asyncio.Event()

    async def run(self) -> int:
        """Serve until SIGTERM/SIGINT; the exit status (2 when a worker cannot start)."""
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._stopping.set)
        loop.add_signal_handler(signal.SIGHUP, self._reload)
        # The first worker alone: it creates the store's schema, and a configuration error
        # is reported once, not N times.
        first = await self._start(self._workers[0])
        if isinstance(first, int):
            return first if first > 0 else 1
        rest = await asyncio.gather(*(self._start(w) for w in self._workers[1:]))
        failed = [status for status in rest if isinstance(status, int)]
        if failed or self._stopping.is_set():
            await self._stop_all()
            return next((s for s in failed if s > 0), 1) if failed else 0
        description = first
        if self._http is not None:
            print(
                f"agentskit-chat http listening on {self._http.listen} "
                f"({len(self._workers)} workers, connect and grpc-web)",
                flush=True,
            )
        print(
            f"agentskit-chat listening on {self._reservation.listen} "
            f"({len(self._workers)} workers, {description})",
            flush=True,
        )
        keepers = [asyncio.create_task(self._keep(w)) for w in self._workers]
        await self._stopping.wait()
        for task in keepers:
            task.cancel()
        await asyncio.gather(*keepers, return_exceptions=True)
        clean = await self._stop_all()
        print("agentskit-chat stopped", flush=True)
        return 0 if clean else 1

    async def _start(self, worker: _Worker) -> str | int:
        """Start `worker`'s process; its description once it listens, or its exit status."""
        parent_end, child_end = socket.socketpair()
        with child_end:
            fd = child_end.fileno()
            worker.process = await asyncio.create_subprocess_exec(
                *self._command(worker.index, fd),
                stdin=asyncio.subprocess.DEVNULL,
                pass_fds=(fd,),
                process_group=0,  # a terminal's Ctrl-C reaches the parent, which drains all
            )
        reader, worker.writer = await asyncio.open_connection(sock=parent_end)
        line = await reader.readline()
        if not line:
            status = await worker.process.wait()
            worker.close_link()
            return status
        worker.ready = True
        log.info("worker %d listening as pid %d", worker.index, worker.process.pid)
        return line.decode("utf-8", "replace").strip()

    def _command(self, index: int, fd: int) -> list[str]:
        overrides = ["--listen", self._reservation.listen, "--workers", "1"]
        if self._http is not None:
            overrides += ["--http-listen", self._http.listen]
        overrides += ["--worker-fd", str(fd), "--worker-index", str(index)]
        return [sys.executable, "-m", "agentskit_chat.cli", *self._argv, *overrides]

    async def _keep(self, worker: _Worker) -> None:
        """Start `worker` again whenever its process ends, backing off while it fails."""
        loop = asyncio.get_running_loop()
        since = loop.time()
        while True:
            assert worker.process is not None
            status = await worker.process.wait()
            worker.ready = False
            worker.close_link()
            worker.failures = 1 if loop.time() - since >= STABLE_SECONDS else worker.failures + 1
            delay = min(FIRST_RESTART_DELAY * 2 ** (worker.failures - 1), MAX_RESTART_DELAY)
            log.warning(
                "worker %d (pid %d) exited with status %d; starting it again in %.2f s",
                worker.index,
                worker.process.pid,
                status,
                delay,
            )
            await asyncio.sleep(delay)
            since = loop.time()
            await self._start(worker)

    def _reload(self) -> None:
        """SIGHUP: every listening worker reloads (one still starting reads the files anyway)."""
        for worker in self._workers:
            if worker.ready and worker.process is not None:
                with contextlib.suppress(ProcessLookupError):
                    worker.process.send_signal(signal.SIGHUP)

    async def _stop_all(self) -> bool:
        """SIGTERM every worker and wait for their drains; True when all exited 0."""
        running = [
            w for w in self._workers if w.process is not None and w.process.returncode is None
        ]
        for worker in running:
            assert worker.process is not None
            with contextlib.suppress(ProcessLookupError):
                worker.process.send_signal(signal.SIGTERM)
        statuses = await asyncio.gather(
            *(
                asyncio.wait_for(w.process.wait(), self._grace + STOP_MARGIN)
                for w in running
                if w.process
            ),
            return_exceptions=True,
        )
        clean = True
        for worker, status in zip(running, statuses, strict=True):
            assert worker.process is not None
            if isinstance(status, BaseException):
                log.warning("worker pid %d did not stop in time; killing it", worker.process.pid)
                with contextlib.suppress(ProcessLookupError):
                    worker.process.kill()
                await worker.process.wait()
                clean = False
            elif status != 0 and (worker.ready or status != -signal.SIGTERM):
                clean = False  # one still starting may end by the signal itself
        for worker in self._workers:
            worker.close_link()
        return clean


def prepare_shared(store_url: str, key_path: Path | None) -> None:
    """Refuse a store the workers cannot share; create the digest key before they read it."""
    if store_url.startswith("memory:"):
        raise ValueError(
            "--workers needs a store the workers share; memory:// lives inside one process"
        )
    if key_path is not None:
        load_or_create_key(key_path)


def supervise(args: argparse.Namespace, store_url: str, key_path: Path | None, grace: float) -> int:
    """Run `args.workers` workers until SIGTERM/SIGINT; 2 when they cannot start."""
    count: int = args.workers
    try:
        if count < 1:
            raise ValueError("--workers must be at least 1")
        prepare_shared(store_url, key_path)
        reservation = reserve(args.listen)
    except (ValueError, OSError) as exc:
        print(f"agentskit-chat: {exc}", file=sys.stderr)
        return 2
    try:
        http = None if args.http_listen is None else reserve(args.http_listen, "--http-listen")
    except (ValueError, OSError) as exc:
        reservation.close()
        print(f"agentskit-chat: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(Supervisor(args.argv, count, reservation, grace, http).run())
    finally:
        reservation.close()
        if http is not None:
            http.close()
