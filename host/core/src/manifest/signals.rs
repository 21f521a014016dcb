//! Which signals a block can emit, and the transitions that wait for a
//! signal that never comes (a typo such as `SIGNAL:SUCESS`).
//!
//! A plugin may declare the signals its worker emits (the runtime reads
//! the declaration from the component); an entry `config:KEY` stands for
//! the string in the block's config under `KEY`. Signals the engine itself
//! produces are always possible, and a parallel block signals what its
//! fan-in decides, whatever its worker.

use std::collections::BTreeSet;

use crate::manifest::analysis::Warning;
use crate::manifest::{Block, Workflow};
use crate::parallel::fan_out;
use crate::run::transitions::{
    FAIL_DEFAULT, GATE_APPROVED, GATE_CHANGES_REQUESTED, NEEDS_DECISION, VALIDATION_FAIL,
    WORKER_ERROR,
};

/// Signals the engine produces for any block.
pub const ENGINE_SIGNALS: &[&str] = &[
    FAIL_DEFAULT,
    VALIDATION_FAIL,
    WORKER_ERROR,
    GATE_APPROVED,
    GATE_CHANGES_REQUESTED,
    NEEDS_DECISION,
];

/// The prefix of a declaration entry that names a config key.
const CONFIG_ENTRY: &str = "config:";

/// Every signal `block` can emit, given its worker's declaration; `None`
/// when the worker does not declare its signals (anything is possible).
pub fn possible(block: &Block, declared: Option<&[String]>) -> Option<BTreeSet<String>> {
    let mut out: BTreeSet<String> = ENGINE_SIGNALS.iter().map(|s| s.to_string()).collect();
    if block.parallel.is_some() {
        out.extend(fan_out::FAN_IN_SIGNALS.iter().map(|s| s.to_string()));
        return Some(out);
    }
    if crate::control::is_control(&block.worker) {
        out.extend(
            crate::control::signals(&block.worker)
                .iter()
                .map(|s| s.to_string()),
        );
        return Some(out);
    }
    for entry in declared? {
        match entry.strip_prefix(CONFIG_ENTRY) {
            Some(key) => {
                if let Some(signal) = block.config.get(key).and_then(|v| v.as_str()) {
                    out.insert(signal.to_string());
                }
            }
            None => {
                out.insert(entry.clone());
            }
        }
    }
    Some(out)
}

/// A warning for every transition on a signal its block never emits, with
/// the nearest possible signal as a suggestion. `declared` gives a worker
/// plugin's declaration by plugin name.
pub fn warnings(wf: &Workflow, declared: &dyn Fn(&str) -> Option<Vec<String>>) -> Vec<Warning> {
    let mut out = Vec::new();
    for (node_id, node) in &wf.nodes {
        for (block_id, block) in &node.blocks {
            let declaration = declared(&block.worker);
            let Some(possible) = possible(block, declaration.as_deref()) else {
                continue;
            };
            for (i, t) in block.transitions.iter().enumerate() {
                if possible.contains(&t.on_signal) {
                    continue;
                }
                let hint = nearest(&t.on_signal, &possible)
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                let emitter = if block.parallel.is_some() {
                    "this parallel block".to_string()
                } else {
                    format!("worker `{}`", block.worker)
                };
                out.push(Warning {
                    location: format!(
                        "/nodes/{node_id}/blocks/{block_id}/transitions/{i}/on_signal"
                    ),
                    message: format!("{emitter} never emits `{}`{hint}", t.on_signal),
                });
            }
        }
    }
    out
}

/// The candidate closest to `word` by edit distance, if it is close
/// enough to be a likely typo (at most a third of the word's length).
pub fn nearest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a String>,
) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, c)| c.as_str())
}

/// Levenshtein distance over characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wf(transitions: serde_json::Value, config: serde_json::Value) -> Workflow {
        serde_json::from_value(serde_json::json!({
            "id": "w", "start_node": "main",
            "nodes": {"main": {"entry_block": "a", "blocks": {"a": {
                "worker": "echo", "config": config, "transitions": transitions
            }}}}
        }))
        .unwrap()
    }

    fn echo(name: &str) -> Option<Vec<String>> {
        (name == "echo").then(|| {
            vec![
                "SIGNAL:SUCCESS".to_string(),
                "SIGNAL:WRITE_REFUSED".to_string(),
                "config:signal".to_string(),
            ]
        })
    }

    #[test]
    fn distances() {
        assert_eq!(edit_distance("SIGNAL:SUCESS", "SIGNAL:SUCCESS"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn a_typo_is_named_with_a_suggestion() {
        let w = wf(
            serde_json::json!([{"on_signal": "SIGNAL:SUCESS", "action": "END"}]),
            serde_json::json!({}),
        );
        let warnings = warnings(&w, &echo);
        assert_eq!(warnings.len(), 1);
        assert_eq!(
            warnings[0].location,
            "/nodes/main/blocks/a/transitions/0/on_signal"
        );
        assert_eq!(
            warnings[0].message,
            "worker `echo` never emits `SIGNAL:SUCESS`; did you mean `SIGNAL:SUCCESS`?"
        );
    }

    #[test]
    fn declared_configured_and_engine_signals_are_fine() {
        let w = wf(
            serde_json::json!([
                {"on_signal": "SIGNAL:SUCCESS", "action": "END"},
                {"on_signal": "SIGNAL:DONE", "action": "END"},
                {"on_signal": "SIGNAL:WORKER_ERROR", "action": "END"},
                {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "END"}
            ]),
            serde_json::json!({"signal": "SIGNAL:DONE"}),
        );
        assert!(warnings(&w, &echo).is_empty());
        // An undeclared worker may emit anything.
        assert!(warnings(&w, &|_| None).is_empty());
    }

    #[test]
    fn a_far_off_signal_gets_no_suggestion() {
        let w = wf(
            serde_json::json!([{"on_signal": "SIGNAL:COMPLETELY_DIFFERENT", "action": "END"}]),
            serde_json::json!({}),
        );
        let warnings = warnings(&w, &echo);
        assert_eq!(warnings.len(), 1);
        assert!(
            !warnings[0].message.contains("did you mean"),
            "{}",
            warnings[0].message
        );
    }
}
