//! The Node/Block execution loop (seed 004):
//! assemble context → execute block → look up transition → execute action.
//!
//! Every step is an [`Event`] appended to an [`EventSink`] before the engine
//! acts on it, and the engine's state is the fold of those events
//! ([`RunState`]); a run resumed from its log therefore continues exactly
//! where it stopped.
//!
//! The loop knows nothing about how blocks run. It talks to a
//! [`WorkerHost`] — the host's roles, each a trait of its own:
//! [`BlockRunner`] (executes a block with a named worker plugin),
//! [`Lanes`] (a parallel group's lane workspaces), [`SessionReads`] (the
//! session folder, for artifact gates) and [`TelemetrySource`] (what the
//! blocks' agents send) — and an [`ActionInterpreter`] (which turns an
//! action string into an [`EngineCommand`]); the wasmtime adapter
//! implements them, tests use fakes.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::time::{Duration, Instant};

use crate::command::{BlockRef, EngineCommand};
use crate::manifest::{Block, Node, Workflow};
use crate::run::context::{AssembledContext, Metadata};
use crate::run::event::{
    CommandRecord, Decision, Event, EventSink, Outcome, PayloadDelta, QueuedJob, SinkError,
};
use crate::run::payload::{
    BlockContext, ContextSegment, ExecutionPayload, Statistics, WorkerOutput,
};
pub use crate::run::state::BlockStatistics;
use crate::run::state::{Frame, Phase, ReplayError, RunState};
use crate::run::transitions;
use crate::run::validation::OutputSchema;

/// A request to execute one block.
#[derive(Debug, Clone)]
pub struct BlockRequest {
    /// The worker plugin's name.
    pub worker: String,
    pub context: BlockContext,
    pub payload: ExecutionPayload,
    pub timeout: Option<Duration>,
    /// Set when the block runs as one lane of a parallel group: the worker
    /// works in that lane's isolated workspace.
    pub lane: Option<LaneKey>,
}

/// One lane of a parallel block's execution.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct LaneKey {
    pub run_id: String,
    /// The parallel block's step.
    pub step: u64,
    pub node: String,
    pub block: String,
    pub lane: String,
}

impl LaneKey {
    /// The lane's `NODE_ID` in the agent contract: `<node>.<block>.<lane>`.
    pub fn agent_id(&self) -> String {
        format!("{}.{}.{}", self.node, self.block, self.lane)
    }

    /// A directory name unique in the run.
    pub fn dir_name(&self) -> String {
        format!("step-{}-{}", self.step, self.lane)
    }
}

const NO_LANES: &str = "this host cannot run parallel groups";

/// How many lanes of a parallel block run at once when the group sets no
/// `max_concurrent` (a manifest names at most as many lanes).
pub const DEFAULT_LANE_WINDOW: usize = crate::manifest::MAX_LANES;

/// Why a block produced no output: the worker trapped, returned an error,
/// timed out, hit a limit, or could not be started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockFailure {
    pub message: String,
    /// Whether running the block again cannot mend it (its worker said
    /// its config is wrong: `bad-config`): a retry policy does not retry
    /// it.
    pub permanent: bool,
}

/// The plugin error code of a failure no retry mends: the block's config
/// is wrong.
pub const BAD_CONFIG: &str = "bad-config";

impl BlockFailure {
    /// A failure a retry may mend.
    pub fn new(message: impl Into<String>) -> BlockFailure {
        BlockFailure {
            message: message.into(),
            permanent: false,
        }
    }

    /// A failure no retry mends.
    pub fn permanent(message: impl Into<String>) -> BlockFailure {
        BlockFailure {
            message: message.into(),
            permanent: true,
        }
    }

    /// The failure of a worker that returned plugin error `code`.
    pub fn of_plugin_error(code: &str, message: impl Into<String>) -> BlockFailure {
        BlockFailure {
            message: message.into(),
            permanent: code == BAD_CONFIG,
        }
    }
}

/// The result of executing one block, with the lines it logged.
#[derive(Debug, Clone)]
pub struct BlockResult {
    pub outcome: Result<WorkerOutput, BlockFailure>,
    pub log: Vec<String>,
}

impl BlockResult {
    /// The result with the worker's output held to what the engine
    /// accepts from any worker: a signal of at most
    /// [`transitions::MAX_SIGNAL_BYTES`] without control characters.
    /// Anything else becomes a block failure naming the rule.
    pub fn checked(mut self) -> BlockResult {
        if let Ok(output) = &self.outcome
            && let Err(message) = transitions::check_signal(&output.signal)
        {
            self.outcome = Err(BlockFailure::new(message));
        }
        self
    }
}

/// What the engine needs of the host that runs its blocks, as one bound:
/// the four roles below. Implement the roles; this follows (a blanket
/// impl). A host without lanes, a session folder or telemetry implements
/// that role with an empty `impl` and gets the defaults.
///
/// Implemented by the wasm runtime adapter (`PluginSet`), and by the
/// server's job queue around it.
pub trait WorkerHost: BlockRunner + Lanes + SessionReads + TelemetrySource {}

impl<T: BlockRunner + Lanes + SessionReads + TelemetrySource + ?Sized> WorkerHost for T {}

/// Runs blocks: the one role every host has.
pub trait BlockRunner {
    fn run_block(&self, request: BlockRequest) -> impl Future<Output = BlockResult> + Send;

    /// The job that will stand for `request` (a block that is not part of
    /// a parallel group), when this host runs blocks as jobs: the engine
    /// has the sink queue it in the commit that records the block's start
    /// ([`EventSink::append_with_job`]). `run_block` then finds it. None
    /// (the default): blocks are run here, or queued by `run_block`.
    fn job_for(&self, request: &BlockRequest) -> Option<QueuedJob> {
        let _ = request;
        None
    }

    /// How long the execution of the block at `step` that just ended
    /// waited in a queue before it ran (a job waiting for an agent to
    /// lease it): recorded apart from its duration. Zero (the default)
    /// for a host that runs blocks at once.
    fn queued_time(&self, step: u64) -> Duration {
        let _ = step;
        Duration::ZERO
    }
}

/// The isolated workspaces of a parallel group's lanes. The defaults: no
/// lanes, so a host that keeps them at that runs no parallel group.
pub trait Lanes {
    /// How many of `block`'s lanes run at once: a lane starts (and its
    /// workspace is made) only as another finishes. `max_concurrent` is
    /// the group's limit. The default: that limit, else
    /// [`DEFAULT_LANE_WINDOW`]; a host that batches lanes (a Slurm job
    /// array) or cannot hold that many (a pool of plugin instances) says
    /// otherwise.
    fn lane_window(&self, block: &crate::manifest::Block, max_concurrent: Option<u32>) -> usize {
        let _ = block;
        max_concurrent.map_or(DEFAULT_LANE_WINDOW, |n| n as usize)
    }

