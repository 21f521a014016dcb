// The SDK's own tests (`node --test`), vendored with it into every
// JavaScript plugin, so a plugin's `node --test` checks its SDK too.

import { test } from "node:test";
import assert from "node:assert/strict";

import {
  EngineCommand,
  PluginError,
  callActionHandler,
  callWorker,
  connectHost,
  defineActionHandler,
  defineWorker,
  env,
  exec,
  log,
  output,
  recordLog,
  segment,
  testContext,
  testRunView,
} from "../index.js";

const echo = defineWorker({
  signals: ["SIGNAL:SUCCESS", "config:signal"],
  run(ctx, payload) {
    const config = ctx.config() ?? {};
    if (config.throw) throw new Error("boom");
    return output(payload, config.signal ?? "SIGNAL:SUCCESS", {
      structuredOutput: config.structured,
      tokensUsed: config.tokens,
      linesWritten: 2,
    });
  },
});

test("the wire output has BigInt statistics and JSON structured output", () => {
  const out = callWorker(echo, testContext("b", { structured: { ok: true }, tokens: 5 }), [
    { id: "a", kind: "K", content: "c" },
  ]);
  assert.deepEqual(out, {
    payload: [{ id: "a", kind: "K", content: "c" }],
    signal: "SIGNAL:SUCCESS",
    structuredOutput: '{"ok":true}',
    statistics: { tokensUsed: 5n, linesWritten: 2n },
  });
});

test("a signal is declared directly or by config:KEY, else the block fails", () => {
  assert.equal(callWorker(echo, testContext("b", { signal: "SIGNAL:CUSTOM" })).signal, "SIGNAL:CUSTOM");
  const bad = defineWorker({ signals: ["SIGNAL:SUCCESS"], run: (_c, p) => output(p, "SIGNAL:SUCESS") });
  assert.throws(() => callWorker(bad, testContext("b")), { code: "undeclared-signal" });
  assert.deepEqual(echo.signals, ["SIGNAL:SUCCESS", "config:signal"]);
});

test("errors become plugin-error records", () => {
  const failing = defineWorker({ run: () => { throw new PluginError("bad-thing", "it broke"); } });
  assert.throws(() => failing.run(testContext("b"), []), (e) => e.code === "bad-thing" && e.message === "it broke" && !(e instanceof Error));
  assert.throws(() => callWorker(echo, testContext("b", { throw: true })), (e) => e.code === "exception" && e.detail.includes("boom"));
  const badSegment = defineWorker({ run: () => output([{ id: 1 }], "SIGNAL:SUCCESS") });
  assert.throws(() => callWorker(badSegment, testContext("b")), { code: "bad-output" });
});

test("the context parses its JSON layers and checks config keys", () => {
  const wire = testContext("b", { greeting: "hi" }, {
    stepIndex: 7n,
    inputs: '{"topic":"js"}',
    artifacts: [{ blockId: "main.a", content: '{"n":1}' }],
  });
  let seen;
  const w = defineWorker({ run: (ctx, p) => { seen = ctx; return output(p, "S"); } });
  callWorker(w, wire);
  assert.equal(seen.stepIndex, 7);
  assert.deepEqual(seen.config({ keys: ["greeting"] }), { greeting: "hi" });
  assert.throws(() => seen.config({ keys: ["other"] }), { code: "bad-config" });
  assert.deepEqual(seen.inputs(), { topic: "js" });
  assert.deepEqual(seen.artifact("main.a"), { n: 1 });
  assert.equal(seen.artifact("main.z"), undefined);
  callWorker(w, testContext("b", null, { config: "{not json" }));
  assert.throws(() => seen.config(), { code: "bad-config" });
});

test("segments get ids of their kind", () => {
  const a = segment("NOTE", "x");
  const b = segment("NOTE", "y");
  assert.match(a.id, /^note-\d+$/);
  assert.notEqual(a.id, b.id);
});

test("action handlers return engine commands", () => {
  const h = defineActionHandler({ interpret: (action, run) => (action === "GO" ? EngineCommand.call("sub", `${run.nodeId}.next`) : "nope") });
  assert.deepEqual(callActionHandler(h, "GO", testRunView()), {
    tag: "call",
    val: { node: "sub", returnTo: { node: "main", block: "next" } },
  });
  assert.throws(() => callActionHandler(h, "X"), { code: "bad-output" });
  assert.deepEqual(EngineCommand.jump("b"), { tag: "jump", val: { node: undefined, block: "b" } });
  assert.deepEqual(EngineCommand.end(), { tag: "end" });
});

test("logging goes to what is connected", () => {
  const { lines, restore } = recordLog();
  log.info("one");
  log.error(2);
  restore();
  assert.deepEqual(lines, ["[info] one", "[error] 2"]);
});

test("capabilities forward to what is connected, and say what is missing", () => {
  assert.throws(() => exec.run({ commands: [], allowShell: false }), /`exec` capability is not connected/);
  const restore = connectHost({ exec: { run: (block) => ({ succeeded: block.commands.length === 0 }) } });
  try {
    assert.deepEqual(exec.run({ commands: [], allowShell: false }), { succeeded: true });
  } finally {
    restore();
  }
  assert.throws(() => connectHost({ http: {} }), /not a host interface/);
  assert.equal(env.secretRef("TOKEN"), "\0secret:TOKEN");
  assert.equal(env.toWire({ secret: "T" }), "\0secret:T");
});

test("an async run resolves to its output, and its errors become plugin-error records", async () => {
  const asyncRun = defineWorker({ run: async (_c, p) => output([...p, segment("A", "x")], "SIGNAL:SUCCESS") });
  const out = await callWorker(asyncRun, testContext("b"));
  assert.equal(out.signal, "SIGNAL:SUCCESS");
  assert.equal(out.payload.at(-1).content, "x");
  const failing = defineWorker({ run: async () => { throw new PluginError("bad-thing", "later"); } });
  await assert.rejects(callWorker(failing, testContext("b")), (e) => e.code === "bad-thing" && e.message.includes("later"));
  const undeclared = defineWorker({ signals: ["SIGNAL:SUCCESS"], run: async (_c, p) => output(p, "SIGNAL:NOPE") });
  await assert.rejects(callWorker(undeclared, testContext("b")), { code: "undeclared-signal" });
});
