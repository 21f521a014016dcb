"""WorkRail's compiler constructs driven over MCP with the official Python
client: the step sequence a WorkRail client sees, the blocked replies it
gets, placeholders, tags.

usage: workrail_constructs.py WFHOST HOME WORKFLOWS WORKSPACE CACHE
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

WFHOST, HOME, WORKFLOWS, WORKSPACE, CACHE = sys.argv[1:6]


def check(cond, what, detail=None):
    if not cond:
        raise SystemExit(f"FAILED: {what}" + (f"\n{json.dumps(detail, indent=1)[:4000]}" if detail is not None else ""))


def server():
    return StdioServerParameters(
        command=WFHOST,
        args=["mcp", "--home", HOME, "--workflows", WORKFLOWS, "--workspace", WORKSPACE, "--cache-dir", CACHE],
        env={"WFHOST_DURABILITY": "normal"},
    )


async def call(session, tool, args):
    result = await session.call_tool(tool, args)
    body = result.structured_content
    check(body is not None, f"{tool} returns structured content", result.content[0].text if result.content else "")
    return result.is_error, body


async def ok(session, tool, args):
    is_error, body = await call(session, tool, args)
    check(not is_error, f"{tool} succeeds", body)
    return body


def codes(reply):
    return [b["code"] for b in reply["blockers"]["blockers"]]


async def tour(session, depth):
    """One run through the tour; returns the step ids in order."""
    cur = await ok(session, "start_workflow", {
        "workflowId": "construct-tour", "workspacePath": WORKSPACE,
        "context": {"topic": "caching", "depth": depth, "items": [1, 2, 3], "tags": []},
    })
    refs = cur.get("references") or []
    check(len(refs) == 1 and refs[0]["status"] == "resolved" and refs[0]["authoritative"],
          "the workflow's reference is resolved in the workspace", cur)
    seen = []

    async def go(output=None, context=None, intent=None):
        args = {"continueToken": cur["continueToken"]}
        if output is not None:
            args["output"] = output
        if context is not None:
            args["context"] = context
        if intent is not None:
            args["intent"] = intent
        return await ok(session, "continue_workflow", args)

    while not cur["isComplete"]:
        step = cur["pending"]["stepId"]
        prompt = cur["pending"]["prompt"]
        seen.append(step)
        if step == "plan":
            check(cur["pending"]["title"] == "Plan caching", "the title is rendered", cur["pending"])
            check(("Go deep on caching." in prompt) == (depth == "deep"), "a fragment shows when its condition holds", prompt)
            check("Keep the plan short." in prompt, "a fragment without a condition always shows", prompt)
            check("Notes are the durable record" in prompt, "a ref part becomes its text", prompt)
            check("optional capability" in prompt, "the feature adds to the prompt blocks", prompt)
            check("`impact` (low | high)" in prompt, "the assessment is asked for", prompt)
            blocked = await go({"notesMarkdown": "planned"})
            check(blocked["kind"] == "blocked" and codes(blocked) == ["INVALID_REQUIRED_OUTPUT"]
                  and blocked["retryable"], "no assessment: blocked, retryable", blocked)
            followup = await go({"notesMarkdown": "planned", "artifacts": [
                {"kind": "wr.assessment", "dimensions": {"impact": " HIGH "}}]})
            check(codes(followup) == ["ASSESSMENT_FOLLOWUP_REQUIRED"]
                  and followup["assessmentFollowup"]["guidance"] == "Write a rollback plan.",
                  "a high impact requires the follow-up", followup)
            check(followup["pending"]["stepId"] == "plan", "the step is still pending", followup)
            cur = await go({"notesMarkdown": "planned, with a rollback", "artifacts": [
                {"kind": "wr.assessment", "dimensions": {"impact": "low"}}]})
        elif step == "review.scan":
            check(cur["pending"]["title"] == "Scan the plan" and "Scan the plan for gaps." in prompt,
                  "the routine's arguments are filled in", cur["pending"])
            check("Quote the evidence" in prompt, "the routine's guidance comes along", prompt)
            cur = await go({"notesMarkdown": "scanned"})
        elif step == "fan":
            check("wr.research" in prompt and "`subject`: `caching`" in prompt, "the delegation and its inputs", prompt)
            check(("wr.deep-dive" in prompt) == (depth == "deep"), "a delegation shows when its condition holds", prompt)
            blocked = await go({}, intent="advance")
            check(codes(blocked) == ["MISSING_REQUIRED_NOTES"], "a parallel step needs notes", blocked)
            cur = await go({"notesMarkdown": "spawned and collected"})
        elif step == "verdict":
            check(cur["pending"]["requireConfirmation"] and cur["nextIntent"] == "await_user_confirmation",
                  "a confirmation with a kind asks for confirmation", cur)
            check("wr.routine-review-pass checks the verdict" in prompt, "the binding takes its default", prompt)
            missing = await go({"notesMarkdown": "approved"})
            check(codes(missing) == ["MISSING_REQUIRED_OUTPUT"], "the contract's artifact is required", missing)
            invalid = await go({"artifacts": [{"kind": "wr.gate_verdict", "version": 1, "verdict": "approved",
                                               "confidence": "high", "rationale": "short"}]})
            check(codes(invalid) == ["INVALID_REQUIRED_OUTPUT"] and invalid["validation"]["issues"],
                  "an invalid artifact is named", invalid)
            cur = await go({"artifacts": [{"kind": "wr.gate_verdict", "version": 1, "verdict": "approved",
                                           "confidence": "high", "rationale": "The plan holds and the risk is low."}]})
        elif step == "finish":
            check("Wrap up [unset: ticket] with 3 items." in prompt, "placeholders render as WorkRail renders them", prompt)
            cur = await go({}, intent="advance")
        elif step == "finish__verification":
            check("make check" in prompt, "the verification step asks for the command", prompt)
            cur = await go({}, intent="advance")
        else:
            cur = await go({"notesMarkdown": f"did {step}"}, intent="advance")
    check(cur["kind"] == "ok" and cur["status"] == "succeeded", "the tour completes", cur)
    return seen


async def main():
    with open(os.path.join(WORKSPACE, "GUIDE.md"), "w") as f:
        f.write("# How we plan\n")
    async with stdio_client(server()) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            expected = ["plan", "review.scan", "review.rate", "fan", "fan__synthesis", "verdict",
                        "edge", "finish", "finish__verification"]
            seen = await tour(session, "deep")
            check(seen == expected, "the step sequence WorkRail gives", seen)
            seen = await tour(session, "shallow")
            check(seen == expected, "the same steps when the fragments do not show", seen)

            listed = await ok(session, "list_workflows", {"workspacePath": WORKSPACE})
            summary = {t["id"]: t["count"] for t in listed["tagSummary"]}
            check(summary == {"tour": 1, "routines": 0}, "the tag summary counts the workflows", listed)
            tagged = await ok(session, "list_workflows", {"workspacePath": WORKSPACE, "tags": ["tour"]})
            check([w["workflowId"] for w in tagged["workflows"]] == ["construct-tour"], "tags filter the list", tagged)
            resource = await session.read_resource("workrail://tags")
            tags = json.loads(resource.contents[0].text)
            check(tags["workflows"]["construct-tour"]["tags"] == ["tour"], "the tags resource", tags)
            is_error, body = await call(session, "list_workflows", {"workspacePath": "relative/dir"})
            check(is_error and body["code"] == "VALIDATION_ERROR"
                  and "absolute" in body["message"], "a relative workspacePath is refused", body)
    print("all checks passed")


asyncio.run(main())
