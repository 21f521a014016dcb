#!/usr/bin/env python3
"""A scripted agent that speaks the JSON agent protocol.

It reads the universal input JSON from stdin and prints exactly one universal
output JSON object on stdout, and nothing else (its note goes to stderr).
--status picks the answer (OK, BLOCKED, NEEDS_INFO, NEEDS_DECISION, FAIL);
--write PATH=CONTENT changes a file in the working directory (the workspace)
and reports it in artifacts.files_changed; `{session}` in PATH is the run's
session folder (SESSION_DIR). Input that is not a JSON object
with a `task` is answered with status FAIL, still as protocol JSON.

For a team of agents (examples/agent-team): --calls FILE counts this agent's
calls in FILE (a number; `{session}` allowed), and --on-call N=STATUS[:SUMMARY]
answers STATUS (with SUMMARY) on the N-th call instead of --status, so a
Reviewer can ask for a fix once; --test-command CMD runs CMD (split like a
shell would, but without one) in the workspace and answers FAIL with the end
of its output when it fails; --task-status ID=STATUS sets task ID's `status:`
in {session}/tasks.yaml (a note on stderr if there is no such task).

--pause-while FILE writes the agent's pid into FILE, if it exists, and waits
until it is removed (at most 60 s): a test kills the run there, mid-block.
--pause-after-writes FILE does the same once the agent has changed its files
(before it answers): a test kills the host between the edit and its check.

Misbehaviours: --prose prints a sentence before the JSON, --trailing one
after it; --exit CODE exits with CODE after answering.

The system prompt can only come as an argument (the last positional one),
from --prompt-file FILE or from the file AGENT_PROMPT_FILE names, since
stdin carries the input. It is not used except by --dump-context FILE,
which writes the argv, the env-contract variables, the working directory,
the input and the prompt as JSON (give a path outside the workspace).
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import time

AGENTS = [
    "SpecAgent", "Architect", "Planner", "Designer", "Researcher", "Coder",
    "Reviewer", "QA", "Security", "Integrator", "Docs", "Orchestrator",
]

CONTRACT = [
    "WORKFLOW_ID", "EXECUTION_ID", "NODE_ID", "STEP_INDEX", "FILE_RESTRICTIONS",
    "TELEMETRY_ENABLED", "TELEMETRY_URL", "OUTPUT_DIR", "PREVIOUS_BLOCK_ID",
    "AGENT_PROMPT_FILE", "SESSION_DIR",
]


def pair(text):
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"`{text}` is not PATH=CONTENT")
    path, content = text.split("=", 1)
    if not path:
        raise argparse.ArgumentTypeError(f"`{text}` has no PATH")
    return path, content.replace("\\n", "\n")


STATUSES = ["OK", "BLOCKED", "NEEDS_INFO", "NEEDS_DECISION", "FAIL"]


def on_call(text):
    n, _, rest = text.partition("=")
    status, _, summary = rest.partition(":")
    if not n.isdigit() or int(n) < 1 or status not in STATUSES:
        raise argparse.ArgumentTypeError(f"`{text}` is not N=STATUS[:SUMMARY]")
    return int(n), status, summary or None


def session_path(path):
    return path.replace("{session}", os.environ.get("SESSION_DIR", "{session}"))


def count_call(path):
    """This call's number, 1 for the first, kept in PATH."""
    path = session_path(path)
    try:
        with open(path, encoding="utf-8") as f:
            n = int(f.read().strip() or 0) + 1
    except FileNotFoundError:
        n = 1
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{n}\n")
    return n


def set_task_status(task_id, status):
    """Set `status:` of the task `task_id` in the session's tasks.yaml.

    A line edit, good for the flat list a Planner writes; returns the path
    if the file changed, else None (with a note on stderr)."""
    path = session_path("{session}/tasks.yaml")
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        print(f"json_agent: no {path} to set {task_id} {status} in", file=sys.stderr)
        return None
    inside = False
    for i, line in enumerate(lines):
        item = line.strip()
        if item.startswith("- "):
            item = item[2:].strip()
            if item.startswith("id:"):
                inside = item[3:].strip().strip("'\"") == task_id
                continue
        if inside and item.startswith("status:"):
            edited = line[: line.index("status:")] + f"status: {status}"
            if edited == line:
                return None
            lines[i] = edited
            with open(path, "w", encoding="utf-8") as f:
                f.write("\n".join(lines))
            return os.path.normpath(path).replace(os.sep, "/")
    print(f"json_agent: {path} has no task {task_id}", file=sys.stderr)
    return None


def pause_while(path):
    if not os.path.exists(path):
        return
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{os.getpid()}\n")
    deadline = time.monotonic() + 60
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)


