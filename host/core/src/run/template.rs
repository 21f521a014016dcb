//! Input placeholders in prompt and config text: `{{inputs.NAME}}`.
//!
//! In a workflow that declares `inputs`, the host replaces each
//! placeholder in the workflow `rules`, in every block's (and lane's)
//! `prompt` (`prefix`, `task`, `output_checklist`) and in every string of
//! every block's (and lane's) `config` before the block runs:
//!
//! - `{{inputs.NAME}}` (spaces allowed inside the braces) becomes the
//!   input's value: a string as it is, any other value as compact JSON, an
//!   optional input that was not given (and has no default) as nothing;
//!   `{{inputs.NAME.KEY}}` is a key of an object input (or an index of a
//!   list, or `length`, the number of its items), at any depth;
//! - `{{inputs.NAME|TEXT}}` is the same, but TEXT (up to the closing
//!   braces, as it is written) where the input or the key is not given or
//!   is null;
//! - `{{{{` becomes a literal `{{`, so `{{{{inputs.x}}` is the text
//!   `{{inputs.x}}`;
//! - any other `{{` is left as it is.
//!
//! `wfhost validate` refuses a placeholder that names an input the schema
//! does not declare (unless the schema admits any input with
//! `"additionalProperties": true`), and a malformed one. Workflows without `inputs` are
//! not expanded at all.

use std::borrow::Cow;

use serde_json::Value;

use crate::manifest::{Block, BlockPrompt, Workflow, is_valid_id};
use crate::run::inputs::Inputs;

/// One piece of template text.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece<'a> {
    Text(&'a str),
    /// `{{{{`: a literal `{{`.
    Escape,
    /// A placeholder: the value's path, and the text for a missing value.
    Input(&'a str, Option<&'a str>),
}

/// Which placeholders a pass replaces: `{{inputs.NAME}}` (the run's
/// inputs) or `{{item}}`, `{{item.KEY}}` and `{{item_index}}` (a lane's
/// item, in a parallel block over a list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Space {
    Inputs,
    Item,
}

impl Space {
    /// The placeholder's body (its path, up to the closing braces) when
    /// the text after `{{` is one of this space's.
    fn body(self, after: &str) -> Option<&str> {
        let after = after.trim_start();
        match self {
            Space::Inputs => after.strip_prefix("inputs."),
            Space::Item => {
                let rest = after.strip_prefix("item")?;
                let next = rest.chars().next()?;
                (matches!(next, '.' | '|' | '}' | ' ') || rest.starts_with("_index"))
                    .then_some(after)
            }
        }
    }

    /// How a placeholder of this space starts, for messages.
    fn head(self) -> &'static str {
        match self {
            Space::Inputs => "inputs.",
            Space::Item => "",
        }
    }
}

/// Split `text` into literal text and placeholders.
fn parse(text: &str) -> Result<Vec<Piece<'_>>, String> {
    parse_in(text, Space::Inputs)
}

fn parse_in(text: &str, space: Space) -> Result<Vec<Piece<'_>>, String> {
    let mut pieces = Vec::new();
    let mut rest = text;
    let head = space.head();
    while let Some(at) = rest.find("{{") {
        pieces.push(Piece::Text(&rest[..at]));
        let after = &rest[at + 2..];
        if let Some(tail) = after.strip_prefix("{{") {
            pieces.push(Piece::Escape);
            rest = tail;
            continue;
        }
        let Some(body) = space.body(after) else {
            pieces.push(Piece::Text("{{"));
            rest = after;
            continue;
        };
        let Some(end) = body.find("}}") else {
            return Err(format!(
                "unterminated placeholder `{{{{{head}{}` (write `{{{{{{{{` for a literal `{{{{`)",
                body.chars().take(20).collect::<String>()
            ));
        };
        let (name, fallback) = match body[..end].split_once('|') {
            Some((name, fallback)) => (name.trim_end(), Some(fallback)),
            None => (body[..end].trim_end(), None),
        };
        if !name.split('.').all(is_valid_id) {
            return Err(format!(
                "malformed placeholder `{{{{{head}{}}}}}`: a name uses letters, digits, `_` and `-` (and `.` between the keys of a path into it)",
                &body[..end]
            ));
        }
        pieces.push(Piece::Input(name, fallback));
        rest = &body[end + 2..];
    }
    pieces.push(Piece::Text(rest));
    Ok(pieces)
}

/// The input names `text` refers to; an error for a malformed placeholder.
pub fn names(text: &str) -> Result<Vec<&str>, String> {
    Ok(parse(text)?
        .into_iter()
        .filter_map(|p| match p {
            Piece::Input(name, _) => Some(name),
            Piece::Text(_) | Piece::Escape => None,
        })
        .collect())
}

