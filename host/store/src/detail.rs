//! A run as one object: what `GET /v1/runs/{id}` answers and `wfhost show
//! RUN --json` prints (the API's `Run` schema), gathered in one place so
//! the two never drift apart.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use wfhost_core::run::payload::{ContextSegment, Statistics};
use wfhost_core::run::state::{BlockStatistics, GateRecord, Phase, RunState};

use crate::{BranchInfo, ChainPage, OpenJob, RunId, RunRecord, Store, StoreError};

/// The run a rerun repeats, and the step it started from.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RerunOf {
    pub run_id: String,
    pub from_step: Option<u64>,
}

/// The timer a sleeping run rests on: a `sleep` block's, or the wait
/// before a failed block's retry.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RestingTimer {
    /// The step of the sleeping block, or of the failed attempt.
    pub step: u64,
    pub node: String,
    pub block: String,
    /// When it is due, unix ms.
    pub due_at_ms: i64,
    /// Which retry of the block is due then (1 for the first); null for a
    /// `sleep` block.
    pub retry: Option<u32>,
}

impl RestingTimer {
    /// The timer `phase` rests on, if it is sleeping.
    pub fn of(phase: &Phase) -> Option<RestingTimer> {
        match phase {
            Phase::Sleeping {
                step,
                node,
                block,
                due_at_ms,
                retry,
                ..
            } => Some(RestingTimer {
                step: *step,
                node: node.clone(),
                block: block.clone(),
                due_at_ms: *due_at_ms,
                retry: *retry,
            }),
            _ => None,
        }
    }
}

/// What started a run, when a schedule did: the schedule and its tick.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RunTrigger {
    pub schedule: String,
    /// The tick's time, unix ms.
    pub tick_ms: i64,
    /// Triggered by hand (`schedule trigger`), not by the clock.
    pub manual: bool,
}

/// One stage of a run started from a stage graph, and its status.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StageStatus {
    pub id: String,
    pub status: String,
}

/// A run's branch, as shown whole.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(rename = "Run")]
pub struct RunDetail {
    pub run: RunRecord,
    /// The branch shown.
    pub branch: u32,
    pub status: String,
    /// Why it did not succeed: a failure's reason, or who cancelled it.
    pub failure: Option<String>,
    /// What a running run waits for: its blocks' jobs, queued or leased.
    pub open_jobs: Vec<OpenJob>,
    /// What a sleeping run waits for; null for runs in other states.
    pub timer: Option<RestingTimer>,
    /// The schedule tick that started the run; null for other runs.
    pub trigger: Option<RunTrigger>,
    /// The notifications the run gave, oldest first, and how their
    /// delivery went.
    pub notifications: Vec<crate::notify::Notification>,
    pub rerun_of: Option<RerunOf>,
    /// The snapshot of the run's first event: forking there starts over.
    pub start_snapshot: Option<String>,
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// Notes on the run as the viewer sees it (the manifest changed since
    /// the run pinned it); filled by the viewer that checks.
    pub warnings: Vec<String>,
    /// The stages of a run started from a stage graph; null for others.
    pub stages: Option<Vec<StageStatus>>,
    pub branches: Vec<BranchInfo>,
    /// How many steps the branch took (their rows: `Steps`).
    pub steps: u64,
    pub gates: Vec<GateRecord>,
    pub statistics: Statistics,
    pub blocks: BTreeMap<String, BlockStatistics>,
    pub payload: Vec<ContextSegment>,
    /// The last payload segment: what the run produced.
    pub result: Option<ContextSegment>,
    /// The workspace files the blocks wrote.
    pub written: Vec<String>,
    /// Events in the branch's chain.
    pub events: u64,
    /// Unix ms when this was gathered.
    pub server_now_ms: i64,
}

impl RunDetail {
    /// `run`'s branch `branch`, read without walking its log (the first
    /// event and the folded state only), and the state it was made of.
    pub fn gather(
        store: &Store,
        run: RunRecord,
        branch: u32,
    ) -> Result<(RunDetail, RunState), StoreError> {
        let branches = store.branches(&run.id)?;
        let state = store.state(&run.id, branch)?;
        let status = branches
            .iter()
            .find(|b| b.branch == branch)
            .map(|b| b.status.clone())
            .unwrap_or_default();
        let failure = match &state.phase {
            Phase::Finished(outcome) => outcome.unsuccessful_reason(),
            _ => None,
        };
        let open_jobs = match status.as_str() {
            "running" => store.open_jobs(&run.id)?,
            _ => Vec::new(),
        };
        let first = store
            .chain_page(&run.id, branch, ChainPage::After(0), 1)?
            .into_iter()
            .next();
        let rerun_of = first.as_ref().and_then(|e| match &e.event {
            wfhost_core::run::event::Event::RunStarted {
                rerun_of: Some(r), ..
            } => Some(RerunOf {
                run_id: r.run_id.clone(),
                from_step: r.from_step,
            }),
            _ => None,
        });
        let stages = stage_statuses(store.home(), &run.id, &state);
        let detail = RunDetail {
            branch,
            status,
            failure,
            open_jobs,
            timer: RestingTimer::of(&state.phase),
            notifications: store.notifications_of(&run.id)?,
            trigger: store.tick_of_run(&run.id)?.map(|t| RunTrigger {
                schedule: t.schedule,
                tick_ms: t.tick_ms,
                manual: t.manual,
            }),
            rerun_of,
            start_snapshot: first.and_then(|e| e.snapshot),
            inputs: state.inputs.clone(),
            warnings: Vec::new(),
            stages,
            branches,
            steps: state.steps,
            gates: state.gates.values().cloned().collect(),
            statistics: state.statistics,
            blocks: state.blocks.clone(),
            payload: state.payload.clone(),
            result: state.result().cloned(),
            written: state.written.clone(),
            events: state.events,
            server_now_ms: wfhost_core::time::now_ms(),
            run,
        };
        Ok((detail, state))
    }
}

/// Where `wfhost serve` keeps the stages of a run started from a stage
/// graph, beside its translated manifest.
pub fn stages_file(home: &Path, run_id: &RunId) -> std::path::PathBuf {
    home.join("serve-manifests")
        .join(format!("{run_id}.stages.json"))
}

/// The stages of a run started from a stage graph, or None.
pub fn stages(
    home: &Path,
    run_id: &RunId,
) -> Option<Vec<wfhost_core::formats::stage_graph::StageInfo>> {
    let bytes =
        wfhost_core::workspace::regular_file::read_regular(&stages_file(home, run_id), 1 << 20)
            .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Each stage's status (`pending`, `running`, `succeeded`, `failed`,
/// `needs_human`, `skipped`); None for a run that is not a stage graph's.
fn stage_statuses(home: &Path, run_id: &RunId, state: &RunState) -> Option<Vec<StageStatus>> {
    let stages = stages(home, run_id)?;
    Some(
        wfhost_core::formats::stage_graph::stage_statuses(&stages, state)
            .into_iter()
            .map(|(id, status)| StageStatus {
                id: id.to_string(),
                status: status.to_string(),
            })
            .collect(),
    )
}
