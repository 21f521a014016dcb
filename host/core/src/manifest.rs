//! The workflow manifest: nodes of blocks, their workers and transitions.
//!
//! Manifests are JSON. Unknown fields are refused so that a typo never
//! silently changes behaviour. [`load`] reads, parses and statically checks a
//! manifest; every error names the file and the place (line and column for
//! syntax, a JSON pointer for meaning).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use crate::command::EngineCommand;

/// The name of the default action handler, always available.
pub const DEFAULT_ACTION_HANDLER: &str = "actions-core";

/// A workflow: the whole manifest.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Workflow {
    /// The JSON Schema this manifest follows, for editors; ignored by wfhost.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Stable identifier, handed to workers as `workflow-id`.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Workflow-level rules, injected first into every block's system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<String>,
    /// The run's inputs, as a JSON Schema of an object: `properties` name
    /// the inputs (with their types and `default`s), `required` lists those
    /// that must be given. Given with `wfhost run --input FILE` and
    /// `--set NAME=VALUE`, recorded with the run, visible to workers and
    /// written into prompts and config strings as `{{inputs.NAME}}`. Absent:
    /// the workflow takes no inputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub inputs: Option<serde_json::Value>,
    /// User plugins by name. Built-in plugins need no entry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub plugins: BTreeMap<String, PluginSpec>,
    /// The plugin that interprets transition actions.
    #[serde(default = "default_action_handler")]
    pub action_handler: String,
    /// Third-party action handlers for their own verbs: an action `VERB` or
    /// `VERB:...` goes to the plugin registered for `VERB`; every other
    /// action goes to `action_handler`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub action_handlers: BTreeMap<String, String>,
    /// The directory runs of this workflow work in when `wfhost run` is
    /// given no `--workspace`, relative to the manifest's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// Whether the run keeps the orchestrator's session files
    /// (`.agents-work/<session>/status.json` and `tasks.yaml`) in the
    /// workspace. Unset: only when a block runs an agent CLI (worker
    /// `agent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_files: Option<bool>,
    /// The node whose entry block runs first.
    pub start_node: String,
    pub nodes: BTreeMap<String, Node>,
}

fn default_action_handler() -> String {
    DEFAULT_ACTION_HANDLER.to_string()
}

/// The verbs of the core grammar, which cannot be re-registered.
const CORE_VERBS: &[&str] = &["JUMP", "CALL", "RETURN", "END", "FAIL", "GATE"];

impl Workflow {
    /// Whether runs of this workflow keep session files: as `session_files`
    /// says, else when a block's worker is the `agent` plugin.
    pub fn uses_session_files(&self) -> bool {
        self.session_files.unwrap_or_else(|| {
            self.nodes
                .values()
                .flat_map(|n| n.blocks.values())
                .any(|b| b.worker == "agent")
        })
    }

    /// The plugin that interprets `action`.
    pub fn handler_for(&self, action: &str) -> &str {
        let verb = action.split(':').next().unwrap_or(action);
        self.action_handlers
            .get(verb)
            .unwrap_or(&self.action_handler)
    }
}

/// A plugin and what it is granted: a WebAssembly component on disk, or a
/// built-in plugin (no `path`) that needs a grant, such as `exec`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PluginSpec {
    /// Path to the `.wasm` component, relative to the manifest's
    /// directory; absent for a built-in plugin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// Host capabilities granted to this plugin beyond the base sandbox.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<String>,
}

/// A logical container of blocks that owns context (static memory, isolation).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub entry_block: String,
    /// `false` makes a called node a pure subroutine: it starts with an empty
    /// payload and hands back only what it produced.
    #[serde(default = "default_true")]
    pub context_inheritance: bool,
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub static_memory: serde_json::Map<String, serde_json::Value>,
    pub blocks: BTreeMap<String, Block>,
}

fn default_true() -> bool {
    true
}

