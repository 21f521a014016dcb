//! The check of a WorkRail workflow file against WorkRail's published
//! schema, before the file is compiled.
//!
//! `workflow.schema.json` is wfhost's own statement of the constraints of
//! WorkRail's `spec/workflow.schema.json` (v0.3.0): the same files pass
//! and fail (`testdata/schema-verdicts.json` holds the published schema's
//! verdicts on some 1,200 edits of our example workflows, and the tests
//! require the same ones). Where WorkRail picks a step kind, a prompt part
//! or a confirmation rule with `oneOf`, our schema picks by the
//! discriminating key, so an error names the field that is wrong
//! (`/steps/3/prompt`) rather than the whole step.
//!
//! Every error is reported, each with the JSON pointer of the value (an
//! unknown key at its own pointer) and a message saying what is wrong and
//! what is expected. The schema is
//! compiled once; the file's nesting is bounded
//! ([`crate::limits::MAX_DEPTH`]) before it is validated.

use std::cmp::Ordering;
use std::sync::LazyLock;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{Draft, JsonType, PatternOptions, ValidationError, Validator};
use serde_json::Value;

use super::WorkRailError;
use crate::limits;
use crate::run::inputs::kind_of;

/// wfhost's JSON Schema of WorkRail workflow files (draft-07).
const SCHEMA_TEXT: &str = include_str!("workflow.schema.json");

/// How long a value may be in a message before it is cut.
const MAX_SHOWN_CHARS: usize = 80;

/// The schema, parsed (for its descriptions) and compiled.
struct Compiled {
    schema: Value,
    validator: Validator,
}

static COMPILED: LazyLock<Result<Compiled, String>> = LazyLock::new(compile_schema);

fn compile_schema() -> Result<Compiled, String> {
    let schema: Value = serde_json::from_str(SCHEMA_TEXT).map_err(|e| e.to_string())?;
    let validator = jsonschema::options()
        .with_draft(Draft::Draft7)
        .with_pattern_options(
            PatternOptions::fancy_regex()
                .backtrack_limit(limits::MAX_REGEX_BACKTRACKS)
                .size_limit(limits::MAX_REGEX_BYTES)
                .dfa_size_limit(limits::MAX_REGEX_DFA_BYTES),
        )
        .build(&schema)
        .map_err(|e| e.to_string())?;
    Ok(Compiled { schema, validator })
}

/// Check a WorkRail workflow (parsed) against the schema: every error,
/// each as the JSON pointer of the value (`""` for the whole file) and a
/// message, in the order of the file.
pub fn check(value: &Value) -> Result<(), Vec<WorkRailError>> {
    if let Err(e) = limits::value(value) {
        return Err(vec![(String::new(), format!("the file is {e}"))]);
    }
    let compiled = COMPILED.as_ref().map_err(|e| {
        vec![(
            String::new(),
            format!("the host's WorkRail schema does not compile ({e}), so no file can be checked"),
        )]
    })?;
    let mut errors: Vec<WorkRailError> = Vec::new();
    for error in compiled.validator.iter_errors(value) {
        let at = error.instance_path().as_str();
        match error.kind() {
            // Each unknown key is an error at its own pointer.
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                let allowed = parent(&compiled.schema, error.schema_path().as_str())
                    .map(field_names)
                    .unwrap_or_default();
                for name in unexpected {
                    let mut message = format!("unknown field `{}`", shorten(name));
                    if !allowed.is_empty() {
                        message.push_str(&format!("; the fields allowed here are {allowed}"));
                    }
                    errors.push((format!("{at}/{}", escape(name)), message));
                }
            }
            _ => errors.push((at.to_string(), message(&compiled.schema, &error))),
        }
    }
    if errors.is_empty() {
        return Ok(());
    }
    errors.sort_by(|a, b| pointer_order(&a.0, &b.0));
    errors.dedup();
    tracing::debug!(
        count = errors.len(),
        "WorkRail workflow refused by its schema"
    );
    Err(errors)
}

/// Pointers in the order of the file: array indices compared as numbers.
fn pointer_order(a: &str, b: &str) -> Ordering {
    let mut left = a.split('/');
    let mut right = b.split('/');
    loop {
        match (left.next(), right.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let order = match (x.parse::<u64>(), y.parse::<u64>()) {
                    (Ok(i), Ok(j)) => i.cmp(&j),
                    _ => x.cmp(y),
                };
                if order != Ordering::Equal {
                    return order;
                }
            }
        }
    }
}

