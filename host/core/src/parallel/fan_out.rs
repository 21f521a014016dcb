//! Executing a parallel block (seed 000's parallel group): fan-out to
//! lanes that run the block's worker concurrently, each in an isolated
//! workspace the host provides ([`Lanes`]), then fan-in.
//!
//! Every step is an event, so a crashed fan-out resumes where it stopped:
//! lanes with a `lane_completed` event are not run again (their workspaces
//! are kept until the block completes), the others are re-created and run.
//! A `fail-on-conflict` fan-in with conflicts pauses the run at a gate; the
//! answer (`use-lane:…`) brings the run back here to finish the fan-in.
//!
//! Signals: `SIGNAL:SUCCESS` when every lane signalled success,
//! `SIGNAL:FAILED` when none succeeded (or partly succeeded), else
//! `SIGNAL:PARTIAL`. Only lanes that signalled `SIGNAL:SUCCESS` or
//! `SIGNAL:PARTIAL` contribute file changes; a failed lane's changes are
//! recorded as discarded, never merged. Every lane's `.output/block-*.json`
//! files are collected.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::Instant;

use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use serde_json::Value;

use crate::manifest::{Block, ParallelGroup};
use crate::parallel::fan_in::{self, FanInPlan, LaneChanges};
use crate::run::engine::{
    BlockRequest, BlockRunner, EngineError, LaneKey, Lanes, WorkerHost, emit,
};
use crate::run::event::{Decision, Event, PayloadDelta};
use crate::run::payload::{ContextSegment, Statistics};
use crate::run::state::{FanOut, LaneResult, RunState};
use crate::run::transitions;

pub const LANES_SUCCEEDED: &str = "SIGNAL:SUCCESS";
pub const LANES_PARTIAL: &str = "SIGNAL:PARTIAL";
pub const LANES_FAILED: &str = "SIGNAL:FAILED";
/// Every signal a parallel block's fan-in gives.
pub const FAN_IN_SIGNALS: &[&str] = &[LANES_SUCCEEDED, LANES_PARTIAL, LANES_FAILED];
/// `appliedFrom` of a conflict the user settled in the workspace by hand
/// (never a lane name: lane names are letters, digits, `_` and `-`).
pub const RESOLVED_BY_HAND: &str = "(workspace)";

/// Whether a lane's changes may be merged.
fn mergeable(signal: &str) -> bool {
    signal == LANES_SUCCEEDED || signal == LANES_PARTIAL
}

/// The parallel block's signal from its lanes'.
pub fn aggregate_signal<'a>(signals: impl IntoIterator<Item = &'a str>) -> &'static str {
    let (mut total, mut succeeded, mut usable) = (0, 0, 0);
    for s in signals {
        total += 1;
        succeeded += usize::from(s == LANES_SUCCEEDED);
        usable += usize::from(mergeable(s));
    }
    if total > 0 && succeeded == total {
        LANES_SUCCEEDED
    } else if usable == 0 {
        LANES_FAILED
    } else {
        LANES_PARTIAL
    }
}

struct LaneRun {
    lane: String,
    result: LaneResult,
    log: Vec<String>,
}

/// The `summary` of a structured output that has one (the agent worker's
/// BlockOutput does).
pub(crate) fn summary_of(structured: Option<&str>) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(structured?).ok()?;
    let summary = value.get("summary")?.as_str()?;
    Some(summary.chars().take(500).collect())
}

