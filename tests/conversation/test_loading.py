"""Loading definitions from YAML, JSON and directories, and the published JSON Schema."""

from __future__ import annotations

import datetime
import json
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
import yaml

from agentskit_chat.conversation import (
    SCHEMA_PATH,
    ConfigError,
    ErrorCode,
    canonical_document,
    definition_of_document,
    definition_schema,
    is_definition_file,
    load_definition,
    load_definitions,
)

from .conftest import EXAMPLES

SUPPORT_YAML = (EXAMPLES / "support.yaml").read_text(encoding="utf-8")


def codes(error: pytest.ExceptionInfo[ConfigError]) -> list[ErrorCode]:
    return [d.code for d in error.value.diagnostics]


def test_yaml_file_loads_with_on_as_a_plain_key() -> None:
    definition = load_definition(EXAMPLES / "support.yaml")
    assert definition.conversation.states["idle"].on == {"start": "collecting"}
    assert definition.source.endswith("support.yaml")
    assert definition.model == {"adapter": "offline"}


def test_yes_and_no_stay_strings_in_yaml(tmp_path: Path) -> None:
    path = tmp_path / "yn.yaml"
    path.write_text(
        "id: yn\nrevision: 1\nconversation:\n  initial: no\n"
        "  states:\n    no: {on: {yes: off}}\n    off: {}\n",
        encoding="utf-8",
    )
    definition = load_definition(path)
    assert definition.compiled.chart.target("no", "yes") == "off"


def test_json_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "support.json"
    data = yaml.load(SUPPORT_YAML, Loader=yaml.BaseLoader)
    data["revision"] = int(data["revision"])
    path.write_text(json.dumps(data))
    assert load_definition(path).id == "support"


def test_directory_loader_loads_every_example() -> None:
    loaded = load_definitions(EXAMPLES)
    assert {"support", "orders"} <= set(loaded)


