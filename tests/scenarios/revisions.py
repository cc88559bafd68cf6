"""Two revisions of the support chat: the second renames a state and a route (declared by
its migration), adds a cancel and a restart, and drops nothing."""

from __future__ import annotations

from pathlib import Path

from agentskit_chat.conversation import ChatDefinition, load_yaml, parse_definition

OLD = """\
id: support
revision: 1
model: {adapter: offline}
conversation:
  initial: idle
  states:
    idle: {on: {start: collecting}, actions: [start]}
    collecting: {on: {finish: complete}, actions: [cancel]}
    complete: {actions: [restart]}
  routes:
    - {id: start, command: /start, event: start, response: "What is your name?"}
    - id: finish
      pattern: '^/name (?P<name>\\S.*)$'
      event: finish
      states: [collecting]
      response: "Welcome, {name}."
"""

NEW = """\
id: support
revision: 2
model: {adapter: offline}
migrations:
  - from: 1
    states: {complete: done}
    routes: {finish: name}
conversation:
  initial: idle
  states:
    idle: {on: {start: collecting}, actions: [start]}
    collecting: {on: {finish: done, cancel: idle}, actions: [cancel]}
    done: {on: {restart: idle}, actions: [restart]}
  routes:
    - {id: start, command: /start, event: start, response: "What is your name?"}
    - id: name
      pattern: '^/name (?P<name>\\S.*)$'
      event: finish
      states: [collecting]
      response: "Welcome, {name}."
    - {id: cancel, command: /cancel, event: cancel, response: "Cancelled."}
    - {id: restart, command: /restart, event: restart, response: "Again."}
"""

TESTS = """\
definition: support
cases:
  - name: collects a name
    steps:
      - submit: /start
        expect: {route: start, state: collecting}
      - submit: /name Ada
        expect: {route: finish, state: complete}
  - name: anything else goes to the model
    steps:
      - submit: Tell me a joke
        expect: {kind: agentic, state: idle}
  - name: cancel while collecting
    steps:
      - submit: /start
      - submit: /cancel
        expect: {kind: agentic, state: collecting}
"""


def definition(text: str) -> ChatDefinition:
    """The chat of a YAML text."""
    return parse_definition(load_yaml(text), file="support.yaml")


def write_both(directory: Path) -> None:
    """Both revisions side by side in `directory`, with the tests."""
    (directory / "support.yaml").write_text(OLD, encoding="utf-8")
    (directory / "support-2.yaml").write_text(NEW, encoding="utf-8")
    (directory / "support.test.yaml").write_text(TESTS, encoding="utf-8")