#[tracing::instrument(name = "lane", skip_all, fields(step = key.step, lane = %key.lane))]
async fn run_lane<W: BlockRunner + Lanes>(
    workers: &W,
    key: LaneKey,
    request: BlockRequest,
) -> LaneRun {
    let started = Instant::now();
    let failed = |message: String, log: Vec<String>| LaneRun {
        lane: key.lane.clone(),
        result: LaneResult {
            lane: key.lane.clone(),
            signal: transitions::WORKER_ERROR.to_string(),
            changed: Vec::new(),
            failure: Some(message),
            summary: None,
            payload: Vec::new(),
            statistics: Statistics::default(),
            duration_us: micros(started),
        },
        log,
    };
    if let Err(e) = workers.create_lane(&key).await {
        return failed(format!("cannot make the lane's workspace: {e}"), Vec::new());
    }
    let input = request.payload.clone();
    let result = workers.run_block(request).await.checked();
    // What the lane changed is measured even when its worker failed, so
    // that dropping it is recorded.
    let changed = workers.lane_changes(&key).await;
    let mut run = match result.outcome {
        Ok(output) => LaneRun {
            lane: key.lane.clone(),
            result: LaneResult {
                lane: key.lane.clone(),
                signal: output.signal,
                changed: Vec::new(),
                failure: None,
                summary: summary_of(output.structured_output.as_deref()),
                payload: PayloadDelta::between(&input, &output.payload).push,
                statistics: output.statistics,
                duration_us: micros(started),
            },
            log: result.log,
        },
        Err(failure) => failed(failure.message, result.log),
    };
    match changed {
        Ok(changed) => run.result.changed = changed,
        Err(e) => {
            run.result.signal = transitions::WORKER_ERROR.to_string();
            run.result.failure = Some(format!("cannot tell what the lane changed: {e}"));
        }
    }
    run
}

fn micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// Run the lanes of `block` (whose `block_started` is recorded) and fan
/// them in; ends with the block's completion, or with the run waiting at a
/// fan-in gate. A block over a list that is not one fails with the
/// reason; over an empty list it succeeds with no lanes.
pub(crate) async fn execute<W: WorkerHost>(
    rules: Option<&str>,
    workers: &W,
    state: &mut RunState,
    sink: &mut dyn crate::run::event::EventSink,
    block: &Block,
    group: &ParallelGroup,
    base: BlockRequest,
) -> Result<(), EngineError> {
    let started = Instant::now();
    let (lanes, items) = match &group.over {
        None => (group.lanes.keys().cloned().collect(), None),
        Some(over) => match crate::parallel::items::resolve(over, &state.inputs, &base.payload) {
            Ok(items) if items.is_empty() => {
                let done = without_lanes(state, &base, over, started, Ok(()));
                return emit(state, sink, vec![done]);
            }
            Ok(items) => (crate::parallel::items::lane_names(items.len()), Some(items)),
            Err(reason) => {
                let done = without_lanes(state, &base, over, started, Err(reason));
                return emit(state, sink, vec![done]);
            }
        },
    };
    let fan = Fan {
        started,
        rules,
        workers,
        block,
        group,
        step: base.context.step_index,
        index: lanes
            .iter()
            .enumerate()
            .map(|(i, l)| (l.clone(), i))
            .collect(),
        lanes,
        items,
        base,
    };
    fan.record_start(state, sink)?;
    fan.run_lanes(state, sink).await?;

    // Fan-in, in completion order (item order for a fan-out over a list).
    let mut fan_out = state.fan_out.clone().expect("still running");
    fan_out.completed = fan_out.in_fan_in_order().into_iter().cloned().collect();
    let mut sorted = fan.sort(&fan_out);
    let settled = fan.settle_by_hand(&fan_out, &mut sorted.changes);
    let choices = chosen_lanes(&fan_out, &sorted.changes);
    let plan = fan_in::plan(fan_out.merge_strategy, &sorted.changes, &choices);
    if fan.record_conflicts(state, sink, settled, &plan)? {
        return Ok(());
    }
    let discarded = discarded(&fan_out, &plan, &sorted.missing);
    let (outputs, merge_failure) = fan.merge(&fan_out, &plan, &sorted.present).await;
    emit(
        state,
        sink,
        vec![Event::FanInCompleted {
            step: fan.step,
            applied: plan.apply.clone(),
            discarded: discarded.clone(),
            outputs: outputs.clone(),
        }],
    )?;
    let completed = fan.completion(
        state,
        &fan_out,
        &plan,
        &sorted.missing,
        outputs,
        merge_failure,
    );
    emit(state, sink, vec![completed])?;
    workers
        .remove_lanes(&fan.base.context.execution_id, fan.step)
        .await;
    Ok(())
}

