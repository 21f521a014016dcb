"""The same advances as advance.py, over a bare JSON-RPC pipe: one line
written, one line read, no SDK — the server's share of the round trip.

Usage: raw.py NAME STEPS WORKFLOWS_DIR WORKSPACE -- COMMAND ARGS...
"""

import json
import os
import subprocess
import sys
import time


def output_for(step):
    """The output of a step: notes, and with MCP_BENCH_CONSTRUCTS an
    assessment that passes."""
    output = {"notesMarkdown": f"done {step}"}
    if os.environ.get("MCP_BENCH_CONSTRUCTS") == "1" and "." not in step:
        output["artifacts"] = [{"kind": "wr.assessment", "dimensions": {"done": "yes"}}]
    return output


def main():
    name, steps, workspace = sys.argv[1], int(sys.argv[2]), sys.argv[4]
    command = sys.argv[sys.argv.index("--") + 1:]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=dict(os.environ), text=True, bufsize=1)
    ids = iter(range(1, 1_000_000))

    def request(method, params):
        n = next(ids)
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}) + "\n")
        proc.stdin.flush()
        while True:
            msg = json.loads(proc.stdout.readline())
            if msg.get("id") == n:
                return msg

    def tool(tool_name, args):
        msg = request("tools/call", {"name": tool_name, "arguments": args})
        result = msg["result"]
        # wfhost's execution replies are text first, with the JSON as
        # structured content; WorkRail's JSON mode sends the JSON as text.
        body = result.get("structuredContent") or json.loads(result["content"][0]["text"])
        if result.get("isError"):
            raise SystemExit(f"{name}: {tool_name} failed: {body}")
        return body

    request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "raw-bench", "version": "1"}})
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    reply = tool("start_workflow", {"workflowId": f"bench-chain-{steps}", "workspacePath": workspace,
                                    "goal": "benchmark"})
    times = [None] * steps
    for _ in range(steps + 10):
        if reply.get("isComplete"):
            break
        answering = reply["pending"]["stepId"]
        t0 = time.perf_counter()
        reply = tool("continue_workflow", {"continueToken": reply["continueToken"],
                                           "output": output_for(answering)})
        took = (time.perf_counter() - t0) * 1000
        number = answering.rsplit("step-", 1)[-1].split(".")[0]
        if number.isdigit():
            times[int(number) - 1] = took
    if not reply.get("isComplete") or None in times:
        raise SystemExit(f"{name}: the run did not complete with one advance per step")
    proc.stdin.close()
    proc.wait(timeout=30)
    print(json.dumps({"name": name, "ms": times}))


if __name__ == "__main__":
    main()
