"""The fan-out bench's parts, run one after the other; prints a markdown
table and writes it to $FANOUT_RESULTS. Called by bench/fanout/run.sh,
which installs Snakemake, finds wfhost and Slurm, and puts the counting
shims in $FANOUT_SHIMS (see run.sh for the settings).

Every part makes N tasks, task i writing its item into a file of its own
(`echo ITEM > FILE` in a shell):

- smk-local: Snakemake, `--cores FANOUT_LOCAL_CORES`.
- smk-slurm: Snakemake's Slurm executor, one sbatch job per task
  (`--executor slurm --jobs N`), the plugin's defaults otherwise (its first
  status check 40 s after a submission, and as long a wait at the end).
- smk-slurm-array: the same with `--slurm-array-jobs=all` (job arrays, as
  wfhost submits lanes, of FANOUT_SMK_ARRAY_LIMIT tasks: see run.sh).
- smk-slurm-group: the same with the tasks grouped FANOUT_SMK_GROUP to a
  job (`--groups task=fan --group-components fan=K`, each group job with
  the partition's CPUs; inside the job each task is still an `srun` of a
  Snakemake of its own).

In every Snakemake-on-Slurm variant each task runs, inside its job, two
Snakemake processes of its own (the batch script's, and the jobstep
executor's in the `srun` step): about 2.5 CPU-seconds of Python a task on a
2-CPU node (sacct's TotalCPU), which bounds how many tasks a small cluster
finishes a second. wfhost's job script is a shell script (about 20 ms).
- wfhost-local / wfhost-slurm: one exec block with `parallel.over` on the
  run input `items` (N strings), locally with `max_concurrent`
  FANOUT_LOCAL_CORES, on Slurm with the block's executor on the partition
  (one job array, wfhost's default window).

Wall time is the engine's process from start to exit (Snakemake: Python's
start and the DAG included; wfhost: the plugin cache is warmed first by
`wfhost validate` and a one-item run). Per-task ms is the wall time over
the tasks done. Status queries are the squeue, sacct and scontrol calls of
the engine's own processes (calls inside the jobs are counted apart); the
table below it lists every counted command."""
import glob
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
N = int(os.environ.get("FANOUT_ITEMS", "1000"))
ALL_PARTS = ["smk-local", "smk-slurm", "smk-slurm-array", "smk-slurm-group",
             "wfhost-local", "wfhost-slurm"]
PARTS = [p.strip() for p in os.environ.get("FANOUT_PARTS", ",".join(ALL_PARTS)).split(",") if p.strip()]
TIMEOUT = float(os.environ.get("FANOUT_PART_TIMEOUT", "150"))
LOCAL_CORES = int(os.environ.get("FANOUT_LOCAL_CORES", "2"))
GROUP = int(os.environ.get("FANOUT_SMK_GROUP", "50"))
ARRAY_LIMIT = int(os.environ.get("FANOUT_SMK_ARRAY_LIMIT", "64"))
LANES_DIR = os.environ.get("FANOUT_LANES_DIR", "")
CLUSTER_CPUS = int(os.environ.get("FANOUT_CLUSTER_CPUS") or "2")
SMK_ARGS = shlex.split(os.environ.get("FANOUT_SMK_ARGS", ""))
MERGE = os.environ.get("FANOUT_MERGE", "concatenate")
WORK = os.environ["FANOUT_WORK"]
SHIMS = os.environ["FANOUT_SHIMS"]
CALLS = os.path.join(SHIMS, "calls.log")
SLURM = os.environ.get("FANOUT_SLURM") == "1"
PARTITION = os.environ.get("FANOUT_PARTITION", "")
ACCOUNTING = os.environ.get("FANOUT_ACCOUNTING") == "1"
WFHOST = os.environ.get("FANOUT_WFHOST", "")
RESULTS = os.environ["FANOUT_RESULTS"]
SNAKEMAKE = os.path.join(os.path.dirname(sys.executable), "snakemake")
COUNTED = ["sbatch", "squeue", "sacct", "scontrol", "scancel", "sinfo", "srun", "sacctmgr"]
STATUS = ["squeue", "sacct", "scontrol"]
JOB_PREFIX = "wfhostfanout"


def real(name: str):
    try:
        with open(os.path.join(SHIMS, "real.env")) as f:
            for line in f:
                key, _, value = line.strip().partition("=")
                if key == f"FANOUT_REAL_{name}":
                    return value
    except FileNotFoundError:
        pass
    return None