/// The completion of a block over a list that made no lanes: an empty
/// list (success) or no list at all (a permanent failure: running the
/// block again finds the same).
fn without_lanes(
    state: &RunState,
    base: &BlockRequest,
    over: &str,
    started: Instant,
    outcome: Result<(), String>,
) -> Event {
    let mut payload = base.payload.clone();
    let step = base.context.step_index;
    let (signal, failure) = match outcome {
        Ok(()) => {
            payload.push(ContextSegment::new(
                format!("fan-in-{step}"),
                "FAN_IN",
                format!("{over} has no items: no lanes ran"),
            ));
            (LANES_SUCCEEDED, None)
        }
        Err(reason) => (transitions::WORKER_ERROR, Some(reason)),
    };
    Event::BlockCompleted {
        step,
        node: base.context.node_id.clone(),
        block: base.context.block_id.clone(),
        signal: signal.to_string(),
        payload: PayloadDelta::between(&state.payload, &payload),
        artifact: None,
        statistics: Statistics::default(),
        duration_us: micros(started),
        queued_us: 0,
        permanent: failure.is_some(),
        failure,
        log: Vec::new(),
        written: Vec::new(),
    }
}

/// One execution of a parallel block: what its steps share.
struct Fan<'a, W> {
    /// When the block's lanes began (this time, if the run was resumed).
    started: Instant,
    rules: Option<&'a str>,
    workers: &'a W,
    block: &'a Block,
    group: &'a ParallelGroup,
    /// The block's own request, which each lane's is made from.
    base: BlockRequest,
    step: u64,
    /// The lanes, in the manifest's order (item order over a list).
    lanes: Vec<String>,
    /// Each lane's position in `lanes`.
    index: HashMap<String, usize>,
    /// The items of the list the block is over, one per lane.
    items: Option<Vec<Value>>,
}

/// The finished lanes, sorted for the fan-in.
struct Sorted<'f> {
    /// Lanes whose workspace still exists.
    present: HashSet<&'f str>,
    /// Lanes whose work was to be merged but whose workspace is gone.
    missing: Vec<&'f str>,
    /// What the lanes to merge changed.
    changes: Vec<LaneChanges>,
}

