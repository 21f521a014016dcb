//! The workflow manifest: nodes of blocks, their workers and transitions.
//!
//! Manifests are JSON. Unknown fields are refused so that a typo never
//! silently changes behaviour. [`read`], [`parse`] and [`finish`] read,
//! parse and statically check a manifest (`crate::formats::load` does all
//! three for a file in any workflow format); every error names the file
//! and the place (line and column for syntax, a JSON pointer for
//! meaning).

use std::collections::BTreeMap;

use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub mod analysis;
mod check;
pub(crate) mod duration;
pub mod graph;
mod load;
pub mod pinning;
pub mod plugin_ref;
pub mod signals;
pub mod strict_json;

pub use check::check;
pub use duration::{MAX_DURATION, parse_duration};
use duration::{deserialize_duration, serialize_duration};
pub use load::{LoadedWorkflow, ManifestError, ManifestErrors, finish, manifest_dir, parse, read};

/// The name of the default action handler, always available.
pub const DEFAULT_ACTION_HANDLER: &str = "actions-core";

/// The worker of blocks performed outside the host, by the client of
/// `wfhost mcp`: the run rests at such a block (an `external_awaited`
/// event) until the client advances it with the block's output. Not a
/// plugin: no component is loaded for it, and no plugin may take its name.
pub const EXTERNAL_WORKER: &str = "external";

/// Workers the engine performs or awaits itself: `external`, `sleep`
/// (`crate::timers`) and the control blocks (`crate::control`). No component is loaded for them.
pub const ENGINE_WORKERS: &[&str] = &[
    EXTERNAL_WORKER,
    crate::timers::SLEEP_WORKER,
    crate::control::WHEN_WORKER,
    crate::control::LOOP_WORKER,
];

/// Whether `name` is one of [`ENGINE_WORKERS`].
pub fn is_engine_worker(name: &str) -> bool {
    ENGINE_WORKERS.contains(&name)
}

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
    /// `full` (the default) or `lean`: a lean session writes no
    /// `architecture.md`, so its artifact gate is not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_mode: Option<crate::agents::artifact_content::SessionMode>,
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
                .any(|b| b.worker == "agent" || !b.artifact_gates.is_empty())
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
    /// A published plugin package, `oci://REGISTRY/REPOSITORY:TAG` or
    /// `oci://REGISTRY/REPOSITORY@sha256:DIGEST`, installed with
    /// `wfhost plugin install` and pinned by the project's `wfhost.lock`.
    /// Exclusive with `path`.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// Host capabilities granted to this plugin beyond the base sandbox.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<String>,
    /// Where a plugin granted `http` may send requests, and the secrets
    /// the host fills in for each host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<crate::policy::http::HttpGrant>,
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
    /// The worker plugin that executes this block, or `external`: a block
    /// an MCP client of `wfhost mcp` performs (the run waits for it; its
    /// output arrives with `workflow_advance`).
    pub worker: String,
    /// Worker-specific configuration, handed to the worker as JSON. In an
    /// `env` object of it (exec and agent blocks), a value may be
    /// `{"secret": "NAME"}`: a secret of the host that runs the command,
    /// resolved only then, never stored with the run.
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
    /// Run the block again when it fails, after a wait that grows with
    /// each attempt; its transition is taken only once the policy gives
    /// up. On a parallel block, each lane is retried on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<crate::retry::RetryPolicy>,
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
    /// Session artifacts checked for content before the block runs
    /// (`spec.md`, `acceptance.json`, `architecture.md`, `tasks.yaml`,
    /// `status.json` in `.agents-work/<session>/`); a failed check makes
    /// the block end with `SIGNAL:BLOCKED` and the reason, without running
    /// its worker.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifact_gates: Vec<crate::agents::artifact_content::Artifact>,
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

/// The most lanes one parallel group may name in its manifest.
pub const MAX_LANES: usize = 64;

/// The most items a parallel group's `over` list may have: one lane per
/// item. Lanes are made as they start (at most the group's window at
/// once), so what bounds a fan-out is the items' recorded results, not
/// its lanes' workspaces or plugin instances.
pub const MAX_ITEMS: usize = 100_000;

/// A parallel group's lanes and how they are merged back.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParallelGroup {
    /// `workspace` (default: file changes applied in lane completion
    /// order, first finisher wins a conflict), `concatenate` (only the
    /// lanes' `.output/` files are collected) or `fail-on-conflict` (a
    /// conflict pauses the run at a gate until the user chooses a lane).
    #[serde(default)]
    pub merge_strategy: crate::parallel::fan_in::MergeStrategy,
    /// Lane name → what differs in that lane. Each lane's `NODE_ID` is
    /// `<node>.<block>.<lane>`. Absent when `over` makes the lanes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub lanes: BTreeMap<String, LaneSpec>,
    /// One lane per item of a list known only when the block starts:
    /// `inputs.NAME[.KEY…]` (a list in the run's inputs) or
    /// `payload.SEGMENT[.KEY…]` (the newest payload segment with that id,
    /// read as JSON). The lanes are named `0`, `1`, … in item order; the
    /// lane's config and prompt see its item as `{{item}}` (`{{item.KEY}}`
    /// for a key of an object item) and its position as `{{item_index}}`.
    /// Fan-in takes the lanes in item order. Instead of `lanes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over: Option<String>,
    /// At most this many lanes' work runs at once. Absent: all of a
    /// manifest's lanes; for `over`, 64 lanes at a time, or on Slurm as
    /// many as one window of lanes (1,024) so that they go in one job
    /// array. On Slurm also the `%` limit of the lanes' job array;
    /// locally, the lanes' exec commands wait for a free slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_concurrent: Option<u32>,
    /// How many times a lane runs before its failure stands (default 1:
    /// no retry). A failed lane runs again alone, in a fresh workspace; on
    /// Slurm as a job of its own, not the whole array again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_attempts: Option<u32>,
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
    /// Replaces the group's `max_attempts` for this lane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_attempts: Option<u32>,
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

#[cfg(test)]
mod tests;