def env_with_shims(extra=None) -> dict:
    env = dict(os.environ, PATH=SHIMS + os.pathsep + os.environ.get("PATH", ""))
    env.update(extra or {})
    return env


def take_calls():
    """The shims' log since the last call, emptied: the calls made by the
    engine, those made inside Slurm jobs, the submitted job ids."""
    try:
        with open(CALLS) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        lines = []
    open(CALLS, "w").close()
    counts = {name: 0 for name in COUNTED}
    in_jobs = {name: 0 for name in COUNTED}
    jobs = []
    for line in lines:
        if line.startswith("sbatch-output "):
            m = re.search(r"(\d+)", line[len("sbatch-output "):])
            if m:
                jobs.append(m.group(1))
        elif line in counts:
            counts[line] += 1
        elif line.endswith("@job") and line[:-4] in in_jobs:
            in_jobs[line[:-4]] += 1
    return counts, in_jobs, jobs


def cancel_leftovers(jobs) -> None:
    """Cancel the jobs this part submitted that are still queued or running
    (an interrupted part), and only those."""
    squeue, scancel = real("squeue"), real("scancel")
    if not jobs or not squeue or not scancel:
        return
    out = subprocess.run([squeue, "-h", "-o", "%F"], capture_output=True, text=True)
    alive = sorted(set(out.stdout.split()) & set(jobs), key=int)
    if alive:
        print(f"  cancelling {len(alive)} job(s) left by the interrupted part: {' '.join(alive[:10])}{' …' if len(alive) > 10 else ''}")
        subprocess.run([scancel, *alive], capture_output=True)


