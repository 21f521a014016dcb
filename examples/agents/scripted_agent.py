#!/usr/bin/env python3
"""A scripted stand-in for a coding agent that follows wfhost's agent contract.

It reads the env contract (NODE_ID, OUTPUT_DIR, FILE_RESTRICTIONS, ...) and the
system prompt (stdin by default, or an argument, or AGENT_PROMPT_FILE), does
what its arguments script, and writes $OUTPUT_DIR/block-$NODE_ID.json (the
BlockOutput of seed 000) with accurate filesModified / filesCreated.

Roles (--role): plan writes PLAN.md from the prompt's task; dev writes what
--write / --append say; test runs `python3 -m unittest discover -s DIR` with
--run-tests DIR and reports completed or failed; review reads every
.output/block-*.json and writes REVIEW.md.

Misbehaviours, for tests and demonstrations: --no-output, --bad-json,
--wrong-block-id, --bad-status, --flood MB, --hang, --exit CODE,
--write-outside PATH=CONTENT (written but not declared).

--dump-context FILE writes the argv, the env-contract variables and the
prompt it received as JSON (to check the contract as a child process sees it);
--log FILE appends NODE_ID to FILE on every run (to count runs).
"""

import argparse
import datetime
import glob
import json
import os
import subprocess
import sys
import time

CONTRACT = [
    "WORKFLOW_ID",
    "EXECUTION_ID",
    "NODE_ID",
    "STEP_INDEX",
    "FILE_RESTRICTIONS",
    "TELEMETRY_ENABLED",
    "TELEMETRY_URL",
    "OUTPUT_DIR",
    "PREVIOUS_BLOCK_ID",
    "AGENT_PROMPT_FILE",
]

BLOCK_TYPES = ["plan", "dev", "test", "review", "devops"]


def pair(text):
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"`{text}` is not PATH=CONTENT")
    path, content = text.split("=", 1)
    return path, content.replace("\\n", "\n")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--role", choices=BLOCK_TYPES, default="dev")
    p.add_argument("--write", type=pair, action="append", default=[])
    p.add_argument("--append", type=pair, action="append", default=[])
    p.add_argument("--status", choices=["completed", "partial", "failed"], default="completed")
    p.add_argument("--summary")
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--run-tests", metavar="DIR")
    p.add_argument("--dump-context", metavar="FILE")
    p.add_argument("--log", metavar="FILE", help="append NODE_ID to FILE (outside the workspace) per run")
    p.add_argument("--no-output", action="store_true")
    p.add_argument("--bad-json", action="store_true")
    p.add_argument("--wrong-block-id", action="store_true")
    p.add_argument("--bad-status", action="store_true")
    p.add_argument("--flood", type=float, metavar="MB")
    p.add_argument("--hang", action="store_true")
    p.add_argument("--exit", type=int, default=0, metavar="CODE")
    p.add_argument("--write-outside", type=pair, action="append", default=[])
    p.add_argument("prompt_arg", nargs="?", help="the prompt, when delivered as an argument")
    return p.parse_args()


def read_prompt(args):
    if args.prompt_arg is not None:
        return args.prompt_arg
    path = os.environ.get("AGENT_PROMPT_FILE")
    if path:
        with open(path, encoding="utf-8") as f:
            return f.read()
    if not sys.stdin.isatty():
        return sys.stdin.read()
    return ""


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Changes:
    def __init__(self):
        self.modified = []
        self.created = []

    def note(self, path):
        if os.path.exists(path):
            if path not in self.modified and path not in self.created:
                self.modified.append(path)
        elif path not in self.created:
            self.created.append(path)

    def write(self, path, content, mode="w"):
        self.note(path)
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        with open(path, mode, encoding="utf-8") as f:
            f.write(content)


def task_lines(prompt):
    """The task list a planner derives: one task per sentence of the prompt's
    task section (everything after the first blank line, up to the next)."""
    parts = [p.strip() for p in prompt.split("\n\n") if p.strip()]
    text = parts[-1] if parts else "Do the work."
    for part in parts:
        if part.lower().startswith(("task", "implement", "write", "add", "plan")):
            text = part
            break
    sentences = [s.strip() for s in text.replace("\n", " ").split(".") if s.strip()]
    return [f"T{i + 1:02}: {s}" for i, s in enumerate(sentences[:9])] or ["T01: Do the work"]


