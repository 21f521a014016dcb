"""Tests of the vendored wfhost SDK itself (run with the plugin's own:
``python3 -m unittest``)."""

import os
import tempfile
import types
import unittest
from dataclasses import dataclass
from enum import Enum
from typing import Any, List, Optional

import wfhost_sdk as sdk
from wfhost_sdk import _bridge, log


def stand_in_bindings() -> Any:
    """Stand-ins for ``wit_world.imports.types``: records with the fields
    componentize-py generates, as keyword-constructible dataclasses."""

    def record(name: str, *fields: str) -> type:
        return dataclass(type(name, (), {"__annotations__": {f: Any for f in fields}}))

    def case(name: str, has_value: bool = True) -> type:
        return record(name, "value") if has_value else record(name)

    return types.SimpleNamespace(
        ContextSegment=record("ContextSegment", "id", "kind", "content"),
        Artifact=record("Artifact", "block_id", "content"),
        Statistics=record("Statistics", "tokens_used", "lines_written"),
        WorkerOutput=record("WorkerOutput", "payload", "signal", "structured_output", "statistics"),
        PluginError=record("PluginError", "code", "message"),
        BlockRef=record("BlockRef", "node", "block"),
        CallTarget=record("CallTarget", "node", "return_to"),
        EngineCommand_Jump=case("Jump"),
        EngineCommand_Call=case("Call"),
        EngineCommand_Return=case("Return", False),
        EngineCommand_End=case("End", False),
        EngineCommand_Fail=case("Fail"),
        EngineCommand_Gate=case("Gate"),
    )


class SdkTest(unittest.TestCase):
    def test_segments_get_unique_ids_from_their_kind(self):
        a, b = sdk.segment("GREETING", "x"), sdk.segment("GREETING", "y")
        self.assertTrue(a.id.startswith("greeting-"))
        self.assertNotEqual(a.id, b.id)

    def test_config_inputs_and_static_memory_parse(self):
        ctx = sdk.BlockContext.for_test("b", {"k": 1}, inputs={"topic": "py"})
        self.assertEqual(ctx.config_json(), {"k": 1})
        self.assertEqual(ctx.inputs_json(), {"topic": "py"})
        self.assertEqual(ctx.static_memory_json(), {})
        self.assertIsNone(sdk.BlockContext.for_test("b").config_json())
        ctx.config = "{not json"
        with self.assertRaises(sdk.PluginError) as raised:
            ctx.config_json()
        self.assertEqual(raised.exception.code, "bad-config")

    def test_outputs_carry_structured_output_and_statistics(self):
        out = sdk.WorkerOutput([], "SIGNAL:SUCCESS").with_structured_output({"n": 2}).with_statistics(3, 4)
        self.assertEqual(out.structured_output, '{"n": 2}')
        self.assertEqual((out.statistics.tokens_used, out.statistics.lines_written), (3, 4))
        self.assertEqual(sdk.WorkerOutput([], "S").statistics, sdk.Statistics(0, 0))

    def test_block_refs_parse(self):
        self.assertEqual(sdk.BlockRef.parse("finish"), sdk.BlockRef(None, "finish"))
        self.assertEqual(sdk.BlockRef.parse("review.start"), sdk.BlockRef("review", "start"))
        self.assertEqual(sdk.Call.node("sub", "main.back").target.return_to, sdk.BlockRef("main", "back"))

    def test_logging_goes_to_the_sink_and_can_be_captured(self):
        with log.capture() as lines:
            log.info("one")
            log.warn("two")
        self.assertEqual(lines, [("info", "one"), ("warn", "two")])
        with self.assertRaises(ValueError):
            log.emit("loud", "x")

    def test_only_subclasses_are_exported(self):
        with self.assertRaises(TypeError):
            sdk.export_worker(object)

    def test_declared_signals_come_from_the_manifest(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "wfhost-plugin.toml")
            with open(path, "w") as f:
                f.write('name = "x"\nsignals = ["SIGNAL:SUCCESS", "SIGNAL:EMPTY"]\n')
            self.assertEqual(sdk.declared_signals(path), ["SIGNAL:SUCCESS", "SIGNAL:EMPTY"])
            self.assertEqual(sdk._signals_line(path), ["SIGNAL:SUCCESS", "SIGNAL:EMPTY"])


class BridgeTest(unittest.TestCase):
    wit = stand_in_bindings()

    def test_a_context_and_payload_become_sdk_objects(self):
        ctx = sdk.BlockContext.for_test("b", {"k": 1})
        ctx.artifacts = [self.wit.Artifact(block_id="main.a", content="{}")]
        back = _bridge.context_from(ctx)
        self.assertEqual(back.artifacts, [sdk.Artifact("main.a", "{}")])
        self.assertEqual(back.config_json(), {"k": 1})
        seg = self.wit.ContextSegment(id="q-1", kind="QUESTION", content="why?")
        self.assertEqual(_bridge.payload_from([seg]), [sdk.ContextSegment("q-1", "QUESTION", "why?")])

    def test_an_output_becomes_the_wit_record(self):
        out = sdk.WorkerOutput([sdk.ContextSegment("g-0", "G", "hi")], "SIGNAL:SUCCESS").with_statistics(1, 2)
        wit_out = _bridge.output_to(self.wit, out)
        self.assertEqual(wit_out.signal, "SIGNAL:SUCCESS")
        self.assertEqual(wit_out.payload[0].content, "hi")
        self.assertEqual(wit_out.statistics.lines_written, 2)
        with self.assertRaises(sdk.PluginError):
            _bridge.output_to(self.wit, "SIGNAL:SUCCESS")

    def test_commands_become_the_wit_variant(self):
        jump = _bridge.command_to(self.wit, sdk.Jump.to("main.finish"))
        self.assertEqual((jump.value.node, jump.value.block), ("main", "finish"))
        call = _bridge.command_to(self.wit, sdk.Call.node("sub"))
        self.assertEqual((call.value.node, call.value.return_to), ("sub", None))
        self.assertEqual(_bridge.command_to(self.wit, sdk.Fail("no")).value, "no")
        self.assertEqual(_bridge.command_to(self.wit, sdk.Gate("ok?")).value, "ok?")
        self.assertIsInstance(_bridge.command_to(self.wit, sdk.End()), self.wit.EngineCommand_End)
        self.assertIsInstance(_bridge.command_to(self.wit, sdk.Return()), self.wit.EngineCommand_Return)
        with self.assertRaises(sdk.PluginError):
            _bridge.command_to(self.wit, "END")

    def test_errors_become_plugin_errors(self):
        err = _bridge.error_to(self.wit, sdk.PluginError("bad-config", "no"))
        self.assertEqual((err.code, err.message), ("bad-config", "no"))
        with log.capture() as lines:
            try:
                {}["greeting"]
            except KeyError as e:
                err = _bridge.error_to(self.wit, e)
        self.assertEqual((err.code, err.message), ("python-exception", "KeyError: 'greeting'"))
        self.assertIn("Traceback", lines[0][1])

    def test_the_log_sink_maps_levels(self):
        Level = Enum("Level", "TRACE DEBUG INFO WARN ERROR")
        seen = []
        wit_log = types.SimpleNamespace(Level=Level, log=lambda level, message: seen.append((level, message)))
        _bridge.log_sink(wit_log)("warn", "careful")
        self.assertEqual(seen, [(Level.WARN, "careful")])


if __name__ == "__main__":
    unittest.main()
