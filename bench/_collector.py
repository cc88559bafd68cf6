"""An OTLP/gRPC collector in a process of its own, so receiving costs the load generator nothing.

`python -m bench._collector` serves the receiver the tests use (bench/_otlp.py) on a free
port, prints `listening on HOST:PORT`, and on SIGTERM prints how many spans and metric
exports arrived.
"""

from __future__ import annotations

import signal
import threading

from ._otlp import OtlpReceiver


def main() -> int:
    """Serve until SIGTERM or SIGINT."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    with OtlpReceiver() as receiver:
        print(f"collector listening on 127.0.0.1:{receiver.port}", flush=True)
        stop.wait()
        spans = len(receiver.spans())
        metrics = receiver.attempts("metrics")
    print(f"collector received {spans} spans and {metrics} metric exports", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
