//! The durable events of a run: the single source of truth.
//!
//! A run is an append-only sequence of [`Event`]s. Everything else — the
//! cursor, the payload, the ReturnStack, attempts, statistics, open gates,
//! the run's status — is a projection computed by folding the events with
//! [`crate::run::state::RunState::apply`]. The engine writes an event *before* it
//! acts on it, so rebuilding the state from the log after a crash gives
//! exactly the state the run had when it died.
//!
//! Events are serialized as JSON objects tagged by `type`; the format is
//! versioned by [`EVENT_FORMAT`]. Additions of optional fields are
//! compatible; anything else bumps the version.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::run::payload::{ContextSegment, ExecutionPayload, Statistics};
use crate::text::count;

/// The version of the event format, recorded in every exported bundle.
///
/// - 1: runs, blocks, transitions, gates, resumptions, forks.
/// - 2: parallel blocks (`lanes_started`, `lane_completed`,
///   `lane:conflict-detected`, `fan_in_waiting`, `fan_in_completed`) and
///   the `use-lane` gate answer. Format 1 is a subset: its logs and bundles
///   still read.
/// - 3: `telemetry` (what an agent sent its `TELEMETRY_URL` while its
///   block ran). Formats 1 and 2 are subsets.
/// - 4: external blocks (`external_awaited`, `inputs_merged`,
///   `checkpointed`): a run resting until an MCP client performs a block.
///   Formats 1 to 3 are subsets.
/// - 5: well-known gates (`UD-APPROVE-DESIGN`, `UD-REVIEW-STRATEGY`, which
///   may open again), their answers (`strategy`, `cancelled`) and
///   `gate_reasked` (an invalid answer to a mandatory gate, recorded; the
///   gate stays open). Formats 1 to 4 are subsets.
/// - 6: gates that ask several questions (`questions` of a `gate`
///   command, each with its own decision id) and their `answers`, which
///   may leave security questions open; `lane_retried` (a lane's failed
///   attempt, run again alone). Formats 1 to 5 are subsets.
/// - 7: free answers (`text`): a gate that asks a plain question ("Use
///   sqlite or postgres?") takes any answer that is none of the other
///   forms. Formats 1 to 6 are subsets.
/// - 8: a run stopped for good by someone is `cancelled` (`run_finished`
///   with `{"status": "cancelled", "by": …, "reason": …}`), no longer a
///   failure whose reason starts with `cancelled`. Formats 1 to 7 are
///   subsets (their cancelled runs stay failed).
/// - 9: durable timers (`timer_started`: a `sleep` block's start records
///   when it is due; the run rests until then and the block completes
///   once). Formats 1 to 8 are subsets.
/// - 10: retry policies (`retry_scheduled`: a failed block runs again
///   once due; `lane_retried` may carry the `wait_ms` and `due_at_ms` of a
///   lane's retry). Formats 1 to 9 are subsets.
/// - 11: fan-outs over a list (`lanes_started.over`: the lanes are the
///   list's items, named `0`, `1`, … and fanned in in item order). Formats
///   1 to 10 are subsets.
pub const EVENT_FORMAT: u32 = 11;

/// The oldest event format this build reads.
pub const OLDEST_EVENT_FORMAT: u32 = 1;

/// A fan-out's lanes for a message: their names, or for a fan-out over
/// a list, the list and the range of its items' lanes.
pub fn lane_list(lanes: &[String], over: Option<&str>) -> String {
    match (over, lanes.len()) {
        (Some(over), 0) => format!("no items of {over}"),
        (Some(over), 1) => format!("the item of {over} (lane 0)"),
        (Some(over), n) => format!("the items of {over} (lanes 0-{})", n - 1),
        (None, _) => lanes.join(", "),
    }
}