impl<W: WorkerHost> Fan<'_, W> {
    fn key(&self, lane: &str) -> LaneKey {
        let ctx = &self.base.context;
        LaneKey {
            run_id: ctx.execution_id.clone(),
            step: self.step,
            node: ctx.node_id.clone(),
            block: ctx.block_id.clone(),
            lane: lane.to_string(),
        }
    }

    /// The request of one lane: the block as the lane configures it, at
    /// its own step index.
    fn request_for(&self, lane: &str) -> BlockRequest {
        let index = self.index.get(lane).copied().unwrap_or(0);
        let lane_block = match (&self.items, self.group.lanes.get(lane)) {
            (Some(items), _) => {
                let mut block = self.block.clone();
                block.parallel = None;
                crate::run::template::for_item(&block, index, &items[index])
            }
            (None, Some(spec)) => self.block.for_lane(spec),
            (None, None) => self.block.for_lane(&Default::default()),
        };
        let mut context = self.base.context.clone();
        context.step_index = self.step + index as u64;
        context.config = lane_block.config.clone();
        context.file_restrictions = lane_block.file_restrictions.clone();
        context.system_prompt = crate::run::engine::system_prompt(self.rules, &lane_block);
        BlockRequest {
            worker: self.base.worker.clone(),
            context,
            payload: self.base.payload.clone(),
            timeout: self.base.timeout,
            lane: Some(self.key(lane)),
        }
    }

    /// `lanes_started`, unless this fan-out is being resumed.
    fn record_start(
        &self,
        state: &mut RunState,
        sink: &mut dyn crate::run::event::EventSink,
    ) -> Result<(), EngineError> {
        let ctx = &self.base.context;
        let ours =
            |f: &FanOut| f.node == ctx.node_id && f.block == ctx.block_id && f.step == self.step;
        if !state.fan_out.as_ref().is_some_and(ours) {
            emit(
                state,
                sink,
                vec![Event::LanesStarted {
                    step: self.step,
                    lanes: self.lanes.clone(),
                    merge_strategy: self.group.merge_strategy,
                    over: self.group.over.clone(),
                }],
            )?;
        }
        Ok(())
    }

    /// Fan-out: the lanes not finished yet, in order, at most the host's
    /// window of them at once (a lane starts as another finishes, so its
    /// workspace is made only then), each run again alone after a failed
    /// attempt while it has attempts.
    async fn run_lanes(
        &self,
        state: &mut RunState,
        sink: &mut dyn crate::run::event::EventSink,
    ) -> Result<(), EngineError> {
        let fan_out = state.fan_out.as_ref().expect("recorded above");
        let mut waiting: VecDeque<(String, Option<i64>)> = self
            .lanes
            .iter()
            .filter(|l| !fan_out.finished(l))
            // A lane resumed while its retry waited still waits.
            .map(|l| (l.clone(), fan_out.retry_due.get(l).copied()))
            .collect();
        let window = self
            .workers
            .lane_window(self.block, self.group.max_concurrent)
            .max(1);
        let mut running = FuturesUnordered::new();
        for (lane, due) in self.admit(&mut waiting, window) {
            running.push(self.lane_after(lane, due));
        }
        loop {
            let next = running.next();
            let Some(run) =
                crate::run::engine::recording_telemetry(self.workers, state, sink, next).await?
            else {
                break;
            };
            // Lanes that finished together free their slots together, so
            // the lanes after them start (and are batched) together.
            let mut finished = vec![run];
            while let Some(Some(run)) = running.next().now_or_never() {
                finished.push(run);
            }
            let mut freed = 0;
            for run in finished {
                match self.lane_finished(state, sink, run)? {
                    Some((lane, due)) => running.push(self.lane_after(lane, due)),
                    None => freed += 1,
                }
            }
            for (lane, due) in self.admit(&mut waiting, freed) {
                running.push(self.lane_after(lane, due));
            }
        }
        Ok(())
    }

    /// The next `n` waiting lanes, to start now: the host is told first.
    fn admit(
        &self,
        waiting: &mut VecDeque<(String, Option<i64>)>,
        n: usize,
    ) -> Vec<(String, Option<i64>)> {
        let batch: Vec<(String, Option<i64>)> = waiting.drain(..n.min(waiting.len())).collect();
        if !batch.is_empty() {
            let keys: Vec<LaneKey> = batch.iter().map(|(l, _)| self.key(l)).collect();
            self.workers
                .lanes_starting(&keys, self.group.max_concurrent);
        }
        batch
    }

    /// Run `lane`, once `due` (unix ms) has come if it is given.
    async fn lane_after(&self, lane: String, due: Option<i64>) -> LaneRun {
        if let Some(due) = due {
            self.workers.wait_until(due).await;
        }
        run_lane(self.workers, self.key(&lane), self.request_for(&lane)).await
    }

    /// Whether a lane that ended with `signal` after `failed` failed
    /// attempts runs again, and when: the block's retry policy decides
    /// (its signals, attempts and waits), else any unusable result does,
    /// at once, while the group's `max_attempts` allow. A lane's or the
    /// group's `max_attempts` wins over the policy's.
    fn retry_of(&self, lane: &str, signal: &str, failed: u32) -> Option<Option<(u64, i64)>> {
        let policy = self.block.retry.as_ref();
        let allowed = self
            .group
            .lanes
            .get(lane)
            .and_then(|l| l.max_attempts)
            .or(self.group.max_attempts)
            .or(policy.map(|p| p.max_attempts))
            .unwrap_or(1);
        let retried = match policy {
            Some(p) => p.verdict(signal) == crate::retry::Verdict::Retry,
            None => !mergeable(signal),
        };
        if !retried || failed + 1 >= allowed {
            return None;
        }
        Some(policy.map(|p| {
            let wait = p.wait(failed + 1, crate::retry::random_unit());
            let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
            let due =
                crate::time::now_ms().saturating_add(i64::try_from(wait_ms).unwrap_or(i64::MAX));
            (wait_ms, due)
        }))
    }

    /// Record a lane's attempt: `lane_retried` (and the lane to run again,
    /// with when) when it failed and may run again, else `lane_completed`.
    fn lane_finished(
        &self,
        state: &mut RunState,
        sink: &mut dyn crate::run::event::EventSink,
        run: LaneRun,
    ) -> Result<Option<(String, Option<i64>)>, EngineError> {
        let failed_attempts = state
            .fan_out
            .as_ref()
            .and_then(|f| f.retries.get(&run.lane).copied())
            .unwrap_or(0);
        if let Some(wait) = self.retry_of(&run.lane, &run.result.signal, failed_attempts) {
            emit(
                state,
                sink,
                vec![Event::LaneRetried {
                    step: self.step,
                    lane: run.lane.clone(),
                    attempt: failed_attempts + 1,
                    signal: run.result.signal.clone(),
                    failure: run.result.failure.clone(),
                    wait_ms: wait.map(|(ms, _)| ms),
                    due_at_ms: wait.map(|(_, due)| due),
                }],
            )?;
            return Ok(Some((run.lane, wait.map(|(_, due)| due))));
        }
        let r = run.result;
        emit(
            state,
            sink,
            vec![Event::LaneCompleted {
                step: self.step,
                lane: run.lane,
                signal: r.signal,
                changed: r.changed,
                failure: r.failure,
                summary: r.summary,
                payload: r.payload,
                statistics: r.statistics,
                duration_us: r.duration_us,
                log: run.log,
            }],
        )?;
        Ok(None)
    }

    /// Which finished lanes still have their workspaces, and what the ones
    /// to merge changed. Lanes whose work is to be merged must still have
    /// their workspaces (a crash keeps them; something else may not have).
    /// A lane that failed before its workspace existed has nothing to bring
    /// home.
    fn sort<'f>(&self, fan_out: &'f FanOut) -> Sorted<'f> {
        let present: HashSet<&str> = fan_out
            .completed
            .iter()
            .filter(|r| self.workers.lane_exists(&self.key(&r.lane)))
            .map(|r| r.lane.as_str())
            .collect();
        let missing: Vec<&str> = fan_out
            .completed
            .iter()
            .filter(|r| mergeable(&r.signal) && !present.contains(r.lane.as_str()))
            .map(|r| r.lane.as_str())
            .collect();
        let changes: Vec<LaneChanges> = fan_out
            .completed
            .iter()
            .filter(|r| mergeable(&r.signal) && present.contains(r.lane.as_str()))
            .map(|r| LaneChanges {
                lane: r.lane.clone(),
                changed: r.changed.clone(),
            })
            .collect();
        Sorted {
            present,
            missing,
            changes,
        }
    }

    /// The `NODE_ID`s of `lanes`, in their order.
    fn node_ids(&self, lanes: &[String]) -> Vec<String> {
        lanes.iter().map(|l| self.key(l).agent_id()).collect()
    }

    /// Conflicts the user settled by hand: no lane's version of those files
    /// is applied; the workspace keeps what the user made of them. Their
    /// conflict events.
    fn settle_by_hand(&self, fan_out: &FanOut, changes: &mut [LaneChanges]) -> Vec<Event> {
        let mut settled = Vec::new();
        if fan_out.choice == Some(Decision::Resolved) {
            for (file, lanes) in &fan_out.unresolved {
                for lane in changes.iter_mut() {
                    lane.changed.retain(|f| f != file);
                }
                settled.push(Event::LaneConflictDetected {
                    step: self.step,
                    conflicting_file: file.clone(),
                    lanes: lanes.clone(),
                    resolution: crate::parallel::fan_in::Resolution::UserResolved,
                    applied_from: Some(RESOLVED_BY_HAND.to_string()),
                    lane_node_ids: self.node_ids(lanes),
                    applied_from_node_id: None,
                });
            }
        }
        settled
    }

    /// Record the conflicts (those settled by hand, then the plan's); true
    /// when the plan asks the user and the run now waits at the fan-in gate.
    fn record_conflicts(
        &self,
        state: &mut RunState,
        sink: &mut dyn crate::run::event::EventSink,
        settled: Vec<Event>,
        plan: &FanInPlan,
    ) -> Result<bool, EngineError> {
        let step = self.step;
        let conflict_events: Vec<Event> = settled
            .into_iter()
            .chain(plan.conflicts.iter().map(|c| Event::LaneConflictDetected {
                step,
                conflicting_file: c.conflicting_file.clone(),
                lanes: c.lanes.clone(),
                resolution: c.resolution,
                applied_from: c.applied_from.clone(),
                lane_node_ids: self.node_ids(&c.lanes),
                applied_from_node_id: c.applied_from.as_deref().map(|l| self.key(l).agent_id()),
            }))
            .collect();
        if !conflict_events.is_empty() {
            emit(state, sink, conflict_events)?;
        }
        let Some(prompt) = &plan.gate else {
            return Ok(false);
        };
        let gate_id = sink.new_gate_id()?;
        let prompt = format!(
            "{prompt} Answer `use-lane:<lane>` for all of them, `use-lane:<file>=<lane>,...`, or `resolved` once you have settled them in the workspace yourself."
        );
        emit(
            state,
            sink,
            vec![Event::FanInWaiting {
                step,
                gate_id,
                prompt,
            }],
        )?;
        Ok(true)
    }

    /// Bring each present lane's planned files (and its block outputs) into
    /// the main workspace, in completion order; stops at the first failure.
    async fn merge(
        &self,
        fan_out: &FanOut,
        plan: &FanInPlan,
        present: &HashSet<&str>,
    ) -> (Vec<String>, Option<String>) {
        let mut outputs = Vec::new();
        let mut merge_failure = None;
        let planned: HashMap<&str, &Vec<String>> = plan
            .apply
            .iter()
            .map(|(lane, files)| (lane.as_str(), files))
            .collect();
        for r in &fan_out.completed {
            if !present.contains(r.lane.as_str()) {
                continue;
            }
            let files = planned.get(r.lane.as_str()).map_or(&[][..], |f| &f[..]);
            match self.workers.merge_lane(&self.key(&r.lane), files).await {
                Ok(copied) => outputs.extend(copied),
                Err(e) => {
                    merge_failure = Some(format!("fan-in of lane `{}` failed: {e}", r.lane));
                    break;
                }
            }
        }
        (outputs, merge_failure)
    }

    /// The block's completion: every lane's segments in completion order,
    /// then a summary of the fan-in.
    fn completion(
        &self,
        state: &RunState,
        fan_out: &FanOut,
        plan: &FanInPlan,
        missing: &[&str],
        outputs: Vec<String>,
        merge_failure: Option<String>,
    ) -> Event {
        let step = self.step;
        let mut payload = self.base.payload.clone();
        let mut statistics = Statistics::default();
        for r in &fan_out.completed {
            payload.extend(r.payload.iter().cloned());
            statistics.add(r.statistics);
        }
        payload.push(ContextSegment::new(
            format!("fan-in-{step}"),
            "FAN_IN",
            format!(
                "{} lane(s), merge strategy {}:\n{}",
                fan_out.lanes.len(),
                fan_out.merge_strategy.as_str(),
                summary_lines(fan_out, plan, missing).join("\n")
            ),
        ));
        let mut signal = aggregate_signal(fan_out.completed.iter().map(|r| r.signal.as_str()));
        let mut failure = merge_failure;
        if failure.is_none() && !missing.is_empty() {
            failure = Some(format!(
                "the workspaces of finished lanes {} were gone after a restart",
                missing.join(", ")
            ));
        }
        if failure.is_some() {
            signal = transitions::WORKER_ERROR;
        }
        let artifact = serde_json::json!({
            "mergeStrategy": fan_out.merge_strategy,
            "lanes": fan_out.completed.iter().map(|r| serde_json::json!({
                "lane": r.lane,
                "signal": r.signal,
                "summary": r.summary,
                "changed": r.changed,
            })).collect::<Vec<_>>(),
            "conflicts": plan.conflicts,
            "outputs": outputs,
        })
        .to_string();
        Event::BlockCompleted {
            step,
            node: self.base.context.node_id.clone(),
            block: self.base.context.block_id.clone(),
            signal: signal.to_string(),
            payload: PayloadDelta::between(&state.payload, &payload),
            artifact: Some(artifact),
            statistics,
            duration_us: micros(self.started),
            queued_us: 0,
            failure,
            permanent: false,
            log: Vec::new(),
            written: Vec::new(),
        }
    }
}

