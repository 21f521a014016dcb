//! What a run produced, in plain sight at the end of `run` and in `show`:
//! its payload's last segment (the last block's output) and the workspace
//! files its blocks wrote.

use wfhost_core::run::state::RunState;
use wfhost_core::text::escape;

use crate::logs::escape_keeping_tabs;

/// The most lines of the result printed; `--json` has it whole.
const MAX_LINES: usize = 20;
/// The most written files named.
const MAX_FILES: usize = 10;

/// `result (KIND):` and its text (at most [`MAX_LINES`] lines), then
/// `wrote: a, b (and N more)`; nothing for a run that produced nothing.
pub fn print(state: &RunState, run_id: &str) {
    if let Some(segment) = state.result() {
        println!("result ({}):", escape(&segment.kind));
        let lines: Vec<&str> = segment.content.lines().collect();
        for line in lines.iter().take(MAX_LINES) {
            println!("  {}", escape_keeping_tabs(line));
        }
        if lines.len() > MAX_LINES {
            println!(
                "  … {} more lines (`wfhost show {run_id} --json` has it whole)",
                lines.len() - MAX_LINES
            );
        }
    }
    if !state.written.is_empty() {
        let named: Vec<String> = state
            .written
            .iter()
            .take(MAX_FILES)
            .map(|p| escape(p))
            .collect();
        let more = state.written.len().saturating_sub(MAX_FILES);
        let more = match more {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        println!("wrote: {}{more}", named.join(", "));
    }
}

/// `result` (the segment, or null) and `written` for `--json`.
pub fn json(state: &RunState) -> serde_json::Value {
    serde_json::json!({
        "result": state.result(),
        "written": state.written,
    })
}
