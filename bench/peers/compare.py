"""wfhost side by side with its peers and a native reference, in
alternating rounds; prints per-step medians and each engine's time as a
multiple of wfhost's. Called by bench/run.sh, which builds what it needs:

  compare.py WFHOST PYTHON [FIBO_BIN SPAWN_BIN FIBO_WASM]

Shapes (BENCH_SHAPES, default `echo,fibo`):
- echo: a chain of N `echo` blocks (no work), each durably recorded, at
  `full` and `normal`, beside the peers doing N no-op steps
  (ECHO_SIZES, default 100,1000; peers only up to PEERS_MAX_STEPS,
  default 10000);
- fibo: a chain of FIBO_TASKS (default 400) tasks each computing
  fibo(FIBO_N) (default 10): as a WASM worker block, as an exec block
  running the native fibo program, the reference (a native launcher
  posix_spawning the same program FIBO_TASKS times in a row), and the
  peers computing it in-process (Snakemake: running the native program).

BENCH_ROUNDS (default 5) rounds; PEERS picks peers (default
langgraph,dbos,prefect,snakemake). A peer that is not installed or fails is
reported and the rest run; the exit status is 1 only when a wfhost run
failed."""
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from statistics import median

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = {
    "langgraph": ("langgraph_chain.py", "import langgraph.checkpoint.sqlite"),
    "dbos": ("dbos_chain.py", "import dbos"),
    "prefect": ("prefect_chain.py", "import prefect"),
    "snakemake": ("snakemake_chain.py", "import snakemake"),
}
PEER_TIMEOUT = float(os.environ.get("PEER_TIMEOUT", "1800"))


class Failed(Exception):
    pass


def pins() -> dict:
    """The pinned requirement of each peer, from requirements.txt."""
    out = {}
    with open(os.path.join(HERE, "requirements.txt")) as f:
        for line in f:
            line = line.split("#")[0].strip()
            if line:
                out[line.split("==")[0]] = line
    return out


def chain(n: int, block: dict) -> dict:
    blocks = {}
    for i in range(n):
        action = "END" if i + 1 == n else f"JUMP:b{i + 1}"
        blocks[f"b{i}"] = dict(block, payload_merge_strategy=["clear"],
                               transitions=[{"on_signal": "SIGNAL:SUCCESS", "action": action}])
    return {"main": {"entry_block": "b0", "blocks": blocks}}


def write_manifest(path: str, wf_id: str, n: int, block: dict, plugins=None) -> None:
    wf = {"id": wf_id, "start_node": "main", "nodes": chain(n, block)}
    if plugins:
        wf["plugins"] = plugins
    with open(path, "w") as f:
        # Compact: a 100,000-block chain is near the 16 MiB manifest cap.
        json.dump(wf, f, separators=(",", ":"))


def tail(text: str, lines: int = 5) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])


# Where each run's scratch directory goes: kept until the whole bench
# ends. Deleting a run's thousands of files right before the next run
# makes file creation slow for seconds on some filesystems (ext4 skips
# recently deleted inodes when it allocates; with no journal it reads
# them to find out), which would be charged to whichever engine runs next.
SCRATCH_ROOT = None


def scratch_dir():
    """A fresh directory for one run, left for the end of the bench."""
    return contextlib.nullcontext(tempfile.mkdtemp(dir=SCRATCH_ROOT))


