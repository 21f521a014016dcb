#!/usr/bin/env python3
"""Record what WorkRail's published workflow schema says about edits of our
example WorkRail workflows, for wfhost's differential schema test.

For every example under host/core/src/formats/workrail/testdata/ (our own
workflows, written in WorkRail's format) this makes single-field edits —
remove the field, an empty value, a value of the wrong type, a value
breaking a pattern, an enum, a bound or a length, a repeated item, an
unknown sibling key, another kind for a `type`/`kind` — and asks the
PUBLISHED schema (Draft 7, Python `jsonschema` 4.x) for its verdict: valid
or not, and the instance pointers and keywords of its errors. The edits
and the verdicts go to testdata/schema-verdicts.json; the Rust test
(`formats::workrail::schema::tests`) applies the same edits and requires
wfhost's validator to agree. CI never runs this script.

The published schema is read from a file (--schema) or from a WorkRail
checkout or mirror (--repo, `git show HEAD:spec/workflow.schema.json`).

  scripts/workrail-schema-verdicts.py --repo ~/src/workrail
  scripts/workrail-schema-verdicts.py --schema workflow.schema.json --ours

--ours also runs wfhost's schema under Python and reports disagreements
(a quick check while editing it). --corpus DIR --corpus-out FILE records
the verdicts on every *.json in DIR instead (for the ignored Rust test
that checks WorkRail's own workflows; such files are not committed):

  scripts/workrail-schema-verdicts.py --repo R --corpus DIR --corpus-out /tmp/v.json
  WFHOST_WORKRAIL_CORPUS=DIR WFHOST_WORKRAIL_VERDICTS=/tmp/v.json \\
    cargo test -p wfhost-core --release --lib workrail -- --ignored --nocapture

Python's `re` differs from JavaScript's RegExp (WorkRail's dialect) on
`$` before a final newline and on non-ASCII digits for `\\d`; no edit uses
such values, so the verdicts recorded are JavaScript's too.
"""

import argparse
import copy
import hashlib
import json
import pathlib
import subprocess
import sys

from jsonschema import Draft7Validator

ROOT = pathlib.Path(__file__).resolve().parent.parent
WORKRAIL = ROOT / "host/core/src/formats/workrail"
TESTDATA = WORKRAIL / "testdata"
OUT = TESTDATA / "schema-verdicts.json"
OURS = WORKRAIL / "workflow.schema.json"

UNKNOWN_KEY = "x-note"
# Other kinds tried for a `type` or `kind` value, by its current value.
KIND_RINGS = [
    ["loop", "parallel", "Loop"],
    ["while", "until", "for", "forEach"],
    ["contains", "regex", "length", "schema"],
    ["string", "number", "boolean", "array", "object", "integer"],
    ["text", "ref", "Text"],
    ["artifact_contract", "context_variable"],
    ["coordinator_eval", "human_approval", "auto"],
    ["require_followup", "block"],
]
# Values for keys with a pattern or a fixed form.
FORM_VALUES = {
    "id": ["ab", "ns.flow-x", "a.b", "9a.bc", "abc-DEF", "has space", "x" * 65, "abc_def"],
    "version": ["v1", "1.0", "1.0.0-", "01.0.0", "1.0.0-alpha.1+sha.5", "1.0.0+", "1.0.0-01"],
    "name": ["9lives", "camelCase_9", "has-dash"],
    "slotId": ["a", "Slot", "slot_2"],
    "iterationVar": ["2x", "ok_name", "has-dash"],
    "functionReferences": [["noParens"], ["ok()", "ok()"], ["9bad()"]],
    "allowedTools": [["-tool"], ["ns:tool-2"], ["a b"]],
    "agentRole": ["short one", "exactly10!"],
    "examples": [["too short"], ["ten chars!"], ["a", "b", "c", "d", "e", "f", "g"]],
    "levels": [["one"], ["a", "a"]],
    "metricsProfile": ["Coding", "none"],
    "modelTier": ["heavy", "max"],
    "resolveFrom": ["package", "url"],
    "scope": ["loop", "global"],
    "count": [-1, 0, 1000, 1000.5, "n", True],
    "maxIterations": [0, 1, 1000, 1001, 0.5, "5"],
    "validatedAgainstSpecVersion": [0, 2.5, 2.0, "3"],
}
LONG = 8193  # longer than any maxLength of the published schema


def pointer(parts):
    esc = (str(p).replace("~", "~0").replace("/", "~1") for p in parts)
    return "".join("/" + p for p in esc)


