//! Run inputs: the values an operator gives a run (`wfhost run --input
//! FILE --set key=value`), checked against the workflow's `inputs` schema.
//!
//! A workflow declares its inputs as a JSON Schema of an object: its
//! `properties` name the inputs, `required` the ones that must be given,
//! `default`s fill in the ones that were not. Every input must be declared:
//! a key that is not a property is refused, so a typo never goes unnoticed.
//! A workflow without an `inputs` schema takes no inputs.

use serde_json::{Map, Value};

use crate::json_pointer;
use wfhost_actions::is_valid_id;

/// The inputs of one run: name → value.
pub type Inputs = Map<String, Value>;

/// A problem with the inputs schema itself: the JSON pointer into the
/// manifest and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaProblem {
    pub pointer: String,
    pub message: String,
}

/// Check that `schema` (the manifest's `inputs`) is a valid JSON Schema of
/// an object whose properties are usable input names, and that each
/// declared `default` satisfies its property's schema.
pub fn check_schema(schema: &Value) -> Vec<SchemaProblem> {
    let problem = |pointer: String, message: String| SchemaProblem { pointer, message };
    if let Err(e) = crate::limits::value(schema) {
        return vec![problem(
            "/inputs".into(),
            format!("invalid JSON Schema: the schema is {e}"),
        )];
    }
    if let Err(e) = jsonschema::meta::validate(schema) {
        return vec![problem(
            format!("/inputs{}", e.instance_path()),
            format!("invalid JSON Schema: {e}"),
        )];
    }
    let Some(obj) = schema.as_object() else {
        return vec![problem(
            "/inputs".into(),
            "the inputs schema must be an object schema (`{\"type\": \"object\", \"properties\": {...}}`)".into(),
        )];
    };
    let mut problems = Vec::new();
    if obj.get("type").is_some_and(|t| t != "object") {
        problems.push(problem(
            "/inputs/type".into(),
            "the inputs schema must describe an object (`\"type\": \"object\"`)".into(),
        ));
    }
    for (name, property) in properties(schema) {
        let at = format!("/inputs/properties/{}", json_pointer::escape(name));
        if !is_valid_id(name) {
            problems.push(problem(
                at.clone(),
                format!("input name `{name}` may only use letters, digits, `_` and `-`"),
            ));
        }
        if let Some(default) = property.get("default")
            && let Ok(validator) = crate::limits::schema(property)
            && let Err(e) = validator.validate(default)
        {
            problems.push(problem(
                format!("{at}/default"),
                format!("the default of input `{name}` does not fit its schema: {e}"),
            ));
        }
    }
    for (i, name) in required(schema).iter().enumerate() {
        if !properties(schema).any(|(n, _)| n == name) {
            problems.push(problem(
                format!("/inputs/required/{i}"),
                format!("required input `{name}` is not declared in `properties`"),
            ));
        }
    }
    problems
}

/// The declared inputs: property name → its schema.
pub fn properties(schema: &Value) -> impl Iterator<Item = (&String, &Value)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

/// The declared inputs as a person reads them, one line each, by name:
/// `NAME (TYPE, required|optional|default VALUE[, one of …]): DESCRIPTION`.
/// Text from the manifest is escaped.
pub fn describe(schema: &Value) -> Vec<String> {
    let required = required(schema);
    properties(schema)
        .map(|(name, spec)| {
            let mut facts = vec![type_of(spec)];
            match spec.get("default") {
                Some(default) => facts.push(format!("default {default}")),
                None if required.contains(&name.as_str()) => facts.push("required".into()),
                None => facts.push("optional".into()),
            }
            if let Some(choices) = spec.get("enum").and_then(Value::as_array) {
                let choices: Vec<String> = choices.iter().map(Value::to_string).collect();
                facts.push(format!("one of {}", choices.join(", ")));
            }
            let description = spec
                .get("description")
                .and_then(Value::as_str)
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            crate::text::escape(&format!("{name} ({}){description}", facts.join(", ")))
        })
        .collect()
}

/// An input's type as written: `string`, `string | null`, `array of
/// string`; `any` when the schema names none.
fn type_of(spec: &Value) -> String {
    let names = |t: &Value| match t {
        Value::String(s) => s.clone(),
        Value::Array(list) => list
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" | "),
        _ => "any".into(),
    };
    let kind = spec.get("type").map(names).unwrap_or_else(|| "any".into());
    match spec.get("items").and_then(|i| i.get("type")) {
        Some(item) if kind == "array" => format!("array of {}", names(item)),
        _ => kind,
    }
}