    /// These lanes of a parallel block are about to run (the first window
    /// of them, then the ones that start as others finish;
    /// `max_concurrent`: the group's limit on how many do their work at
    /// once, for the host to apply). A host that submits work in batches
    /// (a Slurm job array) waits for these lanes. The default: nothing.
    fn lanes_starting(&self, lanes: &[LaneKey], max_concurrent: Option<u32>) {
        let _ = (lanes, max_concurrent);
    }

    /// Make a fresh workspace for `lane`, replacing a leftover of the same
    /// lane (an interrupted run of it).
    fn create_lane(&self, lane: &LaneKey) -> impl Future<Output = Result<(), String>> + Send {
        let _ = lane;
        async { Err(NO_LANES.to_string()) }
    }

    /// Whether `lane`'s workspace is still there (after a crash).
    fn lane_exists(&self, lane: &LaneKey) -> bool {
        let _ = lane;
        false
    }

    /// The files `lane` changed, workspace-relative, `.output/` excluded.
    fn lane_changes(
        &self,
        lane: &LaneKey,
    ) -> impl Future<Output = Result<Vec<String>, String>> + Send {
        let _ = lane;
        async { Err(NO_LANES.to_string()) }
    }

    /// Bring `files` (as the lane has them: changed, created or removed)
    /// and the lane's new `.output/block-*.json` files into the main
    /// workspace. Returns the output files copied.
    fn merge_lane(
        &self,
        lane: &LaneKey,
        files: &[String],
    ) -> impl Future<Output = Result<Vec<String>, String>> + Send {
        let _ = (lane, files);
        async { Err(NO_LANES.to_string()) }
    }

    /// Remove every lane workspace of the parallel block at `step`.
    fn remove_lanes(&self, run_id: &str, step: u64) -> impl Future<Output = ()> + Send {
        let _ = (run_id, step);
        async {}
    }

    /// Wait until `due_at_ms` (unix ms): a failed lane's retry waits so
    /// before it runs again, while the other lanes go on. The default
    /// returns at once (the core has no clock to wait on): a host that
    /// runs lanes waits for real.
    fn wait_until(&self, due_at_ms: i64) -> impl Future<Output = ()> + Send {
        let _ = due_at_ms;
        async {}
    }
}

/// Reads of the run's session folder (`.agents-work/<session>/`), for
/// artifact gates.
pub trait SessionReads {
    /// The text of `name` in the run's session folder; `Ok(None)` when it
    /// does not exist. The default: this host keeps no session folder.
    fn session_artifact(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<String>, String>> + Send {
        let _ = name;
        async { Err("this host keeps no session folder".to_string()) }
    }
}

/// The telemetry the running blocks' agents send. The defaults: none.
pub trait TelemetrySource {
    /// Telemetry the running blocks' agents sent, as it arrives: resolves
    /// with at least one when there is some. A host that serves no
    /// telemetry endpoint never resolves. Must be cancel-safe: the engine
    /// drops it whenever the block finishes first.
    fn telemetry(&self) -> impl Future<Output = Vec<Telemetry>> + Send {
        std::future::pending()
    }

    /// Telemetry received and not handed over yet (the engine takes it
    /// when a block ends, before recording the completion).
    fn telemetry_now(&self) -> Vec<Telemetry> {
        Vec::new()
    }
}

/// What an agent sent its `TELEMETRY_URL`, attributed by the host to the
/// block execution (and lane) whose address it was sent to.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Telemetry {
    pub step: u64,
    pub node: String,
    pub block: String,
    pub lane: Option<String>,
    pub body: serde_json::Value,
}

impl Telemetry {
    fn event(self) -> Event {
        Event::Telemetry {
            step: self.step,
            node: self.node,
            block: self.block,
            lane: self.lane,
            body: self.body,
        }
    }
}

/// Await `work` (a block or a parallel group's lanes), recording the
/// telemetry that arrives meanwhile as it arrives, and what is left of it
/// when the work is done.
pub(crate) async fn recording_telemetry<W: TelemetrySource, T>(
    workers: &W,
    state: &mut RunState,
    sink: &mut dyn EventSink,
    work: impl Future<Output = T>,
) -> Result<T, EngineError> {
    use futures_util::future::{Either, select};
    let mut work = std::pin::pin!(work);
    let out = loop {
        let arrived = std::pin::pin!(workers.telemetry());
        match select(work.as_mut(), arrived).await {
            Either::Left((out, _)) => break out,
            Either::Right((telemetry, _)) => record_telemetry(state, sink, telemetry)?,
        }
    };
    record_telemetry(state, sink, workers.telemetry_now())?;
    Ok(out)
}

/// Append telemetry of the block running now; anything else (a block
/// that already ended) is dropped, never failing the run.
fn record_telemetry(
    state: &mut RunState,
    sink: &mut dyn EventSink,
    telemetry: Vec<Telemetry>,
) -> Result<(), EngineError> {
    let running = |t: &Telemetry| {
        state
            .in_flight
            .as_ref()
            .is_some_and(|b| b.step == t.step && b.node == t.node && b.block == t.block)
    };
    let events: Vec<Event> = telemetry
        .into_iter()
        .filter(running)
        .map(Telemetry::event)
        .collect();
    if events.is_empty() {
        return Ok(());
    }
    emit(state, sink, events)
}

/// A read-only view of the run for action handlers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunView {
    pub workflow_id: String,
    pub execution_id: String,
    pub node_id: String,
    pub block_id: String,
    pub signal: String,
    pub step_index: u64,
    /// Return addresses, innermost last, as `node.block`.
    pub return_stack: Vec<String>,
}

/// Interprets transition actions. `handler` names the plugin to use.
pub trait ActionInterpreter {
    fn interpret(
        &self,
        handler: &str,
        action: &str,
        view: &RunView,
    ) -> impl Future<Output = Result<EngineCommand, String>> + Send;
}

/// How a run ended, or where it rests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunStatus {
    Succeeded,
    Failed {
        reason: String,
    },
    /// Stopped for good by someone before this process went on with it.
    Cancelled {
        by: String,
        reason: Option<String>,
    },
    /// Paused at a human gate.
    WaitingAtGate {
        gate_id: String,
        node: String,
        block: String,
        prompt: String,
    },
    /// Paused until an MCP client performs the external block
    /// `node.block` ([`complete_external`] goes on).
    AwaitingExternal {
        step: u64,
        node: String,
        block: String,
        prompt: String,
    },
    /// A `sleep` block waits until `due_at_ms` (unix ms): [`drive`] again
    /// once it is due completes the block and goes on. With `retry`, the
    /// block failed and its retry policy runs it again then (retry
    /// `retry`, 1 for the first).
    Sleeping {
        step: u64,
        node: String,
        block: String,
        due_at_ms: i64,
        retry: Option<u32>,
    },
}

/// The outcome of executing a run until it rests.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub status: RunStatus,
    /// Blocks completed over the whole run (not just this session).
    pub steps: u64,
    pub statistics: Statistics,
    /// Wall-clock time of this session.
    pub duration: Duration,
    /// The folded state the run rests in.
    pub state: RunState,
}