/// An atomic unit of execution: one worker call and its transitions.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Block {
    /// The worker plugin that executes this block.
    pub worker: String,
    /// Worker-specific configuration, handed to the worker as JSON.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub config: serde_json::Value,
    /// Ordered instructions that assemble the payload the worker receives:
    /// `inherit`, `clear`, `keep_last:N`, `drop_type:T[,T]`,
    /// `keep_type:T[,T]`, `append_static:KEY`, `append_config:KEY`. Empty
    /// means inherit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub payload_merge_strategy: Vec<String>,
    /// Signal → action rules; `SIGNAL:FAIL_DEFAULT` catches any signal
    /// without its own rule.
    #[serde(default)]
    pub transitions: Vec<Transition>,
    /// What the block's system prompt says beyond the workflow rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<BlockPrompt>,
    /// Glob patterns of workspace paths the block may modify. Absent means
    /// unrestricted; `[]` means read-only (except `.output/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_restrictions: Option<Vec<String>>,
    /// A JSON Schema the worker's output must satisfy: inline, or the path
    /// (a string) of a schema file relative to the manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_schema: Option<serde_json::Value>,
    /// How many times the block may run in one run (loop safety for retry
    /// cycles such as a validation loop). Unlimited when absent, apart from
    /// the run's step limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_attempts: Option<u32>,
    /// Wall-clock limit for one execution of the block, e.g. `"30s"`,
    /// `"500ms"`, `"2m"`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "deserialize_duration",
        serialize_with = "serialize_duration"
    )]
    #[schemars(
        with = "Option<String>",
        regex(pattern = r"^[0-9]+(\.[0-9]+)?(ms|s|m|h)$")
    )]
    pub timeout: Option<Duration>,
    /// Limits on what one execution of a restricted block may write
    /// (checked before its changes are applied; see [`WriteLimits`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<WriteLimits>,
    /// Makes the block a parallel group: its worker runs once
    /// per lane, concurrently, each lane in an isolated workspace (a git
    /// worktree, else a copy), and fan-in merges the lanes back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel: Option<ParallelGroup>,
}

/// How much one execution of a block may write into the workspace: the
/// files it creates or changes, and their bytes. A block over a limit
/// fails naming it, and none of its changes is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteLimits {
    /// Bytes of the files created or changed (default 1 GiB).
    #[serde(default = "default_max_written_bytes")]
    #[schemars(range(min = 1))]
    pub max_written_bytes: u64,
    /// Files created or changed (default 10,000).
    #[serde(default = "default_max_written_files")]
    #[schemars(range(min = 1))]
    pub max_written_files: u64,
}

/// The default [`WriteLimits::max_written_bytes`]: 1 GiB.
pub const DEFAULT_MAX_WRITTEN_BYTES: u64 = 1 << 30;
/// The default [`WriteLimits::max_written_files`].
pub const DEFAULT_MAX_WRITTEN_FILES: u64 = 10_000;

fn default_max_written_bytes() -> u64 {
    DEFAULT_MAX_WRITTEN_BYTES
}

fn default_max_written_files() -> u64 {
    DEFAULT_MAX_WRITTEN_FILES
}

impl Default for WriteLimits {
    fn default() -> Self {
        WriteLimits {
            max_written_bytes: DEFAULT_MAX_WRITTEN_BYTES,
            max_written_files: DEFAULT_MAX_WRITTEN_FILES,
        }
    }
}

impl WriteLimits {
    /// Whether `files` files of `bytes` bytes in all are within the limits;
    /// else which limit they pass.
    pub fn check(&self, files: u64, bytes: u64) -> Result<(), String> {
        if files > self.max_written_files {
            return Err(format!(
                "the block wrote {files} files, over its limit of {} (`limits.max_written_files`)",
                self.max_written_files
            ));
        }
        if bytes > self.max_written_bytes {
            return Err(format!(
                "the block wrote {bytes} bytes, over its limit of {} (`limits.max_written_bytes`)",
                self.max_written_bytes
            ));
        }
        Ok(())
    }
}

/// The most lanes one parallel group may have.
pub const MAX_LANES: usize = 64;

