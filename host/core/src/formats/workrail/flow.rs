//! Steps to blocks: each standard step an external block, guards before
//! conditional steps, loop heads before their bodies, chained in order.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::prompt::{self, Scope};
use super::{Document, FunctionDefinition, WorkRailError, unsupported};
use crate::control::condition::Condition;
use crate::control::loops::LOOP_CONTROL_KIND;

/// The one output contract wfhost knows.
pub const LOOP_CONTROL_CONTRACT: &str = "wr.contracts.loop_control";

/// A standard step.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Step {
    pub id: String,
    #[serde(default, rename = "type")]
    _kind: Option<String>,
    pub title: String,
    #[serde(default)]
    pub prompt: Option<String>,
    #[serde(default)]
    pub prompt_blocks: Option<Value>,
    #[serde(default)]
    pub agent_role: Option<String>,
    #[serde(default)]
    pub model_tier: Option<Value>,
    #[serde(default)]
    pub guidance: Vec<String>,
    #[serde(default)]
    pub ask_for_files: Option<bool>,
    #[serde(default, rename = "hasValidation")]
    _has_validation: Option<bool>,
    #[serde(default)]
    pub require_confirmation: Option<Value>,
    #[serde(default)]
    pub run_condition: Option<Value>,
    #[serde(default)]
    pub validation_criteria: Option<Value>,
    #[serde(default)]
    pub output_contract: Option<OutputContract>,
    #[serde(default)]
    pub notes_optional: Option<bool>,
    #[serde(default)]
    pub function_definitions: Vec<FunctionDefinition>,
    #[serde(default)]
    pub function_calls: Vec<FunctionCall>,
    #[serde(default)]
    pub function_references: Option<Vec<String>>,
    #[serde(default)]
    pub prompt_fragments: Vec<PromptFragment>,
    // Refused.
    #[serde(default)]
    assessment_refs: Option<Value>,
    #[serde(default)]
    assessment_consequences: Option<Value>,
    #[serde(default)]
    template_call: Option<Value>,
    #[serde(default)]
    audit: Option<Value>,
    #[serde(default)]
    verification: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct OutputContract {
    contract_ref: String,
    #[serde(default)]
    required: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FunctionCall {
    pub name: String,
    #[serde(default)]
    pub args: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PromptFragment {
    #[serde(rename = "id")]
    _id: String,
    #[serde(default)]
    pub when: Option<Value>,
    pub text: String,
}

/// A loop step.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct LoopStep {
    id: String,
    #[serde(rename = "type")]
    _kind: String,
    #[serde(rename = "title")]
    _title: String,
    #[serde(rename = "loop")]
    config: LoopConfig,
    #[serde(rename = "body")]
    _body: Value,
    #[serde(default)]
    function_definitions: Vec<FunctionDefinition>,
    #[serde(default)]
    require_confirmation: Option<Value>,
    #[serde(default)]
    run_condition: Option<Value>,
    #[serde(default, rename = "notesOptional")]
    _notes_optional: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct LoopConfig {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default = "default_max_iterations")]
    max_iterations: u32,
    #[serde(default)]
    condition: Option<Value>,
    #[serde(default)]
    condition_source: Option<Value>,
    #[serde(default)]
    count: Option<Value>,
    #[serde(default)]
    items: Option<String>,
    #[serde(default)]
    iteration_var: Option<String>,
    #[serde(default)]
    item_var: Option<String>,
    #[serde(default)]
    index_var: Option<String>,
}

fn default_max_iterations() -> u32 {
    100
}

/// What the blocks are built into, and the errors found on the way.
struct Builder<'d> {
    doc: &'d Document,
    blocks: Map<String, Value>,
    errors: &'d mut Vec<WorkRailError>,
    /// Top-level steps used as a loop's body (by id): not run at top level.
    bodies: BTreeSet<String>,
}

/// A block's address to jump to, or the end of the run.
fn goto(next: Option<&str>) -> String {
    next.map_or_else(|| "END".to_string(), |b| format!("JUMP:{b}"))
}

