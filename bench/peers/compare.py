"""Run the same workload — a chain of N no-op steps, each durably recorded
in SQLite — with wfhost and with the durable engines a user would pick
instead, in alternation, and print per-step medians and the ratio
wfhost/peer. Called by run.sh, which installs the pinned peers."""
import json
import os
import subprocess
import sys
import tempfile
import time
from statistics import median

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = {
    "langgraph": os.path.join(HERE, "langgraph_chain.py"),
    "dbos": os.path.join(HERE, "dbos_chain.py"),
}


def chain_manifest(path: str, n: int) -> None:
    blocks = {}
    for i in range(n):
        action = "END" if i + 1 == n else f"JUMP:b{i + 1}"
        blocks[f"b{i}"] = {
            "worker": "echo",
            "config": {"message": "step"},
            "payload_merge_strategy": ["clear"],
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": action}],
        }
    wf = {"id": f"chain-{n}", "start_node": "main",
          "nodes": {"main": {"entry_block": "b0", "blocks": blocks}}}
    with open(path, "w") as f:
        json.dump(wf, f, separators=(",", ":"))  # compact: the manifest cap is 16 MiB


def run_wfhost(wfhost: str, manifest: str, n: int, cache: str, durability: str):
    with tempfile.TemporaryDirectory() as scratch:
        ws = os.path.join(scratch, "ws")
        os.mkdir(ws)
        env = dict(os.environ, WFHOST_HOME=os.path.join(scratch, "home"), WFHOST_CACHE_DIR=cache)
        t = time.perf_counter()
        out = subprocess.run(
            [wfhost, "run", manifest, "-w", ws, "--max-steps", str(n + 10),
             "--durability", durability, "--json"],
            env=env, check=True, capture_output=True, text=True)
        wall = time.perf_counter() - t
        report = json.loads(out.stdout)
        return wall, report["duration_ms"] / 1000.0


def run_peer(python: str, peer: str, n: int):
    with tempfile.TemporaryDirectory() as scratch:
        db = os.path.join(scratch, "peer.db")
        t = time.perf_counter()
        out = subprocess.run([python, PEERS[peer], str(n), db], check=True,
                             capture_output=True, text=True, cwd=scratch)
        wall = time.perf_counter() - t
        line = json.loads(out.stdout.strip().splitlines()[-1])
        return wall, line["seconds"], line


def main() -> None:
    wfhost, python = sys.argv[1], sys.argv[2]
    sizes = [int(s) for s in os.environ.get("PEERS_SIZES", "100,1000").split(",")]
    rounds = int(os.environ.get("PEERS_ROUNDS", "5"))
    peers = [p for p in os.environ.get("PEERS", "langgraph,dbos").split(",") if p]
    with tempfile.TemporaryDirectory() as work:
        cache = os.path.join(work, "cache")
        for n in sizes:
            manifest = os.path.join(work, f"chain-{n}.json")
            chain_manifest(manifest, n)
            run_wfhost(wfhost, manifest, n, cache, "full")  # warm the plugin cache
            results = {name: ([], []) for name in ["wfhost full", "wfhost normal", *peers]}
            settings = {}
            for _ in range(rounds):
                for durability in ["full", "normal"]:
                    wall, inner = run_wfhost(wfhost, manifest, n, cache, durability)
                    results[f"wfhost {durability}"][0].append(wall)
                    results[f"wfhost {durability}"][1].append(inner)
                for peer in peers:
                    wall, inner, line = run_peer(python, peer, n)
                    results[peer][0].append(wall)
                    results[peer][1].append(inner)
                    settings[peer] = (line["journal_mode"], line["synchronous"])
            print(f"\n{n} steps, median of {rounds} alternating rounds (µs per step)")
            print(f"{'engine':<16}{'whole process':>15}{'steps only':>12}{'wfhost full / peer (whole, steps)':>36}")
            base_wall = median(results["wfhost full"][0]) / n
            base_inner = median(results["wfhost full"][1]) / n
            for name, (walls, inners) in results.items():
                w, i = median(walls) / n, median(inners) / n
                ratio = "" if name.startswith("wfhost") else f"{base_wall / w:.2f}x, {base_inner / i:.2f}x"
                print(f"{name:<16}{w * 1e6:>15.0f}{i * 1e6:>12.0f}{ratio:>36}")
            print("wfhost: SQLite WAL, synchronous=FULL (full) or NORMAL (normal)")
            for peer, (journal, sync) in settings.items():
                print(f"{peer}: SQLite journal_mode={journal}, synchronous={sync}")


if __name__ == "__main__":
    main()
