//! WorkRail workflows (its published `spec/workflow.schema.json`, v0.3.0)
//! read as wfhost workflows.
//!
//! A file with `steps` and no `nodes` is a WorkRail workflow. It becomes
//! one node `main` of blocks an MCP client performs: each standard step an
//! `external` block whose prompt is the step's rendered prompt (agent
//! role, guidance, `prompt` or `promptBlocks`, prompt fragments, function
//! definitions, the loop context), chained in order. A step with a
//! `runCondition` gets a `wr.when` guard block before it; a loop step is a
//! `wr.loop` head block before its body, whose last block leads back to
//! the head (`crate::control`). WorkRail's `{{name}}` placeholders become
//! `{{inputs.name}}`: the run's inputs are WorkRail's context.
//!
//! What wfhost cannot do the same way — parallel steps (subagents),
//! templates, extension points, assessments, audits, verification
//! commands, coordinator or human confirmation rules — is refused with
//! the JSON pointer of the construct, as is any key the spec does not
//! define. Nothing is silently dropped.

mod flow;
mod prompt;

use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::manifest::{ManifestError, ManifestErrors, Workflow};

/// A WorkRail workflow's top level.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Document {
    #[serde(rename = "$schema", default)]
    _schema: Option<Value>,
    id: String,
    name: String,
    description: String,
    version: String,
    steps: Vec<Value>,
    #[serde(default)]
    meta_guidance: Vec<String>,
    #[serde(default)]
    preconditions: Vec<String>,
    #[serde(default)]
    clarification_prompts: Vec<String>,
    #[serde(default)]
    function_definitions: Vec<FunctionDefinition>,
    // Informational: accepted, not used by the run.
    #[serde(default, rename = "modelTier")]
    _model_tier: Option<Value>,
    #[serde(default, rename = "recommendedPreferences")]
    _recommended_preferences: Option<Value>,
    #[serde(default, rename = "validatedAgainstSpecVersion")]
    _validated_against: Option<Value>,
    #[serde(default, rename = "about")]
    _about: Option<String>,
    #[serde(default, rename = "examples")]
    _examples: Option<Value>,
    #[serde(default, rename = "metricsProfile")]
    _metrics_profile: Option<Value>,
    // Refused (see UNSUPPORTED_TOP).
    #[serde(default)]
    features: Option<Value>,
    #[serde(default)]
    assessments: Option<Value>,
    #[serde(default)]
    extension_points: Option<Value>,
    #[serde(default)]
    references: Option<Value>,
}

/// A function definition, rendered into the prompts that can see it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FunctionDefinition {
    name: String,
    definition: String,
    #[serde(default)]
    parameters: Vec<FunctionParameter>,
    #[serde(default, rename = "scope")]
    _scope: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FunctionParameter {
    name: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    required: Option<bool>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default, rename = "enum")]
    choices: Option<Vec<Value>>,
    #[serde(default)]
    default: Option<Value>,
}

/// A compile error: the JSON pointer in the WorkRail file and why.
pub type WorkRailError = (String, String);

/// The workflow of a WorkRail workflow file ,
/// None for any other text. Errors name the JSON pointer in the file.
pub fn from_text(file: &Path, text: &str) -> Result<Option<Workflow>, ManifestErrors> {
    // Cheap test first: only text with a `steps` key can be one.
    if !text.contains("\"steps\"") {
        return Ok(None);
    }
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return Ok(None);
    };
    if !is_workrail(&value) {
        return Ok(None);
    }
    let errors = |list: Vec<(String, String)>| {
        ManifestErrors(
            list.into_iter()
                .map(|(at, message)| ManifestError {
                    file: file.to_path_buf(),
                    location: Some(if at.is_empty() { "/".into() } else { at }),
                    message: format!("WorkRail workflow: {message}"),
                })
                .collect(),
        )
    };
    if let Err(e) = crate::manifest::strict_json::check_no_duplicate_keys(text) {
        return Err(errors(vec![(String::new(), e.to_string())]));
    }
    let compiled = compile(&value).map_err(errors)?;
    serde_json::from_value(compiled).map(Some).map_err(|e| {
        errors(vec![(
            String::new(),
            format!("compiles to an invalid manifest: {e}"),
        )])
    })
}

/// Whether `value` is a WorkRail workflow (steps, no nodes).
pub fn is_workrail(value: &Value) -> bool {
    value.get("steps").is_some() && value.get("nodes").is_none()
}

/// The wfhost manifest (as JSON) of a WorkRail workflow, or every
/// construct that is refused.
pub fn compile(value: &Value) -> Result<Value, Vec<WorkRailError>> {
    let doc: Document = serde_path_to_error::deserialize(value).map_err(|e| {
        let at = crate::json_pointer::of_path(e.path());
        vec![(at, e.into_inner().to_string())]
    })?;
    let mut errors = Vec::new();
    for (key, present) in [
        ("features", doc.features.is_some()),
        ("assessments", doc.assessments.is_some()),
        ("extensionPoints", doc.extension_points.is_some()),
        ("references", doc.references.is_some()),
    ] {
        if present {
            errors.push((format!("/{key}"), unsupported(key)));
        }
    }
    let blocks = flow::compile_steps(&doc, &mut errors);
    if !errors.is_empty() {
        return Err(errors);
    }
    let Some((entry, blocks)) = blocks else {
        return Err(vec![(
            "/steps".into(),
            "a workflow needs at least one step".into(),
        )]);
    };
    let mut manifest = Map::new();
    manifest.insert("id".into(), doc.id.clone().into());
    manifest.insert("version".into(), doc.version.clone().into());
    manifest.insert(
        "description".into(),
        format!("{}: {}", doc.name, doc.description).into(),
    );
    if let Some(rules) = prompt::rules(&doc) {
        manifest.insert("rules".into(), rules.into());
    }
    manifest.insert(
        "inputs".into(),
        serde_json::json!({"type": "object", "additionalProperties": true}),
    );
    manifest.insert("start_node".into(), "main".into());
    manifest.insert(
        "nodes".into(),
        serde_json::json!({"main": {"entry_block": entry, "blocks": blocks}}),
    );
    Ok(Value::Object(manifest))
}

/// Why a construct is refused.
fn unsupported(key: &str) -> String {
    let why = match key {
        "features" => "compiler features",
        "assessments" | "assessmentRefs" | "assessmentConsequences" => "assessments",
        "extensionPoints" => "extension points (bindings)",
        "references" => "workflow references",
        "templateCall" => "template calls",
        "audit" => "audits",
        "verification" => "verification commands",
        "parallel" => "parallel steps (subagent delegation)",
        _ => "this construct",
    };
    format!(
        "`{key}`: wfhost does not run WorkRail {why}; remove it or write the workflow as a wfhost manifest"
    )
}

#[cfg(test)]
mod tests;
