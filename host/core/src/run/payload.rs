//! The execution payload and the per-block contract handed to workers.

use serde::{Deserialize, Serialize};

/// One ordered piece of the execution payload (a `ContextSegment`: its id, semantic type and content).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Statistics {
    pub tokens_used: u64,
    pub lines_written: u64,
    /// What the block's agent CLIs reported of the model's work (absent
    /// when they reported nothing): part of `tokens_used`, broken down.
    #[serde(default, skip_serializing_if = "ModelUsage::is_zero")]
    pub usage: ModelUsage,
}

impl Statistics {
    pub fn add(&mut self, other: Statistics) {
        self.tokens_used = self.tokens_used.saturating_add(other.tokens_used);
        self.lines_written = self.lines_written.saturating_add(other.lines_written);
        self.usage.add(other.usage);
    }
}

/// The model's work as agent CLIs report it, summed.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct ModelUsage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    /// Input read from the model's prompt cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Input written to the model's prompt cache.
    #[serde(default)]
    pub cache_creation_tokens: u64,
    /// What the CLIs said it cost, in millionths of a US dollar (0: they
    /// did not say).
    #[serde(default)]
    pub cost_micro_usd: u64,
}

impl ModelUsage {
    pub fn is_zero(&self) -> bool {
        *self == ModelUsage::default()
    }

    pub fn add(&mut self, other: ModelUsage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_tokens = self
            .cache_read_tokens
            .saturating_add(other.cache_read_tokens);
        self.cache_creation_tokens = self
            .cache_creation_tokens
            .saturating_add(other.cache_creation_tokens);
        self.cost_micro_usd = self.cost_micro_usd.saturating_add(other.cost_micro_usd);
    }

    /// A cost in US dollars as millionths (rounded; a cost that is not a
    /// finite, non-negative number counts as none).
    pub fn micro_usd(cost: f64) -> u64 {
        if cost.is_finite() && cost >= 0.0 {
            (cost * 1e6).round().min(u64::MAX as f64) as u64
        } else {
            0
        }
    }

    /// `in 1,200 · out 80 · cache 700 read, 33 written · $0.0123`, the
    /// parts that are not zero.
    pub fn describe(&self) -> String {
        let mut parts = vec![
            format!("in {}", self.input_tokens),
            format!("out {}", self.output_tokens),
        ];
        match (self.cache_read_tokens, self.cache_creation_tokens) {
            (0, 0) => {}
            (read, 0) => parts.push(format!("cache {read} read")),
            (read, written) => parts.push(format!("cache {read} read, {written} written")),
        }
        if self.cost_micro_usd > 0 {
            parts.push(format!("${:.4}", self.cost_micro_usd as f64 / 1e6));
        }
        parts.join(" · ")
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
    /// The workspace files the block's changes wrote (workspace-relative),
    /// as the host applied them; set by the host, not the worker.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub written: Vec<String>,
}
