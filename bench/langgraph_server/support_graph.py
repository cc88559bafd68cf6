"""The support example's conversation as a LangGraph graph, for the LangGraph server
(`langgraph dev`, bench/server_peer.py).

The same graph as bench/peer.py's in-process peer: one deterministic router node that does
what `examples/definitions/support.yaml`'s two routes do (`/start` answers "What is your
name?" and moves idle -> collecting, `/name NAME` answers "Welcome, NAME." and moves to
complete) and keeps the message history in its state. The server checkpoints the thread's
state after every run, as `serve` keeps the session's record.

This module runs in the LangGraph server's own environment (build/langgraph-env), not in
the project's: it imports only LangGraph.
"""

from __future__ import annotations

import operator
import re
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph

NAME = re.compile(r"^/name (?P<name>\S.*)$")


class Chat(TypedDict, total=False):
    """The conversation state, checkpointed by the server after every run."""

    state: str
    input: str
    answer: str
    messages: Annotated[list[dict[str, str]], operator.add]


def router(chat: Chat) -> Chat:
    """The support definition's routes: `/start` in idle, `/name NAME` in collecting."""
    state, text = chat.get("state", "idle"), chat.get("input", "")
    answer, target = "I cannot help with that.", state
    if state == "idle" and text == "/start":
        answer, target = "What is your name?", "collecting"
    elif state == "collecting" and (found := NAME.match(text)) is not None:
        answer, target = f"Welcome, {found['name']}.", "complete"
    messages = [{"role": "user", "content": text}, {"role": "assistant", "content": answer}]
    return {"state": target, "answer": answer, "messages": messages}


def _build() -> Any:
    builder: Any = StateGraph(Chat)
    builder.add_node("router", router)
    builder.add_edge(START, "router")
    builder.add_edge("router", END)
    return builder.compile()  # the server brings its own checkpointer


graph = _build()
