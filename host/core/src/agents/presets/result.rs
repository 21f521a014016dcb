//! Reading a CLI's output: its stdout as JSON lines (one object a line;
//! a single object is a stream of one), folded by the CLI's own reader
//! into what the run needs — status, final message, usage, session.
//!
//! Every defect is a reason, never a panic: a line that is not JSON is
//! passed over (CLIs print warnings too) and remembered for the message;
//! a count that is not a whole number within `u64` refuses the output;
//! without the CLI's final event the output is not a result, but the usage
//! it streamed before it stopped (killed at a timeout, cut at the output
//! cap) is kept.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::{ResultFormat, claude, codex, gemini, opencode};
use crate::agents::block_output::{MAX_USAGE_TEXT, Usage};

/// A CLI's final result, as the adapter read it.
#[derive(Debug, Clone, PartialEq)]
pub struct CliResult {
    /// The CLI says it failed (an API error, a limit, …).
    pub is_error: bool,
    /// Its final message (bounded: [`MAX_SUMMARY_CHARS`]).
    pub summary: String,
    /// What the model consumed.
    pub usage: Usage,
    /// Tool calls the CLI's permissions refused, as `Tool path` (or the
    /// tool alone).
    pub denied: Vec<String>,
}

/// Why a CLI's output is not a result, and the usage it reported before.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultError {
    pub why: String,
    pub usage: Option<Usage>,
}

/// The most characters of a final message kept as the block's summary.
pub const MAX_SUMMARY_CHARS: usize = 16 * 1024;

/// Read a CLI's result from its whole stdout (already bounded by the
/// output cap).
pub fn parse_result(format: ResultFormat, stdout: &[u8]) -> Result<CliResult, ResultError> {
    let mut seen = Seen::default();
    let mut other = None;
    // One JSON object over several lines (a pretty-printed result) is one
    // event; anything else is read a line at a time.
    let whole = whole_object(stdout);
    let lines: Box<dyn Iterator<Item = &[u8]>> = match &whole {
        Some(_) => Box::new(std::iter::empty()),
        None => Box::new(stdout.split(|b| *b == b'\n')),
    };
    for event in whole
        .into_iter()
        .chain(lines.filter_map(|line| event(line, &mut other)))
    {
        let folded = match format {
            ResultFormat::Claude => claude::fold(&mut seen, &event),
            ResultFormat::Codex => codex::fold(&mut seen, &event),
            ResultFormat::Gemini => gemini::fold(&mut seen, &event),
            ResultFormat::Opencode => opencode::fold(&mut seen, &event),
        };
        if let Err(why) = folded {
            return Err(ResultError {
                why,
                usage: seen.streamed(),
            });
        }
    }
    seen.finish(other)
}

/// The output as one JSON object written over several lines, if it is one.
fn whole_object(stdout: &[u8]) -> Option<Map<String, Value>> {
    let text = std::str::from_utf8(stdout).ok()?.trim();
    if !text.starts_with('{') || !text.contains('\n') {
        return None;
    }
    crate::limits::json_depth(text.as_bytes()).ok()?;
    match serde_json::from_str(text) {
        Ok(Value::Object(object)) => Some(object),
        _ => None,
    }
}

/// One line as a JSON object, or `None` (noted in `other` when it is text
/// of its own).
fn event(line: &[u8], other: &mut Option<String>) -> Option<Map<String, Value>> {
    let text = match std::str::from_utf8(line) {
        Ok(text) => text.trim(),
        Err(e) => {
            *other = Some(format!(
                "a line that is not UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            ));
            return None;
        }
    };
    if text.is_empty() {
        return None;
    }
    let parsed = crate::limits::json_depth(text.as_bytes())
        .map_err(|e| format!("a line that is {e}"))
        .and_then(|()| serde_json::from_str::<Value>(text).map_err(|e| e.to_string()));
    match parsed {
        Ok(Value::Object(object)) => Some(object),
        Ok(_) => {
            *other = Some(bounded(text, 200));
            None
        }
        Err(e) if text.starts_with(['{', '[']) => {
            *other = Some(match e.contains("nested") {
                true => e,
                false => format!("a line that is not one JSON object ({e})"),
            });
            None
        }
        Err(_) => {
            *other = Some(bounded(text, 200));
            None
        }
    }
}

/// Token counts of one answer (or of the whole run).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Counts {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_creation: u64,
}

impl Counts {
    fn add(&mut self, other: &Counts) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.cache_creation = self.cache_creation.saturating_add(other.cache_creation);
    }

    fn max(&mut self, other: &Counts) {
        self.input = self.input.max(other.input);
        self.output = self.output.max(other.output);
        self.cache_read = self.cache_read.max(other.cache_read);
        self.cache_creation = self.cache_creation.max(other.cache_creation);
    }
}

