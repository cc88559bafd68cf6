"""`agentskit-chat graph` as a real process: Mermaid by default, DOT that Graphviz renders,
and the documentation's diagrams kept in sync with the example definitions."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from agentskit_chat.conversation import is_definition_file
from tests.cli.fixtures.serving import EXAMPLES, REPO, run_cli
from tests.cli.fixtures.tools import debian_tool

EXAMPLE_IDS = sorted(p.stem for p in EXAMPLES.iterdir() if is_definition_file(p))
ODD_CHAT = """\
id: odd
revision: 1
conversation:
  initial: "waiting room"
  states:
    "waiting room": {on: {"go;now": "state"}, actions: ['say "hi"']}
    state: {on: {back: "waiting room"}}
  routes:
    - {id: go, command: /go, event: "go;now", response: Going.}
    - {id: back-only-here, exact: back, event: back, states: [state], response: Back.}
"""


@pytest.fixture(scope="module")
def dot_binary() -> str:
    return debian_tool("dot", "graphviz")


def test_mermaid_marks_the_initial_state_and_labels_events_with_their_routes() -> None:
    done = run_cli("graph", str(EXAMPLES / "support.yaml"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "stateDiagram-v2\n"
        "    [*] --> idle\n"
        "    idle --> collecting: start (start)\n"
        "    collecting --> complete: finish (finish)\n"
        "    idle : actions start\n"
        "    collecting : actions cancel\n"
        "    complete : actions restart\n"
    )


def test_routes_fire_only_where_their_state_restriction_allows(tmp_path: Path) -> None:
    path = tmp_path / "odd.yaml"
    path.write_text(ODD_CHAT, encoding="utf-8")
    done = run_cli("graph", str(path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "stateDiagram-v2",
        '    state "waiting room" as s0',
        '    state "state" as s1',
        "    [*] --> s0",
        "    s0 --> s1: go#59;now (go)",
        "    s1 --> s0: back (back-only-here)",
        "    s0 : actions say #34;hi#34;",
    ]


@pytest.mark.parametrize("definition", EXAMPLE_IDS)
def test_dot_output_renders_with_graphviz(definition: str, dot_binary: str) -> None:
    done = run_cli("graph", str(EXAMPLES), "--definition", definition, "--format", "dot")
    assert done.returncode == 0, done.stderr
    rendered = subprocess.run(
        [dot_binary, "-Tsvg"], input=done.stdout, capture_output=True, text=True, check=False
    )
    assert (rendered.returncode, rendered.stderr) == (0, "")
    titles = set(re.findall(r"<title>(.*?)</title>", rendered.stdout))
    assert {"__start", "__start&#45;&gt;" + _initial(definition)} <= titles


def test_odd_names_survive_dot_quoting(tmp_path: Path, dot_binary: str) -> None:
    path = tmp_path / "odd.yaml"
    path.write_text(ODD_CHAT.replace("id: odd", 'id: "odd.v2"'), encoding="utf-8")
    done = run_cli("graph", str(path), "--format", "dot")
    rendered = subprocess.run(
        [dot_binary, "-Tsvg"], input=done.stdout, capture_output=True, text=True, check=False
    )
    assert (rendered.returncode, rendered.stderr) == (0, "")
    assert "waiting room" in rendered.stdout
    assert "say &quot;hi&quot;" in rendered.stdout
    assert "go;now (go)" in rendered.stdout


def test_a_directory_needs_a_definition_id_and_errors_are_reported(tmp_path: Path) -> None:
    several = run_cli("graph", str(EXAMPLES))
    assert several.returncode == 2
    assert "choose one with --definition (definitions: orders, support)" in several.stderr
    unknown = run_cli("graph", str(EXAMPLES), "--definition", "nope")
    assert unknown.returncode == 2
    assert "no definition has this id" in unknown.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("id: x\nrevision: 1\nconversation: {initial: a, states: {}}\n")
    failed = run_cli("graph", str(broken))
    assert failed.returncode == 1
    assert "broken.yaml" in failed.stderr
    assert failed.stdout == ""


@pytest.mark.parametrize("definition", EXAMPLE_IDS)
def test_the_docs_embed_the_current_diagram_of_each_example(definition: str) -> None:
    done = run_cli("graph", "examples/definitions", "--definition", definition)
    assert done.returncode == 0, done.stderr
    marker = f"<!-- agentskit-chat graph examples/definitions --definition {definition} -->"
    page = (REPO / "docs" / "how-to" / "diagrams.md").read_text(encoding="utf-8")
    assert f"{marker}\n```mermaid\n{done.stdout}```\n" in page, (
        f"the docs' diagram of {definition} is stale; paste this under {marker}:\n{done.stdout}"
    )


def _initial(definition: str) -> str:
    text = (EXAMPLES / f"{definition}.yaml").read_text(encoding="utf-8")
    found = re.search(r"^  initial: (\S+)$", text, re.M)
    assert found is not None
    return found.group(1)
