"""The worker's logic, natively: `python3 -m unittest`."""

import unittest

from app import Plugin
from wfhost_sdk import BlockContext, PluginError, declared_signals, log


class PluginTest(unittest.TestCase):
    def test_greets_with_the_configured_greeting(self):
        ctx = BlockContext.for_test("greet", {"greeting": "hello"})
        with log.capture() as lines:
            output = Plugin().run(ctx, [])
        self.assertEqual(output.signal, "SIGNAL:SUCCESS")
        self.assertEqual(len(output.payload), 1)
        self.assertEqual(output.payload[0].kind, "GREETING")
        self.assertEqual(output.payload[0].content, "hello from main.greet")
        self.assertEqual(lines, [("info", "greeting with: hello from main.greet")])

    def test_no_greeting_is_empty(self):
        output = Plugin().run(BlockContext.for_test("greet", None), [])
        self.assertEqual(output.signal, "SIGNAL:EMPTY")
        self.assertEqual(output.payload, [])

    def test_an_unknown_config_key_fails_the_block(self):
        with self.assertRaises(PluginError) as raised:
            Plugin().run(BlockContext.for_test("greet", {"greting": "typo"}), [])
        self.assertEqual(raised.exception.code, "bad-config")

    def test_it_returns_only_declared_signals(self):
        declared = declared_signals()
        for config in [{"greeting": "hi"}, None]:
            signal = Plugin().run(BlockContext.for_test("greet", config), []).signal
            self.assertIn(signal, declared)


if __name__ == "__main__":
    unittest.main()
