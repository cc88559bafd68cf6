"""`OLD,NEW`: the two revisions `test --revisions` and `graph --revisions` compare."""

from __future__ import annotations

import argparse


def revision_pair(text: str) -> tuple[int, int]:
    """`OLD,NEW` as two revision numbers (argparse type)."""
    parts = text.split(",")
    try:
        old, new = (int(part) for part in parts)
    except ValueError:
        raise argparse.ArgumentTypeError("expected two revisions, e.g. 1,2") from None
    if old == new:
        raise argparse.ArgumentTypeError("the two revisions must differ")
    return old, new
