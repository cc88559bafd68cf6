"""Plain `curl` against the live server's HTTP listener: a Connect unary call is a JSON POST.

`make tools` installs Debian's curl when it is absent.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from typing import Any

import grpc
from google.protobuf import json_format
from google.rpc import error_details_pb2

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc

from .harness import LiveServer

PATH = "/agentskit.chat.v1.ChatService/ListDefinitions"
WRITE_OUT = "\n%{http_code} %{content_type}"
"""What curl prints after the body: the status and the content type, on a line of their own."""


def curl(url: str, *headers: str) -> tuple[int, str, Any]:
    """POST `{}` as JSON to `url`: (HTTP status, content type, the JSON body)."""
    found = shutil.which("curl")
    assert found is not None, "curl is needed (Debian package curl): `make tools` installs it"
    argv = [found, "-sS", "-H", "Content-Type: application/json", "-d", "{}", "-w", WRITE_OUT]
    for header in headers:
        argv += ["-H", header]
    done = subprocess.run([*argv, url], capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    body, _, status = done.stdout.rpartition("\n")
    code, _, content_type = status.partition(" ")
    return int(code), content_type, json.loads(body)


def error_info(body: Any) -> error_details_pb2.ErrorInfo:
    """The one ErrorInfo of a Connect error's details (values in base64, unpadded)."""
    [value] = [d["value"] for d in body["details"] if d["type"] == "google.rpc.ErrorInfo"]
    padded = value + "=" * (-len(value) % 4)
    return error_details_pb2.ErrorInfo.FromString(base64.b64decode(padded))


def listed_over_grpc(server: LiveServer, token: str) -> pb.ListDefinitionsResponse:
    """ListDefinitions through the gRPC listener."""
    with grpc.insecure_channel(server.target) as channel:
        stub = chat_pb2_grpc.ChatServiceStub(channel)
        metadata = (("authorization", f"Bearer {token}"),)
        return stub.ListDefinitions(pb.ListDefinitionsRequest(), metadata=metadata, timeout=30)


def test_curl_lists_the_definitions_as_json(conformance_server: LiveServer) -> None:
    token = conformance_server.tokens["curl"]
    status, content_type, body = curl(
        conformance_server.http_url + PATH, f"Authorization: Bearer {token}"
    )
    assert (status, content_type.split(";")[0]) == (200, "application/json")
    ids = [definition["id"] for definition in body["definitions"]]
    assert {"support", "orders", "conformance"} <= set(ids)
    parsed = json_format.ParseDict(body, pb.ListDefinitionsResponse())
    assert parsed == listed_over_grpc(conformance_server, token)


def test_curl_without_a_token_gets_the_connect_error(conformance_server: LiveServer) -> None:
    status, content_type, body = curl(conformance_server.http_url + PATH)
    assert (status, content_type.split(";")[0]) == (401, "application/json")
    assert body["code"] == "unauthenticated"
    assert error_info(body).reason == "ERROR_REASON_UNAUTHENTICATED"
