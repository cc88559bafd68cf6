"""Reading conversation test files: every problem is reported with its path; the schema agrees."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from agentskit_chat.scenarios import (
    TEST_SCHEMA_PATH,
    TestFileError,
    find_test_files,
    load_test_file,
    load_test_schema,
    parse_test_file,
)
from tests.cli.fixtures.serving import EXAMPLES

EXAMPLE_TESTS = sorted(EXAMPLES.glob("*.test.yaml"))


def valid() -> dict[str, Any]:
    return {
        "definition": "support",
        "cases": [
            {
                "name": "one",
                "steps": [
                    {"submit": "/start", "expect": {"kind": "deterministic", "route": "start"}},
                    {"retry": None, "expect": {"replayed": True}},
                    {"edit": {"message": 1, "text": "hi"}, "model": "Hello."},
                    {"regenerate": {"message": 1}},
                    {"truncate": {"keep": 0}, "expect": {"state": "idle", "actions": ["start"]}},
                ],
            }
        ],
    }


def test_a_valid_file_reads_into_cases_and_steps() -> None:
    parsed = parse_test_file(valid(), file="t.test.yaml")
    (case,) = parsed.cases
    assert case.definition == "support"
    assert [s.operation for s in case.steps] == [
        "submit",
        "retry",
        "edit",
        "regenerate",
        "truncate",
    ]
    assert case.steps[2].text == "hi"
    assert case.steps[2].message == 1
    assert case.steps[2].model == "Hello."
    assert case.steps[4].expect == {"state": "idle", "actions": ("start",)}
    assert case.steps[0].title == "submit '/start'"
    assert case.steps[4].title == "truncate keep 0"


BROKEN = [
    ("unknown-key", lambda d: d.update(extra=1), "extra"),
    ("no-cases", lambda d: d.update(cases=[]), "cases"),
    ("no-definition", lambda d: d.pop("definition"), "cases[0].definition"),
    ("two-ops", lambda d: d["cases"][0]["steps"][0].update(retry=None), "cases[0].steps[0]"),
    ("no-op", lambda d: d["cases"][0]["steps"][0].pop("submit"), "cases[0].steps[0]"),
    (
        "kind",
        lambda d: d["cases"][0]["steps"][0]["expect"].update(kind="smart"),
        "cases[0].steps[0].expect.kind",
    ),
    (
        "expect-key",
        lambda d: d["cases"][0]["steps"][0]["expect"].update(mood="ok"),
        "cases[0].steps[0].expect.mood",
    ),
    (
        "position",
        lambda d: d["cases"][0]["steps"][2]["edit"].update(message=0),
        "cases[0].steps[2].edit.message",
    ),
    (
        "edit-text",
        lambda d: d["cases"][0]["steps"][2]["edit"].pop("text"),
        "cases[0].steps[2].edit.text",
    ),
    (
        "keep",
        lambda d: d["cases"][0]["steps"][4].update(truncate={"keep": -1}),
        "cases[0].steps[4].truncate.keep",
    ),
    (
        "actions",
        lambda d: d["cases"][0]["steps"][0]["expect"].update(actions="start"),
        "cases[0].steps[0].expect.actions",
    ),
    (
        "empty-submit",
        lambda d: d["cases"][0]["steps"][0].update(submit=""),
        "cases[0].steps[0].submit",
    ),
    ("no-name", lambda d: d["cases"][0].pop("name"), "cases[0].name"),
]


@pytest.mark.parametrize(
    ("change", "path"), [(c, p) for _, c, p in BROKEN], ids=[i for i, _, _ in BROKEN]
)
def test_each_problem_names_its_path_and_the_schema_rejects_it_too(change: Any, path: str) -> None:
    data = valid()
    change(data)
    with pytest.raises(TestFileError) as caught:
        parse_test_file(data, file="t.test.yaml")
    assert path in [p.path for p in caught.value.problems]
    assert all(str(p).startswith("t.test.yaml: ") for p in caught.value.problems)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, load_test_schema())


def test_checks_the_schema_cannot_express_are_still_made() -> None:
    twice = valid()
    twice["cases"].append(copy.deepcopy(twice["cases"][0]))
    mixed = valid()
    mixed["cases"][0]["steps"][0]["expect"] = {"error": "INVALID_ARGUMENT", "state": "idle"}
    pattern = valid()
    pattern["cases"][0]["steps"][0]["expect"]["text_matches"] = "("
    for data, paths in (
        (twice, {"cases[0].name", "cases[1].name"}),
        (mixed, {"cases[0].steps[0].expect"}),
        (pattern, {"cases[0].steps[0].expect.text_matches"}),
    ):
        with pytest.raises(TestFileError) as caught:
            parse_test_file(data)
        assert {p.path for p in caught.value.problems} == paths


def test_every_problem_of_a_file_is_listed_at_once() -> None:
    data = valid()
    data["cases"][0]["steps"][0]["expect"]["kind"] = "smart"
    data["cases"][0]["steps"][4]["truncate"] = {}
    with pytest.raises(TestFileError) as caught:
        parse_test_file(data)
    assert len(caught.value.problems) == 2
    assert str(caught.value).startswith("2 test file errors:")


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    broken = tmp_path / "a.test.yaml"
    broken.write_text("cases: [\n", encoding="utf-8")
    twice = tmp_path / "b.test.yaml"
    twice.write_text("definition: a\ndefinition: b\ncases: []\n", encoding="utf-8")
    for path, words in (
        (broken, "not valid YAML"),
        (twice, "duplicate key"),
        (tmp_path / "absent.test.yaml", "cannot read"),
    ):
        with pytest.raises(TestFileError) as caught:
            load_test_file(path)
        assert words in str(caught.value)


def test_directories_are_searched_for_test_files_only(tmp_path: Path) -> None:
    (tmp_path / "nested").mkdir()
    for name in ("a.test.yaml", "nested/b.test.yml", "c.yaml", "d.test.json", "e.txt"):
        (tmp_path / name).write_text("{}")
    found = find_test_files([tmp_path])
    assert [p.relative_to(tmp_path).as_posix() for p in found] == [
        "a.test.yaml",
        "d.test.json",
        "nested/b.test.yml",
    ]


def test_the_schema_is_published_beside_the_definitions_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(load_test_schema())
    assert TEST_SCHEMA_PATH.name == "chat-test.schema.json"
    assert (TEST_SCHEMA_PATH.parent / "chat-definition.schema.json").is_file()


def test_every_definition_ships_with_a_test_file_that_names_the_schema() -> None:
    definitions = {p.name.removesuffix(".yaml") for p in EXAMPLES.glob("*.yaml")} - {
        p.name.removesuffix(".yaml") for p in EXAMPLE_TESTS
    }
    assert {p.name for p in EXAMPLE_TESTS} == {f"{name}.test.yaml" for name in definitions}
    for path in EXAMPLE_TESTS:
        first = path.read_text(encoding="utf-8").splitlines()[0]
        assert first == (
            "# yaml-language-server: "
            "$schema=../../server/agentskit_chat/conversation/chat-test.schema.json"
        )


@pytest.mark.parametrize("path", EXAMPLE_TESTS, ids=lambda p: p.name)
def test_example_test_files_satisfy_the_schema_and_the_reader(path: Path) -> None:
    jsonschema.validate(yaml.safe_load(path.read_text(encoding="utf-8")), load_test_schema())
    assert load_test_file(path).cases
