"""Turn a validated draft into an immutable, compiled ChatDefinition."""

from __future__ import annotations

from collections.abc import Iterable

from ._definition import ChatDefinition, compile_conversation, freeze
from ._errors import ConfigError, Diagnostic
from ._statechart import compile_statechart
from ._validation import Draft, diagnostics_for


def build_definition(
    draft: Draft,
    *,
    file: str,
    description: str = "",
    earlier: Iterable[Diagnostic] = (),
    suppressed: frozenset[str] = frozenset(),
) -> ChatDefinition:
    """Validate and compile `draft`; raises ConfigError listing every problem found."""
    found = [*earlier, *diagnostics_for(draft, file, suppressed)]
    if found:
        raise ConfigError(found)
    spec = draft.conversation
    chart = compile_statechart(spec.initial, {name: s.on for name, s in spec.states.items()})
    return ChatDefinition(
        id=draft.id,
        revision=draft.revision,
        conversation=spec,
        compiled=compile_conversation(spec, chart),
        model=freeze(draft.model),
        description=description,
        source=file,
    )
