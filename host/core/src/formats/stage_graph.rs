//! The stage-graph form of a workflow, as an HTTP client posts it, and its
//! translation into a wfhost workflow manifest.
//!
//! A stage graph is a DAG of stages: `exec_block` stages run commands,
//! `gate` stages wait for a human. wfhost runs one block at a time on a
//! branch, so [`translate`] flattens the graph into a **topological
//! chain**: the stages run one after another in a topological order of the
//! edges, ties broken by the order of `workflow.nodes` (the earlier stage
//! first). A graph with several entries (stages without an incoming edge)
//! or with a stage of several successors is accepted the same way: its
//! branches run sequentially in that order, never concurrently.
//!
//! Every stage becomes one block of the single node [`NODE`], named after
//! the stage:
//!
//! - an exec stage runs the first-party `exec` worker with its commands
//!   (the stage's `workdir` as each command's `cwd`, its `env` as each
//!   command's overrides, `allow_shell` as the exec policy's allowance,
//!   its executor). `SIGNAL:SUCCESS` continues with the next stage (the
//!   last one ENDs the run). With `max_attempts` 1 a failed or timed-out
//!   command FAILs the run naming the stage; with `max_attempts` N > 1 the
//!   block gets `max_attempts: N` and jumps to itself on
//!   `SIGNAL:EXEC_FAILED` / `SIGNAL:EXEC_TIMEOUT`, so the engine fails the
//!   run naming the block once an N+1th execution is due. A block that
//!   cannot run at all (the policy refused it, a program is missing) FAILs
//!   at once through `SIGNAL:FAIL_DEFAULT`: retrying would not help.
//! - an exec stage one of whose commands sets `timeout_sec` or
//!   `allow_failure` runs as one block per command (the exec worker's
//!   timeout and its stop at the first failure are per block): the first
//!   block is named after the stage, the others `<stage>--2`, `<stage>--3`,
//!   … ([`split_block_id`]), each with its command's `timeout_sec` as the
//!   block's `timeout`. A failed or timed-out command with `allow_failure`
//!   goes on with the next command (the stage succeeds if the rest do);
//!   any other fails the stage as above (a retry runs the stage again from
//!   its first command). Each command then has its own result bundle.
//! - a gate stage that `requires_approval` (the default) is an `echo`
//!   block whose success opens a gate with the stage's `message` as its
//!   prompt; approval continues with the next stage (or ENDs), requested
//!   changes FAIL the run naming the stage.
//! - a gate stage with `requires_approval: false` gets no block at all: it
//!   is recorded as [`StageKind::SkippedGate`] so that
//!   [`stage_statuses`] reports it `skipped`.
//!
//! The translation is refused, with the JSON pointer of what is wrong and
//! the stage at fault, for an unknown field, an id that is not a valid
//! block id or used twice, an edge naming no stage, a cycle, an exec stage
//! without commands, a `timeout_sec` of 0 or over 7 days, a split stage
//! whose `<stage>--N` block would take another stage's id, and
//! for everything the exec safety policy ([`crate::policy::exec::check`]) refuses:
//! a shell without `allow_shell`, a `workdir` outside the project, ….

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::json_pointer::{self, pointer};
use crate::manifest::is_valid_id;
use crate::policy::exec::config::{
    CommandConfig, ContainerOptions, EnvValue, ExecConfig, Executor, SlurmOptions,
};
use crate::policy::exec::{ExecSpec, PolicyViolation};
use crate::run::event::Outcome;
use crate::run::state::{Phase, RunState};

/// The translated manifest's description: the goal (the request's intent,
/// else the graph's), else the graph's description, else its name.
fn describe(request: &StageGraphRequest) -> String {
    let goal = |intent: &Option<Intent>| intent.as_ref().and_then(|i| i.goal.clone());
    let graph = &request.workflow;
    let named = |text: String| match &graph.name {
        Some(name) if !text.contains(name.as_str()) => format!("{name}: {text}"),
        _ => text,
    };
    goal(&request.intent)
        .or_else(|| goal(&graph.intent))
        .or_else(|| graph.description.clone())
        .map(named)
        .or_else(|| graph.name.clone())
        .unwrap_or_else(|| "A workflow translated from the stage-graph form.".into())
}

/// The node of the translated manifest that holds every stage's block.
pub const NODE: &str = "main";
/// The id of translated manifests.
pub const WORKFLOW_ID: &str = "stage-graph";
/// The largest `max_attempts` an exec stage may ask for.
pub const MAX_STAGE_ATTEMPTS: u32 = 100;

/// A stage-graph request: the graph, the project it runs in, its intent.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageGraphRequest {
    pub workflow: StageGraph,
    /// The project directory the run works in (its workspace).
    pub project_path: String,
    #[serde(default)]
    pub intent: Option<Intent>,
}

/// What the workflow is for; its goal becomes the manifest's description.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Intent {
    #[serde(default)]
    pub goal: Option<String>,
}

/// The stages and the edges between them, with what the graph is called
/// and for (as a stage/job daemon's payloads write them).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageGraph {
    /// A name for people.
    #[serde(default)]
    pub name: Option<String>,
    /// What the graph does, for people.
    #[serde(default)]
    pub description: Option<String>,
    /// Its intent, as the request's `intent` (which wins when both say).
    #[serde(default)]
    pub intent: Option<Intent>,
    pub nodes: Vec<Stage>,
    #[serde(default)]
    pub edges: Vec<Edge>,
}

/// One stage: an exec stage carries `exec`, a gate carries `config`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stage {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: StageType,
    #[serde(default)]
    pub exec: Option<ExecStage>,
    #[serde(default)]
    pub config: Option<GateConfig>,
}

/// The kinds of stage the stage-graph form knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageType {
    ExecBlock,
    Gate,
}

/// "Run `from` before `to`."
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edge {
    pub from: String,
    pub to: String,
}

/// An exec stage's block.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecStage {
    /// `"local"` (the default), `"slurm"`, or an object
    /// `{"kind": "local"|"docker"|"container"|"slurm", …options}`: a
    /// container needs an `image` (and takes `cpus`, `memory_mb`), Slurm
    /// takes `partition`, `time_limit`, `cpus_per_task`, `mem_mb`,
    /// `extra_args`.
    #[serde(default = "default_executor")]
    pub executor: Value,
    /// The commands' working directory, relative to the project.
    #[serde(default)]
    pub workdir: Option<String>,
    /// Environment overrides for every command.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// How many times the block may run before the run fails (default 1).
    #[serde(default = "one")]
    pub max_attempts: u32,
    /// Allow shells and shell-like programs (default false).
    #[serde(default)]
    pub allow_shell: bool,
    #[serde(default)]
    pub commands: Vec<StageCommand>,
}

fn default_executor() -> Value {
    Value::String("local".into())
}

fn one() -> u32 {
    1
}

/// One command of an exec stage.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageCommand {
    /// A label for people; not part of the translated manifest.
    #[serde(default)]
    pub name: Option<String>,
    pub argv: Vec<String>,
    /// Kill the command after this many seconds (at most 7 days): it then
    /// counts as failed (timed out).
    #[serde(default)]
    pub timeout_sec: Option<u64>,
    /// Go on with the stage's next command when this one fails or times
    /// out; the stage succeeds if the rest do.
    #[serde(default)]
    pub allow_failure: bool,
}

