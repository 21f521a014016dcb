// `defineWorker` and `defineActionHandler`: a plugin's code, wrapped into
// what the component exports (the WIT `block-worker` and
// `action-interpreter` interfaces), with the checks and conversions the
// host expects.

import { BlockContext, RunView } from "./context.js";
import { PluginError } from "./types.js";

/** A thrown value as the WIT `plugin-error` record the bindings return. */
function wireError(e) {
  if (e instanceof PluginError) return e.toWire();
  const text = e instanceof Error ? (e.stack ?? `${e.name}: ${e.message}`) : String(e);
  return { code: "exception", message: `uncaught exception: ${text}` };
}

/** Run `f`; a thrown value becomes the plain `plugin-error` the bindings turn into `err`. */
function guarded(f) {
  try {
    return f();
  } catch (e) {
    throw wireError(e);
  }
}

/** `result`, which must not be a Promise: the WIT functions are synchronous. */
function synchronous(result) {
  if (isPromise(result)) {
    throw new PluginError("async-result", "the plugin returned a Promise: make `interpret` synchronous");
  }
  return result;
}

function isPromise(value) {
  return Boolean(value) && typeof value.then === "function";
}

function checkSignals(signals) {
  if (signals === undefined) return undefined;
  if (!Array.isArray(signals) || !signals.every((s) => typeof s === "string" && s.trim() !== "" && !s.includes("\n"))) {
    throw new TypeError("defineWorker: `signals` must be an array of non-empty one-line strings");
  }
  return Object.freeze([...signals]);
}

/** Whether `signal` is one of `declared` (`config:KEY`: the config's `KEY`). */
function isDeclared(signal, declared, ctx) {
  if (declared.includes(signal)) return true;
  const keys = declared.filter((s) => s.startsWith("config:")).map((s) => s.slice("config:".length));
  if (keys.length === 0) return false;
  let config;
  try {
    config = JSON.parse(ctx.configText);
  } catch {
    return false;
  }
  return config !== null && typeof config === "object" && keys.some((k) => config[k] === signal);
}

function count(value, what) {
  const n = value ?? 0;
  if (typeof n === "bigint" ? n < 0n : !(Number.isSafeInteger(n) && n >= 0)) {
    throw new PluginError("bad-output", `statistics.${what} must be a non-negative integer, not ${n}`);
  }
  return BigInt(n);
}

function wirePayload(payload) {
  if (!Array.isArray(payload)) {
    throw new PluginError("bad-output", "the payload must be an array of segments");
  }
  return payload.map((s, i) => {
    for (const field of ["id", "kind", "content"]) {
      if (typeof s?.[field] !== "string") {
        throw new PluginError("bad-output", `payload[${i}].${field} must be a string (make segments with segment(kind, content))`);
      }
    }
    return { id: s.id, kind: s.kind, content: s.content };
  });
}

/** A worker's result as the WIT `worker-output` record. */
function wireOutput(result, declared, ctx) {
  if (result === null || typeof result !== "object") {
    throw new PluginError("bad-output", "`run` must return output(payload, signal)");
  }
  if (typeof result.signal !== "string") {
    throw new PluginError("bad-output", "the output's signal must be a string, e.g. SIGNAL:SUCCESS");
  }
  if (declared && !isDeclared(result.signal, declared, ctx)) {
    throw new PluginError("undeclared-signal", `${result.signal} is not among the declared signals [${declared.join(", ")}]`);
  }
  const structured = result.structuredOutput;
  return {
    payload: wirePayload(result.payload),
    signal: result.signal,
    structuredOutput:
      structured === undefined || structured === null || typeof structured === "string"
        ? (structured ?? undefined)
        : JSON.stringify(structured),
    statistics: {
      tokensUsed: count(result.statistics?.tokensUsed, "tokensUsed"),
      linesWritten: count(result.statistics?.linesWritten, "linesWritten"),
    },
  };
}

/**
 * A block worker. Export what it returns as `blockWorker` from the
 * plugin's module: `export const blockWorker = defineWorker({...})`.
 *
 * @param {{
 *   run: (ctx: BlockContext, payload: Array<{id: string, kind: string, content: string}>) => object,
 *   signals?: string[],
 * }} spec `run` returns `output(payload, signal)` or throws a PluginError;
 *   `signals` are those it can return (`config:KEY`: the string in the
 *   block config's `KEY`), embedded in the component by `wfhost plugin
 *   build` for `wfhost validate`, and checked on every return.
 */
export function defineWorker(spec) {
  if (typeof spec?.run !== "function") {
    throw new TypeError("defineWorker: `run(ctx, payload)` is missing");
  }
  const signals = checkSignals(spec.signals);
  return Object.freeze({
    signals,
    run(context, payload) {
      return guarded(() => {
        const ctx = new BlockContext(context);
        const segments = payload.map((s) => ({ id: s.id, kind: s.kind, content: s.content }));
        const result = spec.run(ctx, segments);
        if (isPromise(result)) {
          // An async `run` (to await `fetch`, for a worker granted http):
          // the component runs its event loop until the promise settles.
          return result.then(
            (out) => wireOutput(out, signals, ctx),
            (e) => {
              throw wireError(e);
            },
          );
        }
        return wireOutput(result, signals, ctx);
      });
    },
  });
}

const COMMANDS = ["jump", "call", "return", "end", "fail", "gate"];

/**
 * An action handler. Export what it returns as `actionInterpreter`:
 * `export const actionInterpreter = defineActionHandler({...})`.
 *
 * @param {{interpret: (action: string, run: RunView) => object}} spec
 *   `interpret` returns an `EngineCommand` or throws a PluginError.
 */
export function defineActionHandler(spec) {
  if (typeof spec?.interpret !== "function") {
    throw new TypeError("defineActionHandler: `interpret(action, run)` is missing");
  }
  return Object.freeze({
    interpret(action, run) {
      return guarded(() => {
        const command = synchronous(spec.interpret(action, new RunView(run)));
        if (!COMMANDS.includes(command?.tag)) {
          throw new PluginError("bad-output", "`interpret` must return an EngineCommand (EngineCommand.jump(...), ...)");
        }
        return command;
      });
    },
  });
}
