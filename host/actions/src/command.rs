//! Engine commands: what an action handler tells the engine to do next.

use std::fmt;

/// A block address; without a node the block is in the current node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockRef {
    pub node: Option<String>,
    pub block: String,
}

impl BlockRef {
    /// Parse `block` or `node.block`.
    pub fn parse(target: &str) -> Self {
        match target.split_once('.') {
            Some((node, block)) => BlockRef {
                node: Some(node.to_string()),
                block: block.to_string(),
            },
            None => BlockRef {
                node: None,
                block: target.to_string(),
            },
        }
    }
}

impl fmt::Display for BlockRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.node {
            Some(node) => write!(f, "{node}.{}", self.block),
            None => f.write_str(&self.block),
        }
    }
}

/// The engine command set (the WIT `engine-command` variant, host side).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineCommand {
    Jump(BlockRef),
    /// Enter `node` at its entry block; `return_to` of `None` returns to the
    /// calling block.
    Call {
        node: String,
        return_to: Option<BlockRef>,
    },
    Return,
    End,
    Fail(String),
    Gate(String),
}

impl fmt::Display for EngineCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineCommand::Jump(target) => write!(f, "jump to {target}"),
            EngineCommand::Call {
                node,
                return_to: Some(back),
            } => write!(f, "call {node} (return to {back})"),
            EngineCommand::Call { node, .. } => write!(f, "call {node}"),
            EngineCommand::Return => f.write_str("return"),
            EngineCommand::End => f.write_str("end"),
            EngineCommand::Fail(reason) => write!(f, "fail: {reason}"),
            EngineCommand::Gate(prompt) => write!(f, "gate: {prompt}"),
        }
    }
}
