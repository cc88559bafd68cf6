"""Route responses: a template (plain text is a template without fields) or a callable."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field

from ._template import Template, TemplateSyntaxError, parse_template
from ._types import ResponseFn, RouteContext

ResponseLike = str | ResponseFn


class Response:
    """Base of responses."""

    def produce(self, text: str, context: RouteContext) -> str | Awaitable[str]:
        """The response for `text` in `context`."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class TemplateResponse(Response):
    """Text with `{message_id}`, `{session_id}` and named-group placeholders."""

    source: str
    template: Template | None = field(init=False, repr=False, compare=False)
    error: str | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            template: Template | None = parse_template(self.source)
            error = None
        except TemplateSyntaxError as exc:
            template, error = None, str(exc)
        object.__setattr__(self, "template", template)
        object.__setattr__(self, "error", error)

    def produce(self, text: str, context: RouteContext) -> str:
        template = self.template
        if template is None:
            raise TemplateSyntaxError(self.error or "invalid template")
        if template.literal is not None:
            return template.literal
        values = dict(context.groups)
        values["session_id"] = context.session_id
        values["message_id"] = context.message_id or ""
        return template.render(values)


@dataclass(frozen=True, slots=True)
class CallableResponse(Response):
    """Application code receiving `(input, context)`; sync or async."""

    function: ResponseFn

    def produce(self, text: str, context: RouteContext) -> str | Awaitable[str]:
        return self.function(text, context)


def to_response(response: ResponseLike) -> Response:
    """A template for text, a callable response for anything else."""
    if isinstance(response, str):
        return TemplateResponse(response)
    return CallableResponse(response)
