// `{{name}}`: a wfhost action handler.
//
// A workflow registers it for the verb `SKIP_TO`
// (`"action_handlers": {"SKIP_TO": "{{name}}"}`); a transition's action
// `SKIP_TO:<block>` then jumps to that block (`node.block` or a block of
// the current node). The core verbs stay with the built-in handler.

import { EngineCommand, PluginError, defineActionHandler, log } from "../wfhost-sdk/index.js";

export const actionInterpreter = defineActionHandler({
  /**
   * @param {string} action
   * @param {import("../wfhost-sdk/index.js").RunView} run
   */
  interpret(action, run) {
    const colon = action.indexOf(":");
    const verb = colon < 0 ? action : action.slice(0, colon);
    const target = colon < 0 ? "" : action.slice(colon + 1).trim();
    if (verb !== "SKIP_TO" || target === "") {
      throw new PluginError("bad-action", `\`${action}\`: expected SKIP_TO:<block>`);
    }
    log.info(`${run.nodeId}.${run.blockId} signalled ${run.signal}: skipping to ${target}`);
    return EngineCommand.jump(target);
  },
});
