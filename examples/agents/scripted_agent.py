#!/usr/bin/env python3
"""A scripted stand-in for a coding agent that follows wfhost's agent contract.

Deterministic and driven by its arguments, so that workflows and tests can
script it. It reads the env contract (NODE_ID, OUTPUT_DIR, ...) and its
system prompt (--prompt-file FILE, else a PROMPT argument, else the file
AGENT_PROMPT_FILE names, else stdin), does what its arguments say, and
writes $OUTPUT_DIR/block-$NODE_ID.json, the BlockOutput the agent contract asks for, with
accurate filesModified / filesCreated (a path is "created" when it did not
exist before this run wrote it). Its working directory is the workspace:
relative paths are workspace paths.

Roles (--role, also the output's blockType):
  plan    writes PLAN.md: a numbered task list derived from the prompt's task
          section; plan deliverables (markdownDocument, taskList).
  dev     writes what --write / --append say; code deliverables.
  test    with --run-tests DIR, runs `python3 -m unittest discover -s DIR` and
          reports completed (exit 0) or failed; generic deliverables.
  review  reads every $OUTPUT_DIR/block-*.json and writes REVIEW.md
          summarising them; generic deliverables.
  devops  writes what --write / --append say; generic deliverables (what
          host/core/src/block_output.rs expects of a devops block).
--write and --append work with every role.

Misbehaviours, for tests and demonstrations: --no-output, --bad-json,
--wrong-block-id, --bad-status, --flood MB, --hang, --exit CODE,
--write-outside PATH=CONTENT (written but not declared in the output).

Telemetry: --telemetry BODY (repeatable) POSTs BODY (JSON text) to
$TELEMETRY_URL when TELEMETRY_ENABLED is 1, before doing anything else, and
appends each answer's HTTP status to the file --telemetry-log names.
--wait-for FILE then waits until FILE exists (up to two minutes), and
--late-telemetry BODY (repeatable) is POSTed after that wait.

Observation: --dump-context FILE writes the argv, the env-contract variables,
the working directory and the prompt as received to FILE (JSON); --log FILE
appends NODE_ID to FILE on every run (to count runs). Give both paths outside
the workspace, or the host sees them as changes. One line goes to stderr per
run; .output/ is left to block outputs.
"""

import argparse
import datetime
import glob
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

# The agent env contract, plus AGENT_PROMPT_FILE for file delivery.
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

# deliverables.blockType by block type, as block_output.rs validates it.
DELIVERABLES_KIND = {
    "plan": "plan",
    "dev": "code",
    "test": "generic",
    "review": "generic",
    "devops": "generic",
}

# The sections the host adds to the prompt after the task (in the host's order).
RESTRICTION_LINE = "Only modify files matching:"
CHECKLIST_LINE = "You must produce the following outputs:"


