//! The execution payload and the per-block contract handed to workers.

use serde::{Deserialize, Serialize};

/// One ordered piece of the execution payload (seed 004's `ContextSegment`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextSegment {
    pub id: String,
    /// The semantic type, e.g. `SYSTEM_INSTRUCTION`, `WORKER_ERROR`.
    #[serde(rename = "type")]
    pub kind: String,
    pub content: String,
}

impl ContextSegment {
    pub fn new(id: impl Into<String>, kind: impl Into<String>, content: impl Into<String>) -> Self {
        ContextSegment {
            id: id.into(),
            kind: kind.into(),
            content: content.into(),
        }
    }

    /// Bytes this segment occupies, for output caps.
    pub fn size(&self) -> usize {
        self.id.len() + self.kind.len() + self.content.len()
    }
}

/// The ordered "chatbox" history passed between blocks.
pub type ExecutionPayload = Vec<ContextSegment>;

/// Counters reported by workers and aggregated per run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Statistics {
    pub tokens_used: u64,
    pub lines_written: u64,
}

impl Statistics {
    pub fn add(&mut self, other: Statistics) {
        self.tokens_used = self.tokens_used.saturating_add(other.tokens_used);
        self.lines_written = self.lines_written.saturating_add(other.lines_written);
    }
}

/// Everything a worker is told about the block it executes (the WIT
/// `block-context` record, host side).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockContext {
    pub workflow_id: String,
    pub execution_id: String,
    pub node_id: String,
    pub block_id: String,
    pub step_index: u64,
    /// 1 on the block's first execution in the run.
    pub attempt: u32,
    /// `node.block` of the previous step.
    pub previous_block_id: Option<String>,
    /// The node's own static memory.
    pub static_memory: serde_json::Value,
    /// Static memory visible through context inheritance (layer 3).
    pub inherited_memory: serde_json::Value,
    /// `node.block` → latest structured output in this scope (layer 4).
    pub artifacts: std::collections::BTreeMap<String, String>,
    pub config: serde_json::Value,
    /// The run's inputs, a JSON object (empty when the run has none).
    pub inputs: serde_json::Value,
    pub file_restrictions: Option<Vec<String>>,
    pub system_prompt: String,
    /// The five layers rendered in priority order.
    pub assembled_context: String,
}

/// What a worker returned.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WorkerOutput {
    pub payload: ExecutionPayload,
    pub signal: String,
    pub structured_output: Option<String>,
    pub statistics: Statistics,
}
