//! The compile-time rewriting of a WorkRail workflow's steps, before they
//! become blocks:
//!
//! - a step with a `templateCall` of `wr.templates.routine.<name>` is
//!   replaced by the steps of that routine (a WorkRail workflow whose id
//!   is `wr.routine-<name>` or `routine-<name>`, found by a
//!   [`Routines`]), each named `<caller>.<routine step>`, its `{arg}`
//!   placeholders in `prompt` and `title` replaced by the call's `args`,
//!   the routine's `metaGuidance` added to its guidance and the caller's
//!   `runCondition` given to those without one;
//! - a step with `verification`, `audit` (or a parallel step with
//!   `synthesis`) is followed by a step `<step>__verification`,
//!   `<step>__audit` (`<step>__synthesis`) that asks for it;
//! - `{{wr.bindings.<slot>}}` in a prompt becomes the default of the
//!   workflow's extension point `<slot>`.
//!
//! Inline loop bodies are rewritten the same way. Errors name the JSON
//! pointer of the construct in the original file.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::WorkRailError;

/// Where routines come from: WorkRail workflows by id.
pub trait Routines {
    /// The routine workflow registered as `wr.templates.routine.<name>`.
    fn routine(&self, name: &str) -> Option<Value>;
    /// The names of the routines there are, for an error message.
    fn names(&self) -> Vec<String>;
}

/// No routines.
pub struct NoRoutines;

impl Routines for NoRoutines {
    fn routine(&self, _: &str) -> Option<Value> {
        None
    }
    fn names(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The template id prefix of routines.
pub const ROUTINE_TEMPLATE: &str = "wr.templates.routine.";

/// The routine name a workflow id registers, if it is a routine's.
pub fn routine_name(workflow_id: &str) -> Option<&str> {
    workflow_id
        .strip_prefix("wr.routine-")
        .or_else(|| workflow_id.strip_prefix("routine-"))
}

/// The most steps a workflow may have once its templates are expanded.
pub const MAX_EXPANDED_STEPS: usize = 10_000;

/// The rewriting's context.
pub(super) struct Expander<'a> {
    pub routines: &'a dyn Routines,
    /// Extension point slot → its default.
    pub bindings: BTreeMap<String, String>,
    pub errors: Vec<WorkRailError>,
    /// Inside a routine's steps: a template call there is refused
    /// (routines do not nest).
    pub in_routine: bool,
    /// Steps produced so far (bounded by [`MAX_EXPANDED_STEPS`]).
    pub produced: usize,
}

impl Expander<'_> {
    /// `steps` (at JSON pointer `at`) rewritten.
    pub fn steps(&mut self, at: &str, steps: &[Value]) -> Vec<Value> {
        let mut out = Vec::with_capacity(steps.len());
        for (i, step) in steps.iter().enumerate() {
            let here = format!("{at}/{i}");
            self.produced += 1;
            if self.produced > MAX_EXPANDED_STEPS {
                self.errors.push((
                    here,
                    format!("the workflow has more than {MAX_EXPANDED_STEPS} steps once its templates are expanded"),
                ));
                return out;
            }
            let mut step = step.clone();
            if let Some(Value::Array(body)) = step.get("body") {
                let body = self.steps(&format!("{here}/body"), body);
                step["body"] = Value::Array(body);
            }
            self.bind(&here, &mut step);
            match step.get("templateCall") {
                Some(_) if self.in_routine => {
                    self.errors.push((
                        format!("{here}/templateCall"),
                        "a routine's step calls a template: routines do not nest".into(),
                    ));
                }
                Some(call) => {
                    let call = call.clone();
                    let routine_steps = self.template(&here, &step, &call);
                    // The routine's steps get their own virtual steps,
                    // inline bodies and bindings; a template call among
                    // them is refused.
                    self.in_routine = true;
                    out.extend(self.steps(&here, &routine_steps));
                    self.in_routine = false;
                }
                None => {
                    let virtual_steps = self.virtual_steps(&step);
                    out.push(step);
                    out.extend(virtual_steps);
                }
            }
        }
        out
    }

