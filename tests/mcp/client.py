"""Drives `wfhost mcp` with the official Python MCP client, as an agent would.

Usage: client.py WFHOST HOME WORKFLOWS WORKSPACE CACHE
Exits non-zero with a message naming the failed check.
"""

import asyncio
import json
import os
import subprocess
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

WFHOST, HOME, WORKFLOWS, WORKSPACE, CACHE = sys.argv[1:6]


def check(cond, what, detail=None):
    if not cond:
        raise SystemExit(f"FAILED: {what}" + (f"\n{detail}" if detail is not None else ""))


def server(home=None):
    return StdioServerParameters(
        command=WFHOST,
        args=["mcp", "--home", home or HOME, "--workflows", WORKFLOWS, "--workspace", WORKSPACE,
              "--cache-dir", CACHE],
        env={"WFHOST_DURABILITY": "normal"},
    )


# Execution replies are text first, with the JSON as structured content;
# the others mirror their JSON as text.
EXECUTION = {"workflow_start", "start_workflow", "workflow_advance", "continue_workflow",
             "workflow_checkpoint", "checkpoint_workflow"}


async def call(session, tool, args, **kw):
    result = await session.call_tool(tool, args, **kw)
    text = result.content[0].text if result.content else ""
    body = result.structured_content
    check(body is not None, f"{tool} returns structured content", text)
    if tool not in EXECUTION:
        check(json.loads(text) == body, f"{tool}'s text mirrors its structured content", text)
    elif result.is_error:
        check(text.startswith(f"Error {body['code']}: "), f"{tool}'s error reads as text", text)
    else:
        check(body["session"]["runId"] in text, f"{tool}'s text names the run", text)
        pending = body.get("pending")
        if pending:
            check(pending["prompt"].strip() in text, f"{tool}'s text holds the pending prompt", text)
        if body.get("nextCall"):
            for token in body["nextCall"]["params"].values():
                check(str(token) in text, f"{tool}'s text holds the tokens to go on with", text)
    return result.is_error, body, text


async def ok(session, tool, args, **kw):
    is_error, body, text = await call(session, tool, args, **kw)
    check(not is_error, f"{tool} succeeds", text)
    return body, text


async def error(session, tool, args, code):
    is_error, body, text = await call(session, tool, args)
    check(is_error, f"{tool} is refused with {code}", text)
    check(body["code"] == code, f"{tool} is refused with {code}, not {body.get('code')}", text)
    check("retry" in body and "message" in body, "an error has a message and retry advice", text)
    return body


