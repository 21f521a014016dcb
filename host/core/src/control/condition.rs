//! Conditions over a run's inputs (its context), in WorkRail's published
//! form: `{"var": NAME, OP: VALUE}`, `{"var": NAME}` (truthiness),
//! `{"and": [..]}`, `{"or": [..]}`, `{"not": ..}`, and `{}` (always true).
//!
//! Operators: `equals` / `not_equals` (lenient: strings compared trimmed
//! and case-insensitively, `"5"` equals `5`, `"yes"`/`"true"`/`"1"` equal
//! `true`, null equals a missing variable), `gt` / `gte` / `lt` / `lte`
//! (the variable must be a number, else the test is false), `contains` /
//! `startsWith` / `endsWith` (case-insensitive text), `matches` (a
//! case-insensitive regular expression) and `in` (lenient equality with
//! any item of a list).
//!
//! A condition is parsed once, when the workflow is checked: an unknown
//! operator, two operators in one test, a malformed regular expression or
//! a value of the wrong type is refused with the JSON pointer of the part
//! that is wrong, where WorkRail would quietly evaluate it to false.

use serde_json::{Map, Value};

/// A parsed condition.
#[derive(Debug, Clone)]
pub enum Condition {
    /// `{}`: always true.
    Always,
    Var {
        var: String,
        test: Test,
    },
    And(Vec<Condition>),
    Or(Vec<Condition>),
    Not(Box<Condition>),
}

/// What a `{"var": ..}` condition tests of its variable.
#[derive(Debug, Clone)]
pub enum Test {
    Truthy,
    Equals(Value),
    NotEquals(Value),
    Gt(f64),
    Gte(f64),
    Lt(f64),
    Lte(f64),
    Contains(String),
    StartsWith(String),
    EndsWith(String),
    /// A JavaScript-style pattern (look-around allowed), case-insensitive.
    Matches(fancy_regex::Regex),
    In(Vec<Value>),
}

/// The operators a `{"var": ..}` condition may use.
pub const OPERATORS: &[&str] = &[
    "equals",
    "not_equals",
    "gt",
    "gte",
    "lt",
    "lte",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "in",
];

/// A parse error: the pointer (relative to the condition) and the reason.
pub type ConditionError = (String, String);

/// Conditions nest at most this deep (a hostile manifest cannot exhaust
/// the stack).
const MAX_DEPTH: usize = 32;

impl Condition {
    pub fn parse(value: &Value) -> Result<Condition, ConditionError> {
        parse_at(value, "", 0)
    }

    /// Whether the condition holds over `context` (the run's inputs).
    pub fn holds(&self, context: &Map<String, Value>) -> bool {
        match self {
            Condition::Always => true,
            Condition::Var { var, test } => test.holds(context.get(var)),
            Condition::And(all) => all.iter().all(|c| c.holds(context)),
            Condition::Or(any) => any.iter().any(|c| c.holds(context)),
            Condition::Not(inner) => !inner.holds(context),
        }
    }
}

fn parse_at(value: &Value, at: &str, depth: usize) -> Result<Condition, ConditionError> {
    if depth > MAX_DEPTH {
        return Err((
            at.into(),
            format!("conditions nest more than {MAX_DEPTH} deep"),
        ));
    }
    let Some(map) = value.as_object() else {
        return Err((at.into(), "a condition is an object".into()));
    };
    if map.is_empty() {
        return Ok(Condition::Always);
    }
    if let Some(var) = map.get("var") {
        return parse_var(map, var, at);
    }
    let logical: Vec<&String> = map.keys().collect();
    let [key] = logical.as_slice() else {
        return Err((
            at.into(),
            format!(
                "a condition without `var` has exactly one of `and`, `or`, `not`; found {}",
                names(map)
            ),
        ));
    };
    let inner = &map[*key];
    let here = format!("{at}/{key}");
    match key.as_str() {
        "and" | "or" => {
            let Some(items) = inner.as_array() else {
                return Err((here, format!("`{key}` takes a list of conditions")));
            };
            let parsed = items
                .iter()
                .enumerate()
                .map(|(i, c)| parse_at(c, &format!("{here}/{i}"), depth + 1))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(if key.as_str() == "and" {
                Condition::And(parsed)
            } else {
                Condition::Or(parsed)
            })
        }
        "not" => Ok(Condition::Not(Box::new(parse_at(inner, &here, depth + 1)?))),
        other => Err((
            here,
            format!("unknown condition operator `{other}` (expected var, and, or, not)"),
        )),
    }
}

