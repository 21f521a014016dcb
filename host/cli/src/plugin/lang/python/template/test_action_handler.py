"""The handler's logic, natively: `python3 -m unittest`."""

import unittest

from app import Plugin
from wfhost_sdk import BlockRef, Jump, PluginError, RunView


class PluginTest(unittest.TestCase):
    def test_skip_to_jumps(self):
        command = Plugin().interpret("SKIP_TO:finish", RunView.for_test())
        self.assertEqual(command, Jump(BlockRef(None, "finish")))

    def test_anything_else_is_refused(self):
        with self.assertRaises(PluginError) as raised:
            Plugin().interpret("SKIP_TO:", RunView.for_test())
        self.assertEqual(raised.exception.code, "bad-action")


if __name__ == "__main__":
    unittest.main()