def walk(value, parts=()):
    """Every (path, value) below the root, in document order."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield parts + (key,), child
            yield from walk(child, parts + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield parts + (index,), child
            yield from walk(child, parts + (index,))


def wrong_type(value):
    if isinstance(value, bool):
        return "true"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return 7
    if isinstance(value, list):
        return {"0": value[0]} if value else {}
    return ["not an object"]


def shape(doc, path):
    """A path with each array index replaced by the kind of its item (a
    step's `type`, `std` for a standard step): edits at paths of the same
    shape (the `title` of two standard steps) test the same constraint."""
    out, cur = [], doc
    for part in path:
        cur = cur[part] if isinstance(cur, (dict, list)) else None
        if isinstance(part, int):
            out.append("*" + (cur.get("type", "std") if isinstance(cur, dict) else type(cur).__name__))
        else:
            out.append(part)
    return tuple(out[-2:])


def mutations(path, value):
    """The edits of the value at `path`, each as (op fields)."""
    key = path[-1]
    in_list = isinstance(key, int)
    yield {"op": "remove"}
    yield {"op": "set", "value": wrong_type(value)}
    if isinstance(value, str):
        yield {"op": "set", "value": ""}
        if not in_list:
            yield {"op": "set", "value": "Not Valid!"}
            yield {"op": "set", "repeat": ["x", LONG]}
    elif isinstance(value, bool):
        pass
    elif isinstance(value, (int, float)):
        for v in (-1, 0, 1001, 0.5):
            if v != value:
                yield {"op": "set", "value": v}
    elif isinstance(value, list):
        yield {"op": "set", "value": []}
        if value:
            yield {"op": "append", "value": copy.deepcopy(value[0])}
    elif isinstance(value, dict):
        yield {"op": "set", "value": {}}
        yield {"op": "add", "key": UNKNOWN_KEY, "value": "unexpected"}
    if not in_list:
        for v in FORM_VALUES.get(key, []):
            yield {"op": "set", "value": v}
        if key in ("type", "kind") and isinstance(value, str):
            for ring in KIND_RINGS:
                if value in ring:
                    for v in ring:
                        if v != value:
                            yield {"op": "set", "value": v}


def edits_of(doc, seen):
    """The single-field edits of one workflow not already made at a path
    of the same shape (`seen`, across files), in document order."""
    out = []
    for path, value in walk(doc):
        at = pointer(path)
        for m in mutations(path, value):
            label = json.dumps(m, sort_keys=True)
            if (shape(doc, path), label) in seen:
                continue
            seen.add((shape(doc, path), label))
            if m["op"] == "add":
                out.append({"op": "set", "at": at + "/" + m["key"], "value": m["value"]})
            else:
                out.append({"at": at, **m})
    for extra in ({"op": "set", "at": "/" + UNKNOWN_KEY, "value": 1},
                  {"op": "set", "at": "/$schema", "value": "https://example.org/workflow.json"}):
        label = json.dumps(extra, sort_keys=True)
        if ((), label) not in seen:
            seen.add(((), label))
            out.append(extra)
    return out


def apply(doc, edit):
    """The workflow with one edit applied (as the Rust test applies it)."""
    doc = copy.deepcopy(doc)
    parts = [p.replace("~1", "/").replace("~0", "~") for p in edit["at"].split("/")[1:]]
    parent = doc
    for p in parts[:-1]:
        parent = parent[int(p)] if isinstance(parent, list) else parent[p]
    last = parts[-1]
    target = int(last) if isinstance(parent, list) else last
    if edit["op"] == "remove":
        del parent[target]
    elif edit["op"] == "append":
        parent[target].append(copy.deepcopy(edit["value"]))
    elif "repeat" in edit:
        text, times = edit["repeat"]
        parent[target] = text * times
    else:
        parent[target] = copy.deepcopy(edit["value"])
    return doc


def unknown_keys(error):
    """The places of the keys an additionalProperties error refuses (wfhost
    reports each unknown key at its own pointer, not at its object)."""
    known = error.schema.get("properties", {})
    base = pointer(error.absolute_path)
    return {base + pointer([k]) for k in error.instance if k not in known}


def inner_places(error):
    """Every instance pointer an alternative's branches report errors at
    (an unknown key both at its object and at its own pointer)."""
    places = set()
    for sub in error.context or []:
        places.add(pointer(sub.absolute_path))
        if sub.validator == "additionalProperties":
            places |= unknown_keys(sub)
        places |= inner_places(sub)
    return places


ALTERNATIVES = ("oneOf", "anyOf")


def verdict(validator, doc):
    """Valid or not, and the errors as [pointer, keyword], with the places
    of its keys for additionalProperties and, for a failed oneOf/anyOf,
    the places its branches found errors at."""
    errors = {}
    for e in validator.iter_errors(doc):
        key = (pointer(e.absolute_path), e.validator)
        places = errors.setdefault(key, set())
        if e.validator in ALTERNATIVES:
            places |= inner_places(e)
        elif e.validator == "additionalProperties":
            places |= unknown_keys(e)
    listed = [[p, kw, sorted(errors[(p, kw)])] if errors[(p, kw)] else [p, kw]
              for p, kw in sorted(errors)]
    return {"valid": not errors, "errors": listed}


def under(p, q):
    return p == q or p.startswith(q + "/")


def places_of(ours):
    """Where wfhost reports a verdict's errors: unknown keys at their own
    pointers."""
    mine = set()
    for p, kw, *inner in ours["errors"]:
        mine |= set(inner[0]) if kw == "additionalProperties" else {p}
    return mine


def refines(published, ours):
    """Whether our error places agree with the published ones: the same
    places, an unknown key at its own pointer rather than its object's,
    and under a published oneOf/anyOf (which WorkRail reports at the
    alternative, wfhost at the field) places one of its branches found an
    error at."""
    theirs = published["errors"]
    mine = places_of(ours)
    for p, kw, *inner in theirs:
        if kw in ALTERNATIVES:
            if not any(under(m, p) for m in mine):
                return False
        elif kw == "additionalProperties":
            if not set(inner[0]) <= mine:
                return False
        elif p not in mine:
            return False
    for m in mine:
        if not any(m == e[0] and e[1] != "additionalProperties"
                   or (e[1] == "additionalProperties" and m in e[2])
                   or (e[1] in ALTERNATIVES and under(m, e[0]) and m in e[2])
                   for e in theirs):
            return False
    return True


def load_schema(args):
    if args.schema:
        text = pathlib.Path(args.schema).read_text()
    else:
        text = subprocess.run(
            ["git", "-C", args.repo, "show", "HEAD:spec/workflow.schema.json"],
            check=True, capture_output=True, text=True).stdout
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--schema", help="the published spec/workflow.schema.json")
    source.add_argument("--repo", help="a WorkRail checkout or mirror")
    parser.add_argument("--ours", action="store_true",
                        help="also check wfhost's schema under Python and report disagreements")
    parser.add_argument("--corpus", help="a directory of WorkRail workflows to record instead")
    parser.add_argument("--corpus-out", help="where --corpus writes its verdicts")
    args = parser.parse_args()

    text = load_schema(args)
    published = Draft7Validator(json.loads(text))
    ours = Draft7Validator(json.loads(OURS.read_text())) if args.ours else None

    if args.corpus:
        files = {}
        for path in sorted(pathlib.Path(args.corpus).glob("*.json")):
            files[path.name] = verdict(published, json.loads(path.read_text()))
        out = pathlib.Path(args.corpus_out or "workrail-corpus-verdicts.json")
        out.write_text(json.dumps({"files": files}, indent=1) + "\n")
        print(f"{len(files)} files, {sum(not v['valid'] for v in files.values())} invalid -> {out}",
              file=sys.stderr)
        return

    files, edits, disagreements, seen = {}, [], 0, set()
    for path in sorted(TESTDATA.glob("*.json")):
        if path == OUT:
            continue
        doc = json.loads(path.read_text())
        files[path.name] = verdict(published, doc)
        if not files[path.name]["valid"]:
            sys.exit(f"{path.name} is not valid under the published schema: {files[path.name]}")
        for edit in edits_of(doc, seen):
            edited = apply(doc, edit)
            record = {"file": path.name, **edit, **verdict(published, edited)}
            edits.append(record)
            if ours is not None:
                mine = verdict(ours, edited)
                if mine["valid"] != record["valid"] or not refines(record, mine):
                    disagreements += 1
                    print(f"disagree: {path.name} {edit} published={record} ours={mine}",
                          file=sys.stderr)

    lines = [
        "{",
        f' "about": {json.dumps("Verdicts of WorkRail published workflow schema on single-field edits of the workflows in this directory; written by scripts/workrail-schema-verdicts.py, checked by formats::workrail::schema tests. Errors are [instance pointer, keyword].")},',
        f' "schema": {json.dumps({"source": "WorkRail spec/workflow.schema.json", "title": json.loads(text).get("title"), "id": json.loads(text).get("$id"), "sha256": hashlib.sha256(text.encode()).hexdigest()})},',
        f' "files": {json.dumps(files, sort_keys=True)},',
        ' "edits": [',
    ]
    lines += ["  " + json.dumps(e) + ("," if i + 1 < len(edits) else "") for i, e in enumerate(edits)]
    lines += [" ]", "}"]
    OUT.write_text("\n".join(lines) + "\n")
    invalid = sum(not e["valid"] for e in edits)
    print(f"{len(edits)} edits of {len(files)} files ({invalid} invalid) -> {OUT.relative_to(ROOT)}",
          file=sys.stderr)
    if ours is not None:
        print(f"wfhost's schema under Python: {disagreements} disagreements", file=sys.stderr)
        sys.exit(1 if disagreements else 0)


if __name__ == "__main__":
    main()
