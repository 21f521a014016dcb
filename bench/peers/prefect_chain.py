"""A chain of N steps as Prefect tasks called in series in one flow.
Prefect records every flow and task run state in its API server's
database: here the ephemeral server Prefect starts by itself, on SQLite
at DB (a scratch PREFECT_HOME next to it). Arguments: N DB [WORK] as for
langgraph_chain.py. A one-task flow runs first so that the server's start
is not counted in "seconds" (it is in the whole process). Prints one JSON
line like langgraph_chain.py."""
import json
import os
import sqlite3
import sys
import time

N, DB = int(sys.argv[1]), os.path.abspath(sys.argv[2])
os.environ["PREFECT_HOME"] = os.path.join(os.path.dirname(DB), "prefect-home")
os.environ["PREFECT_API_DATABASE_CONNECTION_URL"] = f"sqlite+aiosqlite:///{DB}"
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.pop("PREFECT_API_URL", None)

from prefect import flow, task  # noqa: E402

import work  # noqa: E402

DO = work.parse(sys.argv[3] if len(sys.argv) > 3 else "noop")


@task
def one_step(i: int) -> int:
    DO(i)
    return i + 1


@flow
def chain(n: int) -> int:
    step = 0
    for _ in range(n):
        step = one_step(step)
    return step


def main() -> None:
    assert chain(1) == 1  # starts the ephemeral server
    t = time.perf_counter()
    result = chain(N)
    seconds = time.perf_counter() - t
    assert result == N, result
    conn = sqlite3.connect(DB)
    journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    print(json.dumps({"peer": "prefect", "steps": N, "seconds": seconds,
                      "journal_mode": journal,
                      "synchronous": "NORMAL (set by Prefect's server)"}))


if __name__ == "__main__":
    main()
