"""Fields of a front's JSON body, checked alike by every front: each refusal is a 400
naming the field, never its value.

A front names its own fields (`toolCallId` or `tool_call_id`) and decides which it
checks first; these only say what a field must be.
"""

from __future__ import annotations

from typing import Any

from .fronts import bad_request


def unicode_text(field: str, value: str) -> str:
    """`value` when it has a UTF-8 form; `bad_request` naming `field` otherwise. JSON can
    carry a lone surrogate (`"\\ud800"`), which no protobuf string or database column
    can hold."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise bad_request(field, f"{field} must be Unicode text (no lone surrogates)") from None
    return value


def an_object(value: object, field: str) -> dict[str, Any]:
    """`value` when it is a JSON object; `bad_request` naming `field` otherwise."""
    if not isinstance(value, dict):
        raise bad_request(field, f"{field} must be an object")
    return value


def required_text(value: object, field: str) -> str:
    """`value` when it is a non-empty string; `bad_request` naming `field` otherwise."""
    if not isinstance(value, str) or not value:
        raise bad_request(field, f"{field} must be a non-empty string")
    return value


def optional_text(value: object, field: str) -> str:
    """`value` when it is a string, empty when absent (None); `bad_request` naming `field`
    otherwise."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise bad_request(field, f"{field} must be a string")
    return value