/// The CLI's last word: its final event.
#[derive(Debug, Default)]
pub(crate) struct Final {
    pub is_error: bool,
    /// Its message (`None`: the last text the CLI streamed).
    pub summary: Option<String>,
    /// Its totals (`None`: the sum of what it streamed).
    pub counts: Option<Counts>,
}

/// What a CLI's output said so far.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    pub session_id: Option<String>,
    models: Vec<String>,
    /// Usage per answer, by the answer's id: a CLI may repeat an answer's
    /// usage on several lines (one per content block).
    by_answer: HashMap<String, Counts>,
    /// Usage reported once per answer or step, summed.
    summed: Counts,
    pub cost_usd: Option<f64>,
    /// The last text the model said.
    pub last_text: Option<String>,
    /// `last_text` is being streamed in parts.
    text_open: bool,
    pub denied: Vec<String>,
    pub last: Option<Final>,
    /// Set when the CLI said it failed before its final event (a
    /// `turn.failed`, an `error` event): kept for the reason.
    pub error: Option<String>,
}

/// The most model names kept.
const MAX_MODELS: usize = 8;

impl Seen {
    pub fn model(&mut self, name: &str) {
        let name = name.trim();
        if !name.is_empty()
            && self.models.len() < MAX_MODELS
            && !self.models.iter().any(|m| m == name)
        {
            self.models.push(bounded(name, MAX_USAGE_TEXT));
        }
    }

    pub fn session(&mut self, id: Option<&Value>) {
        if let Some(id) = id.and_then(Value::as_str).filter(|s| !s.trim().is_empty()) {
            self.session_id = Some(bounded(id.trim(), MAX_USAGE_TEXT));
        }
    }

    pub fn answer(&mut self, id: &str, counts: Counts) {
        if id.is_empty() {
            self.summed.add(&counts);
        } else {
            self.by_answer
                .entry(bounded(id, 256))
                .or_default()
                .max(&counts);
        }
    }

    pub fn step(&mut self, counts: Counts) {
        self.summed.add(&counts);
    }

    pub fn text(&mut self, text: &str) {
        if !text.trim().is_empty() {
            self.last_text = Some(bounded(text, MAX_SUMMARY_CHARS));
        }
        self.text_open = false;
    }

    /// A part of the model's text, streamed: joined to the parts before it
    /// until [`Seen::end_text`].
    pub fn append_text(&mut self, part: &str) {
        match (&mut self.last_text, self.text_open) {
            (Some(text), true) => {
                if text.chars().count() < MAX_SUMMARY_CHARS {
                    text.push_str(part);
                    *text = bounded(text, MAX_SUMMARY_CHARS);
                }
            }
            _ => self.last_text = Some(bounded(part, MAX_SUMMARY_CHARS)),
        }
        self.text_open = true;
    }

    /// The streamed text is complete (a tool call follows).
    pub fn end_text(&mut self) {
        self.text_open = false;
    }

    fn total(&self) -> Counts {
        let mut total = self.summed;
        for counts in self.by_answer.values() {
            total.add(counts);
        }
        total
    }

    fn usage(&self, counts: Counts) -> Usage {
        let model = Some(self.models.join(", "))
            .filter(|m| !m.is_empty())
            .map(|m| bounded(&m, MAX_USAGE_TEXT));
        Usage {
            input_tokens: counts.input,
            output_tokens: counts.output,
            cache_read_tokens: counts.cache_read,
            cache_creation_tokens: counts.cache_creation,
            cost_usd: self.cost_usd,
            model,
            session_id: self.session_id.clone(),
        }
    }

