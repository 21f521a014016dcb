//! The prompt of a WorkRail step as its client reads it: agent role,
//! guidance, the prompt (or its rendered blocks), prompt fragments, the
//! functions in scope, the calls to make, and the loop it is in — with
//! WorkRail's `{{name}}` placeholders written as `{{inputs.name}}`.

use serde_json::Value;

use super::flow::Step;
use super::{Document, FunctionDefinition, WorkRailError};

/// What a step can see from where it is: the function definitions of the
/// workflow and of its enclosing loops, and the loops themselves.
#[derive(Debug, Clone, Default)]
pub(super) struct Scope {
    functions: Vec<FunctionDefinition>,
    /// (loop id, iteration variable), outermost first.
    loops: Vec<(String, String)>,
}

impl Scope {
    pub fn workflow(functions: &[FunctionDefinition]) -> Scope {
        Scope {
            functions: functions.to_vec(),
            loops: Vec::new(),
        }
    }

    pub fn enter_loop(
        &self,
        id: &str,
        functions: &[FunctionDefinition],
        iteration_var: &str,
    ) -> Scope {
        let mut inner = self.clone();
        inner.functions.extend(functions.iter().cloned());
        inner
            .loops
            .push((id.to_string(), iteration_var.to_string()));
        inner
    }
}

/// The workflow's `rules` (every step's system prompt): its meta
/// guidance, preconditions and clarification prompts.
pub(super) fn rules(doc: &Document) -> Option<String> {
    let mut parts = Vec::new();
    for (title, items) in [
        ("Workflow Guidance", &doc.meta_guidance),
        ("Preconditions", &doc.preconditions),
        ("Clarifications To Ask First", &doc.clarification_prompts),
    ] {
        if !items.is_empty() {
            parts.push(section(title, &bullets(items)));
        }
    }
    (!parts.is_empty()).then(|| templated(&parts.join("\n\n")))
}

fn section(title: &str, body: &str) -> String {
    format!("## {title}\n{body}")
}