/// The lane the user chose for each changed file, once the fan-in gate is
/// answered.
fn chosen_lanes(fan_out: &FanOut, changes: &[LaneChanges]) -> BTreeMap<String, String> {
    let mut choices = BTreeMap::new();
    if let Some(choice) = &fan_out.choice {
        for lane in changes {
            for file in &lane.changed {
                if let Some(chosen) = choice.lane_for(file) {
                    choices.insert(file.clone(), chosen.to_string());
                }
            }
        }
    }
    choices
}

/// The changes not merged: the plan's, then those of every lane that
/// failed or whose workspace is gone.
fn discarded(fan_out: &FanOut, plan: &FanInPlan, missing: &[&str]) -> Vec<(String, Vec<String>)> {
    let mut discarded = plan.discarded.clone();
    let missing: HashSet<&str> = missing.iter().copied().collect();
    for r in &fan_out.completed {
        let dropped = !mergeable(&r.signal) || missing.contains(r.lane.as_str());
        if dropped && !r.changed.is_empty() {
            discarded.push((r.lane.clone(), r.changed.clone()));
        }
    }
    discarded
}

/// The fan-in summary's lines: each lane's signal (with its summary or
/// failure), each conflict and how it was settled, each lane whose
/// workspace was gone.
fn summary_lines(fan_out: &FanOut, plan: &FanInPlan, missing: &[&str]) -> Vec<String> {
    let mut lines = Vec::new();
    for r in &fan_out.completed {
        let mut line = format!("lane {} -> {}", r.lane, r.signal);
        if let Some(summary) = &r.summary {
            line.push_str(&format!(": {summary}"));
        }
        if let Some(failure) = &r.failure {
            line.push_str(&format!(" (failed: {failure})"));
        }
        lines.push(line);
    }
    for c in &plan.conflicts {
        lines.push(format!(
            "conflict: {} changed by {}; kept {}",
            c.conflicting_file,
            c.lanes.join(", "),
            c.applied_from.as_deref().unwrap_or("none")
        ));
    }
    if fan_out.choice == Some(Decision::Resolved) {
        for (file, lanes) in &fan_out.unresolved {
            lines.push(format!(
                "conflict: {file} changed by {}; settled by hand in the workspace",
                lanes.join(", ")
            ));
        }
    }
    for lane in missing {
        lines.push(format!(
            "lane {lane}: its workspace was gone after a restart; its changes were not merged"
        ));
    }
    lines
}

#[cfg(test)]
mod tests;
