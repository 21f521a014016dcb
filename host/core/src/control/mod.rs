//! Control blocks: workers the engine evaluates itself, in process, over
//! the run's inputs — no plugin, no sandbox, nothing but a decision.
//!
//! - `wr.when` (config `{"condition": CONDITION}`) signals `SIGNAL:TRUE`
//!   or `SIGNAL:FALSE` by the [`condition`] over the run's inputs: a step
//!   that runs only when a condition holds.
//! - `wr.loop` (config: a [`loops::LoopSpec`]) signals `SIGNAL:ENTER` to
//!   run the loop's body once more or `SIGNAL:EXIT` to leave it, and
//!   records the loop variables in the run's inputs.
//!
//! WorkRail workflows (`formats::workrail`) are translated into chains
//! of external blocks joined by these; any manifest may use them too.
//! What a control block merges into the inputs is recorded with its
//! completion in one append (`inputs_merged`), so a resumed run never
//! counts an iteration twice.

pub mod condition;
pub mod criteria;
pub mod loops;

use std::collections::BTreeMap;

use crate::manifest::Workflow;

use serde_json::{Map, Value};

use condition::Condition;
use loops::LoopSpec;

/// The worker of a conditional block.
pub const WHEN_WORKER: &str = "wr.when";
/// The worker of a loop head.
pub const LOOP_WORKER: &str = "wr.loop";

pub const TRUE: &str = "SIGNAL:TRUE";
pub const FALSE: &str = "SIGNAL:FALSE";
pub const ENTER: &str = "SIGNAL:ENTER";
pub const EXIT: &str = "SIGNAL:EXIT";

/// What a control block decided: its signal and what it merges into the
/// run's inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub signal: String,
    pub inputs: Map<String, Value>,
}

/// Whether `worker` is a control block's.
pub fn is_control(worker: &str) -> bool {
    worker == WHEN_WORKER || worker == LOOP_WORKER
}

/// The signals a control worker emits (none for any other worker).
pub fn signals(worker: &str) -> &'static [&'static str] {
    match worker {
        WHEN_WORKER => &[TRUE, FALSE],
        LOOP_WORKER => &[ENTER, EXIT],
        _ => &[],
    }
}

/// The static check of a control block's config: the pointer (relative
/// to the config) and the reason, when it is malformed.
pub fn check_config(worker: &str, config: &Value) -> Result<(), (String, String)> {
    match worker {
        WHEN_WORKER => when_condition(config).map(|_| ()),
        LOOP_WORKER => LoopSpec::parse(config).map(|_| ()),
        _ => Ok(()),
    }
}

fn when_condition(config: &Value) -> Result<Condition, (String, String)> {
    let extra = config
        .as_object()
        .and_then(|m| m.keys().find(|k| *k != "condition"));
    if let Some(key) = extra {
        return Err((
            format!("/{key}"),
            "a `wr.when` block's config has only `condition`".into(),
        ));
    }
    let Some(condition) = config.get("condition") else {
        return Err((
            String::new(),
            "a `wr.when` block needs `config.condition`".into(),
        ));
    };
    Condition::parse(condition).map_err(|(at, why)| (format!("/condition{at}"), why))
}

/// Evaluate the control block `worker` with `config`; None for a worker
/// that is not a control block's. An error fails the block (its
/// `SIGNAL:WORKER_ERROR`), e.g. a `forEach` over a variable that is not
/// a list.
pub fn evaluate(
    worker: &str,
    config: &Value,
    inputs: &Map<String, Value>,
    artifacts: &BTreeMap<String, String>,
) -> Option<Result<Decision, String>> {
    let bad = |(at, why): (String, String)| format!("config{at}: {why}");
    match worker {
        WHEN_WORKER => Some(when_condition(config).map_err(bad).map(|c| Decision {
            signal: if c.holds(inputs) { TRUE } else { FALSE }.into(),
            inputs: Map::new(),
        })),
        LOOP_WORKER => Some(
            LoopSpec::parse(config)
                .map_err(bad)
                .and_then(|spec| spec.decide(inputs, artifacts)),
        ),
        _ => None,
    }
}

