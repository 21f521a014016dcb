// The contract's values, made the way the host expects them.

/**
 * A failure the plugin reports (the WIT `plugin-error`): the host fails the
 * block with `code: message`. Throw it from `run` or `interpret`.
 */
export class PluginError extends Error {
  /**
   * @param {string} code short, stable, machine-readable, e.g. `bad-config`
   * @param {string} message what went wrong, for a person
   */
  constructor(code, message) {
    super(`${code}: ${message}`);
    this.name = "PluginError";
    this.code = code;
    this.detail = message;
  }

  /** The WIT record: `{ code, message }`. */
  toWire() {
    return { code: this.code, message: this.detail };
  }
}

let nextSegment = 0;

/**
 * A new context segment with a generated id (`<kind>-<n>`, unique within
 * this component instance).
 * @param {string} kind e.g. `GREETING`
 * @param {string} content
 */
export function segment(kind, content) {
  const id = `${kind.toLowerCase()}-${nextSegment++}`;
  return { id, kind, content: String(content) };
}

/**
 * What a worker returns: the new payload and the signal, with optional
 * structured output (an object, serialized to JSON, or JSON text) and
 * statistics.
 * @param {Array<{id: string, kind: string, content: string}>} payload
 * @param {string} signal
 * @param {{structuredOutput?: unknown, tokensUsed?: number, linesWritten?: number}} [extra]
 */
export function output(payload, signal, extra = {}) {
  return {
    payload,
    signal,
    structuredOutput: extra.structuredOutput,
    statistics: {
      tokensUsed: extra.tokensUsed ?? 0,
      linesWritten: extra.linesWritten ?? 0,
    },
  };
}

/**
 * `block` or `node.block` as a WIT `block-ref`.
 * @param {string} target
 */
export function blockRef(target) {
  const dot = target.indexOf(".");
  return dot < 0
    ? { node: undefined, block: target }
    : { node: target.slice(0, dot), block: target.slice(dot + 1) };
}

/** What the engine does next (the WIT `engine-command`), for action handlers. */
export const EngineCommand = Object.freeze({
  /** Continue at `block` or `node.block`. */
  jump: (target) => ({ tag: "jump", val: blockRef(target) }),
  /** Call `node` as a subroutine; `returnTo` (`block` or `node.block`) is where `return` continues. */
  call: (node, returnTo) => ({
    tag: "call",
    val: { node, returnTo: returnTo === undefined ? undefined : blockRef(returnTo) },
  }),
  /** Pop the return stack and continue at the return address. */
  return: () => ({ tag: "return" }),
  /** Finish the run successfully. */
  end: () => ({ tag: "end" }),
  /** Finish the run as failed. */
  fail: (reason) => ({ tag: "fail", val: reason }),
  /** Pause the run at a human gate. */
  gate: (prompt) => ({ tag: "gate", val: prompt }),
});

/**
 * Environment values with host references, for the `env` of `exec`,
 * `container`, `slurm` and `agent` calls: a reference is resolved by the
 * host when it starts the command, never by the plugin.
 */
export const env = Object.freeze({
  /** The value the host replaces by its secret `name`. */
  secretRef: (name) => `\0secret:${name}`,
  /** The value the host replaces by its own environment variable `name`. */
  hostRef: (name) => `\0env:${name}`,
  /**
   * A config `env` value (a string, or `{ secret: NAME }`) as it goes on
   * the wire.
   */
  toWire: (value) =>
    typeof value === "string" ? value : `\0secret:${value.secret}`,
});