/// One thing that happened in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Event {
    /// The first event of every run.
    RunStarted {
        run_id: String,
        workflow_id: String,
        /// `sha256:<hex>` of the pinned, normalized workflow definition.
        workflow_hash: String,
        /// Plugin name → `sha256:<hex>` of the component the run uses.
        #[serde(default)]
        plugins: BTreeMap<String, String>,
        start_node: String,
        start_block: String,
        max_steps: u64,
        max_call_depth: usize,
        /// Where exec blocks that name no executor run (`local`,
        /// `container:IMAGE`, `slurm[:PARTITION]`); empty means local.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        default_executor: String,
        /// The run's inputs (`wfhost run --input/--set`), after defaults,
        /// validated against the workflow's `inputs` schema. Absent in logs
        /// of runs without inputs (and of older wfhost versions).
        #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
        inputs: serde_json::Map<String, serde_json::Value>,
        /// Set when the run is a rerun of another (`wfhost rerun`): which
        /// run, and from which of its steps with what it had then.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rerun_of: Option<RerunOf>,
    },
    /// A block is about to execute. Without a matching
    /// [`Event::BlockCompleted`] the execution was interrupted and runs again.
    BlockStarted {
        step: u64,
        node: String,
        block: String,
        attempt: u32,
    },
    /// A block finished (its worker succeeded or failed); carries
    /// everything the block changed.
    BlockCompleted {
        step: u64,
        node: String,
        block: String,
        /// The signal after validation.
        signal: String,
        payload: PayloadDelta,
        /// The block's structured output, recorded as its artifact.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        artifact: Option<String>,
        statistics: Statistics,
        /// How long the block ran (not counting `queued_us`).
        duration_us: u64,
        /// How long it waited in a queue before it ran (a job waiting for
        /// an agent); absent when it did not wait.
        #[serde(default, skip_serializing_if = "is_zero")]
        queued_us: u64,
        /// Why the worker produced no output, if it did not.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure: Option<String>,
        /// The failure is one no retry mends (the worker said its config
        /// is wrong); absent when false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        permanent: bool,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        log: Vec<String>,
        /// The workspace files the block wrote, as the host applied its
        /// staged changes (blocks with file restrictions); at most
        /// [`MAX_WRITTEN_LISTED`].
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        written: Vec<String>,
    },
    /// The transition chosen for a block's signal, and what its action
    /// handler decided.
    ActionTaken {
        step: u64,
        action: String,
        command: CommandRecord,
        /// Set when the command opens a gate: its id, unique in the run.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        gate_id: Option<String>,
        /// Set when the block had no transition for its signal and its
        /// `SIGNAL:FAIL_DEFAULT` transition was taken instead: the signal
        /// that had none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fallback_for: Option<String>,
    },
    /// A human answered an open gate.
    GateAnswered { gate_id: String, decision: Decision },
    /// A human's answer to a mandatory (well-known) gate was not valid:
    /// the gate stays open and the same question is asked again, at most
    /// [`MAX_REASKS`] times.
    GateReasked {
        gate_id: String,
        /// The answer as given.
        answer: String,
        /// Why it is not valid.
        reason: String,
    },
    /// The run rests at a block whose worker is `external`: a client of
    /// `wfhost mcp` performs it and advances the run with its output.
    /// Nothing has started: the block's start and completion are recorded
    /// together when the client's output arrives.
    ExternalAwaited {
        step: u64,
        node: String,
        block: String,
        attempt: u32,
        /// The block's assembled prompt, as the client was given it.
        prompt: String,
    },
    /// A `sleep` block (its `block_started` just before) waits until
    /// `due_at_ms` (unix ms): the run rests, whatever becomes of its
    /// process, and the block completes with `SIGNAL:SUCCESS` once due.
    TimerStarted {
        step: u64,
        node: String,
        block: String,
        attempt: u32,
        due_at_ms: i64,
    },
    /// The block that just completed (step `step`, attempt `attempt`)
    /// failed with `signal`, and its retry policy runs it again: the run
    /// rests until `due_at_ms` (unix ms), then the block starts its next
    /// attempt. `retry` counts the retries of this failure in a row (1 for
    /// the first); the wait drawn is `wait_ms`.
    RetryScheduled {
        step: u64,
        node: String,
        block: String,
        attempt: u32,
        retry: u32,
        signal: String,
        /// The worker's failure, when the signal is `SIGNAL:WORKER_ERROR`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure: Option<String>,
        wait_ms: u64,
        due_at_ms: i64,
    },
    /// Facts the client of an external block supplied (`context`), merged
    /// key by key into the run's inputs before the block's completion.
    InputsMerged {
        inputs: serde_json::Map<String, serde_json::Value>,
    },
    /// Notes recorded against the snapshot the run rests at, without
    /// advancing it (`workflow_checkpoint`).
    Checkpointed { notes_markdown: String },
    /// The run ended.
    RunFinished { outcome: Outcome },
    /// A host picked the run up again after it stopped without finishing.
    Resumed {
        /// The block execution the crash interrupted, which runs again.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        interrupted: Option<InterruptedBlock>,
    },
    /// The first event of a branch: the run continues from an older
    /// snapshot, leaving the branch it came from intact.
    Forked {
        /// The snapshot id the branch starts from.
        from_snapshot: String,
    },
    /// A parallel block fanned out: its lanes, each with its own step
    /// index (`step + i`), start in isolated workspaces. Recorded once per
    /// execution; a resumed execution re-runs only the lanes without a
    /// [`Event::LaneCompleted`].
    LanesStarted {
        step: u64,
        lanes: Vec<String>,
        /// `concatenate`, `workspace` or `fail-on-conflict`.
        merge_strategy: crate::parallel::fan_in::MergeStrategy,
        /// The list the lanes are made from (`parallel.over`: one lane per
        /// item, named `0`, `1`, …), absent for a manifest's lanes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        over: Option<String>,
    },
    /// An attempt of a lane of the running parallel block failed and the
    /// lane runs again (its `max_attempts` allows more): only that lane.
    LaneRetried {
        step: u64,
        lane: String,
        /// The attempt that failed (1 for the first).
        attempt: u32,
        signal: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure: Option<String>,
        /// The wait before the lane runs again, drawn by the block's
        /// retry policy (absent: at once).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wait_ms: Option<u64>,
        /// When the lane runs again (unix ms), with `wait_ms`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        due_at_ms: Option<i64>,
    },
    /// One lane of the running parallel block finished (in completion
    /// order).
    LaneCompleted {
        step: u64,
        lane: String,
        signal: String,
        /// Files the lane changed (workspace-relative, `.output/` excluded).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        changed: Vec<String>,
        /// Why the lane's worker produced no output, if it did not.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        /// The segments the lane's worker added to the payload.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        payload: Vec<ContextSegment>,
        statistics: Statistics,
        duration_us: u64,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        log: Vec<String>,
    },
    /// Two or more lanes changed the same file (seed 000's
    /// `lane:conflict-detected`, with its fields).
    #[serde(rename = "lane:conflict-detected")]
    LaneConflictDetected {
        step: u64,
        #[serde(rename = "conflictingFile")]
        conflicting_file: String,
        /// The lanes that changed it, in completion order.
        lanes: Vec<String>,
        resolution: crate::parallel::fan_in::Resolution,
        /// The lane whose version is applied; none while the user has not
        /// chosen.
        #[serde(
            rename = "appliedFrom",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        applied_from: Option<String>,
        /// The lanes' `NODE_ID`s (`<node>.<block>.<lane>`, what each lane's
        /// agent saw and named its `.output/block-<NODE_ID>.json` after),
        /// in the order of `lanes`. An optional addition: absent from
        /// events recorded before it.
        #[serde(rename = "laneNodeIds", default, skip_serializing_if = "Vec::is_empty")]
        lane_node_ids: Vec<String>,
        /// The `NODE_ID` of the lane whose version is applied (none while
        /// the user has not chosen, or settled the file by hand). An
        /// optional addition, like `laneNodeIds`.
        #[serde(
            rename = "appliedFromNodeId",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        applied_from_node_id: Option<String>,
    },
    /// `fail-on-conflict` found conflicts the user must resolve: the run
    /// waits at gate `gate_id` until it is answered with a lane choice.
    FanInWaiting {
        step: u64,
        gate_id: String,
        prompt: String,
    },
    /// The lanes' outputs and file changes reached the main workspace.
    FanInCompleted {
        step: u64,
        /// Lane → files copied from it, in completion order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        applied: Vec<(String, Vec<String>)>,
        /// Lane → file changes not merged (`concatenate`, failed lanes).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        discarded: Vec<(String, Vec<String>)>,
        /// The `.output/block-*.json` files collected.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        outputs: Vec<String>,
    },
    /// An agent the running block started sent this to its
    /// `TELEMETRY_URL`. Attributed by the host from the address it was
    /// sent to, never from the body; recorded as it arrives, between the
    /// block's start and its completion. Changes nothing in the run.
    Telemetry {
        step: u64,
        node: String,
        block: String,
        /// The lane of a parallel block that sent it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lane: Option<String>,
        /// What was sent: a JSON object (see `docs/guide/agents.md`).
        body: serde_json::Value,
    },
}

