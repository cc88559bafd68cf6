"""Debian's nginx running deploy/nginx/nginx.conf on loopback, in the foreground.

`nginx_binary()` finds nginx, installing the Debian package with apt-get when it is absent
and this process is root (as bench/_postgres.py does for PostgreSQL). `render()` turns the
shipped configuration into one for a test: its own listen port, upstream addresses, files
under a temporary directory, one worker (round robin is then strictly in turn), a JSON
access log naming each call's upstreams, and other values for some settings (shorter
timeouts). Every other line is the shipped one. `Nginx` runs it with `daemon off`, reloads
it and reads its access log.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final, Self

ROOT: Final = Path(__file__).resolve().parents[2]
SHIPPED: Final = ROOT / "deploy" / "nginx" / "nginx.conf"
SEARCHED: Final = ("/usr/sbin/nginx", "/usr/local/sbin/nginx")
START_TIMEOUT: Final = 20.0
TURN_HEADER: Final = "x-test-turn"
"""Request metadata the tests send with every call of a turn, logged by nginx."""

ACCESS_FORMAT: Final = (
    "log_format grpc escape=json '{"
    '"time":$msec,"uri":"$uri","status":$status,"turn":"$http_x_test_turn",'
    '"upstream":"$upstream_addr","upstream_status":"$upstream_status",'
    '"upstream_sent":"$upstream_bytes_sent","request_time":$request_time,'
    '"grpc_status":"$sent_http_grpc_status$sent_trailer_grpc_status"'
    "}';"
)


def nginx_binary() -> str:
    """The nginx program; Debian's package is installed first when it is absent (as root)."""
    found = _find()
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for argv in (
            ["apt-get", "update", "-q"],
            ["apt-get", "install", "-q", "-y", "--no-install-recommends", "nginx"],
        ):
            subprocess.run(argv, check=True, env=env, capture_output=True, timeout=600)
        found = _find()
    if found is None:
        raise RuntimeError("nginx not found: install the Debian package nginx (make nginx)")
    return found


def _find() -> str | None:
    found = shutil.which("nginx")
    if found is not None:
        return found
    return next((path for path in SEARCHED if os.access(path, os.X_OK)), None)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _replace(text: str, pattern: str, new: str, count: int = 1) -> str:
    """`text` with `pattern` replaced exactly `count` times: the shipped file must still
    have the shape the tests rely on."""
    replaced, found = re.subn(pattern, lambda _: new, text, flags=re.MULTILINE | re.DOTALL)
    if found != count:
        raise AssertionError(f"{SHIPPED.name}: {pattern!r} matched {found} times, not {count}")
    return replaced