fn required(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// Parse the text of `--set key=value` for input `key`: a string input
/// keeps the text as it is; a number, integer, boolean, object, array or
/// null input parses it as JSON. When the declared type is absent, JSON
/// is tried and the text is kept as a string if it is not JSON. When it is
/// a list (`["string", "null"]`), the JSON reading is kept only if its type
/// is in the list; otherwise, if `string` is, the text stays a string
/// (`--set version=42` for a string-or-null input is `"42"`).
pub fn parse_set(schema: Option<&Value>, key: &str, text: &str) -> Result<Value, String> {
    let Some(property) = schema.and_then(|s| s.get("properties")?.get(key)) else {
        if schema.is_some_and(is_open) {
            return Ok(
                serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
            );
        }
        return Err(undeclared(schema, key));
    };
    let as_string = || Value::String(text.to_string());
    match property.get("type") {
        Some(Value::String(kind)) if kind == "string" => Ok(as_string()),
        Some(Value::String(kind)) => serde_json::from_str(text).map_err(|_| {
            format!("input `{key}`: `{text}` is not a valid {kind} (written as JSON)")
        }),
        Some(Value::Array(kinds)) => {
            let allows = |kind: &str| kinds.iter().any(|k| k == kind);
            match serde_json::from_str::<Value>(text) {
                Ok(value) if json_types(&value).iter().any(|t| allows(t)) => Ok(value),
                _ if allows("string") => Ok(as_string()),
                Ok(value) => Ok(value),
                Err(_) => Ok(as_string()),
            }
        }
        _ => Ok(serde_json::from_str(text).unwrap_or_else(|_| as_string())),
    }
}

/// The JSON Schema type names `value` satisfies.
fn json_types(value: &Value) -> &'static [&'static str] {
    match value {
        Value::Null => &["null"],
        Value::Bool(_) => &["boolean"],
        Value::Number(n) if n.is_i64() || n.is_u64() => &["integer", "number"],
        Value::Number(_) => &["number"],
        Value::String(_) => &["string"],
        Value::Array(_) => &["array"],
        Value::Object(_) => &["object"],
    }
}

/// Whether the schema admits inputs it does not declare
/// (`"additionalProperties": true`, as a WorkRail workflow's context).
pub fn is_open(schema: &Value) -> bool {
    schema.get("additionalProperties") == Some(&Value::Bool(true))
}

/// The error for an input the workflow does not declare.
fn undeclared(schema: Option<&Value>, key: &str) -> String {
    let Some(schema) = schema else {
        return format!("unknown input `{key}`: the workflow declares no inputs");
    };
    let declared: Vec<&str> = properties(schema).map(|(n, _)| n.as_str()).collect();
    if declared.is_empty() {
        format!("unknown input `{key}`: the workflow declares no inputs")
    } else {
        format!("unknown input `{key}` (declared: {})", declared.join(", "))
    }
}

/// The inputs of a run: those of the input file, overridden by `sets`
/// (already parsed with [`parse_set`]), completed with the schema's
/// defaults and validated against it. The error is one line naming the
/// inputs and what is wrong with each.
pub fn resolve(
    schema: Option<&Value>,
    file: Option<Value>,
    sets: Vec<(String, Value)>,
) -> Result<Inputs, String> {
    let mut inputs = match file {
        None => Inputs::new(),
        Some(Value::Object(map)) => map,
        Some(other) => {
            return Err(format!(
                "the input file must hold a JSON object, not {}",
                kind_of(&other)
            ));
        }
    };
    inputs.extend(sets);
    if let Some(key) = inputs
        .keys()
        .find(|k| schema.is_none_or(|s| !is_open(s) && !properties(s).any(|(n, _)| n == *k)))
    {
        return Err(undeclared(schema, key));
    }
    let Some(schema) = schema else {
        return Ok(inputs);
    };
    for (name, property) in properties(schema) {
        if let Some(default) = property.get("default")
            && !inputs.contains_key(name)
        {
            inputs.insert(name.clone(), default.clone());
        }
    }
    validate(schema, &inputs)?;
    Ok(inputs)
}

/// Validate complete inputs against the schema.
fn validate(schema: &Value, inputs: &Inputs) -> Result<(), String> {
    let errors: Vec<String> = problems(schema, inputs)?
        .into_iter()
        .map(|p| p.message)
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// What is wrong with one input (`name`; empty for the inputs as a whole).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputProblem {
    pub name: String,
    pub message: String,
}