impl Event {
    /// The `type` tag, as stored and shown.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::RunStarted { .. } => "run_started",
            Event::BlockStarted { .. } => "block_started",
            Event::BlockCompleted { .. } => "block_completed",
            Event::ActionTaken { .. } => "action_taken",
            Event::GateAnswered { .. } => "gate_answered",
            Event::GateReasked { .. } => "gate_reasked",
            Event::ExternalAwaited { .. } => "external_awaited",
            Event::TimerStarted { .. } => "timer_started",
            Event::RetryScheduled { .. } => "retry_scheduled",
            Event::InputsMerged { .. } => "inputs_merged",
            Event::Checkpointed { .. } => "checkpointed",
            Event::RunFinished { .. } => "run_finished",
            Event::Resumed { .. } => "resumed",
            Event::Forked { .. } => "forked",
            Event::LanesStarted { .. } => "lanes_started",
            Event::LaneCompleted { .. } => "lane_completed",
            Event::LaneRetried { .. } => "lane_retried",
            Event::LaneConflictDetected { .. } => "lane:conflict-detected",
            Event::FanInWaiting { .. } => "fan_in_waiting",
            Event::FanInCompleted { .. } => "fan_in_completed",
            Event::Telemetry { .. } => "telemetry",
        }
    }

    /// Whether the run is at rest after this event — about to run a block,
    /// waiting at a gate or for an external block — so that a branch can
    /// start here.
    pub fn is_snapshot(&self) -> bool {
        match self {
            Event::RunStarted { .. }
            | Event::Forked { .. }
            | Event::FanInWaiting { .. }
            | Event::ExternalAwaited { .. }
            | Event::TimerStarted { .. }
            | Event::RetryScheduled { .. } => true,
            Event::ActionTaken { command, .. } => {
                !matches!(command, CommandRecord::End | CommandRecord::Fail { .. })
            }
            _ => false,
        }
    }

    /// When the run wakes, if this event puts it to rest on a timer: a
    /// `sleep` block's or a retry's due time (unix ms).
    pub fn due_at_ms(&self) -> Option<i64> {
        match self {
            Event::TimerStarted { due_at_ms, .. } | Event::RetryScheduled { due_at_ms, .. } => {
                Some(*due_at_ms)
            }
            _ => None,
        }
    }

    /// Whether the run is over after this event.
    pub fn ends_run(&self) -> bool {
        matches!(
            self,
            Event::RunFinished { .. }
                | Event::ActionTaken {
                    command: CommandRecord::End | CommandRecord::Fail { .. },
                    ..
                }
        )
    }

    /// A one-line human description. What plugins wrote into the event
    /// (signals, reasons, prompts) is escaped: see [`crate::text::escape`].
    pub fn describe(&self) -> String {
        crate::text::escape(&self.describe_raw())
    }

    fn describe_raw(&self) -> String {
        match self {
            Event::RunStarted {
                workflow_id,
                workflow_hash,
                ..
            } => format!(
                "run of {workflow_id} started ({})",
                short_hash(workflow_hash)
            ),
            Event::BlockStarted {
                step,
                node,
                block,
                attempt,
            } => format!("[{step}] {node}.{block} started (attempt {attempt})"),
            Event::TimerStarted {
                step,
                node,
                block,
                due_at_ms,
                ..
            } => format!(
                "[{step}] {node}.{block} sleeps until {}",
                crate::time::iso_utc(*due_at_ms)
            ),
            Event::RetryScheduled {
                step,
                node,
                block,
                attempt,
                retry,
                signal,
                failure,
                wait_ms,
                due_at_ms,
            } => {
                let mut s = format!(
                    "[{step}] {node}.{block} attempt {attempt} -> {signal}; retry {retry} in {}, at {}",
                    crate::text::wait(*wait_ms),
                    crate::time::iso_utc(*due_at_ms)
                );
                if let Some(why) = failure {
                    s.push_str(&format!(": {why}"));
                }
                s
            }
            Event::BlockCompleted {
                step,
                node,
                block,
                signal,
                duration_us,
                failure,
                ..
            } => {
                let mut s = format!(
                    "[{step}] {node}.{block} -> {signal} ({:.1} ms)",
                    *duration_us as f64 / 1000.0
                );
                if let Some(why) = failure {
                    s.push_str(&format!(": block failed: {why}"));
                }
                s
            }
            Event::ActionTaken {
                step,
                action,
                command,
                gate_id,
                fallback_for,
            } => {
                let fallback = fallback_for
                    .as_ref()
                    .map(|signal| {
                        format!("{signal} -> {}: ", crate::run::transitions::FAIL_DEFAULT)
                    })
                    .unwrap_or_default();
                match gate_id {
                    Some(id) => format!("[{step}] {fallback}{action}: gate {id} opened"),
                    None => format!("[{step}] {fallback}{}", command.after(action)),
                }
            }
            Event::GateAnswered { gate_id, decision } => {
                format!("gate {gate_id} answered: {decision}")
            }
            Event::GateReasked {
                gate_id, reason, ..
            } => format!("gate {gate_id} asked again: {reason}"),
            Event::ExternalAwaited {
                step, node, block, ..
            } => format!("[{step}] {node}.{block} waits for an MCP client to perform it"),
            Event::InputsMerged { inputs } => {
                let keys: Vec<&str> = inputs.keys().map(String::as_str).collect();
                format!("inputs merged: {}", keys.join(", "))
            }
            Event::Checkpointed { notes_markdown } => {
                format!("checkpoint: {}", first_line(notes_markdown))
            }
            Event::RunFinished { outcome } => match outcome {
                Outcome::Succeeded => "run succeeded".to_string(),
                Outcome::Failed { reason } => format!("run failed: {reason}"),
                Outcome::Cancelled { by, reason } => {
                    format!("run {}", Outcome::cancelled_text(by, reason.as_deref()))
                }
            },
            Event::Resumed { interrupted: None } => "resumed".to_string(),
            Event::Resumed {
                interrupted: Some(b),
            } => format!(
                "resumed; [{}] {}.{} was interrupted and runs again",
                b.step, b.node, b.block
            ),
            Event::Forked { from_snapshot } => format!("branch forked from {from_snapshot}"),
            Event::LanesStarted { .. }
            | Event::LaneRetried { .. }
            | Event::LaneCompleted { .. }
            | Event::LaneConflictDetected { .. }
            | Event::FanInWaiting { .. }
            | Event::FanInCompleted { .. } => self.describe_parallel(),
            Event::Telemetry {
                step,
                node,
                block,
                lane,
                body,
            } => {
                let from = match lane {
                    Some(lane) => format!("{node}.{block} lane {lane}"),
                    None => format!("{node}.{block}"),
                };
                let kind = body
                    .get("type")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("event");
                format!("[{step}] telemetry from {from}: {kind}")
            }
        }
    }

    /// [`Event::describe_raw`] of a parallel block's events.
    fn describe_parallel(&self) -> String {
        match self {
            Event::LanesStarted {
                step,
                lanes,
                merge_strategy,
                over,
            } => format!(
                "[{step}] fan-out to {}: {} (merge: {})",
                count(lanes.len() as u64, "lane"),
                lane_list(lanes, over.as_deref()),
                merge_strategy.as_str()
            ),
            Event::LaneRetried {
                step,
                lane,
                attempt,
                signal,
                failure,
                wait_ms,
                ..
            } => {
                let again = match wait_ms {
                    Some(ms) => format!("runs again in {}", crate::text::wait(*ms)),
                    None => "runs again".to_string(),
                };
                let mut s = format!("[{step}] lane {lane} attempt {attempt} -> {signal}, {again}");
                if let Some(why) = failure {
                    s.push_str(&format!(": {why}"));
                }
                s
            }
            Event::LaneCompleted {
                step,
                lane,
                signal,
                changed,
                failure,
                duration_us,
                ..
            } => {
                let mut s = format!(
                    "[{step}] lane {lane} -> {signal} ({:.1} ms, {} changed)",
                    *duration_us as f64 / 1000.0,
                    count(changed.len() as u64, "file")
                );
                if let Some(why) = failure {
                    s.push_str(&format!(": lane failed: {why}"));
                }
                s
            }
            Event::LaneConflictDetected {
                step,
                conflicting_file,
                lanes,
                applied_from,
                ..
            } => format!(
                "[{step}] lane:conflict-detected {} changed by {}{}",
                conflicting_file,
                lanes.join(", "),
                match applied_from {
                    Some(lane) => format!(", applied from {lane}"),
                    None => ", waiting for a choice".to_string(),
                }
            ),
            Event::FanInWaiting { step, gate_id, .. } => {
                format!("[{step}] fan-in: gate {gate_id} opened for a lane choice")
            }
            Event::FanInCompleted {
                step,
                applied,
                discarded,
                outputs,
            } => {
                let files = |lanes: &[(String, Vec<String>)]| {
                    lanes.iter().map(|(_, p)| p.len() as u64).sum::<u64>()
                };
                format!(
                    "[{step}] fan-in: {} applied, {} discarded, {} collected",
                    count(files(applied), "file"),
                    files(discarded),
                    count(outputs.len() as u64, "output")
                )
            }
            _ => String::new(),
        }
    }
}

