"""Server reflection in both protocol versions, `grpc.reflection.v1` and `v1alpha`.

grpcio-reflection implements only v1alpha. The v1 protocol is the same messages under
another package, so they are identical on the wire: the v1 service is the same servicer
registered under the v1 name, and a v1 file descriptor derived from the v1alpha one is
added to the descriptor pool, so that reflection describes itself in both versions.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

V1_SERVICE_NAME: Final = "grpc.reflection.v1.ServerReflection"
_V1_FILE: Final = "grpc/reflection/v1/reflection.proto"
_V1ALPHA_PREFIX: Final = ".grpc.reflection.v1alpha."
_V1_PREFIX: Final = ".grpc.reflection.v1."


def enable_reflection(server: grpc.aio.Server, service_names: Iterable[str]) -> None:
    """Serve reflection (v1 and v1alpha) listing `service_names` and itself."""
    _add_v1_descriptor()
    names = (*service_names, V1_SERVICE_NAME, reflection.SERVICE_NAME)
    servicer = reflection.aio.ReflectionServicer(names)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(  # type: ignore[no-untyped-call]
        servicer, server
    )
    info = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    handler = grpc.method_handlers_generic_handler(V1_SERVICE_NAME, {"ServerReflectionInfo": info})
    server.add_generic_rpc_handlers((handler,))


def _add_v1_descriptor() -> None:
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(_V1_FILE)
    except KeyError:
        pool.Add(_v1_file())


def _v1_file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(file)
    file.name = _V1_FILE
    file.package = "grpc.reflection.v1"
    file.ClearField("options")
    for message in file.message_type:
        _rename_types(message)
    for service in file.service:
        for method in service.method:
            method.input_type = _renamed(method.input_type)
            method.output_type = _renamed(method.output_type)
    return file


def _rename_types(message: descriptor_pb2.DescriptorProto) -> None:
    for field in message.field:
        if field.HasField("type_name"):
            field.type_name = _renamed(field.type_name)
    for nested in message.nested_type:
        _rename_types(nested)


def _renamed(type_name: str) -> str:
    if type_name.startswith(_V1ALPHA_PREFIX):
        return _V1_PREFIX + type_name[len(_V1ALPHA_PREFIX) :]
    return type_name