def test_directory_loader_reports_problems_of_all_files(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(SUPPORT_YAML)
    (tmp_path / "b.yaml").write_text(SUPPORT_YAML)  # same id
    (tmp_path / "c.json").write_text("{not json")
    (tmp_path / "d.yml").write_text(SUPPORT_YAML.replace("revision: 1", "revision: 0"))
    (tmp_path / "notes.txt").write_text("ignored")
    with pytest.raises(ConfigError) as caught:
        load_definitions(tmp_path)
    found = {(Path(d.file).name, d.code) for d in caught.value.diagnostics}
    assert found == {
        ("b.yaml", ErrorCode.DUPLICATE_DEFINITION),
        ("c.json", ErrorCode.PARSE_ERROR),
        ("d.yml", ErrorCode.INVALID_REVISION),
    }


def test_directory_loader_leaves_conversation_test_files_alone(tmp_path: Path) -> None:
    (tmp_path / "support.yaml").write_text(SUPPORT_YAML)
    (tmp_path / "support.test.yaml").write_text("definition: support\ncases: []\n")
    (tmp_path / "other.test.json").write_text("{not a definition")
    assert list(load_definitions(tmp_path)) == ["support"]
    assert not is_definition_file(tmp_path / "support.test.yaml")
    assert is_definition_file(tmp_path / "support.yaml")


def test_missing_directory_is_a_read_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_definitions(tmp_path / "absent")
    assert codes(caught) == [ErrorCode.READ_ERROR]


@pytest.mark.parametrize(
    ("name", "content", "code"),
    [
        ("chat.toml", "id = 1", ErrorCode.UNSUPPORTED_FORMAT),
        ("chat.yaml", "id: [unclosed", ErrorCode.PARSE_ERROR),
        ("chat.yaml", "id: a\nid: b\n", ErrorCode.DUPLICATE_KEY),
        ("chat.json", '{"id": "a", "id": "b"}', ErrorCode.DUPLICATE_KEY),
    ],
)
def test_file_level_errors(tmp_path: Path, name: str, content: str, code: ErrorCode) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_definition(path)
    assert codes(caught) == [code]
    assert caught.value.diagnostics[0].file == str(path)


def test_unreadable_file_is_a_read_error(tmp_path: Path) -> None:
    path = tmp_path / "chat.yaml"
    path.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(ConfigError) as caught:
        load_definition(path)
    assert codes(caught) == [ErrorCode.READ_ERROR]


def test_parse_error_names_file_and_position(tmp_path: Path) -> None:
    path = tmp_path / "chat.yaml"
    path.write_text("id: support\nrevision: [1\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_definition(path)
    assert "line" in caught.value.diagnostics[0].message


def test_yaml_error_path_points_into_the_file(tmp_path: Path) -> None:
    path = tmp_path / "chat.yaml"
    path.write_text(SUPPORT_YAML.replace("states: [collecting]", "states: [collecting, done]"))
    with pytest.raises(ConfigError) as caught:
        load_definition(path)
    (diagnostic,) = caught.value.diagnostics
    assert (diagnostic.file, diagnostic.path) == (str(path), "conversation.routes[1].states[1]")
    assert diagnostic.code is ErrorCode.UNKNOWN_ROUTE_STATE


# The published JSON Schema.


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    schema = definition_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert SCHEMA_PATH.name == "chat-definition.schema.json"


@pytest.mark.parametrize(
    "path",
    sorted(p for p in EXAMPLES.glob("*.yaml") if is_definition_file(p)),
    ids=lambda p: p.name,
)
def test_examples_satisfy_the_schema(path: Path) -> None:
    data = yaml.load(path.read_text(), Loader=yaml.BaseLoader)  # strings only, as YAML 1.2 keys
    data["revision"] = int(data["revision"])
    jsonschema.validate(data, definition_schema())


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.update(revision=0),
        lambda d: d.update(extra=1),
        lambda d: d["conversation"]["routes"][0].update(exact="/start"),
        lambda d: d["conversation"]["routes"][0].update(kind="agentic"),
        lambda d: d["conversation"]["routes"][0].update(id="bad id"),
    ],
    ids=["revision", "unknown-key", "two-matchers", "kind", "route-id"],
)
def test_schema_rejects_what_the_loader_rejects(change: object) -> None:
    data = yaml.load(SUPPORT_YAML, Loader=yaml.BaseLoader)
    data["revision"] = int(data["revision"])
    change(data)  # type: ignore[operator]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, definition_schema())


def test_a_file_definition_carries_a_document_that_rebuilds_it_elsewhere() -> None:
    for path in sorted(EXAMPLES.glob("*.yaml")):
        if path.stem.endswith(".test"):
            continue
        definition = load_definition(path)
        assert definition.document is not None, path
        rebuilt = definition_of_document(definition.document, source="<published>")
        assert rebuilt.source == "<published>"
        assert replace(rebuilt, source=definition.source) == definition  # the same chat
        assert rebuilt.document == definition.document


def test_a_value_json_cannot_carry_leaves_the_definition_unpublished() -> None:
    assert canonical_document({"when": datetime.date(2024, 1, 17)}) is None
    assert canonical_document({1: "a"}) is None  # the key would come back as "1"
    assert canonical_document({"b": [1, 2.5, None, True], "a": "é"}) == (
        '{"a":"é","b":[1,2.5,null,true]}'
    )


def test_a_damaged_document_is_a_parse_error_naming_its_source() -> None:
    with pytest.raises(ConfigError) as damaged:
        definition_of_document("{not json", source="<published shop revision 2>")
    assert codes(damaged) == [ErrorCode.PARSE_ERROR]
    assert damaged.value.diagnostics[0].file == "<published shop revision 2>"
    with pytest.raises(ConfigError) as twice:
        definition_of_document('{"id": "a", "id": "b"}', source="<published>")
    assert codes(twice) == [ErrorCode.PARSE_ERROR]
