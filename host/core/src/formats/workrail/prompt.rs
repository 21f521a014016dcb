//! The prompt of a WorkRail step as its client reads it: agent role,
//! guidance, the prompt (or its rendered blocks), prompt fragments, the
//! functions in scope, the calls to make, and the loop it is in — with
//! WorkRail's `{{name}}` placeholders written as `{{inputs.name}}`.

use serde_json::Value;

use super::flow::Step;
use super::library::{self, REF_ITEM};
use super::{Document, FunctionDefinition, WorkRailError};

/// A step's prompt: the text every rendering shows, and the prompt
/// fragments chosen when the step is shown (`[{when?, text}]`, in
/// declaration order; empty when no fragment has a `when`, for then they
/// are part of the text).
#[derive(Debug, Default)]
pub(super) struct StepPrompt {
    pub text: String,
    pub fragments: Vec<Value>,
}

/// What a step can see from where it is: the function definitions of the
/// workflow and of its enclosing loops, and the loops themselves.
#[derive(Debug, Clone, Default)]
pub(super) struct Scope {
    functions: Vec<FunctionDefinition>,
    /// The workflow's compiler features (`wr.features.*`), known ones.
    pub features: Vec<&'static library::Feature>,
    /// (loop id, iteration variable), outermost first.
    loops: Vec<(String, String)>,
}

impl Scope {
    pub fn workflow(
        functions: &[FunctionDefinition],
        features: Vec<&'static library::Feature>,
    ) -> Scope {
        Scope {
            functions: functions.to_vec(),
            features,
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
pub(super) fn step_prompt(
    at: &str,
    step: &Step,
    scope: &Scope,
    extra: &[String],
) -> Result<StepPrompt, WorkRailError> {
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
        (None, Some(blocks)) => {
            prompt_blocks(&format!("{at}/promptBlocks"), blocks, &scope.features)?
        }
        (None, None) => {
            return Err((
                at.to_string(),
                "a step needs `prompt` or `promptBlocks`".into(),
            ));
        }
    });
    parts.extend(extra.iter().cloned());
    // Fragments with a `when` are chosen each time the step is shown;
    // without any, they are plain text.
    let conditional = step.prompt_fragments.iter().any(|f| f.when.is_some());
    let mut fragments = Vec::new();
    for fragment in &step.prompt_fragments {
        if conditional {
            let mut f = serde_json::Map::new();
            if let Some(when) = &fragment.when {
                f.insert("when".into(), when.clone());
            }
            f.insert("text".into(), templated(&fragment.text).into());
            fragments.push(Value::Object(f));
        } else {
            parts.push(fragment.text.clone());
        }
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
    Ok(StepPrompt { text, fragments })
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
fn prompt_blocks(
    at: &str,
    blocks: &Value,
    features: &[&library::Feature],
) -> Result<String, WorkRailError> {
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
    let added = |pick: fn(&library::Feature) -> &'static [&'static str]| -> Vec<String> {
        features
            .iter()
            .flat_map(|f| pick(f).iter())
            .map(|item| match item.strip_prefix(REF_ITEM) {
                Some(id) => library::reference(id).unwrap_or_default().to_string(),
                None => item.to_string(),
            })
            .collect()
    };
    for (key, title, numbered, extra) in [
        (
            "constraints",
            "Constraints",
            false,
            added(|f| f.constraints),
        ),
        ("procedure", "Procedure", true, added(|f| f.procedure)),
    ] {
        let mut lines = match map.get(key) {
            Some(items) => list(&format!("{at}/{key}"), items)?,
            None => Vec::new(),
        };
        lines.extend(extra);
        if !lines.is_empty() {
            parts.push(section(title, &itemize(&lines, numbered)));
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
    let mut verify = match map.get("verify") {
        Some(items) => list(&format!("{at}/verify"), items)?,
        None => Vec::new(),
    };
    verify.extend(added(|f| f.verify));
    if !verify.is_empty() {
        parts.push(section("Verify", &itemize(&verify, false)));
    }
    if parts.is_empty() {
        return Err((at.into(), "`promptBlocks` renders to nothing".into()));
    }
    Ok(parts.join("\n\n"))
}

fn list(at: &str, items: &Value) -> Result<Vec<String>, WorkRailError> {
    let Some(items) = items.as_array() else {
        return Err((at.into(), "a list of texts".into()));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| text(&format!("{at}/{i}"), item))
        .collect()
}

/// Items as a bulleted or numbered list.
fn itemize(items: &[String], numbered: bool) -> String {
    items
        .iter()
        .enumerate()
        .map(|(i, t)| {
            if numbered {
                format!("{}. {t}", i + 1)
            } else {
                format!("- {t}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A prompt value: a string, or parts of kind `text` and `ref` (a
/// `wr.refs.*` text).
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
                        let id = part.get("refId").and_then(Value::as_str).unwrap_or("");
                        let Some(t) = library::reference(id) else {
                            return Err((
                                format!("{at}/{i}/refId"),
                                format!(
                                    "unknown ref `{id}` (known: {})",
                                    library::reference_ids().join(", ")
                                ),
                            ));
                        };
                        out.push_str(t);
                    }
                    _ => {
                        return Err((
                            format!("{at}/{i}"),
                            "a prompt part is {\"kind\": \"text\", \"text\": …} or {\"kind\": \"ref\", \"refId\": …}".into(),
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
/// `{{inputs.name|[unset: name]}}` / `{{inputs.a.b|[unset: a.b]}}`: the
/// value, or WorkRail's `[unset: …]` marker when there is none. As in
/// WorkRail, a name is identifiers joined by dots with nothing else inside
/// the braces; `{{wr.…}}`, `{{ spaced }}` and anything else is left as
/// text (a literal `{{inputs.` is escaped).
pub(super) fn templated(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("{{") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let name = after.find("}}").map(|end| &after[..end]);
        match name {
            Some(name) if is_context_path(name) => {
                out.push_str(&format!("{{{{inputs.{name}|[unset: {name}]}}}}"));
                rest = &after[name.len() + 2..];
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

/// WorkRail's placeholder grammar: identifiers (`[A-Za-z_][A-Za-z0-9_]*`)
/// joined by dots, not starting with `wr.`.
fn is_context_path(name: &str) -> bool {
    !name.starts_with("wr.")
        && name.split('.').all(|k| {
            k.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}