fn short_hash(hash: &str) -> &str {
    let end = hash.len().min("sha256:".len() + 12);
    &hash[..end]
}

/// The first line of `text`, cut to 80 characters.
fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    let cut: String = line.chars().take(80).collect();
    if cut.len() < line.len() || text.lines().nth(1).is_some() {
        format!("{cut}…")
    } else {
        cut
    }
}

/// A block execution that started and never completed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InterruptedBlock {
    pub step: u64,
    pub node: String,
    pub block: String,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The most written files one `block_completed` lists.
pub const MAX_WRITTEN_LISTED: usize = 100;

/// The run a rerun repeats, and what it starts with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RerunOf {
    pub run_id: String,
    /// The step of that run the rerun starts at (`--from`); absent when
    /// it starts from the beginning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_step: Option<u64>,
    /// The payload that run had before that step, which the rerun starts
    /// with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub payload: ExecutionPayload,
    /// The block outputs (artifacts) it had then.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub artifacts: BTreeMap<String, String>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum Outcome {
    Succeeded,
    Failed {
        reason: String,
    },
    /// Stopped for good by someone (`wfhost cancel`, the HTTP API): not a
    /// failure of the workflow, and never continued.
    Cancelled {
        /// Who: `alice with wfhost cancel`, `the HTTP API (token ci)`.
        by: String,
        /// Why, when they said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl Outcome {
    /// `cancelled by BY` and `: REASON` when one was given.
    pub fn cancelled_text(by: &str, reason: Option<&str>) -> String {
        match reason {
            Some(reason) => format!("cancelled by {by}: {reason}"),
            None => format!("cancelled by {by}"),
        }
    }

    /// Why the run did not succeed: a failure's reason, or who cancelled
    /// it and why; `None` for a success.
    pub fn unsuccessful_reason(&self) -> Option<String> {
        match self {
            Outcome::Succeeded => None,
            Outcome::Failed { reason } => Some(reason.clone()),
            Outcome::Cancelled { by, reason } => {
                Some(Outcome::cancelled_text(by, reason.as_deref()))
            }
        }
    }
}

/// The new payload as a change of the old one: keep the first `keep`
/// segments, then append `push`. Workers usually append to what they were
/// given, so the log stores each segment about once instead of the whole
/// payload at every step.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PayloadDelta {
    pub keep: usize,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub push: Vec<ContextSegment>,
}

impl PayloadDelta {
    /// The delta that turns `old` into `new`.
    pub fn between(old: &[ContextSegment], new: &[ContextSegment]) -> Self {
        let keep = old
            .iter()
            .zip(new.iter())
            .take_while(|(a, b)| a == b)
            .count();
        PayloadDelta {
            keep,
            push: new[keep..].to_vec(),
        }
    }

    /// Apply to `payload`; `None` if the delta keeps more than there is.
    pub fn apply(&self, payload: &mut ExecutionPayload) -> Option<()> {
        if self.keep > payload.len() {
            return None;
        }
        payload.truncate(self.keep);
        payload.extend(self.push.iter().cloned());
        Some(())
    }
}