impl StageCommand {
    /// Whether the command needs a block of its own.
    fn own_block(&self) -> bool {
        self.timeout_sec.is_some() || self.allow_failure
    }
}

/// A gate stage's settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateConfig {
    /// Wait for a human (default true); false skips the stage.
    #[serde(default = "yes")]
    pub requires_approval: bool,
    /// The gate's prompt (default "Approve stage `<id>`?").
    #[serde(default)]
    pub message: Option<String>,
}

fn yes() -> bool {
    true
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            requires_approval: true,
            message: None,
        }
    }
}

/// What a stage became in the translated manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageKind {
    /// An `exec` block.
    Exec,
    /// An `echo` block that opens a gate.
    Gate,
    /// A gate that requires no approval: no block, always `skipped`.
    SkippedGate,
}

/// A stage of a translated graph and the block that runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageInfo {
    pub id: String,
    pub kind: StageKind,
    /// The manifest node of its block ([`NODE`]).
    pub node: String,
    /// Its block: the stage id (empty for a skipped gate).
    pub block: String,
    /// The blocks after `block`, for an exec stage split into one block
    /// per command (see [`split_block_id`]); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_blocks: Vec<String>,
}

impl StageInfo {
    /// Every block of the stage, in run order.
    pub fn blocks(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.block.as_str())
            .filter(|b| !b.is_empty())
            .chain(self.more_blocks.iter().map(String::as_str))
    }
}

/// The block of an exec stage's `k`th command (0-based) when the stage is
/// split into one block per command: the stage id for the first,
/// `<stage>--<k+1>` for the others.
pub fn split_block_id(stage: &str, k: usize) -> String {
    if k == 0 {
        stage.to_string()
    } else {
        format!("{stage}--{}", k + 1)
    }
}

/// Whether an exec stage runs as one block per command: one of its
/// commands has a `timeout_sec` or `allow_failure` (options the exec
/// worker has for a whole block only).
fn is_split(stage: &Stage) -> bool {
    stage
        .exec
        .as_ref()
        .is_some_and(|e| e.commands.iter().any(StageCommand::own_block))
}

/// A stage graph translated: the manifest, its stages in the order they
/// run (skipped gates included) and the project directory.
#[derive(Debug, Clone, PartialEq)]
pub struct Translated {
    /// A wfhost workflow manifest (parses as [`crate::manifest::Workflow`]).
    pub manifest: Value,
    pub stages: Vec<StageInfo>,
    pub project_path: String,
}

/// Why a stage graph cannot be translated (a client error): the stage at
/// fault, the JSON pointer of what is wrong in the request, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageGraphError {
    pub node: Option<String>,
    pub pointer: String,
    pub message: String,
}

impl fmt::Display for StageGraphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() {
            "/"
        } else {
            &self.pointer
        };
        match &self.node {
            Some(node) => write!(f, "stage `{node}` (at {at}): {}", self.message),
            None => write!(f, "at {at}: {}", self.message),
        }
    }
}

impl std::error::Error for StageGraphError {}

impl StageGraphError {
    fn new(node: Option<&str>, pointer: String, message: impl Into<String>) -> Self {
        StageGraphError {
            node: node.map(str::to_string),
            pointer,
            message: message.into(),
        }
    }
}

/// The pointer of a stage's part, e.g. `stage_at(2, &["exec", "workdir"])`.
fn stage_at(index: usize, rest: &[&str]) -> String {
    let index = index.to_string();
    let mut parts = vec!["workflow", "nodes", index.as_str()];
    parts.extend_from_slice(rest);
    pointer(&parts)
}

/// Translate a stage-graph request (see the module documentation for the
/// rules) into a wfhost workflow manifest and the list of its stages.
pub fn translate(graph: &Value) -> Result<Translated, StageGraphError> {
    let request = parse(graph)?;
    if request.project_path.trim().is_empty() {
        return Err(StageGraphError::new(
            None,
            pointer(&["project_path"]),
            "the project path must not be empty",
        ));
    }
    let stages = &request.workflow.nodes;
    let index = check_ids(stages)?;
    let order = topological_order(&request.workflow, &index)?;
    let plan = plan(stages, &order)?;
    let manifest = manifest(&request, &plan)?;
    let stages = plan
        .iter()
        .map(|p| StageInfo {
            id: p.stage.id.clone(),
            kind: p.kind,
            node: NODE.to_string(),
            block: match p.kind {
                StageKind::SkippedGate => String::new(),
                _ => p.stage.id.clone(),
            },
            more_blocks: match &p.stage.exec {
                Some(exec) if is_split(p.stage) => (1..exec.commands.len())
                    .map(|k| split_block_id(&p.stage.id, k))
                    .collect(),
                _ => Vec::new(),
            },
        })
        .collect();
    Ok(Translated {
        manifest,
        stages,
        project_path: request.project_path,
    })
}

/// Parse the request; a serde error names its pointer and, when it is
/// inside a stage, that stage.
fn parse(graph: &Value) -> Result<StageGraphRequest, StageGraphError> {
    serde_path_to_error::deserialize(graph).map_err(|e| {
        let at = json_pointer::of_path(e.path());
        let node = stage_of_pointer(graph, &at);
        StageGraphError::new(node.as_deref(), at, e.into_inner().to_string())
    })
}

/// The id of the stage a pointer `/workflow/nodes/N/…` is inside of.
fn stage_of_pointer(graph: &Value, at: &str) -> Option<String> {
    let index = at.strip_prefix("/workflow/nodes/")?.split('/').next()?;
    graph
        .pointer(&format!("/workflow/nodes/{index}/id"))?
        .as_str()
        .map(str::to_string)
}

/// Ids are valid block ids and unique; returns id → position.
fn check_ids(stages: &[Stage]) -> Result<HashMap<&str, usize>, StageGraphError> {
    if stages.is_empty() {
        return Err(StageGraphError::new(
            None,
            pointer(&["workflow", "nodes"]),
            "the stage graph has no stages",
        ));
    }
    let mut index = HashMap::new();
    for (i, stage) in stages.iter().enumerate() {
        let id = stage.id.as_str();
        let fail = |message: String| {
            Err(StageGraphError::new(
                Some(id),
                stage_at(i, &["id"]),
                message,
            ))
        };
        if !is_valid_id(id) {
            return fail(format!(
                "stage id `{}` may only use letters, digits, `_` and `-`",
                id.escape_debug()
            ));
        }
        if let Some(first) = index.insert(id, i) {
            return fail(format!(
                "stage id `{id}` is used twice (first by stage {first})"
            ));
        }
    }
    check_split_ids(stages, &index)?;
    Ok(index)
}