/// The message for one error: what is wrong with the value and what is
/// expected there (from the schema's descriptions).
fn message(schema: &Value, error: &ValidationError<'_>) -> String {
    let instance = error.instance();
    let subject = subject(error.instance_path().as_str());
    let node = parent(schema, error.schema_path().as_str());
    let expected = node.and_then(|n| description(schema, n));
    let expecting = |what: String| match &expected {
        Some(d) => format!("{what}; expected {d}"),
        None => what,
    };
    match error.kind() {
        ValidationErrorKind::Type { kind } => {
            let wanted = expected.clone().unwrap_or_else(|| type_names(kind));
            format!("{subject} is {}; expected {wanted}", kind_of(instance))
        }
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            let what = property_description(schema, error.schema_path().as_str(), name);
            match what {
                Some(d) => format!("{subject} lacks `{name}`, which is required: {d}"),
                None => format!("{subject} lacks `{name}`, which is required"),
            }
        }
        ValidationErrorKind::MinLength { .. } | ValidationErrorKind::MaxLength { .. } => {
            let chars = instance.as_str().map_or(0, |s| s.chars().count());
            if chars == 0 {
                expecting(format!("{subject} is empty"))
            } else {
                expecting(format!("{subject} is {chars} characters long"))
            }
        }
        ValidationErrorKind::Pattern { .. }
        | ValidationErrorKind::Enum { .. }
        | ValidationErrorKind::Constant { .. }
        | ValidationErrorKind::Minimum { .. }
        | ValidationErrorKind::Maximum { .. } => {
            expecting(format!("{subject} is {}", shown(instance)))
        }
        ValidationErrorKind::MinItems { .. } | ValidationErrorKind::MaxItems { .. } => {
            let items = instance.as_array().map_or(0, Vec::len);
            if items == 0 {
                expecting(format!("{subject} is empty"))
            } else {
                expecting(format!("{subject} has {items} items"))
            }
        }
        ValidationErrorKind::MinProperties { .. } | ValidationErrorKind::MaxProperties { .. } => {
            let fields = instance.as_object().map_or(0, serde_json::Map::len);
            expecting(format!("{subject} has {fields} fields"))
        }
        ValidationErrorKind::UniqueItems => {
            expecting(format!("{subject} lists the same item more than once"))
        }
        ValidationErrorKind::AnyOf { .. } | ValidationErrorKind::OneOfNotValid { .. } => {
            match &expected {
                Some(d) => format!("{subject} does not fit: {d}"),
                None => format!("{subject} matches none of the forms allowed here"),
            }
        }
        _ => expecting(format!("{subject}: {}", shorten(&error.to_string()))),
    }
}

/// How a message names the value at `pointer`.
fn subject(pointer: &str) -> String {
    let mut segments = pointer.rsplit('/');
    let last = segments.next().unwrap_or_default();
    if pointer.is_empty() {
        return "the workflow".into();
    }
    let name = unescape(last);
    if name.parse::<u64>().is_ok() {
        match segments.next().filter(|p| !p.is_empty()) {
            Some(list) => format!("`{}` item {name}", unescape(list)),
            None => format!("item {name}"),
        }
    } else {
        format!("`{}`", shorten(&name))
    }
}

/// A key as a JSON pointer segment.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// A JSON pointer segment's text.
fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

/// The schema object holding the keyword at `schema_path`.
fn parent<'s>(schema: &'s Value, schema_path: &str) -> Option<&'s Value> {
    let cut = schema_path.rfind('/')?;
    schema.pointer(&schema_path[..cut])
}

/// A schema object's description, looking through `$ref`.
fn description(schema: &Value, node: &Value) -> Option<String> {
    let mut node = node;
    for _ in 0..4 {
        if let Some(d) = node.get("description").and_then(Value::as_str) {
            return Some(d.to_string());
        }
        let target = node.get("$ref")?.as_str()?.strip_prefix('#')?;
        node = schema.pointer(target)?;
    }
    None
}

/// The description of property `name` of the nearest schema object above
/// the keyword at `schema_path` that defines it (a conditional `required`
/// sits in a `then` below the object's `properties`).
fn property_description(schema: &Value, schema_path: &str, name: &str) -> Option<String> {
    let mut path = schema_path;
    while let Some(cut) = path.rfind('/') {
        path = &path[..cut];
        let property = schema
            .pointer(path)
            .and_then(|n| n.get("properties"))
            .and_then(|p| p.get(name));
        if let Some(property) = property {
            return description(schema, property);
        }
    }
    None
}

/// The fields a schema object allows, as a list for a message.
fn field_names(node: &Value) -> String {
    node.get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.keys()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// The JSON types of a `type` keyword, for a message.
fn type_names(kind: &TypeKind) -> String {
    let named = |t: JsonType| match t {
        JsonType::Array => "an array",
        JsonType::Boolean => "a boolean",
        JsonType::Integer => "a whole number",
        JsonType::Null => "null",
        JsonType::Number => "a number",
        JsonType::Object => "an object",
        JsonType::String => "a string",
    };
    match kind {
        TypeKind::Single(t) => named(*t).to_string(),
        TypeKind::Multiple(set) => set.iter().map(named).collect::<Vec<_>>().join(" or "),
    }
}

/// A value as JSON, cut to [`MAX_SHOWN_CHARS`].
fn shown(value: &Value) -> String {
    shorten(&value.to_string())
}

/// `text` cut to [`MAX_SHOWN_CHARS`] characters, control characters shown.
fn shorten(text: &str) -> String {
    let mut out: String = text.chars().take(MAX_SHOWN_CHARS).collect();
    if text.chars().nth(MAX_SHOWN_CHARS).is_some() {
        out.push('…');
    }
    crate::text::escape(&out)
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