/// A human's answer at a gate: `approved`
/// or `changes-requested:<text>`; at a fan-in gate (parallel lanes that
/// changed the same files under `fail-on-conflict`), `use-lane:<lane>` for
/// every conflicting file, `use-lane:<file>=<lane>,<file>=<lane>` per file,
/// or `resolved` (the user settled the conflicting files in the workspace by
/// hand; no lane's version of them is applied). At an ordinary gate any
/// other text is a free answer ([`Decision::Text`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "answer", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Decision {
    Approved,
    ChangesRequested {
        text: String,
    },
    /// A lane choice for a fan-in gate: `all` applies to every conflicting
    /// file without its own entry in `files`.
    UseLane {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        all: Option<String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        files: BTreeMap<String, String>,
    },
    /// A fan-in gate's conflicts were resolved by hand in the workspace.
    Resolved,
    /// The answer to `UD-REVIEW-STRATEGY`, canonical.
    Strategy {
        strategy: ReviewStrategy,
    },
    /// A mandatory gate's decision given up: the user deferred or
    /// cancelled it, or gave no valid answer within [`MAX_REASKS`]
    /// re-asks. The run ends blocked ([`MANDATORY_DECISION_MISSING`]).
    Cancelled {
        reason: String,
    },
    /// A free answer to an ordinary gate that asks a plain question
    /// ("Use sqlite or postgres?" — "sqlite"): the run goes on as after
    /// an approval, the answer in its `GATE_DECISION` segment.
    Text {
        text: String,
    },
    /// The answer to a gate that asks several questions
    /// ([`crate::run::questions`]): answers and explicit deferrals (their
    /// resolution reasons) by question id. Questions left out are no
    /// response.
    Answers {
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        answers: BTreeMap<String, String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        deferred: BTreeMap<String, String>,
    },
}

/// The canonical answers to `UD-REVIEW-STRATEGY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ReviewStrategy {
    PerBatch,
    SingleFinal,
}

impl ReviewStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewStrategy::PerBatch => "per-batch",
            ReviewStrategy::SingleFinal => "single-final",
        }
    }

    /// The canonical strategy an answer means: `per-batch` or
    /// `single-final`, or an obvious synonym (case, spaces, dashes and
    /// underscores do not matter): `per batch`, `batch`, `batches`, `each
    /// batch`, `every batch`, `after each batch`, `batch by batch`; `single
    /// final`, `single`, `final`, `final review`, `single review`, `one
    /// final review`, `once`, `at the end`, `once at the end`.
    pub fn normalise(answer: &str) -> Option<ReviewStrategy> {
        let words: Vec<String> = answer
            .to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let words = match words.as_slice() {
            ["review", rest @ ..] => rest,
            all => all,
        };
        match words.join(" ").as_str() {
            "per batch" | "batch" | "batches" | "each batch" | "every batch"
            | "after each batch" | "batch by batch" | "per batch review" => {
                Some(ReviewStrategy::PerBatch)
            }
            "single final"
            | "single"
            | "final"
            | "final review"
            | "single review"
            | "single final review"
            | "one final review"
            | "once"
            | "at the end"
            | "once at the end" => Some(ReviewStrategy::SingleFinal),
            _ => None,
        }
    }
}

/// How many times an invalid answer to a mandatory gate is asked again;
/// the next invalid answer cancels the decision and blocks the run.
pub const MAX_REASKS: u32 = 3;

/// The blocker of a run that ended for want of a mandatory decision.
pub const MANDATORY_DECISION_MISSING: &str = "mandatory_user_decision_missing";

/// The failure reason of a run that ends BLOCKED by `blocker` (seed 001's
/// BLOCKED state): `BLOCKED <blocker>: <detail>`.
pub fn blocked_reason(blocker: &str, detail: &str) -> String {
    format!("BLOCKED {blocker}: {detail}")
}

/// The blocker of a run that failed with `reason`, if it ended BLOCKED.
pub fn blocker_of(reason: &str) -> Option<&str> {
    let rest = reason.strip_prefix("BLOCKED ")?;
    let (blocker, _) = rest.split_once(": ")?;
    (!blocker.is_empty() && blocker.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        .then_some(blocker)
}

/// Parse `answer` as the answer to gate `gate_id`. A well-known gate has
/// its own grammar: `UD-APPROVE-DESIGN` takes an answer that starts with
/// `approved` or `changes-requested:<text>`, `UD-REVIEW-STRATEGY` a
/// strategy ([`ReviewStrategy::normalise`]); both also `defer[:<reason>]`
/// or `cancel[:<reason>]`, which cancels the decision (and blocks the
/// run). Every other gate takes what [`Decision::from_str`] does.
pub fn parse_answer(gate_id: &str, answer: &str) -> Result<Decision, String> {
    use wfhost_actions::grammar::WellKnownGate;
    let Some(gate) = WellKnownGate::from_decision_id(gate_id) else {
        return answer.parse();
    };
    let trimmed = answer.trim();
    if let Some(reason) = crate::run::questions::deferral(trimmed, "the decision") {
        return Ok(Decision::Cancelled { reason });
    }
    match gate {
        WellKnownGate::ApproveDesign => {
            if let Some(rest) = trimmed.strip_prefix("approved")
                && !rest.starts_with(|c: char| c.is_alphanumeric() || c == '-' || c == '_')
            {
                return Ok(Decision::Approved);
            }
            if trimmed.starts_with("changes-requested:") {
                return trimmed.parse().map_err(|_: String| {
                    format!(
                        "`{answer}` is not an answer to {gate_id}: `changes-requested:` needs what to change after the colon (or answer `approved`)"
                    )
                });
            }
            Err(format!(
                "`{answer}` is not an answer to {gate_id}: it must start with `approved` or `changes-requested:<what to change>` (or `defer:<reason>` to give the decision up)"
            ))
        }
        WellKnownGate::ReviewStrategy => ReviewStrategy::normalise(trimmed)
            .map(|strategy| Decision::Strategy { strategy })
            .ok_or_else(|| {
                format!(
                    "`{answer}` is not an answer to {gate_id}: answer `per-batch` or `single-final` (or `defer:<reason>` to give the decision up)"
                )
            }),
    }
}

/// `answer` as a free answer to an ordinary gate that asks a plain
/// question ([`crate::run::state::RunState::parse_answer_in`] says which
/// do): any text that is not
/// empty and not a malformed form of the others — `approved…` other than
/// `approved`, `changes-requested` without the changes, `use-lane:…`
/// (which only a fan-in gate takes) and `defer:` / `cancel:` (which only a
/// mandatory gate takes) stay refused, so a mistyped form is never taken
/// for an answer.
pub fn free_answer(answer: &str) -> Option<Decision> {
    let text = answer.trim();
    let lower = text.to_ascii_lowercase();
    let reserved = ["approved", "changes-requested", "use-lane:"];
    let free = !text.is_empty()
        && !reserved.iter().any(|p| lower.starts_with(p))
        && crate::run::questions::deferral(text, "the decision").is_none();
    free.then(|| Decision::Text {
        text: text.to_string(),
    })
}

impl Decision {
    /// The signal the gating block's transitions see after the answer.
    pub fn signal(&self) -> &'static str {
        match self {
            Decision::Approved => crate::run::transitions::GATE_APPROVED,
            Decision::ChangesRequested { .. } => crate::run::transitions::GATE_CHANGES_REQUESTED,
            // A fan-in gate resumes its block, not a transition.
            Decision::UseLane { .. } | Decision::Resolved => crate::run::transitions::GATE_APPROVED,
            // The strategy itself is in the payload (`GATE_DECISION`).
            Decision::Strategy { .. } => crate::run::transitions::GATE_APPROVED,
            Decision::Cancelled { .. } => crate::run::transitions::GATE_CANCELLED,
            // The answers themselves are in the payload (`GATE_DECISION`).
            Decision::Answers { .. } | Decision::Text { .. } => {
                crate::run::transitions::GATE_APPROVED
            }
        }
    }

    /// The lane chosen for `file`, for a [`Decision::UseLane`].
    pub fn lane_for(&self, file: &str) -> Option<&str> {
        match self {
            Decision::UseLane { all, files } => {
                files.get(file).or(all.as_ref()).map(String::as_str)
            }
            _ => None,
        }
    }
}