impl RunReport {
    /// Per block, keyed `node.block`; bounded by the workflow's size, not
    /// by the number of steps.
    pub fn blocks(&self) -> &BTreeMap<String, BlockStatistics> {
        &self.state.blocks
    }

    /// The payload the run rests with.
    pub fn payload(&self) -> &ExecutionPayload {
        &self.state.payload
    }
}

/// Identity and limits of a new run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub run_id: String,
    /// `sha256:<hex>` of the pinned definition (empty when not pinned).
    pub workflow_hash: String,
    /// Plugin name → digest of the component used.
    pub plugins: BTreeMap<String, String>,
    /// A run that executes more blocks than this fails (JUMP cycles).
    pub max_steps: u64,
    /// Nested CALL depth limit.
    pub max_call_depth: usize,
    /// Where exec blocks that name no executor run, as the operator wrote
    /// it (`wfhost run --executor`); empty means local. Recorded so that a
    /// resumed run keeps it.
    pub default_executor: String,
    /// The run's validated inputs (see [`crate::run::inputs::resolve`]).
    pub inputs: crate::run::inputs::Inputs,
    /// Where the run starts (`node`, `block`) when not at the workflow's
    /// start: a rerun from a step.
    pub start_at: Option<(String, String)>,
    /// The run this one reruns, and what it starts with.
    pub rerun_of: Option<crate::run::event::RerunOf>,
}

impl RunOptions {
    pub fn new(run_id: impl Into<String>) -> Self {
        RunOptions {
            run_id: run_id.into(),
            workflow_hash: String::new(),
            plugins: BTreeMap::new(),
            max_steps: 10_000,
            max_call_depth: 64,
            default_executor: String::new(),
            inputs: crate::run::inputs::Inputs::new(),
            start_at: None,
            rerun_of: None,
        }
    }
}

/// The run could not go on: its log could not be written, or did not fit.
/// Nothing is lost: the run rests at its last durable event and can be
/// resumed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error("cannot record the run's events: {0}")]
    Sink(#[from] SinkError),
    #[error("the run's log is inconsistent: {0}")]
    Replay(#[from] ReplayError),
    /// [`complete_external`] was given a run that awaits no external block.
    #[error("the run is {0}: it awaits no external block")]
    NotAwaiting(&'static str),
}

/// Start a new run of `workflow` and execute it until it ends, fails or
/// waits at a gate.
pub async fn run<W: WorkerHost, A: ActionInterpreter>(
    workflow: &Workflow,
    workers: &W,
    actions: &A,
    options: &RunOptions,
    sink: &mut dyn EventSink,
) -> Result<RunReport, EngineError> {
    let started = started_event(workflow, options);
    let state = RunState::start(&started)?;
    sink.append(std::slice::from_ref(&started))?;
    drive(workflow, workers, actions, state, sink).await
}

/// The first event of a new run.
pub fn started_event(workflow: &Workflow, options: &RunOptions) -> Event {
    let (start_node, start_block) = options.start_at.clone().unwrap_or_else(|| {
        let entry = workflow
            .nodes
            .get(&workflow.start_node)
            .map(|n| n.entry_block.clone())
            .unwrap_or_default();
        (workflow.start_node.clone(), entry)
    });
    Event::RunStarted {
        run_id: options.run_id.clone(),
        workflow_id: workflow.id.clone(),
        workflow_hash: options.workflow_hash.clone(),
        plugins: options.plugins.clone(),
        start_node,
        start_block,
        max_steps: options.max_steps,
        max_call_depth: options.max_call_depth,
        default_executor: options.default_executor.clone(),
        inputs: options.inputs.clone(),
        rerun_of: options.rerun_of.clone(),
    }
}

/// Continue a run rebuilt from its log after its host stopped: records the
/// resumption (and the block it interrupted, which runs again), then
/// executes until the run rests.
pub async fn resume<W: WorkerHost, A: ActionInterpreter>(
    workflow: &Workflow,
    workers: &W,
    actions: &A,
    mut state: RunState,
    sink: &mut dyn EventSink,
) -> Result<RunReport, EngineError> {
    if state.can_continue() {
        let interrupted = state.in_flight.clone();
        emit(&mut state, sink, vec![Event::Resumed { interrupted }])?;
    }
    drive(workflow, workers, actions, state, sink).await
}

pub(crate) fn emit(
    state: &mut RunState,
    sink: &mut dyn EventSink,
    events: Vec<Event>,
) -> Result<(), EngineError> {
    // Fold first, so that nothing that would not fold is ever written.
    // `apply` changes nothing when it refuses an event; on any error the
    // caller drops this state, and the log still ends at its last event.
    for event in &events {
        state.apply(event)?;
    }
    sink.append(&events)?;
    Ok(())
}

/// [`emit`], queueing `job` in the same commit when there is one.
fn emit_with_job(
    state: &mut RunState,
    sink: &mut dyn EventSink,
    events: Vec<Event>,
    job: Option<&QueuedJob>,
) -> Result<(), EngineError> {
    let Some(job) = job else {
        return emit(state, sink, events);
    };
    for event in &events {
        state.apply(event)?;
    }
    sink.append_with_job(&events, job)?;
    Ok(())
}

fn finish(
    state: &mut RunState,
    sink: &mut dyn EventSink,
    reason: String,
) -> Result<(), EngineError> {
    emit(
        state,
        sink,
        vec![Event::RunFinished {
            outcome: Outcome::Failed { reason },
        }],
    )
}

/// Execute `state` until the run ends, fails or waits at a gate. The
/// caller has recorded whatever brought the run here (its start, a
/// resumption, a fork, a gate's answer).
pub async fn drive<W: WorkerHost, A: ActionInterpreter>(
    workflow: &Workflow,
    workers: &W,
    actions: &A,
    state: RunState,
    sink: &mut dyn EventSink,
) -> Result<RunReport, EngineError> {
    drive_after(workflow, workers, actions, state, sink, Vec::new()).await
}

/// [`drive`], with `pending` (events already folded into `state`) written
/// in the first append of the drive: before anything acts on them.
#[tracing::instrument(name = "run", skip_all, fields(run_id = %state.run_id, workflow = %state.workflow_id))]
async fn drive_after<W: WorkerHost, A: ActionInterpreter>(
    workflow: &Workflow,
    workers: &W,
    actions: &A,
    state: RunState,
    sink: &mut dyn EventSink,
    pending: Vec<Event>,
) -> Result<RunReport, EngineError> {
    let mut batch = StepBatch::new(sink);
    batch.pending = pending;
    let result = drive_steps(workflow, workers, actions, state, &mut batch).await;
    // What was decided is recorded even when the run stops on an error:
    // every pending event was folded, so it fits the log.
    let flushed = batch.flush();
    let report = result?;
    flushed?;
    Ok(report)
}

/// What the client of an external block answered (`workflow_advance`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExternalAnswer {
    /// The block's signal; its transitions decide what comes next.
    pub signal: String,
    /// The client's notes, recorded as a `NOTES` segment of the payload.
    pub notes: Option<String>,
    /// The block's structured output (JSON text), recorded as its
    /// artifact. The caller has checked it against the block's
    /// `validation_schema`; the engine checks it again, as for any worker.
    pub structured_output: Option<String>,
    /// Facts merged into the run's inputs before the block completes.
    pub inputs: serde_json::Map<String, serde_json::Value>,
}

/// The payload segment type of an external block's notes.
pub const NOTES_SEGMENT: &str = "NOTES";

/// Complete the external block `state` rests at with the client's
/// `answer`, then execute until the run rests again. The inputs, the
/// block's start and its completion are one append (one commit), so a
/// sink that records the client's acknowledgement with it makes the
/// advance happen exactly once.
pub async fn complete_external<W: WorkerHost, A: ActionInterpreter>(
    workflow: &Workflow,
    workers: &W,
    actions: &A,
    mut state: RunState,
    sink: &mut dyn EventSink,
    answer: ExternalAnswer,
) -> Result<RunReport, EngineError> {
    let Phase::Awaiting { node, block, .. } = state.phase.clone() else {
        return Err(EngineError::NotAwaiting(state.phase.status()));
    };
    let mut step = Collected(Vec::new());
    if !answer.inputs.is_empty() {
        let merged = Event::InputsMerged {
            inputs: answer.inputs.clone(),
        };
        emit(&mut state, &mut step, vec![merged])?;
    }
    {
        let mut schemas = HashMap::new();
        execute_block(
            workflow,
            workers,
            &mut state,
            &mut step,
            &mut schemas,
            node,
            block,
            Some(answer),
        )
        .await?;
    }
    // The answered block's events go with what the run does next, up to
    // its next rest or the first thing that acts on them (a block run by a
    // worker): one commit between two external blocks.
    drive_after(workflow, workers, actions, state, sink, step.0).await
}

/// A sink that keeps what it is given, to append it in one go.
struct Collected(Vec<Event>);

impl EventSink for Collected {
    fn append(&mut self, events: &[Event]) -> Result<(), SinkError> {
        self.0.extend_from_slice(events);
        Ok(())
    }

    fn new_gate_id(&mut self) -> Result<String, SinkError> {
        Err(SinkError(
            "an external block's completion opens no gate".into(),
        ))
    }
}

/// Groups a step's events into one append (one transaction, one fsync at
/// full durability): a block's completion and the action taken on it wait
/// for the next event that must be durable before the engine acts, which
/// is the next block's start (before the worker runs), or anything else
/// (lanes, gates, the run's end). Action handlers are pure, so deciding
/// before the completion is durable changes nothing a crash could see: a
/// crash before the append re-runs the block, as it would have.
struct StepBatch<'s> {
    inner: &'s mut dyn EventSink,
    pending: Vec<Event>,
}

