// The worker's logic, natively: `node --test`.

import { test } from "node:test";
import assert from "node:assert/strict";

import { callWorker, testContext } from "../wfhost-sdk/index.js";
import { blockWorker } from "../src/plugin.js";

test("greets with the configured greeting", () => {
  const out = callWorker(blockWorker, testContext("greet", { greeting: "hello" }));
  assert.equal(out.signal, "SIGNAL:SUCCESS");
  assert.equal(out.payload.length, 1);
  assert.equal(out.payload[0].kind, "GREETING");
  assert.equal(out.payload[0].content, "hello from main.greet");
});

test("no greeting is empty", () => {
  const out = callWorker(blockWorker, testContext("greet", null));
  assert.equal(out.signal, "SIGNAL:EMPTY");
  assert.deepEqual(out.payload, []);
});

test("an unknown config key fails the block", () => {
  assert.throws(() => callWorker(blockWorker, testContext("greet", { greting: "typo" })), {
    code: "bad-config",
  });
});