fn names(map: &Map<String, Value>) -> String {
    map.keys()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn parse_var(map: &Map<String, Value>, var: &Value, at: &str) -> Result<Condition, ConditionError> {
    let Some(var) = var.as_str().filter(|v| !v.is_empty()) else {
        return Err((
            format!("{at}/var"),
            "`var` names a context variable (a non-empty string)".into(),
        ));
    };
    let ops: Vec<&String> = map.keys().filter(|k| *k != "var").collect();
    let test = match ops.as_slice() {
        [] => Test::Truthy,
        [op] => parse_test(op, &map[*op], &format!("{at}/{op}"))?,
        _ => {
            return Err((
                at.into(),
                format!("a condition tests one operator; found {}", names(map)),
            ));
        }
    };
    Ok(Condition::Var {
        var: var.to_string(),
        test,
    })
}

fn parse_test(op: &str, value: &Value, at: &str) -> Result<Test, ConditionError> {
    let number = || {
        value
            .as_f64()
            .ok_or_else(|| (at.to_string(), format!("`{op}` compares with a number")))
    };
    let text = || match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) => Ok(js_string(value)),
        _ => Err((at.to_string(), format!("`{op}` takes a string"))),
    };
    Ok(match op {
        "equals" => Test::Equals(value.clone()),
        "not_equals" => Test::NotEquals(value.clone()),
        "gt" => Test::Gt(number()?),
        "gte" => Test::Gte(number()?),
        "lt" => Test::Lt(number()?),
        "lte" => Test::Lte(number()?),
        "contains" => Test::Contains(text()?.to_lowercase()),
        "startsWith" => Test::StartsWith(text()?.to_lowercase()),
        "endsWith" => Test::EndsWith(text()?.to_lowercase()),
        "matches" => {
            let Some(pattern) = value.as_str() else {
                return Err((at.into(), "`matches` takes a regular expression".into()));
            };
            let regex = crate::limits::backtracking_regex(pattern)
                .case_insensitive(true)
                .build()
                .map_err(|e| (at.to_string(), format!("invalid regular expression: {e}")))?;
            Test::Matches(regex)
        }
        "in" => match value {
            Value::Array(items) => Test::In(items.clone()),
            _ => return Err((at.into(), "`in` takes a list".into())),
        },
        other => {
            return Err((
                at.into(),
                format!(
                    "unknown condition operator `{other}` (expected one of {})",
                    OPERATORS.join(", ")
                ),
            ));
        }
    })
}

impl Test {
    fn holds(&self, value: Option<&Value>) -> bool {
        let value = value.unwrap_or(&Value::Null);
        let text = || js_string(value).trim().to_lowercase();
        match self {
            Test::Truthy => truthy(value),
            Test::Equals(v) => lenient_equals(value, v),
            Test::NotEquals(v) => !lenient_equals(value, v),
            Test::Gt(n) => value.as_f64().is_some_and(|x| x > *n),
            Test::Gte(n) => value.as_f64().is_some_and(|x| x >= *n),
            Test::Lt(n) => value.as_f64().is_some_and(|x| x < *n),
            Test::Lte(n) => value.as_f64().is_some_and(|x| x <= *n),
            Test::Contains(s) => text().contains(s.trim()),
            Test::StartsWith(s) => text().starts_with(s.trim()),
            Test::EndsWith(s) => text().ends_with(s.trim()),
            // Past its backtracking limit a pattern does not match.
            Test::Matches(r) => r.is_match(js_string(value).trim()).unwrap_or(false),
            Test::In(items) => items.iter().any(|i| lenient_equals(value, i)),
        }
    }
}

/// JavaScript's truthiness of a JSON value.
pub fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// A value as text the way WorkRail stringifies it for text tests.
fn js_string(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(js_string).collect::<Vec<_>>().join(","),
        Value::Object(_) => "[object Object]".into(),
        other => other.to_string(),
    }
}

/// A string read as a number the way JavaScript's `Number()` reads it
/// (decimal forms only): blank is 0, anything else unparsable is none.
fn js_number(s: &str) -> Option<f64> {
    let t = s.trim();
    if t.is_empty() {
        return Some(0.0);
    }
    t.parse::<f64>().ok().filter(|x| x.is_finite())
}

