"""Advance round trips over stdio with the official Python MCP client.

Starts a 150-step workflow (one WorkRail-format file, run unchanged by both
servers) and advances it to the end with WorkRail's tool names
(start_workflow, continue_workflow), timing each call from the client.
Prints one JSON object: per-advance round trips in milliseconds.

Usage: advance.py NAME STEPS WORKFLOWS_DIR WORKSPACE -- COMMAND ARGS...
(environment for the server comes from this process's environment).
"""

import asyncio
import json
import os
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


from raw import output_for  # noqa: E402


async def drive(name, steps, command, workspace):
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("start_workflow", {
                "workflowId": f"bench-chain-{steps}", "workspacePath": workspace, "goal": "benchmark"})
            reply = body(result)
            check(not result.is_error, f"{name}: start failed: {reply}")
            # Advance until the run completes; time the advances of the
            # workflow's own steps (WorkRail puts an onboarding step of its
            # own before them in a fresh data directory).
            times = [None] * steps
            for _ in range(steps + 10):
                if reply.get("isComplete"):
                    break
                answering = reply["pending"]["stepId"]
                args = {"continueToken": reply["continueToken"], "output": output_for(answering)}
                t0 = time.perf_counter()
                result = await session.call_tool("continue_workflow", args)
                took = (time.perf_counter() - t0) * 1000
                reply = body(result)
                check(not result.is_error, f"{name}: advancing {answering} failed: {reply}")
                number = answering.rsplit("step-", 1)[-1].split(".")[0]
                if number.isdigit():
                    times[int(number) - 1] = took
            check(reply.get("isComplete") is True, f"{name}: not complete: {reply}")
            check(None not in times, f"{name}: not every step was advanced once")
    return times


def body(result):
    """A reply's JSON: wfhost's structured content (its text is a
    rendering), or WorkRail's JSON-mode text."""
    return result.structured_content or json.loads(result.content[0].text)


def check(cond, message):
    if not cond:
        raise SystemExit(message)


def main():
    name, steps, workflows, workspace = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    command = sys.argv[sys.argv.index("--") + 1:]
    times = asyncio.run(drive(name, steps, command, workspace))
    print(json.dumps({"name": name, "ms": times}))


if __name__ == "__main__":
    main()