/// The control blocks a run would pass through right after block
/// `node.block` ends with `signal`, decided over `inputs` without running
/// anything: an error when one of them cannot decide (a `for` over a
/// variable that is not a number, a `forEach` over one that is not a
/// list). An MCP server checks an advance with it before recording
/// anything, so that the client can send the missing context and try
/// again. Follows `JUMP:` transitions inside the node, at most 64 control
/// blocks; anything else ends the look.
pub fn lookahead(
    workflow: &Workflow,
    node: &str,
    block: &str,
    signal: &str,
    inputs: &Map<String, Value>,
    artifacts: &BTreeMap<String, String>,
) -> Result<(), String> {
    let Some(blocks) = workflow.nodes.get(node).map(|n| &n.blocks) else {
        return Ok(());
    };
    let mut inputs = inputs.clone();
    let mut at = block.to_string();
    let mut signal = signal.to_string();
    for _ in 0..64 {
        let Some(current) = blocks.get(&at) else {
            return Ok(());
        };
        let action = current
            .transitions
            .iter()
            .find(|t| t.on_signal == signal)
            .map(|t| t.action.as_str());
        let Some(next) = action.and_then(|a| a.strip_prefix("JUMP:")) else {
            return Ok(());
        };
        let next = next.strip_prefix(&format!("{node}.")).unwrap_or(next);
        let Some(target) = blocks.get(next) else {
            return Ok(());
        };
        let Some(decided) = evaluate(&target.worker, &target.config, &inputs, artifacts) else {
            return Ok(());
        };
        let decision = decided?;
        for (k, v) in decision.inputs {
            if v.is_null() {
                inputs.remove(&k);
            } else {
                inputs.insert(k, v);
            }
        }
        at = next.to_string();
        signal = decision.signal;
    }
    Ok(())
}

#[cfg(test)]
mod lookahead_tests {
    use serde_json::json;

    use super::*;

    fn workflow() -> Workflow {
        serde_json::from_value(json!({
            "id": "w", "start_node": "main",
            "nodes": {"main": {"entry_block": "a", "blocks": {
                "a": {"worker": "external", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:guard"}]},
                "guard": {"worker": "wr.when", "config": {"condition": {"var": "go"}},
                          "transitions": [{"on_signal": "SIGNAL:TRUE", "action": "JUMP:each"},
                                          {"on_signal": "SIGNAL:FALSE", "action": "END"}]},
                "each": {"worker": "wr.loop", "config": {"loop_id": "each", "kind": "forEach", "max_iterations": 5,
                         "iteration_var": "i", "items": "files", "item_var": "f", "index_var": "k"},
                         "transitions": [{"on_signal": "SIGNAL:ENTER", "action": "JUMP:b"},
                                         {"on_signal": "SIGNAL:EXIT", "action": "END"}]},
                "b": {"worker": "external"}
            }}}
        }))
        .unwrap()
    }

    #[test]
    fn a_loop_that_cannot_decide_is_found_before_anything_runs() {
        let wf = workflow();
        let none = BTreeMap::new();
        let ctx = |v: serde_json::Value| v.as_object().unwrap().clone();
        let err = lookahead(
            &wf,
            "main",
            "a",
            "SIGNAL:SUCCESS",
            &ctx(json!({"go": true})),
            &none,
        )
        .unwrap_err();
        assert!(err.contains("files"), "{err}");
        // The guard skips the loop: nothing to decide.
        assert!(lookahead(&wf, "main", "a", "SIGNAL:SUCCESS", &ctx(json!({})), &none).is_ok());
        let fine = ctx(json!({"go": true, "files": ["x"]}));
        assert!(lookahead(&wf, "main", "a", "SIGNAL:SUCCESS", &fine, &none).is_ok());
    }
}