def render(
    directory: Path,
    port: int,
    upstreams: Sequence[str],
    settings: Mapping[str, str] | None = None,
) -> str:
    """The shipped configuration for a test: listening on 127.0.0.1:`port`, passing to
    `upstreams` (`host:port`, as many as the shipped file has servers), its files under
    `directory`, and `settings` (directive name → value, e.g. grpc_read_timeout → 3s)
    replacing the shipped values."""
    text = SHIPPED.read_text(encoding="utf-8")
    text = _replace(text, r"^worker_processes \S+;", "worker_processes 1;")
    text = _replace(text, r"^pid \S+;", f"pid {directory / 'nginx.pid'};")
    text = _replace(text, r"^error_log \S+ (\w+);", f"error_log {directory / 'error.log'} info;")
    text = _replace(text, r"^    log_format grpc .*?;$", f"    {ACCESS_FORMAT}")
    text = _replace(
        text, r"^    access_log \S+ grpc;", f"    access_log {directory / 'access.log'} grpc;"
    )
    temp = "\n".join(
        f"    {kind}_temp_path {directory / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    text = _replace(text, r"^http \{$", "http {\n" + temp)
    servers = iter(upstreams)
    text = re.sub(
        r"^(        server )\S+( .*;)$",
        lambda m: f"{m.group(1)}{next(servers)}{m.group(2)}",
        text,
        flags=re.MULTILINE,
    )
    if next(servers, None) is not None:
        raise AssertionError(f"{SHIPPED.name} has fewer upstream servers than {len(upstreams)}")
    text = _replace(text, r"^        listen \d+ http2;", f"        listen 127.0.0.1:{port} http2;")
    for directive, value in (settings or {}).items():
        text = re.sub(rf"^(\s*{directive}) \S+;$", rf"\g<1> {value};", text, flags=re.MULTILINE)
        if f"{directive} {value};" not in text:
            raise AssertionError(f"{SHIPPED.name} does not set {directive}")
    return text


@dataclass(frozen=True, slots=True)
class Call:
    """One line of the access log: a gRPC call nginx passed on, logged when it ended."""

    time: float
    method: str
    """The RPC's name, e.g. "StreamTurn"."""
    turn: str
    """The call's x-test-turn metadata ("" without)."""
    upstreams: tuple[str, ...]
    """Every replica tried, in order; the last one served the call."""
    sent: tuple[int, ...]
    """Bytes sent to each replica tried: 0 when the call never reached it."""
    status: int
    grpc_status: str
    request_time: float
    """Seconds from the call's first bytes to its end."""


class Nginx:
    """nginx in the foreground on a rendered configuration, as a context manager."""

    def __init__(
        self,
        directory: Path,
        upstreams: Sequence[str],
        settings: Mapping[str, str] | None = None,
    ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.port = free_port()
        self.config = directory / "nginx.conf"
        self.config.write_text(render(directory, self.port, upstreams, settings), "utf-8")
        self._binary = nginx_binary()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _argv(self, *extra: str) -> list[str]:
        return [
            self._binary,
            "-p",
            str(self.directory),
            "-c",
            str(self.config),
            "-e",
            str(self.directory / "error.log"),
            *extra,
        ]

    def check(self) -> subprocess.CompletedProcess[str]:
        """`nginx -t` on the configuration."""
        return subprocess.run(
            self._argv("-t"), capture_output=True, text=True, timeout=30, check=False
        )

    def __enter__(self) -> Self:
        self._process = subprocess.Popen(
            self._argv("-g", "daemon off;"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"nginx did not start:\n{self.error_log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.__exit__(None, None, None)
                    raise RuntimeError(f"nginx did not listen:\n{self.error_log()}") from None
                time.sleep(0.05)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()  # fast shutdown: open calls are cut
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def reload(self) -> frozenset[int]:
        """Re-read the configuration: new workers take new calls; the old ones end once
        their calls have (or after `worker_shutdown_timeout`, when set). Returns the old
        workers' process ids, for `wait_exited`."""
        assert self._process is not None
        old = self.workers()
        self._process.send_signal(signal.SIGHUP)
        return old

    def workers(self) -> frozenset[int]:
        """The process ids of the master's children (its workers, old and new)."""
        assert self._process is not None
        pid = self._process.pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text("ascii")
        return frozenset(int(child) for child in children.split())

    def wait_exited(self, pids: frozenset[int], timeout: float) -> None:
        """Wait until none of `pids` is a worker any more (the master reaped them)."""
        deadline = time.monotonic() + timeout
        while pids & self.workers():
            if time.monotonic() > deadline:
                raise AssertionError(f"nginx workers {sorted(pids & self.workers())} still run")
            time.sleep(0.05)

    def error_log(self) -> str:
        path = self.directory / "error.log"
        return path.read_text("utf-8", "replace") if path.exists() else ""

    def calls(self) -> list[Call]:
        """The access log so far. nginx logs a call after it has sent the call's last bytes,
        so a call its client has seen end may be missing while nginx runs (a busy machine
        can hold the worker between the two); once nginx has stopped, every call is there."""
        path = self.directory / "access.log"
        if not path.exists():
            return []
        found = []
        for line in path.read_text("utf-8").splitlines():
            record = json.loads(line)
            upstreams = tuple(a.strip() for a in record["upstream"].split(",") if a.strip())
            sent = tuple(int(b) for b in record["upstream_sent"].split(",") if b.strip())
            found.append(
                Call(
                    time=float(record["time"]),
                    method=record["uri"].rsplit("/", 1)[-1],
                    turn=record["turn"],
                    upstreams=upstreams,
                    sent=sent,
                    status=int(record["status"]),
                    grpc_status=record["grpc_status"],
                    request_time=float(record["request_time"]),
                )
            )
        return found