/// A parallel group's lanes and how they are merged back.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParallelGroup {
    /// `workspace` (default: file changes applied in lane completion
    /// order, first finisher wins a conflict), `concatenate` (only the
    /// lanes' `.output/` files are collected) or `fail-on-conflict` (a
    /// conflict pauses the run at a gate until the user chooses a lane).
    #[serde(default)]
    pub merge_strategy: crate::fan_in::MergeStrategy,
    /// Lane name → what differs in that lane. Each lane's `NODE_ID` is
    /// `<node>.<block>.<lane>`.
    pub lanes: BTreeMap<String, LaneSpec>,
}

/// What one lane changes about its block; everything absent is the
/// block's.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LaneSpec {
    /// Merged over the block's `config` (top-level keys replace the
    /// block's).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub config: serde_json::Value,
    /// Fields set here replace the block's prompt fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<BlockPrompt>,
    /// Replaces the block's file restrictions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_restrictions: Option<Vec<String>>,
}

impl Block {
    /// The block as lane `lane` runs it: its config, prompt and
    /// restrictions with the lane's overrides applied.
    pub fn for_lane(&self, lane: &LaneSpec) -> Block {
        let mut block = self.clone();
        block.parallel = None;
        if let serde_json::Value::Object(overrides) = &lane.config {
            let mut config = match &self.config {
                serde_json::Value::Object(m) => m.clone(),
                _ => serde_json::Map::new(),
            };
            for (k, v) in overrides {
                config.insert(k.clone(), v.clone());
            }
            block.config = serde_json::Value::Object(config);
        }
        if let Some(p) = &lane.prompt {
            let mut prompt = self.prompt.clone().unwrap_or_default();
            if p.prefix.is_some() {
                prompt.prefix = p.prefix.clone();
            }
            if p.task.is_some() {
                prompt.task = p.task.clone();
            }
            if !p.output_checklist.is_empty() {
                prompt.output_checklist = p.output_checklist.clone();
            }
            block.prompt = Some(prompt);
        }
        if lane.file_restrictions.is_some() {
            block.file_restrictions = lane.file_restrictions.clone();
        }
        block
    }
}

/// A block's part of its system prompt (assembled after the workflow rules).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BlockPrompt {
    /// The harness prefix, e.g. "You are a senior planner.".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The task instruction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Required outputs, rendered as a numbered list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_checklist: Vec<String>,
}

/// One row of a block's transition table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Transition {
    pub on_signal: String,
    pub action: String,
}

pub use wfhost_actions::is_valid_id;

/// The JSON Schema of the manifest format, as published in
/// `schema/workflow.schema.json`.
pub fn json_schema() -> serde_json::Value {
    let mut schema = schemars::schema_for!(Workflow).to_value();
    if let Some(obj) = schema.as_object_mut() {
        obj.insert(
            "$id".into(),
            "https://wfhost.dev/schema/workflow-0.1.schema.json".into(),
        );
        obj.insert(
            "title".into(),
            "wfhost workflow manifest (format 0.1)".into(),
        );
    }
    schema
}

