//! WorkRail's `validationCriteria`: rules a step's notes must satisfy
//! before the step counts as done — `contains` (a text), `regex` (a
//! pattern with `flags`), `length` (`min` / `max` characters) and `schema`
//! (the notes parse as JSON satisfying a JSON Schema) — each with its
//! `message` and an optional `condition` over the run's inputs under which
//! it applies; a list of rules must all hold, and `{"and": [..]}`,
//! `{"or": [..]}`, `{"not": ..}` compose them.

use serde_json::{Map, Value};

use super::condition::Condition;

/// Parsed criteria.
#[derive(Debug)]
pub enum Criteria {
    Rule(Rule),
    All(Vec<Criteria>),
    Any(Vec<Criteria>),
    Not(Box<Criteria>),
}

#[derive(Debug)]
pub struct Rule {
    test: RuleTest,
    message: String,
    condition: Option<Condition>,
}

#[derive(Debug)]
enum RuleTest {
    Contains(String),
    /// A JavaScript-style pattern (look-around allowed).
    Regex(fancy_regex::Regex),
    Length(Option<u64>, Option<u64>),
    Schema(Box<jsonschema::Validator>),
}

type Error = (String, String);

const MAX_DEPTH: usize = 16;

impl Criteria {
    pub fn parse(value: &Value) -> Result<Criteria, Error> {
        parse_at(value, "", 0)
    }

    /// The messages of the rules `notes` fails, given the run's inputs;
    /// empty when the criteria hold.
    pub fn failures(&self, notes: &str, context: &Map<String, Value>) -> Vec<String> {
        match self {
            Criteria::Rule(rule) => {
                let applies = rule.condition.as_ref().is_none_or(|c| c.holds(context));
                if applies && !rule.test.holds(notes) {
                    vec![rule.message.clone()]
                } else {
                    Vec::new()
                }
            }
            Criteria::All(all) => all
                .iter()
                .flat_map(|c| c.failures(notes, context))
                .collect(),
            Criteria::Any(any) => {
                let each: Vec<Vec<String>> =
                    any.iter().map(|c| c.failures(notes, context)).collect();
                if each.iter().any(Vec::is_empty) {
                    Vec::new()
                } else {
                    each.concat()
                }
            }
            Criteria::Not(inner) => {
                if inner.failures(notes, context).is_empty() {
                    vec!["the notes satisfy criteria they must not".into()]
                } else {
                    Vec::new()
                }
            }
        }
    }
}

fn parse_at(value: &Value, at: &str, depth: usize) -> Result<Criteria, Error> {
    if depth > MAX_DEPTH {
        return Err((
            at.into(),
            format!("criteria nest more than {MAX_DEPTH} deep"),
        ));
    }
    let list = |items: &Value, here: String| -> Result<Vec<Criteria>, Error> {
        let Some(items) = items.as_array() else {
            return Err((here, "a list of rules".into()));
        };
        items
            .iter()
            .enumerate()
            .map(|(i, v)| parse_at(v, &format!("{here}/{i}"), depth + 1))
            .collect()
    };
    match value {
        Value::Array(_) => Ok(Criteria::All(list(value, at.to_string())?)),
        Value::Object(map) if map.contains_key("type") => Ok(Criteria::Rule(parse_rule(map, at)?)),
        Value::Object(map) if map.len() == 1 => {
            let (key, inner) = map.iter().next().expect("one key");
            let here = format!("{at}/{key}");
            match key.as_str() {
                "and" => Ok(Criteria::All(list(inner, here)?)),
                "or" => Ok(Criteria::Any(list(inner, here)?)),
                "not" => Ok(Criteria::Not(Box::new(parse_at(inner, &here, depth + 1)?))),
                other => Err((
                    here,
                    format!("unknown criteria operator `{other}` (expected and, or, not)"),
                )),
            }
        }
        _ => Err((
            at.into(),
            "a rule (with `type`), a list of rules, or one of `and`, `or`, `not`".into(),
        )),
    }
}

