"""The component's ``action-interpreter`` export (used by ``plugin build``
as componentize-py's app module; imports the bindings, so never
natively)."""

import app  # noqa: F401  (the plugin registers its handler class)
from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import log as wit_log
from wit_world.imports import types as wit

import wfhost_sdk
from wfhost_sdk import _bridge, log

log.set_sink(_bridge.log_sink(wit_log))
_handler = wfhost_sdk.exported("action-handler")()


class ActionInterpreter(exports.ActionInterpreter):
    def interpret(self, action, run):
        try:
            command = _handler.interpret(action, _bridge.run_view_from(run))
            return _bridge.command_to(wit, command)
        except Exception as e:
            raise Err(_bridge.error_to(wit, e))