impl std::str::FromStr for Decision {
    type Err = String;

    fn from_str(answer: &str) -> Result<Self, String> {
        const FORMS: &str = "an answer is `approved` or `changes-requested:<what to change>` (at a fan-in gate: `use-lane:<lane>`, `use-lane:<file>=<lane>,...` or `resolved`)";
        if answer == "approved" {
            return Ok(Decision::Approved);
        }
        if answer == "resolved" {
            return Ok(Decision::Resolved);
        }
        if let Some(text) = answer.strip_prefix("changes-requested:") {
            let text = text.trim();
            if text.is_empty() {
                return Err(format!(
                    "`changes-requested:` needs the changes after the colon; {FORMS}"
                ));
            }
            return Ok(Decision::ChangesRequested {
                text: text.to_string(),
            });
        }
        if let Some(choice) = answer.strip_prefix("use-lane:") {
            let choice = choice.trim();
            if choice.is_empty() {
                return Err(format!("`use-lane:` needs a lane after the colon; {FORMS}"));
            }
            if !choice.contains('=') {
                return Ok(Decision::UseLane {
                    all: Some(choice.to_string()),
                    files: BTreeMap::new(),
                });
            }
            let mut files = BTreeMap::new();
            for part in choice.split(',') {
                let Some((file, lane)) = part.split_once('=') else {
                    return Err(format!(
                        "`{part}` in `{answer}` is not `<file>=<lane>`; {FORMS}"
                    ));
                };
                let (file, lane) = (file.trim(), lane.trim());
                if file.is_empty() || lane.is_empty() {
                    return Err(format!(
                        "`{part}` in `{answer}` is not `<file>=<lane>`; {FORMS}"
                    ));
                }
                if files.insert(file.to_string(), lane.to_string()).is_some() {
                    return Err(format!("`{file}` is chosen twice in `{answer}`"));
                }
            }
            return Ok(Decision::UseLane { all: None, files });
        }
        Err(format!("`{answer}` is not a gate answer; {FORMS}"))
    }
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Decision::Approved => f.write_str("approved"),
            Decision::Resolved => f.write_str("resolved"),
            Decision::Strategy { strategy } => f.write_str(strategy.as_str()),
            Decision::Cancelled { reason } => write!(f, "cancelled: {reason}"),
            Decision::Text { text } => f.write_str(text),
            Decision::ChangesRequested { text } => write!(f, "changes-requested:{text}"),
            Decision::UseLane {
                all: Some(lane),
                files,
            } if files.is_empty() => {
                write!(f, "use-lane:{lane}")
            }
            Decision::UseLane { files, .. } => {
                let parts: Vec<String> = files.iter().map(|(p, l)| format!("{p}={l}")).collect();
                write!(f, "use-lane:{}", parts.join(","))
            }
            Decision::Answers { answers, deferred } => {
                let mut parts: Vec<String> =
                    answers.iter().map(|(id, a)| format!("{id}: {a}")).collect();
                parts.extend(deferred.iter().map(|(id, r)| format!("{id}: {r}")));
                if parts.is_empty() {
                    f.write_str("no answers")
                } else {
                    f.write_str(&parts.join("; "))
                }
            }
        }
    }
}

/// What the engine did with an action handler's command, resolved against
/// the pinned workflow (full `node.block` addresses, the callee's entry
/// block, whether it is isolated), so that folding the log needs nothing
/// but the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum CommandRecord {
    Jump {
        /// `node.block`.
        to: String,
    },
    Call {
        node: String,
        /// The callee's entry block.
        entry: String,
        /// `node.block` the matching RETURN goes back to.
        return_to: String,
        /// The callee does not inherit context (`context_inheritance:
        /// false`): the caller's payload and artifacts are set aside.
        isolated: bool,
    },
    Return,
    End,
    Fail {
        reason: String,
    },
    Gate {
        prompt: String,
        /// A gate that asks several questions: each with its own decision
        /// id, the first being the gate's.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        questions: Vec<crate::run::questions::GateQuestion>,
    },
}

impl CommandRecord {
    /// The line that says what `action` did ([`action_line`]).
    pub fn after(&self, action: &str) -> String {
        action_line(action, &self.to_string())
    }
}

/// `ACTION: COMMAND` — an action and what it did, as [`CommandRecord`]
/// displays it — or the action alone when the command only repeats it
/// (`FAIL:reason` failing with that reason), so a reason is shown once.
pub fn action_line(action: &str, command: &str) -> String {
    let repeats = action.strip_prefix("FAIL:").is_some_and(|reason| {
        command
            .strip_prefix("fail: ")
            .is_some_and(|c| c.trim() == reason.trim())
    });
    match repeats {
        true => action.to_string(),
        false => format!("{action}: {command}"),
    }
}