    /// `{{wr.bindings.<slot>}}` in the step's prompt texts replaced.
    fn bind(&mut self, at: &str, step: &mut Value) {
        let mut missing = Vec::new();
        let bindings = &self.bindings;
        visit_texts(step, &mut |text: &mut String| {
            while let Some(start) = text.find("{{wr.bindings.") {
                let rest = &text[start + "{{wr.bindings.".len()..];
                let Some(end) = rest.find("}}") else { break };
                let slot = rest[..end].to_string();
                match bindings.get(&slot) {
                    Some(value) => {
                        text.replace_range(start..start + "{{wr.bindings.".len() + end + 2, value)
                    }
                    None => {
                        missing.push(slot);
                        break;
                    }
                }
            }
        });
        for slot in missing {
            self.errors.push((
                at.to_string(),
                format!(
                    "`{{{{wr.bindings.{slot}}}}}` names no extensionPoints slot with a default"
                ),
            ));
        }
    }

    /// The routine steps a `templateCall` stands for.
    fn template(&mut self, at: &str, caller: &Value, call: &Value) -> Vec<Value> {
        let caller_id = caller.get("id").and_then(Value::as_str).unwrap_or("");
        let template = call.get("templateId").and_then(Value::as_str).unwrap_or("");
        let args = call
            .get("args")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let at_call = format!("{at}/templateCall/templateId");
        let Some(name) = template.strip_prefix(ROUTINE_TEMPLATE) else {
            self.errors.push((
                at_call,
                format!(
                    "unknown template `{template}` (templates are {ROUTINE_TEMPLATE}<routine>)"
                ),
            ));
            return Vec::new();
        };
        let Some(routine) = self.routines.routine(name) else {
            let known = self.routines.names();
            self.errors.push((
                at_call,
                format!(
                    "unknown template `{template}`: no routine `{name}` (known: {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ),
            ));
            return Vec::new();
        };
        let guidance: Vec<Value> = routine
            .get("metaGuidance")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let steps = routine
            .get("steps")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut out = Vec::new();
        for step in steps {
            if let Some(step) = self.routine_step(at, caller, &args, &guidance, step) {
                out.push(step);
            }
        }
        if out.is_empty() {
            self.errors.push((
                at.to_string(),
                format!("template `{template}` expands to no steps (step `{caller_id}`)"),
            ));
        }
        out
    }

    /// One step of a routine as the caller's.
    fn routine_step(
        &mut self,
        at: &str,
        caller: &Value,
        args: &Map<String, Value>,
        guidance: &[Value],
        step: Value,
    ) -> Option<Value> {
        let caller_id = caller.get("id").and_then(Value::as_str).unwrap_or("");
        let Value::Object(mut step) = step else {
            return None;
        };
        let own = step
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if step.get("prompt").and_then(Value::as_str).is_none()
            && !step.contains_key("templateCall")
        {
            self.errors.push((
                format!("{at}/templateCall"),
                format!("routine step `{own}` has no `prompt`: a routine's steps are written with `prompt`"),
            ));
            return None;
        }
        step.insert("id".into(), format!("{caller_id}.{own}").into());
        for key in ["prompt", "title"] {
            if let Some(Value::String(text)) = step.get(key) {
                match fill_args(text, args) {
                    Ok(filled) => {
                        step.insert(key.into(), filled.into());
                    }
                    Err(why) => {
                        self.errors.push((
                            format!("{at}/templateCall/args"),
                            format!("routine step `{own}`: {why}"),
                        ));
                        return None;
                    }
                }
            }
        }
        if !guidance.is_empty() {
            let mut all = step
                .get("guidance")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            all.extend(guidance.iter().cloned());
            step.insert("guidance".into(), all.into());
        }
        if let Some(condition) = caller.get("runCondition")
            && !step.contains_key("runCondition")
        {
            step.insert("runCondition".into(), condition.clone());
        }
        Some(Value::Object(step))
    }

    /// The steps that follow `step` for its `verification`, `audit` and
    /// (a parallel step's) `synthesis`.
    fn virtual_steps(&mut self, step: &Value) -> Vec<Value> {
        let id = step.get("id").and_then(Value::as_str).unwrap_or("");
        let title = step.get("title").and_then(Value::as_str).unwrap_or(id);
        let condition = step.get("runCondition").cloned();
        let mut out = Vec::new();
        let mut add = |suffix: &str, heading: &str, prompt: String, contract: Option<&Value>| {
            let mut v = json!({
                "id": format!("{id}__{suffix}"),
                "title": format!("{heading}: {title}"),
                "prompt": prompt,
                "notesOptional": true,
            });
            if let Some(c) = &condition {
                v["runCondition"] = c.clone();
            }
            if let Some(contract) = contract {
                v["outputContract"] = contract.clone();
            }
            out.push(v);
        };
        if let Some(v) = step.get("verification") {
            let prompt = match (text_of(v, "prompt"), text_of(v, "command")) {
                (Some(p), _) => p,
                (None, Some(command)) => format!(
                    "Run this command to check the step's work:\n\n```bash\n{command}\n```\n\nMake sure it succeeds, and report any failure."
                ),
                (None, None) => "Run the checks this workspace has (tests, builds, linters) to confirm the step's changes are complete and correct, and report any failure.".to_string(),
            };
            add("verification", "Verify", prompt, None);
        }
        if let Some(a) = step.get("audit") {
            let mut prompt = text_of(a, "prompt").unwrap_or_else(|| {
                format!("Audit what step '{title}' produced: is it complete, correct and of high quality?")
            });
            if let Some(rubric) = a.get("rubric").and_then(Value::as_array) {
                let items: Vec<String> = rubric
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|r| format!("- {r}"))
                    .collect();
                prompt.push_str(&format!(
                    "\n\nJudge it against this rubric:\n{}",
                    items.join("\n")
                ));
            }
            prompt.push_str("\n\nSay whether the audit passed or what must change.");
            add("audit", "Audit", prompt, None);
        }
        if let Some(s) = step.get("synthesis") {
            let prompt = text_of(s, "prompt").unwrap_or_else(|| {
                "Merge what the parallel subagents produced into one report: resolve their contradictions and keep what holds.".to_string()
            });
            add("synthesis", "Synthesis", prompt, s.get("outputContract"));
        }
        out
    }
}

