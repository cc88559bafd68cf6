"""The body fields every HTTP front checks alike: what each must be, and a refusal that
names the field but never repeats its value."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agentskit_chat.transport.web.boundary.fields import (
    an_object,
    optional_text,
    required_text,
    unicode_text,
)
from agentskit_chat.transport.web.boundary.fronts import FrontError
from tests.transport.conftest import CANARY


def test_a_value_of_the_right_kind_is_returned_as_it_is() -> None:
    assert an_object({"a": 1}, "f") == {"a": 1}
    assert required_text("x", "f") == "x"
    assert optional_text("x", "f") == "x"
    assert optional_text(None, "f") == ""
    assert unicode_text("f", "héllo ✓") == "héllo ✓"


@pytest.mark.parametrize(
    ("check", "value", "message"),
    [
        (an_object, [CANARY], "messages[2].x must be an object"),
        (required_text, "", "messages[2].x must be a non-empty string"),
        (required_text, [CANARY], "messages[2].x must be a non-empty string"),
        (optional_text, [CANARY], "messages[2].x must be a string"),
        (
            lambda value, field: unicode_text(field, value),
            f"{CANARY}\ud800",
            "messages[2].x must be Unicode text (no lone surrogates)",
        ),
    ],
)
def test_a_refusal_names_the_field_and_not_its_value(
    check: Callable[[object, str], object], value: object, message: str
) -> None:
    with pytest.raises(FrontError) as caught:
        check(value, "messages[2].x")
    error = caught.value
    assert (error.status, error.code, error.field, error.message) == (
        400,
        "invalid_argument",
        "messages[2].x",
        message,
    )
