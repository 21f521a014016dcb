"""The component's ``block-worker`` export (used by ``plugin build`` as
componentize-py's app module; imports the bindings, so never natively)."""

import app  # noqa: F401  (the plugin registers its worker class)
from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import log as wit_log
from wit_world.imports import types as wit

import wfhost_sdk
from wfhost_sdk import _bridge, log

log.set_sink(_bridge.log_sink(wit_log))
_worker = wfhost_sdk.exported("worker")()


class BlockWorker(exports.BlockWorker):
    def run(self, context, payload):
        _bridge.enter_workspace(context.workspace_dir)
        try:
            output = _worker.run(_bridge.context_from(context), _bridge.payload_from(payload))
            return _bridge.output_to(wit, output)
        except Exception as e:
            raise Err(_bridge.error_to(wit, e))