impl<'s> StepBatch<'s> {
    fn new(inner: &'s mut dyn EventSink) -> Self {
        StepBatch {
            inner,
            pending: Vec::new(),
        }
    }

    fn deferrable(event: &Event) -> bool {
        matches!(
            event,
            Event::BlockCompleted { .. } | Event::ActionTaken { gate_id: None, .. }
        )
    }

    /// The pending events followed by `events`.
    fn with_pending(&mut self, events: &[Event]) -> Vec<Event> {
        let mut all = std::mem::take(&mut self.pending);
        all.extend_from_slice(events);
        all
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        self.inner.append(&pending)
    }
}

impl Drop for StepBatch<'_> {
    /// A drive abandoned mid-step (the run was interrupted) still records
    /// what it decided: every pending event was folded, so it fits the log.
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

impl EventSink for StepBatch<'_> {
    fn append(&mut self, events: &[Event]) -> Result<(), SinkError> {
        if events.iter().all(Self::deferrable) {
            self.pending.extend_from_slice(events);
            return Ok(());
        }
        if self.pending.is_empty() {
            return self.inner.append(events);
        }
        let all = self.with_pending(events);
        self.inner.append(&all)
    }

    fn append_with_job(&mut self, events: &[Event], job: &QueuedJob) -> Result<(), SinkError> {
        let all = self.with_pending(events);
        self.inner.append_with_job(&all, job)
    }

    fn new_gate_id(&mut self) -> Result<String, SinkError> {
        self.inner.new_gate_id()
    }
}

async fn drive_steps<W: WorkerHost, A: ActionInterpreter>(
    workflow: &Workflow,
    workers: &W,
    actions: &A,
    mut state: RunState,
    sink: &mut dyn EventSink,
) -> Result<RunReport, EngineError> {
    let started = Instant::now();
    let mut schemas: HashMap<(String, String), OutputSchema> = HashMap::new();
    loop {
        match state.phase.clone() {
            Phase::Ready { node, block } => {
                execute_block(
                    workflow,
                    workers,
                    &mut state,
                    sink,
                    &mut schemas,
                    node,
                    block,
                    None,
                )
                .await?
            }

            Phase::Deciding {
                node,
                block,
                signal,
                failure,
                ..
            } => {
                let retry = lookup(workflow, &node, &block).and_then(|(_, b)| {
                    let ended = (signal.as_str(), failure.as_deref());
                    let now = crate::time::now_ms();
                    crate::retry::schedule(b, &state, ended, now, crate::retry::random_unit())
                });
                match retry {
                    Some(scheduled) => emit(&mut state, sink, vec![scheduled])?,
                    None => {
                        take_transition(
                            workflow, actions, &mut state, sink, node, block, signal, failure,
                        )
                        .await?
                    }
                }
            }
            Phase::Sleeping {
                step,
                node,
                block,
                due_at_ms,
                retry,
                ..
            } => {
                let now = crate::time::now_ms();
                if now < due_at_ms {
                    break;
                }
                match retry {
                    None => wake(&mut state, sink, step, node, block, due_at_ms, now)?,
                    Some(_) => {
                        let (w, s) = (workers, &mut schemas);
                        execute_block(workflow, w, &mut state, sink, s, node, block, None).await?
                    }
                }
            }
            Phase::Waiting { .. } | Phase::Awaiting { .. } | Phase::Finished(_) => break,
        }
    }
    let status = match &state.phase {
        Phase::Finished(Outcome::Succeeded) => RunStatus::Succeeded,
        Phase::Finished(Outcome::Failed { reason }) => RunStatus::Failed {
            reason: reason.clone(),
        },
        Phase::Finished(Outcome::Cancelled { by, reason }) => RunStatus::Cancelled {
            by: by.clone(),
            reason: reason.clone(),
        },
        Phase::Waiting {
            gate_id,
            node,
            block,
            prompt,
        } => RunStatus::WaitingAtGate {
            gate_id: gate_id.clone(),
            node: node.clone(),
            block: block.clone(),
            prompt: prompt.clone(),
        },
        Phase::Awaiting {
            step,
            node,
            block,
            prompt,
            ..
        } => RunStatus::AwaitingExternal {
            step: *step,
            node: node.clone(),
            block: block.clone(),
            prompt: prompt.clone(),
        },
        Phase::Sleeping {
            step,
            node,
            block,
            due_at_ms,
            retry,
            ..
        } => RunStatus::Sleeping {
            step: *step,
            node: node.clone(),
            block: block.clone(),
            due_at_ms: *due_at_ms,
            retry: *retry,
        },
        Phase::Ready { .. } | Phase::Deciding { .. } => unreachable!("the loop runs until rest"),
    };
    Ok(RunReport {
        status,
        steps: state.steps,
        statistics: state.statistics,
        duration: started.elapsed(),
        state,
    })
}

