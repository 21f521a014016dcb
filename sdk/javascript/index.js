// wfhost-sdk for JavaScript: write a wfhost block worker or action handler
// as an ES module; `wfhost plugin build` makes it a WebAssembly component
// (componentize-js). See README.md; the types are in index.d.ts.

export { defineWorker, defineActionHandler } from "./plugin.js";
export { BlockContext, RunView } from "./context.js";
export { PluginError, segment, output, blockRef, EngineCommand, env } from "./types.js";
export { log } from "./log.js";
export { connectHost, exec, container, slurm, agent } from "./host.js";
export { testContext, testRunView, callWorker, callActionHandler, recordLog } from "./testing.js";