def pair(text):
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"`{text}` is not PATH=CONTENT")
    path, content = text.split("=", 1)
    if not path:
        raise argparse.ArgumentTypeError(f"`{text}` has no PATH")
    return path, content.replace("\\n", "\n")


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="scripted_agent.py",
        description="A scripted stand-in for a coding agent (wfhost agent contract).",
    )
    p.add_argument("--role", choices=BLOCK_TYPES, default="dev",
                   help="the block type it plays (default: dev)")
    p.add_argument("--write", type=pair, action="append", default=[], metavar="PATH=CONTENT",
                   help="create or overwrite PATH (\\n in CONTENT is a newline); repeatable")
    p.add_argument("--append", type=pair, action="append", default=[], metavar="PATH=CONTENT",
                   help="append CONTENT to PATH (created if missing); repeatable")
    p.add_argument("--status", choices=["completed", "partial", "failed"], default="completed",
                   help="the reported status (default: completed; failing tests force failed)")
    p.add_argument("--summary", metavar="TEXT", help="the reported summary")
    p.add_argument("--sleep", type=float, default=0.0, metavar="SECONDS",
                   help="sleep before working (orders lane completion)")
    p.add_argument("--run-tests", metavar="DIR",
                   help="test role: run `python3 -m unittest discover -s DIR`")
    p.add_argument("--dump-context", metavar="FILE",
                   help="write argv, env contract, cwd and prompt as JSON to FILE")
    p.add_argument("--log", metavar="FILE", help="append NODE_ID to FILE on every run")
    p.add_argument("--telemetry", action="append", default=[], metavar="BODY",
                   help="POST BODY (JSON text) to $TELEMETRY_URL when telemetry is enabled")
    p.add_argument("--wait-for", metavar="FILE",
                   help="after the telemetry, wait until FILE exists (at most 120 s)")
    p.add_argument("--late-telemetry", action="append", default=[], metavar="BODY",
                   help="POST BODY to $TELEMETRY_URL after --wait-for")
    p.add_argument("--telemetry-log", metavar="FILE",
                   help="append the HTTP status of each telemetry POST to FILE")
    p.add_argument("--no-output", action="store_true", help="exit 0 without writing the output")
    p.add_argument("--as-prompted", action="store_true",
                   help="know nothing of the contract: write the output the prompt's example "
                        "shows, to the file the prompt names (what a model that follows its prompt does)")
    p.add_argument("--bad-json", action="store_true", help="write truncated JSON as the output")
    p.add_argument("--wrong-block-id", action="store_true",
                   help="write blockId `someone-else`")
    p.add_argument("--bad-status", action="store_true", help="write status `done`")
    p.add_argument("--flood", type=float, metavar="MB", help="write MB megabytes to stdout")
    p.add_argument("--hang", action="store_true", help="sleep forever")
    p.add_argument("--exit", type=int, default=0, metavar="CODE",
                   help="exit with CODE (after writing the output)")
    p.add_argument("--write-outside", type=pair, action="append", default=[],
                   metavar="PATH=CONTENT", help="write PATH without declaring it; repeatable")
    p.add_argument("--prompt-file", metavar="FILE",
                   help="read the prompt from FILE (for a `{prompt-file}` placeholder)")
    p.add_argument("prompt_arg", nargs="?", metavar="PROMPT",
                   help="the system prompt, when delivered as an argument")
    return p.parse_args(argv)


def read_prompt(args):
    """(prompt, source): --prompt-file, else a PROMPT argument, else the file
    AGENT_PROMPT_FILE names, else stdin."""
    if args.prompt_file:
        with open(args.prompt_file, encoding="utf-8") as f:
            return f.read(), "file"
    if args.prompt_arg is not None:
        return args.prompt_arg, "argument"
    path = os.environ.get("AGENT_PROMPT_FILE")
    if path:
        with open(path, encoding="utf-8") as f:
            return f.read(), "file"
    if sys.stdin is not None and not sys.stdin.isatty():
        return sys.stdin.read(), "stdin"
    return "", "none"


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def workspace_path(path):
    """The path as the output reports it: relative, normalised, with `/`."""
    rel = os.path.normpath(path)
    if os.path.isabs(rel):
        rel = os.path.relpath(rel, os.getcwd())
    return rel.replace(os.sep, "/")


class Changes:
    """What this run wrote, checked against the disk before each write."""

    def __init__(self):
        self.modified = []
        self.created = []

    def write(self, path, content, mode="w"):
        rel = workspace_path(path)
        if rel not in self.modified and rel not in self.created:
            (self.modified if os.path.lexists(path) else self.created).append(rel)
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        with open(path, mode, encoding="utf-8") as f:
            f.write(content)

    def changed(self):
        return sorted(self.modified + self.created)


