"""The LangGraph server comparison's parts that need no LangGraph server: the graph it
serves, and the CPU of a process tree (the run itself needs build/langgraph-env, made by
`make bench-peer-server`, and is not part of the tests)."""

from __future__ import annotations

import os

from bench.langgraph_server.support_graph import graph, router
from bench.peer import router as in_process_router
from bench.server_peer import QUICK, tree_cpu_seconds


def test_the_servers_graph_answers_as_the_in_process_peer() -> None:
    for state, text in (("idle", "/start"), ("collecting", "/name Ada"), ("idle", "/name Ada")):
        chat = {"state": state, "input": text}
        assert router(chat) == in_process_router(chat)  # type: ignore[arg-type]


def test_the_servers_graph_runs_the_conversation() -> None:
    first = graph.invoke({"input": "/start"})
    assert (first["state"], first["answer"]) == ("collecting", "What is your name?")
    second = graph.invoke({**first, "input": "/name Ada"})
    assert (second["state"], second["answer"]) == ("complete", "Welcome, Ada.")


def test_tree_cpu_counts_this_process() -> None:
    used = tree_cpu_seconds(os.getpid())
    assert used is not None
    assert used > 0
    assert tree_cpu_seconds(-1) is None


def test_quick_runs_one_and_sixteen_clients() -> None:
    assert QUICK.clients == (1, 16)
    assert QUICK.conversations(1) == QUICK.single
    assert QUICK.conversations(16) == 16 * QUICK.per_client
