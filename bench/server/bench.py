#!/usr/bin/env python3
"""The server path, whole process, beside `wfhost run`.

  bench/server/bench.py /path/to/wfhost [--runs 60] [--rounds 5] [--chain 100]

(a) a 3-block echo chain from `POST /v1/runs` to its end on the run's
    event stream (SSE: the last block's END), p50/p99 over --runs runs, with the
    server's one local agent and with one remote `wfhost agent` (the server
    started with --local-agents 0); `wfhost run` of the same workflow as the
    reference (whole process);
(b) the per-step cost of a --chain block echo chain through `wfhost serve`
    (POST to its end, divided by the steps) against `wfhost run`
    (whole process and its own duration_ms), --rounds alternating rounds.

Every mode gets a fresh home and a warm compiled-plugin cache shared by
all. Python 3 standard library only. Prints figures, asserts no time.
"""
import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from statistics import median


def chain(n: int) -> dict:
    blocks = {}
    for i in range(n):
        action = "END" if i + 1 == n else f"JUMP:b{i + 1}"
        blocks[f"b{i}"] = {
            "worker": "echo",
            "payload_merge_strategy": ["clear"],
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": action}],
        }
    return {"id": f"chain-{n}", "start_node": "main",
            "nodes": {"main": {"entry_block": "b0", "blocks": blocks}}}


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


class Served:
    """`wfhost serve` on a free loopback port (and maybe one `wfhost agent`)."""

    def __init__(self, wfhost, env, scratch, remote_agent):
        args = [wfhost, "serve", "--listen", "127.0.0.1:0"]
        if remote_agent:
            args += ["--local-agents", "0"]
        # A process group of its own: stopped with it, nothing else.
        self.procs = []
        self.log = open(os.path.join(scratch, "serve.log"), "w")
        serve = subprocess.Popen(args, env=env, stdout=subprocess.PIPE,
                                 stderr=self.log, text=True, start_new_session=True)
        self.procs.append(serve)
        line = serve.stdout.readline()
        self.addr = line.split("http://")[1].split("/")[0]
        if remote_agent:
            agent = subprocess.Popen(
                [wfhost, "agent", "--server", f"http://{self.addr}", "--name", "bench"],
                env=env, stdout=subprocess.DEVNULL, stderr=self.log,
                start_new_session=True)
            self.procs.append(agent)
        host, port = self.addr.split(":")
        self.conn = http.client.HTTPConnection(host, int(port))

    def stop(self):
        for p in reversed(self.procs):
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.log.close()

    def start(self, manifest, ws, steps):
        body = json.dumps({"manifest": manifest, "workspace": ws, "max_steps": steps + 10})
        self.conn.request("POST", "/v1/runs", body, {"Content-Type": "application/json"})
        answer = self.conn.getresponse()
        data = json.loads(answer.read())
        if answer.status != 202:
            sys.exit(f"POST /v1/runs answered {answer.status}: {data}")
        return data["run_id"]

    def finished(self, run):
        """Read the run's event stream until its run_finished event."""
        host, port = self.addr.split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        conn.request("GET", f"/v1/runs/{run}/events/stream")
        stream = conn.getresponse()
        kind = None
        while True:
            line = stream.readline()
            if not line:
                sys.exit(f"run {run}: the stream ended before the run did")
            line = line.decode().rstrip("\r\n")
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:") and kind in ("run_finished", "action_taken"):
                event = json.loads(line[5:])["event"]
                # A chain ends with its last block's END (a run that fails
                # ends with run_finished).
                ended = kind == "run_finished" or event["command"]["kind"] == "end"
                if ended:
                    conn.close()
                    return event

    def run(self, manifest, ws, steps):
        # A workspace of its own: the last run's process may still hold
        # its workspace's lock for a moment after its end is recorded.
        ws = fresh(ws)
        t = time.perf_counter()
        run = self.start(manifest, ws, steps)
        event = self.finished(run)
        wall = time.perf_counter() - t
        if event["type"] != "action_taken":
            sys.exit(f"run {run} did not succeed: {event}")
        return wall


RUNS = iter(range(1 << 30))


def fresh(parent):
    """A new empty workspace under `parent`."""
    ws = os.path.join(parent, f"run-{next(RUNS)}")
    os.makedirs(ws)
    return ws


