// Native tests of plugin logic (`node --test`): contexts as the host makes
// them, calls through the same wrapper the component exports, and the log
// recorded.

import { connectHost } from "./host.js";
import { PluginError } from "./types.js";

/**
 * A WIT `block-context` for a test: block `blockId` of node `main` with
 * `config` (any JSON value; `null` for none), a run without inputs.
 * `overrides` replaces fields (camelCase, e.g. `{ inputs: '{"n": 1}' }`).
 */
export function testContext(blockId, config = null, overrides = {}) {
  return {
    workflowId: "test-workflow",
    executionId: "test-execution",
    nodeId: "main",
    blockId,
    stepIndex: 0n,
    attempt: 1,
    previousBlockId: undefined,
    staticMemory: "{}",
    inheritedMemory: "{}",
    artifacts: [],
    config: JSON.stringify(config),
    inputs: "{}",
    fileRestrictions: undefined,
    workspaceDir: ".",
    systemPrompt: "",
    assembledContext: "",
    ...overrides,
  };
}

/** A WIT `run-view` for a test: block `main.start` signalled SIGNAL:SUCCESS. */
export function testRunView(overrides = {}) {
  return {
    workflowId: "test-workflow",
    executionId: "test-execution",
    nodeId: "main",
    blockId: "start",
    signal: "SIGNAL:SUCCESS",
    stepIndex: 0n,
    returnStack: [],
    ...overrides,
  };
}

/** The WIT error record the exports throw, as a PluginError again. */
function unwire(e) {
  if (e && typeof e === "object" && typeof e.code === "string" && typeof e.message === "string" && !(e instanceof Error)) {
    return new PluginError(e.code, e.message);
  }
  return e;
}

/**
 * Call `worker` (what `defineWorker` returned) as the host does: returns
 * the WIT `worker-output` (statistics as BigInt) or throws a PluginError.
 */
export function callWorker(worker, context, payload = []) {
  try {
    const result = worker.run(context, payload);
    if (result && typeof result.then === "function") {
      return result.catch((e) => {
        throw unwire(e);
      });
    }
    return result;
  } catch (e) {
    throw unwire(e);
  }
}

/** Call `handler` (what `defineActionHandler` returned) as the host does. */
export function callActionHandler(handler, action, run = testRunView()) {
  try {
    return handler.interpret(action, run);
  } catch (e) {
    throw unwire(e);
  }
}

/**
 * Record log lines (`"[level] message"`) instead of writing them to
 * stderr; `restore()` puts the previous log back.
 */
export function recordLog() {
  const lines = [];
  const restore = connectHost({ log: (level, message) => lines.push(`[${level}] ${message}`) });
  return { lines, restore };
}