/// `text` with its placeholders replaced by the inputs. Malformed
/// placeholders (refused by validation) are left as they are.
pub fn render(text: &str, inputs: &Inputs) -> String {
    render_in(text, inputs, Space::Inputs, false)
}

/// `text` as the lane of item `index` reads it: `{{item}}`,
/// `{{item.KEY}}` and `{{item_index}}` replaced (as inputs are, with
/// `|TEXT` for a missing key), `{{{{` a literal `{{`.
pub fn render_item(text: &str, index: usize, item: &Value) -> String {
    let mut values = Inputs::new();
    values.insert("item".into(), item.clone());
    values.insert("item_index".into(), Value::from(index));
    render_in(text, &values, Space::Item, false)
}

/// `text` with its `space` placeholders replaced from `values`; with
/// `keep_escapes`, `{{{{` stays as it is (for a later pass).
fn render_in(text: &str, values: &Inputs, space: Space, keep_escapes: bool) -> String {
    let Ok(pieces) = parse_in(text, space) else {
        return text.to_string();
    };
    let mut out = String::with_capacity(text.len());
    for piece in pieces {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Escape => out.push_str(if keep_escapes { "{{{{" } else { "{{" }),
            Piece::Input(name, fallback) => match lookup(values, name).as_deref() {
                Some(Value::String(s)) => out.push_str(s),
                Some(Value::Null) if fallback.is_some() => {
                    out.push_str(fallback.unwrap_or_default())
                }
                None => out.push_str(fallback.unwrap_or_default()),
                Some(other) => out.push_str(&other.to_string()),
            },
        }
    }
    out
}

/// The value a placeholder names: an input, or with `a.b` the key `b`
/// of input `a` (an index for a list).
fn lookup<'i>(inputs: &'i Inputs, name: &str) -> Option<Cow<'i, Value>> {
    let mut keys = name.split('.');
    let mut at = inputs.get(keys.next()?)?;
    let mut keys = keys.peekable();
    while let Some(key) = keys.next() {
        at = match at {
            Value::Object(map) => map.get(key)?,
            Value::Array(items) if key == "length" && keys.peek().is_none() => {
                return Some(Cow::Owned(Value::from(items.len())));
            }
            Value::Array(items) => items.get(key.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(Cow::Borrowed(at))
}

/// Every string of a JSON value rendered (object keys are left alone).
pub fn render_json(value: &Value, inputs: &Inputs) -> Value {
    map_strings(value, &|s| render(s, inputs))
}

/// Every string of a JSON value passed through `f` (object keys are left
/// alone).
fn map_strings(value: &Value, f: &dyn Fn(&str) -> String) -> Value {
    match value {
        Value::String(s) => Value::String(f(s)),
        Value::Array(items) => Value::Array(items.iter().map(|v| map_strings(v, f)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), map_strings(v, f)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn map_prompt(prompt: &mut BlockPrompt, f: &dyn Fn(&str) -> String) {
    for text in [&mut prompt.prefix, &mut prompt.task].into_iter().flatten() {
        *text = f(text);
    }
    for item in &mut prompt.output_checklist {
        *item = f(item);
    }
}

/// The block as the lane of item `index` of its `over` list runs it: the
/// item's placeholders in its config and prompt replaced.
pub fn for_item(block: &Block, index: usize, item: &Value) -> Block {
    let f = |s: &str| render_item(s, index, item);
    let mut block = block.clone();
    block.config = map_strings(&block.config, &f);
    if let Some(prompt) = &mut block.prompt {
        map_prompt(prompt, &f);
    }
    block
}

/// The workflow as a run with `inputs` executes it: every placeholder
/// replaced. A workflow without an `inputs` schema is returned as it is.
/// The engine renders only what it executes ([`instantiate_block`],
/// [`instantiate_rules`]): the same result, block by block.
pub fn instantiate<'w>(workflow: &'w Workflow, inputs: &Inputs) -> Cow<'w, Workflow> {
    if workflow.inputs.is_none() {
        return Cow::Borrowed(workflow);
    }
    let mut wf = workflow.clone();
    if let Some(rules) = &mut wf.rules {
        *rules = render(rules, inputs);
    }
    for block in wf.nodes.values_mut().flat_map(|n| n.blocks.values_mut()) {
        render_block(block, inputs);
    }
    Cow::Owned(wf)
}

/// One block of `workflow` as a run with `inputs` executes it: its config,
/// prompt and lanes rendered (borrowed as it is when the workflow has no
/// `inputs` schema). Costs the block, whatever the workflow's size.
pub fn instantiate_block<'b>(
    workflow: &Workflow,
    block: &'b Block,
    inputs: &Inputs,
) -> Cow<'b, Block> {
    if workflow.inputs.is_none() {
        return Cow::Borrowed(block);
    }
    let mut block = block.clone();
    render_block(&mut block, inputs);
    Cow::Owned(block)
}

/// The workflow's `rules` as a run with `inputs` reads them.
pub fn instantiate_rules<'w>(workflow: &'w Workflow, inputs: &Inputs) -> Option<Cow<'w, str>> {
    let rules = workflow.rules.as_deref()?;
    Some(if workflow.inputs.is_none() {
        Cow::Borrowed(rules)
    } else {
        Cow::Owned(render(rules, inputs))
    })
}