def cli_run(wfhost, env, manifest_path, ws, steps):
    ws = fresh(ws)
    t = time.perf_counter()
    out = subprocess.run([wfhost, "run", manifest_path, "-w", ws, "--max-steps",
                          str(steps + 10), "--json"],
                         env=env, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t
    return wall, json.loads(out.stdout)["duration_ms"] / 1000.0


def env_for(scratch, cache):
    return dict(os.environ, WFHOST_HOME=os.path.join(scratch, "home"),
                WFHOST_CACHE_DIR=cache)


def workspace(scratch, name):
    ws = os.path.join(scratch, name)
    os.makedirs(ws, exist_ok=True)
    return ws


def latency(wfhost, work, cache, runs):
    manifest = chain(3)
    path = os.path.join(work, "chain-3.json")
    with open(path, "w") as f:
        json.dump(manifest, f)
    print(f"\n(a) a 3-block run, POST /v1/runs to its end (the last END) on its event stream, {runs} runs (ms)")
    print(f"{'mode':<28}{'p50':>8}{'p90':>8}{'p99':>8}{'max':>8}")
    for mode in ["local agent", "remote wfhost agent"]:
        with tempfile.TemporaryDirectory(dir=work) as scratch:
            served = Served(wfhost, env_for(scratch, cache), scratch, mode != "local agent")
            try:
                ws = workspace(scratch, "ws")
                for _ in range(5):
                    served.run(manifest, ws, 3)
                walls = [served.run(manifest, ws, 3) for _ in range(runs)]
            finally:
                served.stop()
        ms = [w * 1e3 for w in walls]
        print(f"{mode:<28}{pct(ms, 50):>8.1f}{pct(ms, 90):>8.1f}{pct(ms, 99):>8.1f}{max(ms):>8.1f}")
    with tempfile.TemporaryDirectory(dir=work) as scratch:
        env, ws = env_for(scratch, cache), workspace(scratch, "ws")
        cli_run(wfhost, env, path, ws, 3)
        ms = [cli_run(wfhost, env, path, ws, 3)[0] * 1e3 for _ in range(runs)]
    print(f"{'wfhost run (whole process)':<28}{pct(ms, 50):>8.1f}{pct(ms, 90):>8.1f}{pct(ms, 99):>8.1f}{max(ms):>8.1f}")


def per_step(wfhost, work, cache, n, rounds):
    manifest = chain(n)
    path = os.path.join(work, f"chain-{n}.json")
    with open(path, "w") as f:
        json.dump(manifest, f)
    results = {"serve, local agent": [], "serve, remote agent": [],
               "wfhost run (whole)": [], "wfhost run (steps)": []}
    with tempfile.TemporaryDirectory(dir=work) as scratch:
        local_dir, remote_dir = workspace(scratch, "l"), workspace(scratch, "r")
        local = Served(wfhost, env_for(local_dir, cache), local_dir, False)
        remote = Served(wfhost, env_for(remote_dir, cache), remote_dir, True)
        try:
            ws_l, ws_r = workspace(scratch, "ws-l"), workspace(scratch, "ws-r")
            ws_c = workspace(scratch, "ws-c")
            env_c = env_for(workspace(scratch, "c"), cache)
            local.run(manifest, ws_l, n)
            remote.run(manifest, ws_r, n)
            cli_run(wfhost, env_c, path, ws_c, n)
            for _ in range(rounds):
                results["serve, local agent"].append(local.run(manifest, ws_l, n))
                results["serve, remote agent"].append(remote.run(manifest, ws_r, n))
                whole, steps = cli_run(wfhost, env_c, path, ws_c, n)
                results["wfhost run (whole)"].append(whole)
                results["wfhost run (steps)"].append(steps)
        finally:
            local.stop()
            remote.stop()
    print(f"\n(b) a {n}-block chain, median of {rounds} alternating rounds")
    print(f"{'path':<24}{'run (ms)':>10}{'per step (ms)':>15}{'/ wfhost run':>14}")
    base = median(results["wfhost run (whole)"]) / n
    for name, walls in results.items():
        w = median(walls)
        print(f"{name:<24}{w * 1e3:>10.1f}{w / n * 1e3:>15.3f}{(w / n) / base:>13.2f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wfhost", help="the wfhost binary (a release build)")
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chain", type=int, default=100)
    parser.add_argument("--only", choices=["latency", "steps"])
    args = parser.parse_args()
    wfhost = os.path.abspath(args.wfhost)
    with tempfile.TemporaryDirectory(prefix="wfhost-server-bench-") as work:
        cache = os.path.join(work, "cache")
        if args.only != "steps":
            latency(wfhost, work, cache, args.runs)
        if args.only != "latency":
            per_step(wfhost, work, cache, args.chain, args.rounds)


if __name__ == "__main__":
    main()
