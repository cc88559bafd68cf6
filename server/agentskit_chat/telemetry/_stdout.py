"""A log handler whose writes never wait for a stalled reader (a full pipe or socket).

Each line is written by the logging thread itself, with one non-blocking system call: no
writer thread, so no second thread contends for the interpreter lock on every turn (one
measured half the throughput). What the reader cannot take yet waits in a bounded buffer,
written out before the next line; when that buffer is full, lines are dropped and counted,
and a line saying how many were dropped follows as soon as writes go through again.

Non-blocking without touching the stream others write to: a pipe or terminal is opened
again through `/proc/self/fd` (a file description of our own, so `print` and stderr keep
blocking), a socket is sent to with MSG_DONTWAIT, and a regular file never stalls.
"""

from __future__ import annotations

import errno
import logging
import os
import select
import socket
import stat
import time
from collections import deque
from collections.abc import Callable
from typing import Final, TextIO

PENDING_BYTES: Final = 256 * 1024
"""Log bytes held while the reader is stalled; lines beyond are dropped and counted."""
CLOSE_SECONDS: Final = 2.0
"""How long closing the handler waits for a stalled reader to take what is held."""
ATOMIC_BYTES: Final = select.PIPE_BUF
"""A pipe takes a write this size or smaller whole or not at all: a held line is written
in batches of whole lines up to this size, so no other writer's output lands inside one."""
DROPPED: Final = "%d log lines were dropped while the output was not read"

Write = Callable[[bytes], int]
"""Writes what it can at once and returns the count; 0 when nothing can go now."""


class NonBlockingHandler(logging.Handler):
    """Formats each record as one line and writes it without ever blocking (see module)."""

    def __init__(self, fd: int, *, pending_bytes: int = PENDING_BYTES) -> None:
        super().__init__()
        self._fd = fd
        self._write, self._close_fd = _nonblocking_writer(fd)
        self._pending: deque[bytes] = deque()
        self._pending_bytes = 0
        self._limit = pending_bytes
        self.dropped = 0
        """Lines dropped so far."""
        self._unreported = 0

    def emit(self, record: logging.LogRecord) -> None:
        """Write the line, or hold it, or drop it and count it."""
        try:
            line = (self.format(record) + "\n").encode("utf-8", "replace")
        except Exception:
            self.handleError(record)
            return
        self._offer(line)

    def write_line(self, text: str) -> None:
        """Write a line already formatted (without its newline) as `emit` writes a record's."""
        line = (text + "\n").encode("utf-8", "replace")
        self.acquire()
        try:
            self._offer(line)
        finally:
            self.release()

    def _offer(self, line: bytes) -> None:
        if self._pending and not self._drain():
            self._hold(line)
            return
        if self._unreported:
            count, self._unreported = self._unreported, 0
            self._hold_or_write(self._notice(count))
        self._hold_or_write(line)

    def _hold_or_write(self, line: bytes) -> None:
        if self._pending:
            self._hold(line)
            return
        written = self._send(line)
        if written < len(line):
            self._keep(line[written:])  # A line once begun is always finished.

    def _hold(self, line: bytes) -> None:
        if self._pending_bytes + len(line) > self._limit:
            self.dropped += 1
            self._unreported += 1
        else:
            self._keep(line)

    def _keep(self, data: bytes) -> None:
        self._pending.append(data)
        self._pending_bytes += len(data)

    def _drain(self) -> bool:
        """Write what is held, whole lines at a time; True when nothing is left."""
        pending = self._pending
        while pending:
            count, size = 1, len(pending[0])
            while count < len(pending) and size + len(pending[count]) <= ATOMIC_BYTES:
                size += len(pending[count])
                count += 1
            batch = b"".join(pending[index] for index in range(count))
            written = self._send(batch)
            if written == 0:
                return False
            self._pending_bytes -= written
            while written and written >= len(pending[0]):
                written -= len(pending.popleft())
            if written:  # A line longer than a pipe takes at once went out in part.
                pending[0] = pending[0][written:]
                return False
        return True

    def _send(self, data: bytes) -> int:
        """Bytes of `data` written now; a reader gone for good takes everything (to nowhere)."""
        try:
            return self._write(data)
        except (BlockingIOError, InterruptedError):
            return 0
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                return 0
            return len(data)  # EPIPE and the like: nothing will ever be read, never block.

    def _notice(self, count: int) -> bytes:
        record = logging.LogRecord(
            "agentskit_chat.logging", logging.WARNING, __file__, 0, DROPPED, (count,), None
        )
        return (self.format(record) + "\n").encode("utf-8", "replace")

    @property
    def pending(self) -> int:
        """Bytes held for a reader that is not reading."""
        return self._pending_bytes

    def flush(self) -> None:
        """Write what is held, as far as the reader takes it now."""
        self.acquire()
        try:
            if self._pending:
                self._drain()
        finally:
            self.release()

    def close(self) -> None:
        """Give a stalled reader up to CLOSE_SECONDS to take what is held, then let go."""
        self.acquire()
        try:
            deadline = time.monotonic() + CLOSE_SECONDS
            while (self._pending or self._unreported) and time.monotonic() < deadline:
                if self._unreported and not self._pending:
                    count, self._unreported = self._unreported, 0
                    self._keep(self._notice(count))
                if not self._drain():
                    _wait_writable(self._fd, deadline - time.monotonic())
            self._close_fd()
            self._close_fd = _nothing
        finally:
            self.release()
        super().close()


def stream_handler(stream: TextIO) -> logging.Handler:
    """A NonBlockingHandler on the stream's file descriptor, or a plain StreamHandler for
    streams without one (such as an io.StringIO)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return logging.StreamHandler(stream)
    stream.flush()
    return NonBlockingHandler(fd)


def line_writer(handler: logging.Handler) -> Callable[[str], None] | None:
    """What writes a formatted line (without its newline) through `handler` exactly as its
    `emit` would write a record formatted so, under the handler's lock; None for a handler
    made elsewhere."""
    if isinstance(handler, NonBlockingHandler):
        return handler.write_line
    if not isinstance(handler, logging.StreamHandler) or type(handler) is not logging.StreamHandler:
        return None  # A subclass may write otherwise.
    plain = handler

    def write(text: str) -> None:
        plain.acquire()
        try:
            plain.stream.write(text + plain.terminator)
            plain.flush()
        finally:
            plain.release()

    return write


def _nonblocking_writer(fd: int) -> tuple[Write, Callable[[], None]]:
    """A writer for `fd` that never blocks, and what closes whatever it opened."""
    mode = os.fstat(fd).st_mode
    if stat.S_ISSOCK(mode):
        sock = socket.socket(fileno=os.dup(fd))
        return (lambda data: sock.send(data, socket.MSG_DONTWAIT)), sock.close
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        try:
            own = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            pass  # No /proc: fall back to writes that may block.
        else:
            return (lambda data: os.write(own, data)), (lambda: os.close(own))
    return (lambda data: os.write(fd, data)), _nothing


def _wait_writable(fd: int, timeout: float) -> None:
    if timeout > 0:
        try:
            select.select([], [fd], [], timeout)
        except (OSError, ValueError):
            time.sleep(min(timeout, 0.05))


def _nothing() -> None:
    pass
