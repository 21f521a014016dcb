//! What a client's output for an external block must be, and why it is
//! not accepted: every reason at once, as the blockers of a `blocked`
//! reply (the run does not move; the client sends the step again).
//!
//! In the order WorkRail reports them: the step's output contract or
//! schema (`MISSING_REQUIRED_OUTPUT` when the contract's artifact is not
//! there, `INVALID_REQUIRED_OUTPUT` when it or the output does not
//! satisfy it), the assessments it asks for (`INVALID_REQUIRED_OUTPUT`
//! for `wr.contracts.assessment`), its notes (`MISSING_REQUIRED_NOTES`;
//! `INVALID_REQUIRED_OUTPUT` when they fail the validation criteria),
//! then the follow-ups an assessment's consequences require
//! (`ASSESSMENT_FOLLOWUP_REQUIRED`).

use serde_json::{Map, Value, json};
use wfhost_core::control::criteria::Criteria;
use wfhost_core::manifest::Block;
use wfhost_core::run::validation::OutputSchema;

use crate::error::ToolError;
use crate::reply::{Blocker, Blockers, Followup, StepReply, Validation};

/// Why an output was not accepted.
#[derive(Debug, Default)]
pub struct Blocked {
    pub blockers: Vec<Blocker>,
    pub validation: Validation,
    /// When the first reason is an assessment's consequence.
    pub followup: Option<Followup>,
}

impl StepReply {
    /// This reply (where the run rests: the same step and tokens) as the
    /// answer to an output that was not accepted.
    pub(crate) fn blocked(mut self, blocked: Blocked) -> StepReply {
        self.kind = "blocked".into();
        self.retryable = Some(true);
        self.retry_continue_token = self.continue_token.clone();
        self.blockers = Some(Blockers {
            blockers: blocked.blockers,
        });
        self.validation = Some(blocked.validation);
        self.assessment_followup = blocked.followup;
        self
    }
}

/// The output accepted: the block's structured output (JSON text).
pub type Accepted = Option<String>;

/// Check `data` (the output without notes and signal) and `notes` against
/// what `block` (step `step_id`) asks for, under the merged inputs.
pub fn check(
    block: &Block,
    step_id: &str,
    data: Map<String, Value>,
    notes: Option<&str>,
    inputs: &Map<String, Value>,
) -> Result<Result<Accepted, Blocked>, ToolError> {
    let mut blocked = Blocked::default();
    let artifacts: Vec<Value> = data
        .get("artifacts")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let structured = match &block.validation_schema {
        Some(schema) => {
            let text = Value::Object(data).to_string();
            let compiled = OutputSchema::compile(schema).map_err(ToolError::internal)?;
            match compiled.check(&text) {
                Ok(clean) => Some(clean.to_string()),
                Err(failure) => {
                    schema_blocker(block, step_id, &artifacts, failure.0, &mut blocked);
                    None
                }
            }
        }
        None if data.is_empty() => None,
        None => Some(Value::Object(data).to_string()),
    };
    let followups = assessments(block, &artifacts, &mut blocked);
    notes_blockers(block, step_id, notes, inputs, &mut blocked)?;
    for (i, (title, guidance)) in followups.into_iter().enumerate() {
        if i == 0 && blocked.blockers.is_empty() {
            blocked.followup = Some(Followup {
                title: title.clone(),
                guidance: guidance.clone(),
            });
        }
        blocked.blockers.push(Blocker {
            code: "ASSESSMENT_FOLLOWUP_REQUIRED".into(),
            pointer: json!({"kind": "assessment_dimension", "followup": title}),
            message: format!("Follow-up required before this step can go on: {title}."),
            suggested_fix: format!(
                "Stay on this step, do this follow-up, and send the step again with the updated output: {guidance}"
            ),
        });
    }
    if blocked.blockers.is_empty() {
        return Ok(Ok(structured));
    }
    if blocked.validation.suggestions.is_empty() && !blocked.validation.issues.is_empty() {
        blocked.validation.suggestions.push(
            "Send the step again with output that satisfies what the prompt asks for.".into(),
        );
    }
    Ok(Err(blocked))
}