/// Steps A to C: assemble the context, execute the block, validate its
/// output. An external block without the client's `answer` is not
/// executed: the run comes to rest awaiting it.
#[allow(clippy::too_many_arguments)]
/// Check the block's artifact gates before its worker runs: `None` when
/// they pass (or it has none), else the block's result — `SIGNAL:BLOCKED`
/// with every failure, its worker not run.
async fn artifact_gates<W: SessionReads>(
    workflow: &Workflow,
    block: &crate::manifest::Block,
    workers: &W,
    state: &RunState,
    step: u64,
) -> Option<BlockResult> {
    use crate::agents::artifact_content::{self, SessionMode};
    if block.artifact_gates.is_empty() {
        return None;
    }
    let mode = workflow.session_mode.unwrap_or(SessionMode::Full);
    let mut failures = Vec::new();
    for gate in &block.artifact_gates {
        let checked = match workers.session_artifact(gate.file_name()).await {
            Ok(text) => artifact_content::check(*gate, text.as_deref(), mode),
            Err(e) => Err(format!("{}: cannot be read: {e}", gate.file_name())),
        };
        if let Err(failure) = checked {
            failures.push(failure);
        }
    }
    if failures.is_empty() {
        return None;
    }
    let message = format!("artifact gate failed: {}", failures.join("; "));
    let mut payload = state.payload.clone();
    payload.push(ContextSegment::new(
        format!("artifact-gate-{step}"),
        "ARTIFACT_GATE",
        message.clone(),
    ));
    Some(BlockResult {
        outcome: Ok(crate::run::payload::WorkerOutput {
            payload,
            signal: transitions::BLOCKED.to_string(),
            structured_output: None,
            statistics: Statistics::default(),
            written: Vec::new(),
        }),
        log: vec![message],
    })
}

#[allow(clippy::too_many_arguments)] // the run loop's state, passed apart for borrowing
#[tracing::instrument(name = "block", skip_all, fields(run_id = %state.run_id, node = %node_id, block = %block_id, step = tracing::field::Empty, attempt = tracing::field::Empty))]
async fn execute_block<W: WorkerHost>(
    workflow: &Workflow,
    workers: &W,
    state: &mut RunState,
    sink: &mut dyn EventSink,
    schemas: &mut HashMap<(String, String), OutputSchema>,
    node_id: String,
    block_id: String,
    answer: Option<ExternalAnswer>,
) -> Result<(), EngineError> {
    let Some((node, raw_block)) = lookup(workflow, &node_id, &block_id) else {
        return finish(
            state,
            sink,
            format!("block `{node_id}.{block_id}` does not exist"),
        );
    };
    // The block runs with the run's inputs, as they are now, written into
    // its prompt and config (a resumed or forked run has the same inputs;
    // a block after one that merged inputs sees the new values).
    let block = &*crate::run::template::instantiate_block(workflow, raw_block, &state.inputs);
    let rules = crate::run::template::instantiate_rules(workflow, &state.inputs);
    let key = (node_id.clone(), block_id.clone());
    let (attempt, strategy) = match admit(state, block, schemas, &key) {
        Ok(admitted) => admitted,
        Err(reason) => return finish(state, sink, reason),
    };
    let step = state.steps;
    tracing::Span::current()
        .record("step", step)
        .record("attempt", attempt);
    let external = block.worker == crate::manifest::EXTERNAL_WORKER;
    if external && answer.is_none() {
        // The client performs it: the run rests with the block's prompt.
        // Nothing else of its context is assembled (a run's payload grows
        // with its length; the prompt does not).
        let awaited = Event::ExternalAwaited {
            step,
            node: node_id,
            block: block_id,
            attempt,
            prompt: system_prompt(rules.as_deref(), block),
        };
        return emit(state, sink, vec![awaited]);
    }

    // Step A: assemble the block's context (the five layers).
    let at = At {
        node_id: &node_id,
        block_id: &block_id,
        step,
        attempt,
        external,
    };
    let (context, block_payload) = block_context(
        workflow,
        node,
        block,
        rules.as_deref(),
        &strategy,
        state,
        &at,
    );

    // Step B: execute the block. A block run as a job is queued in the
    // commit that records its start. A parallel group's lanes are not:
    // each lane's job may be leased only once its workspace exists.
    let request = BlockRequest {
        worker: block.worker.clone(),
        context,
        payload: block_payload,
        timeout: block.timeout,
        lane: None,
    };
    // A control block is decided here, in process, over the inputs.
    let control = crate::control::evaluate(
        &block.worker,
        &block.config,
        &state.inputs,
        &state.artifacts,
    );
    let sleep = block.worker == crate::timers::SLEEP_WORKER;
    let job = match block.parallel {
        None if !external && !sleep && control.is_none() => workers.job_for(&request),
        _ => None,
    };
    emit_with_job(
        state,
        sink,
        vec![Event::BlockStarted {
            step,
            node: node_id.clone(),
            block: block_id.clone(),
            attempt,
        }],
        job.as_ref(),
    )?;
    if let Some(group) = &block.parallel {
        return crate::parallel::fan_out::execute(
            rules.as_deref(),
            workers,
            state,
            sink,
            block,
            group,
            request,
        )
        .await;
    }
    if sleep {
        let at = (step, attempt, node_id, block_id);
        return start_sleep(state, sink, &block.config, schemas.get(&key), at);
    }
    let block_started = Instant::now();
    let mut merged = None;
    let result = match (answer, control) {
        (Some(answer), _) => answered(request, answer, step),
        (None, Some(decision)) => decided(request, decision, &mut merged),
        (None, None) => match artifact_gates(workflow, block, workers, state, step).await {
            Some(blocked) => blocked,
            None => {
                let run = workers.run_block(request);
                recording_telemetry(workers, state, sink, run).await?
            }
        },
    }
    .checked();
    let queued = workers.queued_time(step);
    let duration = block_started.elapsed().saturating_sub(queued);
    let done = Done {
        step,
        node_id,
        block_id,
        duration,
        queued,
        merged,
    };
    complete(state, sink, schemas.get(&key), done, result)
}

/// A `sleep` block just started (`at`: its step, attempt, node and
/// block): its due time is recorded and the run rests; a time that does
/// not parse (a template filled at run time) fails the block instead.
fn start_sleep(
    state: &mut RunState,
    sink: &mut dyn EventSink,
    config: &serde_json::Value,
    schema: Option<&OutputSchema>,
    (step, attempt, node_id, block_id): (u64, u32, String, String),
) -> Result<(), EngineError> {
    match crate::timers::due_at(config, crate::time::now_ms()) {
        Ok(due_at_ms) => {
            let timer = Event::TimerStarted {
                step,
                node: node_id,
                block: block_id,
                attempt,
                due_at_ms,
            };
            emit(state, sink, vec![timer])
        }
        Err(message) => {
            let done = Done::at_once(step, node_id, block_id);
            let failed = BlockResult {
                outcome: Err(BlockFailure::new(message)),
                log: Vec::new(),
            };
            complete(state, sink, schema, done, failed)
        }
    }
}

