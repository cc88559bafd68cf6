"""Route responses: a template (plain text is a template without fields) or a callable."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

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


RESULT_FIELD: Final = "result"
"""The placeholder of a tool route's response that the tool's result fills."""

RouteTools = Callable[[str, Mapping[str, str], RouteContext], Awaitable[str]]
"""Runs a declared server tool for a route: (tool name, arguments, route context) to the
tool's result text; raises RouteToolError when the tool fails or times out."""


class RouteToolError(Exception):
    """A route's tool failed: its route fails, and nothing is committed."""

    def __init__(self, error_type: str) -> None:
        super().__init__(f"the route's tool failed: {error_type}")
        self.error_type = error_type
        """What went wrong (`timeout`, `tool_error`, ...); never the tool's text."""


@dataclass(frozen=True, slots=True)
class ToolResponse(Response):
    """A declared server tool's result through a template: the tool runs with `arguments`
    (templates, as a response's), and `{result}` in `template` is the text it returned.

    Not derived from the input: the rendered text is recorded (sealed) with the decision,
    so a retry replays it without running the tool again.
    """

    tool: str
    arguments: Mapping[str, TemplateResponse] = field(default_factory=lambda: MappingProxyType({}))
    template: TemplateResponse = field(default_factory=lambda: TemplateResponse(""))

    def produce(self, text: str, context: RouteContext) -> str:
        raise RouteToolError("no_tools")  # The engine runs the tool (see `run_tool_route`).

    async def run(self, text: str, context: RouteContext, tools: RouteTools | None) -> str:
        """Call the tool through `tools` and render the template with its result."""
        if tools is None:
            raise RouteToolError("no_tools")
        arguments = {name: t.produce(text, context) for name, t in self.arguments.items()}
        result = await tools(self.tool, MappingProxyType(arguments), context)
        values = dict(context.groups)
        return self.template.produce(
            text,
            RouteContext(
                context.session_id,
                context.message_id,
                MappingProxyType({**values, RESULT_FIELD: result}),
            ),
        )


def to_response(response: ResponseLike) -> Response:
    """A template for text, a callable response for anything else."""
    if isinstance(response, str):
        return TemplateResponse(response)
    return CallableResponse(response)
