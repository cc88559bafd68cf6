"""The vendored google.rpc files describe exactly what the server sends.

The server encodes its error details with the classes googleapis-common-protos ships; other
languages decode them with code generated from proto/google/rpc. Both must agree on every
field of the messages that travel: Status, ErrorInfo and RetryInfo.
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import descriptor_pb2
from google.rpc import error_details_pb2, status_pb2

from tests.contract.tooling import PROTO, VENDORED, descriptor_set

SENT = {
    "google/rpc/status.proto": (status_pb2.DESCRIPTOR, ["Status"]),
    "google/rpc/error_details.proto": (error_details_pb2.DESCRIPTOR, ["ErrorInfo", "RetryInfo"]),
}


def test_the_vendored_messages_match_the_classes_the_server_uses(tmp_path: Path) -> None:
    vendored = {f.name: f for f in descriptor_set(tmp_path, VENDORED).file}
    assert sorted(vendored) == sorted(SENT)
    for name, (python_file, messages) in SENT.items():
        shipped = descriptor_pb2.FileDescriptorProto()
        python_file.CopyToProto(shipped)
        ours = vendored[name]
        assert (ours.package, list(ours.dependency)) == (shipped.package, list(shipped.dependency))
        for message in messages:
            assert _message(ours, message) == _message(shipped, message), f"{name}: {message}"


def test_the_vendored_files_carry_their_license_and_upstream_options() -> None:
    directory = PROTO / "google" / "rpc"
    assert "Apache License" in (directory / "LICENSE").read_text(encoding="utf-8")
    notice = (directory / "NOTICE").read_text(encoding="utf-8")
    for name in VENDORED:
        assert Path(name).name in notice
        text = (PROTO / name).read_text(encoding="utf-8")
        assert text.startswith("// Copyright")
        assert "Licensed under the Apache License" in text
        assert 'option go_package = "google.golang.org/genproto/googleapis/rpc/' in text


def _message(file: descriptor_pb2.FileDescriptorProto, name: str) -> descriptor_pb2.DescriptorProto:
    """The message, without the JSON names protoc derives (Python's copy omits them)."""
    (found,) = (m for m in file.message_type if m.name == name)
    message = descriptor_pb2.DescriptorProto()
    message.CopyFrom(found)
    _without_json_names(message)
    return message


def _without_json_names(message: descriptor_pb2.DescriptorProto) -> None:
    for field in message.field:
        field.ClearField("json_name")
    for nested in message.nested_type:
        _without_json_names(nested)
