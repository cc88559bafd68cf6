"""The contract's reference, from the comments in proto/agentskit/chat/v1/chat.proto.

protoc compiles the contract with its source information; every service, method, message,
field, enum and value is listed with the comment written above it, so the page says
exactly what the contract says.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path

from google.protobuf import descriptor_pb2
from grpc_tools import protoc  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[2]
PROTO_ROOT = ROOT / "proto"
CONTRACT = "agentskit/chat/v1/chat.proto"

# Paths inside FileDescriptorProto (descriptor.proto's field numbers).
_MESSAGE, _ENUM, _SERVICE = 4, 5, 6
_FIELD, _NESTED, _NESTED_ENUM, _ONEOF = 2, 3, 4, 8
_VALUE, _METHOD = 2, 2

_SCALARS = {
    value: name.removeprefix("TYPE_").lower()
    for name, value in descriptor_pb2.FieldDescriptorProto.Type.items()
}


def compile_contract(proto: str = CONTRACT) -> descriptor_pb2.FileDescriptorProto:
    """The contract file's descriptor, with its comments."""
    includes = resources.files("grpc_tools") / "_proto"
    with tempfile.TemporaryDirectory() as workdir:
        out = Path(workdir) / "contract.binpb"
        status = protoc.main(
            [
                "protoc",
                f"-I{PROTO_ROOT}",
                f"-I{includes}",
                "--include_source_info",
                f"--descriptor_set_out={out}",
                proto,
            ]
        )
        if status != 0:
            raise RuntimeError(f"protoc could not compile {proto}")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    (found,) = (f for f in files.file if f.name == proto)
    return found


class _Comments:
    def __init__(self, file: descriptor_pb2.FileDescriptorProto) -> None:
        self._by_path = {
            tuple(location.path): location.leading_comments
            for location in file.source_code_info.location
        }

    def __call__(self, path: Sequence[int]) -> str:
        """The comment above the element at `path`, without buf's lint directives."""
        lines = self._by_path.get(tuple(path), "").splitlines()
        kept = [line[1:] if line.startswith(" ") else line for line in lines]
        text = "\n".join(line for line in kept if not line.startswith("buf:lint:"))
        return text.strip()


def _anchor(name: str) -> str:
    return name.lower().replace(".", "-")


def _type(field: descriptor_pb2.FieldDescriptorProto, package: str) -> str:
    if field.type_name:
        name = field.type_name.lstrip(".")
        if name.startswith(package + "."):
            short = name.removeprefix(package + ".")
            shown = f"[`{short}`](#{_anchor(short)})"
        else:
            shown = f"`{name}`"
    else:
        shown = f"`{_SCALARS[field.type]}`"
    if field.label == descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED:
        return f"repeated {shown}"
    if field.proto3_optional:
        return f"optional {shown}"
    return shown


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _paragraphs(text: str) -> list[str]:
    return [text, ""] if text else []


def _message(
    message: descriptor_pb2.DescriptorProto,
    path: list[int],
    prefix: str,
    package: str,
    comment: _Comments,
) -> list[str]:
    name = prefix + message.name
    lines = [f"### {name} {{#{_anchor(name)}}}", "", *_paragraphs(comment(path))]
    if message.field:
        oneofs = {
            i: decl.name
            for i, decl in enumerate(message.oneof_decl)
            if not any(
                f.proto3_optional and f.oneof_index == i and f.HasField("oneof_index")
                for f in message.field
            )
        }
        lines += ["| field | number | type | description |", "| --- | --- | --- | --- |"]
        for index, field in enumerate(message.field):
            text = comment([*path, _FIELD, index])
            if field.HasField("oneof_index") and field.oneof_index in oneofs:
                text = f"(one of `{oneofs[field.oneof_index]}`) {text}"
            lines.append(
                f"| `{field.name}` | {field.number} | {_type(field, package)} | {_cell(text)} |"
            )
        lines.append("")
    for index, nested in enumerate(message.nested_type):
        if not nested.options.map_entry:
            lines += _message(nested, [*path, _NESTED, index], f"{name}.", package, comment)
    for index, enum in enumerate(message.enum_type):
        lines += _enum(enum, [*path, _NESTED_ENUM, index], f"{name}.", comment)
    return lines


def _enum(
    enum: descriptor_pb2.EnumDescriptorProto, path: list[int], prefix: str, comment: _Comments
) -> list[str]:
    name = prefix + enum.name
    lines = [f"### {name} {{#{_anchor(name)}}}", "", *_paragraphs(comment(path))]
    lines += ["| value | number | description |", "| --- | --- | --- |"]
    for index, value in enumerate(enum.value):
        text = comment([*path, _VALUE, index])
        lines.append(f"| `{value.name}` | {value.number} | {_cell(text)} |")
    return [*lines, ""]


def _methods(
    service: descriptor_pb2.ServiceDescriptorProto, path: list[int], package: str, c: _Comments
) -> Iterable[str]:
    yield "| method | request | response | description |"
    yield "| --- | --- | --- | --- |"
    for index, method in enumerate(service.method):
        request = method.input_type.lstrip(".").removeprefix(package + ".")
        response = method.output_type.lstrip(".").removeprefix(package + ".")
        stream = "stream " if method.server_streaming else ""
        yield (
            f"| `{method.name}` | [`{request}`](#{_anchor(request)}) "
            f"| {stream}[`{response}`](#{_anchor(response)}) "
            f"| {_cell(c([*path, _METHOD, index]))} |"
        )


def contract_page(proto: str = CONTRACT) -> str:
    """docs/reference/contract.md."""
    file = compile_contract(proto)
    comment = _Comments(file)
    package = file.package
    lines = [
        "# The contract",
        "",
        f"Generated from the comments of `proto/{proto}` (package `{package}`) when the site is "
        "built: what is written here is what the contract file says. "
        "[Governing the contract](../how-to/contract.md) says how it may change; "
        "[Errors and limits](errors.md) lists the status codes and reasons together.",
        "",
    ]
    syntax_comment = comment([12])  # the comment above `syntax`: the file's introduction
    lines += _paragraphs(syntax_comment)
    for index, service in enumerate(file.service):
        path = [_SERVICE, index]
        lines += [f"## {service.name}", "", *_paragraphs(comment(path))]
        lines += [*_methods(service, path, package, comment), ""]
    lines += ["## Messages", ""]
    for index, message in enumerate(file.message_type):
        lines += _message(message, [_MESSAGE, index], "", package, comment)
    lines += ["## Enums", ""]
    for index, enum in enumerate(file.enum_type):
        lines += _enum(enum, [_ENUM, index], "", comment)
    return "\n".join(lines)


def contract_names(proto: str = CONTRACT) -> set[str]:
    """Every method, message and enum value name of the contract (for the tests)."""
    file = compile_contract(proto)
    names = {m.name for s in file.service for m in s.method}
    stack = list(file.message_type)
    while stack:
        message = stack.pop()
        names.add(message.name)
        stack.extend(message.nested_type)
    names.update(v.name for e in file.enum_type for v in e.value)
    return names