def wfhost(*args, home=None):
    done = subprocess.run([WFHOST, *args, "--home", home or HOME], capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


async def scenario():
    async with stdio_client(server()) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            check(init.server_info.name == "wfhost", "the server says it is wfhost", init.server_info)

            tools = {t.name: t for t in (await session.list_tools()).tools}
            for name in ["workflow_list", "workflow_inspect", "workflow_start", "workflow_advance",
                         "workflow_checkpoint", "list_workflows", "inspect_workflow",
                         "start_workflow", "continue_workflow", "checkpoint_workflow", "resume_session",
                         "session_list", "session_export", "session_import"]:
                check(name in tools, f"tool {name} is listed", sorted(tools))
                t = tools[name]
                check(t.title and t.output_schema and t.annotations, f"{name} has a title, output schema and annotations", t)
            check(tools["workflow_list"].annotations.read_only_hint is True, "workflow_list is read-only")
            check(tools["workflow_advance"].annotations.idempotent_hint is True, "workflow_advance is idempotent")

            listed, _ = await ok(session, "workflow_list", {})
            ids = [w["workflowId"] for w in listed["workflows"]]
            check("review" in ids, "the review workflow is listed", listed)
            inspected, _ = await ok(session, "workflow_inspect", {"workflowId": "review"})
            check([s["external"] for s in inspected["steps"]].count(True) == 2, "two steps are external", inspected)
            missing = await error(session, "workflow_start", {"workflowId": "nope"}, "NOT_FOUND")
            check(missing["details"]["reason"] == "WORKFLOW_NOT_FOUND", "the reason is wfhost's", missing)
            await error(session, "workflow_start", {"workflowId": "review", "workspacePath": "rel/dir"},
                        "VALIDATION_ERROR")
            await error(session, "workflow_start", {"workflowId": "review", "bogus": 1}, "VALIDATION_ERROR")

            progress = []

            async def on_progress(p, total, message):
                progress.append(message)

            first, _ = await ok(session, "workflow_start", {"workflowId": "review", "context": {"topic": "owls"}})
            check(first["status"] == "waiting" and not first["isComplete"], "the run waits for the client", first)
            pending = first["pending"]
            check(pending["stepId"] == "main.draft" and pending["title"] == "Draft a summary", "the first pending step", pending)
            check("owls" in pending["prompt"] and "Be brief" in pending["prompt"], "the prompt is assembled with the inputs", pending)
            check(pending["outputSchema"]["required"] == ["summary"], "the step's output schema is given", pending)
            run_id = first["session"]["runId"]
            st, ak = first["stateToken"], first["ackToken"]

            check(first["kind"] == "ok" and first["preferences"] == {"autonomy": "guided", "riskPolicy": "conservative"},
                  "a reply is ok, with the client's preferences", first)
            # Output that fails the step's schema: blocked, nothing advanced,
            # the same tokens work again.
            bad, _ = await ok(session, "workflow_advance",
                              {"stateToken": st, "ackToken": ak, "output": {"notesMarkdown": "x"}})
            check(bad["kind"] == "blocked" and bad["retryable"] and bad["validation"]["issues"],
                  "the output is blocked with the schema's errors", bad)
            check(bad["blockers"]["blockers"][0]["code"] == "INVALID_REQUIRED_OUTPUT", "the blocker's code", bad)
            check(bad["stateToken"] == st and bad["ackToken"] == ak and bad["session"]["steps"] == first["session"]["steps"],
                  "the run did not move", bad)

            args = {"stateToken": st, "ackToken": ak, "output": {"notesMarkdown": "drafted", "summary": "Owls hunt at night."}}
            second, second_text = await ok(session, "workflow_advance", args, progress_callback=on_progress)
            check(second["pending"]["stepId"] == "main.review", "the host ran `count` and waits at review", second)
            check(second["pending"]["requireConfirmation"] and second["nextIntent"] == "await_user_confirmation",
                  "review asks for confirmation", second)
            check(second["session"]["steps"] == 2, "two steps done", second)
            check(any("main.count" in m for m in progress), "progress names the host's step", progress)

            # The same call again: the same reply, byte for byte, nothing advanced.
            _, again_text = await ok(session, "workflow_advance", args)
            check(again_text == second_text, "a repeat gets the identical reply", (again_text, second_text))
            # The same tokens with other output: refused, with a fork offered.
            changed = dict(args, output={"summary": "Owls sleep by day."})
            used = await error(session, "workflow_advance", changed, "ACK_ALREADY_USED")
            check(used["details"]["recordedDigest"] != used["details"]["givenDigest"], "both digests are named", used)

            # Tokens that are not right.
            tampered = st[:-2] + ("A" if st[-2] != "A" else "B") + st[-1]
            await error(session, "workflow_advance", dict(args, stateToken=tampered), "TOKEN_BAD_SIGNATURE")
            await error(session, "workflow_advance", dict(args, stateToken=st[:30]), "TOKEN_INVALID_FORMAT")
            wrong = await error(session, "workflow_advance", dict(args, stateToken=ak), "TOKEN_SCOPE_MISMATCH")
            check(wrong["details"]["reason"] == "TOKEN_WRONG_KIND", "an ack as state token", wrong)
            other, _ = await ok(session, "workflow_start", {"workflowId": "review"})
            await error(session, "workflow_advance", dict(args, ackToken=other["ackToken"]), "TOKEN_SCOPE_MISMATCH")
            await error(session, "workflow_advance",
                        dict(args, ackToken=second["ackToken"]), "TOKEN_SCOPE_MISMATCH")

            # A checkpoint records notes and advances nothing.
            cp, _ = await ok(session, "workflow_checkpoint", {"stateToken": second["stateToken"], "notesMarkdown": "half way"})
            check(cp["checkpointed"] and cp["pending"]["stepId"] == "main.review", "checkpointed in place", cp)

            # Two advances of one snapshot at once: exactly one is recorded.
            race = [
                call(session, "workflow_advance", {"stateToken": second["stateToken"], "ackToken": second["ackToken"],
                                                   "output": {"signal": signal}})
                for signal in ["SIGNAL:SUCCESS", "SIGNAL:REDO"]
            ]
            results = await asyncio.gather(*race)
            wins = [b for is_error, b, _ in results if not is_error]
            losses = [b for is_error, b, _ in results if is_error]
            check(len(wins) == 1 and len(losses) == 1, "one advance wins", results)
            check(losses[0]["code"] in ("TOKEN_SESSION_LOCKED", "ACK_ALREADY_USED"), "the other is refused", losses)
            if losses[0]["code"] == "TOKEN_SESSION_LOCKED":
                check(losses[0]["retry"] == {"kind": "retryable_after_ms", "afterMs": 1000}, "busy is retryable", losses)

            # The old draft snapshot, with the fork ack it was offered: a branch.
            fork_args = dict(changed, ackToken=used["details"]["fork"]["ackToken"])
            forked, forked_text = await ok(session, "workflow_advance", fork_args)
            check(forked["session"]["branch"] != first["session"]["branch"], "advancing an old snapshot branches", forked)
            _, forked_again = await ok(session, "workflow_advance", fork_args)
            check(forked_again == forked_text, "a repeated fork replays", forked_again)
            # `fork: true` does the same in one call.
            direct, _ = await ok(session, "workflow_advance",
                                 dict(args, output={"summary": "Owls are birds."}, fork=True))
            check(direct["session"]["branch"] not in (first["session"]["branch"], forked["session"]["branch"]),
                  "fork: true branches again", direct)

            # WorkRail's names: continue with one token, to the end.
            cont = forked
            while not cont["isComplete"]:
                signal = "SIGNAL:SUCCESS"
                output = {"notesMarkdown": "ok", "signal": signal}
                if cont["pending"]["stepId"] == "main.draft":
                    output["summary"] = "again"
                cont, _ = await ok(session, "continue_workflow", {"continueToken": cont["continueToken"], "output": output})
            check(cont["status"] == "succeeded" and cont["nextCall"] is None, "the run completes", cont)

            rc, shown = wfhost("show", run_id)
            check(rc == 0 and shown.count("forked from") >= 2, "show lists the branches", shown)
            rc, events = wfhost("events", run_id)
            check("checkpoint" in events, "the checkpoint is in the log", events)

            return st, ak, args, second_text


async def workrail_walk():
    # A workflow in WorkRail's own format, driven with WorkRail's tool
    # names: a forEach loop, a loop the agent ends with a loop-control
    # artifact, a step that runs only when a condition holds.
    async with stdio_client(server()) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed, _ = await ok(session, "list_workflows", {})
            check("triage" in [w["workflowId"] for w in listed["workflows"]], "the WorkRail workflow is listed", listed)
            cur, _ = await ok(session, "start_workflow", {"workflowId": "triage", "context": {"service": "billing"}})
            pending = cur["pending"]
            check(pending["stepId"] == "gather" and pending["title"] == "Gather failing tests", "starts at gather", pending)
            check(cur["continueToken"].startswith("ct_") and len(cur["continueToken"]) == 27,
                  "continue tokens are WorkRail's short tokens", cur["continueToken"])
            check("## Agent Role Instructions" in pending["prompt"] and "billing" in pending["prompt"]
                  and "Report facts" in pending["prompt"], "the WorkRail prompt is rendered with the context", pending)

            async def go(output, context=None, expect_error=None, intent=None):
                args = {"continueToken": cur["continueToken"], "output": output}
                if context is not None:
                    args["context"] = context
                if intent is not None:
                    args["intent"] = intent
                if expect_error:
                    return await error(session, "continue_workflow", args, expect_error)
                body, _ = await ok(session, "continue_workflow", args)
                return body

            # Without notes or artifacts a call rehydrates (WorkRail's default).
            again = await go({})
            check(again["nextIntent"] == "rehydrate_only" and again["pending"]["stepId"] == "gather",
                  "no output: a rehydrate", again)
            # Notes are required and must meet the step's criteria: blocked.
            blocked = await go({}, intent="advance")
            check(blocked["kind"] == "blocked"
                  and blocked["blockers"]["blockers"][0]["code"] == "MISSING_REQUIRED_NOTES", "notes are required", blocked)
            refused = await go({"notesMarkdown": "listed them"})
            check(refused["kind"] == "blocked" and any("how many tests" in i for i in refused["validation"]["issues"]),
                  "the criterion's message is returned", refused)
            # A forEach over context that is not there: refused before
            # anything is recorded; the same token works with it.
            lost = await go({"notesMarkdown": "2 failing"}, {"severity": "high"}, expect_error="PRECONDITION_FAILED")
            check(lost["details"]["reason"] == "LOOP_MISSING_CONTEXT" and "tests" in lost["message"],
                  "the loop's missing context is named", lost)
            cur = await go({"notesMarkdown": "2 failing"}, {"tests": ["t_login", "t_refund"], "severity": "high"})
            seen = []
            while cur["pending"]["stepId"] == "diagnose":
                seen.append(cur["pending"]["prompt"])
                cur = await go({"notesMarkdown": "diagnosed"})
            check(len(seen) == 2 and "Diagnose t_login (test 0" in seen[0] and "Diagnose t_refund (test 1" in seen[1],
                  "the forEach loop runs its body once per item with the item in the prompt", seen)
            check("## Loop Context" in seen[1] and "Iteration: 2" in seen[1], "the loop context is in the prompt", seen[1])
            rounds = 0
            while cur["pending"]["stepId"] in ("fix", "decide"):
                if cur["pending"]["stepId"] == "fix":
                    rounds += 1
                    cur = await go({"notesMarkdown": f"fix {rounds}"})
                    continue
                missing = await go({"notesMarkdown": "decided"})
                check(missing["kind"] == "blocked"
                      and missing["blockers"]["blockers"][0]["code"] == "MISSING_REQUIRED_OUTPUT",
                      "a loop-control step without its artifact is blocked, retryably", missing)
                decision = "continue" if rounds < 2 else "stop"
                cur = await go({"notesMarkdown": "decided",
                                "artifacts": [{"kind": "wr.loop_control", "decision": decision}]})
            check(rounds == 2, "the loop stops when the agent says stop", rounds)
            check(cur["pending"]["stepId"] == "escalate" and cur["pending"]["requireConfirmation"],
                  "severity high: the conditional step runs, asking for confirmation", cur)
            cur = await go({"notesMarkdown": "escalated"})
            check(cur["pending"]["stepId"] == "summary", "then the summary", cur)
            cur = await go({}, intent="advance")
            check(cur["isComplete"] and cur["status"] == "succeeded", "the WorkRail workflow completes", cur)

            # With low severity the conditional step is skipped.
            cur, _ = await ok(session, "start_workflow", {"workflowId": "triage", "context": {"service": "search"}})
            cur = await go({"notesMarkdown": "0 failing"}, {"tests": [], "severity": "low"})
            check(cur["pending"]["stepId"] == "fix", "an empty forEach runs no body", cur)
            cur = await go({"notesMarkdown": "nothing"})
            cur = await go({"notesMarkdown": "done", "artifacts": [{"kind": "wr.loop_control", "decision": "stop"}]})
            check(cur["pending"]["stepId"] == "summary", "severity low: escalate is skipped", cur)

            # A run started by `wfhost run` rests at its first external
            # block; resume_session finds it and hands out its tokens.
            rc, out = wfhost("run", WORKFLOWS + "/triage.json", "--workspace", WORKSPACE, "--set", "service=cli")
            check(rc == 3 and "resume_session" in out, "wfhost run waits at the first external block", out)
            run_id = out.split("run ", 1)[1].split()[0]
            found, _ = await ok(session, "resume_session", {"runId": run_id})
            check(found["totalEligible"] == 1 and found["candidates"][0]["whyMatched"] == ["matched_exact_id"],
                  "resume_session finds the run by id", found)
            resumed = found["candidates"][0]["resume"]
            check(resumed["pending"]["stepId"] == "gather" and "cli" in resumed["pending"]["prompt"],
                  "with its pending step", resumed)
            cur = resumed
            cur = await go({"notesMarkdown": "1 failing"}, {"tests": ["t"], "severity": "low"})
            check(cur["pending"]["stepId"] == "diagnose", "a resumed run advances", cur)
            mine, _ = await ok(session, "resume_session", {"workflowId": "triage"})
            check(mine["totalEligible"] == 3 and all(c["workflowId"] == "triage" for c in mine["candidates"]),
                  "resume_session filters by workflow", mine)
            check(mine["candidates"][0]["status"] == "waiting", "waiting runs come first", mine)
            await error(session, "resume_session", {"runId": "run-nope"}, "NOT_FOUND")


async def sessions():
    # Runs grouped by the client's session id or the workspace's git
    # branch; found again by session; moved to another home as one bundle,
    # over MCP and with the CLI.
    repo = os.path.join(WORKSPACE, "repo")
    os.makedirs(os.path.join(repo, ".git"), exist_ok=True)
    with open(os.path.join(repo, ".git", "HEAD"), "w") as f:
        f.write("ref: refs/heads/feature-x\n")
    second_home = HOME + "-second"
    async with stdio_client(server()) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            first, _ = await ok(session, "start_workflow", {"workflowId": "triage", "sessionId": "chat-42",
                                                            "context": {"service": "a"}})
            check(first["session"]["sessionId"] == "chat-42", "the run is in the client's session", first)
            await ok(session, "continue_workflow", {"continueToken": first["continueToken"],
                                                    "output": {"notesMarkdown": "0 failing"},
                                                    "context": {"tests": [], "severity": "low"}})
            await ok(session, "start_workflow", {"workflowId": "triage", "sessionId": "chat-42",
                                                 "context": {"service": "b"}})
            on_branch, _ = await ok(session, "start_workflow", {"workflowId": "triage", "workspacePath": repo,
                                                                "context": {"service": "c"}})
            check(on_branch["session"].get("gitBranch") == "feature-x"
                  and on_branch["session"]["sessionId"].startswith("git:feature-x@"),
                  "without a session id, the git branch names the session", on_branch["session"])
            await error(session, "start_workflow", {"workflowId": "triage", "sessionId": ""}, "VALIDATION_ERROR")

            found, _ = await ok(session, "resume_session", {"sessionId": "chat-42"})
            check(found["totalEligible"] == 2 and all("matched_session" in c["whyMatched"] for c in found["candidates"]),
                  "resume_session finds the session's runs", found)
            found, _ = await ok(session, "resume_session", {"gitBranch": "feature-x"})
            check(found["totalEligible"] == 1
                  and found["candidates"][0]["runId"] == on_branch["session"]["runId"],
                  "resume_session finds runs by git branch", found)
            listed, _ = await ok(session, "session_list", {})
            mine = [s for s in listed["sessions"] if s["sessionId"] == "chat-42"]
            check(len(mine) == 1 and mine[0]["runs"] == 2 and mine[0]["source"] == "client", "session_list", listed)

            exported, _ = await ok(session, "session_export", {"sessionId": "chat-42"})
            check(exported["runs"] == 2 and exported["bundle"]["format"] == "wfhost-session-bundle",
                  "session_export returns the bundle", exported["runs"])
            await error(session, "session_export", {"sessionId": "nope"}, "NOT_FOUND")

    async with stdio_client(server(second_home)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            bad = json.loads(json.dumps(exported["bundle"]))
            bad["runs"][0]["events"][0]["at"] += 1
            await error(session, "session_import", {"bundle": bad}, "VALIDATION_ERROR")
            none, _ = await ok(session, "session_list", {})
            check(none["sessions"] == [], "a refused import writes nothing", none)
            imported, _ = await ok(session, "session_import", {"bundle": exported["bundle"]})
            check(len(imported["imported"]) == 2, "session_import adds the runs", imported)
            again, _ = await ok(session, "session_import", {"bundle": exported["bundle"]})
            check(again["imported"] == [] and len(again["alreadyPresent"]) == 2, "a repeat import adds nothing", again)
            found, _ = await ok(session, "resume_session", {"sessionId": "chat-42"})
            waiting = [c for c in found["candidates"] if c["status"] == "waiting"]
            check(len(waiting) == 2, "the imported runs wait where they were", found)
            nxt, _ = await ok(session, "continue_workflow", {"continueToken": waiting[0]["resume"]["continueToken"],
                                                             "output": {"notesMarkdown": "1 failing"},
                                                             "context": {"tests": ["t"], "severity": "low"}})
            check(not nxt["isComplete"], "an imported run advances in its new home", nxt)

    # The CLI: list, export to a file, import into a third home.
    rc, out = wfhost("session", "list")
    check(rc == 0 and "chat-42" in out and "git:feature-x@" in out, "wfhost session list", out)
    path = HOME + "-chat-42.session.json"
    rc, out = wfhost("session", "export", "chat-42", "-o", path)
    check(rc == 0 and "2 runs" in out, "wfhost session export", out)
    third = HOME + "-third"
    rc, out = wfhost("session", "import", path, home=third)
    check(rc == 0 and "2 runs added" in out, "wfhost session import", out)
    rc, out = wfhost("session", "import", path + ".missing", home=third)
    check(rc == 2 and "cannot read" in out, "a missing bundle file is named", out)
    rc, out = wfhost("session", "export", "nope", "-o", path)
    check(rc == 2 and "unknown session" in out, "an unknown session is named", out)


async def after_rotation(st, ak, args, second_text):
    # A new server after a key rotation: tokens of the previous key still work.
    async with stdio_client(server()) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            _, text = await ok(session, "workflow_advance", args)
            check(text == second_text, "an old token replays after a key rotation", text)


async def main():
    st, ak, args, second_text = await scenario()
    rc, out = wfhost("mcp", "rotate-key")
    check(rc == 0, "rotate-key succeeds", out)
    await after_rotation(st, ak, args, second_text)
    await workrail_walk()
    await sessions()
    print("all checks passed")


asyncio.run(main())