/// WorkRail's lenient equality: null only equals null (or a missing
/// variable), strings compare trimmed and ignoring case, a string equals
/// the number it reads as and the boolean it spells (`yes`/`true`/`1`,
/// `no`/`false`/`0`), and anything else is JavaScript's `===`: a list or
/// an object equals nothing, not even the same list written again.
pub fn lenient_equals(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Null, _) | (_, Value::Null) => false,
        (Value::String(x), Value::String(y)) => x.trim().to_lowercase() == y.trim().to_lowercase(),
        (Value::String(s), Value::Number(n)) | (Value::Number(n), Value::String(s)) => {
            js_number(s).zip(n.as_f64()).is_some_and(|(x, y)| x == y)
        }
        (Value::String(s), Value::Bool(b)) | (Value::Bool(b), Value::String(s)) => {
            let s = s.trim().to_lowercase();
            if *b {
                matches!(s.as_str(), "true" | "1" | "yes")
            } else {
                matches!(s.as_str(), "false" | "0" | "no")
            }
        }
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Bool(x), Value::Bool(y)) => x == y,
        // JavaScript's `===`: two lists or objects are never the same
        // object, whatever they hold; other mixed types differ.
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn holds(condition: Value, context: Value) -> bool {
        let c = Condition::parse(&condition).unwrap();
        c.holds(context.as_object().unwrap())
    }

    #[test]
    fn lists_and_objects_equal_nothing_as_in_javascript() {
        assert!(holds(
            json!({"var": "l", "not_equals": []}),
            json!({"l": []})
        ));
        assert!(!holds(
            json!({"var": "l", "equals": [1]}),
            json!({"l": [1]})
        ));
        assert!(!holds(json!({"var": "o", "equals": {}}), json!({"o": {}})));
        assert!(!holds(json!({"var": "n", "equals": true}), json!({"n": 1})));
        assert!(holds(
            json!({"var": "b", "equals": false}),
            json!({"b": false})
        ));
        assert!(!holds(json!({"var": "l", "in": [[1]]}), json!({"l": [1]})));
    }

    #[test]
    fn equality_is_lenient_as_workrail_defines_it() {
        assert!(holds(
            json!({"var": "size", "equals": "large"}),
            json!({"size": " Large "})
        ));
        assert!(holds(json!({"var": "n", "equals": 10}), json!({"n": "10"})));
        assert!(holds(
            json!({"var": "ok", "equals": true}),
            json!({"ok": "yes"})
        ));
        assert!(holds(
            json!({"var": "ok", "equals": false}),
            json!({"ok": "0"})
        ));
        assert!(holds(json!({"var": "gone", "equals": null}), json!({})));
        assert!(!holds(
            json!({"var": "n", "equals": 10}),
            json!({"n": "ten"})
        ));
        assert!(holds(
            json!({"var": "s", "not_equals": "done"}),
            json!({"s": "running"})
        ));
        assert!(holds(
            json!({"var": "s", "in": ["a", "B"]}),
            json!({"s": "b"})
        ));
    }

    #[test]
    fn comparisons_need_a_number_and_text_tests_ignore_case() {
        assert!(holds(json!({"var": "n", "lte": 10}), json!({"n": 10})));
        assert!(!holds(json!({"var": "n", "lte": 10}), json!({"n": "3"})));
        assert!(!holds(json!({"var": "n", "gt": 1}), json!({})));
        assert!(holds(
            json!({"var": "t", "contains": "ERR"}),
            json!({"t": "an error"})
        ));
        assert!(holds(
            json!({"var": "t", "startsWith": "an"}),
            json!({"t": "An error"})
        ));
        assert!(holds(
            json!({"var": "t", "matches": "^an e"}),
            json!({"t": "AN ERROR"})
        ));
    }

    #[test]
    fn logic_truthiness_and_the_empty_condition() {
        let both = json!({"and": [{"var": "a"}, {"not": {"var": "b"}}]});
        assert!(holds(both.clone(), json!({"a": 1, "b": 0})));
        assert!(!holds(both, json!({"a": [], "b": "x"})));
        assert!(holds(json!({"or": [{"var": "a"}, {}]}), json!({})));
        assert!(!holds(json!({"var": "a"}), json!({"a": ""})));
        assert!(holds(json!({}), json!({})));
    }

    #[test]
    fn matches_takes_javascript_patterns_look_around_included() {
        let no_todo = json!({"var": "notes", "matches": "^(?!.*todo)"});
        assert!(holds(no_todo.clone(), json!({"notes": "all done"})));
        assert!(!holds(no_todo, json!({"notes": "a TODO left"})));
        let runaway = json!({"var": "s", "matches": "^(?=(a*)*b)"});
        assert!(!holds(runaway, json!({"s": "a".repeat(40)})));
    }

    #[test]
    fn malformed_conditions_are_refused_with_their_pointer() {
        let refused = |c: Value| Condition::parse(&c).unwrap_err();
        let (at, why) = refused(json!({"and": [{"var": "a"}, {"var": "b", "greater": 1}]}));
        assert_eq!(at, "/and/1/greater");
        assert!(why.contains("unknown condition operator"), "{why}");
        let (at, why) = refused(json!({"var": "a", "equals": 1, "gt": 0}));
        assert_eq!(at, "");
        assert!(why.contains("one operator"), "{why}");
        assert_eq!(refused(json!({"var": "a", "gt": "1"})).0, "/gt");
        assert_eq!(refused(json!({"var": "a", "matches": "("})).0, "/matches");
        assert_eq!(refused(json!({"or": {"var": "a"}})).0, "/or");
        assert_eq!(refused(json!({"xor": []})).0, "/xor");
        assert_eq!(refused(json!("a")).0, "");
        let mut deep = json!({"var": "a"});
        for _ in 0..40 {
            deep = json!({ "not": deep });
        }
        assert!(refused(deep).1.contains("deep"));
    }
}
