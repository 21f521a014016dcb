//! `{{name}}`: a wfhost action handler.
//!
//! A workflow registers it for the verb `SKIP_TO`
//! (`"action_handlers": {"SKIP_TO": "{{name}}"}`); a transition's action
//! `SKIP_TO:<block>` then jumps to that block (`node.block` or a block of
//! the current node). The core verbs stay with the built-in handler.

use wfhost_sdk::prelude::*;

pub struct Plugin;

impl ActionHandler for Plugin {
    fn interpret(action: &str, run: RunView) -> Result<EngineCommand, PluginError> {
        match action.split_once(':') {
            Some(("SKIP_TO", target)) if !target.trim().is_empty() => {
                log::info(format!(
                    "{}.{} signalled {}: skipping to {}",
                    run.node_id,
                    run.block_id,
                    run.signal,
                    target.trim()
                ));
                Ok(EngineCommand::jump(target.trim()))
            }
            _ => Err(PluginError::new(
                "bad-action",
                format!("`{action}`: expected SKIP_TO:<block>"),
            )),
        }
    }
}

export_action_handler!(Plugin);

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> RunView {
        RunView {
            workflow_id: "test".into(),
            execution_id: "test-run".into(),
            node_id: "main".into(),
            block_id: "start".into(),
            signal: "SIGNAL:SUCCESS".into(),
            step_index: 0,
            return_stack: Vec::new(),
        }
    }

    #[test]
    fn skip_to_jumps() {
        match Plugin::interpret("SKIP_TO:finish", view()).unwrap() {
            EngineCommand::Jump(target) => {
                assert_eq!((target.node, target.block.as_str()), (None, "finish"))
            }
            other => panic!("expected a jump, got {other:?}"),
        }
    }

    #[test]
    fn anything_else_is_refused() {
        let err = Plugin::interpret("SKIP_TO:", view()).unwrap_err();
        assert_eq!(err.code, "bad-action");
    }
}