fn transition(signal: &str, next: Option<&str>) -> Value {
    json!({"on_signal": signal, "action": goto(next)})
}

/// The blocks of the workflow's steps and the entry block; None when
/// there are no steps.
pub(super) fn compile_steps(
    doc: &Document,
    errors: &mut Vec<WorkRailError>,
) -> Option<(String, Map<String, Value>)> {
    let mut b = Builder {
        doc,
        blocks: Map::new(),
        errors,
        bodies: BTreeSet::new(),
    };
    for step in &doc.steps {
        if step.get("type").and_then(Value::as_str) == Some("loop")
            && let Some(Value::String(id)) = step.get("body")
        {
            b.bodies.insert(id.clone());
        }
    }
    let top: Vec<(String, &Value)> = doc
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            let id = s.get("id").and_then(Value::as_str).unwrap_or_default();
            !b.bodies.contains(id)
        })
        .map(|(i, s)| (format!("/steps/{i}"), s))
        .collect();
    if !b.unique_ids() {
        return None;
    }
    let scope = Scope::workflow(&doc.function_definitions);
    let entry = b.sequence(&top, None, &scope);
    entry.map(|e| (e, b.blocks))
}

impl<'d> Builder<'d> {
    fn error(&mut self, at: String, message: impl Into<String>) {
        self.errors.push((at, message.into()));
    }

