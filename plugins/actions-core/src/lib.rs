//! `actions-core`: wfhost's default ActionHandler.
//!
//! Interprets the core action grammar documented in `wfhost_actions::grammar`
//! (`JUMP:<block>`, `JUMP:<node>.<block>`, `CALL:<node>[@<block>]`,
//! `RETURN`, `END`, `FAIL[:reason]`, `GATE[:prompt]`). Targets are checked
//! when the manifest loads and again by the engine when it executes the
//! command.

use wfhost_actions::command::{BlockRef as CoreRef, EngineCommand as CoreCommand};
use wfhost_actions::grammar as actions;
use wfhost_sdk::prelude::*;

pub struct CoreActions;

fn block_ref(r: CoreRef) -> BlockRef {
    BlockRef {
        node: r.node,
        block: r.block,
    }
}

impl ActionHandler for CoreActions {
    fn interpret(action: &str, _run: RunView) -> Result<EngineCommand, PluginError> {
        let command =
            actions::parse(action).map_err(|e| PluginError::new("bad-action", e.to_string()))?;
        Ok(match command {
            CoreCommand::Jump(target) => EngineCommand::Jump(block_ref(target)),
            CoreCommand::Call { node, return_to } => EngineCommand::Call(CallTarget {
                node,
                return_to: return_to.map(block_ref),
            }),
            CoreCommand::Return => EngineCommand::Return,
            CoreCommand::End => EngineCommand::End,
            CoreCommand::Fail(reason) => EngineCommand::Fail(reason),
            CoreCommand::Gate(prompt) => EngineCommand::Gate(prompt),
        })
    }
}

export_action_handler!(CoreActions);

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> RunView {
        RunView {
            workflow_id: "w".into(),
            execution_id: "e".into(),
            node_id: "main".into(),
            block_id: "a".into(),
            signal: "SIGNAL:SUCCESS".into(),
            step_index: 0,
            return_stack: vec![],
        }
    }

    #[test]
    fn interprets_core_actions() {
        assert!(matches!(
            CoreActions::interpret("JUMP:b", view()),
            Ok(EngineCommand::Jump(BlockRef { node: None, .. }))
        ));
        assert!(matches!(
            CoreActions::interpret("CALL:sub@b", view()),
            Ok(EngineCommand::Call(CallTarget {
                return_to: Some(_),
                ..
            }))
        ));
        assert!(matches!(
            CoreActions::interpret("END", view()),
            Ok(EngineCommand::End)
        ));
    }

    #[test]
    fn refuses_malformed_actions() {
        let e = CoreActions::interpret("TELEPORT:x", view()).unwrap_err();
        assert_eq!(e.code, "bad-action");
        let e = CoreActions::interpret("JUMP:", view()).unwrap_err();
        assert_eq!(e.code, "bad-action");
    }
}
