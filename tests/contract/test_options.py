"""Every contract file names its package for every language, so plain protoc works anywhere.

The conventions (buf style guide, AIP-191): one Go package per proto package inside the Go
module `agentskit.dev/chat/client/go`, Java under `dev.agentskit`, the PascalCase
`AgentsKit` root for C#, PHP and Ruby, and one three-letter prefix for Objective-C and Swift.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest
from google.protobuf import descriptor_pb2

from tests.contract.tooling import contract_files, descriptor_set

GO_MODULE = "agentskit.dev/chat/client/go"
NAMED = (
    "go_package",
    "java_package",
    "java_multiple_files",
    "java_outer_classname",
    "csharp_namespace",
    "php_namespace",
    "ruby_package",
    "objc_class_prefix",
    "swift_prefix",
)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[descriptor_pb2.FileDescriptorProto]:
    found = descriptor_set(tmp_path_factory.mktemp("options"), contract_files()).file
    assert [f.name for f in found] == contract_files()
    return list(found)


def pascal(segment: str) -> str:
    return "AgentsKit" if segment == "agentskit" else segment[:1].upper() + segment[1:]


def test_every_contract_file_sets_every_language_option(
    files: list[descriptor_pb2.FileDescriptorProto],
) -> None:
    for file in files:
        present = {field.name for field, _ in file.options.ListFields()}
        missing = [name for name in NAMED if name not in present]
        assert not missing, f"{file.name} lacks {missing}"


def test_the_options_follow_the_package(files: list[descriptor_pb2.FileDescriptorProto]) -> None:
    for file in files:
        options, parts = file.options, file.package.split(".")
        directory = PurePosixPath(file.name).parent.as_posix()
        path, _, name = options.go_package.partition(";")
        assert (path, name) == (f"{GO_MODULE}/{directory}", "".join(parts[-2:])), file.name
        assert options.java_package == f"dev.{file.package}"
        assert options.java_multiple_files
        stem = "".join(pascal(word) for word in Path(file.name).stem.split("_"))
        assert options.java_outer_classname == f"{stem}Proto"
        assert options.csharp_namespace == ".".join(pascal(p) for p in parts)
        assert options.php_namespace == "\\".join(pascal(p) for p in parts)
        assert options.ruby_package == "::".join(pascal(p) for p in parts)
        assert len(options.objc_class_prefix) == 3
        assert options.objc_class_prefix.isupper()
        assert options.swift_prefix == options.objc_class_prefix