def paragraphs(text):
    return [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def task_section(prompt):
    """The task instruction in a prompt assembled in the host's order (rules,
    prefix, task, restriction line, checklist): the last paragraph before the
    restriction line and the checklist."""
    parts = [
        p for p in paragraphs(prompt)
        if not p.startswith(RESTRICTION_LINE) and not p.startswith(CHECKLIST_LINE)
    ]
    return parts[-1] if parts else ""


def checklist(prompt):
    for p in paragraphs(prompt):
        if p.startswith(CHECKLIST_LINE):
            return [re.sub(r"^\d+\)\s*", "", l.strip()) for l in p.splitlines()[1:] if l.strip()]
    return []


def task_list(prompt):
    """One task per line of a multi-line task section (list markers and a
    leading "...:" heading dropped), else one per sentence; numbered T01,
    T02, ..."""
    text = task_section(prompt)
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        lines = lines[1:]  # a heading such as "Tasks:"
    if len(lines) > 1:
        items = [re.sub(r"^(?:[-*+]|\d+[.)])\s+", "", l) for l in lines]
    else:
        # Sentence ends are a [.!?] followed by whitespace, so `calc.py`
        # stays whole.
        items = [s.strip().rstrip(".") for s in re.split(r"(?<=[.!?])\s+", text)]
    items = [i for i in items if i] or ["Do the work"]
    return [f"T{n:02}: {item}" for n, item in enumerate(items, 1)]


def plan(prompt, changes):
    tasks = task_list(prompt)
    lines = ["# Plan", "", "## Tasks", ""]
    lines += [f"- {t}" for t in tasks]
    required = checklist(prompt)
    if required:
        lines += ["", "## Required outputs", ""] + [f"- {r}" for r in required]
    document = "\n".join(lines) + "\n"
    changes.write("PLAN.md", document)
    deliverables = {"blockType": "plan", "markdownDocument": document, "taskList": tasks}
    return deliverables, f"Planned {len(tasks)} task(s) in PLAN.md.", None


def run_tests(directory):
    """(passed, one-line result) of `python3 -m unittest discover -s DIR`."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "unittest", "discover", "-s", directory],
            capture_output=True,
            text=True,
            # No __pycache__ in the workspace: the host would see it as a change.
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
    except OSError as e:
        return False, f"cannot run unittest: {e}"
    lines = [l.strip() for l in proc.stderr.splitlines() if l.strip()]
    ran = next((l for l in reversed(lines) if l.startswith("Ran ")), "")
    ran = re.sub(r" in [0-9.]+s$", "", ran)  # the time would make it nondeterministic
    verdict = lines[-1] if lines else f"no output (exit {proc.returncode})"
    result = f"unittest in {directory}" + (f" ({ran})" if ran else "") + f": {verdict}"
    return proc.returncode == 0, result


def test(args):
    if not args.run_tests:
        text = "No tests run (no --run-tests DIR)."
        return {"blockType": "generic", "summary": text}, text, None
    passed, result = run_tests(args.run_tests)
    return {"blockType": "generic", "summary": result}, result, None if passed else "failed"


def review(out_dir, node_id, changes):
    own = f"block-{node_id}.json"
    outputs, rejected, lines = [], [], []
    for path in sorted(glob.glob(os.path.join(glob.escape(out_dir), "block-*.json"))):
        name = os.path.basename(path)
        if name == own:
            continue  # an earlier attempt of this very block
        if name.endswith(".rejected.json"):
            rejected.append(name)
            continue
        outputs.append(name)
        try:
            with open(path, encoding="utf-8") as f:
                o = json.load(f)
            files = sorted(set(o.get("filesModified", []) + o.get("filesCreated", [])))
            lines.append(
                f"- {o.get('blockId')}: {o.get('status')}: {o.get('summary')} "
                f"({o.get('blockType')}; files: {', '.join(files) or 'none'})"
            )
        except (OSError, ValueError, TypeError, AttributeError) as e:
            lines.append(f"- {name}: unreadable ({e})")
    doc = ["# Review", "", f"{len(outputs)} block output(s) in .output/:", ""]
    doc += lines or ["- none"]
    if rejected:
        doc += ["", "Rejected outputs (replaced by the host):", ""]
        doc += [f"- {r}" for r in rejected]
    changes.write("REVIEW.md", "\n".join(doc) + "\n")
    text = f"Reviewed {len(outputs)} block output(s) in REVIEW.md."
    return {"blockType": "generic", "summary": text}, text, None


def previous_note(out_dir):
    prev = os.environ.get("PREVIOUS_BLOCK_ID", "")
    if not prev:
        return "first block"
    try:
        with open(os.path.join(out_dir, f"block-{prev}.json"), encoding="utf-8") as f:
            return f"after {prev} ({json.load(f).get('status')})"
    except (OSError, ValueError, AttributeError):
        pass
    # A parallel block leaves one output per lane: block-<id>.<lane>.json.
    lanes = glob.glob(os.path.join(glob.escape(out_dir), f"block-{glob.escape(prev)}.*.json"))
    lanes = [l for l in lanes if not l.endswith(".rejected.json")]
    if lanes:
        return f"after {prev} ({len(lanes)} lane output(s))"
    return f"after {prev} (no readable output)"


def flood(megabytes):
    chunk = "x" * 65536
    try:
        for _ in range(int(megabytes * 16)):
            sys.stdout.write(chunk)
        sys.stdout.flush()
    except BrokenPipeError:
        # The host stopped reading; carry on as scripted.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def send_telemetry(body, log):
    """POST one body to the telemetry endpoint, as an agent's hook would."""
    if os.environ.get("TELEMETRY_ENABLED") != "1":
        status = "disabled"
    else:
        request = urllib.request.Request(
            os.environ["TELEMETRY_URL"], data=body.encode("utf-8"),
            headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                status = str(answer.status)
        except urllib.error.HTTPError as e:
            status = str(e.code)
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(status + "\n")


def prompted_output(prompt):
    """The file the prompt says to write and the example it shows."""
    path = re.search(r"to the file `([^`]+)`", prompt)
    example = re.search(r"```json\n(.*?)\n```", prompt, re.S)
    if not path or not example:
        sys.exit("scripted_agent: the prompt says nothing of where to write the result")
    return path.group(1), example.group(1) + "\n"


def main(argv):
    args = parse_args(argv)
    prompt, source = read_prompt(args)
    node_id = os.environ.get("NODE_ID", "")
    out_dir = os.environ.get("OUTPUT_DIR") or ".output"
    if args.dump_context:
        with open(args.dump_context, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "program": sys.argv[0],
                    "argv": argv,
                    "env": {k: os.environ.get(k) for k in CONTRACT},
                    "cwd": os.getcwd(),
                    "prompt": prompt,
                    "prompt_source": source,
                },
                f,
                indent=2,
            )
    if args.log:
        with open(args.log, "a", encoding="utf-8") as f:
            f.write(node_id + "\n")
    tag = f"scripted_agent[{node_id or '?'}] {args.role}"
    if not node_id:
        print(f"{tag}: NODE_ID is not set; not run by an agent host?", file=sys.stderr)
        return 2

    for body in args.telemetry:
        send_telemetry(body, args.telemetry_log)
    if args.wait_for:
        deadline = time.monotonic() + 120
        while not os.path.exists(args.wait_for):
            if time.monotonic() > deadline:
                print(f"{tag}: {args.wait_for} did not appear", file=sys.stderr)
                return 1
            time.sleep(0.05)
    for body in args.late_telemetry:
        send_telemetry(body, args.telemetry_log)
    if args.sleep:
        time.sleep(args.sleep)
    if args.hang:
        print(f"{tag}: hanging (--hang)", file=sys.stderr, flush=True)
        while True:
            time.sleep(3600)
    if args.flood:
        flood(args.flood)

    changes = Changes()
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

    forced_status = None
    if args.role == "plan":
        deliverables, text, forced_status = plan(prompt, changes)
    elif args.role == "test":
        deliverables, text, forced_status = test(args)
    elif args.role == "review":
        deliverables, text, forced_status = review(out_dir, node_id, changes)
    else:
        changed = changes.changed()
        text = f"Changed {len(changed)} file(s): {', '.join(changed)}." if changed else "No changes."
        if args.role == "dev":
            deliverables = {"blockType": "code", "filesChanged": changed,
                            "diffSummary": args.summary or text}
        else:
            deliverables = {"blockType": "generic", "summary": args.summary or text}
    status = forced_status or args.status
    summary = args.summary or text

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
    if args.as_prompted:
        target, example = prompted_output(prompt)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as f:
            f.write(example)
        wrote = f"wrote {target} as the prompt showed"
    elif args.no_output:
        wrote = "no output (--no-output)"
    else:
        os.makedirs(out_dir, exist_ok=True)
        target = os.path.join(out_dir, f"block-{node_id}.json")
        with open(target, "w", encoding="utf-8") as f:
            if args.bad_json:
                f.write('{"blockId": ')
            else:
                json.dump(output, f, indent=2)
                f.write("\n")
        wrote = f"wrote {target}" + (" (truncated, --bad-json)" if args.bad_json else "")
    print(
        f"{tag}, {previous_note(out_dir)}, prompt by {source} ({len(prompt)} chars): "
        f"{output['status']}, {len(changes.created)} created, {len(changes.modified)} modified; "
        f"{wrote}; exit {args.exit}: {summary}",
        file=sys.stderr,
    )
    return args.exit


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
