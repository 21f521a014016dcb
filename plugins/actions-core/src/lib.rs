//! `actions-core`: wfhost's default ActionHandler.
//!
//! Interprets the core action grammar documented in `wfhost_core::actions`
//! (`JUMP:<block>`, `JUMP:<node>.<block>`, `CALL:<node>[@<block>]`,
//! `RETURN`, `END`, `FAIL[:reason]`, `GATE[:prompt]`) and checks targets
//! against the run view, so a bad target fails with the action named.

use wfhost_core::actions;
use wfhost_core::command::{BlockRef as CoreRef, EngineCommand as CoreCommand};
use wfhost_sdk::prelude::*;

pub struct CoreActions;

fn block_ref(r: CoreRef) -> BlockRef {
    BlockRef {
        node: r.node,
        block: r.block,
    }
}

fn check_block(action: &str, target: &CoreRef, run: &RunView) -> Result<(), PluginError> {
    match &target.node {
        Some(node) if !run.node_ids.contains(node) => Err(PluginError::new(
            "unknown-target",
            format!("`{action}`: node `{node}` does not exist"),
        )),
        None if !run.block_ids.contains(&target.block) => Err(PluginError::new(
            "unknown-target",
            format!(
                "`{action}`: block `{}` does not exist in node `{}`",
                target.block, run.node_id
            ),
        )),
        _ => Ok(()),
    }
}

impl ActionHandler for CoreActions {
    fn interpret(action: &str, run: RunView) -> Result<EngineCommand, PluginError> {
        let command =
            actions::parse(action).map_err(|e| PluginError::new("bad-action", e.to_string()))?;
        Ok(match command {
            CoreCommand::Jump(target) => {
                check_block(action, &target, &run)?;
                EngineCommand::Jump(block_ref(target))
            }
            CoreCommand::Call { node, return_to } => {
                if !run.node_ids.contains(&node) {
                    return Err(PluginError::new(
                        "unknown-target",
                        format!("`{action}`: node `{node}` does not exist"),
                    ));
                }
                if let Some(back) = &return_to {
                    check_block(action, back, &run)?;
                }
                EngineCommand::Call(CallTarget {
                    node,
                    return_to: return_to.map(block_ref),
                })
            }
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
            node_ids: vec!["main".into(), "sub".into()],
            block_ids: vec!["a".into(), "b".into()],
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
    fn refuses_unknown_targets_and_verbs() {
        let e = CoreActions::interpret("JUMP:zz", view()).unwrap_err();
        assert_eq!(e.code, "unknown-target");
        let e = CoreActions::interpret("CALL:ghost", view()).unwrap_err();
        assert_eq!(e.code, "unknown-target");
        let e = CoreActions::interpret("TELEPORT:x", view()).unwrap_err();
        assert_eq!(e.code, "bad-action");
    }
}