/// A sleeping block's time has come (`now`, its due time `due_at_ms`): it
/// completes with `SIGNAL:SUCCESS`, the payload as it was, and a log line
/// saying how late it woke.
fn wake(
    state: &mut RunState,
    sink: &mut dyn EventSink,
    step: u64,
    node_id: String,
    block_id: String,
    due_at_ms: i64,
    now: i64,
) -> Result<(), EngineError> {
    let late = now.saturating_sub(due_at_ms);
    let result = BlockResult {
        outcome: Ok(crate::run::payload::WorkerOutput {
            payload: state.payload.clone(),
            signal: transitions::SUCCESS.to_string(),
            structured_output: None,
            statistics: Statistics::default(),
            written: Vec::new(),
        }),
        log: vec![format!(
            "slept until {} (woke {late} ms after)",
            crate::time::iso_utc_millis(due_at_ms)
        )],
    };
    complete(
        state,
        sink,
        None,
        Done::at_once(step, node_id, block_id),
        result,
    )
}

/// What is known of a block execution that just ended.
struct Done {
    step: u64,
    node_id: String,
    block_id: String,
    duration: std::time::Duration,
    /// How long it waited in a queue before it ran (not in `duration`).
    queued: std::time::Duration,
    /// The inputs a control block merged.
    merged: Option<serde_json::Map<String, serde_json::Value>>,
}

impl Done {
    /// A block the engine settled itself, taking no time (a `sleep`
    /// block's start that failed, its wake).
    fn at_once(step: u64, node_id: String, block_id: String) -> Done {
        Done {
            step,
            node_id,
            block_id,
            duration: std::time::Duration::ZERO,
            queued: std::time::Duration::ZERO,
            merged: None,
        }
    }
}

/// Record a block's end: its outcome settled against its output schema.
fn complete(
    state: &mut RunState,
    sink: &mut dyn EventSink,
    schema: Option<&OutputSchema>,
    done: Done,
    result: BlockResult,
) -> Result<(), EngineError> {
    let Done {
        step,
        node_id,
        block_id,
        duration,
        queued,
        merged,
    } = done;
    let mut written = match &result.outcome {
        Ok(output) => output.written.clone(),
        Err(_) => Vec::new(),
    };
    written.truncate(crate::run::event::MAX_WRITTEN_LISTED);
    let Settled {
        signal,
        payload,
        artifact,
        failure,
        permanent,
        statistics,
    } = settle_output(
        result.outcome,
        schema,
        &state.payload,
        step,
        &format!("{node_id}.{block_id}"),
    );
    tracing::debug!(%signal, failed = failure.is_some(), "block settled");
    let completed = Event::BlockCompleted {
        step,
        node: node_id,
        block: block_id,
        signal,
        payload: PayloadDelta::between(&state.payload, &payload),
        artifact,
        statistics,
        duration_us: u64::try_from(duration.as_micros()).unwrap_or(u64::MAX),
        queued_us: u64::try_from(queued.as_micros()).unwrap_or(u64::MAX),
        failure,
        permanent,
        log: result.log,
        written,
    };
    let events = match merged {
        Some(inputs) => vec![Event::InputsMerged { inputs }, completed],
        None => vec![completed],
    };
    emit(state, sink, events)
}

/// Whether the block may run now, and how: its attempt and its payload
/// merge strategy (its output schema compiled once into `schemas`); or why
/// the run ends instead (the step limit, `max_attempts`, a bad strategy or
/// schema).
fn admit(
    state: &RunState,
    block: &Block,
    schemas: &mut HashMap<(String, String), OutputSchema>,
    key: &(String, String),
) -> Result<(u32, Vec<crate::run::merge::MergeInstruction>), String> {
    let (node_id, block_id) = key;
    if state.blocks_run >= state.max_steps {
        return Err(format!(
            "step limit of {} reached at block `{node_id}.{block_id}`: the workflow probably loops",
            state.max_steps
        ));
    }
    let attempt = state.attempts(node_id, block_id) + 1;
    if let Some(max) = block.max_attempts
        && attempt > max
    {
        return Err(format!(
            "block `{node_id}.{block_id}` would run a {} time, over its max_attempts of {max}",
            ordinal(attempt)
        ));
    }
    let strategy = match crate::run::merge::parse_all(&block.payload_merge_strategy) {
        Ok(s) => s,
        Err((_, e)) => return Err(format!("block `{node_id}.{block_id}`: {e}")),
    };
    if let Some(schema) = &block.validation_schema
        && !schemas.contains_key(key)
    {
        match OutputSchema::compile(schema) {
            Ok(compiled) => {
                schemas.insert(key.clone(), compiled);
            }
            Err(e) => return Err(format!("block `{node_id}.{block_id}`: {e}")),
        }
    }
    Ok((attempt, strategy))
}

/// Where a block executes: its names, step and attempt, and whether a
/// client performs it.
struct At<'a> {
    node_id: &'a str,
    block_id: &'a str,
    step: u64,
    attempt: u32,
    external: bool,
}

/// Step A: the block's context, its five layers assembled (the payload by
/// its merge strategy, the system prompt, config, inputs, inherited memory
/// and artifacts), and the payload it is given.
fn block_context(
    workflow: &Workflow,
    node: &Node,
    block: &Block,
    rules: Option<&str>,
    strategy: &[crate::run::merge::MergeInstruction],
    state: &RunState,
    at: &At,
) -> (BlockContext, ExecutionPayload) {
    let block_payload = crate::run::merge::apply(
        strategy,
        &state.payload,
        &node.static_memory,
        &block.config,
        at.step,
    );
    let assembled = AssembledContext {
        payload: block_payload,
        system_prompt: system_prompt(rules, block),
        config: block.config.clone(),
        inputs: state.inputs.clone(),
        inherited: inherited_memory(workflow, at.node_id, &state.stack),
        artifacts: state.artifacts.clone(),
        metadata: Metadata {
            workflow_id: workflow.id.clone(),
            execution_id: state.run_id.clone(),
            node_id: at.node_id.to_string(),
            block_id: at.block_id.to_string(),
            step_index: at.step,
            attempt: at.attempt,
            previous_block_id: state.previous.clone(),
        },
    };
    // An answered external block's context went to the client as its
    // prompt; only its payload is used here.
    let assembled_context = if at.external {
        String::new()
    } else {
        assembled.render()
    };
    let context = BlockContext {
        workflow_id: workflow.id.clone(),
        execution_id: state.run_id.clone(),
        node_id: at.node_id.to_string(),
        block_id: at.block_id.to_string(),
        step_index: at.step,
        attempt: at.attempt,
        previous_block_id: state.previous.clone(),
        static_memory: serde_json::Value::Object(node.static_memory.clone()),
        inherited_memory: serde_json::Value::Object(assembled.inherited),
        artifacts: assembled.artifacts,
        config: assembled.config,
        inputs: serde_json::Value::Object(assembled.inputs),
        file_restrictions: block.file_restrictions.clone(),
        system_prompt: assembled.system_prompt,
        assembled_context,
    };
    (context, assembled.payload)
}

