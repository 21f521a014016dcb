"""wfhost mcp and (when built) WorkRail, side by side: the advance round
trip of a 150-step workflow, median and p90 over advances 1-25 and
126-150, several rounds in alternation, each with a fresh store.

Usage: compare.py PYTHON WFHOST [WORKRAIL_DIR]
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = int(os.environ.get("MCP_BENCH_STEPS", "150"))
ROUNDS = int(os.environ.get("MCP_BENCH_ROUNDS", "3"))


CONSTRUCTS = os.environ.get("MCP_BENCH_CONSTRUCTS") == "1"


def workflow(steps):
    """A chain of steps; with MCP_BENCH_CONSTRUCTS=1 every step asks for an
    assessment (with a consequence) and every tenth calls a routine."""
    chain = {
        "id": f"bench-chain-{steps}",
        "name": "Benchmark chain",
        "description": f"{steps} steps an agent performs in turn",
        "version": "1.0.0",
        "steps": [{"id": f"step-{i}", "title": f"Step {i}", "prompt": f"Do step {i}."}
                  for i in range(1, steps + 1)],
    }
    if CONSTRUCTS:
        chain["assessments"] = [{"id": "quality", "purpose": "Is the step done?", "dimensions": [
            {"id": "done", "purpose": "done", "levels": ["no", "yes"]}]}]
        for i, step in enumerate(chain["steps"], 1):
            if i % 10 == 0:
                del step["prompt"]
                step["templateCall"] = {"templateId": "wr.templates.routine.bench-one", "args": {"n": str(i)}}
            else:
                step["assessmentRefs"] = ["quality"]
                step["assessmentConsequences"] = [{"when": {"anyEqualsLevel": "no"},
                                                   "effect": {"kind": "require_followup", "guidance": "Finish it."}}]
    return chain


ROUTINE = {"id": "wr.routine-bench-one", "name": "One step", "description": "A routine of one step.",
           "version": "1.0.0", "steps": [{"id": "do", "title": "Do {n}", "prompt": "Do routine step {n}."}]}


def servers(wfhost, workrail, tmp, workflows, durability):
    home = os.path.join(tmp, "home")
    out = [(f"wfhost ({durability})",
            [wfhost, "mcp", "--home", home, "--workflows", workflows, "--workspace", os.path.join(tmp, "ws"),
             "--durability", durability], {})]
    if workrail and durability == "full":
        out.append(("WorkRail 3.121", ["node", os.path.join(workrail, "dist", "mcp-server.js")], {
            "HOME": tmp, "WORKRAIL_DATA_DIR": os.path.join(tmp, "workrail-data"),
            "WORKFLOW_STORAGE_PATH": workflows, "WORKRAIL_JSON_RESPONSES": "true",
            "WORKRAIL_LOG_LEVEL": "SILENT"}))
    return out


def one(python, driver, name, command, env, workflows, workspace):
    full_env = dict(os.environ, **env)
    done = subprocess.run([python, os.path.join(HERE, driver), name, str(STEPS), workflows, workspace,
                           "--", *command], capture_output=True, text=True, env=full_env)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stdout}\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)["ms"]


def window(times, lo, hi):
    part = sorted(times[lo - 1:hi])
    return statistics.median(part), part[int(0.9 * (len(part) - 1))]


def main():
    python, wfhost = sys.argv[1], sys.argv[2]
    workrail = sys.argv[3] if len(sys.argv) > 3 else None
    samples = {}
    for r in range(ROUNDS):
        for durability in ["full", "normal"]:
            with tempfile.TemporaryDirectory() as tmp:
                workflows = os.path.join(tmp, "workflows")
                os.makedirs(workflows)
                os.makedirs(os.path.join(tmp, "ws"))
                with open(os.path.join(workflows, "chain.json"), "w") as f:
                    json.dump(workflow(STEPS), f)
                if CONSTRUCTS:
                    os.makedirs(os.path.join(workflows, "routines"))
                    with open(os.path.join(workflows, "routines", "bench-one.json"), "w") as f:
                        json.dump(ROUTINE, f)
                for name, command, env in servers(wfhost, workrail, tmp, workflows, durability):
                    for driver, client in [("advance.py", "Python MCP SDK"), ("raw.py", "bare JSON-RPC pipe")]:
                        # A fresh store for each: the state of one run is not the other's.
                        for d in ["home", "workrail-data"]:
                            shutil.rmtree(os.path.join(tmp, d), ignore_errors=True)
                        times = one(python, driver, name, command, env, workflows, os.path.join(tmp, "ws"))
                        samples.setdefault((name, client), []).append(times)
                        print(f"round {r + 1}: {name} with {client} done", file=sys.stderr)
    late = (STEPS - 24, STEPS)
    print(f"| server | client | advances 1-25 median | p90 | advances {late[0]}-{late[1]} median | p90 | late / early |")
    print("|---|---|---|---|---|---|---|")
    for (name, client), rounds in samples.items():
        early = [t for times in rounds for t in times[0:25]]
        tail = [t for times in rounds for t in times[late[0] - 1:late[1]]]
        e_med, e_p90 = window(sorted(early), 1, len(early))
        l_med, l_p90 = window(sorted(tail), 1, len(tail))
        print(f"| {name} | {client} | {e_med:.2f} ms | {e_p90:.2f} ms | {l_med:.2f} ms | {l_p90:.2f} ms | {l_med / e_med:.2f}x |")


if __name__ == "__main__":
    main()
