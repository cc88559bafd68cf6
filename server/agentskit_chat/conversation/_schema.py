"""The published JSON Schema of definition files, for editors and CI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

SCHEMA_PATH: Final = Path(__file__).with_name("chat-definition.schema.json")


def definition_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) that definition files follow."""
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema
