//! Static analysis of a checked workflow: things that are legal but
//! probably wrong. `wfhost validate` prints them as warnings.
//!
//! Control flow is only known for the default action handler's grammar; a
//! workflow with a third-party handler gets the fallback check alone.

use std::collections::{BTreeSet, HashMap};

use crate::command::EngineCommand;
use crate::manifest::{DEFAULT_ACTION_HANDLER, Workflow};
use crate::run::transitions::{FAIL_DEFAULT, GATE_APPROVED, GATE_CHANGES_REQUESTED};

/// A warning with the JSON pointer of the place it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub location: String,
    pub message: String,
}

type At = (String, String);

/// Where control can go after a block, per its transitions.
fn successors(wf: &Workflow, node: &str, block: &str) -> (Vec<At>, bool) {
    let mut next = Vec::new();
    let mut terminal = false;
    let Some(b) = wf.nodes.get(node).and_then(|n| n.blocks.get(block)) else {
        return (next, terminal);
    };
    for t in &b.transitions {
        match crate::actions::parse(&t.action) {
            Ok(EngineCommand::Jump(r)) => {
                next.push((r.node.unwrap_or_else(|| node.to_string()), r.block));
            }
            Ok(EngineCommand::Call {
                node: callee,
                return_to,
            }) => {
                if let Some(entry) = wf.nodes.get(&callee).map(|n| n.entry_block.clone()) {
                    next.push((callee, entry));
                }
                let back = return_to
                    .map(|r| (r.node.unwrap_or_else(|| node.to_string()), r.block))
                    .unwrap_or_else(|| (node.to_string(), block.to_string()));
                next.push(back);
            }
            Ok(_) => terminal = true,
            Err(_) => {}
        }
    }
    (next, terminal)
}