fn text_of(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

/// A routine text with its `{arg}` placeholders (single braces, not part
/// of a `{{…}}`) replaced by the call's arguments.
fn fill_args(text: &str, args: &Map<String, Value>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut missing = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < text.len() {
        let c = bytes[i];
        let single_open =
            c == b'{' && (i == 0 || bytes[i - 1] != b'{') && bytes.get(i + 1) != Some(&b'{');
        if single_open && let Some(len) = text[i + 1..].find(['{', '}']) {
            let close = i + 1 + len;
            if bytes[close] == b'}' && bytes.get(close + 1) != Some(&b'}') && len > 0 {
                let name = &text[i + 1..close];
                match args.get(name) {
                    Some(Value::String(s)) => out.push_str(s),
                    Some(v @ (Value::Array(_) | Value::Object(_))) => {
                        return Err(format!(
                            "argument `{name}` is {}, not a text, number or boolean",
                            if v.is_array() { "a list" } else { "an object" }
                        ));
                    }
                    Some(other) => out.push_str(&other.to_string()),
                    None => missing.push(name.to_string()),
                }
                i = close + 1;
                continue;
            }
        }
        let ch = text[i..].chars().next().unwrap_or('\0');
        out.push(ch);
        i += ch.len_utf8().max(1);
    }
    if !missing.is_empty() {
        return Err(format!(
            "it uses argument(s) {} that the templateCall's `args` do not give",
            missing
                .iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(out)
}

/// Apply `f` to every prompt text of a step (`prompt`, the texts of
/// `promptBlocks`).
fn visit_texts(step: &mut Value, f: &mut dyn FnMut(&mut String)) {
    if let Some(Value::String(p)) = step.get_mut("prompt") {
        f(p);
    }
    if let Some(blocks) = step.get_mut("promptBlocks") {
        visit_all(blocks, f);
    }
}

fn visit_all(value: &mut Value, f: &mut dyn FnMut(&mut String)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter_mut().for_each(|v| visit_all(v, f)),
        Value::Object(map) => map.values_mut().for_each(|v| visit_all(v, f)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_brace_arguments_are_filled_and_double_braces_kept() {
        let args = json!({"focus": "the API", "n": 3})
            .as_object()
            .unwrap()
            .clone();
        assert_eq!(
            fill_args("Review {focus} ({n} passes); keep {{ticket}}.", &args).unwrap(),
            "Review the API (3 passes); keep {{ticket}}."
        );
        assert!(
            fill_args("{missing} {also}", &args)
                .unwrap_err()
                .contains("`missing`, `also`")
        );
        let list = json!({"x": [1]}).as_object().unwrap().clone();
        assert!(fill_args("{x}", &list).unwrap_err().contains("a list"));
        assert_eq!(fill_args("{} and {", &args).unwrap(), "{} and {");
    }

    struct One;
    impl Routines for One {
        fn routine(&self, name: &str) -> Option<Value> {
            (name == "review").then(|| {
                json!({"id": "wr.routine-review", "metaGuidance": ["be fair"], "steps": [
                    {"id": "look", "title": "Look at {target}", "prompt": "Read {target}."},
                    {"id": "judge", "title": "Judge", "prompt": "Judge it.", "runCondition": {"var": "x"},
                     "audit": {"prompt": "Check the judgment."}}
                ]})
            })
        }
        fn names(&self) -> Vec<String> {
            vec!["review".into()]
        }
    }

    #[test]
    fn a_template_call_becomes_the_routines_steps() {
        let mut e = Expander {
            routines: &One,
            bindings: BTreeMap::new(),
            errors: Vec::new(),
            in_routine: false,
            produced: 0,
        };
        let steps = e.steps("/steps", &[json!({
            "id": "check", "title": "Check",
            "templateCall": {"templateId": "wr.templates.routine.review", "args": {"target": "main.rs"}},
            "runCondition": {"var": "go"}
        })]);
        assert!(e.errors.is_empty(), "{:?}", e.errors);
        assert_eq!(steps.len(), 3);
        assert_eq!(steps[2]["id"], "check.judge__audit");
        assert_eq!(steps[0]["id"], "check.look");
        assert_eq!(steps[0]["title"], "Look at main.rs");
        assert_eq!(steps[0]["prompt"], "Read main.rs.");
        assert_eq!(steps[0]["guidance"], json!(["be fair"]));
        assert_eq!(steps[0]["runCondition"], json!({"var": "go"}));
        assert_eq!(steps[1]["runCondition"], json!({"var": "x"}));
        let unknown = e.steps(
            "/steps",
            &[json!({"id": "c", "title": "C",
            "templateCall": {"templateId": "wr.templates.routine.nope"}})],
        );
        assert!(unknown.is_empty());
        assert!(e.errors[0].1.contains("known: review"), "{:?}", e.errors);
    }

    struct Nesting;
    impl Routines for Nesting {
        fn routine(&self, _: &str) -> Option<Value> {
            Some(json!({"steps": [
                {"id": "a", "title": "A", "prompt": "p"},
                {"id": "b", "title": "B", "templateCall": {"templateId": "wr.templates.routine.x"}}
            ]}))
        }
        fn names(&self) -> Vec<String> {
            vec!["x".into()]
        }
    }

    #[test]
    fn routines_do_not_nest_and_expansion_is_bounded() {
        let mut e = Expander {
            routines: &Nesting,
            bindings: BTreeMap::new(),
            errors: Vec::new(),
            in_routine: false,
            produced: 0,
        };
        let call = json!({"id": "c", "title": "C", "templateCall": {"templateId": "wr.templates.routine.x"}});
        e.steps("/steps", std::slice::from_ref(&call));
        assert!(
            e.errors.iter().any(|(_, m)| m.contains("do not nest")),
            "{:?}",
            e.errors
        );
        let mut e = Expander {
            routines: &NoRoutines,
            bindings: BTreeMap::new(),
            errors: Vec::new(),
            in_routine: false,
            produced: MAX_EXPANDED_STEPS,
        };
        e.steps("/steps", &[json!({"id": "x", "title": "X", "prompt": "p"})]);
        assert!(
            e.errors[0].1.contains("more than 10000 steps"),
            "{:?}",
            e.errors
        );
    }

    #[test]
    fn verification_audit_and_synthesis_add_steps_after_theirs() {
        let mut e = Expander {
            routines: &NoRoutines,
            bindings: BTreeMap::from([("probe".to_string(), "wr.routine-x".to_string())]),
            errors: Vec::new(),
            in_routine: false,
            produced: 0,
        };
        let steps = e.steps(
            "/steps",
            &[json!({
                "id": "build", "title": "Build", "prompt": "Use {{wr.bindings.probe}}.",
                "verification": {"command": "make test"},
                "audit": {"rubric": ["complete"]}
            })],
        );
        assert_eq!(steps.len(), 3);
        assert_eq!(steps[0]["prompt"], "Use wr.routine-x.");
        assert_eq!(steps[1]["id"], "build__verification");
        assert!(steps[1]["prompt"].as_str().unwrap().contains("make test"));
        assert_eq!(steps[2]["id"], "build__audit");
        assert!(steps[2]["prompt"].as_str().unwrap().contains("- complete"));
        e.steps(
            "/steps",
            &[json!({"id": "x", "title": "X", "prompt": "{{wr.bindings.none}}"})],
        );
        assert!(e.errors[0].1.contains("wr.bindings.none"));
    }
}
