//! `payload_merge_strategy`: the small instruction language that assembles
//! the payload a block's worker receives from the run's payload.
//!
//! A block lists instructions; they apply in order to the current payload.
//! An empty list means `inherit` (the payload as it is).
//!
//! | instruction | effect |
//! |---|---|
//! | `inherit` | no change (documents intent) |
//! | `clear` | start from an empty payload |
//! | `keep_last:N` | keep only the last N segments |
//! | `drop_type:T[,T…]` | remove segments of these types |
//! | `keep_type:T[,T…]` | keep only segments of these types |
//! | `append_static:KEY` | append the node's `static_memory[KEY]` as a `STATIC_MEMORY` segment |
//! | `append_config:KEY` | append the block's `config[KEY]` as a `CONFIG` segment |
//!
//! Instructions are parsed when the manifest loads, so an unknown or
//! malformed one is a validation error naming its place, never a runtime
//! surprise. A missing `KEY` at run time appends nothing and is not an
//! error: static memory and config are data the workflow author controls,
//! and [`crate::manifest::check`] already verifies keys that are static.

use std::fmt;

use crate::run::payload::{ContextSegment, ExecutionPayload};

/// One parsed instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeInstruction {
    Inherit,
    Clear,
    KeepLast(usize),
    DropTypes(Vec<String>),
    KeepTypes(Vec<String>),
    AppendStatic(String),
    AppendConfig(String),
}

/// Why an instruction is not valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeSyntaxError {
    pub instruction: String,
    pub reason: String,
}

impl fmt::Display for MergeSyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "merge instruction `{}`: {}",
            self.instruction, self.reason
        )
    }
}

impl std::error::Error for MergeSyntaxError {}

/// Parse one instruction.
pub fn parse(instruction: &str) -> Result<MergeInstruction, MergeSyntaxError> {
    let bad = |reason: &str| MergeSyntaxError {
        instruction: instruction.to_string(),
        reason: reason.to_string(),
    };
    let (verb, arg) = match instruction.split_once(':') {
        Some((v, a)) => (v.trim(), Some(a.trim())),
        None => (instruction.trim(), None),
    };
    let needs_arg = || match arg {
        Some(a) if !a.is_empty() => Ok(a),
        _ => Err(bad("needs an argument after `:`")),
    };
    let types = |a: &str| -> Result<Vec<String>, MergeSyntaxError> {
        let list: Vec<String> = a.split(',').map(|t| t.trim().to_string()).collect();
        if list.iter().any(String::is_empty) {
            return Err(bad("has an empty segment type"));
        }
        Ok(list)
    };
    match verb {
        "inherit" | "clear" if arg.is_some() => Err(bad("takes no argument")),
        "inherit" => Ok(MergeInstruction::Inherit),
        "clear" => Ok(MergeInstruction::Clear),
        "keep_last" => needs_arg()?
            .parse()
            .map(MergeInstruction::KeepLast)
            .map_err(|_| bad("needs a whole number, e.g. `keep_last:5`")),
        "drop_type" => Ok(MergeInstruction::DropTypes(types(needs_arg()?)?)),
        "keep_type" => Ok(MergeInstruction::KeepTypes(types(needs_arg()?)?)),
        "append_static" => Ok(MergeInstruction::AppendStatic(needs_arg()?.to_string())),
        "append_config" => Ok(MergeInstruction::AppendConfig(needs_arg()?.to_string())),
        _ => Err(bad(
            "unknown instruction (expected inherit, clear, keep_last:N, drop_type:T, \
             keep_type:T, append_static:KEY or append_config:KEY)",
        )),
    }
}

/// Parse a whole strategy; the error carries the index of the bad entry.
pub fn parse_all(strategy: &[String]) -> Result<Vec<MergeInstruction>, (usize, MergeSyntaxError)> {
    strategy
        .iter()
        .enumerate()
        .map(|(i, s)| parse(s).map_err(|e| (i, e)))
        .collect()
}

fn render(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Apply a parsed strategy to `payload`.
pub fn apply(
    strategy: &[MergeInstruction],
    payload: &ExecutionPayload,
    static_memory: &serde_json::Map<String, serde_json::Value>,
    config: &serde_json::Value,
    step: u64,
) -> ExecutionPayload {
    let mut out = payload.clone();
    for instruction in strategy {
        match instruction {
            MergeInstruction::Inherit => {}
            MergeInstruction::Clear => out.clear(),
            MergeInstruction::KeepLast(n) => {
                let excess = out.len().saturating_sub(*n);
                out.drain(..excess);
            }
            MergeInstruction::DropTypes(types) => out.retain(|s| !types.contains(&s.kind)),
            MergeInstruction::KeepTypes(types) => out.retain(|s| types.contains(&s.kind)),
            MergeInstruction::AppendStatic(key) => {
                if let Some(value) = static_memory.get(key) {
                    out.push(ContextSegment::new(
                        format!("static-{key}-{step}"),
                        "STATIC_MEMORY",
                        render(value),
                    ));
                }
            }
            MergeInstruction::AppendConfig(key) => {
                if let Some(value) = config.get(key) {
                    out.push(ContextSegment::new(
                        format!("config-{key}-{step}"),
                        "CONFIG",
                        render(value),
                    ));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn seg(kind: &str, content: &str) -> ContextSegment {
        ContextSegment::new(content, kind, content)
    }

    fn run(strategy: &[&str], payload: &[ContextSegment]) -> Vec<String> {
        let owned: Vec<String> = strategy.iter().map(|s| s.to_string()).collect();
        let parsed = parse_all(&owned).unwrap();
        let memory = json!({"rules": "no force pushes", "limits": {"n": 1}});
        let config = json!({"hint": "be terse"});
        apply(
            &parsed,
            &payload.to_vec(),
            memory.as_object().unwrap(),
            &config,
            7,
        )
        .into_iter()
        .map(|s| format!("{}:{}", s.kind, s.content))
        .collect()
    }

    #[test]
    fn empty_strategy_inherits() {
        let p = [seg("A", "1"), seg("B", "2")];
        assert_eq!(run(&[], &p), ["A:1", "B:2"]);
        assert_eq!(run(&["inherit"], &p), ["A:1", "B:2"]);
    }

    #[test]
    fn instructions_apply_in_order() {
        let p = [seg("A", "1"), seg("B", "2"), seg("A", "3"), seg("C", "4")];
        assert_eq!(run(&["drop_type:B"], &p), ["A:1", "A:3", "C:4"]);
        assert_eq!(run(&["keep_type:A,C", "keep_last:2"], &p), ["A:3", "C:4"]);
        assert_eq!(run(&["keep_last:2", "keep_type:A"], &p), ["A:3"]);
        assert_eq!(
            run(
                &[
                    "clear",
                    "append_static:rules",
                    "append_static:limits",
                    "append_config:hint"
                ],
                &p
            ),
            [
                "STATIC_MEMORY:no force pushes",
                "STATIC_MEMORY:{\"n\":1}",
                "CONFIG:be terse"
            ]
        );
        assert_eq!(run(&["keep_last:0"], &p), Vec::<String>::new());
        assert_eq!(run(&["append_static:missing"], &[]), Vec::<String>::new());
    }

    #[test]
    fn malformed_instructions_are_refused() {
        for bad in [
            "keep_last",
            "keep_last:x",
            "keep_last:-1",
            "drop_type:",
            "drop_type:A,,B",
            "clear:now",
            "merge_all",
            "",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
        let err = parse_all(&["inherit".into(), "shuffle".into()]).unwrap_err();
        assert_eq!(err.0, 1);
        assert!(err.1.to_string().contains("unknown instruction"));
    }
}