/// Warnings for `wf`, in a stable order.
pub fn warnings(wf: &Workflow) -> Vec<Warning> {
    let mut out = Vec::new();
    let at = |node: &str, block: &str| format!("/nodes/{node}/blocks/{block}");

    for (node_id, node) in &wf.nodes {
        for (block_id, block) in &node.blocks {
            // An external block's client can send only the signals of its
            // transitions, and a control block signals one of its two or
            // fails the run with the reason: no fallback is missing there.
            if !crate::manifest::is_engine_worker(&block.worker)
                && !block
                    .transitions
                    .iter()
                    .any(|t| t.on_signal == FAIL_DEFAULT)
            {
                out.push(Warning {
                    location: at(node_id, block_id) + "/transitions",
                    message: format!(
                        "no `{FAIL_DEFAULT}` fallback: an unexpected signal or a worker failure fails the run"
                    ),
                });
            }
            // The answers the block's gates can get: `UD-REVIEW-STRATEGY`
            // is answered with a strategy, which is `SIGNAL:GATE_APPROVED`.
            let mut answers = BTreeSet::new();
            for t in &block.transitions {
                if let Ok(EngineCommand::Gate(prompt)) = crate::actions::parse(&t.action) {
                    answers.insert(GATE_APPROVED);
                    if crate::actions::well_known_gate(&prompt).0
                        != Some(crate::actions::WellKnownGate::ReviewStrategy)
                    {
                        answers.insert(GATE_CHANGES_REQUESTED);
                    }
                }
            }
            for answer in answers {
                if !block.transitions.iter().any(|t| t.on_signal == answer) {
                    out.push(Warning {
                        location: at(node_id, block_id) + "/transitions",
                        message: format!(
                            "opens a gate but has no transition for `{answer}`, the signal it gets when the gate is answered that way"
                        ),
                    });
                }
            }
        }
    }
    // Control flow is only known when every action uses the core grammar.
    if wf.action_handler != DEFAULT_ACTION_HANDLER || !wf.action_handlers.is_empty() {
        return out;
    }

    // Reachability from the start.
    let mut reached: BTreeSet<At> = BTreeSet::new();
    if let Some(start) = wf.nodes.get(&wf.start_node) {
        let mut stack = vec![(wf.start_node.clone(), start.entry_block.clone())];
        while let Some(here) = stack.pop() {
            if !reached.insert(here.clone()) {
                continue;
            }
            stack.extend(successors(wf, &here.0, &here.1).0);
        }
    }
    for (node_id, node) in &wf.nodes {
        for block_id in node.blocks.keys() {
            if !reached.contains(&(node_id.clone(), block_id.clone())) {
                out.push(Warning {
                    location: at(node_id, block_id),
                    message: format!(
                        "block `{node_id}.{block_id}` is unreachable from the start node"
                    ),
                });
            }
        }
    }

    // Which blocks can reach a terminal action (END, FAIL, GATE, RETURN)?
    let all: Vec<At> = wf
        .nodes
        .iter()
        .flat_map(|(n, node)| node.blocks.keys().map(move |b| (n.clone(), b.clone())))
        .collect();
    let edges: HashMap<At, (Vec<At>, bool)> = all
        .iter()
        .map(|a| (a.clone(), successors(wf, &a.0, &a.1)))
        .collect();
    let mut can_end: BTreeSet<At> = edges
        .iter()
        .filter(|(_, (_, terminal))| *terminal)
        .map(|(a, _)| a.clone())
        .collect();
    loop {
        let before = can_end.len();
        for (a, (next, _)) in &edges {
            if !can_end.contains(a) && next.iter().any(|n| can_end.contains(n)) {
                can_end.insert(a.clone());
            }
        }
        if can_end.len() == before {
            break;
        }
    }
    for (node_id, node) in &wf.nodes {
        if !can_end.contains(&(node_id.clone(), node.entry_block.clone())) {
            out.push(Warning {
                location: format!("/nodes/{node_id}"),
                message: format!(
                    "node `{node_id}` can never end: no path from `{}` reaches END, FAIL, GATE or RETURN",
                    node.entry_block
                ),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wf(json: serde_json::Value) -> Workflow {
        crate::manifest::parse(std::path::Path::new("t.json"), &json.to_string()).unwrap()
    }

    fn messages(w: &Workflow) -> Vec<String> {
        warnings(w)
            .into_iter()
            .map(|w| format!("{} {}", w.location, w.message))
            .collect()
    }

    #[test]
    fn a_clean_workflow_has_no_warnings() {
        let w = wf(
            serde_json::json!({"id": "w", "start_node": "main", "nodes": {"main": {"entry_block": "a", "blocks": {
                "a": {"worker": "x", "transitions": [
                    {"on_signal": "SIGNAL:SUCCESS", "action": "CALL:sub@b"},
                    {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL"}]},
                "b": {"worker": "x", "transitions": [{"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "END"}]}
            }}, "sub": {"entry_block": "s", "blocks": {
                "s": {"worker": "x", "transitions": [{"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "RETURN"}]}
            }}}}),
        );
        assert!(messages(&w).is_empty(), "{:?}", messages(&w));
    }

    #[test]
    fn finds_missing_fallbacks_unreachable_blocks_and_endless_nodes() {
        let w = wf(
            serde_json::json!({"id": "w", "start_node": "main", "nodes": {"main": {"entry_block": "a", "blocks": {
                "a": {"worker": "x", "transitions": [{"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "JUMP:b"}]},
                "b": {"worker": "x", "transitions": [{"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "JUMP:a"}]},
                "orphan": {"worker": "x", "transitions": [{"on_signal": "SIGNAL:OK", "action": "END"}]}
            }}}}),
        );
        assert_eq!(
            messages(&w),
            [
                "/nodes/main/blocks/orphan/transitions no `SIGNAL:FAIL_DEFAULT` fallback: an unexpected signal or a worker failure fails the run",
                "/nodes/main/blocks/orphan block `main.orphan` is unreachable from the start node",
                "/nodes/main node `main` can never end: no path from `a` reaches END, FAIL, GATE or RETURN",
            ]
        );
    }

    #[test]
    fn a_gate_without_transitions_for_its_answers_is_flagged() {
        let w = wf(
            serde_json::json!({"id": "w", "start_node": "main", "nodes": {"main": {"entry_block": "a", "blocks": {
                "a": {"worker": "x", "transitions": [
                    {"on_signal": "SIGNAL:SUCCESS", "action": "GATE:ok?"},
                    {"on_signal": "SIGNAL:GATE_APPROVED", "action": "END"},
                    {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL"}]}
            }}}}),
        );
        let found = warnings(&w);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].message.contains("SIGNAL:GATE_CHANGES_REQUESTED"),
            "{found:?}"
        );
    }

    /// `UD-REVIEW-STRATEGY` is answered with a strategy (`SIGNAL:GATE_APPROVED`),
    /// never with changes requested: no transition is missing for that.
    #[test]
    fn the_review_strategy_gate_needs_only_its_approved_transition() {
        let block = |action: &str, approved: bool| {
            let mut transitions = vec![
                serde_json::json!({"on_signal": "SIGNAL:SUCCESS", "action": action}),
                serde_json::json!({"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL"}),
            ];
            if approved {
                transitions.push(
                    serde_json::json!({"on_signal": "SIGNAL:GATE_APPROVED", "action": "END"}),
                );
            }
            wf(
                serde_json::json!({"id": "w", "start_node": "main", "nodes": {"main": {"entry_block": "a", "blocks": {
                    "a": {"worker": "x", "transitions": transitions}
                }}}}),
            )
        };
        assert_eq!(warnings(&block("GATE:REVIEW_STRATEGY:how?", true)), vec![]);
        let found = warnings(&block("GATE:REVIEW_STRATEGY", false));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].message.contains("SIGNAL:GATE_APPROVED"),
            "{found:?}"
        );
        let found = warnings(&block("GATE:APPROVE_DESIGN", true));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].message.contains("SIGNAL:GATE_CHANGES_REQUESTED"),
            "{found:?}"
        );
    }
}