/// Each problem of complete inputs against the schema, by input.
fn problems(schema: &Value, inputs: &Inputs) -> Result<Vec<InputProblem>, String> {
    let problem = |name: &str, message: String| InputProblem {
        name: name.to_string(),
        message,
    };
    let mut errors: Vec<InputProblem> = required(schema)
        .into_iter()
        .filter(|name| !inputs.contains_key(*name))
        .map(|name| problem(name, format!("missing required input `{name}`")))
        .collect();
    let validator = crate::limits::schema(schema).map_err(|e| format!("inputs schema: {e}"))?;
    let instance = Value::Object(inputs.clone());
    for e in validator.iter_errors(&instance) {
        let path = e.instance_path().to_string();
        let name = path.trim_start_matches('/').split('/').next().unwrap_or("");
        if name.is_empty() {
            // Whole-object rules; `required` is reported above, by name.
            if !matches!(
                e.kind(),
                jsonschema::error::ValidationErrorKind::Required { .. }
            ) {
                errors.push(problem("", format!("inputs: {e}")));
            }
        } else {
            errors.push(problem(name, format!("input `{name}`: {e}")));
        }
    }
    Ok(errors)
}

/// The problems of `given` inputs against `schema`, each naming its input
/// (for a form to show next to its field): what [`resolve`] refuses.
pub fn problems_of(schema: Option<&Value>, given: &Inputs) -> Vec<InputProblem> {
    if let Some(key) = given
        .keys()
        .find(|k| schema.is_none_or(|s| !is_open(s) && !properties(s).any(|(n, _)| n == *k)))
    {
        return vec![InputProblem {
            name: key.clone(),
            message: undeclared(schema, key),
        }];
    }
    let Some(schema) = schema else {
        return Vec::new();
    };
    let mut inputs = given.clone();
    for (name, property) in properties(schema) {
        if let Some(default) = property.get("default")
            && !inputs.contains_key(name)
        {
            inputs.insert(name.clone(), default.clone());
        }
    }
    problems(schema, &inputs).unwrap_or_else(|message| {
        vec![InputProblem {
            name: String::new(),
            message,
        }]
    })
}