def run_test_command(command):
    """(passed, a note with the command's result and the end of its output)."""
    argv = shlex.split(command)
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"`{command}` did not run: {e}"
    tail = done.stdout.decode("utf-8", "replace").strip().splitlines()[-5:]
    print(f"json_agent: `{command}` exited {done.returncode}", file=sys.stderr)
    note = f"`{command}` exited {done.returncode}"
    return done.returncode == 0, note + (": " + " | ".join(tail) if tail else "")


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="json_agent.py",
        description="A scripted agent speaking the JSON agent protocol.",
    )
    p.add_argument("--status", choices=STATUSES,
                   default="OK", help="the answer's status (default: OK)")
    p.add_argument("--summary", metavar="TEXT",
                   help="the answer's summary (the gate's question for NEEDS_DECISION)")
    p.add_argument("--write", type=pair, action="append", default=[], metavar="PATH=CONTENT",
                   help="create or overwrite PATH (\\n is a newline), reported in files_changed")
    p.add_argument("--move", type=pair, action="append", default=[], metavar="OLD=NEW",
                   help="rename OLD to NEW (a move, keeping the file), reported in files_changed")
    p.add_argument("--next", choices=AGENTS, default="Reviewer", metavar="AGENT",
                   help="next.recommended_agent (default: Reviewer)")
    p.add_argument("--no-next", action="store_true", help="leave `next` out")
    p.add_argument("--calls", metavar="FILE",
                   help="count the calls in FILE (`{session}` is the session folder)")
    p.add_argument("--on-call", type=on_call, action="append", default=[],
                   metavar="N=STATUS[:SUMMARY]",
                   help="on the N-th call (needs --calls) answer STATUS instead of --status")
    p.add_argument("--test-command", metavar="CMD",
                   help="run CMD (no shell) in the workspace; FAIL with its output if it fails")
    p.add_argument("--task-status", type=pair, action="append", default=[], metavar="ID=STATUS",
                   help="set the status of task ID in {session}/tasks.yaml")
    p.add_argument("--pause-while", metavar="FILE",
                   help="if FILE exists, write the pid into it and wait until it is removed")
    p.add_argument("--pause-after-writes", metavar="FILE",
                   help="like --pause-while, once the files are changed (before answering)")
    p.add_argument("--finding", action="append", default=[], metavar="TEXT",
                   help="add TEXT to artifacts.findings (with NEEDS_DECISION: a question to ask)")
    p.add_argument("--security-concern", action="append", default=[], metavar="TEXT",
                   help="add TEXT to gates.security_concerns (with NEEDS_DECISION: a security question)")
    p.add_argument("--prose", action="store_true", help="print prose before the JSON")
    p.add_argument("--trailing", action="store_true", help="print prose after the JSON")
    p.add_argument("--exit", type=int, default=0, metavar="CODE", help="exit with CODE")
    p.add_argument("--dump-context", metavar="FILE",
                   help="write argv, env contract, cwd, input and prompt as JSON to FILE")
    p.add_argument("--prompt-file", metavar="FILE",
                   help="read the prompt from FILE (for a `{prompt-file}` placeholder)")
    p.add_argument("prompt_arg", nargs="*", metavar="PROMPT",
                   help="the system prompt, when delivered as an argument")
    return p.parse_args(argv)


def read_prompt(args):
    if args.prompt_file:
        with open(args.prompt_file, encoding="utf-8") as f:
            return f.read()
    if args.prompt_arg:
        return args.prompt_arg[-1]
    path = os.environ.get("AGENT_PROMPT_FILE")
    if path:
        with open(path, encoding="utf-8") as f:
            return f.read()
    return ""


def main(argv):
    args = parse_args(argv)
    raw = sys.stdin.read() if sys.stdin is not None else ""
    try:
        data = json.loads(raw)
        task = data["task"]
        task_id, title, goal = str(task["id"]), str(task["title"]), str(task["goal"])
        problem = None
    except (ValueError, KeyError, TypeError) as e:
        data, task_id, title, goal = None, "meta", "", ""
        problem = f"stdin is not the universal input JSON ({type(e).__name__}: {e})"
    if args.dump_context:
        with open(args.dump_context, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "program": sys.argv[0],
                    "argv": argv,
                    "env": {k: os.environ.get(k) for k in CONTRACT},
                    "cwd": os.getcwd(),
                    "input": data if problem is None else raw,
                    "prompt": read_prompt(args),
                },
                f,
                indent=2,
            )

    if args.pause_while:
        pause_while(args.pause_while)
    status, summary = ("FAIL", problem) if problem else (args.status, args.summary)
    if args.calls and not problem:
        n = count_call(args.calls)
        for call, call_status, call_summary in args.on_call:
            if call == n:
                status, summary = call_status, call_summary or summary
    changed, notes = [], []
    if args.test_command and not problem and status == "OK":
        passed, note = run_test_command(args.test_command)
        notes.append(note)
        if not passed:
            status, summary = "FAIL", f"the tests failed: {note}"
    if not problem:
        for old, new in args.move:
            os.replace(old, new)
            changed.extend([os.path.normpath(old), os.path.normpath(new)])
        for task, task_status in args.task_status:
            rel = set_task_status(task, task_status)
            if rel and rel not in changed:
                changed.append(rel)
        for path, content in args.write:
            path = session_path(path)
            parent = os.path.dirname(path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(content)
            rel = os.path.normpath(path).replace(os.sep, "/")
            if rel not in changed:
                changed.append(rel)
    if args.pause_after_writes:
        pause_while(args.pause_after_writes)
    summary = summary or f"{task_id}: {title} ({status})"
    answer = {
        "status": status,
        "summary": summary,
        "artifacts": {
            "files_changed": changed,
            "commands_to_run": [args.test_command] if args.test_command else [],
            "findings": args.finding,
            "notes": ([f"goal: {goal}"] if goal else []) + notes,
        },
        "gates": {
            "meets_definition_of_done": status == "OK",
            "needs_review": bool(changed),
            "needs_tests": False,
            "security_concerns": args.security_concern,
        },
    }
    if not args.no_next:
        answer["next"] = {
            "recommended_agent": args.next,
            "recommended_task_id": task_id,
            "reason": "review the change" if changed else "continue",
        }
    if args.prose:
        print("Sure! Here is what I did:")
    print(json.dumps(answer))
    if args.trailing:
        print("Let me know if you need anything else.")
    sys.stdout.flush()
    print(f"json_agent[{os.environ.get('NODE_ID', '?')}]: {status}: {summary}", file=sys.stderr)
    return args.exit


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
