// What the host tells a plugin, as objects with conveniences over the WIT
// records (which the component bindings give with camelCase fields and
// u64 values as BigInt).

import { PluginError } from "./types.js";

/** `text` parsed as JSON, or a PluginError `code` naming `what`. */
function parseJson(text, code, what) {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new PluginError(code, `${what}: ${e.message}`);
  }
}

/** The block a worker executes, its contract and its five context layers. */
export class BlockContext {
  /** @param {Record<string, any>} wire the WIT `block-context` record */
  constructor(wire) {
    this.workflowId = wire.workflowId;
    this.executionId = wire.executionId;
    this.nodeId = wire.nodeId;
    this.blockId = wire.blockId;
    this.stepIndex = Number(wire.stepIndex);
    this.attempt = wire.attempt;
    this.previousBlockId = wire.previousBlockId ?? undefined;
    this.fileRestrictions = wire.fileRestrictions ?? undefined;
    this.workspaceDir = wire.workspaceDir;
    this.systemPrompt = wire.systemPrompt;
    this.assembledContext = wire.assembledContext;
    this.artifacts = wire.artifacts.map((a) => ({ blockId: a.blockId, content: a.content }));
    this.configText = wire.config;
    this.inputsText = wire.inputs;
    this.staticMemoryText = wire.staticMemory;
    this.inheritedMemoryText = wire.inheritedMemory;
  }

  /**
   * The block's `config`, parsed (`null` when unset). With `keys`, the
   * config must be null or an object with only those keys, as a config
   * with a typo should fail the block rather than be ignored.
   * @param {{keys?: string[]}} [options]
   */
  config(options = {}) {
    const config = parseJson(this.configText, "bad-config", "block config");
    if (options.keys && config !== null) {
      if (typeof config !== "object" || Array.isArray(config)) {
        throw new PluginError("bad-config", `block config: expected an object with keys ${options.keys.join(", ")}`);
      }
      for (const key of Object.keys(config)) {
        if (!options.keys.includes(key)) {
          const known = options.keys.map((k) => `\`${k}\``).join(", ");
          throw new PluginError("bad-config", `block config: unknown field \`${key}\`, expected one of ${known}`);
        }
      }
    }
    return config;
  }

  /** The run's inputs, an object (`{}` when the run has none). */
  inputs() {
    return parseJson(this.inputsText, "bad-inputs", "run inputs");
  }

  /** The node's `static_memory`, an object. */
  staticMemory() {
    return parseJson(this.staticMemoryText, "bad-static-memory", "static memory");
  }

  /** The static memory visible to the block (its node's over its callers'). */
  inheritedMemory() {
    return parseJson(this.inheritedMemoryText, "bad-inherited-memory", "inherited memory");
  }

  /**
   * The structured output of `blockId` (`node.block`), parsed, if it ran
   * earlier in this scope.
   * @param {string} blockId
   */
  artifact(blockId) {
    const found = this.artifacts.find((a) => a.blockId === blockId);
    return found === undefined ? undefined : parseJson(found.content, "bad-artifact", `artifact of ${blockId}`);
  }
}

/** A read-only view of the run, given to action handlers. */
export class RunView {
  /** @param {Record<string, any>} wire the WIT `run-view` record */
  constructor(wire) {
    this.workflowId = wire.workflowId;
    this.executionId = wire.executionId;
    this.nodeId = wire.nodeId;
    this.blockId = wire.blockId;
    this.signal = wire.signal;
    this.stepIndex = Number(wire.stepIndex);
    this.returnStack = [...wire.returnStack];
  }
}
