// Logging into the block's log (`wfhost:plugin/log`). Natively (tests),
// lines go to stderr, or to what a test connected.

import { hostLog } from "./host.js";

const text = (message) => (typeof message === "string" ? message : String(message));

export const log = Object.freeze({
  trace: (message) => hostLog("trace", text(message)),
  debug: (message) => hostLog("debug", text(message)),
  info: (message) => hostLog("info", text(message)),
  warn: (message) => hostLog("warn", text(message)),
  error: (message) => hostLog("error", text(message)),
});
