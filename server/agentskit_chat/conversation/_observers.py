"""Best-effort delivery of trace records: observers run off the turn's path and cannot hurt it."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable
from typing import Final

from ._trace import TraceRecord

TraceObserver = Callable[[TraceRecord], object]
DEFAULT_CAPACITY: Final = 1024


class TraceFanout:
    """Delivers records to observers on one daemon thread.

    `publish` never blocks and never raises: when the queue is full the record is dropped
    and counted; an observer that raises is counted and the next observer still runs.
    """

    def __init__(
        self, observers: Iterable[TraceObserver], *, capacity: int = DEFAULT_CAPACITY
    ) -> None:
        self._observers = tuple(observers)
        self._queue: queue.Queue[TraceRecord | None] = queue.Queue(maxsize=capacity)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._idle = threading.Condition()
        self._pending = 0
        self.dropped = 0
        """Records not delivered because the queue was full."""
        self.failures = 0
        """Observer calls that raised."""

    def publish(self, record: TraceRecord) -> None:
        """Queue `record` for every observer; returns at once."""
        if not self._observers:
            return
        try:
            self._ensure_thread()
            with self._idle:
                self._queue.put_nowait(record)
                self._pending += 1
        except queue.Full:
            self.dropped += 1
        except Exception:  # e.g. no thread can be started; observability must not fail a turn
            self.dropped += 1

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until queued records were delivered; False if `timeout` passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def close(self) -> None:
        """Stop the delivery thread after the queued records (does not wait for it)."""
        with self._lock:
            if self._thread is not None:
                try:
                    self._queue.put_nowait(None)
                except queue.Full:
                    self.dropped += 1
                self._thread = None

    def _ensure_thread(self) -> None:
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="agentskit-chat-trace", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            record = self._queue.get()
            if record is None:
                return
            for observer in self._observers:
                try:
                    observer(record)
                except Exception:
                    self.failures += 1
            with self._idle:
                self._pending -= 1
                self._idle.notify_all()