fn bullets(items: &[String]) -> String {
    items
        .iter()
        .map(|i| format!("- {i}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The step's prompt; an error (pointer, reason) for what cannot be
/// rendered.
pub(super) fn step_prompt(at: &str, step: &Step, scope: &Scope) -> Result<String, WorkRailError> {
    let mut parts = Vec::new();
    if let Some(role) = &step.agent_role {
        parts.push(section("Agent Role Instructions", role));
    }
    if !step.guidance.is_empty() {
        parts.push(section("Step Guidance", &bullets(&step.guidance)));
    }
    parts.push(match (&step.prompt, &step.prompt_blocks) {
        (Some(_), Some(_)) => {
            return Err((
                format!("{at}/promptBlocks"),
                "a step has `prompt` or `promptBlocks`, not both".into(),
            ));
        }
        (Some(p), None) => p.clone(),
        (None, Some(blocks)) => prompt_blocks(&format!("{at}/promptBlocks"), blocks)?,
        (None, None) => {
            return Err((
                at.to_string(),
                "a step needs `prompt` or `promptBlocks`".into(),
            ));
        }
    });
    for (i, fragment) in step.prompt_fragments.iter().enumerate() {
        if fragment.when.is_some() {
            return Err((
                format!("{at}/promptFragments/{i}/when"),
                "conditional prompt fragments are not supported: split the step with a runCondition".into(),
            ));
        }
        parts.push(fragment.text.clone());
    }
    if let Some(functions) = functions(step, scope) {
        parts.push(section("Function Definitions", &functions));
    }
    if !step.function_calls.is_empty() {
        let calls: Vec<String> = step
            .function_calls
            .iter()
            .map(|c| match &c.args {
                Some(args) => format!("{}({args})", c.name),
                None => format!("{}()", c.name),
            })
            .collect();
        parts.push(section("Function Calls", &bullets(&calls)));
    }
    let mut text = templated(&parts.join("\n\n"));
    if let Some(bound) = text.find("{{wr.bindings.") {
        let name: String = text[bound..].chars().take(40).collect();
        return Err((
            at.to_string(),
            format!("`{name}…`: extension point bindings are not supported"),
        ));
    }
    for (id, var) in &scope.loops {
        text.push_str(&format!(
            "\n\n## Loop Context\n- Loop: {id}\n- Iteration: {{{{inputs.{var}}}}}"
        ));
    }
    Ok(text)
}

/// The functions the step sees (the closest definition of each name
/// wins; `functionReferences` narrows them), rendered.
fn functions(step: &Step, scope: &Scope) -> Option<String> {
    let mut seen: Vec<&FunctionDefinition> = Vec::new();
    for f in scope.functions.iter().chain(&step.function_definitions) {
        seen.retain(|s| s.name != f.name);
        seen.push(f);
    }
    if let Some(refs) = &step.function_references {
        let named: Vec<&str> = refs.iter().map(|r| r.trim_end_matches("()")).collect();
        seen.retain(|f| named.contains(&f.name.as_str()));
    }
    if seen.is_empty() {
        return None;
    }
    let lines: Vec<String> = seen.iter().map(|f| function(f)).collect();
    Some(lines.join("\n"))
}

fn function(f: &FunctionDefinition) -> String {
    let params: Vec<String> = f
        .parameters
        .iter()
        .map(|p| {
            let mut s = format!("{}: {}", p.name, p.kind);
            if p.required == Some(false) {
                s.push('?');
            }
            if let Some(choices) = &p.choices {
                s.push_str(&format!(" (one of {})", Value::Array(choices.clone())));
            }
            if let Some(d) = &p.default {
                s.push_str(&format!(" = {d}"));
            }
            if let Some(d) = &p.description {
                s.push_str(&format!(" — {d}"));
            }
            s
        })
        .collect();
    format!("- `{}({})`: {}", f.name, params.join(", "), f.definition)
}

/// `promptBlocks` rendered: goal, constraints, procedure, output
/// required, verify.
fn prompt_blocks(at: &str, blocks: &Value) -> Result<String, WorkRailError> {
    let Some(map) = blocks.as_object() else {
        return Err((at.into(), "`promptBlocks` is an object".into()));
    };
    const KEYS: &[&str] = &[
        "goal",
        "constraints",
        "procedure",
        "outputRequired",
        "verify",
    ];
    if let Some(key) = map.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err((
            format!("{at}/{key}"),
            format!(
                "unknown prompt block `{key}` (expected {})",
                KEYS.join(", ")
            ),
        ));
    }
    let mut parts = Vec::new();
    if let Some(goal) = map.get("goal") {
        parts.push(section("Goal", &text(&format!("{at}/goal"), goal)?));
    }
    for (key, title, numbered) in [
        ("constraints", "Constraints", false),
        ("procedure", "Procedure", true),
    ] {
        if let Some(items) = map.get(key) {
            parts.push(section(
                title,
                &list(&format!("{at}/{key}"), items, numbered)?,
            ));
        }
    }
    if let Some(out) = map.get("outputRequired") {
        let Some(fields) = out.as_object() else {
            return Err((
                format!("{at}/outputRequired"),
                "`outputRequired` is an object".into(),
            ));
        };
        let mut lines = Vec::new();
        for (k, v) in fields {
            lines.push(format!(
                "- **{k}**: {}",
                text(&format!("{at}/outputRequired/{k}"), v)?
            ));
        }
        parts.push(section("Output Required", &lines.join("\n")));
    }
    if let Some(items) = map.get("verify") {
        parts.push(section(
            "Verify",
            &list(&format!("{at}/verify"), items, false)?,
        ));
    }
    if parts.is_empty() {
        return Err((at.into(), "`promptBlocks` renders to nothing".into()));
    }
    Ok(parts.join("\n\n"))
}

fn list(at: &str, items: &Value, numbered: bool) -> Result<String, WorkRailError> {
    let Some(items) = items.as_array() else {
        return Err((at.into(), "a list of texts".into()));
    };
    let mut lines = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let t = text(&format!("{at}/{i}"), item)?;
        lines.push(if numbered {
            format!("{}. {t}", i + 1)
        } else {
            format!("- {t}")
        });
    }
    Ok(lines.join("\n"))
}

/// A prompt value: a string, or parts of kind `text`.
fn text(at: &str, value: &Value) -> Result<String, WorkRailError> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut out = String::new();
            for (i, part) in parts.iter().enumerate() {
                match (
                    part.get("kind").and_then(Value::as_str),
                    part.get("text").and_then(Value::as_str),
                ) {
                    (Some("text"), Some(t)) => out.push_str(t),
                    (Some("ref"), _) => {
                        return Err((
                            format!("{at}/{i}"),
                            "prompt parts of kind `ref` (references) are not supported".into(),
                        ));
                    }
                    _ => {
                        return Err((
                            format!("{at}/{i}"),
                            "a prompt part is {\"kind\": \"text\", \"text\": …}".into(),
                        ));
                    }
                }
            }
            Ok(out)
        }
        _ => Err((at.into(), "a text, or a list of text parts".into())),
    }
}

/// WorkRail's `{{name}}` / `{{a.b}}` placeholders written as wfhost's
/// `{{inputs.name}}` / `{{inputs.a.b}}`; `{{wr.…}}` and anything else is
/// left as text (a literal `{{inputs.` is escaped).
pub(super) fn templated(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("{{") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let name = after.find("}}").map(|end| after[..end].trim());
        match name {
            Some(name) if is_context_path(name) => {
                out.push_str("{{inputs.");
                out.push_str(name);
                out.push_str("}}");
                rest = &after[after.find("}}").unwrap_or(0) + 2..];
            }
            _ => {
                // Not a placeholder wfhost writes: keep `{{` as text.
                out.push_str("{{{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn is_context_path(name: &str) -> bool {
    !name.starts_with("wr.")
        && name.split('.').all(|k| {
            !k.is_empty()
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
}
