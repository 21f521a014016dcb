//! An example third-party action handler. A workflow registers it for its
//! own verb:
//!
//! ```json
//! "plugins": { "escalate": { "path": "escalate_actions.wasm" } },
//! "action_handlers": { "ESCALATE": "escalate" }
//! ```
//!
//! Then `ESCALATE:<reason>` pauses the run at a gate whose prompt names the
//! block, the signal and the reason; every other action still goes to
//! `actions-core`.

use wfhost_sdk::prelude::*;

pub struct Escalate;

impl ActionHandler for Escalate {
    fn interpret(action: &str, run: RunView) -> Result<EngineCommand, PluginError> {
        let reason = match action.split_once(':') {
            Some(("ESCALATE", reason)) if !reason.trim().is_empty() => reason.trim(),
            _ => {
                return Err(PluginError::new(
                    "bad-action",
                    format!("`{action}`: expected ESCALATE:<reason>"),
                ));
            }
        };
        Ok(EngineCommand::Gate(format!(
            "escalated by {}.{} on {}: {reason}",
            run.node_id, run.block_id, run.signal
        )))
    }
}

export_action_handler!(Escalate);
