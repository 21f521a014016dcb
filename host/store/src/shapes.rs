//! The JSON Schemas of the objects the CLI's `--json` and the HTTP API
//! print, generated from the types that print them, so a schema cannot
//! drift from its object: a field added to a type is in its schema. The
//! API's OpenAPI document takes them as its components.
//!
//! Each object schema is closed (`unevaluatedProperties: false`) and lists
//! as required every field that is always printed (a field printed only
//! when it has a value is optional), so a client can rely on the schema
//! both ways.

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// Where the schemas refer to each other: an OpenAPI document's
/// components.
pub const DEFINITIONS_PATH: &str = "#/components/schemas/";

/// The schemas by name: `Run`, `RunSummary`, `OpenGate`, `OpenJob`,
/// `BranchInfo`, `StepLine`, `JobEvent`, `SessionSummary` and those
/// they refer to.
pub fn schemas() -> Map<String, Value> {
    let mut settings = SchemaSettings::draft2020_12().for_serialize();
    settings.definitions_path = DEFINITIONS_PATH.into();
    let mut generator = settings.into_generator();
    generator.subschema_for::<crate::detail::RunDetail>();
    generator.subschema_for::<crate::RunSummary>();
    generator.subschema_for::<crate::OpenGate>();
    generator.subschema_for::<crate::OpenJob>();
    generator.subschema_for::<crate::BranchInfo>();
    generator.subschema_for::<crate::view::StepLine>();
    generator.subschema_for::<crate::JobEvent>();
    generator.subschema_for::<crate::SessionSummary>();
    generator.subschema_for::<crate::schedules::Schedule>();
    generator.subschema_for::<crate::schedules::Tick>();
    generator.subschema_for::<crate::hooks::Hook>();
    generator.subschema_for::<crate::hooks::Delivery>();
    generator.subschema_for::<crate::notify::Target>();
    let mut definitions = generator.take_definitions(true);
    for schema in definitions.values_mut() {
        close(schema);
        plain_descriptions(schema);
    }
    definitions
}

/// Descriptions come from the types' documentation: its links to other
/// items (`` [`Event::GateReasked`] ``) read as the item's name alone.
fn plain_descriptions(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match value {
                    Value::String(text) if key == "description" => *text = unlinked(text),
                    other => plain_descriptions(other),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(plain_descriptions),
        _ => {}
    }
}

/// `text` with each `` [`path::Item`] `` as `` `Item` ``.
fn unlinked(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("[`") {
        let Some(end) = rest[at..].find("`]") else {
            break;
        };
        let item = &rest[at + 2..at + end];
        out.push_str(&rest[..at]);
        out.push('`');
        out.push_str(item.rsplit("::").next().unwrap_or(item));
        out.push('`');
        rest = &rest[at + end + 2..];
    }
    out.push_str(rest);
    out
}

/// Close every object schema with properties that is not a branch of a
/// combination (whose siblings may hold the other properties): nothing
/// beyond what it lists is allowed, whichever branch listed it.
fn close(schema: &mut Value) {
    let Value::Object(map) = schema else {
        return;
    };
    if (map.contains_key("properties") || has_combination(map))
        && !map.contains_key("additionalProperties")
    {
        map.insert("unevaluatedProperties".into(), Value::Bool(false));
    }
    for (key, value) in map.iter_mut() {
        match key.as_str() {
            // Their branches are checked as parts of this schema.
            "oneOf" | "anyOf" | "allOf" => {
                if let Value::Array(branches) = value {
                    for branch in branches {
                        close_inside(branch);
                    }
                }
            }
            "properties" | "$defs" => {
                if let Value::Object(props) = value {
                    for sub in props.values_mut() {
                        close(sub);
                    }
                }
            }
            "items" | "additionalProperties" => close(value),
            _ => {}
        }
    }
}

/// A combination's branch: its nested values are closed, itself not.
fn close_inside(branch: &mut Value) {
    let Value::Object(map) = branch else {
        return;
    };
    for (key, value) in map.iter_mut() {
        match key.as_str() {
            "properties" => {
                if let Value::Object(props) = value {
                    for sub in props.values_mut() {
                        close(sub);
                    }
                }
            }
            "items" => close(value),
            _ => {}
        }
    }
}

fn has_combination(map: &Map<String, Value>) -> bool {
    ["oneOf", "anyOf", "allOf"]
        .iter()
        .any(|k| map.contains_key(*k))
        && map.get("type").and_then(Value::as_str) == Some("object")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_links_read_as_names() {
        assert_eq!(
            unlinked("answers ([`crate::run::questions`]) and [`MAX_REASKS`] re-asks [`x"),
            "answers (`questions`) and `MAX_REASKS` re-asks [`x"
        );
    }

    #[test]
    fn every_object_schema_is_closed_and_refers_only_to_schemas_it_has() {
        let schemas = schemas();
        for name in [
            "Run",
            "RunSummary",
            "OpenGate",
            "OpenJob",
            "BranchInfo",
            "StepLine",
        ] {
            assert!(
                schemas.contains_key(name),
                "no {name}: {:?}",
                schemas.keys()
            );
        }
        let run = &schemas["Run"];
        assert_eq!(run["unevaluatedProperties"], false, "{run:#}");
        // Always printed: required, even when null.
        let required: Vec<&str> = run["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        for field in [
            "run",
            "status",
            "failure",
            "result",
            "stages",
            "steps",
            "server_now_ms",
        ] {
            assert!(
                required.contains(&field),
                "{field} not required: {required:?}"
            );
        }
        let text = Value::Object(schemas.clone()).to_string();
        assert!(!text.contains("[`"), "a rustdoc link in a description");
        for reference in text.split("\"$ref\":\"").skip(1) {
            let name = reference
                .split('"')
                .next()
                .unwrap()
                .strip_prefix(DEFINITIONS_PATH)
                .unwrap_or_else(|| panic!("a reference outside the components: {reference}"));
            assert!(
                schemas.contains_key(name),
                "{name} is referred to but absent"
            );
        }
    }
}
