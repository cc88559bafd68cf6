"""Response templates: fields, escaped braces, and nothing that evaluates code."""

from __future__ import annotations

import pytest

from agentskit_chat.conversation._template import TemplateSyntaxError, parse_template


def test_fields_render_and_braces_escape() -> None:
    template = parse_template("{{id}} {message_id}: Welcome, {name}!")
    assert template.fields == {"message_id", "name"}
    assert template.render({"message_id": "m1", "name": "Ada"}) == "{id} m1: Welcome, Ada!"


def test_literal_text_has_no_fields() -> None:
    template = parse_template("Plain }} text {{")
    assert template.literal == "Plain } text {"
    assert template.render({}) == "Plain } text {"


@pytest.mark.parametrize("source", ["{", "}", "{0}", "{a.b}", "{a[0]}", "{a!r}", "{a:>9}", "{}"])
def test_anything_but_a_plain_name_is_rejected(source: str) -> None:
    with pytest.raises(TemplateSyntaxError):
        parse_template(source)


def test_values_are_not_reinterpreted() -> None:
    assert parse_template("{a}").render({"a": "{b}"}) == "{b}"