/// What a block's outcome records (Step C): its signal, payload,
/// artifact, failure and statistics — a worker's output validated and
/// cleaned against the block's schema, or its failure as a
/// `WORKER_ERROR` segment over the payload as it was (`before`).
fn settle_output(
    outcome: Result<WorkerOutput, BlockFailure>,
    schema: Option<&OutputSchema>,
    before: &ExecutionPayload,
    step: u64,
    name: &str,
) -> Settled {
    let mut permanent = false;
    let (signal, payload, artifact, failure, statistics) = match outcome {
        Ok(output) => {
            let mut signal = output.signal;
            let mut payload = output.payload;
            let mut artifact = None;
            let raw = output
                .structured_output
                .clone()
                .or_else(|| payload.last().map(|s| s.content.clone()));
            // Step C: validate and clean the output.
            if let Some(schema) = schema {
                let checked = match raw.as_deref() {
                    None => Err("the worker returned no output to validate".to_string()),
                    Some(text) => schema.check(text).map_err(|e| e.to_string()),
                };
                match checked {
                    Ok(clean) => {
                        artifact = Some(clean.to_string());
                        payload.push(ContextSegment::new(
                            format!("validated-{step}"),
                            "VALIDATED_OUTPUT",
                            clean.to_string(),
                        ))
                    }
                    Err(reason) => {
                        signal = transitions::VALIDATION_FAIL.to_string();
                        payload.push(ContextSegment::new(
                            format!("validation-error-{step}"),
                            "VALIDATION_ERROR",
                            format!("output of `{name}` failed validation: {reason}"),
                        ));
                    }
                }
            } else {
                artifact = output.structured_output;
            }
            (signal, payload, artifact, None, output.statistics)
        }
        Err(failure) => {
            permanent = failure.permanent;
            let mut payload = before.clone();
            payload.push(ContextSegment::new(
                format!("worker-error-{step}"),
                "WORKER_ERROR",
                failure.message.clone(),
            ));
            (
                transitions::WORKER_ERROR.to_string(),
                payload,
                None,
                Some(failure.message),
                Statistics::default(),
            )
        }
    };
    Settled {
        signal,
        payload,
        artifact,
        failure,
        permanent,
        statistics,
    }
}

/// What a block's completion records.
struct Settled {
    signal: String,
    payload: ExecutionPayload,
    artifact: Option<String>,
    failure: Option<String>,
    /// The failure is one no retry mends.
    permanent: bool,
    statistics: Statistics,
}

/// The result of a control block: its input payload and its signal; what
/// it merges into the inputs goes to `merged`.
fn decided(
    request: BlockRequest,
    decision: Result<crate::control::Decision, String>,
    merged: &mut Option<serde_json::Map<String, serde_json::Value>>,
) -> BlockResult {
    let outcome = decision.map_err(BlockFailure::new);
    BlockResult {
        outcome: outcome.map(|d| {
            if !d.inputs.is_empty() {
                *merged = Some(d.inputs);
            }
            WorkerOutput {
                payload: request.payload,
                signal: d.signal,
                structured_output: None,
                statistics: Statistics::default(),
                written: Vec::new(),
            }
        }),
        log: Vec::new(),
    }
}

/// The result of an external block: its input payload with the client's
/// notes, and the client's signal and structured output.
fn answered(request: BlockRequest, answer: ExternalAnswer, step: u64) -> BlockResult {
    let mut payload = request.payload;
    if let Some(notes) = answer.notes {
        payload.push(ContextSegment::new(
            format!("notes-{step}"),
            NOTES_SEGMENT,
            notes,
        ));
    }
    BlockResult {
        outcome: Ok(WorkerOutput {
            payload,
            signal: answer.signal,
            structured_output: answer.structured_output,
            statistics: Statistics::default(),
            written: Vec::new(),
        }),
        log: Vec::new(),
    }
}

/// Steps D to F: find the transition for the signal, have the action
/// handler decide, and record what the engine does with its command.
#[allow(clippy::too_many_arguments)]
#[tracing::instrument(name = "transition", level = "debug", skip_all, fields(node = %node_id, block = %block_id, signal = %signal))]
async fn take_transition<A: ActionInterpreter>(
    workflow: &Workflow,
    actions: &A,
    state: &mut RunState,
    sink: &mut dyn EventSink,
    node_id: String,
    block_id: String,
    signal: String,
    failure: Option<String>,
) -> Result<(), EngineError> {
    let here = format!("{node_id}.{block_id}");
    // A mandatory gate's decision was cancelled: the run ends BLOCKED,
    // whatever the block's transitions say.
    if signal == transitions::GATE_CANCELLED {
        let detail = state
            .gates
            .values()
            .filter_map(|g| match &g.decision {
                Some(Decision::Cancelled { reason }) => Some(format!(
                    "decision {} of `{here}` cancelled: {reason}",
                    g.gate_id
                )),
                _ => None,
            })
            .next_back()
            .unwrap_or_else(|| format!("a mandatory decision of `{here}` was cancelled"));
        return finish(
            state,
            sink,
            crate::run::event::blocked_reason(
                crate::run::event::MANDATORY_DECISION_MISSING,
                &detail,
            ),
        );
    }
    let Some((_, block)) = lookup(workflow, &node_id, &block_id) else {
        return finish(state, sink, format!("block `{here}` does not exist"));
    };
    // An agent that needs a decision opens a gate, unless the block routes
    // the signal itself.
    if signal == transitions::NEEDS_DECISION
        && !block.transitions.iter().any(|t| t.on_signal == signal)
    {
        return open_decision_gate(state, sink, &here);
    }
    let Some(resolution) = transitions::resolve(&block.transitions, &signal) else {
        let mut reason = format!(
            "block `{here}` emitted `{signal}` and has no transition for it nor for `{}`",
            transitions::FAIL_DEFAULT
        );
        if let Some(message) = failure {
            reason.push_str(&format!("; the worker failed: {message}"));
        }
        return finish(state, sink, reason);
    };
    let action = resolution.transition().action.clone();
    let fallback_for = match resolution {
        transitions::Resolution::Fallback(_) => Some(signal.clone()),
        transitions::Resolution::Exact(_) => None,
    };
    let step = state.last_step;
    let view = RunView {
        workflow_id: workflow.id.clone(),
        execution_id: state.run_id.clone(),
        node_id: node_id.clone(),
        block_id: block_id.clone(),
        signal: signal.clone(),
        step_index: step,
        return_stack: state
            .stack
            .iter()
            .map(|f| format!("{}.{}", f.node, f.block))
            .collect(),
    };
    let command = match actions
        .interpret(workflow.handler_for(&action), &action, &view)
        .await
    {
        Ok(command) => command,
        Err(message) => {
            return finish(
                state,
                sink,
                format!("action `{action}` of block `{here}` could not be interpreted: {message}"),
            );
        }
    };
    let (record, gate_id) =
        match command_record(workflow, state, sink, command, &action, &node_id, &block_id)? {
            Ok(recorded) => recorded,
            Err(reason) => return finish(state, sink, reason),
        };
    emit(
        state,
        sink,
        vec![Event::ActionTaken {
            step,
            action,
            command: record,
            gate_id,
            fallback_for,
        }],
    )
}

