"""The PostgreSQL store's connection helpers, against a real server."""

from __future__ import annotations

import pytest

from agentskit_chat.storage._postgresql_pool import bytea_array, text_array
from tests.postgres import Cluster

AWKWARD = ['a "quoted" one', "back\\slash\\", "{braces},comma", "NULL", " padded ", "ünï ✓", ""]


@pytest.mark.parametrize("values", [AWKWARD, [], ["plain"]])
def test_a_text_array_literal_reads_back_as_its_values(
    postgres: Cluster, values: list[str]
) -> None:
    with postgres.connect() as connection:
        row = connection.execute("SELECT %s::text[]", (text_array(values),)).fetchone()
    assert row == (values,)


@pytest.mark.parametrize("values", [[b"\x00\xff nul", "ünï ✓".encode(), b""], []])
def test_a_bytea_array_literal_reads_back_as_its_values(
    postgres: Cluster, values: list[bytes]
) -> None:
    with postgres.connect() as connection:
        row = connection.execute("SELECT %s::bytea[]", (bytea_array(values),)).fetchone()
    assert row == (values,)