/// The blocks of a split stage (`<stage>--2`, …) must not take another
/// stage's id.
fn check_split_ids(stages: &[Stage], index: &HashMap<&str, usize>) -> Result<(), StageGraphError> {
    for stage in stages.iter().filter(|s| is_split(s)) {
        let count = stage.exec.as_ref().map_or(0, |e| e.commands.len());
        for k in 1..count {
            let block = split_block_id(&stage.id, k);
            if let Some(&other) = index.get(block.as_str()) {
                return Err(StageGraphError::new(
                    Some(&stage.id),
                    stage_at(other, &["id"]),
                    format!(
                        "stage `{}` runs its command {} as block `{block}` (its commands have `timeout_sec` or `allow_failure`), which is also a stage id: rename that stage",
                        stage.id,
                        k + 1
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The stages in a topological order of the edges, ties broken by their
/// position in `nodes`; a cycle is refused naming a stage on it.
fn topological_order(
    graph: &StageGraph,
    index: &HashMap<&str, usize>,
) -> Result<Vec<usize>, StageGraphError> {
    let n = graph.nodes.len();
    let mut successors = vec![Vec::new(); n];
    let mut incoming = vec![0usize; n];
    for (j, edge) in graph.edges.iter().enumerate() {
        let (from, to) = edge_ends(edge, j, index)?;
        successors[from].push(to);
        incoming[to] += 1;
    }
    let mut ready: BTreeSet<usize> = (0..n).filter(|&i| incoming[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &next in &successors[i] {
            incoming[next] -= 1;
            if incoming[next] == 0 {
                ready.insert(next);
            }
        }
    }
    if order.len() < n {
        return Err(cycle_error(graph, &incoming));
    }
    Ok(order)
}

/// The positions of an edge's ends; an end that names no stage is refused.
fn edge_ends(
    edge: &Edge,
    j: usize,
    index: &HashMap<&str, usize>,
) -> Result<(usize, usize), StageGraphError> {
    let j_text = j.to_string();
    let end = |name: &str, end: &str, other: &str| {
        index.get(name).copied().ok_or_else(|| {
            let at_fault = if index.contains_key(other) {
                other
            } else {
                name
            };
            StageGraphError::new(
                Some(at_fault),
                pointer(&["workflow", "edges", &j_text, end]),
                format!(
                    "edge {j} (`{}` → `{}`) names `{name}`, which is not a stage",
                    edge.from, edge.to
                ),
            )
        })
    };
    Ok((
        end(&edge.from, "from", &edge.to)?,
        end(&edge.to, "to", &edge.from)?,
    ))
}

/// The error for a graph with a cycle, given the in-degrees Kahn's
/// algorithm left (non-zero exactly for the stages it could not order).
/// Every such stage has a predecessor among them, so walking predecessors
/// from any of them reaches a cycle.
fn cycle_error(graph: &StageGraph, incoming: &[usize]) -> StageGraphError {
    let ids: Vec<&str> = graph.nodes.iter().map(|s| s.id.as_str()).collect();
    let left = |id: &str| {
        ids.iter()
            .position(|s| *s == id)
            .filter(|&i| incoming[i] > 0)
    };
    let predecessor = |i: usize| {
        graph
            .edges
            .iter()
            .filter(|e| e.to == ids[i])
            .find_map(|e| left(&e.from))
    };
    let mut seen: Vec<usize> = Vec::new();
    let mut at = (0..ids.len()).find(|&i| incoming[i] > 0).unwrap_or(0);
    while !seen.contains(&at) {
        seen.push(at);
        match predecessor(at) {
            Some(p) => at = p,
            None => break,
        }
    }
    // `seen` walked the cycle backwards from `at`; name it forwards.
    let start = seen.iter().position(|&i| i == at).unwrap_or(0);
    let mut cycle = vec![ids[at]];
    cycle.extend(seen[start + 1..].iter().rev().map(|&i| ids[i]));
    cycle.push(ids[at]);
    StageGraphError::new(
        Some(ids[at]),
        pointer(&["workflow", "edges"]),
        format!(
            "the edges form a cycle ({}); a stage graph must be acyclic",
            cycle.join(" → ")
        ),
    )
}

/// A stage in run order, with what it becomes.
struct Planned<'a> {
    position: usize,
    stage: &'a Stage,
    kind: StageKind,
}

/// Each stage's kind, in run order; refuses mismatched `exec` / `config`.
fn plan<'a>(stages: &'a [Stage], order: &[usize]) -> Result<Vec<Planned<'a>>, StageGraphError> {
    let mut plan = Vec::with_capacity(order.len());
    for &position in order {
        let stage = &stages[position];
        let refuse = |field: &str, message: &str| {
            Err(StageGraphError::new(
                Some(&stage.id),
                stage_at(position, &[field]),
                message,
            ))
        };
        let kind = match stage.kind {
            StageType::ExecBlock if stage.config.is_some() => {
                return refuse("config", "an exec_block stage takes `exec`, not `config`");
            }
            StageType::ExecBlock if stage.exec.is_none() => {
                return refuse("exec", "an exec_block stage needs `exec`");
            }
            StageType::Gate if stage.exec.is_some() => {
                return refuse("exec", "a gate stage takes `config`, not `exec`");
            }
            StageType::ExecBlock => StageKind::Exec,
            StageType::Gate if gate_config(stage).requires_approval => StageKind::Gate,
            StageType::Gate => StageKind::SkippedGate,
        };
        plan.push(Planned {
            position,
            stage,
            kind,
        });
    }
    Ok(plan)
}

fn gate_config(stage: &Stage) -> GateConfig {
    stage.config.clone().unwrap_or_default()
}

/// The manifest: one node whose blocks are the stages' blocks, chained.
fn manifest(request: &StageGraphRequest, plan: &[Planned<'_>]) -> Result<Value, StageGraphError> {
    let runnable: Vec<&Planned<'_>> = plan
        .iter()
        .filter(|p| p.kind != StageKind::SkippedGate)
        .collect();
    let Some(first) = runnable.first() else {
        return Err(StageGraphError::new(
            None,
            pointer(&["workflow", "nodes"]),
            "nothing to run: every stage is a gate that requires no approval",
        ));
    };
    let mut blocks = Map::new();
    for (k, planned) in runnable.iter().enumerate() {
        let next = match runnable.get(k + 1) {
            Some(p) => format!("JUMP:{}", p.stage.id),
            None => "END".to_string(),
        };
        match &planned.stage.exec {
            Some(exec) if is_split(planned.stage) => {
                blocks.extend(split_exec_blocks(planned, exec, &next)?);
            }
            Some(exec) => {
                blocks.insert(planned.stage.id.clone(), exec_block(planned, exec, &next)?);
            }
            None => {
                blocks.insert(planned.stage.id.clone(), gate_block(planned.stage, &next));
            }
        }
    }
    let description = describe(request);
    let mut manifest = json!({
        "id": WORKFLOW_ID,
        "version": "1.0.0",
        "description": description,
        "start_node": NODE,
        "nodes": { NODE: { "entry_block": first.stage.id, "blocks": blocks } },
    });
    if runnable.iter().any(|p| p.kind == StageKind::Exec) {
        manifest["plugins"] = json!({ "exec": { "grants": ["exec"] } });
    }
    Ok(manifest)
}

/// An exec stage's block: the `exec` worker, its retries and transitions.
fn exec_block(
    planned: &Planned<'_>,
    exec: &ExecStage,
    next: &str,
) -> Result<Value, StageGraphError> {
    let (id, position) = (planned.stage.id.as_str(), planned.position);
    let config =
        serde_json::to_value(exec_config(id, position, exec)?).expect("an exec config serializes");
    let failed = if exec.max_attempts > 1 {
        (format!("JUMP:{id}"), format!("JUMP:{id}"))
    } else {
        (
            format!("FAIL:stage `{id}` failed: a command exited non-zero"),
            format!("FAIL:stage `{id}` failed: a command timed out"),
        )
    };
    let mut block = json!({
        "worker": "exec",
        "config": config,
        "transitions": [
            { "on_signal": "SIGNAL:SUCCESS", "action": next },
            { "on_signal": "SIGNAL:EXEC_FAILED", "action": failed.0 },
            { "on_signal": "SIGNAL:EXEC_TIMEOUT", "action": failed.1 },
            { "on_signal": "SIGNAL:FAIL_DEFAULT",
              "action": format!("FAIL:stage `{id}` could not run its commands") },
        ],
    });
    if exec.max_attempts > 1 {
        block["max_attempts"] = json!(exec.max_attempts);
    }
    Ok(block)
}

/// A split exec stage's blocks: one per command, each with the command's
/// `timeout_sec` as its `timeout`, chained; a failure of a command with
/// `allow_failure` goes on like a success, any other failure fails the
/// stage (or, with `max_attempts` N > 1, runs the stage again from its
/// first command; the first block counts the attempts).
fn split_exec_blocks(
    planned: &Planned<'_>,
    exec: &ExecStage,
    next: &str,
) -> Result<Vec<(String, Value)>, StageGraphError> {
    let (id, position) = (planned.stage.id.as_str(), planned.position);
    let config = exec_config(id, position, exec)?;
    let count = exec.commands.len();
    let mut blocks = Vec::with_capacity(count);
    for (k, (command, wired)) in exec.commands.iter().zip(&config.commands).enumerate() {
        let after = match k + 1 {
            n if n < count => format!("JUMP:{}", split_block_id(id, n)),
            _ => next.to_string(),
        };
        let number = k + 1;
        let failed = if command.allow_failure {
            (after.clone(), after.clone())
        } else if exec.max_attempts > 1 {
            (format!("JUMP:{id}"), format!("JUMP:{id}"))
        } else {
            (
                format!("FAIL:stage `{id}` failed: command {number} exited non-zero"),
                format!("FAIL:stage `{id}` failed: command {number} timed out"),
            )
        };
        let one = ExecConfig {
            commands: vec![wired.clone()],
            ..config.clone()
        };
        let mut block = json!({
            "worker": "exec",
            "config": serde_json::to_value(one).expect("an exec config serializes"),
            "transitions": [
                { "on_signal": "SIGNAL:SUCCESS", "action": after },
                { "on_signal": "SIGNAL:EXEC_FAILED", "action": failed.0 },
                { "on_signal": "SIGNAL:EXEC_TIMEOUT", "action": failed.1 },
                { "on_signal": "SIGNAL:FAIL_DEFAULT",
                  "action": format!("FAIL:stage `{id}` could not run command {number}") },
            ],
        });
        if let Some(seconds) = command.timeout_sec {
            block["timeout"] = json!(format!("{seconds}s"));
        }
        if k == 0 && exec.max_attempts > 1 {
            block["max_attempts"] = json!(exec.max_attempts);
        }
        blocks.push((split_block_id(id, k), block));
    }
    Ok(blocks)
}

/// The `exec` worker's config for a stage, checked by the exec safety
/// policy.
fn exec_config(id: &str, position: usize, exec: &ExecStage) -> Result<ExecConfig, StageGraphError> {
    let refuse = |rest: &[&str], message: String| {
        StageGraphError::new(Some(id), stage_at(position, rest), message)
    };
    if !(1..=MAX_STAGE_ATTEMPTS).contains(&exec.max_attempts) {
        return Err(refuse(
            &["exec", "max_attempts"],
            format!("max_attempts must be between 1 and {MAX_STAGE_ATTEMPTS}"),
        ));
    }
    for (k, command) in exec.commands.iter().enumerate() {
        if let Some(seconds) = command.timeout_sec
            && !(1..=crate::manifest::MAX_DURATION.as_secs()).contains(&seconds)
        {
            return Err(refuse(
                &["exec", "commands", &k.to_string(), "timeout_sec"],
                format!(
                    "timeout_sec must be between 1 and {} (7 days)",
                    crate::manifest::MAX_DURATION.as_secs()
                ),
            ));
        }
    }
    let executor = executor_config(&exec.executor)
        .map_err(|message| refuse(&["exec", "executor"], message))?;
    let cwd = exec.workdir.clone().filter(|w| !w.is_empty());
    let env: BTreeMap<String, EnvValue> = exec
        .env
        .iter()
        .map(|(k, v)| (k.clone(), EnvValue::Plain(v.clone())))
        .collect();
    let config = ExecConfig {
        commands: exec
            .commands
            .iter()
            .map(|c| CommandConfig {
                argv: c.argv.clone(),
                cwd: cwd.clone(),
                env: env.clone(),
            })
            .collect(),
        allow_shell: exec.allow_shell,
        env_passthrough: Vec::new(),
        executor: Some(executor),
    };
    crate::policy::exec::check(&ExecSpec::of_config(&config))
        .map_err(|v| policy_error(id, position, &v))?;
    Ok(config)
}

/// A refusal of the exec safety policy, at the part of the stage it is
/// about.
fn policy_error(id: &str, position: usize, violation: &PolicyViolation) -> StageGraphError {
    let command = violation.index.saturating_sub(1).to_string();
    let rest: Vec<&str> = match violation.rule {
        "non-empty" => vec!["exec", "commands"],
        "cwd-inside" => vec!["exec", "workdir"],
        "env" => vec!["exec", "env"],
        _ => vec!["exec", "commands", &command, "argv"],
    };
    let message = match violation.rule {
        "non-empty" => "an exec stage needs at least one command".to_string(),
        _ => violation.to_string(),
    };
    StageGraphError::new(Some(id), stage_at(position, &rest), message)
}

/// The `exec` worker's `executor` for a stage's executor: `"local"`,
/// `{"container": {…}}` or `{"slurm": {…}}`.
fn executor_config(executor: &Value) -> Result<Executor, String> {
    let (kind, options) = match executor {
        Value::String(kind) => (kind.clone(), None),
        Value::Object(map) => {
            let mut options = map.clone();
            let Some(Value::String(kind)) = options.remove("kind") else {
                return Err("an executor object needs a `kind` string".into());
            };
            (kind, Some(Value::Object(options)))
        }
        _ => return Err("the executor is a name or an object with a `kind`".into()),
    };
    let has_options = options
        .as_ref()
        .is_some_and(|o| o.as_object().is_some_and(|m| !m.is_empty()));
    match kind.as_str() {
        "local" if has_options => Err("the local executor takes no options".into()),
        "local" => Ok(Executor::Local),
        "docker" | "container" => {
            let Some(options) = options else {
                return Err(format!(
                    "the {kind} executor needs an image: write {{\"kind\": \"{kind}\", \"image\": \"…\"}}"
                ));
            };
            let options: ContainerOptions =
                serde_json::from_value(options).map_err(|e| format!("container executor: {e}"))?;
            Ok(Executor::Container(options))
        }
        "slurm" => {
            let options: SlurmOptions =
                serde_json::from_value(options.unwrap_or_else(|| json!({})))
                    .map_err(|e| format!("slurm executor: {e}"))?;
            Ok(Executor::Slurm(options))
        }
        other => Err(format!(
            "unknown executor `{other}` (expected local, docker, container or slurm)"
        )),
    }
}

/// A gate stage's block: an `echo` of its message, then a gate.
fn gate_block(stage: &Stage, next: &str) -> Value {
    let id = &stage.id;
    let message = gate_config(stage)
        .message
        .filter(|m| !m.trim().is_empty())
        .unwrap_or_else(|| format!("Approve stage `{id}`?"));
    json!({
        "worker": "echo",
        "config": { "message": message },
        "transitions": [
            { "on_signal": "SIGNAL:SUCCESS", "action": format!("GATE:{message}") },
            { "on_signal": "SIGNAL:GATE_APPROVED", "action": next },
            { "on_signal": "SIGNAL:GATE_CHANGES_REQUESTED",
              "action": format!("FAIL:changes requested at gate `{id}`") },
            { "on_signal": "SIGNAL:FAIL_DEFAULT",
              "action": format!("FAIL:gate `{id}` could not open") },
        ],
    })
}

/// Each stage's status — `pending`, `running`, `succeeded`, `failed`,
/// `needs_human` or `skipped` — from the folded state of a run of the
/// translated manifest.
///
/// The run is a chain, so one stage is current (where the run is, or where
/// it failed), the stages before it that ran `succeeded` and those after
/// it `pending` — `skipped` once the run has finished and will never reach
/// them; skipped gates are always `skipped`. The current stage
/// is `running` while its block executes, is due again (a retry) or awaits
/// its transition, `pending` when it is due for the first time,
/// `needs_human` at its gate. RunState keeps no per-block outcome, so a
/// failed run blames the block its failure reason names (`block
/// `node.block`…`, as FAIL and `max_attempts` write it), else the last
/// completed block: a run cancelled between two stages blames the earlier.
pub fn stage_statuses(stages: &[StageInfo], state: &RunState) -> Vec<(String, &'static str)> {
    let (current, now) = current_stage(stages, state);
    // A finished run reaches no more stages: those it did not reach are
    // skipped, not pending.
    let finished = matches!(state.phase, Phase::Finished(_));
    stages
        .iter()
        .enumerate()
        .map(|(i, stage)| {
            let ran = stage.blocks().any(|b| state.attempts(&stage.node, b) > 0);
            let status = match current {
                _ if stage.kind == StageKind::SkippedGate => "skipped",
                Some(c) if c == i => now,
                Some(c) if i < c && ran => "succeeded",
                None if ran => "succeeded",
                _ if finished => "skipped",
                _ => "pending",
            };
            (stage.id.clone(), status)
        })
        .collect()
}

/// The position of the run's current stage and its status.
fn current_stage(stages: &[StageInfo], state: &RunState) -> (Option<usize>, &'static str) {
    let find = |key: &str| {
        stages.iter().position(|s| {
            s.kind != StageKind::SkippedGate && s.blocks().any(|b| format!("{}.{b}", s.node) == key)
        })
    };
    match &state.phase {
        Phase::Ready { node, block } => {
            let at = find(&format!("{node}.{block}"));
            // A stage split into one block per command is running once
            // any of its blocks ran.
            let ran = at.is_some_and(|i| {
                let stage = &stages[i];
                stage.blocks().any(|b| state.attempts(&stage.node, b) > 0)
            });
            let busy = state.in_flight.is_some() || state.attempts(node, block) > 0 || ran;
            (at, if busy { "running" } else { "pending" })
        }
        Phase::Deciding { node, block, .. } | Phase::Sleeping { node, block, .. } => {
            (find(&format!("{node}.{block}")), "running")
        }
        Phase::Waiting { node, block, .. } | Phase::Awaiting { node, block, .. } => {
            (find(&format!("{node}.{block}")), "needs_human")
        }
        Phase::Finished(Outcome::Succeeded) => (None, "succeeded"),
        // The stage statuses have no `cancelled`: the stage under way when
        // the run was stopped did not complete.
        Phase::Finished(Outcome::Cancelled { .. }) => {
            (state.previous.as_deref().and_then(find), "failed")
        }
        Phase::Finished(Outcome::Failed { reason }) => {
            let named = named_block(reason).and_then(find);
            (
                named.or_else(|| state.previous.as_deref().and_then(find)),
                "failed",
            )
        }
    }
}

/// The `node.block` a failure reason names first (`block `main.x`: …`).
fn named_block(reason: &str) -> Option<&str> {
    let rest = &reason[reason.find("block `")? + "block `".len()..];
    rest.split('`').next()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::manifest::{Workflow, check};
    use crate::run::event::{CommandRecord, Decision, Event, PayloadDelta};
    use crate::run::payload::Statistics;

    const BUILTINS: &[&str] = &["exec", "actions-core", "echo", "agent", "scripted"];

    /// build → approve (gate) → test.
    fn three_stages() -> Value {
        json!({
            "workflow": {
                "nodes": [
                    {"id": "build", "type": "exec_block", "exec": {
                        "workdir": "app", "env": {"RUST_LOG": "info"},
                        "commands": [{"name": "compile", "argv": ["cargo", "build"]}]}},
                    {"id": "approve", "type": "gate",
                     "config": {"requires_approval": true, "message": "Ship the build?"}},
                    {"id": "test", "type": "exec_block", "exec": {
                        "max_attempts": 3,
                        "commands": [{"argv": ["cargo", "test"]}, {"argv": ["make", "check"]}]}}
                ],
                "edges": [{"from": "build", "to": "approve"}, {"from": "approve", "to": "test"}]
            },
            "project_path": "/srv/projects/app",
            "intent": {"goal": "build, approve and test the app"}
        })
    }

    fn checked(manifest: &Value) -> Workflow {
        let wf: Workflow = serde_json::from_value(manifest.clone()).expect("a manifest");
        let errors = check(Path::new("stage-graph.json"), &wf, BUILTINS);
        assert!(errors.is_empty(), "{errors:?}");
        wf
    }

    fn actions(wf: &Workflow, block: &str) -> Vec<(String, String)> {
        wf.nodes[NODE].blocks[block]
            .transitions
            .iter()
            .map(|t| (t.on_signal.clone(), t.action.clone()))
            .collect()
    }

    fn action(wf: &Workflow, block: &str, signal: &str) -> String {
        actions(wf, block)
            .into_iter()
            .find(|(s, _)| s == signal)
            .map(|(_, a)| a)
            .unwrap_or_else(|| panic!("{block} has no transition for {signal}"))
    }

    #[test]
    fn a_graphs_name_description_and_intent_are_read_as_daemons_write_them() {
        let mut g = three_stages();
        g["workflow"]["name"] = json!("release");
        g["workflow"]["description"] = json!("Build, approve, test.");
        g["workflow"]["intent"] = json!({"goal": "ship it"});
        let describe = |g: &Value| {
            let t = translate(g).unwrap();
            checked(&t.manifest).description.unwrap_or_default()
        };
        // The request's intent wins, named.
        assert_eq!(describe(&g), "release: build, approve and test the app");
        g.as_object_mut().unwrap().remove("intent");
        assert_eq!(describe(&g), "release: ship it");
        g["workflow"].as_object_mut().unwrap().remove("intent");
        assert_eq!(describe(&g), "release: Build, approve, test.");
        g["workflow"].as_object_mut().unwrap().remove("description");
        assert_eq!(describe(&g), "release");
        // Still strict about what it does not know.
        g["workflow"]["title"] = json!("x");
        assert_eq!(translate(&g).unwrap_err().pointer, "/workflow/title");
    }

    #[test]
    fn exec_gate_exec_translates_into_a_checked_chain() {
        let t = translate(&three_stages()).unwrap();
        let wf = checked(&t.manifest);
        assert_eq!(t.project_path, "/srv/projects/app");
        assert_eq!(wf.start_node, NODE);
        assert_eq!(wf.nodes[NODE].entry_block, "build");
        assert_eq!(wf.plugins["exec"].grants, ["exec"]);
        assert_eq!(
            wf.description.as_deref(),
            Some("build, approve and test the app")
        );
        let kinds: Vec<(&str, StageKind, &str)> = t
            .stages
            .iter()
            .map(|s| (s.id.as_str(), s.kind, s.block.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("build", StageKind::Exec, "build"),
                ("approve", StageKind::Gate, "approve"),
                ("test", StageKind::Exec, "test"),
            ]
        );
        let build = &wf.nodes[NODE].blocks["build"];
        assert_eq!(build.worker, "exec");
        assert_eq!(
            build.config,
            json!({"commands": [{"argv": ["cargo", "build"], "cwd": "app", "env": {"RUST_LOG": "info"}}],
                   "allow_shell": false, "executor": "local"})
        );
        assert_eq!(build.max_attempts, None);
        assert_eq!(action(&wf, "build", "SIGNAL:SUCCESS"), "JUMP:approve");
        assert!(action(&wf, "build", "SIGNAL:EXEC_FAILED").starts_with("FAIL:stage `build`"));
        assert_eq!(wf.nodes[NODE].blocks["approve"].worker, "echo");
        assert_eq!(
            action(&wf, "approve", "SIGNAL:SUCCESS"),
            "GATE:Ship the build?"
        );
        assert_eq!(action(&wf, "approve", "SIGNAL:GATE_APPROVED"), "JUMP:test");
        assert!(action(&wf, "approve", "SIGNAL:GATE_CHANGES_REQUESTED").starts_with("FAIL:"));
        assert_eq!(action(&wf, "test", "SIGNAL:SUCCESS"), "END");
        for block in ["build", "approve", "test"] {
            assert!(action(&wf, block, "SIGNAL:FAIL_DEFAULT").starts_with("FAIL:"));
        }
    }

    #[test]
    fn max_attempts_becomes_a_bounded_retry_of_the_block() {
        let wf = checked(&translate(&three_stages()).unwrap().manifest);
        assert_eq!(wf.nodes[NODE].blocks["test"].max_attempts, Some(3));
        assert_eq!(action(&wf, "test", "SIGNAL:EXEC_FAILED"), "JUMP:test");
        assert_eq!(action(&wf, "test", "SIGNAL:EXEC_TIMEOUT"), "JUMP:test");
    }

    /// The config a stage becomes is the exec plugin's own type, read back
    /// whole by it (and by the job queue) as written here.
    #[test]
    fn exec_stages_become_configs_the_exec_plugin_reads() {
        let t = translate(&three_stages()).unwrap();
        let blocks = t.manifest["nodes"][NODE]["blocks"].as_object().unwrap();
        let mut read = 0;
        for block in blocks.values().filter(|b| b["worker"] == "exec") {
            let config = ExecConfig::from_value(&block["config"]).unwrap();
            assert_eq!(serde_json::to_value(&config).unwrap(), block["config"]);
            read += 1;
        }
        assert_eq!(read, 2);
        let err = refused(|g| {
            g["workflow"]["nodes"][0]["exec"]["executor"] =
                json!({"kind": "slurm", "partition": "p", "gpus": 1})
        });
        assert_refused(
            &err,
            "build",
            "/workflow/nodes/0/exec/executor",
            "unknown field `gpus`",
        );
    }

    #[test]
    fn several_entries_and_branches_run_as_one_topological_chain() {
        let exec = |argv: &str| json!({"commands": [{"argv": [argv]}]});
        let graph = json!({
            "workflow": {
                "nodes": [
                    {"id": "report", "type": "exec_block", "exec": exec("report")},
                    {"id": "lint", "type": "exec_block", "exec": exec("lint")},
                    {"id": "fetch", "type": "exec_block", "exec": exec("fetch")},
                    {"id": "unit", "type": "exec_block", "exec": exec("unit")}
                ],
                "edges": [{"from": "fetch", "to": "unit"}, {"from": "lint", "to": "report"},
                          {"from": "unit", "to": "report"}]
            },
            "project_path": "p"
        });
        let t = translate(&graph).unwrap();
        let order: Vec<&str> = t.stages.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(order, ["lint", "fetch", "unit", "report"]);
        let wf = checked(&t.manifest);
        assert_eq!(wf.nodes[NODE].entry_block, "lint");
        assert_eq!(action(&wf, "lint", "SIGNAL:SUCCESS"), "JUMP:fetch");
        assert_eq!(action(&wf, "unit", "SIGNAL:SUCCESS"), "JUMP:report");
        assert_eq!(action(&wf, "report", "SIGNAL:SUCCESS"), "END");
    }

    #[test]
    fn a_gate_without_approval_is_skipped_and_executors_map() {
        let mut graph = three_stages();
        graph["workflow"]["nodes"][1]["config"]["requires_approval"] = json!(false);
        graph["workflow"]["nodes"][0]["exec"]["executor"] = json!("slurm");
        graph["workflow"]["nodes"][2]["exec"]["executor"] =
            json!({"kind": "docker", "image": "rust:1", "cpus": 2.0});
        let t = translate(&graph).unwrap();
        let wf = checked(&t.manifest);
        assert_eq!(t.stages[1].kind, StageKind::SkippedGate);
        assert!(!wf.nodes[NODE].blocks.contains_key("approve"));
        assert_eq!(action(&wf, "build", "SIGNAL:SUCCESS"), "JUMP:test");
        let executor = |b: &str| wf.nodes[NODE].blocks[b].config["executor"].clone();
        assert_eq!(executor("build"), json!({"slurm": {}}));
        assert_eq!(
            executor("test"),
            json!({"container": {"image": "rust:1", "cpus": 2.0}})
        );
    }

    /// The error for `graph` after `edit`.
    fn refused(edit: impl FnOnce(&mut Value)) -> StageGraphError {
        let mut graph = three_stages();
        edit(&mut graph);
        translate(&graph).expect_err("refused")
    }

    fn assert_refused(err: &StageGraphError, node: &str, pointer: &str, says: &str) {
        assert_eq!(err.node.as_deref(), Some(node), "{err}");
        assert_eq!(err.pointer, pointer, "{err}");
        assert!(err.message.contains(says), "{err}");
        assert!(
            err.to_string().contains(&format!("stage `{node}`")),
            "{err}"
        );
    }

    #[test]
    fn graph_errors_name_the_stage_and_the_pointer() {
        let err = refused(|g| g["workflow"]["nodes"][2]["id"] = json!("build"));
        assert_refused(&err, "build", "/workflow/nodes/2/id", "used twice");
        let err = refused(|g| g["workflow"]["edges"][1]["to"] = json!("deploy"));
        assert_refused(
            &err,
            "approve",
            "/workflow/edges/1/to",
            "`deploy`, which is not a stage",
        );
        let err = refused(|g| {
            let edges = g["workflow"]["edges"].as_array_mut().unwrap();
            edges.push(json!({"from": "test", "to": "approve"}));
        });
        assert_refused(
            &err,
            "approve",
            "/workflow/edges",
            "cycle (approve → test → approve)",
        );
    }

    #[test]
    fn stage_errors_name_the_stage_and_the_pointer() {
        let err = refused(|g| {
            g["workflow"]["nodes"][2]["exec"]["commands"][1]["argv"] =
                json!(["bash", "-c", "make"]);
        });
        assert_refused(
            &err,
            "test",
            "/workflow/nodes/2/exec/commands/1/argv",
            "no-shell",
        );
        let err = refused(|g| g["workflow"]["nodes"][0]["exec"]["workdir"] = json!("/etc"));
        assert_refused(
            &err,
            "build",
            "/workflow/nodes/0/exec/workdir",
            "cwd-inside",
        );
        let err = refused(|g| g["workflow"]["nodes"][0]["exec"]["workdir"] = json!("../x"));
        assert_refused(
            &err,
            "build",
            "/workflow/nodes/0/exec/workdir",
            "cwd-inside",
        );
        let err = refused(|g| g["workflow"]["nodes"][2]["exec"]["retries"] = json!(2));
        assert_refused(
            &err,
            "test",
            "/workflow/nodes/2/exec/retries",
            "unknown field `retries`",
        );
        let err = refused(|g| g["workflow"]["nodes"][0]["exec"]["commands"] = json!([]));
        assert_refused(
            &err,
            "build",
            "/workflow/nodes/0/exec/commands",
            "at least one command",
        );
        let err = refused(|g| {
            g["workflow"]["nodes"][0]["exec"]["commands"][0]["timeout_sec"] = json!(0);
        });
        assert_refused(
            &err,
            "build",
            "/workflow/nodes/0/exec/commands/0/timeout_sec",
            "between 1 and 604800",
        );
        let err = refused(|g| {
            g["workflow"]["nodes"][0]["exec"]["commands"][0]["timeout_sec"] = json!(-5);
        });
        assert_refused(
            &err,
            "build",
            "/workflow/nodes/0/exec/commands/0/timeout_sec",
            "invalid value",
        );
        let err = refused(|g| g["workflow"]["nodes"][1]["id"] = json!("ap prove"));
        assert_refused(&err, "ap prove", "/workflow/nodes/1/id", "letters, digits");
        let err = refused(|g| g["workflow"]["nodes"][0]["exec"]["executor"] = json!("docker"));
        assert_refused(
            &err,
            "build",
            "/workflow/nodes/0/exec/executor",
            "needs an image",
        );
        let err = refused(|g| g["workflow"]["nodes"][2]["exec"]["max_attempts"] = json!(0));
        assert_refused(
            &err,
            "test",
            "/workflow/nodes/2/exec/max_attempts",
            "between 1",
        );
        let err = refused(|g| g["workflow"]["nodes"][1]["type"] = json!("exec_block"));
        assert_refused(&err, "approve", "/workflow/nodes/1/config", "takes `exec`");
    }

    #[test]
    fn shells_pass_with_allow_shell_and_request_errors_need_no_stage() {
        let mut graph = three_stages();
        graph["workflow"]["nodes"][0]["exec"]["commands"][0]["argv"] = json!(["sh", "-c", "make"]);
        graph["workflow"]["nodes"][0]["exec"]["allow_shell"] = json!(true);
        let wf = checked(&translate(&graph).unwrap().manifest);
        assert_eq!(
            wf.nodes[NODE].blocks["build"].config["allow_shell"],
            json!(true)
        );
        let err = translate(&json!({"workflow": {"nodes": []}, "project_path": "p"})).unwrap_err();
        assert_eq!((err.node, err.pointer.as_str()), (None, "/workflow/nodes"));
        let err = translate(&json!({"workflow": {"nodes": []}, "project": "p"})).unwrap_err();
        assert_eq!(err.node, None);
        assert!(err.message.contains("unknown field `project`"), "{err}");
    }

    fn started() -> RunState {
        RunState::start(&Event::RunStarted {
            run_id: "run-1".into(),
            workflow_id: WORKFLOW_ID.into(),
            workflow_hash: "sha256:00".into(),
            plugins: BTreeMap::new(),
            start_node: NODE.into(),
            start_block: "build".into(),
            max_steps: 100,
            max_call_depth: 8,
            default_executor: String::new(),
            inputs: Default::default(),
            rerun_of: None,
        })
        .unwrap()
    }

    /// Block `block` runs as step `step` and completes with `signal`.
    fn ran(state: &mut RunState, step: u64, block: &str, attempt: u32, signal: &str) {
        let (node, block) = (NODE.to_string(), block.to_string());
        let events = [
            Event::BlockStarted {
                step,
                node: node.clone(),
                block: block.clone(),
                attempt,
            },
            Event::BlockCompleted {
                step,
                node,
                block,
                signal: signal.into(),
                payload: PayloadDelta::default(),
                artifact: None,
                statistics: Statistics::default(),
                duration_us: 10,
                queued_us: 0,
                failure: None,
                permanent: false,
                log: vec![],
                written: Vec::new(),
            },
        ];
        for event in &events {
            state.apply(event).unwrap();
        }
    }

    fn took(state: &mut RunState, step: u64, command: CommandRecord, gate_id: Option<&str>) {
        let event = Event::ActionTaken {
            step,
            action: "X".into(),
            command,
            gate_id: gate_id.map(str::to_string),
            fallback_for: None,
        };
        state.apply(&event).unwrap();
    }

    fn jump(to: &str) -> CommandRecord {
        CommandRecord::Jump {
            to: format!("{NODE}.{to}"),
        }
    }

    fn statuses(stages: &[StageInfo], state: &RunState) -> Vec<&'static str> {
        stage_statuses(stages, state)
            .into_iter()
            .map(|(_, s)| s)
            .collect()
    }

    #[test]
    fn statuses_follow_the_run_through_its_chain() {
        let stages = translate(&three_stages()).unwrap().stages;
        let mut state = started();
        assert_eq!(statuses(&stages, &state), ["pending", "pending", "pending"]);
        let start = Event::BlockStarted {
            step: 0,
            node: NODE.into(),
            block: "build".into(),
            attempt: 1,
        };
        let mut probe = state.clone();
        probe.apply(&start).unwrap();
        assert_eq!(statuses(&stages, &probe), ["running", "pending", "pending"]);
        ran(&mut state, 0, "build", 1, "SIGNAL:SUCCESS");
        took(&mut state, 0, jump("approve"), None);
        ran(&mut state, 1, "approve", 1, "SIGNAL:SUCCESS");
        let gate = CommandRecord::Gate {
            prompt: "Ship the build?".into(),
            questions: Vec::new(),
        };
        took(&mut state, 1, gate, Some("UD-1"));
        assert_eq!(
            statuses(&stages, &state),
            ["succeeded", "needs_human", "pending"]
        );
        let mut rejected = state.clone();
        let answer = Decision::ChangesRequested { text: "no".into() };
        rejected
            .apply(&Event::GateAnswered {
                gate_id: "UD-1".into(),
                decision: answer,
            })
            .unwrap();
        let fail = CommandRecord::Fail {
            reason: "changes requested at gate `approve`".into(),
        };
        took(&mut rejected, 1, fail, None);
        // The run ended at the gate: the stage after it is never reached.
        assert_eq!(
            statuses(&stages, &rejected),
            ["succeeded", "failed", "skipped"]
        );
        let approved = Event::GateAnswered {
            gate_id: "UD-1".into(),
            decision: Decision::Approved,
        };
        state.apply(&approved).unwrap();
        took(&mut state, 1, jump("test"), None);
        ran(&mut state, 2, "test", 1, "SIGNAL:EXEC_FAILED");
        took(&mut state, 2, jump("test"), None);
        assert_eq!(
            statuses(&stages, &state),
            ["succeeded", "succeeded", "running"]
        );
        ran(&mut state, 3, "test", 2, "SIGNAL:SUCCESS");
        took(&mut state, 3, CommandRecord::End, None);
        assert_eq!(
            statuses(&stages, &state),
            ["succeeded", "succeeded", "succeeded"]
        );
    }

    #[test]
    fn skipped_gates_and_exhausted_retries_show() {
        let mut graph = three_stages();
        graph["workflow"]["nodes"][1]["config"]["requires_approval"] = json!(false);
        let stages = translate(&graph).unwrap().stages;
        let mut state = started();
        assert_eq!(statuses(&stages, &state), ["pending", "skipped", "pending"]);
        ran(&mut state, 0, "build", 1, "SIGNAL:SUCCESS");
        took(&mut state, 0, jump("test"), None);
        ran(&mut state, 1, "test", 1, "SIGNAL:EXEC_FAILED");
        took(&mut state, 1, jump("test"), None);
        let outcome = Outcome::Failed {
            reason: "block `main.test` would run a 4th time, over its max_attempts of 3".into(),
        };
        state.apply(&Event::RunFinished { outcome }).unwrap();
        assert_eq!(
            statuses(&stages, &state),
            ["succeeded", "skipped", "failed"]
        );
    }

    /// `test`'s commands with per-command options: a timeout on the
    /// first, a failure allowed on the second, a third plain one.
    fn split_test_stage() -> Value {
        let mut graph = three_stages();
        graph["workflow"]["nodes"][2]["exec"]["commands"] = json!([
            {"argv": ["cargo", "test"], "timeout_sec": 90},
            {"argv": ["make", "lint"], "allow_failure": true},
            {"argv": ["make", "check"]}
        ]);
        graph
    }

    #[test]
    fn per_command_options_split_a_stage_into_one_block_per_command() {
        let translated = translate(&split_test_stage()).unwrap();
        let wf = checked(&translated.manifest);
        let test = &translated.stages[2];
        assert_eq!(
            test.blocks().collect::<Vec<_>>(),
            ["test", "test--2", "test--3"]
        );
        // Each block runs one command; the first carries the timeout and
        // counts the stage's attempts.
        let blocks = &translated.manifest["nodes"][NODE]["blocks"];
        assert_eq!(
            blocks["test"]["config"]["commands"][0]["argv"],
            json!(["cargo", "test"])
        );
        assert_eq!(
            blocks["test"]["config"]["commands"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        assert_eq!(blocks["test"]["timeout"], json!("90s"));
        assert_eq!(blocks["test"]["max_attempts"], json!(3));
        assert!(blocks["test--2"].get("timeout").is_none());
        assert!(blocks["test--2"].get("max_attempts").is_none());
        assert_eq!(
            blocks["test--3"]["config"]["commands"][0]["argv"],
            json!(["make", "check"])
        );
        // Chained; an allowed failure goes on, another retries the stage.
        assert_eq!(action(&wf, "test", "SIGNAL:SUCCESS"), "JUMP:test--2");
        assert_eq!(action(&wf, "test", "SIGNAL:EXEC_TIMEOUT"), "JUMP:test");
        assert_eq!(action(&wf, "test--2", "SIGNAL:EXEC_FAILED"), "JUMP:test--3");
        assert_eq!(
            action(&wf, "test--2", "SIGNAL:EXEC_TIMEOUT"),
            "JUMP:test--3"
        );
        assert_eq!(action(&wf, "test--3", "SIGNAL:EXEC_FAILED"), "JUMP:test");
        assert_eq!(action(&wf, "test--3", "SIGNAL:SUCCESS"), "END");
        // Without retries, a failure that is not allowed fails the stage.
        let mut once = split_test_stage();
        once["workflow"]["nodes"][2]["exec"]["max_attempts"] = json!(1);
        let wf = checked(&translate(&once).unwrap().manifest);
        assert_eq!(
            action(&wf, "test", "SIGNAL:EXEC_TIMEOUT"),
            "FAIL:stage `test` failed: command 1 timed out"
        );
        // A stage without per-command options stays one block.
        assert!(translated.stages[0].more_blocks.is_empty());
        assert_eq!(
            translated.manifest["nodes"][NODE]["blocks"]
                .as_object()
                .unwrap()
                .len(),
            5
        );
    }

    #[test]
    fn a_split_block_may_not_take_another_stages_id() {
        let mut graph = split_test_stage();
        graph["workflow"]["nodes"][0]["id"] = json!("test--2");
        graph["workflow"]["edges"][0]["from"] = json!("test--2");
        let err = translate(&graph).unwrap_err();
        assert_refused(&err, "test", "/workflow/nodes/0/id", "also a stage id");
    }

    #[test]
    fn a_split_stage_is_one_stage_in_the_statuses() {
        let mut graph = split_test_stage();
        graph["workflow"]["nodes"][1]["config"]["requires_approval"] = json!(false);
        let stages = translate(&graph).unwrap().stages;
        let mut state = started();
        ran(&mut state, 0, "build", 1, "SIGNAL:SUCCESS");
        took(&mut state, 0, jump("test"), None);
        ran(&mut state, 1, "test", 1, "SIGNAL:SUCCESS");
        took(&mut state, 1, jump("test--2"), None);
        // Ready at the stage's second command: still running, not pending.
        assert_eq!(
            statuses(&stages, &state),
            ["succeeded", "skipped", "running"]
        );
        ran(&mut state, 2, "test--2", 1, "SIGNAL:EXEC_FAILED");
        took(&mut state, 2, jump("test--3"), None);
        ran(&mut state, 3, "test--3", 1, "SIGNAL:EXEC_FAILED");
        let fail = CommandRecord::Fail {
            reason: "stage `test` failed: command 3 exited non-zero".into(),
        };
        took(&mut state, 3, fail, None);
        assert_eq!(
            statuses(&stages, &state),
            ["succeeded", "skipped", "failed"]
        );
        // A stage list written before splitting existed still reads.
        let old: Vec<StageInfo> = serde_json::from_value(json!([
            {"id": "a", "kind": "exec", "node": "main", "block": "a"}
        ]))
        .unwrap();
        assert!(old[0].more_blocks.is_empty());
    }
}
