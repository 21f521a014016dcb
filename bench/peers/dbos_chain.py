"""A chain of N steps as one DBOS workflow, each step recorded durably in
DBOS's SQLite system database (synchronous=FULL). Arguments: N DB [WORK]
as for langgraph_chain.py. Prints one JSON line like it."""
import json
import sqlite3
import sys
import time

from dbos import DBOS

import work

DO = work.parse(sys.argv[3] if len(sys.argv) > 3 else "noop")


@DBOS.step()
def one_step(i: int) -> int:
    DO(i)
    return i + 1


@DBOS.workflow()
def chain(n: int) -> int:
    step = 0
    for _ in range(n):
        step = one_step(step)
    return step


def main() -> None:
    n, db = int(sys.argv[1]), sys.argv[2]
    DBOS(config={"name": "wfhost-peer-bench", "system_database_url": f"sqlite:///{db}"})
    DBOS.launch()
    t = time.perf_counter()
    result = chain(n)
    seconds = time.perf_counter() - t
    assert result == n, result
    DBOS.destroy()
    conn = sqlite3.connect(db)
    journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    print(json.dumps({"peer": "dbos", "steps": n, "seconds": seconds,
                      "journal_mode": journal,
                      "synchronous": "FULL (SQLite's default; DBOS does not change it)"}))


if __name__ == "__main__":
    main()