def main():
    args = parse_args()
    prompt = read_prompt(args)
    node_id = os.environ.get("NODE_ID", "")
    out_dir = os.environ.get("OUTPUT_DIR", ".output")
    if args.dump_context:
        with open(args.dump_context, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "argv": sys.argv[1:],
                    "env": {k: os.environ.get(k) for k in CONTRACT},
                    "prompt": prompt,
                    "cwd": os.getcwd(),
                },
                f,
                indent=2,
            )
    if args.log:
        with open(args.log, "a", encoding="utf-8") as f:
            f.write(node_id + "\n")
    print(f"scripted agent {node_id} ({args.role}) starting", file=sys.stderr)
    if args.sleep:
        time.sleep(args.sleep)
    if args.hang:
        while True:
            time.sleep(3600)
    if args.flood:
        chunk = "x" * 65536
        for _ in range(int(args.flood * 16)):
            sys.stdout.write(chunk)
        sys.stdout.flush()

    changes = Changes()
    summary = args.summary
    deliverables = None
    status = args.status

    for path, content in args.write:
        changes.write(path, content)
    for path, content in args.append:
        changes.write(path, content, "a")
    for path, content in args.write_outside:
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)

    if args.role == "plan":
        tasks = task_lines(prompt)
        document = "# Plan\n\n" + "\n".join(f"- {t}" for t in tasks) + "\n"
        changes.write("PLAN.md", document)
        deliverables = {"blockType": "plan", "markdownDocument": document, "taskList": tasks}
        summary = summary or f"Planned {len(tasks)} task(s) in PLAN.md."
    elif args.role == "test":
        result = "no tests run"
        if args.run_tests:
            proc = subprocess.run(
                [sys.executable, "-m", "unittest", "discover", "-s", args.run_tests],
                capture_output=True,
                text=True,
                env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
            )
            tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            result = f"unittest in {args.run_tests}: {tail}"
            if proc.returncode != 0:
                status = "failed"
        deliverables = {"blockType": "generic", "summary": result}
        summary = summary or result
    elif args.role == "review":
        outputs = sorted(glob.glob(os.path.join(out_dir, "block-*.json")))
        lines = []
        for path in outputs:
            try:
                with open(path, encoding="utf-8") as f:
                    o = json.load(f)
                lines.append(f"- {o.get('blockId')}: {o.get('status')}: {o.get('summary')}")
            except (OSError, ValueError) as e:
                lines.append(f"- {os.path.basename(path)}: unreadable ({e})")
        changes.write("REVIEW.md", "# Review\n\n" + "\n".join(lines) + "\n")
        text = f"Reviewed {len(outputs)} block output(s)."
        deliverables = {"blockType": "generic", "summary": text}
        summary = summary or text
    elif args.role == "devops":
        text = summary or "Nothing to deploy."
        deliverables = {"blockType": "generic", "summary": text}
        summary = text
    else:
        changed = sorted(changes.modified + changes.created)
        text = summary or (f"Changed {len(changed)} file(s)." if changed else "No changes needed.")
        deliverables = {"blockType": "code", "filesChanged": changed, "diffSummary": text}
        summary = text

    output = {
        "blockId": "someone-else" if args.wrong_block_id else node_id,
        "blockType": args.role,
        "status": "done" if args.bad_status else status,
        "deliverables": deliverables,
        "summary": summary,
        "filesModified": changes.modified,
        "filesCreated": changes.created,
        "timestamp": now(),
    }
    if not args.no_output:
        os.makedirs(out_dir, exist_ok=True)
        target = os.path.join(out_dir, f"block-{node_id}.json")
        with open(target, "w", encoding="utf-8") as f:
            if args.bad_json:
                f.write('{"blockId": ')
            else:
                json.dump(output, f, indent=2)
    print(f"scripted agent {node_id}: {summary}", file=sys.stderr)
    return args.exit


if __name__ == "__main__":
    sys.exit(main())
