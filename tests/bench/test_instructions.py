"""Instruction counts: callgrind counts only the measured calls, its files are read by their
own column names, the in-process child runs its turns between two lines, and the rest is
serve's count beyond the echo's and the in-process turn's."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from bench import instructions
from bench._turns import ROOT


def test_the_totals_are_read_by_column_name_and_summed_over_files(tmp_path: Path) -> None:
    (tmp_path / "callgrind.7.1").write_text(
        "version: 1\nevents: Ir Dr\nsummary: 0\ntotals: 1000 12\nfn=x\n"
    )
    (tmp_path / "callgrind.7").write_text("events: Dr Ir\ntotals: 3 500\n")
    (tmp_path / "other.txt").write_text("events: Ir\ntotals: 99999\n")
    assert instructions.totals(tmp_path) == 1500


def test_the_rest_is_serves_count_beyond_the_echo_and_the_in_process_turn() -> None:
    data = {
        "turns": 10,
        "echo": {"instructions": 700.0},
        "stores": {
            "sqlite": {
                "serve": {"instructions": 3_000.0},
                "in_process": {"instructions": 1_800.0},
            }
        },
    }
    row = instructions.report(data)["stores"]["sqlite"]
    assert row["rest_instructions"] == pytest.approx(500.0)
    assert row["rest_share"] == pytest.approx(500.0 / 3_000.0)


def test_the_in_process_child_runs_its_turns_between_two_lines(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "bench.instructions", "--child", "memory", "--turns", "3"]
    with subprocess.Popen(
        [*argv, "--scratch", str(tmp_path)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdin is not None
        assert child.stdout is not None
        assert child.stdout.readline().strip() == instructions.READY
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == instructions.DONE
        child.stdin.write("end\n")
        child.stdin.close()
        assert child.wait(timeout=60) == 0


def test_callgrind_counts_the_echos_measured_calls_only(tmp_path: Path) -> None:
    few = asyncio.run(instructions.count_echo(2, tmp_path / "few"))
    more = asyncio.run(instructions.count_echo(8, tmp_path / "more"))
    assert few.instructions > 0
    # Per call, so the same whatever the number of calls: the start-up and the warm-up
    # calls, many times more instructions than a call, are not counted.
    assert more.instructions == pytest.approx(few.instructions, rel=0.5)
