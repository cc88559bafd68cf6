"""ChatError and its decoding from gRPC errors."""

from __future__ import annotations

import pickle
from datetime import timedelta

import grpc
import grpc.aio
import pytest
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from agentskit_chat_client import ChatError
from agentskit_chat_client._errors import STATUS_DETAILS_KEY, from_rpc_error
from tests.client.fake_service import Abort


def _rpc_error(
    code: grpc.StatusCode, details: str | None, *trailers: tuple[str, str | bytes]
) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(
        code,
        initial_metadata=grpc.aio.Metadata(),
        trailing_metadata=grpc.aio.Metadata(*trailers),
        details=details,
    )


def test_status_details_are_decoded():
    abort = Abort(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "Too many messages.",
        reason="ERROR_REASON_LIMIT_EXCEEDED",
        metadata={"limit": "max_messages"},
    )

    error = from_rpc_error(
        _rpc_error(abort.code, abort.message, ("x-other", "1"), *abort.trailing_metadata())
    )

    assert error.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error.message == "Too many messages."
    assert error.reason == "ERROR_REASON_LIMIT_EXCEEDED"
    assert error.domain == "chat.agentskit.dev"
    assert error.metadata == {"limit": "max_messages"}


def test_the_error_info_is_found_among_other_details():
    status = status_pb2.Status(code=10, message="from status")
    status.details.add().Pack(error_details_pb2.RetryInfo())
    status.details.add().Pack(
        error_details_pb2.ErrorInfo(reason="ERROR_REASON_CONFLICT", domain="chat.agentskit.dev")
    )

    error = from_rpc_error(
        _rpc_error(grpc.StatusCode.ABORTED, None, (STATUS_DETAILS_KEY, status.SerializeToString()))
    )

    assert error.reason == "ERROR_REASON_CONFLICT"
    assert error.message == "from status"


@pytest.mark.parametrize(
    "trailers",
    [
        (),
        ((STATUS_DETAILS_KEY, b"\xff\xff not a status"),),
        ((STATUS_DETAILS_KEY, status_pb2.Status(code=13, message="m").SerializeToString()),),
        (
            (
                STATUS_DETAILS_KEY,
                status_pb2.Status(
                    code=13, details=[any_pb2.Any(type_url="type.googleapis.com/x.Y")]
                ).SerializeToString(),
            ),
        ),
    ],
    ids=["absent", "malformed", "no-details", "unknown-detail"],
)
def test_missing_or_unusable_details_leave_reason_empty(trailers):
    error = from_rpc_error(_rpc_error(grpc.StatusCode.INTERNAL, "boom", *trailers))

    assert error.code is grpc.StatusCode.INTERNAL
    assert error.message == "boom"
    assert error.reason is None
    assert error.domain is None
    assert error.metadata == {}


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({}, None),
        ({"retry_after_ms": "250"}, 250),
        ({"retry_after_ms": "0"}, 0),
        ({"retry_after_ms": "soon"}, None),
        ({"retry_after_ms": "-5"}, None),
    ],
)
def test_retry_after_ms(metadata, expected):
    error = ChatError(grpc.StatusCode.ABORTED, "busy", metadata=metadata)

    assert error.retry_after_ms == expected


def test_metadata_is_a_read_only_copy():
    source = {"field": "session_id"}
    error = ChatError(grpc.StatusCode.INVALID_ARGUMENT, "bad", metadata=source)
    source["field"] = "changed"

    assert error.metadata == {"field": "session_id"}
    with pytest.raises(TypeError):
        error.metadata["field"] = "x"  # type: ignore[index]


def test_str_and_repr_name_code_and_reason():
    error = ChatError(grpc.StatusCode.ABORTED, "Session busy.", reason="ERROR_REASON_SESSION_BUSY")

    assert str(error) == "ABORTED ERROR_REASON_SESSION_BUSY: Session busy."
    assert str(ChatError(grpc.StatusCode.UNAVAILABLE, "")) == "UNAVAILABLE"
    assert "ERROR_REASON_SESSION_BUSY" in repr(error)


def test_chat_error_pickles():
    error = ChatError(
        grpc.StatusCode.ABORTED,
        "busy",
        reason="ERROR_REASON_SESSION_BUSY",
        domain="chat.agentskit.dev",
        metadata={"retry_after_ms": "9"},
    )

    copy = pickle.loads(pickle.dumps(error))

    assert isinstance(copy, ChatError)
    assert (copy.code, copy.message, copy.reason, copy.domain) == (
        error.code,
        error.message,
        error.reason,
        error.domain,
    )
    assert copy.retry_after_ms == 9


def test_retry_info_gives_the_retry_delay():
    status = status_pb2.Status(code=10, message="busy")
    status.details.add().Pack(
        error_details_pb2.ErrorInfo(reason="ERROR_REASON_SESSION_BUSY", domain="chat.agentskit.dev")
    )
    retry = error_details_pb2.RetryInfo()
    retry.retry_delay.FromMilliseconds(1_500)
    status.details.add().Pack(retry)

    error = from_rpc_error(
        _rpc_error(grpc.StatusCode.ABORTED, None, (STATUS_DETAILS_KEY, status.SerializeToString()))
    )

    assert error.retry_delay == timedelta(milliseconds=1_500)
    assert error.retry_after_ms == 1_500  # no metadata: the RetryInfo delay
    assert pickle.loads(pickle.dumps(error)).retry_delay == error.retry_delay
    assert ChatError(grpc.StatusCode.ABORTED, "busy").retry_delay is None
