#!/usr/bin/env python3
"""A scripted agent that speaks seed 001's JSON protocol.

It reads the universal input JSON from stdin and prints exactly one universal
output JSON object on stdout. --status picks the answer (OK, BLOCKED,
NEEDS_INFO, NEEDS_DECISION, FAIL); --write PATH=CONTENT changes a file (and
reports it in artifacts.files_changed); --prose breaks the protocol by
printing a sentence before the JSON.
"""

import argparse
import json
import os
import sys


def pair(text):
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"`{text}` is not PATH=CONTENT")
    path, content = text.split("=", 1)
    return path, content.replace("\\n", "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--status",
        choices=["OK", "BLOCKED", "NEEDS_INFO", "NEEDS_DECISION", "FAIL"],
        default="OK",
    )
    p.add_argument("--summary")
    p.add_argument("--write", type=pair, action="append", default=[])
    p.add_argument("--prose", action="store_true")
    p.add_argument("rest", nargs="*", help="ignored (e.g. a prompt passed as an argument)")
    args = p.parse_args()

    task = json.load(sys.stdin)["task"]
    changed = []
    for path, content in args.write:
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)
        changed.append(path)
    answer = {
        "status": args.status,
        "summary": args.summary or f"{task['id']}: {task['title']} ({args.status})",
        "artifacts": {"files_changed": changed, "notes": [f"goal: {task['goal']}"]},
        "gates": {
            "meets_definition_of_done": args.status == "OK",
            "needs_review": True,
            "needs_tests": False,
            "security_concerns": [],
        },
        "next": {
            "recommended_agent": "Reviewer",
            "recommended_task_id": task["id"],
            "reason": "review the change",
        },
    }
    if args.prose:
        print("Sure! Here is what I did:")
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
