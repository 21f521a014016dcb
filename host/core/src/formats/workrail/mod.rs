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
//! Before that, `templateCall`s are replaced by their routine's steps,
//! `verification`/`audit`/`synthesis` add steps, and extension-point
//! bindings take their defaults ([`expand`]). Features add to the prompt
//! blocks of steps ([`library`]), `ref` prompt parts become their texts,
//! output contracts become the schema of the step's output
//! ([`contracts`]), assessments a check the MCP server makes
//! ([`assess`]), conditional prompt fragments and parallel steps prompt
//! fragments chosen when the step is shown. Any key the spec does not
//! define is refused with its JSON pointer; nothing is silently dropped.
//!
//! First of all the file is checked against WorkRail's published schema
//! ([`schema`]): every error is reported with its JSON pointer, and only
//! a file that passes is compiled.

mod assess;
mod contracts;
mod expand;
mod flow;
mod library;
mod prompt;
mod routines;
mod schema;

pub use assess::{
    Checked as AssessmentCheck, Recorded as RecordedAssessment, check as check_assessments,
};
pub use expand::{NoRoutines, ROUTINE_TEMPLATE, Routines, routine_name};

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
    #[serde(default)]
    features: Vec<String>,
    #[serde(default)]
    assessments: Vec<assess::Assessment>,
    #[serde(default)]
    extension_points: Vec<ExtensionPoint>,
    /// Documents the workflow points to; shown to the client when a run
    /// starts (never inlined).
    #[serde(default)]
    references: Vec<Value>,
}

/// A slot `{{wr.bindings.<slotId>}}` names; wfhost binds its default.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ExtensionPoint {
    slot_id: String,
    #[serde(rename = "purpose")]
    _purpose: String,
    #[serde(default)]
    default: Option<String>,
    #[serde(default, rename = "acceptedKinds")]
    _accepted_kinds: Option<Value>,
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
    from_text_with(file, text, &routines::Beside::of(file))
}

/// [`from_text`] with the routines a `templateCall` may name.
pub fn from_text_with(
    file: &Path,
    text: &str,
    routines: &dyn Routines,
) -> Result<Option<Workflow>, ManifestErrors> {
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
    schema::check(&value).map_err(errors)?;
    let compiled = compile_with(&value, routines).map_err(errors)?;
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
    compile_with(value, &NoRoutines)
}

/// [`compile`] with the routines a `templateCall` may name.
pub fn compile_with(value: &Value, routines: &dyn Routines) -> Result<Value, Vec<WorkRailError>> {
    let mut doc: Document = serde_path_to_error::deserialize(value).map_err(|e| {
        let at = crate::json_pointer::of_path(e.path());
        vec![(at, e.into_inner().to_string())]
    })?;
    let mut errors = Vec::new();
    let mut features = Vec::new();
    for (i, id) in doc.features.iter().enumerate() {
        match library::feature(id) {
            Some(f) => features.push(f),
            None => errors.push((
                format!("/features/{i}"),
                format!(
                    "unknown feature `{id}` (known: {})",
                    library::feature_ids().join(", ")
                ),
            )),
        }
    }
    assess::check_declared(&doc.assessments, &mut errors);
    let mut expander = expand::Expander {
        routines,
        bindings: doc
            .extension_points
            .iter()
            .filter_map(|p| p.default.clone().map(|d| (p.slot_id.clone(), d)))
            .collect(),
        errors: Vec::new(),
        in_routine: false,
        produced: 0,
    };
    doc.steps = expander.steps("/steps", &doc.steps);
    errors.append(&mut expander.errors);
    let blocks = flow::compile_steps(&doc, features, &mut errors);
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

#[cfg(test)]
mod tests;
