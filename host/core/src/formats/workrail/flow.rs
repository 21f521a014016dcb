//! Steps to blocks: each standard step an external block, guards before
//! conditional steps, loop heads before their bodies, chained in order.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::assess::{self, Consequence};
use super::contracts;
use super::prompt::{self, Scope};
use super::{Document, FunctionDefinition, WorkRailError};
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
    #[serde(default)]
    pub assessment_refs: Vec<String>,
    #[serde(default)]
    pub assessment_consequences: Vec<Consequence>,
    // Expanded before the steps become blocks (`super::expand`).
    #[serde(default, rename = "templateCall")]
    pub template_call: Option<Value>,
    #[serde(default, rename = "audit")]
    _audit: Option<Value>,
    #[serde(default, rename = "verification")]
    _verification: Option<Value>,
}

/// A parallel step: one step whose prompt asks the agent to start the
/// delegations as subagents of its own (WorkRail does not fan out).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ParallelStep {
    id: String,
    #[serde(rename = "type")]
    _kind: String,
    title: String,
    parallel_delegations: Vec<Delegation>,
    #[serde(default)]
    require_confirmation: Option<Value>,
    #[serde(default)]
    run_condition: Option<Value>,
    #[serde(default)]
    notes_optional: Option<bool>,
    // Expanded into a `<id>__synthesis` step (`super::expand`).
    #[serde(default, rename = "synthesis")]
    _synthesis: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Delegation {
    workflow_id: String,
    #[serde(default)]
    goal: Option<String>,
    #[serde(default)]
    run_condition: Option<Value>,
    #[serde(default)]
    context_mapping: BTreeMap<String, String>,
    #[serde(default)]
    args: BTreeMap<String, String>,
    #[serde(default)]
    model_tier: Option<String>,
    #[serde(default)]
    allowed_tools: Vec<String>,
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

/// An external block about to be added.
struct External {
    block_id: String,
    config: Map<String, Value>,
    task: String,
    schema: Option<Value>,
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
    features: Vec<&'static super::library::Feature>,
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
    let scope = Scope::workflow(&doc.function_definitions, features);
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
            Some("parallel") => self.parallel_step(at, step, next),
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

    /// Whether step `id` makes a block of its own: a well-formed id not
    /// used yet. A step a routine added (`caller.step`) or a virtual step
    /// (`step__audit`) has a block too ([`block_name`]).
    fn block_id(&mut self, at: &str, id: &str) -> bool {
        let well_formed = id.len() <= 160
            && !id.is_empty()
            && id.chars().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.')
            });
        if !well_formed {
            self.error(
                format!("{at}/id"),
                format!("step id `{id}` must be 1 to 64 of a-z, 0-9 and `-`"),
            );
            return false;
        }
        if self.blocks.contains_key(&block_name(id)) {
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
        if step.template_call.is_some() {
            // Left by an expansion that failed (its error is reported).
            return None;
        }
        if !self.block_id(at, &step.id) {
            return None;
        }
        let block_id = block_name(&step.id);
        let contract = self.output_contract(at, &step);
        let assessed = assess::for_step(at, &step, &self.doc.assessments, self.errors);
        let mut extra = Vec::new();
        if let Some((contract, required, _)) = &contract {
            extra.push(contracts::prompt_section(contract, *required));
        }
        if let Some(assessed) = &assessed {
            extra.push(assessed.prompt.clone());
        }
        let shown = match prompt::step_prompt(at, &step, scope, &extra) {
            Ok(shown) => shown,
            Err((where_, why)) => {
                self.error(where_, why);
                return None;
            }
        };
        let mut config = Map::new();
        config.insert("step_id".into(), step.id.clone().into());
        config.insert("title".into(), prompt::templated(&step.title).into());
        if let Some(confirm) = self.confirmation(at, step.require_confirmation.as_ref()) {
            config.insert("require_confirmation".into(), confirm);
        }
        // A step bound to an output contract needs no notes (WorkRail).
        let notes_optional = step.notes_optional.unwrap_or(false) || contract.is_some();
        config.insert("notes_required".into(), (!notes_optional).into());
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
        if !shown.fragments.is_empty() {
            config.insert("prompt_fragments".into(), shown.fragments.into());
        }
        if let Some(assessed) = assessed {
            config.insert("assessments".into(), assessed.config);
        }
        if let Some((contract, required, _)) = &contract {
            config.insert(
                "output_contract".into(),
                json!({"contractRef": contract, "kind": contracts::artifact_kind(contract), "required": required}),
            );
        }
        self.workflow_facts(&mut config);
        let schema = contract.and_then(|(_, _, schema)| schema);
        let external = External {
            block_id,
            config,
            task: shown.text,
            schema,
        };
        Some(self.external(at, external, step.run_condition.as_ref(), next))
    }

    /// An external block, behind its `runCondition`'s guard; returns the
    /// block to enter.
    fn external(
        &mut self,
        at: &str,
        external: External,
        run_condition: Option<&Value>,
        next: Option<&str>,
    ) -> String {
        let External {
            block_id,
            config,
            task,
            schema,
        } = external;
        let mut block = json!({
            "worker": crate::manifest::EXTERNAL_WORKER,
            "config": config,
            "prompt": {"task": task},
            "transitions": [transition("SIGNAL:SUCCESS", next)],
        });
        if let Some(schema) = schema {
            block["validation_schema"] = schema;
        }
        self.blocks.insert(block_id.clone(), block);
        self.guarded(at, &block_id, run_condition, block_id.clone(), next)
    }

    /// The step's output contract, checked: (contractRef, required, the
    /// output's schema when the artifact is required or may be given).
    fn output_contract(&mut self, at: &str, step: &Step) -> Option<(String, bool, Option<Value>)> {
        let contract = step.output_contract.as_ref()?;
        let required = contract.required != Some(false);
        match contracts::output_schema(&contract.contract_ref, required) {
            Some(schema) => Some((contract.contract_ref.clone(), required, Some(schema))),
            None => {
                self.error(
                    format!("{at}/outputContract/contractRef"),
                    format!(
                        "unknown output contract `{}` (known: {})",
                        contract.contract_ref,
                        contracts::CONTRACTS.join(", ")
                    ),
                );
                None
            }
        }
    }

    /// What every external block of the workflow carries for the client:
    /// the workflow's references.
    fn workflow_facts(&self, config: &mut Map<String, Value>) {
        if !self.doc.references.is_empty() {
            config.insert(
                "workflow_references".into(),
                Value::Array(self.doc.references.clone()),
            );
        }
    }

    /// A parallel step: an external block whose prompt lists the
    /// delegations whose `runCondition` holds when it is shown.
    fn parallel_step(&mut self, at: &str, value: &Value, next: Option<&str>) -> Option<String> {
        let step: ParallelStep = self.parse(at, value)?;
        if !self.block_id(at, &step.id) {
            return None;
        }
        let block_id = block_name(&step.id);
        let mut conditions = Vec::new();
        for (i, d) in step.parallel_delegations.iter().enumerate() {
            if let Some(c) = &d.run_condition {
                if !self.condition(&format!("{at}/parallelDelegations/{i}/runCondition"), c) {
                    return None;
                }
                conditions.push(c.clone());
            }
        }
        let fragments = parallel_fragments(&step.parallel_delegations);
        let mut config = Map::new();
        config.insert("step_id".into(), step.id.clone().into());
        config.insert("title".into(), prompt::templated(&step.title).into());
        if let Some(confirm) = self.confirmation(at, step.require_confirmation.as_ref()) {
            config.insert("require_confirmation".into(), confirm);
        }
        config.insert(
            "notes_required".into(),
            (!step.notes_optional.unwrap_or(false)).into(),
        );
        config.insert("prompt_fragments".into(), fragments.into());
        self.workflow_facts(&mut config);
        let external = External {
            block_id,
            config,
            task: "# Parallel Subagents".into(),
            schema: None,
        };
        Some(self.external(at, external, step.run_condition.as_ref(), next))
    }

    /// `requireConfirmation` as block config: a boolean, or a condition
    /// over the inputs.
    fn confirmation(&mut self, at: &str, rule: Option<&Value>) -> Option<Value> {
        let rule = rule?;
        let at = format!("{at}/requireConfirmation");
        match rule {
            Value::Bool(_) => Some(rule.clone()),
            // `{kind, condition?}`: who confirms is the client's business;
            // whether is the condition's (true without one).
            Value::Object(map) if map.contains_key("kind") => match map.get("condition") {
                Some(condition) => self
                    .condition(&format!("{at}/condition"), condition)
                    .then(|| condition.clone()),
                None => Some(Value::Bool(true)),
            },
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
        let head = block_name(&step.id);
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
        self.blocks.insert(head.clone(), Value::Null);
        let iteration_var = step
            .config
            .iteration_var
            .as_deref()
            .unwrap_or("currentIteration");
        let inner = scope.enter_loop(&step.id, &step.function_definitions, iteration_var);
        let body = self.body_steps(at, &value["body"])?;
        let first = self.sequence(&body, Some(&head), &inner);
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
            .map(|id| format!("main.{}", block_name(id)))
            .collect();
        let config = self.loop_spec(at, &step, deciders)?;
        self.blocks.insert(
            head.clone(),
            json!({
                "worker": crate::control::LOOP_WORKER,
                "config": config,
                "transitions": [
                    transition(crate::control::ENTER, Some(&first)),
                    transition(crate::control::EXIT, next),
                ],
            }),
        );
        Some(self.guarded(at, &head, step.run_condition.as_ref(), head.clone(), next))
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

/// The block of step `id`: the id itself, with the `.` of a step a
/// routine added (`caller.step`) written `--`.
pub(super) fn block_name(id: &str) -> String {
    id.replace('.', "--")
}

/// The prompt fragments of a parallel step: a header and the procedure
/// when a delegation is active, one fragment per delegation (under its
/// `runCondition`), and a note when none is.
fn parallel_fragments(delegations: &[Delegation]) -> Vec<Value> {
    let conditions: Vec<Value> = delegations
        .iter()
        .map(|d| d.run_condition.clone().unwrap_or(json!({"and": []})))
        .collect();
    let any = json!({"or": conditions});
    let mut out = vec![json!({
        "when": any,
        "text": "Start the subagents below at the same time, each with your client's own subagent tool (for instance one that opens a fresh `start_workflow` session per subagent).\n\n### Delegations",
    })];
    for (i, d) in delegations.iter().enumerate() {
        let mut text = format!(
            "#### Subagent {}: {}\n- Workflow to start: `{}`\n- Goal: {}",
            i + 1,
            d.workflow_id,
            d.workflow_id,
            d.goal
                .clone()
                .unwrap_or_else(|| match d.args.get("familyName") {
                    Some(family) => format!(
                        "Run the {family} review family of workflow {}",
                        d.workflow_id
                    ),
                    None => format!("Run {}", d.workflow_id),
                })
        );
        if let Some(tier) = &d.model_tier {
            text.push_str(&format!("\n- Model tier: {tier}"));
        }
        if !d.allowed_tools.is_empty() {
            text.push_str(&format!(
                "\n- Allowed tools: {}",
                d.allowed_tools.join(", ")
            ));
        }
        let mut inputs: Vec<String> = d
            .context_mapping
            .iter()
            .filter(|(_, child)| !d.args.contains_key(*child))
            .map(|(parent, child)| {
                format!(
                    "  - `{child}`: `{}`",
                    prompt::templated(&format!("{{{{{parent}}}}}"))
                )
            })
            .collect();
        inputs.extend(d.args.iter().map(|(k, v)| format!("  - `{k}`: `{v}`")));
        if inputs.is_empty() {
            text.push_str("\n- Inputs: none");
        } else {
            text.push_str(&format!("\n- Inputs:\n{}", inputs.join("\n")));
        }
        let mut fragment = json!({"text": text});
        if let Some(c) = &d.run_condition {
            fragment["when"] = c.clone();
        }
        out.push(fragment);
    }
    out.push(json!({
        "when": any,
        "text": "### Procedure\n1. Start the subagents above in parallel.\n2. Wait until every one has finished and written what it found.\n3. Check that every deliverable exists, then advance this step with your notes.",
    }));
    out.push(json!({
        "when": {"not": any},
        "text": "No delegation's condition holds: there is no subagent to start. Advance this step now.",
    }));
    out
}