fn render_block(block: &mut Block, inputs: &Inputs) {
    // A block over a list renders its items' placeholders later, lane by
    // lane: its escapes are kept for that pass.
    let keep = block.parallel.as_ref().is_some_and(|g| g.over.is_some());
    let f = |s: &str| render_in(s, inputs, Space::Inputs, keep);
    block.config = map_strings(&block.config, &f);
    if let Some(prompt) = &mut block.prompt {
        map_prompt(prompt, &f);
    }
    for lane in block.parallel.iter_mut().flat_map(|g| g.lanes.values_mut()) {
        lane.config = map_strings(&lane.config, &f);
        if let Some(prompt) = &mut lane.prompt {
            map_prompt(prompt, &f);
        }
    }
}

/// Every template string of a workflow with its JSON pointer (as parts).
pub fn strings(wf: &Workflow) -> Vec<(Vec<String>, &str)> {
    let mut out = Vec::new();
    if let Some(rules) = &wf.rules {
        out.push((vec!["rules".to_string()], rules.as_str()));
    }
    for (node_id, node) in &wf.nodes {
        for (block_id, block) in &node.blocks {
            let base = vec![
                "nodes".to_string(),
                node_id.clone(),
                "blocks".to_string(),
                block_id.clone(),
            ];
            collect_block(&base, &block.config, block.prompt.as_ref(), &mut out);
            for (lane, spec) in block.parallel.iter().flat_map(|g| &g.lanes) {
                let mut at = base.clone();
                at.extend(["parallel".into(), "lanes".into(), lane.clone()]);
                collect_block(&at, &spec.config, spec.prompt.as_ref(), &mut out);
            }
        }
    }
    out
}

fn collect_block<'a>(
    base: &[String],
    config: &'a Value,
    prompt: Option<&'a BlockPrompt>,
    out: &mut Vec<(Vec<String>, &'a str)>,
) {
    let at = |rest: &[&str]| {
        let mut parts = base.to_vec();
        parts.extend(rest.iter().map(|s| s.to_string()));
        parts
    };
    collect_json(at(&["config"]), config, out);
    let Some(prompt) = prompt else { return };
    if let Some(prefix) = &prompt.prefix {
        out.push((at(&["prompt", "prefix"]), prefix));
    }
    if let Some(task) = &prompt.task {
        out.push((at(&["prompt", "task"]), task));
    }
    for (i, item) in prompt.output_checklist.iter().enumerate() {
        out.push((at(&["prompt", "output_checklist", &i.to_string()]), item));
    }
}

fn collect_json<'a>(at: Vec<String>, value: &'a Value, out: &mut Vec<(Vec<String>, &'a str)>) {
    match value {
        Value::String(s) => out.push((at, s)),
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                let mut next = at.clone();
                next.push(i.to_string());
                collect_json(next, v, out);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                let mut next = at.clone();
                next.push(k.clone());
                collect_json(next, v, out);
            }
        }
        _ => {}
    }
}

