"""The Connect codecs of the HTTP listener: google.protobuf messages as binary or JSON.

Unlike connectrpc's own compatibility codecs, a request that does not decode is refused
with the same INVALID_ARGUMENT as over gRPC, naming the field `request` and nothing of
its content (protobuf's JSON parser quotes the offending value, which may be a user's
message), and JSON responses are compact rather than indented.
"""

from __future__ import annotations

from typing import Final, TypeVar

from connectrpc.codec import Codec
from connectrpc.errors import ConnectError
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from agentskit_chat.service import Reason, ServiceError
from agentskit_chat.transport.web.boundary.errors import connect_error

M = TypeVar("M", bound=Message)

MALFORMED: Final = ServiceError(
    Reason.INVALID_ARGUMENT,
    "the request is not a valid message of this method (malformed protobuf or JSON, or "
    "invalid UTF-8)",
    field="request",
)


def _malformed() -> ConnectError:
    return connect_error(MALFORMED)


class BinaryCodec(Codec[Message, M]):
    """Protobuf binary (`application/proto`, `+proto`)."""

    def name(self) -> str:
        """The codec's content-type suffix."""
        return "proto"

    def encode(self, message: Message) -> bytes:
        """The message's wire bytes."""
        return message.SerializeToString()

    def decode(self, data: bytes | bytearray, message_class: type[M]) -> M:
        """The message in `data`; INVALID_ARGUMENT when it is not one."""
        message = message_class()
        try:
            message.ParseFromString(bytes(data))
        except (DecodeError, UnicodeDecodeError, ValueError):
            raise _malformed() from None
        return message


class JsonCodec(Codec[Message, M]):
    """The proto3 JSON mapping (`application/json`, `+json`); unknown fields are ignored,
    as Connect clients of newer contracts expect."""

    def name(self) -> str:
        """The codec's content-type suffix."""
        return "json"

    def encode(self, message: Message) -> bytes:
        """Compact JSON."""
        text: str = json_format.MessageToJson(message, indent=None)
        return text.encode()

    def decode(self, data: bytes | bytearray, message_class: type[M]) -> M:
        """The message in `data`; INVALID_ARGUMENT when it is not one."""
        message = message_class()
        try:
            json_format.Parse(bytes(data), message, ignore_unknown_fields=True)
        except (json_format.ParseError, UnicodeDecodeError, ValueError, TypeError):
            raise _malformed() from None
        return message


CODECS: Final = (BinaryCodec[Message](), JsonCodec[Message]())
