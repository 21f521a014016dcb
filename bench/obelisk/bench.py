"""Obelisk beside wfhost on the fibo chain, in alternating rounds; prints
medians per task and Obelisk's time as a multiple of wfhost's. Called by
bench/obelisk/run.sh, which finds or builds what it needs:

  bench.py OBELISK FIBOA_WASM FIBOW_WASM [WFHOST FIBO_WORKER_WASM]

- Obelisk: per round, a fresh `obelisk server run` (its own SQLite
  directory in a scratch directory; WAL, synchronous=FULL, Obelisk's
  defaults) with benchmark-fibo's Rust activity and workflow deployed,
  then `obelisk execution submit --follow
  benchmark-fibo:workflow/fibow.fiboa -- FIBO_N TASKS`: the workflow calls
  the activity TASKS times in series, each a child execution. "end to
  end" is that command from its start to its exit (submit, the run, the
  result); "in engine" is the execution's created_at to finished_at as the
  server reports it. The server's start is not timed; it is stopped
  (its process group) after each round.
- wfhost: the fibo chain of bench/peers/compare.py, TASKS `fibo` worker
  blocks at --durability full: "end to end" is the whole `wfhost run`
  process, "in engine" the run's duration_ms.

OBELISK_TASKS (default 100,400), FIBO_N (default 10), BENCH_ROUNDS
(default 5), OBELISK_TIMEOUT (seconds a submit may take, default 600). With strace on PATH (and OBELISK_STRACE not 0), one more
untimed run of each engine counts fsync/fdatasync calls: the whole
`wfhost run`, and the Obelisk server's threads (attached with strace -p)
while the submit runs. Exits 1 only when a wfhost run failed."""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ left in bench/peers
sys.path.insert(0, os.path.join(HERE, "..", "peers"))
import compare as peers  # noqa: E402  (the fibo chain's manifest and wfhost runner)

FFQN = "benchmark-fibo:workflow/fibow.fiboa"
SUBMIT_TIMEOUT = float(os.environ.get("OBELISK_TIMEOUT", "600"))
SERVER_START_TIMEOUT = 300.0  # the first start compiles both components
Failed = peers.Failed


def fibo(k: int) -> int:
    return k if k < 2 else fibo(k - 1) + fibo(k - 2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def toml_str(path: str) -> str:
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def duration_seconds(text: str) -> float:
    """A Rust Duration's Debug form (`1.234s`, `850.1ms`, `12µs`) in seconds."""
    m = re.fullmatch(r"([0-9.]+)(s|ms|µs|us|ns)", text)
    if not m:
        raise Failed(f"unreadable duration {text!r}")
    scale = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "us": 1e-6, "ns": 1e-9}[m.group(2)]
    return float(m.group(1)) * scale


