#!/usr/bin/env python3
"""Many sleeping runs on one `wfhost serve`: how late the timers fire.

Starts `wfhost serve` on a free loopback port with a fresh home, starts
RUNS runs of `sleep FOR` then one echo block over `POST /v1/runs` at once
(each in a workspace of its own), waits until every one has succeeded,
and reports, from each run's own log, how late its sleep block woke after
its recorded due time (the `timer_started` event's `due_at_ms` against the
`at` of the block's `block_completed`), the wall time from the first
start to the last success, and the peak memory of the server and every
process under it (sampled).

    bench/timers/sleepers.py WFHOST [--runs 100] [--for 10s]

The issue's bar: 500 runs sleeping 10 s all finish by 10.1 s after they
started sleeping (lateness p100 <= 100 ms). Python 3 standard library only.
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def workflow(wait: str) -> dict:
    return {"id": "sleeper", "version": "1.0.0", "start_node": "main",
            "nodes": {"main": {"entry_block": "nap", "blocks": {
                "nap": {"worker": "sleep", "config": {"for": wait},
                        "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:done"}]},
                "done": {"worker": "echo",
                         "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]}}}}}


def call(base: str, method: str, path: str, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def rss_kib(root: int) -> int:
    """RSS of `root` and every process below it, KiB."""
    children = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(pid))
        except (OSError, IndexError, ValueError):
            pass
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("wfhost")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--for", dest="wait", default="10s")
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="wfhost-sleepers-")
    env = dict(os.environ, WFHOST_HOME=os.path.join(scratch, "home"),
               WFHOST_CACHE_DIR=os.path.join(scratch, "cache"))
    port = free_port()
    server = subprocess.Popen([args.wfhost, "serve", "--listen", f"127.0.0.1:{port}"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    server.stdout.readline()
    base = f"http://127.0.0.1:{port}/v1"
    peak = [0]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], rss_kib(server.pid))
            time.sleep(0.2)

    threading.Thread(target=sample, daemon=True).start()
    try:
        wf = workflow(args.wait)
        started = time.time()
        ids = []
        for i in range(args.runs):
            ws = os.path.join(scratch, f"ws{i}")
            os.makedirs(ws)
            ids.append(call(base, "POST", "/runs", {"manifest": wf, "workspace": ws})["run_id"])
        all_started = time.time()
        pending = set(ids)
        while pending:
            for run in list(pending):
                status = call(base, "GET", f"/runs/{run}/summary")["status"]
                if status == "succeeded":
                    pending.discard(run)
                elif status in ("failed", "cancelled"):
                    print(f"run {run} {status}", file=sys.stderr)
                    return 1
            time.sleep(0.05)
        finished = time.time()
        late, slept_from = [], []
        for run in ids:
            events = call(base, "GET", f"/runs/{run}/events?limit=1000")["events"]
            due = next(e["event"]["due_at_ms"] for e in events if e["event"]["type"] == "timer_started")
            armed = next(e["at"] for e in events if e["event"]["type"] == "timer_started")
            woke = next(e["at"] for e in events if e["event"]["type"] == "block_completed"
                        and e["event"]["block"] == "nap")
            late.append(woke - due)
            slept_from.append(armed)
        late.sort()
        pct = lambda p: late[min(len(late) - 1, int(p * len(late)))]
        print(json.dumps({
            "runs": args.runs, "sleep": args.wait,
            "start_requests_s": round(all_started - started, 2),
            "first_start_to_last_success_s": round(finished - started, 2),
            "lateness_ms": {"p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "max": late[-1]},
            "last_sleep_start_after_first_s": round((max(slept_from) - min(slept_from)) / 1000, 2),
            "peak_rss_mib": round(peak[0] / 1024, 1),
        }, indent=2))
        return 0
    finally:
        stop.set()
        os.killpg(server.pid, signal.SIGTERM)
        server.wait()


if __name__ == "__main__":
    sys.exit(main())
