"""`{{name}}`: a wfhost block worker.

Config: ``{"greeting": "..."}``. With a greeting it appends a ``GREETING``
segment to the payload and signals ``SIGNAL:SUCCESS``; without one it
signals ``SIGNAL:EMPTY``.
"""

# Import everything the plugin uses here, at the top: `plugin build` freezes
# what is imported into the component, and a module first imported inside
# run() is not found there.
from wfhost_sdk import (
    BlockContext,
    Payload,
    PluginError,
    Worker,
    WorkerOutput,
    export_worker,
    log,
    segment,
)

# The signals it returns are declared in wfhost-plugin.toml (`signals`):
# `plugin build` records them in the component for `wfhost validate`.


@export_worker
class Plugin(Worker):
    def run(self, ctx: BlockContext, payload: Payload) -> WorkerOutput:
        config = ctx.config_json() or {}
        if not isinstance(config, dict) or set(config) - {"greeting"}:
            raise PluginError("bad-config", f"block config: expected an object with only `greeting`, got {ctx.config}")
        greeting = config.get("greeting")
        if greeting is None:
            log.warn("no `greeting` in the block's config")
            return WorkerOutput(payload, "SIGNAL:EMPTY")
        text = f"{greeting} from {ctx.node_id}.{ctx.block_id}"
        log.info(f"greeting with: {text}")
        payload.append(segment("GREETING", text))
        return WorkerOutput(payload, "SIGNAL:SUCCESS")