class Server:
    """One `obelisk server run` in its own process group, with a fresh
    SQLite directory under `scratch` and the shared wasm/codegen `cache`."""

    def __init__(self, obelisk: str, fiboa: str, fibow: str, scratch: str, cache: str):
        self.obelisk = obelisk
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = os.path.join(scratch, "server.log")
        server_toml = os.path.join(scratch, "server.toml")
        deployment_toml = os.path.join(scratch, "deployment.toml")
        # server.toml: benchmark-fibo's own (wasm.backtrace.persist = false),
        # plus where this run keeps its files and no listener but the API.
        with open(server_toml, "w") as f:
            f.write(f"""[api]
listening_addr = "127.0.0.1:{self.port}"

[database.sqlite]
directory = {toml_str(os.path.join(scratch, "sqlite"))}

[wasm]
cache_directory = {toml_str(os.path.join(cache, "wasm"))}
backtrace.persist = false

[wasm.codegen_cache]
directory = {toml_str(os.path.join(cache, "codegen"))}

[webui]
enabled = false

[external]
enabled = false
""")
        # The deployment: benchmark-fibo's obelisk-rs.toml, pointed at the
        # local builds; the workflow is built for wasm32-wasip2 here (not
        # wasm32-unknown-unknown), so its WASI imports are stubbed.
        with open(deployment_toml, "w") as f:
            f.write(f"""[[activity_wasm]]
name = "fiboa_rs"
location = {toml_str(fiboa)}
max_retries = 0
exec.lock_expiry.seconds = 25

[[workflow_wasm]]
name = "fibow_rs"
location = {toml_str(fibow)}
exec.lock_expiry.seconds = 2
stub_wasi = true
""")
        self.argv = [obelisk, "server", "run", "--server-config", server_toml,
                     "--deployment", deployment_toml]
        self.proc = None

    def __enter__(self):
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def log_tail(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return peers.tail(f.read())
        except OSError:
            return ""

    def wait_ready(self) -> None:
        """Until the API answers with fibow deployed."""
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Failed(f"obelisk server exited {self.proc.returncode}: {self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
            except OSError:
                time.sleep(0.1)
                continue
            out = subprocess.run([self.obelisk, "component", "list", "--api-url", self.url],
                                 capture_output=True, text=True, timeout=60)
            if out.returncode == 0 and "fibow" in out.stdout:
                return
            time.sleep(0.2)
        raise Failed(f"obelisk server not ready after {SERVER_START_TIMEOUT:.0f} s: {self.log_tail()}")

    def stop(self) -> None:
        """Ends the server's process group (only the one started here)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        except ProcessLookupError:
            pass
        finally:
            self.log.close()


def submit(server: Server, n: int, k: int):
    """`obelisk execution submit --follow`, timed from its start to its exit."""
    argv = [server.obelisk, "execution", "submit", "--api-url", server.url, "--follow",
            FFQN, "--", str(k), str(n)]
    t = time.perf_counter()
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=SUBMIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Failed(f"timed out after {SUBMIT_TIMEOUT:.0f} s (OBELISK_TIMEOUT)")
    wall = time.perf_counter() - t
    result = re.search(r"^Execution finished: (.*)$", out.stdout, re.M)
    if out.returncode != 0 or not result:
        raise Failed(f"exit {out.returncode}: {peers.tail(out.stdout + out.stderr)}; "
                     f"server: {server.log_tail()}")
    if not result.group(1).startswith("OK") or str(fibo(k)) not in result.group(1):
        raise Failed(f"finished with {result.group(1)!r}, expected fibo({k}) = {fibo(k)}")
    took = re.search(r"^Execution took (\S+)\.$", out.stdout, re.M)
    if not took:
        raise Failed(f"no `Execution took` line: {peers.tail(out.stdout)}")
    return wall, duration_seconds(took.group(1))


def run_obelisk(obelisk, fiboa, fibow, cache, n, k):
    with peers.scratch_dir() as scratch:
        with Server(obelisk, fiboa, fibow, scratch, cache) as server:
            return submit(server, n, k)


def strace_calls(path: str) -> int:
    """fsync + fdatasync calls in an `strace -c` summary."""
    calls = 0
    with open(path) as f:
        for line in f:
            fields = line.split()
            if fields and fields[-1] in ("fsync", "fdatasync") and len(fields) >= 5:
                calls += int(fields[3])
    return calls


def count_syncs_obelisk(obelisk, fiboa, fibow, cache, n, k):
    with peers.scratch_dir() as scratch:
        with Server(obelisk, fiboa, fibow, scratch, cache) as server:
            out = os.path.join(scratch, "strace.txt")
            tracer = subprocess.Popen(
                ["strace", "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", out,
                 "-p", str(server.proc.pid)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            time.sleep(1.0)  # strace attaches to every thread
            if tracer.poll() is not None:
                raise Failed(f"strace -p failed: {peers.tail(tracer.stderr.read())}")
            try:
                submit(server, n, k)
            finally:
                tracer.send_signal(signal.SIGINT)
                tracer.wait(timeout=30)
            return strace_calls(out)


def count_syncs_wfhost(wfhost, manifest, n, cache):
    with peers.scratch_dir() as scratch:
        ws = os.path.join(scratch, "ws")
        os.mkdir(ws)
        out = os.path.join(scratch, "strace.txt")
        env = dict(os.environ, WFHOST_HOME=os.path.join(scratch, "home"), WFHOST_CACHE_DIR=cache)
        run = subprocess.run(
            ["strace", "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", out,
             wfhost, "run", manifest, "-w", ws, "--max-steps", str(n + 10),
             "--durability", "full", "--json"],
            env=env, capture_output=True, text=True)
        if run.returncode != 0:
            raise Failed(f"exit {run.returncode}: {peers.tail(run.stderr or run.stdout)}")
        return strace_calls(out)


def main() -> None:
    sys.stdout.reconfigure(line_buffering=True)
    if len(sys.argv) not in (4, 6):
        sys.exit(__doc__)
    obelisk, fiboa, fibow = (os.path.abspath(a) for a in sys.argv[1:4])
    wfhost, worker = (os.path.abspath(a) for a in sys.argv[4:6]) if len(sys.argv) == 6 else (None, None)
    sizes = [int(s) for s in os.environ.get("OBELISK_TASKS", "100,400").split(",") if s]
    k = int(os.environ.get("FIBO_N", "10"))
    rounds = int(os.environ.get("BENCH_ROUNDS", "5"))
    strace = shutil.which("strace") if os.environ.get("OBELISK_STRACE", "1") != "0" else None
    version = subprocess.run([obelisk, "--version"], capture_output=True, text=True).stdout.strip()
    obelisk_name = version or "obelisk"
    commit = os.environ.get("OBELISK_FIBO_COMMIT", "")
    print(f"\n[obelisk: {version}, benchmark-fibo {commit[:7]}; wfhost: "
          f"{'the fibo worker plugin' if wfhost else 'not given, Obelisk alone'}]")
    failures = []
    with tempfile.TemporaryDirectory() as work:
        peers.SCRATCH_ROOT = os.path.join(work, "runs")
        os.mkdir(peers.SCRATCH_ROOT)
        cache = os.path.join(work, "cache")
        os.mkdir(cache)
        # The first server start compiles both components into the cache;
        # no timed round pays for it.
        try:
            with peers.scratch_dir() as scratch:
                with Server(obelisk, fiboa, fibow, scratch, cache):
                    pass
        except Failed as e:
            print(f"obelisk: skipped: the server did not start: {e}")
            obelisk = None
        for n in sizes:
            results = {}
            manifest = None
            if wfhost:
                manifest = os.path.join(work, f"fibo-wasm-{n}.json")
                block = {"worker": "fibo", "config": {"n": k}}
                plugins = {"fibo": {"path": worker}}
                peers.write_manifest(manifest, f"fibo-wasm-{n}", n, block, plugins)
                peers.warm(wfhost, work, cache, block, plugins)
            for _ in range(rounds):
                if wfhost:
                    peers.measure(results, "wfhost wasm",
                                  lambda: peers.run_wfhost(wfhost, manifest, n, cache, "full"),
                                  failures)
                if obelisk:
                    peers.measure(results, obelisk_name,
                                  lambda: run_obelisk(obelisk, fiboa, fibow, cache, n, k), failures)
            peers.table(f"fibo chain, {n} tasks of fibo({k})", n, rounds, results, "wfhost wasm",
                        "µs per task",
                        ("end to end", "in engine", "engine total", "end to end, in engine"))
            if strace:
                syncs = []
                for name, fn in [("wfhost", lambda: count_syncs_wfhost(wfhost, manifest, n, cache)
                                  if wfhost else None),
                                 ("obelisk", lambda: count_syncs_obelisk(obelisk, fiboa, fibow, cache, n, k)
                                  if obelisk and not isinstance(results.get(obelisk_name), Failed)
                                  else None)]:
                    try:
                        count = fn()
                    except (Failed, OSError, subprocess.SubprocessError) as e:
                        syncs.append(f"{name}: not counted ({e})")
                        continue
                    if count is not None:
                        syncs.append(f"{name} {count} ({count / n:.2f} per task)")
                if syncs:
                    print("fsync+fdatasync in one more run (strace): " + "; ".join(syncs))
        print("wfhost: SQLite WAL, synchronous=FULL (--durability full), one process per run; "
              "obelisk: SQLite WAL, synchronous=FULL (its defaults), a server already running, "
              "each task a child execution of the workflow")
    if failures:
        print("\nwfhost failed:\n  " + "\n  ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
