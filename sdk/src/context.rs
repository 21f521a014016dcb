//! Conveniences on the generated contract types.

use serde::de::DeserializeOwned;

use crate::{
    BlockContext, BlockRef, CallTarget, ContextSegment, EngineCommand, PluginError, Statistics,
    WorkerOutput,
};

/// A new context segment with a generated id (`<kind>-<n>`, unique within
/// this component instance).
pub fn segment(kind: impl Into<String>, content: impl Into<String>) -> ContextSegment {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let kind = kind.into();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    ContextSegment {
        id: format!("{}-{n}", kind.to_ascii_lowercase()),
        kind,
        content: content.into(),
    }
}

impl BlockContext {
    /// The block's `config`, deserialized. An absent config reads as JSON
    /// `null`, so use `Option<T>` or a type with defaults if it is optional.
    pub fn config<T: DeserializeOwned>(&self) -> Result<T, PluginError> {
        serde_json::from_str(&self.config)
            .map_err(|e| PluginError::new("bad-config", format!("block config: {e}")))
    }

    /// The run's inputs (`wfhost run --input FILE --set NAME=VALUE`),
    /// deserialized: a struct with a field per input, or a
    /// `serde_json::Map` for all of them. A run without inputs reads as an
    /// empty object.
    pub fn inputs<T: DeserializeOwned>(&self) -> Result<T, PluginError> {
        serde_json::from_str(&self.inputs)
            .map_err(|e| PluginError::new("bad-inputs", format!("run inputs: {e}")))
    }

    /// The node's `static_memory`, deserialized.
    pub fn static_memory<T: DeserializeOwned>(&self) -> Result<T, PluginError> {
        serde_json::from_str(&self.static_memory)
            .map_err(|e| PluginError::new("bad-static-memory", format!("static memory: {e}")))
    }

    /// A context for native unit tests of plugin logic (a run without
    /// inputs; see [`BlockContext::with_inputs`]).
    pub fn for_test(block_id: &str, config: serde_json::Value) -> Self {
        BlockContext {
            workflow_id: "test-workflow".into(),
            execution_id: "test-execution".into(),
            node_id: "main".into(),
            block_id: block_id.into(),
            step_index: 0,
            attempt: 1,
            previous_block_id: None,
            static_memory: "{}".into(),
            inherited_memory: "{}".into(),
            artifacts: Vec::new(),
            config: config.to_string(),
            inputs: "{}".into(),
            file_restrictions: None,
            workspace_dir: ".".into(),
            system_prompt: String::new(),
            assembled_context: String::new(),
        }
    }

    /// This context with the given run inputs (a JSON object), for tests.
    pub fn with_inputs(mut self, inputs: serde_json::Value) -> Self {
        self.inputs = inputs.to_string();
        self
    }
}

impl PluginError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        PluginError {
            code: code.into(),
            message: message.into(),
        }
    }
}

impl WorkerOutput {
    /// An output with the given payload and signal, no structured output and
    /// zeroed statistics.
    pub fn new(payload: Vec<ContextSegment>, signal: impl Into<String>) -> Self {
        WorkerOutput {
            payload,
            signal: signal.into(),
            structured_output: None,
            statistics: Statistics {
                tokens_used: 0,
                lines_written: 0,
            },
        }
    }

    /// Attach structured output (JSON text) for the host to validate.
    pub fn with_structured_output(mut self, json: impl Into<String>) -> Self {
        self.structured_output = Some(json.into());
        self
    }

    /// Set the statistics reported for this block.
    pub fn with_statistics(mut self, tokens_used: u64, lines_written: u64) -> Self {
        self.statistics = Statistics {
            tokens_used,
            lines_written,
        };
        self
    }
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

impl EngineCommand {
    pub fn jump(target: &str) -> Self {
        EngineCommand::Jump(BlockRef::parse(target))
    }

    pub fn call(node: &str, return_to: Option<&str>) -> Self {
        EngineCommand::Call(CallTarget {
            node: node.to_string(),
            return_to: return_to.map(BlockRef::parse),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Inputs {
        topic: String,
        count: u32,
    }

    #[test]
    fn inputs_deserialize_like_config() {
        let ctx = BlockContext::for_test("b", serde_json::Value::Null)
            .with_inputs(serde_json::json!({"topic": "rust", "count": 3}));
        assert_eq!(
            ctx.inputs::<Inputs>().unwrap(),
            Inputs {
                topic: "rust".into(),
                count: 3
            }
        );
        let none = BlockContext::for_test("b", serde_json::Value::Null);
        let all: serde_json::Map<String, serde_json::Value> = none.inputs().unwrap();
        assert!(all.is_empty());
        let err = none.inputs::<Inputs>().unwrap_err();
        assert_eq!(err.code, "bad-inputs");
    }
}