impl std::fmt::Display for CommandRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommandRecord::Jump { to } => write!(f, "jump to {to}"),
            CommandRecord::Call {
                node, return_to, ..
            } => write!(f, "call {node} (return to {return_to})"),
            CommandRecord::Return => f.write_str("return"),
            CommandRecord::End => f.write_str("end"),
            CommandRecord::Fail { reason } => write!(f, "fail: {reason}"),
            CommandRecord::Gate { prompt, .. } => write!(f, "gate: {prompt}"),
        }
    }
}

/// Where the engine writes events. An implementation must make an event
/// durable before returning: the engine acts on an event only after
/// `append` succeeded.
pub trait EventSink: Send {
    /// Durably append `events`, all or none.
    fn append(&mut self, events: &[Event]) -> Result<(), SinkError>;

    /// Durably append `events` (ending with a block's start) and queue
    /// `job`, the block's execution, in the same commit: all or none. A
    /// sink that keeps no jobs appends the events; the host then queues
    /// the job when it is asked to run the block.
    fn append_with_job(&mut self, events: &[Event], job: &QueuedJob) -> Result<(), SinkError> {
        let _ = job;
        self.append(events)
    }

    /// A gate id not used before in this run (including other branches).
    fn new_gate_id(&mut self) -> Result<String, SinkError>;

    /// `n` (≥ 1) consecutive gate ids not used before, for a gate that
    /// asks `n` questions.
    fn new_gate_ids(&mut self, n: usize) -> Result<Vec<String>, SinkError> {
        let first = self.new_gate_id()?;
        let number = gate_number(&first)
            .ok_or_else(|| SinkError(format!("gate id `{first}` is not `UD-<N>`")))?;
        // A sink that counts the ids it hands out moves past all of them.
        for _ in 1..n {
            self.new_gate_id()?;
        }
        Ok((number..number + n.max(1)).map(gate_id).collect())
    }
}

/// A block execution that the host hands to someone else (`wfhost
/// serve`'s agents) as a job. The engine asks the host for it
/// ([`crate::run::engine::BlockRunner::job_for`]) before recording the block's
/// start, and the sink queues it in the same commit as that start — which
/// is also the commit of the previous block's completion and the action
/// taken on it. So a recorded start always has its job, and a result and
/// the scheduling of what follows it are one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedJob {
    pub step: u64,
    pub node: String,
    pub block: String,
    /// What an agent must be able to run it with (`wasm`, `exec`, …).
    pub requires: Vec<String>,
    /// What the agent is given; opaque to the engine.
    pub request: String,
}

/// The sink could not record an event; the run stops where it is and can
/// be resumed from the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SinkError(pub String);

/// An in-memory log, for tests and embedding.
#[derive(Debug, Default, Clone)]
pub struct MemoryLog {
    pub events: Vec<Event>,
}

impl EventSink for MemoryLog {
    fn append(&mut self, events: &[Event]) -> Result<(), SinkError> {
        self.events.extend_from_slice(events);
        Ok(())
    }

    fn new_gate_id(&mut self) -> Result<String, SinkError> {
        Ok(gate_id(count_gates(&self.events) + 1))
    }
}

/// A sink that keeps nothing (benchmarks, throwaway runs).
#[derive(Debug, Default, Clone, Copy)]
pub struct DiscardLog {
    gates: usize,
}

impl EventSink for DiscardLog {
    fn append(&mut self, _events: &[Event]) -> Result<(), SinkError> {
        Ok(())
    }

    fn new_gate_id(&mut self) -> Result<String, SinkError> {
        self.gates += 1;
        Ok(gate_id(self.gates))
    }
}

/// Gate ids follow seed 001's sequential decision ids: `UD-1`, `UD-2`, …
pub fn gate_id(n: usize) -> String {
    format!("UD-{n}")
}

/// The number of a sequential gate id `UD-<N>`; `None` for a well-known
/// id or anything else.
pub fn gate_number(id: &str) -> Option<usize> {
    id.strip_prefix("UD-")
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))?
        .parse()
        .ok()
}