fn parse_rule(map: &Map<String, Value>, at: &str) -> Result<Rule, Error> {
    const KEYS: &[&str] = &[
        "type",
        "value",
        "pattern",
        "flags",
        "min",
        "max",
        "message",
        "schema",
        "condition",
    ];
    if let Some(key) = map.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err((format!("{at}/{key}"), format!("unknown rule key `{key}`")));
    }
    let text = |key: &str| map.get(key).and_then(Value::as_str);
    let need = |key: &str, what: &str| {
        (
            format!("{at}/{key}"),
            format!("the rule needs `{key}` ({what})"),
        )
    };
    let message = text("message")
        .ok_or_else(|| need("message", "a text"))?
        .to_string();
    let test = match text("type") {
        Some("contains") => {
            RuleTest::Contains(text("value").ok_or_else(|| need("value", "a text"))?.into())
        }
        Some("regex") => {
            let pattern = text("pattern").ok_or_else(|| need("pattern", "a regular expression"))?;
            let flags = text("flags").unwrap_or_default();
            let mut b = crate::limits::backtracking_regex(pattern);
            b.case_insensitive(flags.contains('i'))
                .multi_line(flags.contains('m'))
                .dot_matches_new_line(flags.contains('s'));
            RuleTest::Regex(b.build().map_err(|e| {
                (
                    format!("{at}/pattern"),
                    format!("invalid regular expression: {e}"),
                )
            })?)
        }
        Some("length") => {
            let bound = |key: &str| match map.get(key) {
                None => Ok(None),
                Some(v) => v
                    .as_u64()
                    .map(Some)
                    .ok_or_else(|| need(key, "a whole number")),
            };
            RuleTest::Length(bound("min")?, bound("max")?)
        }
        Some("schema") => {
            let schema = map
                .get("schema")
                .ok_or_else(|| need("schema", "a JSON Schema"))?;
            let v = crate::limits::schema(schema)
                .map_err(|e| (format!("{at}/schema"), format!("invalid JSON Schema: {e}")))?;
            RuleTest::Schema(Box::new(v))
        }
        other => {
            return Err((
                format!("{at}/type"),
                format!("unknown rule type {other:?} (expected contains, regex, length, schema)"),
            ));
        }
    };
    let condition = match map.get("condition") {
        None => None,
        Some(c) => Some(
            Condition::parse(c).map_err(|(inner, why)| (format!("{at}/condition{inner}"), why))?,
        ),
    };
    Ok(Rule {
        test,
        message,
        condition,
    })
}

impl RuleTest {
    fn holds(&self, notes: &str) -> bool {
        match self {
            RuleTest::Contains(s) => notes.contains(s.as_str()),
            // A pattern that backtracks past its limit on these notes does
            // not hold: the notes are refused, never taken unchecked.
            RuleTest::Regex(r) => r.is_match(notes).unwrap_or(false),
            RuleTest::Length(min, max) => {
                let n = notes.chars().count() as u64;
                min.is_none_or(|m| n >= m) && max.is_none_or(|m| n <= m)
            }
            RuleTest::Schema(v) => {
                crate::limits::json(notes.as_bytes()).is_ok()
                    && serde_json::from_str::<Value>(notes).is_ok_and(|json| v.is_valid(&json))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn failures(criteria: Value, notes: &str, context: Value) -> Vec<String> {
        Criteria::parse(&criteria)
            .unwrap()
            .failures(notes, context.as_object().unwrap())
    }

    #[test]
    fn rules_compose_and_apply_under_their_condition() {
        let rules = json!([
            {"type": "contains", "value": "Root cause", "message": "name the root cause"},
            {"type": "length", "min": 20, "message": "say more"},
            {"type": "regex", "pattern": "^fix", "flags": "im", "message": "a fix line",
             "condition": {"var": "mode", "equals": "fix"}}
        ]);
        assert_eq!(
            failures(rules.clone(), "short", json!({})),
            ["name the root cause", "say more"]
        );
        let notes = "Root cause: a race.\nnothing else";
        assert!(failures(rules.clone(), notes, json!({})).is_empty());
        assert_eq!(
            failures(rules, notes, json!({"mode": "FIX"})),
            ["a fix line"]
        );
        let either = json!({"or": [
            {"type": "schema", "schema": {"type": "object", "required": ["ok"]}, "message": "json"},
            {"type": "contains", "value": "done", "message": "done"}
        ]});
        assert!(failures(either.clone(), r#"{"ok": 1}"#, json!({})).is_empty());
        assert_eq!(failures(either, "nope", json!({})), ["json", "done"]);
    }

    #[test]
    fn patterns_are_javascripts_look_around_included_and_bounded() {
        let no_todo =
            json!([{"type": "regex", "pattern": "^(?![\\s\\S]*TODO)", "message": "no TODO left"}]);
        assert!(failures(no_todo.clone(), "all done", json!({})).is_empty());
        assert_eq!(
            failures(no_todo, "done\nTODO: tests", json!({})),
            ["no TODO left"]
        );
        let flags =
            json!([{"type": "regex", "pattern": "^root cause", "flags": "im", "message": "m"}]);
        assert!(failures(flags, "Notes\nROOT CAUSE: x", json!({})).is_empty());
        // A pattern that would backtrack for ever fails the notes instead.
        let runaway = json!([{"type": "regex", "pattern": "^(?=(a*)*b)", "message": "runaway"}]);
        assert_eq!(failures(runaway, &"a".repeat(40), json!({})), ["runaway"]);
    }

    #[test]
    fn malformed_criteria_are_refused_with_their_pointer() {
        let at = |v: Value| Criteria::parse(&v).unwrap_err().0;
        assert_eq!(
            at(json!([{"type": "contains", "message": "m"}])),
            "/0/value"
        );
        assert_eq!(
            at(json!({"and": [{"type": "size", "message": "m"}]})),
            "/and/0/type"
        );
        assert_eq!(
            at(json!([{"type": "regex", "pattern": "(", "message": "m"}])),
            "/0/pattern"
        );
        assert_eq!(at(json!({"xor": []})), "/xor");
        assert_eq!(
            at(json!([{"type": "length", "message": "m", "extra": 1}])),
            "/0/extra"
        );
    }
}
