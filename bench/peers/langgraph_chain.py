"""A chain of N steps in LangGraph, each checkpointed durably by
SqliteSaver (SQLite, synchronous=FULL). Arguments: N DB [WORK], WORK
`noop` (the default) or `fibo:K` (see work.py). Prints one JSON line:
{"peer", "steps", "seconds" (the steps only, imports excluded),
"journal_mode", "synchronous"}."""
import json
import sqlite3
import sys
import time
from typing import TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

import work


class State(TypedDict):
    step: int
    value: int


def step_of(do):
    def step(state: State) -> State:
        value = do(state["step"])
        return {"step": state["step"] + 1} if value is None else {"step": state["step"] + 1, "value": value}
    return step


def main() -> None:
    n, db = int(sys.argv[1]), sys.argv[2]
    step = step_of(work.parse(sys.argv[3] if len(sys.argv) > 3 else "noop"))
    graph = StateGraph(State)
    for i in range(n):
        graph.add_node(f"b{i}", step)
        graph.add_edge(START if i == 0 else f"b{i - 1}", f"b{i}")
    graph.add_edge(f"b{n - 1}", END)
    conn = sqlite3.connect(db, check_same_thread=False)
    conn.execute("PRAGMA synchronous=FULL")
    saver = SqliteSaver(conn)
    app = graph.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "bench"}, "recursion_limit": n + 10}
    t = time.perf_counter()
    out = app.invoke({"step": 0, "value": 0}, config)
    seconds = time.perf_counter() - t
    assert out["step"] == n, out
    journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[conn.execute("PRAGMA synchronous").fetchone()[0]]
    print(json.dumps({"peer": "langgraph", "steps": n, "seconds": seconds,
                      "journal_mode": journal, "synchronous": sync}))


if __name__ == "__main__":
    main()