/// The highest sequential gate number `events` opened (0 when none), so
/// that the next ad-hoc gate is `UD-<highest + 1>`; well-known gates
/// (`UD-APPROVE-DESIGN`, …) do not count.
pub fn count_gates<'a>(events: impl IntoIterator<Item = &'a Event>) -> usize {
    events
        .into_iter()
        .filter_map(|e| match e {
            Event::ActionTaken {
                command: CommandRecord::Gate { questions, .. },
                gate_id: Some(id),
                ..
            } => questions
                .iter()
                .map(|q| q.id.as_str())
                .chain([id.as_str()])
                .filter_map(gate_number)
                .max(),
            Event::ActionTaken {
                gate_id: Some(id), ..
            }
            | Event::FanInWaiting { gate_id: id, .. } => gate_number(id),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_delta_round_trips() {
        let seg = |c: &str| ContextSegment::new(c, "T", c);
        let old = vec![seg("a"), seg("b"), seg("c")];
        for new in [
            vec![],
            vec![seg("a")],
            vec![seg("a"), seg("b"), seg("c"), seg("d")],
            vec![seg("x"), seg("b")],
            vec![seg("a"), seg("b"), seg("z")],
        ] {
            let delta = PayloadDelta::between(&old, &new);
            let mut rebuilt = old.clone();
            delta.apply(&mut rebuilt).unwrap();
            assert_eq!(rebuilt, new);
        }
        let appended = PayloadDelta::between(&old, &[old.clone(), vec![seg("d")]].concat());
        assert_eq!(appended.keep, 3);
        assert_eq!(appended.push.len(), 1);
        assert!(
            PayloadDelta {
                keep: 9,
                push: vec![]
            }
            .apply(&mut old.clone())
            .is_none()
        );
    }

    #[test]
    fn only_the_two_decision_forms_are_answers() {
        assert_eq!("approved".parse(), Ok(Decision::Approved));
        assert_eq!(
            "changes-requested: split the plan".parse(),
            Ok(Decision::ChangesRequested {
                text: "split the plan".into()
            })
        );
        for bad in [
            "",
            "Approved",
            "approved!",
            "yes",
            "changes-requested:",
            "changes-requested:  ",
            "rejected",
        ] {
            let err = bad.parse::<Decision>().unwrap_err();
            assert!(
                err.contains("approved") && err.contains("changes-requested"),
                "{err}"
            );
        }
    }

    #[test]
    fn well_known_gates_have_their_own_grammar() {
        let approve = |a: &str| parse_answer("UD-APPROVE-DESIGN", a);
        assert_eq!(approve("approved"), Ok(Decision::Approved));
        assert_eq!(approve("  approved: ship it "), Ok(Decision::Approved));
        assert_eq!(approve("approved, nice"), Ok(Decision::Approved));
        assert_eq!(
            approve("changes-requested: split module X"),
            Ok(Decision::ChangesRequested {
                text: "split module X".into()
            })
        );
        for bad in [
            "",
            "yes",
            "approvedly",
            "Approved",
            "changes-requested:",
            "lgtm",
            "per-batch",
        ] {
            let err = approve(bad).unwrap_err();
            assert!(
                err.contains("UD-APPROVE-DESIGN") && err.contains("approved"),
                "{bad}: {err}"
            );
        }
        assert_eq!(
            approve("defer: next sprint"),
            Ok(Decision::Cancelled {
                reason: "user deferred: next sprint".into()
            })
        );
        assert!(matches!(approve("cancel"), Ok(Decision::Cancelled { .. })));
        assert!(approve("deferred").is_err());

        let strategy = |a: &str| parse_answer("UD-REVIEW-STRATEGY", a);
        for per_batch in [
            "per-batch",
            "per batch",
            "Per_Batch",
            "batch",
            "each batch",
            "after each batch",
            "every batch.",
        ] {
            assert_eq!(
                strategy(per_batch),
                Ok(Decision::Strategy {
                    strategy: ReviewStrategy::PerBatch
                }),
                "{per_batch}"
            );
        }
        for single in [
            "single-final",
            "single final",
            "final",
            "once at the end",
            "Single",
            "review: final",
        ] {
            assert_eq!(
                strategy(single),
                Ok(Decision::Strategy {
                    strategy: ReviewStrategy::SingleFinal
                }),
                "{single}"
            );
        }
        for bad in ["", "approved", "sometimes", "per-file", "batch final"] {
            assert!(strategy(bad).unwrap_err().contains("per-batch"), "{bad}");
        }
        // Only canonical values are persisted: the event says `per-batch`.
        let event = Event::GateAnswered {
            gate_id: "UD-REVIEW-STRATEGY".into(),
            decision: strategy("each batch").unwrap(),
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json["decision"],
            serde_json::json!({"answer": "strategy", "strategy": "per-batch"})
        );
        assert_eq!(serde_json::from_value::<Event>(json).unwrap(), event);
        assert_eq!(strategy("once").unwrap().to_string(), "single-final");
        // Ad-hoc gates keep the general grammar.
        assert_eq!(parse_answer("UD-3", "approved"), Ok(Decision::Approved));
        assert!(parse_answer("UD-3", "approved: fine").is_err());
        assert!(parse_answer("UD-3", "defer: later").is_err());
    }

    #[test]
    fn a_plain_question_takes_a_free_answer() {
        let free = |a: &str| parse_answer("UD-3", a).or_else(|why| free_answer(a).ok_or(why));
        assert_eq!(
            free("  postgres, with a read replica "),
            Ok(Decision::Text {
                text: "postgres, with a read replica".into()
            })
        );
        assert_eq!(free("sqlite").unwrap().to_string(), "sqlite");
        assert_eq!(
            free("sqlite").unwrap().signal(),
            crate::run::transitions::GATE_APPROVED
        );
        // The other forms keep their meaning; their malformed spellings
        // are refused, not taken for an answer.
        assert_eq!(free("approved"), Ok(Decision::Approved));
        for refused in [
            "",
            "   ",
            "changes-requested:",
            "use-lane:",
            "approvedd",
            "CHANGES-REQUESTED:x",
            "cancel",
            "defer: later",
        ] {
            assert!(free(refused).is_err(), "{refused:?}");
        }
        // Without the gate's workflow, only the forms are answers.
        assert!(parse_answer("UD-3", "sqlite").is_err());
        // It is recorded as `text`.
        let json = serde_json::to_value(free("sqlite").unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"answer": "text", "text": "sqlite"})
        );
    }

    #[test]
    fn ad_hoc_gates_continue_from_the_highest_number() {
        let opened = |id: &str| Event::ActionTaken {
            step: 0,
            action: "GATE".into(),
            command: CommandRecord::Gate {
                prompt: "?".into(),
                questions: Vec::new(),
            },
            gate_id: Some(id.into()),
            fallback_for: None,
        };
        let log = MemoryLog {
            events: vec![
                opened("UD-APPROVE-DESIGN"),
                opened("UD-4"),
                opened("UD-APPROVE-DESIGN"),
                opened("UD-REVIEW-STRATEGY"),
            ],
        };
        assert_eq!(count_gates(&log.events), 4);
        assert_eq!(log.clone().new_gate_id().unwrap(), "UD-5");
        assert_eq!(MemoryLog::default().new_gate_id().unwrap(), "UD-1");
        assert_eq!(gate_number("UD-APPROVE-DESIGN"), None);
    }

    #[test]
    fn blocked_reasons_name_their_blocker() {
        let reason = blocked_reason(
            MANDATORY_DECISION_MISSING,
            "UD-APPROVE-DESIGN: user deferred",
        );
        assert_eq!(blocker_of(&reason), Some(MANDATORY_DECISION_MISSING));
        assert_eq!(blocker_of("block `a.b`: tests are red"), None);
        assert_eq!(blocker_of("BLOCKED: x"), None);
    }

    #[test]
    fn events_serialize_tagged_and_round_trip() {
        let events = [
            Event::ActionTaken {
                step: 3,
                action: "CALL:sub@after".into(),
                command: CommandRecord::Call {
                    node: "sub".into(),
                    entry: "x".into(),
                    return_to: "main.after".into(),
                    isolated: true,
                },
                gate_id: None,
                fallback_for: None,
            },
            Event::GateAnswered {
                gate_id: "UD-1".into(),
                decision: Decision::ChangesRequested {
                    text: "more tests".into(),
                },
            },
            Event::RunFinished {
                outcome: Outcome::Failed {
                    reason: "no".into(),
                },
            },
        ];
        for e in events {
            let json = serde_json::to_value(&e).unwrap();
            assert_eq!(json["type"], e.kind());
            assert_eq!(serde_json::from_value::<Event>(json).unwrap(), e);
        }
        let unknown = serde_json::json!({"type": "block_started", "step": 0, "node": "a", "block": "b", "attempt": 1, "extra": 1});
        assert!(serde_json::from_value::<Event>(unknown).is_err());
    }
}
