"""Best-effort delivery of trace records: observers run off the turn's path and cannot hurt it."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable
from typing import Final

from ._trace import TraceRecord

TraceObserver = Callable[[TraceRecord], object]
DEFAULT_CAPACITY: Final = 1024
IDLE_SECONDS: Final = 1.0


class TraceFanout:
    """Delivers records to observers on a background thread.

    `publish` never blocks and never raises: when the queue is full the record is dropped
    and counted; an observer that raises is counted and the next observer still runs. The
    thread exits after `idle_seconds` without records and starts again on the next one, so
    an abandoned fanout holds no thread. Share one fanout between many sessions.
    """

    def __init__(
        self,
        observers: Iterable[TraceObserver],
        *,
        capacity: int = DEFAULT_CAPACITY,
        idle_seconds: float = IDLE_SECONDS,
    ) -> None:
        self._observers = tuple(observers)
        self._queue: queue.Queue[TraceRecord] = queue.Queue(maxsize=capacity)
        self._idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._running = False
        self._pending = 0
        self.dropped = 0
        """Records not delivered because the queue was full."""
        self.failures = 0
        """Observer calls that raised."""

    def publish(self, record: TraceRecord) -> None:
        """Queue `record` for every observer; returns at once."""
        if not self._observers:
            return
        with self._lock:
            try:
                self._queue.put_nowait(record)
            except queue.Full:
                self.dropped += 1
                return
            self._pending += 1
            if not self._running:
                try:
                    threading.Thread(
                        target=self._run, name="agentskit-chat-trace", daemon=True
                    ).start()
                    self._running = True
                except RuntimeError:  # no thread can be started; observability yields
                    self._drain_unsent()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until queued records were delivered; False if `timeout` passed first."""
        with self._done:
            return self._done.wait_for(lambda: self._pending == 0, timeout)

    def _run(self) -> None:
        while True:
            try:
                record = self._queue.get(timeout=self._idle_seconds)
            except queue.Empty:
                with self._lock:
                    if self._queue.empty():
                        self._running = False
                        return
                continue
            for observer in self._observers:
                try:
                    observer(record)
                except Exception:
                    self.failures += 1
            with self._done:
                self._pending -= 1
                self._done.notify_all()

    def _drain_unsent(self) -> None:
        while not self._queue.empty():
            self._queue.get_nowait()
            self._pending -= 1
            self.dropped += 1
        self._done.notify_all()
