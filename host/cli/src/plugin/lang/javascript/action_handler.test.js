// The action handler's logic, natively: `node --test`.

import { test } from "node:test";
import assert from "node:assert/strict";

import { callActionHandler, testRunView } from "../wfhost-sdk/index.js";
import { actionInterpreter } from "../src/plugin.js";

test("SKIP_TO jumps", () => {
  const command = callActionHandler(actionInterpreter, "SKIP_TO:finish", testRunView());
  assert.deepEqual(command, { tag: "jump", val: { node: undefined, block: "finish" } });
});

test("anything else is refused", () => {
  assert.throws(() => callActionHandler(actionInterpreter, "SKIP_TO:", testRunView()), {
    code: "bad-action",
  });
});
