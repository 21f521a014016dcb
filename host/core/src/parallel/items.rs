//! The list a parallel block fans out over (`parallel.over`): where it is
//! read from, and how it is checked when the block starts.
//!
//! `inputs.NAME[.KEY…]` names a list in the run's inputs;
//! `payload.NAME[.KEY…]` the newest payload segment whose id or type is
//! NAME, its content read as JSON. Keys go into objects (or are indexes
//! into lists). What is found must be a list of at most
//! [`MAX_ITEMS`](crate::manifest::MAX_ITEMS) items; anything else fails
//! the block with the reason.

use serde_json::Value;

use crate::manifest::{MAX_ITEMS, is_valid_id};
use crate::run::inputs::Inputs;
use crate::run::payload::ContextSegment;

/// Where an `over` list is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Inputs,
    Payload,
}

/// A parsed `over` reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Over<'a> {
    pub source: Source,
    /// The input's name, or the payload segment's id or type.
    pub name: &'a str,
    /// Keys into the value found there.
    pub keys: Vec<&'a str>,
}

impl<'a> Over<'a> {
    /// Parse `inputs.NAME[.KEY…]` or `payload.NAME[.KEY…]`.
    pub fn parse(text: &'a str) -> Result<Over<'a>, String> {
        let (source, rest) = if let Some(rest) = text.strip_prefix("inputs.") {
            (Source::Inputs, rest)
        } else if let Some(rest) = text.strip_prefix("payload.") {
            (Source::Payload, rest)
        } else {
            return Err(format!(
                "`{text}` names no list: write `inputs.NAME` (a list in the run's inputs) or `payload.NAME` (the newest payload segment with that id or type, as JSON), with `.KEY` for a key inside it"
            ));
        };
        let mut parts = rest.split('.');
        let name = parts.next().unwrap_or_default();
        let keys: Vec<&str> = parts.collect();
        if let Some(bad) = std::iter::once(name)
            .chain(keys.iter().copied())
            .find(|p| !is_valid_id(p))
        {
            return Err(format!(
                "`{text}`: `{bad}` is not a name (letters, digits, `_` and `-`; `.` between keys)"
            ));
        }
        Ok(Over { source, name, keys })
    }
}

/// The items of `over` for a run with `inputs` and `payload`, or why
/// there are none to fan out over.
pub fn resolve(
    over: &str,
    inputs: &Inputs,
    payload: &[ContextSegment],
) -> Result<Vec<Value>, String> {
    let parsed = Over::parse(over)?;
    let owned;
    let root: &Value = match parsed.source {
        Source::Inputs => inputs
            .get(parsed.name)
            .ok_or_else(|| format!("`{over}`: the run has no input `{}`", parsed.name))?,
        Source::Payload => {
            let segment = payload
                .iter()
                .rev()
                .find(|s| s.id == parsed.name || s.kind == parsed.name)
                .ok_or_else(|| {
                    format!(
                        "`{over}`: the payload has no segment with the id or type `{}`",
                        parsed.name
                    )
                })?;
            owned = serde_json::from_str::<Value>(segment.content.trim()).map_err(|e| {
                format!(
                    "`{over}`: payload segment `{}` is not JSON ({e})",
                    segment.id
                )
            })?;
            &owned
        }
    };
    let mut at = root;
    for key in &parsed.keys {
        at = match at {
            Value::Object(map) => map.get(*key),
            Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        }
        .ok_or_else(|| format!("`{over}`: there is no `{key}` in it"))?;
    }
    match at {
        Value::Array(items) if items.len() > MAX_ITEMS => Err(format!(
            "`{over}` has {} items, over the limit of {MAX_ITEMS} lanes of a parallel block",
            items.len()
        )),
        Value::Array(items) => Ok(items.clone()),
        other => Err(format!("`{over}` is not a list: it is {}", describe(other))),
    }
}

/// What a JSON value is, for a message.
fn describe(value: &Value) -> String {
    let text = value.to_string();
    let shown: String = text.chars().take(60).collect();
    let more = if shown.len() < text.len() { "…" } else { "" };
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Object(_) => "an object",
        Value::Array(_) => "a list",
    };
    format!("{kind} ({shown}{more})")
}

/// The lane names of a fan-out over `count` items: `0`, `1`, … in item
/// order.
pub fn lane_names(count: usize) -> Vec<String> {
    (0..count).map(|i| i.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn inputs(v: Value) -> Inputs {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn reads_a_list_from_the_inputs_and_inside_them() {
        let i = inputs(json!({"files": ["a", "b"], "job": {"parts": [1, 2, 3]}}));
        assert_eq!(
            resolve("inputs.files", &i, &[]).unwrap(),
            vec![json!("a"), json!("b")]
        );
        assert_eq!(resolve("inputs.job.parts", &i, &[]).unwrap().len(), 3);
    }

    #[test]
    fn reads_the_newest_payload_segment_by_id_or_type() {
        let payload = vec![
            ContextSegment::new("s1", "FILES", "[1]"),
            ContextSegment::new("s2", "FILES", " {\"list\": [1, 2]} "),
        ];
        assert_eq!(
            resolve("payload.FILES.list", &Inputs::new(), &payload)
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            resolve("payload.s1", &Inputs::new(), &payload).unwrap(),
            vec![json!(1)]
        );
    }

    #[test]
    fn says_why_there_is_no_list() {
        let i = inputs(json!({"n": 3, "o": {"a": 1}}));
        let e = resolve("inputs.n", &i, &[]).unwrap_err();
        assert!(
            e.contains("`inputs.n` is not a list: it is a number (3)"),
            "{e}"
        );
        let e = resolve("inputs.missing", &i, &[]).unwrap_err();
        assert!(e.contains("no input `missing`"), "{e}");
        let e = resolve("inputs.o.b", &i, &[]).unwrap_err();
        assert!(e.contains("no `b`"), "{e}");
        let payload = vec![ContextSegment::new("s", "T", "not json")];
        let e = resolve("payload.T", &i, &payload).unwrap_err();
        assert!(e.contains("is not JSON"), "{e}");
        let e = resolve("payload.X", &i, &payload).unwrap_err();
        assert!(e.contains("no segment"), "{e}");
        assert!(Over::parse("files").is_err());
        assert!(Over::parse("inputs.a b").is_err());
        assert!(Over::parse("inputs.").is_err());
    }

    #[test]
    fn refuses_a_list_over_the_limit() {
        let i = inputs(json!({"big": vec![0; MAX_ITEMS + 1]}));
        let e = resolve("inputs.big", &i, &[]).unwrap_err();
        assert!(e.contains("over the limit of 100000"), "{e}");
        let i = inputs(json!({"ok": vec![0; MAX_ITEMS]}));
        assert_eq!(resolve("inputs.ok", &i, &[]).unwrap().len(), MAX_ITEMS);
    }
}