/// The gate an agent that needs a decision opens: its questions (from
/// the payload's decision request) each with an id of its own.
fn open_decision_gate(
    state: &mut RunState,
    sink: &mut dyn EventSink,
    here: &str,
) -> Result<(), EngineError> {
    let (prompt, asked) =
        crate::run::questions::decision_request(&state.payload).unwrap_or_else(|| {
            (
                format!("the agent of `{here}` needs a decision"),
                Vec::new(),
            )
        });
    let ids = sink.new_gate_ids(asked.len().max(1))?;
    let questions = asked
        .into_iter()
        .zip(&ids)
        .map(
            |((text, security), id)| crate::run::questions::GateQuestion {
                id: id.clone(),
                text,
                security,
            },
        )
        .collect();
    emit(
        state,
        sink,
        vec![Event::ActionTaken {
            step: state.last_step,
            action: format!("GATE:{prompt}"),
            command: CommandRecord::Gate { prompt, questions },
            gate_id: ids.into_iter().next(),
            fallback_for: None,
        }],
    )
}

/// What the engine records of an action handler's command, and the id
/// of the gate it opens; `Err` inside: why the run ends instead (a target
/// that does not exist, the call depth, an empty return stack).
fn command_record(
    workflow: &Workflow,
    state: &RunState,
    sink: &mut dyn EventSink,
    command: EngineCommand,
    action: &str,
    node_id: &str,
    block_id: &str,
) -> Result<Result<(CommandRecord, Option<String>), String>, EngineError> {
    let here = format!("{node_id}.{block_id}");
    let mut gate_id = None;
    let record = match command {
        EngineCommand::Jump(target) => {
            let (node, block) = resolve_ref(&target, node_id);
            if lookup(workflow, &node, &block).is_none() {
                return Ok(Err(format!(
                    "action `{action}` of block `{here}` jumps to `{node}.{block}`, which does not exist"
                )));
            }
            CommandRecord::Jump {
                to: format!("{node}.{block}"),
            }
        }
        EngineCommand::Call {
            node: callee,
            return_to,
        } => {
            let Some(callee_node) = workflow.nodes.get(&callee) else {
                return Ok(Err(format!(
                    "block `{here}` calls node `{callee}`, which does not exist"
                )));
            };
            if state.stack.len() >= state.max_call_depth {
                return Ok(Err(format!(
                    "call depth limit of {} exceeded calling `{callee}` from `{here}`",
                    state.max_call_depth
                )));
            }
            let (back_node, back_block) = match &return_to {
                Some(r) => resolve_ref(r, node_id),
                None => (node_id.to_string(), block_id.to_string()),
            };
            if lookup(workflow, &back_node, &back_block).is_none() {
                return Ok(Err(format!(
                    "action `{action}` of block `{here}` returns to `{back_node}.{back_block}`, which does not exist"
                )));
            }
            CommandRecord::Call {
                entry: callee_node.entry_block.clone(),
                node: callee,
                return_to: format!("{back_node}.{back_block}"),
                isolated: !callee_node.context_inheritance,
            }
        }
        EngineCommand::Return => {
            if state.stack.is_empty() {
                return Ok(Err(format!(
                    "block `{here}` returned with an empty return stack"
                )));
            }
            CommandRecord::Return
        }
        EngineCommand::End => CommandRecord::End,
        EngineCommand::Fail(reason) => CommandRecord::Fail { reason },
        EngineCommand::Gate(prompt) => match crate::actions::well_known_gate(&prompt) {
            // A mandatory gate has its fixed id, the same each time it opens.
            (Some(gate), question) => {
                gate_id = Some(gate.decision_id().to_string());
                CommandRecord::Gate {
                    prompt: with_block_summary(question, state, &here),
                    questions: Vec::new(),
                }
            }
            (None, _) => {
                gate_id = Some(sink.new_gate_id()?);
                CommandRecord::Gate {
                    prompt: with_block_summary(&prompt, state, &here),
                    questions: Vec::new(),
                }
            }
        },
    };
    Ok(Ok((record, gate_id)))
}

/// A gate's prompt with what the block before it produced (seed 000's
/// "Block produced: {summary}"), when that block's structured output has
/// a `summary` (an agent's BlockOutput does); else the prompt as it is.
fn with_block_summary(prompt: &str, state: &RunState, block: &str) -> String {
    let summary =
        crate::parallel::fan_out::summary_of(state.artifacts.get(block).map(String::as_str))
            .filter(|s| !s.trim().is_empty());
    match summary {
        Some(summary) => format!("{prompt}\n\nBlock produced: {}", summary.trim()),
        None => prompt.to_string(),
    }
}

/// Layer 3: the node's static memory over its callers', up to the nearest
/// isolated node.
fn inherited_memory(
    workflow: &Workflow,
    node_id: &str,
    stack: &[Frame],
) -> serde_json::Map<String, serde_json::Value> {
    let mut chain = vec![node_id];
    if workflow
        .nodes
        .get(node_id)
        .is_some_and(|n| n.context_inheritance)
    {
        for frame in stack.iter().rev() {
            // The node entered by this frame's call is isolated: stop.
            if frame.saved_payload.is_some() {
                break;
            }
            chain.push(&frame.node);
        }
    }
    crate::run::context::inherit(
        chain
            .iter()
            .rev()
            .filter_map(|n| workflow.nodes.get(*n).map(|n| &n.static_memory)),
    )
}

fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

pub(crate) fn system_prompt(rules: Option<&str>, block: &Block) -> String {
    let prompt = block.prompt.clone().unwrap_or_default();
    crate::run::prompt::assemble(crate::run::prompt::PromptParts {
        rules,
        prefix: prompt.prefix.as_deref(),
        task: prompt.task.as_deref(),
        file_restrictions: block.file_restrictions.as_deref(),
        output_checklist: &prompt.output_checklist,
    })
}

fn lookup<'w>(workflow: &'w Workflow, node: &str, block: &str) -> Option<(&'w Node, &'w Block)> {
    let n = workflow.nodes.get(node)?;
    Some((n, n.blocks.get(block)?))
}

fn resolve_ref(target: &BlockRef, current_node: &str) -> (String, String) {
    (
        target
            .node
            .clone()
            .unwrap_or_else(|| current_node.to_string()),
        target.block.clone(),
    )
}

#[cfg(test)]
mod tests;
