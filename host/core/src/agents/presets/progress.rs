//! Progress while a CLI works: of each line it prints, what is worth a
//! line on the operator's screen ("Write docs/hello.md", "Bash: cargo
//! test"), what is its own bookkeeping (hidden), and what is plain output
//! (shown as it is).

use serde_json::Value;

use super::{claude, codex, gemini, opencode};

/// What one output line of an agent CLI shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// A step of the agent's, in words.
    Show(String),
    /// One of a known CLI's events with nothing to show.
    Hide,
    /// Not a known CLI's event: shown as printed.
    Raw,
}

/// The most characters of a progress line.
const MAX_PROGRESS_CHARS: usize = 300;

/// What `line` shows, whichever known CLI printed it.
pub fn progress(line: &str) -> Progress {
    let line = line.trim();
    if !line.starts_with('{') || crate::limits::json_depth(line.as_bytes()).is_err() {
        return Progress::Raw;
    }
    let Ok(event) = serde_json::from_str::<Value>(line) else {
        return Progress::Raw;
    };
    if !event.is_object() {
        return Progress::Raw;
    }
    let known = claude::progress(&event)
        .or_else(|| codex::progress(&event))
        .or_else(|| gemini::progress(&event))
        .or_else(|| opencode::progress(&event));
    match known {
        Some(Progress::Show(text)) => Progress::Show(one_line(&text)),
        Some(other) => other,
        None => Progress::Raw,
    }
}

/// `text` on one line, bounded.
fn one_line(text: &str) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    super::result::bounded(flat.trim(), MAX_PROGRESS_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_are_raw() {
        for line in ["hello", "", "[1]", "{not json", "{\"x\": 1}", "42"] {
            assert_eq!(progress(line), Progress::Raw, "{line}");
        }
    }

    #[test]
    fn shown_steps_are_one_bounded_line() {
        let long = format!(
            r#"{{"type":"assistant","session_id":"s","message":{{"content":[{{"type":"tool_use","name":"Bash","input":{{"command":"echo a\necho b{}"}}}}]}}}}"#,
            "x".repeat(1000)
        );
        let Progress::Show(text) = progress(&long) else {
            panic!("not shown")
        };
        assert!(text.starts_with("Bash: echo a echo b"), "{text}");
        assert!(!text.contains('\n'));
        assert!(text.chars().count() < MAX_PROGRESS_CHARS + 40);
    }
}
