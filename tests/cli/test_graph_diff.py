"""`agentskit-chat graph --revisions OLD,NEW` and `--compare OLD NEW`: what changes between
two revisions, in DOT that Graphviz renders."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.cli.fixtures.serving import run_cli
from tests.cli.fixtures.tools import debian_tool
from tests.scenarios.revisions import NEW, OLD, write_both

ADDED, REMOVED, RENAMED = "#1a7f37", "#cf222e", "#0969da"
SHRUNK = """\
id: support
revision: 3
conversation:
  initial: collecting
  states:
    collecting: {on: {finish: done}, actions: [help]}
    done: {actions: [restart]}
  routes:
    - {id: name, pattern: '^/name (?P<name>\\S.*)$', event: finish, response: "Hi {name}."}
"""


@pytest.fixture(scope="module")
def dot_binary() -> str:
    return debian_tool("dot", "graphviz")


def render(dot_text: str, dot_binary: str) -> set[str]:
    """The titles of what Graphviz drew (nodes and edges), failing on any complaint."""
    rendered = subprocess.run(
        [dot_binary, "-Tsvg"], input=dot_text, capture_output=True, text=True, check=False
    )
    assert (rendered.returncode, rendered.stderr) == (0, "")
    return set(re.findall(r"<title>(.*?)</title>", rendered.stdout))


def test_a_migration_s_renames_are_blue_with_the_state_map_as_a_dashed_edge(
    tmp_path: Path, dot_binary: str
) -> None:
    write_both(tmp_path)
    done = run_cli("graph", str(tmp_path), "--revisions", "1,2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == 'digraph "support 1 to 2" {'
    assert (
        '  "new:done" [label=<<B>done</B><BR/><FONT POINT-SIZE="10">was complete</FONT>'
        f'<BR/><FONT POINT-SIZE="10">actions: restart</FONT>>, color="{RENAMED}", '
        f'fontcolor="{RENAMED}"];'
    ) in lines
    assert (
        '  "old:complete" -> "new:done" [label="migrates", style=dashed, '
        f'color="{RENAMED}", fontcolor="{RENAMED}", arrowhead=empty];'
    ) in lines
    assert (
        '  "new:collecting" -> "new:done" '
        f'[label=<finish (<FONT COLOR="{RENAMED}">finish→name</FONT>)>];'
    ) in lines
    assert '  "new:idle" -> "new:collecting" [label=<start (start)>];' in lines
    titles = render(done.stdout, dot_binary)
    assert {"old:complete&#45;&gt;new:done", "new:done&#45;&gt;new:idle"} <= titles


def test_added_parts_are_green_and_bold(tmp_path: Path) -> None:
    write_both(tmp_path)
    lines = run_cli("graph", str(tmp_path), "--revisions", "1,2").stdout.splitlines()
    assert (
        '  "new:collecting" -> "new:idle" [label=<<FONT COLOR="#1a7f37">cancel '
        f'(<FONT COLOR="{ADDED}">+cancel</FONT>)</FONT>>, color="{ADDED}", penwidth=2];'
    ) in lines


def test_removed_parts_are_red_and_dashed_between_the_states_that_remain(
    tmp_path: Path, dot_binary: str
) -> None:
    old, new = tmp_path / "support-2.yaml", tmp_path / "support-3.yaml"
    old.write_text(NEW, encoding="utf-8")
    new.write_text(SHRUNK, encoding="utf-8")
    done = run_cli("graph", "--compare", str(old), str(new))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert (
        '  "new:collecting" [label=<<B>collecting</B><BR/><FONT POINT-SIZE="10">actions: '
        f'<FONT COLOR="{ADDED}">+help</FONT>, <FONT COLOR="{REMOVED}">-cancel</FONT></FONT>>];'
    ) in lines
    assert (
        '  "old:idle" [label=<<B>idle</B><BR/><FONT POINT-SIZE="10">actions: '
        f'<FONT COLOR="{REMOVED}">-start</FONT></FONT>>, style="rounded,dashed", '
        f'color="{REMOVED}", fontcolor="{REMOVED}"];'
    ) in lines
    assert f'  "__start" -> "old:idle" [style=dashed, color="{REMOVED}"];' in lines
    assert (
        f'  "new:done" -> "old:idle" [label=<<FONT COLOR="{REMOVED}">restart '
        f'(<FONT COLOR="{REMOVED}">-restart</FONT>)</FONT>>, style=dashed, color="{REMOVED}"];'
    ) in lines
    assert "no migration declared" in lines[4]
    assert "new:done&#45;&gt;old:idle" in render(done.stdout, dot_binary)


def test_a_directory_of_revisions_draws_the_newest_or_the_one_asked_for(tmp_path: Path) -> None:
    write_both(tmp_path)
    newest = run_cli("graph", str(tmp_path))
    assert newest.returncode == 0, newest.stderr
    assert "    done --> idle: restart (restart)" in newest.stdout.splitlines()
    first = run_cli("graph", str(tmp_path), "--revision", "1")
    assert "    collecting --> complete: finish (finish)" in first.stdout.splitlines()
    missing = run_cli("graph", str(tmp_path), "--revision", "7")
    assert missing.returncode == 2
    assert "support has no revision 7 (revisions: 1, 2)" in missing.stderr


def test_a_difference_is_drawn_in_dot_only_and_needs_both_sides(tmp_path: Path) -> None:
    write_both(tmp_path)
    mermaid = run_cli("graph", str(tmp_path), "--revisions", "1,2", "--format", "mermaid")
    assert mermaid.returncode == 2
    assert "drawn in DOT only" in mermaid.stderr
    (tmp_path / "old.yaml").write_text(OLD, encoding="utf-8")
    both = run_cli("graph", str(tmp_path), "--compare", str(tmp_path / "old.yaml"), "x.yaml")
    assert both.returncode == 2
    assert "give PATH, or --compare OLD NEW instead" in both.stderr
