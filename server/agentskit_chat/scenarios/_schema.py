"""The published JSON Schema of conversation test files, beside the definitions' schema."""

from __future__ import annotations

import json
from typing import Any, Final

from agentskit_chat.conversation import SCHEMA_PATH

TEST_SCHEMA_PATH: Final = SCHEMA_PATH.with_name("chat-test.schema.json")


def load_test_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) that conversation test files follow."""
    schema: dict[str, Any] = json.loads(TEST_SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema
