"""`{{name}}`: a wfhost action handler.

A workflow registers it for the verb ``SKIP_TO``
(``"action_handlers": {"SKIP_TO": "{{name}}"}``); a transition's action
``SKIP_TO:<block>`` then jumps to that block (``node.block`` or a block of
the current node). The core verbs stay with the built-in handler.
"""

# Import everything the plugin uses here, at the top: `plugin build` freezes
# what is imported into the component, and a module first imported inside
# run() is not found there.
from wfhost_sdk import ActionHandler, EngineCommand, Jump, PluginError, RunView, export_action_handler, log


@export_action_handler
class Plugin(ActionHandler):
    def interpret(self, action: str, run: RunView) -> EngineCommand:
        verb, _, target = action.partition(":")
        target = target.strip()
        if verb != "SKIP_TO" or not target:
            raise PluginError("bad-action", f"`{action}`: expected SKIP_TO:<block>")
        log.info(f"{run.node_id}.{run.block_id} signalled {run.signal}: skipping to {target}")
        return Jump.to(target)
