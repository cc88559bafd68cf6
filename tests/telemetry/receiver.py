"""The OTLP/gRPC receiver (bench/_otlp.py, shared with the benchmarks' collector), under the
name the tests import it by."""

from bench._otlp import (
    MAX_HOLD_SECONDS,
    OtlpReceiver,
    ReceivedPoint,
    ReceivedSpan,
    Signal,
    attributes_of,
    value_of,
)

__all__ = [
    "MAX_HOLD_SECONDS",
    "OtlpReceiver",
    "ReceivedPoint",
    "ReceivedSpan",
    "Signal",
    "attributes_of",
    "value_of",
]