def run_wfhost(wfhost: str, manifest: str, n: int, cache: str, durability: str):
    with scratch_dir() as scratch:
        ws = os.path.join(scratch, "ws")
        os.mkdir(ws)
        env = dict(os.environ, WFHOST_HOME=os.path.join(scratch, "home"), WFHOST_CACHE_DIR=cache)
        t = time.perf_counter()
        out = subprocess.run(
            [wfhost, "run", manifest, "-w", ws, "--max-steps", str(n + 10),
             "--durability", durability, "--json"],
            env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if out.returncode != 0:
            raise Failed(f"exit {out.returncode}: {tail(out.stderr or out.stdout)}")
        report = json.loads(out.stdout)
        if report.get("status") != "succeeded" or report.get("steps") != n:
            raise Failed(f"status {report.get('status')}, {report.get('steps')} steps of {n}")
        return wall, report["duration_ms"] / 1000.0


def warm(wfhost: str, work: str, cache: str, block: dict, plugins=None) -> None:
    """Compile the plugins into the cache with a one-block run, so that no
    measured run pays for it (the measured runs report a failure)."""
    manifest = os.path.join(work, "warm.json")
    write_manifest(manifest, "warm", 1, block, plugins)
    try:
        run_wfhost(wfhost, manifest, 1, cache, "normal")
    except Failed:
        pass


def run_spawn(spawn: str, fibo: str, n: int, k: int):
    t = time.perf_counter()
    out = subprocess.run([spawn, str(n), fibo, str(k)], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if out.returncode != 0:
        raise Failed(f"exit {out.returncode}: {tail(out.stderr)}")
    return wall, json.loads(out.stdout)["seconds"]


def run_peer(python: str, peer: str, n: int, work: str, env: dict):
    with scratch_dir() as scratch:
        db = os.path.join(scratch, "peer.db")
        t = time.perf_counter()
        try:
            out = subprocess.run([python, os.path.join(HERE, PEERS[peer][0]), str(n), db, work],
                                 capture_output=True, text=True, cwd=scratch, env=env,
                                 timeout=PEER_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise Failed(f"timed out after {PEER_TIMEOUT:.0f} s (PEER_TIMEOUT)")
        wall = time.perf_counter() - t
        lines = out.stdout.strip().splitlines()
        line = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
        if out.returncode != 0 or "error" in line:
            raise Failed(line.get("error") or f"exit {out.returncode}: {tail(out.stderr)}")
        return wall, line["seconds"], line


def available_peers(python: str, wanted: list) -> list:
    requirements = pins()
    found = []
    for peer in wanted:
        if peer not in PEERS:
            print(f"unknown peer {peer!r} (known: {', '.join(PEERS)})")
            continue
        probe = subprocess.run([python, "-c", PEERS[peer][1]], capture_output=True)
        if probe.returncode == 0:
            found.append(peer)
        else:
            names = [r for name, r in requirements.items() if name.startswith(peer)]
            print(f"peer {peer}: not installed for {python}; skipped. Install it with "
                  f"`{python} -m pip install {' '.join(names) or peer}` (bench/run.sh does).")
    return found


def table(title: str, n: int, rounds: int, results: dict, base: str, unit_note: str,
          columns=("whole process", "steps only", "steps total", "whole, steps")) -> None:
    """results: name -> list of (wall, inner) or a Failed; columns: the
    headings of the wall and inner times per step, the inner total, and
    the two ratios."""
    wall, inner, total, ratios = columns
    print(f"\n{title}: median of {rounds} alternating rounds, {unit_note}")
    print(f"{'engine':<18}{wall:>15}{inner:>12}{total:>13}"
          f"{' x ' + base + ' (' + ratios + ')':>34}")
    ok = results.get(base)
    base_w = median(w for w, _ in ok) if isinstance(ok, list) and ok else None
    base_i = median(i for _, i in ok) if isinstance(ok, list) and ok else None
    for name, rows in results.items():
        if isinstance(rows, Failed):
            print(f"{name:<18}failed: {rows}")
            continue
        if not rows:
            continue
        w, i = median(x for x, _ in rows), median(y for _, y in rows)
        ratio = ""
        if name != base and base_w:
            ratio = f"{w / base_w:.2f}x, {i / base_i:.2f}x"
        print(f"{name:<18}{w / n * 1e6:>15.0f}{i / n * 1e6:>12.0f}{i:>12.3f}s{ratio:>34}")


def measure(results: dict, name: str, fn, wfhost_failures: list):
    """Run one engine once into results[name], unless it already failed;
    returns what it returned, or None."""
    if isinstance(results.get(name), Failed):
        return
    try:
        row = fn()
    except Failed as e:
        results[name] = e
        if name.startswith("wfhost"):
            wfhost_failures.append(f"{name}: {e}")
        return
    results.setdefault(name, []).append(row[:2])
    return row


def echo_shape(wfhost, python, peers, work, cache, rounds, env, failures) -> None:
    sizes = [int(s) for s in os.environ.get("ECHO_SIZES", os.environ.get("PEERS_SIZES", "100,1000")).split(",") if s]
    max_peer = int(os.environ.get("PEERS_MAX_STEPS", "10000"))
    for n in sizes:
        manifest = os.path.join(work, f"echo-{n}.json")
        write_manifest(manifest, f"echo-chain-{n}", n, {"worker": "echo", "config": {"message": "step"}})
        print(f"\n[echo chain, {n} steps: manifest {os.path.getsize(manifest):,} bytes]", flush=True)
        here_peers = peers if n <= max_peer else []
        if len(here_peers) < len(peers):
            print(f"peers skipped at {n} steps (over PEERS_MAX_STEPS={max_peer})")
        results, settings = {}, {}
        warm(wfhost, work, cache, {"worker": "echo", "config": {"message": "step"}})
        for _ in range(rounds):
            for durability in ["full", "normal"]:
                measure(results, f"wfhost {durability}",
                        lambda: run_wfhost(wfhost, manifest, n, cache, durability), failures)
            for peer in here_peers:
                row = measure(results, peer, lambda: run_peer(python, peer, n, "noop", env), failures)
                if row:
                    settings[peer] = (row[2]["journal_mode"], row[2]["synchronous"])
        table(f"echo chain, {n} steps", n, rounds, results, "wfhost full", "µs per step")
        print("wfhost: SQLite WAL, synchronous=FULL (full) or NORMAL (normal)")
        for peer, (journal, sync) in settings.items():
            print(f"{peer}: journal_mode={journal}, synchronous={sync}")


def fibo_shape(wfhost, python, peers, fibo, spawn, wasm, cache, work, rounds, env, failures) -> None:
    n = int(os.environ.get("FIBO_TASKS", "400"))
    k = int(os.environ.get("FIBO_N", "10"))
    wasm_manifest = os.path.join(work, f"fibo-wasm-{n}.json")
    exec_manifest = os.path.join(work, f"fibo-exec-{n}.json")
    write_manifest(wasm_manifest, f"fibo-wasm-{n}", n, {"worker": "fibo", "config": {"n": k}},
                   {"fibo": {"path": wasm}})
    write_manifest(exec_manifest, f"fibo-exec-{n}", n,
                   {"worker": "exec", "config": {"commands": [{"argv": [fibo, str(k)]}]}},
                   {"exec": {"grants": ["exec"]}})
    print(f"\n[fibo chain: {n} tasks of fibo({k})]", flush=True)
    results = {}
    warm(wfhost, work, cache, {"worker": "fibo", "config": {"n": k}}, {"fibo": {"path": wasm}})
    for _ in range(rounds):
        measure(results, "wfhost wasm", lambda: run_wfhost(wfhost, wasm_manifest, n, cache, "full"), failures)
        measure(results, "wfhost exec", lambda: run_wfhost(wfhost, exec_manifest, n, cache, "full"), failures)
        measure(results, "spawn (native)", lambda: run_spawn(spawn, fibo, n, k), failures)
        for peer in peers:
            measure(results, peer, lambda: run_peer(python, peer, n, f"fibo:{k}", env), failures)
    table(f"fibo chain, {n} tasks of fibo({k})", n, rounds, results, "wfhost wasm", "µs per task")
    exec_rows, spawn_rows = results.get("wfhost exec"), results.get("spawn (native)")
    if isinstance(exec_rows, list) and exec_rows and isinstance(spawn_rows, list) and spawn_rows:
        over_w = (median(w for w, _ in exec_rows) - median(w for w, _ in spawn_rows)) / n
        over_i = (median(i for _, i in exec_rows) - median(i for _, i in spawn_rows)) / n
        print(f"exec block over a raw spawn: {over_w * 1e3:.2f} ms per task (whole process), "
              f"{over_i * 1e3:.2f} ms (steps only)")
    print("wfhost wasm and exec at --durability full; spawn: posix_spawn + waitpid, nothing recorded")


def main() -> None:
    sys.stdout.reconfigure(line_buffering=True)  # tables as they come, also into a pipe
    # Absolute: the peers run in scratch directories.
    wfhost, python = (shutil.which(a) or a for a in sys.argv[1:3])
    wfhost, python = os.path.abspath(wfhost), os.path.abspath(python)
    fibo, spawn, wasm = (sys.argv[3:6] + [None, None, None])[:3]
    shapes = [s for s in os.environ.get("BENCH_SHAPES", "echo,fibo").split(",") if s]
    rounds = int(os.environ.get("BENCH_ROUNDS", os.environ.get("PEERS_ROUNDS", "5")))
    wanted = [p for p in os.environ.get("PEERS", ",".join(PEERS)).split(",") if p]
    peers = available_peers(python, wanted)
    env = dict(os.environ)
    if fibo:
        env["FIBO_BIN"] = fibo
    failures = []
    global SCRATCH_ROOT
    with tempfile.TemporaryDirectory() as work:
        SCRATCH_ROOT = os.path.join(work, "runs")
        os.mkdir(SCRATCH_ROOT)
        cache = os.path.join(work, "cache")
        if "echo" in shapes:
            echo_shape(wfhost, python, peers, work, cache, rounds, env, failures)
        if "fibo" in shapes:
            if not (fibo and spawn and wasm):
                print("\nfibo chain: skipped (compare.py needs FIBO_BIN SPAWN_BIN FIBO_WASM; bench/run.sh builds them)")
            else:
                fibo_shape(wfhost, python, peers, fibo, spawn, wasm, cache, work, rounds, env, failures)
    if failures:
        print("\nwfhost failed:\n  " + "\n  ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
