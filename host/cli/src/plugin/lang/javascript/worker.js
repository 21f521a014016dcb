// `{{name}}`: a wfhost block worker.
//
// Config: `{"greeting": "..."}`. With a greeting it appends a `GREETING`
// segment to the payload and signals `SIGNAL:SUCCESS`; without one it
// signals `SIGNAL:EMPTY`.

import { PluginError, defineWorker, log, output, segment } from "../wfhost-sdk/index.js";

export const blockWorker = defineWorker({
  // The signals this worker can return: `wfhost validate` warns about a
  // transition on any other (keep wfhost-plugin.toml's `signals` the same).
  signals: ["SIGNAL:SUCCESS", "SIGNAL:EMPTY"],

  /**
   * @param {import("../wfhost-sdk/index.js").BlockContext} ctx
   * @param {import("../wfhost-sdk/index.js").Payload} payload
   */
  run(ctx, payload) {
    /** @type {{greeting?: string} | null} */
    const config = ctx.config({ keys: ["greeting"] });
    const greeting = config?.greeting;
    if (greeting === undefined) {
      log.warn("no `greeting` in the block's config");
      return output(payload, "SIGNAL:EMPTY");
    }
    if (typeof greeting !== "string") {
      throw new PluginError("bad-config", "block config: `greeting` must be a string");
    }
    const text = `${greeting} from ${ctx.nodeId}.${ctx.blockId}`;
    log.info(`greeting with: ${text}`);
    payload.push(segment("GREETING", text));
    return output(payload, "SIGNAL:SUCCESS");
  },
});