    /// What the CLI streamed, when it streamed anything.
    fn streamed(&self) -> Option<Usage> {
        let counts = self.total();
        let any = counts != Counts::default()
            || self.session_id.is_some()
            || !self.models.is_empty()
            || self.cost_usd.is_some();
        any.then(|| self.usage(counts))
    }

    fn finish(self, other: Option<String>) -> Result<CliResult, ResultError> {
        let Some(last) = &self.last else {
            let mut why = match &self.error {
                Some(error) => format!("the CLI failed: {error}"),
                None => "the CLI printed no final result".to_string(),
            };
            if let Some(other) = other {
                why = format!("{why} (its output ends with {other})");
            }
            return Err(ResultError {
                why,
                usage: self.streamed(),
            });
        };
        let counts = last.counts.unwrap_or_else(|| self.total());
        let summary = last
            .summary
            .clone()
            .or_else(|| self.last_text.clone())
            .unwrap_or_default();
        let is_error = last.is_error || self.error.is_some() && summary.is_empty();
        let summary = match (&self.error, summary.is_empty()) {
            (Some(error), true) => error.clone(),
            _ => summary,
        };
        Ok(CliResult {
            is_error,
            summary,
            usage: self.usage(counts),
            denied: self.denied.clone(),
        })
    }
}

/// The token count at `key` of `object` (absent or null: 0), or why it is
/// not one (`what` names the field in the message).
pub(crate) fn count(object: &Value, key: &str, what: &str) -> Result<u64, String> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(0),
        Some(v) => v.as_u64().ok_or_else(|| {
            format!("{what}.{key} is {v}, not a token count (a whole number up to 2^64-1)")
        }),
    }
}

/// A cost in US dollars at `key` (absent or null: none).
pub(crate) fn cost(object: &Value, key: &str) -> Result<Option<f64>, String> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(c) if c.is_finite() && c >= 0.0 => Ok(Some(c)),
            _ => Err(format!("{key} is {v}, not a cost")),
        },
    }
}

/// An optional object at `key`, or why it is something else.
pub(crate) fn object<'a>(value: &'a Value, key: &str) -> Result<Option<&'a Value>, String> {
    match value.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) if v.is_object() => Ok(Some(v)),
        Some(_) => Err(format!("`{key}` is not an object")),
    }
}

/// An optional text at `key`, or why it is something else.
pub(crate) fn text<'a>(value: &'a Value, key: &str) -> Result<Option<&'a str>, String> {
    match value.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("`{key}` is not text")),
    }
}

/// At most `max` characters of `text`, marked when cut.
pub(crate) fn bounded(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((at, _)) => format!("{}… (cut at {max} characters)", &text[..at]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_lines_are_passed_over_and_named_when_no_result_follows() {
        let e = parse_result(ResultFormat::Claude, b"Error: not logged in\n").unwrap_err();
        assert_eq!(
            e.why,
            "the CLI printed no final result (its output ends with Error: not logged in)"
        );
        assert_eq!(e.usage, None);
        let e = parse_result(ResultFormat::Claude, b"  \n").unwrap_err();
        assert_eq!(e.why, "the CLI printed no final result");
    }

    #[test]
    fn deep_and_broken_lines_are_reasons_not_panics() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        for format in [
            ResultFormat::Claude,
            ResultFormat::Codex,
            ResultFormat::Gemini,
            ResultFormat::Opencode,
        ] {
            let e = parse_result(format, deep.as_bytes()).unwrap_err();
            assert!(e.why.contains("nested"), "{e:?}");
            let e = parse_result(format, b"{\"type\":").unwrap_err();
            assert!(e.why.contains("not one JSON object"), "{e:?}");
            let e = parse_result(format, &[0xff, 0xfe, b'\n']).unwrap_err();
            assert!(e.why.contains("not UTF-8"), "{e:?}");
            // 100 MB of one line: refused as a reason, in one pass.
            let mut big = String::from(r#"{"type":"result","result":""#);
            big.push_str(&"x".repeat(100 << 20));
            let e = parse_result(format, big.as_bytes()).unwrap_err();
            assert!(e.why.contains("not one JSON object"), "{}", &e.why[..200]);
        }
    }

    #[test]
    fn bounded_cuts_on_characters() {
        assert_eq!(bounded("héllo", 2), "hé… (cut at 2 characters)");
        assert_eq!(bounded("hé", 2), "hé");
    }
}