/// The static check: every placeholder of the workflow is well formed and
/// names a declared input. Returns (pointer parts, message) per problem.
pub fn check(wf: &Workflow) -> Vec<(Vec<String>, String)> {
    let declared: Vec<&str> = wf
        .inputs
        .as_ref()
        .map(|s| {
            crate::run::inputs::properties(s)
                .map(|(n, _)| n.as_str())
                .collect()
        })
        .unwrap_or_default();
    // A schema that admits any other input (`additionalProperties: true`)
    // lets placeholders name undeclared inputs.
    let open = wf.inputs.as_ref().is_some_and(crate::run::inputs::is_open);
    let mut problems = Vec::new();
    for (at, text) in strings(wf) {
        match names(text) {
            Err(e) => problems.push((at, e)),
            Ok(names) => {
                for path in names {
                    let name = path.split('.').next().unwrap_or(path);
                    if wf.inputs.is_none() {
                        problems.push((
                            at.clone(),
                            format!("`{{{{inputs.{name}}}}}` is used, but the workflow declares no `inputs`"),
                        ));
                    } else if !open && !declared.contains(&name) {
                        problems.push((
                            at.clone(),
                            format!(
                                "`{{{{inputs.{name}}}}}` names no input declared in `inputs.properties` (declared: {})",
                                if declared.is_empty() { "none".to_string() } else { declared.join(", ") }
                            ),
                        ));
                    }
                }
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn inputs() -> Inputs {
        json!({"topic": "rust", "n": 3, "tags": ["a"]})
            .as_object()
            .unwrap()
            .clone()
    }

    #[test]
    fn placeholders_are_replaced() {
        let i = inputs();
        assert_eq!(render("About {{inputs.topic}}.", &i), "About rust.");
        assert_eq!(render("{{ inputs.n }}x{{inputs.tags}}", &i), "3x[\"a\"]");
        assert_eq!(render("[{{inputs.optional}}]", &i), "[]");
        assert_eq!(render("no placeholders", &i), "no placeholders");
    }

    #[test]
    fn a_fallback_stands_for_a_missing_value_and_lists_have_a_length() {
        let mut i = inputs();
        i.insert("none".into(), Value::Null);
        i.insert("deep".into(), json!({"list": [1, 2, 3]}));
        assert_eq!(
            render("{{inputs.ticket|[unset: ticket]}} {{inputs.topic|x}}", &i),
            "[unset: ticket] rust"
        );
        assert_eq!(render("{{inputs.none|-}} {{inputs.none}}", &i), "- null");
        assert_eq!(
            render("{{inputs.topic.x|[unset: topic.x]}}", &i),
            "[unset: topic.x]"
        );
        assert_eq!(
            render("{{inputs.tags.length}} {{inputs.deep.list.length}}", &i),
            "1 3"
        );
        assert_eq!(render("{{inputs.tags.length.x|none}}", &i), "none");
        assert_eq!(names("{{inputs.a.b|[unset: a.b]}}").unwrap(), ["a.b"]);
    }

    #[test]
    fn literal_braces() {
        let i = inputs();
        assert_eq!(render("{{{{inputs.topic}}", &i), "{{inputs.topic}}");
        assert_eq!(
            render("${{ github.sha }} {{x}}", &i),
            "${{ github.sha }} {{x}}"
        );
        assert_eq!(render("{{{{{{inputs.topic}}", &i), "{{rust");
    }

    #[test]
    fn names_and_malformed_placeholders() {
        assert_eq!(names("{{inputs.a}} {{inputs.b-c}}").unwrap(), ["a", "b-c"]);
        assert!(names("{{inputs.a b}}").unwrap_err().contains("malformed"));
        assert!(names("{{inputs.a").unwrap_err().contains("unterminated"));
        assert!(names("{{{{inputs.a").unwrap().is_empty());
    }

    #[test]
    fn json_strings_are_rendered_recursively() {
        let config =
            json!({"message": "hi {{inputs.topic}}", "list": ["{{inputs.n}}", 1], "k": true});
        assert_eq!(
            render_json(&config, &inputs()),
            json!({"message": "hi rust", "list": ["3", 1], "k": true})
        );
    }

    fn workflow(inputs: Option<Value>, message: &str) -> Workflow {
        let mut wf = json!({
            "id": "w", "start_node": "main", "rules": "Rules for {{inputs.topic}}",
            "nodes": {"main": {"entry_block": "a", "blocks": {"a": {
                "worker": "echo",
                "config": {"message": message},
                "prompt": {"task": "Write about {{inputs.topic}}"}
            }}}}
        });
        if let Some(s) = inputs {
            wf["inputs"] = s;
        }
        serde_json::from_value(wf).unwrap()
    }

    #[test]
    fn the_static_check_names_the_place() {
        let schema = json!({"properties": {"topic": {"type": "string"}}});
        assert!(check(&workflow(Some(schema.clone()), "{{inputs.topic}}")).is_empty());
        let problems = check(&workflow(Some(schema), "{{inputs.tpoic}}"));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(
            problems[0].0,
            ["nodes", "main", "blocks", "a", "config", "message"]
        );
        assert!(problems[0].1.contains("`{{inputs.tpoic}}`"), "{problems:?}");
        let problems = check(&workflow(None, "x"));
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert_eq!(problems[0].0, ["rules"]);
        assert!(problems[0].1.contains("declares no `inputs`"));
    }

    #[test]
    fn instantiation_replaces_rules_prompts_and_config() {
        let schema = json!({"properties": {"topic": {"type": "string"}}});
        let wf = workflow(Some(schema), "msg {{inputs.topic}}");
        let done = instantiate(&wf, &inputs());
        assert_eq!(done.rules.as_deref(), Some("Rules for rust"));
        let block = &done.nodes["main"].blocks["a"];
        assert_eq!(block.config, json!({"message": "msg rust"}));
        assert_eq!(
            block.prompt.as_ref().unwrap().task.as_deref(),
            Some("Write about rust")
        );
        let plain = workflow(None, "{{{{");
        assert!(matches!(instantiate(&plain, &inputs()), Cow::Borrowed(_)));
    }
}