/// The longest duration a manifest may give (a block's `timeout`): 7 days.
/// Longer values are refused, so every deadline computed from one fits.
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Parse `"250ms"`, `"30s"`, `"2m"`, `"1h"`; positive, at most
/// [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration like \"30s\" or \"500ms\""))?;
    let seconds = match unit.trim() {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "unknown duration unit `{other}` in `{text}` (use ms, s, m or h)"
            ));
        }
    };
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(format!("duration `{text}` must be positive"));
    }
    if seconds > MAX_DURATION.as_secs_f64() {
        return Err(format!(
            "duration `{text}` is longer than the maximum of 7 days (168h)"
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

fn deserialize_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(d)?;
    parse_duration(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

fn serialize_duration<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_str(&format!("{}ms", d.as_millis())),
        None => s.serialize_none(),
    }
}

/// A manifest error: the file, the place in it, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    pub file: PathBuf,
    /// `line:column` for syntax errors, a JSON pointer for semantic ones.
    pub location: Option<String>,
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(at) => write!(f, "{}: {at}: {}", self.file.display(), self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

impl std::error::Error for ManifestError {}

/// A list of manifest errors, displayed one per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestErrors(pub Vec<ManifestError>);

impl fmt::Display for ManifestErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ManifestErrors {}

/// A parsed, checked workflow together with where it came from.
#[derive(Debug, Clone)]
pub struct LoadedWorkflow {
    pub workflow: Workflow,
    pub file: PathBuf,
}

impl LoadedWorkflow {
    /// The directory relative paths of the manifest are resolved against.
    pub fn base_dir(&self) -> &Path {
        manifest_dir(&self.file)
    }
}

/// The directory a manifest file is in: `.` for a bare file name (whose
/// `parent()` is the empty path, which names no directory).
pub fn manifest_dir(file: &Path) -> &Path {
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Read, parse and check a manifest. `builtin_plugins` are the plugin names
/// available without a `plugins` entry.
pub fn load(file: &Path, builtin_plugins: &[&str]) -> Result<LoadedWorkflow, ManifestErrors> {
    let one = |location: Option<String>, message: String| {
        ManifestErrors(vec![ManifestError {
            file: file.to_path_buf(),
            location,
            message,
        }])
    };
    let text = crate::regular_file::read_regular(file, crate::regular_file::MAX_MANIFEST_BYTES)
        .map_err(|e| one(None, format!("cannot read manifest: {e}")))?;
    let text = String::from_utf8(text).map_err(|e| {
        one(
            None,
            format!(
                "manifest is not UTF-8 (byte {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })?;
    let mut workflow = parse(file, &text)?;
    let base_dir = manifest_dir(file);
    let mut errors = resolve_schemas(file, base_dir, &mut workflow);
    errors.extend(check(file, &workflow, builtin_plugins));
    if !errors.is_empty() {
        return Err(ManifestErrors(errors));
    }
    Ok(LoadedWorkflow {
        workflow,
        file: file.to_path_buf(),
    })
}

/// Parse manifest text; errors carry line and column and the JSON path.
pub fn parse(file: &Path, text: &str) -> Result<Workflow, ManifestErrors> {
    if let Err(e) = crate::strict_json::check_no_duplicate_keys(text) {
        let mut message = e.to_string();
        if let Some(cut) = message.rfind(" at line ") {
            message.truncate(cut);
        }
        return Err(ManifestErrors(vec![ManifestError {
            file: file.to_path_buf(),
            location: Some(format!("{}:{}", e.line(), e.column())),
            message,
        }]));
    }
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize::<_, Workflow>(de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        let mut message = inner.to_string();
        // serde_json appends " at line L column C"; we report that as the location.
        if let Some(cut) = message.rfind(" at line ") {
            message.truncate(cut);
        }
        if path != "." && !path.is_empty() {
            message = format!("{message} (at `{path}`)");
        }
        ManifestErrors(vec![ManifestError {
            file: file.to_path_buf(),
            location: Some(format!("{}:{}", inner.line(), inner.column())),
            message,
        }])
    })
}

/// Replace schema paths by the schemas they name.
fn resolve_schemas(file: &Path, base_dir: &Path, wf: &mut Workflow) -> Vec<ManifestError> {
    let mut errors = Vec::new();
    for (node_id, node) in wf.nodes.iter_mut() {
        for (block_id, block) in node.blocks.iter_mut() {
            let Some(serde_json::Value::String(rel)) = &block.validation_schema else {
                continue;
            };
            let path = base_dir.join(rel);
            let at = pointer(&["nodes", node_id, "blocks", block_id, "validation_schema"]);
            let loaded =
                crate::regular_file::read_regular(&path, crate::regular_file::MAX_SCHEMA_BYTES)
                    .and_then(|bytes| {
                        String::from_utf8(bytes).map_err(|_| {
                            std::io::Error::new(std::io::ErrorKind::InvalidData, "is not UTF-8")
                        })
                    })
                    .map_err(|e| format!("cannot read schema file {}: {e}", path.display()))
                    .and_then(|text| {
                        crate::strict_json::check_no_duplicate_keys(&text)
                            .and_then(|()| serde_json::from_str(&text))
                            .map_err(|e| format!("schema file {} is not JSON: {e}", path.display()))
                    });
            match loaded {
                Ok(schema) => block.validation_schema = Some(schema),
                Err(message) => errors.push(ManifestError {
                    file: file.to_path_buf(),
                    location: Some(at),
                    message,
                }),
            }
        }
    }
    errors
}

fn pointer(parts: &[&str]) -> String {
    let mut out = String::new();
    for p in parts {
        out.push('/');
        out.push_str(&p.replace('~', "~0").replace('/', "~1"));
    }
    out
}

/// Static checks that JSON parsing cannot make: references between nodes,
/// blocks, workers and plugins.
pub fn check(file: &Path, wf: &Workflow, builtin_plugins: &[&str]) -> Vec<ManifestError> {
    let mut errors = Vec::new();
    let mut err = |at: String, message: String| {
        errors.push(ManifestError {
            file: file.to_path_buf(),
            location: Some(at),
            message,
        })
    };
    let plugin_known =
        |name: &str| wf.plugins.contains_key(name) || builtin_plugins.contains(&name);

    if wf.id.trim().is_empty() {
        err(pointer(&["id"]), "workflow id must not be empty".into());
    }
    if wf.nodes.is_empty() {
        err(
            pointer(&["nodes"]),
            "a workflow needs at least one node".into(),
        );
    }
    if !wf.nodes.contains_key(&wf.start_node) {
        err(
            pointer(&["start_node"]),
            format!("start node `{}` is not defined in `nodes`", wf.start_node),
        );
    }
    if !plugin_known(&wf.action_handler) {
        err(
            pointer(&["action_handler"]),
            format!(
                "action handler `{}` is neither built in nor declared in `plugins`",
                wf.action_handler
            ),
        );
    }
    if let Some(schema) = &wf.inputs {
        for p in crate::inputs::check_schema(schema) {
            err(p.pointer, p.message);
        }
    }
    for (at, message) in crate::template::check(wf) {
        let parts: Vec<&str> = at.iter().map(String::as_str).collect();
        err(pointer(&parts), message);
    }
    for (name, spec) in &wf.plugins {
        match &spec.path {
            Some(path) if path.as_os_str().is_empty() => err(
                pointer(&["plugins", name, "path"]),
                "plugin path must not be empty".into(),
            ),
            None if !builtin_plugins.contains(&name.as_str()) => err(
                pointer(&["plugins", name]),
                format!(
                    "plugin `{name}` has no `path` and is not built in (built in: {})",
                    builtin_plugins.join(", ")
                ),
            ),
            _ => {}
        }
        for (i, grant) in spec.grants.iter().enumerate() {
            if crate::capabilities::find(grant).is_none() {
                let offered: Vec<&str> = crate::capabilities::CAPABILITIES
                    .iter()
                    .map(|c| c.name)
                    .collect();
                err(
                    pointer(&["plugins", name, "grants", &i.to_string()]),
                    format!(
                        "`{grant}` is not a capability this host offers (offered: {})",
                        if offered.is_empty() {
                            "none yet".to_string()
                        } else {
                            offered.join(", ")
                        }
                    ),
                );
            }
        }
    }
    for (verb, handler) in &wf.action_handlers {
        let at = pointer(&["action_handlers", verb]);
        if verb.is_empty()
            || !verb
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        {
            err(
                at.clone(),
                format!("action verb `{verb}` must be upper-case letters, digits and `_`"),
            );
        }
        if CORE_VERBS.contains(&verb.as_str()) {
            err(
                at.clone(),
                format!("`{verb}` is a verb of the core grammar and cannot be re-registered"),
            );
        }
        if !plugin_known(handler) {
            err(
                at,
                format!("action handler `{handler}` is neither built in nor declared in `plugins`"),
            );
        }
    }
    for (node_id, node) in &wf.nodes {
        if !is_valid_id(node_id) {
            err(
                pointer(&["nodes", node_id]),
                format!("node name `{node_id}` may only use letters, digits, `_` and `-`"),
            );
        }
        if !node.blocks.contains_key(&node.entry_block) {
            err(
                pointer(&["nodes", node_id, "entry_block"]),
                format!(
                    "entry block `{}` is not a block of node `{node_id}`",
                    node.entry_block
                ),
            );
        }
        for (block_id, block) in &node.blocks {
            let at = |rest: &[&str]| {
                let mut parts = vec!["nodes", node_id.as_str(), "blocks", block_id.as_str()];
                parts.extend_from_slice(rest);
                pointer(&parts)
            };
            if !is_valid_id(block_id) {
                err(
                    at(&[]),
                    format!("block name `{block_id}` may only use letters, digits, `_` and `-`"),
                );
            }
            if !plugin_known(&block.worker) {
                err(
                    at(&["worker"]),
                    format!(
                        "unknown worker `{}`: neither built in ({}) nor declared in `plugins`",
                        block.worker,
                        builtin_plugins.join(", ")
                    ),
                );
            }
            match &block.validation_schema {
                Some(serde_json::Value::String(_)) | None => {}
                Some(schema) => {
                    if let Err(e) = crate::validation::OutputSchema::compile(schema) {
                        err(at(&["validation_schema"]), e);
                    }
                }
            }
            if block.max_attempts == Some(0) {
                err(
                    at(&["max_attempts"]),
                    "max_attempts must be at least 1".into(),
                );
            }
            if let Err((i, e)) = crate::merge::parse_all(&block.payload_merge_strategy) {
                err(
                    at(&["payload_merge_strategy", &i.to_string()]),
                    e.to_string(),
                );
            }
            if let Some(patterns) = &block.file_restrictions
                && let Err(e) = crate::restrictions::RestrictionPlan::new(Some(patterns))
            {
                err(at(&["file_restrictions"]), e.to_string());
            }
            if let Some(group) = &block.parallel {
                if group.lanes.is_empty() {
                    err(
                        at(&["parallel", "lanes"]),
                        "a parallel group needs at least one lane".into(),
                    );
                }
                if group.lanes.len() > MAX_LANES {
                    err(
                        at(&["parallel", "lanes"]),
                        format!(
                            "{} lanes is over the limit of {MAX_LANES}",
                            group.lanes.len()
                        ),
                    );
                }
                if block.validation_schema.is_some() {
                    err(
                        at(&["validation_schema"]),
                        "a parallel block's lanes are not validated against a schema; validate in a block after it".into(),
                    );
                }
                for (lane, spec) in &group.lanes {
                    if !is_valid_id(lane) {
                        err(
                            at(&["parallel", "lanes", lane]),
                            format!("lane name `{lane}` may only use letters, digits, `_` and `-`"),
                        );
                    }
                    if !matches!(
                        spec.config,
                        serde_json::Value::Null | serde_json::Value::Object(_)
                    ) {
                        err(
                            at(&["parallel", "lanes", lane, "config"]),
                            "a lane's config must be an object (merged over the block's)".into(),
                        );
                    }
                    if let Some(patterns) = &spec.file_restrictions
                        && let Err(e) = crate::restrictions::RestrictionPlan::new(Some(patterns))
                    {
                        err(
                            at(&["parallel", "lanes", lane, "file_restrictions"]),
                            e.to_string(),
                        );
                    }
                }
            }
            for (i, t) in block.transitions.iter().enumerate() {
                let idx = i.to_string();
                if t.on_signal.trim().is_empty() {
                    err(
                        at(&["transitions", &idx, "on_signal"]),
                        "on_signal must not be empty".into(),
                    );
                }
                if wf.handler_for(&t.action) != DEFAULT_ACTION_HANDLER {
                    continue;
                }
                let action_at = at(&["transitions", &idx, "action"]);
                match crate::actions::parse(&t.action) {
                    Err(e) => err(action_at, e.to_string()),
                    Ok(EngineCommand::Jump(target)) => {
                        let target_node = target.node.as_deref().unwrap_or(node_id);
                        match wf.nodes.get(target_node) {
                            None => err(
                                action_at,
                                format!(
                                    "`{}` jumps to node `{target_node}`, which does not exist",
                                    t.action
                                ),
                            ),
                            Some(n) if !n.blocks.contains_key(&target.block) => err(
                                action_at,
                                format!(
                                    "`{}` jumps to block `{}`, which does not exist in node `{target_node}`",
                                    t.action, target.block
                                ),
                            ),
                            Some(_) => {}
                        }
                    }
                    Ok(EngineCommand::Call { node, return_to }) => {
                        if !wf.nodes.contains_key(&node) {
                            err(
                                action_at.clone(),
                                format!("`{}` calls node `{node}`, which does not exist", t.action),
                            );
                        }
                        if let Some(back) = return_to {
                            let back_node = back.node.as_deref().unwrap_or(node_id);
                            let exists = wf
                                .nodes
                                .get(back_node)
                                .is_some_and(|n| n.blocks.contains_key(&back.block));
                            if !exists {
                                err(
                                    action_at,
                                    format!(
                                        "`{}` returns to `{back_node}.{}`, which does not exist",
                                        t.action, back.block
                                    ),
                                );
                            }
                        }
                    }
                    Ok(_) => {}
                }
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUILTINS: &[&str] = &["actions-core", "echo"];

    fn manifest(text: &str) -> Result<Workflow, ManifestErrors> {
        let file = Path::new("wf.json");
        let wf = parse(file, text)?;
        let errors = check(file, &wf, BUILTINS);
        if errors.is_empty() {
            Ok(wf)
        } else {
            Err(ManifestErrors(errors))
        }
    }

    fn minimal(action: &str) -> String {
        format!(
            r#"{{"id":"w","start_node":"main","nodes":{{"main":{{"entry_block":"a","blocks":{{
                "a":{{"worker":"echo","transitions":[{{"on_signal":"SIGNAL:SUCCESS","action":"{action}"}}]}},
                "b":{{"worker":"echo"}}}}}}}}}}"#
        )
    }

    #[test]
    fn accepts_a_valid_manifest() {
        let wf = manifest(&minimal("JUMP:b")).unwrap();
        assert_eq!(wf.action_handler, DEFAULT_ACTION_HANDLER);
        assert!(wf.nodes["main"].context_inheritance);
    }

    #[test]
    fn syntax_errors_carry_line_and_column() {
        let err = manifest("{\n  \"id\": \"w\",\n  oops\n}").unwrap_err();
        assert_eq!(err.0[0].location.as_deref(), Some("3:3"));
        assert!(err.to_string().starts_with("wf.json: 3:3: "), "{err}");
    }

    #[test]
    fn unknown_fields_are_refused_with_their_path() {
        let text =
            minimal("END").replace("\"worker\":\"echo\",", "\"worker\":\"echo\",\"wrker\":1,");
        let err = manifest(&text).unwrap_err().to_string();
        assert!(err.contains("unknown field `wrker`"), "{err}");
        assert!(err.contains("nodes.main.blocks.a"), "{err}");
    }

    #[test]
    fn jump_to_a_missing_block_names_the_place() {
        let err = manifest(&minimal("JUMP:nowhere")).unwrap_err();
        assert_eq!(
            err.0[0].location.as_deref(),
            Some("/nodes/main/blocks/a/transitions/0/action")
        );
        assert!(err.0[0].message.contains("`nowhere`"), "{err}");
    }

    #[test]
    fn unknown_worker_is_refused() {
        let text = minimal("END").replacen("\"worker\":\"echo\"", "\"worker\":\"ghost\"", 1);
        let err = manifest(&text).unwrap_err();
        assert_eq!(
            err.0[0].location.as_deref(),
            Some("/nodes/main/blocks/a/worker")
        );
        assert!(err.0[0].message.contains("unknown worker `ghost`"));
    }

    #[test]
    fn missing_start_node_and_entry_block_are_reported() {
        let text = r#"{"id":"w","start_node":"x","nodes":{"main":{"entry_block":"zz","blocks":{"a":{"worker":"echo"}}}}}"#;
        let err = manifest(text).unwrap_err();
        let locations: Vec<_> = err.0.iter().map(|e| e.location.clone().unwrap()).collect();
        assert_eq!(locations, ["/start_node", "/nodes/main/entry_block"]);
    }

    #[test]
    fn calls_and_returns_are_checked() {
        assert!(manifest(&minimal("CALL:main@b")).is_ok());
        assert!(manifest(&minimal("CALL:ghost")).is_err());
        assert!(manifest(&minimal("CALL:main@ghost")).is_err());
    }

    #[test]
    fn bad_merge_instructions_name_their_place() {
        let text = minimal("END").replacen(
            "\"worker\":\"echo\",",
            "\"worker\":\"echo\",\"payload_merge_strategy\":[\"inherit\",\"shuffle\"],",
            1,
        );
        let err = manifest(&text).unwrap_err();
        assert_eq!(
            err.0[0].location.as_deref(),
            Some("/nodes/main/blocks/a/payload_merge_strategy/1")
        );
        assert!(err.0[0].message.contains("`shuffle`"), "{err}");
    }

    #[test]
    fn an_invalid_schema_is_a_manifest_error() {
        let text = minimal("END").replacen(
            "\"worker\":\"echo\",",
            "\"worker\":\"echo\",\"validation_schema\":{\"type\":\"banana\"},",
            1,
        );
        let err = manifest(&text).unwrap_err();
        assert_eq!(
            err.0[0].location.as_deref(),
            Some("/nodes/main/blocks/a/validation_schema")
        );
        assert!(err.0[0].message.contains("invalid JSON Schema"), "{err}");
    }

    #[test]
    fn schema_files_are_loaded_relative_to_the_manifest() {
        let dir = std::env::temp_dir().join(format!("wfhost-schema-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("schemas")).unwrap();
        std::fs::write(dir.join("schemas/plan.json"), r#"{"type":"object"}"#).unwrap();
        let text = minimal("END").replacen(
            "\"worker\":\"echo\",",
            "\"worker\":\"echo\",\"validation_schema\":\"schemas/plan.json\",",
            1,
        );
        std::fs::write(dir.join("wf.json"), &text).unwrap();
        let wf = load(&dir.join("wf.json"), BUILTINS).unwrap();
        let schema = wf.workflow.nodes["main"].blocks["a"]
            .validation_schema
            .clone();
        assert_eq!(schema, Some(serde_json::json!({"type": "object"})));

        std::fs::write(
            dir.join("wf.json"),
            text.replace("plan.json", "missing.json"),
        )
        .unwrap();
        let err = load(&dir.join("wf.json"), BUILTINS)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/nodes/main/blocks/a/validation_schema") && err.contains("missing.json"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn action_verbs_are_checked() {
        let with_handlers = |handlers: &str| {
            minimal("END").replacen(
                "\"start_node\"",
                &format!("\"action_handlers\":{handlers},\"start_node\""),
                1,
            )
        };
        assert!(manifest(&with_handlers(r#"{"ESCALATE":"echo"}"#)).is_ok());
        let err = manifest(&with_handlers(r#"{"JUMP":"echo"}"#)).unwrap_err();
        assert_eq!(err.0[0].location.as_deref(), Some("/action_handlers/JUMP"));
        let err = manifest(&with_handlers(r#"{"lower":"echo"}"#)).unwrap_err();
        assert!(err.0[0].message.contains("upper-case"), "{err}");
        let err = manifest(&with_handlers(r#"{"X":"ghost"}"#)).unwrap_err();
        assert!(err.0[0].message.contains("`ghost`"), "{err}");
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("168h").unwrap(), MAX_DURATION);
        for huge in [
            "99999999999999999999s",
            "10000000000000000000s",
            "92233720368547758s",
            "168.001h",
            "1e400s",
        ] {
            assert!(parse_duration(huge).is_err(), "{huge}");
        }
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("s").is_err());
    }
}
