//! Context assembly: the five layers of seed 004 that a block's worker
//! receives, in priority order:
//!
//! 1. **Payload** — the run's payload after the block's merge strategy;
//! 2. **Block contract** — the assembled system prompt and the block config;
//! 3. **Inherited context** — static memory: the node's own over that of
//!    the nodes that called it, up to the nearest isolated node
//!    (`context_inheritance: false`), which sees only its own;
//! 4. **Artifacts** — the latest structured output of each block that ran
//!    earlier in the same context scope (an isolated subroutine starts with
//!    none and its callers never see its private ones);
//! 5. **Metadata** — identifiers, step index, attempt, previous block.
//!
//! The run's inputs (`wfhost run --input/--set`) are rendered after the
//! block contract, only when the run has any.
//!
//! [`AssembledContext::render`] turns the layers into one document in that
//! order, omitting empty layers; workers get both the structured layers and
//! the rendered document.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::run::payload::ExecutionPayload;

/// Identifiers and counters of the block execution (layer 5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    pub workflow_id: String,
    pub execution_id: String,
    pub node_id: String,
    pub block_id: String,
    pub step_index: u64,
    /// 1 for the block's first execution in the run.
    pub attempt: u32,
    pub previous_block_id: Option<String>,
}

/// The five layers.
#[derive(Debug, Clone, PartialEq)]
pub struct AssembledContext {
    pub payload: ExecutionPayload,
    pub system_prompt: String,
    pub config: serde_json::Value,
    /// The run's inputs; rendered only when not empty.
    pub inputs: crate::run::inputs::Inputs,
    pub inherited: serde_json::Map<String, serde_json::Value>,
    /// `node.block` → its latest structured output.
    pub artifacts: BTreeMap<String, String>,
    pub metadata: Metadata,
}

/// Merge static memories, outermost first; inner keys win.
pub fn inherit<'a>(
    memories: impl IntoIterator<Item = &'a serde_json::Map<String, serde_json::Value>>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut out = serde_json::Map::new();
    for memory in memories {
        for (k, v) in memory {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

impl AssembledContext {
    /// The layers as one document, in priority order.
    pub fn render(&self) -> String {
        let mut sections: Vec<String> = Vec::new();
        if !self.payload.is_empty() {
            let mut s = String::from("## Payload");
            for seg in &self.payload {
                let _ = write!(s, "\n[{}] {}", seg.kind, seg.content);
            }
            sections.push(s);
        }
        let mut contract = String::new();
        if !self.system_prompt.is_empty() {
            contract.push_str(&self.system_prompt);
        }
        if !self.config.is_null() {
            if !contract.is_empty() {
                contract.push('\n');
            }
            let _ = write!(contract, "Config: {}", self.config);
        }
        if !contract.is_empty() {
            sections.push(format!("## Block contract\n{contract}"));
        }
        if !self.inputs.is_empty() {
            let json = serde_json::to_string_pretty(&self.inputs).unwrap_or_default();
            sections.push(format!("## Inputs\n{json}"));
        }
        if !self.inherited.is_empty() {
            let json = serde_json::to_string_pretty(&self.inherited).unwrap_or_default();
            sections.push(format!("## Inherited context\n{json}"));
        }
        if !self.artifacts.is_empty() {
            let mut s = String::from("## Artifacts");
            for (block, content) in &self.artifacts {
                let _ = write!(s, "\n### {block}\n{content}");
            }
            sections.push(s);
        }
        let m = &self.metadata;
        let mut meta = format!(
            "## Metadata\nworkflow: {}\nexecution: {}\nblock: {}.{}\nstep: {}\nattempt: {}",
            m.workflow_id, m.execution_id, m.node_id, m.block_id, m.step_index, m.attempt
        );
        if let Some(prev) = &m.previous_block_id {
            let _ = write!(meta, "\nprevious block: {prev}");
        }
        sections.push(meta);
        sections.join("\n\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::payload::ContextSegment;
    use serde_json::json;

    fn metadata() -> Metadata {
        Metadata {
            workflow_id: "w".into(),
            execution_id: "e".into(),
            node_id: "main".into(),
            block_id: "b".into(),
            step_index: 2,
            attempt: 1,
            previous_block_id: Some("main.a".into()),
        }
    }

    #[test]
    fn layers_render_in_priority_order() {
        let ctx = AssembledContext {
            payload: vec![ContextSegment::new("1", "NOTE", "hello")],
            system_prompt: "Be brief.".into(),
            config: json!({"k": 1}),
            inputs: json!({"topic": "rust"}).as_object().unwrap().clone(),
            inherited: json!({"style": "terse"}).as_object().unwrap().clone(),
            artifacts: BTreeMap::from([("main.a".to_string(), "{\"ok\":true}".to_string())]),
            metadata: metadata(),
        };
        let text = ctx.render();
        let order: Vec<usize> = [
            "## Payload",
            "## Block contract",
            "## Inputs",
            "## Inherited context",
            "## Artifacts",
            "## Metadata",
        ]
        .iter()
        .map(|h| {
            text.find(h)
                .unwrap_or_else(|| panic!("{h} missing in {text}"))
        })
        .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert!(
            text.contains("[NOTE] hello\n\n## Block contract\nBe brief.\nConfig: {\"k\":1}"),
            "{text}"
        );
        assert!(
            text.ends_with("attempt: 1\nprevious block: main.a"),
            "{text}"
        );
    }

    #[test]
    fn empty_layers_are_omitted() {
        let ctx = AssembledContext {
            payload: vec![],
            system_prompt: String::new(),
            config: serde_json::Value::Null,
            inputs: Default::default(),
            inherited: Default::default(),
            artifacts: Default::default(),
            metadata: Metadata {
                previous_block_id: None,
                ..metadata()
            },
        };
        assert_eq!(
            ctx.render(),
            "## Metadata\nworkflow: w\nexecution: e\nblock: main.b\nstep: 2\nattempt: 1"
        );
    }

    #[test]
    fn inner_memory_wins() {
        let outer = json!({"a": 1, "b": 1}).as_object().unwrap().clone();
        let inner = json!({"b": 2}).as_object().unwrap().clone();
        assert_eq!(
            serde_json::Value::Object(inherit([&outer, &inner])),
            json!({"a": 1, "b": 2})
        );
    }
}
