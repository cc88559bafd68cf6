"""One live server for the whole corpus run: every language's runner talks to it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import LiveServer, live_server


@pytest.fixture(scope="session")
def conformance_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(Path(tmp_path_factory.mktemp("conformance"))) as server:
        yield server
