#!/usr/bin/env python3
"""Many runs at once on one `wfhost serve`: durable steps per second.

Starts `wfhost serve` on a free loopback port with a fresh home, starts
RUNS runs of an N-step echo chain over `POST /v1/runs` at once (each in a
workspace of its own), waits until every one has succeeded, and reports
the steps per second beside one run alone through the same server, with
the peak memory (RSS of the server and every process under it, sampled)
and the peak of open files.

    bench/server/concurrent_runs.py WFHOST [--runs 100] [--steps 100]
        [--durability full|normal] [--local-agents 1]
        [--store postgres://…] [--servers 1]

With --store, each server's home names that (empty) database as its run
store; with --servers N, N servers (homes of their own, one store) share
the runs, started round-robin through them.

Python 3 standard library only.
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
import urllib.error
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chain(n: int) -> dict:
    blocks = {}
    for i in range(n):
        action = "END" if i + 1 == n else f"JUMP:b{i + 1}"
        blocks[f"b{i}"] = {
            "worker": "echo",
            "config": {"message": "hi"},
            "payload_merge_strategy": ["clear"],
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": action}],
        }
    return {"id": "concurrent-chain", "version": "1.0.0", "start_node": "main",
            "nodes": {"main": {"entry_block": "b0", "blocks": blocks}}}


def call(base: str, method: str, path: str, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        if e.code != 404:
            sys.stderr.write(f"bench: {method} {path}: {e.code} {e.read()[:400]!r}\n")
        raise


def tree(root: int) -> list:
    """The pid `root` and every process below it."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                text = f.read()
        except OSError:
            continue
        ppid = int(text[text.rfind(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def open_files(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


class Sampler(threading.Thread):
    """Peak RSS (the servers and all below them) and peak open files."""

    def __init__(self, roots: list):
        super().__init__(daemon=True)
        self.roots, self.stop = roots, threading.Event()
        self.peak_rss = self.peak_files = self.peak_server_files = self.peak_procs = 0

    def run(self):
        while not self.stop.is_set():
            pids = [p for root in self.roots for p in tree(root)]
            self.peak_rss = max(self.peak_rss, sum(rss_kib(p) for p in pids))
            self.peak_files = max(self.peak_files, sum(open_files(p) for p in pids))
            self.peak_server_files = max(self.peak_server_files,
                                         sum(open_files(r) for r in self.roots))
            self.peak_procs = max(self.peak_procs, len(pids))
            self.stop.wait(0.05)


def wait_all(base: str, ids: list, timeout: float) -> None:
    left, deadline = set(ids), time.time() + timeout
    while left:
        if time.time() > deadline:
            raise SystemExit(f"bench: {len(left)} runs did not finish within {timeout:.0f} s")
        for run in list(left):
            try:
                status = call(base, "GET", f"/runs/{run}/summary").get("status")
            except urllib.error.HTTPError as e:
                if e.code != 404:  # 404: the run's process has not recorded it yet
                    raise
                continue
            if status == "succeeded":
                left.discard(run)
            elif status in ("failed", "interrupted"):
                raise SystemExit(f"bench: run {run} ended {status}")
        time.sleep(0.02)


def start_runs(bases, manifest: str, scratch: str, count: int, tag: str) -> list:
    """`count` runs, started round-robin through the servers `bases`."""
    bases = bases if isinstance(bases, list) else [bases]
    ids = []
    for i in range(count):
        ws = os.path.join(scratch, f"ws-{tag}-{i}")
        os.mkdir(ws)
        base = bases[i % len(bases)]
        ids.append(call(base, "POST", "/runs", {"workflow": manifest, "workspace": ws})["run_id"])
    return ids


def start_server(args, scratch: str, index: int):
    """A `wfhost serve` with a home of its own (naming --store); its
    process and base URL, once it answers."""
    home = os.path.join(scratch, f"home{index}")
    os.mkdir(home)
    if args.store:
        with open(os.path.join(home, "config.json"), "w") as f:
            json.dump({"store": args.store}, f)
    port = free_port()
    env = dict(os.environ, WFHOST_HOME=home,
               WFHOST_CACHE_DIR=os.path.join(scratch, "cache"),
               WFHOST_DURABILITY=args.durability)
    env.pop("WFHOST_STORE", None)
    log = open(os.path.join(home, "serve.log"), "w")
    server = subprocess.Popen([args.wfhost, "serve", "--listen", f"127.0.0.1:{port}",
                               "--local-agents", str(args.local_agents)],
                              env=env, stdout=subprocess.DEVNULL, stderr=log,
                              start_new_session=True)
    base = f"http://127.0.0.1:{port}/v1"
    for _ in range(200):
        try:
            call(base, "GET", "/health")
            break
        except OSError:
            time.sleep(0.05)
    return server, base


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wfhost")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--durability", default="full", choices=["full", "normal"])
    ap.add_argument("--local-agents", type=int, default=1,
                    help="agents inside the server (wfhost serve --local-agents)")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--store", help="a postgres:// URL of an empty database for every server's home")
    ap.add_argument("--servers", type=int, default=1, help="servers sharing the store")
    args = ap.parse_args()
    if args.servers > 1 and not args.store:
        raise SystemExit("bench: several servers need a shared --store postgres://…")
    with tempfile.TemporaryDirectory() as scratch:
        manifest = os.path.join(scratch, "chain.json")
        with open(manifest, "w") as f:
            json.dump(chain(args.steps), f, separators=(",", ":"))
        servers = []
        try:
            for index in range(args.servers):
                servers.append(start_server(args, scratch, index))
            bases = [base for _, base in servers]
            # One run alone first (it also compiles the plugins once).
            wait_all(bases[0], start_runs(bases, manifest, scratch, 1, "warm"), args.timeout)
            t = time.perf_counter()
            wait_all(bases[0], start_runs(bases, manifest, scratch, 1, "alone"), args.timeout)
            alone = time.perf_counter() - t
            sampler = Sampler([server.pid for server, _ in servers])
            sampler.start()
            t = time.perf_counter()
            ids = start_runs(bases, manifest, scratch, args.runs, "many")
            wait_all(bases[0], ids, args.timeout)
            many = time.perf_counter() - t
            sampler.stop.set()
            sampler.join()
        finally:
            for server, _ in servers:
                os.killpg(server.pid, signal.SIGTERM)
                server.wait(timeout=30)
            keep = os.environ.get("WFHOST_BENCH_KEEP")
            if keep:  # the homes (logs included), to look at after a failure
                import shutil
                shutil.copytree(scratch, keep, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("cache", "ws-*", "bells"))
    single_rate = args.steps / alone
    rate = args.runs * args.steps / many
    where = "PostgreSQL" if args.store else "the embedded SQLite store"
    print(f"{args.runs} concurrent runs of {args.steps} echo steps on {args.servers} wfhost serve "
          f"over {where} (--durability {args.durability}, --local-agents {args.local_agents} each)")
    print(f"  one run alone:    {alone * 1000:9.0f} ms   {single_rate:9.0f} steps/s")
    print(f"  {args.runs} at once:      {many * 1000:9.0f} ms   {rate:9.0f} steps/s"
          f"   ({rate / single_rate:.1f}x the single-run rate)")
    print(f"  peak: {sampler.peak_procs} processes, RSS {sampler.peak_rss / 1024:.0f} MiB in all, "
          f"{sampler.peak_files} open files in all ({sampler.peak_server_files} in the server)")


if __name__ == "__main__":
    sys.exit(main())