def completed_tasks(jobs):
    """How many tasks of these jobs (arrays too) Slurm's accounting shows
    COMPLETED; None without accounting."""
    sacct = real("sacct")
    if not jobs or not sacct or not ACCOUNTING:
        return None
    out = subprocess.run([sacct, "-X", "-n", "-P", "-o", "State", "-j", ",".join(jobs)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return None
    return sum(1 for line in out.stdout.split() if line == "COMPLETED")


def run_engine(argv, cwd, log_path, env, stdout_path=None):
    """Run an engine to its end or FANOUT_PART_TIMEOUT, its output in
    log_path (its stdout in stdout_path if given); (rc or None on a
    timeout, wall seconds)."""
    with open(log_path, "w") as log, open(stdout_path or os.devnull, "w") as out:
        t = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out if stdout_path else log,
                                stderr=log if stdout_path else subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc = proc.wait(timeout=TIMEOUT)
            return rc, time.perf_counter() - t
        except subprocess.TimeoutExpired:
            wall = time.perf_counter() - t
            # Ctrl-C: both engines cancel their jobs on it; Snakemake can
            # take 40 s more to wind down, so it gets 20 and the jobs left
            # are cancelled here (cancel_leftovers).
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            return None, wall


def tail(path, lines=6) -> str:
    try:
        with open(path, errors="replace") as f:
            text = [line.rstrip() for line in f.read().splitlines() if line.strip()]
    except FileNotFoundError:
        return ""
    return "\n".join("    " + line for line in text[-lines:])


def fresh(name: str) -> str:
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


# --- Snakemake -----------------------------------------------------------------

SNAKEFILE = """\
N = int(config["count"])
localrules: all

rule all:
    input: expand("out/{i}.txt", i=range(N))

rule task:
    output: "out/{i}.txt"
    resources: mem_mb=100, runtime=5, cpus_per_task=1
    shell: "echo {wildcards.i} > {output}"
"""


def snakemake_part(part: str):
    d = fresh(part)
    with open(os.path.join(d, "Snakefile"), "w") as f:
        f.write(SNAKEFILE)
    argv = [SNAKEMAKE, "--snakefile", "Snakefile", "--directory", d, "--nolock"]
    if part == "smk-local":
        argv += ["--cores", str(LOCAL_CORES)]
    else:
        argv += ["--executor", "slurm", "--jobs", str(N),
                 "--default-resources", f"slurm_partition={PARTITION}",
                 "--slurm-jobname-prefix", JOB_PREFIX]
        if not ACCOUNTING:
            argv += ["--slurm-status-command", "squeue"]
        if part == "smk-slurm-array":
            # At most ARRAY_LIMIT tasks an array: the plugin passes an
            # array's commands in one argument (about 1.5 KB a task), and
            # past Linux's 128 KiB its fallback (the script on stdin) is
            # broken in 2.8.0 (every task runs the array's first job).
            argv += ["--slurm-array-jobs=all", "--slurm-array-limit", str(ARRAY_LIMIT)]
        elif part == "smk-slurm-group":
            # Snakemake sums the CPUs of a group's tasks up to the
            # --resources limit, which also bounds all its running jobs:
            # a group job gets the partition's CPUs, one runs at a time.
            argv += ["--groups", "task=fan", "--group-components", f"fan={GROUP}",
                     "--resources", f"cpus_per_task={CLUSTER_CPUS}"]
        argv += SMK_ARGS
    argv += ["--config", f"count={N}"]
    rc, wall = run_engine(argv, d, os.path.join(d, "engine.log"), env_with_shims())
    out = os.path.join(d, "out")
    done = len(os.listdir(out)) if os.path.isdir(out) else 0
    if rc is None:
        status = "timeout"
    elif rc != 0:
        status = f"failed (exit {rc})"
    elif done != N:
        status = f"incomplete ({done}/{N} files)"
    else:
        status = "ok"
    return status, wall, done, os.path.join(d, "engine.log")


# --- wfhost --------------------------------------------------------------------

def manifest(slurm: bool) -> dict:
    config = {"allow_shell": True,
              "commands": [{"argv": ["sh", "-c", "echo {{item}} > out-{{item_index}}.txt"]}]}
    parallel = {"over": "inputs.items", "merge_strategy": MERGE}
    if slurm:
        config["executor"] = {"slurm": {"partition": PARTITION, "time_limit": "00:05:00",
                                        "cpus_per_task": 1, "mem_mb": 100}}
    else:
        parallel["max_concurrent"] = LOCAL_CORES
    return {
        "id": "fanout", "version": "1.0.0",
        "plugins": {"exec": {"grants": ["exec"]}},
        "inputs": {"type": "object", "properties": {"items": {"type": "array"}}, "required": ["items"]},
        "start_node": "main",
        "nodes": {"main": {"entry_block": "each", "blocks": {"each": {
            "worker": "exec", "timeout": "3600s", "config": config, "parallel": parallel,
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"},
                            {"on_signal": "SIGNAL:PARTIAL", "action": "FAIL:some lanes failed"},
                            {"on_signal": "SIGNAL:FAILED", "action": "FAIL:every lane failed"},
                            {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL:the block did not run"}]}}}},
    }


def wfhost_env(home: str) -> dict:
    extra = {"WFHOST_HOME": home, "WFHOST_CACHE_DIR": os.path.join(WORK, "wfhost-cache")}
    if LANES_DIR:
        extra["WFHOST_LANES_DIR"] = LANES_DIR
    return env_with_shims(extra)


def wfhost_run(d: str, wf: str, n: int, log: str):
    ws = os.path.join(d, "ws")
    os.makedirs(ws, exist_ok=True)
    inputs = os.path.join(d, "inputs.json")
    with open(inputs, "w") as f:
        json.dump({"items": [str(i) for i in range(n)]}, f)
    argv = [WFHOST, "run", wf, "-w", ws, "--input", inputs, "--max-steps", str(n + 100), "--json"]
    report_path = os.path.splitext(log)[0] + ".json"
    rc, wall = run_engine(argv, d, log, wfhost_env(os.path.join(d, "home")), report_path)
    report = None
    if rc is not None:
        try:
            with open(report_path) as f:
                report = json.load(f)
        except (ValueError, OSError):
            report = None
    return rc, wall, report, ws


WFHOST_REFUSED = None  # why the wfhost parts are skipped, once known


def wfhost_ready() -> bool:
    """Validate both manifests and warm the plugin cache with a one-item
    local run; remember why not, once."""
    global WFHOST_REFUSED
    if WFHOST_REFUSED is not None:
        return WFHOST_REFUSED == ""
    if not WFHOST:
        WFHOST_REFUSED = "no wfhost binary (build it: cargo build --release -p wfhost, or give WFHOST_BIN)"
        return False
    d = fresh("wfhost-warm")
    for name, slurm in [("local", False), ("slurm", True)]:
        wf = os.path.join(d, f"{name}.json")
        with open(wf, "w") as f:
            json.dump(manifest(slurm), f, indent=1)
        out = subprocess.run([WFHOST, "validate", wf], capture_output=True, text=True,
                             env=wfhost_env(os.path.join(d, "home")))
        if out.returncode != 0:
            WFHOST_REFUSED = (f"`wfhost validate` refuses the {name} manifest (exit {out.returncode}): "
                              + " ".join((out.stderr or out.stdout).split())[:400])
            return False
    log = os.path.join(d, "warm.log")
    rc, _, report, _ = wfhost_run(d, os.path.join(d, "local.json"), 1, log)
    take_calls()
    if rc != 0 or not report or report.get("status") != "succeeded":
        why = " ".join(str(((report or {}).get("result") or {}).get("content")
                           or (report or {}).get("reason") or "").split())
        WFHOST_REFUSED = f"a one-item local run did not succeed (exit {rc}): {why[:300]}\n{tail(log)}"
        return False
    WFHOST_REFUSED = ""
    return True


def wfhost_part(part: str):
    slurm = part == "wfhost-slurm"
    d = fresh(part)
    wf = os.path.join(d, "workflow.json")
    with open(wf, "w") as f:
        json.dump(manifest(slurm), f, indent=1)
    log = os.path.join(d, "engine.log")
    rc, wall, report, ws = wfhost_run(d, wf, N, log)
    done = succeeded_bundles(ws)
    if rc is None:
        remove_lanes(log)
        return "timeout", wall, (done or None), log
    if rc != 0 or not report or report.get("status") != "succeeded":
        why = (report or {}).get("failure") or (report or {}).get("status") or f"exit {rc}"
        return f"failed: {' '.join(str(why).split())[:200]}", wall, (done or None), log
    if done != N:
        return f"incomplete ({done}/{N} bundles succeeded)", wall, done, log
    return "ok", wall, done, log


def remove_lanes(log: str) -> None:
    """An interrupted run keeps its lanes' workspaces for `wfhost resume`
    (in /dev/shm or $TMPDIR, wfhost-lanes-<uid>/<run>): remove them."""
    try:
        with open(log, errors="replace") as f:
            runs = set(re.findall(r"\brun (run-\d{8}-\d{6}-[0-9a-f]+) interrupted", f.read()))
    except OSError:
        return
    name = f"wfhost-lanes-{os.geteuid()}"
    bases = [LANES_DIR] if LANES_DIR else [os.path.join("/dev/shm", name),
                                           os.path.join(os.environ.get("TMPDIR") or "/tmp", name)]
    for run in runs:
        for base in bases:
            shutil.rmtree(os.path.join(base, run), ignore_errors=True)


def succeeded_bundles(ws: str) -> int:
    """The lanes' exec bundles (fan-in copies them into the workspace)
    whose manifest says they succeeded."""
    done = 0
    for bundle in glob.glob(os.path.join(ws, ".output", "exec", "*", "step-*", "manifest.json")):
        try:
            with open(bundle) as f:
                done += json.load(f).get("succeeded") is True
        except (ValueError, OSError):
            pass
    return done


# --- the table -------------------------------------------------------------------

def main() -> int:
    unknown = [p for p in PARTS if p not in ALL_PARTS]
    if unknown:
        print(f"fanout: unknown part(s) {', '.join(unknown)}; known: {', '.join(ALL_PARTS)}", file=sys.stderr)
        return 2
    os.makedirs(WORK, exist_ok=True)
    print(f"fanout: N={N}, parts {', '.join(PARTS)}, at most {TIMEOUT:.0f} s a part, scratch {WORK}")
    rows, skipped, status = [], [], 0
    LOAD.append(os.getloadavg()[0])
    take_calls()
    for part in PARTS:
        where = "slurm" if "slurm" in part else "local"
        engine = "wfhost" if part.startswith("wfhost") else "snakemake"
        if where == "slurm" and not SLURM:
            skipped.append((part, "no Slurm cluster (scripts/services.sh slurm)"))
            print(f"fanout: {part}: skipped: no Slurm cluster")
            continue
        if engine == "wfhost" and not wfhost_ready():
            skipped.append((part, WFHOST_REFUSED))
            print(f"fanout: {part}: skipped: {WFHOST_REFUSED}")
            continue
        print(f"fanout: {part}: running {N} tasks …", flush=True)
        if engine == "snakemake":
            result, wall, done, log = snakemake_part(part)
        else:
            result, wall, done, log = wfhost_part(part)
        counts, in_jobs, jobs = take_calls()
        if result == "timeout":
            cancel_leftovers(jobs)
            take_calls()
            if done is None:
                # wfhost collects the lanes' bundles only at fan-in: ask
                # Slurm how many of the part's tasks completed.
                done = completed_tasks(jobs)
        if result != "ok":
            status = 1
            print(f"fanout: {part}: {result} after {wall:.1f} s; the end of {log}:\n{tail(log)}")
        else:
            print(f"fanout: {part}: {wall:.1f} s")
        rows.append({"part": part, "engine": engine, "where": where, "variant": VARIANT[part],
                     "result": result, "wall": wall, "done": done, "counts": counts,
                     "in_jobs": in_jobs})
    LOAD.append(os.getloadavg()[0])
    text = render(rows, skipped)
    print()
    print(text)
    with open(RESULTS, "w") as f:
        f.write(text)
    print(f"fanout: written to {RESULTS}")
    return status


LOAD = []  # the 1-minute load average at the start and at the end

VARIANT = {
    "smk-local": "--cores {cores}",
    "smk-slurm": "a job per task",
    "smk-slurm-array": "--slurm-array-jobs=all, {array_limit} an array",
    "smk-slurm-group": "groups of {group}, {cpus} CPUs a group job",
    "wfhost-local": "parallel.over, max_concurrent {cores}",
    "wfhost-slurm": "parallel.over, job array",
}


def render(rows, skipped) -> str:
    def versions():
        out = subprocess.run([sys.executable, "-m", "pip", "freeze", "--disable-pip-version-check"],
                             capture_output=True, text=True).stdout
        smk = [line for line in out.splitlines() if line.lower().startswith("snakemake")]
        return ", ".join(smk)

    def variant(part):
        return VARIANT[part].format(cores=LOCAL_CORES, group=GROUP, array_limit=ARRAY_LIMIT, cpus=CLUSTER_CPUS)

    wf_version = ""
    if WFHOST:
        out = subprocess.run([WFHOST, "--version"], capture_output=True, text=True)
        wf_version = (out.stdout or out.stderr).strip()
    lines = [
        f"# Fan-out of {N} trivial tasks",
        "",
        f"`bench/fanout/run.sh`, {time.strftime('%Y-%m-%d %H:%M %Z')}, {os.cpu_count()} CPUs; "
        f"Slurm partition `{PARTITION or '-'}`, accounting {'yes' if ACCOUNTING else 'no'}; "
        f"at most {TIMEOUT:.0f} s a part; load average {' → '.join(f'{x:.1f}' for x in LOAD)} "
        "(the parts share the machine and the cluster with whatever else runs).",
        "",
        f"- {versions()}",
        f"- wfhost: {wf_version or 'none'}{' (' + WFHOST + ')' if WFHOST else ''}",
        "",
        "| engine | where | N | wall s | per-task ms | sbatch calls | status queries | in-job Slurm calls | done | variant |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        c = r["counts"]
        status_q = sum(c[name] for name in STATUS)
        done = r["done"]
        wall = f"{r['wall']:.1f}"
        if r["result"] == "timeout":
            wall = f">{wall} (timeout)"
        elif r["result"] != "ok":
            wall = f"{wall} ({r['result']})"
        per_task = f"{r['wall'] / done * 1000:.0f}" if done else "-"
        lines.append(
            f"| {r['engine']} | {r['where']} | {N} | {wall} | {per_task} | {c['sbatch']} | {status_q} "
            f"| {sum(r['in_jobs'].values())} | {done if done is not None else '?'} | {variant(r['part'])} |")
    for part, why in skipped:
        engine = "wfhost" if part.startswith("wfhost") else "snakemake"
        where = "slurm" if "slurm" in part else "local"
        lines.append(f"| {engine} | {where} | {N} | skipped | - | - | - | - | - | "
                     f"{variant(part)}: {' '.join(why.split())[:160]} |")
    lines += ["", "Every counted Slurm command, by the engine (+ inside its jobs):", "",
              "| part | " + " | ".join(COUNTED) + " |",
              "|---|" + "---:|" * len(COUNTED)]
    for r in rows:
        cells = [str(r["counts"][n]) + (f" + {r['in_jobs'][n]}" if r["in_jobs"][n] else "") for n in COUNTED]
        lines.append(f"| {r['part']} | " + " | ".join(cells) + " |")
    lines += ["",
              "Status queries are the squeue, sacct and scontrol calls of the engine's own "
              "processes; in-job Slurm calls are those made inside the Slurm jobs (Snakemake "
              "runs each task as `srun` + a Snakemake of its own in the job, which also asks "
              "`scontrol`). Per-task ms is wall time over the tasks done (for a timed-out part, "
              "those done before it was interrupted, so fixed costs weigh on it). Snakemake's "
              "Slurm plugin waits 40 s before its first status check and as long again after "
              "the last job (its defaults; FANOUT_SMK_ARGS to change them).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
