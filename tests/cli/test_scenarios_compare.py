"""`agentskit-chat test --revisions OLD,NEW` and `--compare OLD NEW` as a real process: the
turns that change are listed, and the exit status reads like diff's."""

from __future__ import annotations

from pathlib import Path

from tests.cli.fixtures.serving import EXAMPLES, run_cli
from tests.scenarios.revisions import NEW, OLD, TESTS, write_both

CHANGED_TURN = [
    "  CHANGED  cancel while collecting",
    "           step 2 of 2: submit '/cancel'",
    "             kind   agentic -> deterministic",
    "             route  none -> cancel",
    "             state  collecting -> idle",
]


def test_revisions_served_side_by_side_list_each_changed_turn_and_exit_1(tmp_path: Path) -> None:
    write_both(tmp_path)
    done = run_cli("test", str(tmp_path), "--revisions", "1,2")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["comparing revision 1 -> revision 2", f"{tmp_path}/support.test.yaml"]
    assert "             route  finish -> name  (renamed by the migration)" in lines
    assert lines[-6:] == [*CHANGED_TURN, "2 same (1 renamed by the migration), 1 changed (1 turn)"]


def test_two_files_compare_the_same_way(tmp_path: Path) -> None:
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(OLD, encoding="utf-8")
    new.write_text(NEW, encoding="utf-8")
    tests = tmp_path / "support.test.yaml"
    tests.write_text(TESTS, encoding="utf-8")
    done = run_cli("test", str(tests), "--compare", str(old), str(new))
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == f"comparing {old} -> {new}"
    assert done.stdout.splitlines()[-6:-1] == CHANGED_TURN


def test_nothing_changed_exits_0(tmp_path: Path) -> None:
    write_both(tmp_path)
    tests = tmp_path / "support.test.yaml"
    tests.write_text(TESTS.split("  - name: cancel")[0], encoding="utf-8")
    done = run_cli("test", str(tests), "--revisions", "1,2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        done.stdout.splitlines()[-1] == "2 same (1 renamed by the migration), 0 changed (0 turns)"
    )


def test_chats_without_both_revisions_are_skipped_and_nothing_compared_exits_2() -> None:
    done = run_cli("test", str(EXAMPLES / "coffee.test.yaml"), "--revisions", "1,2")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "  skip     " in done.stdout
    assert "the new side does not serve it" in done.stdout


def test_compare_modes_run_in_process_only(tmp_path: Path) -> None:
    write_both(tmp_path)
    done = run_cli("test", str(tmp_path), "--revisions", "1,2", "--target", "127.0.0.1:1")
    assert done.returncode == 2
    assert "without --target or --junit" in done.stderr
    bad = run_cli("test", str(tmp_path), "--revisions", "2,2")
    assert bad.returncode == 2
    assert "the two revisions must differ" in bad.stderr