    /// The steps in order, the last leading to `after` (None: the end).
    /// Returns the first block.
    fn sequence(
        &mut self,
        steps: &[(String, &'d Value)],
        after: Option<&str>,
        scope: &Scope,
    ) -> Option<String> {
        let mut next = after.map(str::to_string);
        for (at, step) in steps.iter().rev() {
            next = self.step(at, step, next.as_deref(), scope).or(next);
        }
        next
    }

    /// One step; returns its first block (None when it was refused).
    fn step(
        &mut self,
        at: &str,
        step: &'d Value,
        next: Option<&str>,
        scope: &Scope,
    ) -> Option<String> {
        match step.get("type").and_then(Value::as_str) {
            Some("loop") => self.loop_step(at, step, next, scope),
            Some("parallel") => {
                self.error(format!("{at}/type"), unsupported("parallel"));
                None
            }
            Some(other) if other != "standard" => {
                self.error(
                    format!("{at}/type"),
                    format!("unknown step type `{other}` (expected loop, parallel or none)"),
                );
                None
            }
            _ => self.standard_step(at, step, next, scope),
        }
    }

    fn parse<T: for<'de> Deserialize<'de>>(&mut self, at: &str, value: &Value) -> Option<T> {
        match serde_path_to_error::deserialize(value) {
            Ok(v) => Some(v),
            Err(e) => {
                let inner = crate::json_pointer::of_path(e.path());
                self.error(format!("{at}{inner}"), e.into_inner().to_string());
                None
            }
        }
    }

    /// Every step id (inline loop bodies too) is used once; a repeat is
    /// named where it repeats.
    fn unique_ids(&mut self) -> bool {
        let mut seen = BTreeSet::new();
        let mut steps: Vec<(String, &Value)> = Vec::new();
        for (i, step) in self.doc.steps.iter().enumerate() {
            steps.push((format!("/steps/{i}"), step));
            if let Some(Value::Array(body)) = step.get("body") {
                for (j, inner) in body.iter().enumerate() {
                    steps.push((format!("/steps/{i}/body/{j}"), inner));
                }
            }
        }
        let mut unique = true;
        for (at, step) in steps {
            if let Some(id) = step.get("id").and_then(Value::as_str)
                && !seen.insert(id)
            {
                self.error(format!("{at}/id"), format!("step id `{id}` is used twice"));
                unique = false;
            }
        }
        unique
    }

    fn block_id(&mut self, at: &str, id: &str) -> bool {
        let well_formed = id.len() <= 64
            && !id.is_empty()
            && id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !well_formed {
            self.error(
                format!("{at}/id"),
                format!("step id `{id}` must be 1 to 64 of a-z, 0-9 and `-`"),
            );
            return false;
        }
        if self.blocks.contains_key(id) {
            self.error(format!("{at}/id"), format!("step id `{id}` is used twice"));
            return false;
        }
        true
    }

    fn condition(&mut self, at: &str, value: &Value) -> bool {
        match Condition::parse(value) {
            Ok(_) => true,
            Err((inner, why)) => {
                self.error(format!("{at}{inner}"), why);
                false
            }
        }
    }

    /// A guard before `first` when `condition` is given: the block to enter.
    fn guarded(
        &mut self,
        at: &str,
        id: &str,
        condition: Option<&Value>,
        first: String,
        next: Option<&str>,
    ) -> String {
        let Some(condition) = condition else {
            return first;
        };
        if !self.condition(&format!("{at}/runCondition"), condition) {
            return first;
        }
        let guard = format!("{id}_when");
        self.blocks.insert(
            guard.clone(),
            json!({
                "worker": crate::control::WHEN_WORKER,
                "config": {"condition": condition},
                "transitions": [
                    transition(crate::control::TRUE, Some(&first)),
                    transition(crate::control::FALSE, next),
                ],
            }),
        );
        guard
    }

    fn standard_step(
        &mut self,
        at: &str,
        value: &Value,
        next: Option<&str>,
        scope: &Scope,
    ) -> Option<String> {
        let step: Step = self.parse(at, value)?;
        for (key, present) in [
            ("assessmentRefs", step.assessment_refs.is_some()),
            (
                "assessmentConsequences",
                step.assessment_consequences.is_some(),
            ),
            ("templateCall", step.template_call.is_some()),
            ("audit", step.audit.is_some()),
            ("verification", step.verification.is_some()),
        ] {
            if present {
                self.error(format!("{at}/{key}"), unsupported(key));
            }
        }
        if !self.block_id(at, &step.id) {
            return None;
        }
        let task = match prompt::step_prompt(at, &step, scope) {
            Ok(task) => task,
            Err((where_, why)) => {
                self.error(where_, why);
                return None;
            }
        };
        let mut config = Map::new();
        config.insert("title".into(), step.title.clone().into());
        if let Some(confirm) = self.confirmation(at, step.require_confirmation.as_ref()) {
            config.insert("require_confirmation".into(), confirm);
        }
        config.insert(
            "notes_required".into(),
            (!step.notes_optional.unwrap_or(false)).into(),
        );
        if let Some(criteria) = &step.validation_criteria {
            if let Err((inner, why)) = crate::control::criteria::Criteria::parse(criteria) {
                self.error(format!("{at}/validationCriteria{inner}"), why);
            }
            config.insert("validation_criteria".into(), criteria.clone());
        }
        if let Some(tier) = &step.model_tier {
            config.insert("model_tier".into(), tier.clone());
        }
        if step.ask_for_files == Some(true) {
            config.insert("ask_for_files".into(), true.into());
        }
        let mut block = json!({
            "worker": crate::manifest::EXTERNAL_WORKER,
            "config": config,
            "prompt": {"task": task},
            "transitions": [transition("SIGNAL:SUCCESS", next)],
        });
        if let Some(contract) = &step.output_contract {
            if contract.contract_ref != LOOP_CONTROL_CONTRACT {
                self.error(
                    format!("{at}/outputContract/contractRef"),
                    format!(
                        "unknown output contract `{}` (wfhost knows {LOOP_CONTROL_CONTRACT})",
                        contract.contract_ref
                    ),
                );
            } else if contract.required != Some(false) {
                block["validation_schema"] = loop_control_schema();
            }
        }
        self.blocks.insert(step.id.clone(), block);
        Some(self.guarded(
            at,
            &step.id,
            step.run_condition.as_ref(),
            step.id.clone(),
            next,
        ))
    }

    /// `requireConfirmation` as block config: a boolean, or a condition
    /// over the inputs.
    fn confirmation(&mut self, at: &str, rule: Option<&Value>) -> Option<Value> {
        let rule = rule?;
        let at = format!("{at}/requireConfirmation");
        match rule {
            Value::Bool(_) => Some(rule.clone()),
            Value::Object(map) if map.contains_key("kind") => {
                self.error(
                    format!("{at}/kind"),
                    "confirmation rules with a `kind` (coordinator_eval, human_approval) are not supported: use true, false or a condition",
                );
                None
            }
            _ => self.condition(&at, rule).then(|| rule.clone()),
        }
    }

    fn loop_step(
        &mut self,
        at: &str,
        value: &'d Value,
        next: Option<&str>,
        scope: &Scope,
    ) -> Option<String> {
        let step: LoopStep = self.parse(at, value)?;
        if !self.block_id(at, &step.id) {
            return None;
        }
        if step
            .require_confirmation
            .as_ref()
            .is_some_and(|c| c != &Value::Bool(false))
        {
            self.error(
                format!("{at}/requireConfirmation"),
                "a loop step asks no confirmation: put it on a step of its body",
            );
        }
        // Reserve the head's id before the body is compiled.
        self.blocks.insert(step.id.clone(), Value::Null);
        let iteration_var = step
            .config
            .iteration_var
            .as_deref()
            .unwrap_or("currentIteration");
        let inner = scope.enter_loop(&step.id, &step.function_definitions, iteration_var);
        let body = self.body_steps(at, &value["body"])?;
        let first = self.sequence(&body, Some(&step.id), &inner);
        let Some(first) = first else {
            self.error(
                format!("{at}/body"),
                "a loop needs a body of at least one step",
            );
            return None;
        };
        let deciders: Vec<String> = body
            .iter()
            .filter(|(_, s)| {
                s.pointer("/outputContract/contractRef")
                    .and_then(Value::as_str)
                    == Some(LOOP_CONTROL_CONTRACT)
            })
            .filter_map(|(_, s)| s.get("id").and_then(Value::as_str))
            .map(|id| format!("main.{id}"))
            .collect();
        let config = self.loop_spec(at, &step, deciders)?;
        self.blocks.insert(
            step.id.clone(),
            json!({
                "worker": crate::control::LOOP_WORKER,
                "config": config,
                "transitions": [
                    transition(crate::control::ENTER, Some(&first)),
                    transition(crate::control::EXIT, next),
                ],
            }),
        );
        Some(self.guarded(
            at,
            &step.id,
            step.run_condition.as_ref(),
            step.id.clone(),
            next,
        ))
    }

    /// A loop's body: its inline steps, or the top-level step it names.
    fn body_steps(&mut self, at: &str, body: &'d Value) -> Option<Vec<(String, &'d Value)>> {
        match body {
            Value::Array(steps) => Some(
                steps
                    .iter()
                    .enumerate()
                    .map(|(i, s)| (format!("{at}/body/{i}"), s))
                    .collect(),
            ),
            Value::String(id) => {
                let found = self
                    .doc
                    .steps
                    .iter()
                    .enumerate()
                    .find(|(_, s)| s.get("id").and_then(Value::as_str) == Some(id));
                match found {
                    Some((_, s)) if s.get("type").and_then(Value::as_str) == Some("loop") => {
                        self.error(
                            format!("{at}/body"),
                            format!("the body `{id}` is itself a loop: nest it inline"),
                        );
                        None
                    }
                    Some((i, s)) => Some(vec![(format!("/steps/{i}"), s)]),
                    None => {
                        self.error(
                            format!("{at}/body"),
                            format!("the body names step `{id}`, which does not exist"),
                        );
                        None
                    }
                }
            }
            _ => {
                self.error(
                    format!("{at}/body"),
                    "a loop's body is a step id or a list of steps",
                );
                None
            }
        }
    }

    /// The `wr.loop` config of a loop step.
    fn loop_spec(&mut self, at: &str, step: &LoopStep, deciders: Vec<String>) -> Option<Value> {
        let c = &step.config;
        let at = format!("{at}/loop");
        let kind = match c.kind.as_str() {
            "while" | "until" | "for" | "forEach" => c.kind.clone(),
            other => {
                self.error(
                    format!("{at}/type"),
                    format!("unknown loop type `{other}` (expected while, until, for, forEach)"),
                );
                return None;
            }
        };
        if !(1..=1000).contains(&c.max_iterations) {
            self.error(format!("{at}/maxIterations"), "maxIterations is 1 to 1000");
        }
        let mut spec = json!({
            "loop_id": step.id,
            "kind": kind,
            "max_iterations": c.max_iterations,
            "iteration_var": c.iteration_var.clone().unwrap_or_else(|| "currentIteration".into()),
        });
        match kind.as_str() {
            "for" => spec["count"] = c.count.clone().unwrap_or(Value::Null),
            "forEach" => {
                spec["items"] = c.items.clone().map_or(Value::Null, Value::String);
                spec["item_var"] = c
                    .item_var
                    .clone()
                    .unwrap_or_else(|| "currentItem".into())
                    .into();
                spec["index_var"] = c
                    .index_var
                    .clone()
                    .unwrap_or_else(|| "currentIndex".into())
                    .into();
            }
            _ => self.decided_by(&at, c, deciders, &mut spec)?,
        }
        if let Err((inner, why)) = crate::control::loops::LoopSpec::parse(&spec) {
            let key = inner.trim_start_matches('/');
            let named = match key {
                "count" | "items" | "condition" => format!("{at}/{key}"),
                _ => at.clone(),
            };
            self.error(named, why);
            return None;
        }
        Some(spec)
    }

    /// What decides a while/until loop: an explicit `conditionSource`,
    /// else a body step with the loop-control contract, else `condition`.
    fn decided_by(
        &mut self,
        at: &str,
        c: &LoopConfig,
        deciders: Vec<String>,
        spec: &mut Value,
    ) -> Option<()> {
        let artifact = |loop_id: Option<&str>| json!({"blocks": deciders, "loop_id": loop_id});
        match &c.condition_source {
            Some(source) => match source.get("kind").and_then(Value::as_str) {
                Some("artifact_contract") => {
                    if deciders.is_empty() {
                        self.error(
                            format!("{at}/conditionSource"),
                            format!("the loop is decided by a {LOOP_CONTROL_KIND} artifact, but no step of its body has outputContract {LOOP_CONTROL_CONTRACT}"),
                        );
                        return None;
                    }
                    spec["artifact"] = artifact(source.get("loopId").and_then(Value::as_str));
                }
                Some("context_variable") => {
                    let condition = source.get("condition").cloned().unwrap_or(Value::Null);
                    if !self.condition(&format!("{at}/conditionSource/condition"), &condition) {
                        return None;
                    }
                    spec["condition"] = condition;
                }
                _ => {
                    self.error(
                        format!("{at}/conditionSource/kind"),
                        "conditionSource kind is artifact_contract or context_variable",
                    );
                    return None;
                }
            },
            None if !deciders.is_empty() => spec["artifact"] = artifact(None),
            None => {
                let Some(condition) = &c.condition else {
                    self.error(
                        at.to_string(),
                        "a while/until loop needs a condition or a conditionSource",
                    );
                    return None;
                };
                if !self.condition(&format!("{at}/condition"), condition) {
                    return None;
                }
                spec["condition"] = condition.clone();
            }
        }
        Some(())
    }
}

/// The output schema of a step bound to the loop-control contract: an
/// `artifacts` list with a `wr.loop_control` decision.
fn loop_control_schema() -> Value {
    json!({
        "type": "object",
        "required": ["artifacts"],
        "properties": {"artifacts": {
            "type": "array",
            "contains": {
                "type": "object",
                "required": ["kind", "decision"],
                "properties": {
                    "kind": {"const": LOOP_CONTROL_KIND},
                    "loopId": {"type": "string", "pattern": "^[a-z0-9_-]+$"},
                    "decision": {"enum": ["continue", "stop"]},
                },
            },
        }},
    })
}