/// The blocker of an output that fails the block's schema: its contract's
/// artifact missing or invalid, or (no contract) the output invalid.
fn schema_blocker(
    block: &Block,
    step_id: &str,
    artifacts: &[Value],
    errors: Vec<String>,
    blocked: &mut Blocked,
) {
    let contract = block.config.get("output_contract");
    let text = |key: &str| {
        contract
            .and_then(|c| c.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (contract_ref, kind) = (text("contractRef"), text("kind"));
    let kinds: Vec<&str> = artifacts
        .iter()
        .filter_map(|a| a.get("kind").and_then(Value::as_str))
        .collect();
    let blocker = if contract.is_none() {
        Blocker {
            code: "INVALID_REQUIRED_OUTPUT".into(),
            pointer: json!({"kind": "workflow_step", "stepId": step_id}),
            message: "The output does not satisfy the step's output schema.".into(),
            suggested_fix: "Fix the output so that it satisfies pending.outputSchema, and send the step again with the same tokens.".into(),
        }
    } else if !kinds.contains(&kind.as_str()) {
        Blocker {
            code: "MISSING_REQUIRED_OUTPUT".into(),
            pointer: json!({"kind": "output_contract", "contractRef": contract_ref}),
            message: if kinds.is_empty() {
                format!(
                    "output.artifacts holds no artifact; this step requires contractRef={contract_ref}."
                )
            } else {
                format!(
                    "You sent artifacts of kind {}, but this step requires contractRef={contract_ref}.",
                    kinds
                        .iter()
                        .map(|k| format!("'{k}'"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            suggested_fix: format!(
                "Send an artifact with \"kind\": \"{kind}\" in `output.artifacts`, as the step's prompt shows, with the same tokens."
            ),
        }
    } else {
        Blocker {
            code: "INVALID_REQUIRED_OUTPUT".into(),
            pointer: json!({"kind": "output_contract", "contractRef": contract_ref}),
            message: format!("Invalid output for contractRef={contract_ref}."),
            suggested_fix: format!(
                "Fix the \"{kind}\" artifact as the issues say and send it again in `output.artifacts`, with the same tokens."
            ),
        }
    };
    blocked.blockers.push(blocker);
    blocked.validation.issues.extend(errors);
}

/// Check the step's assessments; the follow-ups their consequences
/// require once they are valid.
fn assessments(block: &Block, artifacts: &[Value], blocked: &mut Blocked) -> Vec<(String, String)> {
    let Some(config) = block.config.get("assessments") else {
        return Vec::new();
    };
    let checked = wfhost_core::formats::workrail::check_assessments(config, artifacts);
    if !checked.issues.is_empty() {
        blocked.blockers.push(Blocker {
            code: "INVALID_REQUIRED_OUTPUT".into(),
            pointer: json!({"kind": "output_contract", "contractRef": "wr.contracts.assessment"}),
            message: "The assessment this step asks for is missing or does not match its declaration.".into(),
            suggested_fix: "Send a \"wr.assessment\" artifact in `output.artifacts` with a declared level for every dimension, as the step's prompt shows.".into(),
        });
        blocked.validation.issues.extend(checked.issues);
    }
    checked.followups
}

/// The notes the block needs: present when `config.notes_required` (a
/// WorkRail step without `notesOptional`), and satisfying
/// `config.validation_criteria` under the merged inputs.
fn notes_blockers(
    block: &Block,
    step_id: &str,
    notes: Option<&str>,
    inputs: &Map<String, Value>,
    blocked: &mut Blocked,
) -> Result<(), ToolError> {
    let notes = notes.unwrap_or_default();
    let required = block.config.get("notes_required").and_then(Value::as_bool) == Some(true);
    if required && notes.trim().is_empty() {
        blocked.blockers.push(Blocker {
            code: "MISSING_REQUIRED_NOTES".into(),
            pointer: json!({"kind": "workflow_step", "stepId": step_id}),
            message: format!("Step \"{step_id}\" needs notes on what you did (output.notesMarkdown)."),
            suggested_fix: "Add output.notesMarkdown: what you did, the decisions and their reasons, what you produced (files, paths, numbers) and anything notable, in Markdown; then send the step again with the same tokens.".into(),
        });
        return Ok(());
    }
    let Some(criteria) = block.config.get("validation_criteria") else {
        return Ok(());
    };
    let criteria = Criteria::parse(criteria)
        .map_err(|(at, why)| ToolError::internal(format!("validationCriteria{at}: {why}")))?;
    let failures = criteria.failures(notes, inputs);
    if !failures.is_empty() {
        blocked.blockers.push(Blocker {
            code: "INVALID_REQUIRED_OUTPUT".into(),
            pointer: json!({"kind": "workflow_step", "stepId": step_id}),
            message: "The notes do not meet the step's validation criteria.".into(),
            suggested_fix: "Revise output.notesMarkdown to meet every criterion the issues name, and send the step again with the same tokens.".into(),
        });
        blocked.validation.issues.extend(failures);
    }
    Ok(())
}