/// What kind of JSON value `value` is, with its article ("a string").
pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn problems_name_the_input_they_are_about() {
        let schema = json!({
            "type": "object",
            "required": ["topic"],
            "properties": {
                "topic": {"type": "string"},
                "count": {"type": "integer", "default": 3}
            }
        });
        let given = |v: serde_json::Value| v.as_object().unwrap().clone();
        let names = |v| {
            problems_of(Some(&schema), &given(v))
                .into_iter()
                .map(|p| p.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(names(json!({"count": "many"})), ["topic", "count"]);
        assert_eq!(names(json!({"topic": "x", "nope": 1})), ["nope"]);
        assert!(names(json!({"topic": "x"})).is_empty());
    }

    #[test]
    fn declared_inputs_are_described_one_per_line() {
        let schema = json!({
            "type": "object",
            "required": ["topic"],
            "properties": {
                "topic": {"type": "string", "description": "What to write about.\u{1b}[2J"},
                "count": {"type": "integer", "default": 3},
                "tags": {"type": "array", "items": {"type": "string"}},
                "tone": {"enum": ["dry", "warm"], "default": "dry"},
                "note": {"type": ["string", "null"]}
            }
        });
        let lines = describe(&schema);
        assert_eq!(
            lines,
            [
                "count (integer, default 3)",
                "note (string | null, optional)",
                "tags (array of string, optional)",
                "tone (any, default \"dry\", one of \"dry\", \"warm\")",
                "topic (string, required): What to write about.\\e[2J",
            ]
        );
    }

    fn schema() -> Value {
        json!({
            "type": "object",
            "required": ["topic"],
            "properties": {
                "topic": {"type": "string"},
                "count": {"type": "integer", "minimum": 1, "default": 3},
                "loud": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "any": {}
            }
        })
    }

    fn sets(schema: &Value, pairs: &[(&str, &str)]) -> Result<Vec<(String, Value)>, String> {
        pairs
            .iter()
            .map(|(k, v)| Ok((k.to_string(), parse_set(Some(schema), k, v)?)))
            .collect()
    }

    #[test]
    fn set_values_are_typed_by_the_schema() {
        let s = schema();
        assert_eq!(parse_set(Some(&s), "topic", "42").unwrap(), json!("42"));
        assert_eq!(parse_set(Some(&s), "count", "42").unwrap(), json!(42));
        assert_eq!(parse_set(Some(&s), "loud", "true").unwrap(), json!(true));
        assert_eq!(
            parse_set(Some(&s), "tags", r#"["a","b"]"#).unwrap(),
            json!(["a", "b"])
        );
        assert_eq!(parse_set(Some(&s), "any", "7").unwrap(), json!(7));
        assert_eq!(parse_set(Some(&s), "any", "seven").unwrap(), json!("seven"));
        // A list of types: the JSON reading when its type is listed, else
        // the text itself when strings are allowed.
        let mixed = json!({"properties": {"v": {"type": ["string", "null"]}, "n": {"type": ["integer", "null"]}}});
        assert_eq!(parse_set(Some(&mixed), "v", "42").unwrap(), json!("42"));
        assert_eq!(parse_set(Some(&mixed), "v", "null").unwrap(), json!(null));
        assert_eq!(
            parse_set(Some(&mixed), "v", "1.2.0").unwrap(),
            json!("1.2.0")
        );
        assert_eq!(parse_set(Some(&mixed), "n", "42").unwrap(), json!(42));
        assert_eq!(parse_set(Some(&mixed), "n", "x").unwrap(), json!("x"));
        let err = parse_set(Some(&s), "count", "many").unwrap_err();
        assert!(err.contains("`count`") && err.contains("integer"), "{err}");
    }

    #[test]
    fn undeclared_keys_are_refused() {
        let s = schema();
        let err = parse_set(Some(&s), "cuont", "1").unwrap_err();
        assert!(
            err.contains("unknown input `cuont`") && err.contains("count"),
            "{err}"
        );
        let err = parse_set(None, "x", "1").unwrap_err();
        assert!(err.contains("declares no inputs"), "{err}");
        let err = resolve(Some(&s), Some(json!({"topic": "t", "extra": 1})), vec![]).unwrap_err();
        assert!(err.contains("unknown input `extra`"), "{err}");
        let err = resolve(None, Some(json!({"x": 1})), vec![]).unwrap_err();
        assert!(
            err.contains("`x`") && err.contains("declares no inputs"),
            "{err}"
        );
        assert_eq!(
            resolve(None, Some(json!({})), vec![]).unwrap(),
            Inputs::new()
        );
    }

    #[test]
    fn an_open_schema_admits_undeclared_inputs_and_still_checks_declared_ones() {
        let open = json!({"type": "object", "additionalProperties": true,
            "properties": {"n": {"type": "integer"}}});
        assert_eq!(parse_set(Some(&open), "tags", "[1]").unwrap(), json!([1]));
        assert_eq!(parse_set(Some(&open), "who", "ann").unwrap(), json!("ann"));
        let got = resolve(Some(&open), Some(json!({"anything": 1})), vec![]).unwrap();
        assert_eq!(got["anything"], 1);
        let err = resolve(Some(&open), Some(json!({"n": "x"})), vec![]).unwrap_err();
        assert!(err.contains("`n`"), "{err}");
    }

    #[test]
    fn defaults_fill_in_and_sets_override_the_file() {
        let s = schema();
        let file = json!({"topic": "from file", "loud": false});
        let inputs = resolve(
            Some(&s),
            Some(file),
            sets(&s, &[("topic", "from set")]).unwrap(),
        )
        .unwrap();
        assert_eq!(
            Value::Object(inputs),
            json!({"topic": "from set", "loud": false, "count": 3})
        );
    }

    #[test]
    fn missing_and_invalid_inputs_are_named() {
        let s = schema();
        let err = resolve(Some(&s), None, vec![]).unwrap_err();
        assert_eq!(err, "missing required input `topic`");
        let err = resolve(Some(&s), Some(json!({"topic": "t", "count": 0})), vec![]).unwrap_err();
        assert!(
            err.starts_with("input `count`: ") && err.contains("minimum"),
            "{err}"
        );
        let err = resolve(Some(&s), Some(json!({"topic": 5})), vec![]).unwrap_err();
        assert!(
            err.starts_with("input `topic`: ") && err.contains("string"),
            "{err}"
        );
        let err = resolve(Some(&s), Some(json!([1])), vec![]).unwrap_err();
        assert!(err.contains("JSON object, not an array"), "{err}");
    }

    #[test]
    fn the_schema_itself_is_checked() {
        assert!(check_schema(&schema()).is_empty());
        let bad = json!({"type": "object", "properties": {"n": {"type": "banana"}}});
        let p = check_schema(&bad);
        assert_eq!(p[0].pointer, "/inputs/properties/n/type", "{p:?}");
        let p = check_schema(&json!({"type": "string"}));
        assert_eq!(p[0].pointer, "/inputs/type");
        let p = check_schema(&json!({"properties": {"a b": {}}}));
        assert_eq!(p[0].pointer, "/inputs/properties/a b");
        let p = check_schema(&json!({"properties": {"n": {"type": "integer", "default": "x"}}}));
        assert_eq!(p[0].pointer, "/inputs/properties/n/default");
        let p = check_schema(&json!({"properties": {}, "required": ["ghost"]}));
        assert_eq!(p[0].pointer, "/inputs/required/0");
    }
}
