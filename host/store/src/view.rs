//! Views of a run for people and programs: the steps of a branch as
//! `wfhost show` lists them and the HTTP API returns them, read from the
//! branch's events.

use serde::Serialize;
use wfhost_core::run::event::Event;

use crate::StoredEvent;

/// One executed step of a branch, as `show` lists it and the API returns it.
#[derive(Debug, Serialize, PartialEq, schemars::JsonSchema)]
pub struct StepLine {
    pub step: u64,
    pub block: String,
    pub attempt: u32,
    pub signal: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    pub duration_ms: f64,
    /// How long it waited for an agent before it ran (not in
    /// `duration_ms`); absent when it did not wait.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queued_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Set when the block had no transition for its signal and took its
    /// `SIGNAL:FAIL_DEFAULT` one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_for: Option<String>,
    /// Executions of this step cut short by a crash and run again.
    pub interrupted: u32,
    /// The snapshot after this step, to fork from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// The lanes of a parallel block, in completion order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lanes: Vec<LaneLine>,
    /// What the block's plugin logged as a warning or an error (a rolled
    /// back change outside the file restrictions, say): shown even when
    /// the block succeeded.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Set when the block's retry policy ran it again after this step
    /// instead of taking a transition.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryLine>,
}

/// The retry a failed step was given.
#[derive(Debug, Serialize, PartialEq, schemars::JsonSchema)]
pub struct RetryLine {
    /// Which retry of the block (1 for the first).
    pub retry: u32,
    /// The wait drawn before it, in milliseconds.
    pub wait_ms: u64,
    /// When the retry was due, unix ms.
    pub due_at_ms: i64,
}

/// The lines of a block's log that are warnings or errors, without their
/// level mark.
pub fn warnings_of(log: &[String]) -> Vec<String> {
    log.iter()
        .filter_map(|l| {
            l.strip_prefix("[warn] ")
                .or_else(|| l.strip_prefix("[error] "))
                .map(str::to_string)
        })
        .collect()
}

/// One lane of a parallel block's step.
#[derive(Debug, Serialize, PartialEq, schemars::JsonSchema)]
pub struct LaneLine {
    pub lane: String,
    pub signal: String,
    pub duration_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Failed attempts of the lane before this one, each run again.
    #[serde(skip_serializing_if = "is_zero")]
    pub retries: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The snapshot a fork at `at` continues from, on the branch `chain` is:
/// a snapshot id (`sn-…`) as given; a step number `N`: the state before
/// step N ran (after step N-1's action; step 0: the run's start), so the
/// fork runs step N again; a block (`node.block`, or a block name that is
/// unique on the branch): before its last execution on the branch.
pub fn fork_point(chain: &[StoredEvent], at: &str) -> Result<String, String> {
    let at = at.trim();
    if at.starts_with("sn-") {
        return Ok(at.to_string());
    }
    before_step(chain, at).map(|(_, snapshot)| snapshot)
}

/// The step `at` names on the branch `chain` is (a step number, or a
/// block: its last execution), and the snapshot of the state before it.
pub fn before_step(chain: &[StoredEvent], at: &str) -> Result<(u64, String), String> {
    let at = at.trim();
    let steps = steps_of(chain);
    let step = match at.parse::<u64>() {
        Ok(n) => n,
        Err(_) => last_step_of_block(&steps, at)?,
    };
    let last = steps.iter().map(|l| l.step).max();
    if last.is_none_or(|last| step > last) {
        return Err(match last {
            Some(last) => format!("step {step}: the branch has steps 0 to {last}"),
            None => format!("step {step}: no step ran on the branch yet"),
        });
    }
    let before = match step {
        0 => chain.first().and_then(|e| e.snapshot.clone()),
        n => steps
            .iter()
            .rev()
            .find(|l| l.step == n - 1)
            .and_then(|l| l.snapshot.clone()),
    };
    before.map(|snapshot| (step, snapshot)).ok_or_else(|| {
        format!("step {step}: the state before it has no snapshot (the step before it ended the run or opened a gate); choose an earlier step")
    })
}

/// The step of the last execution of the block `name` names: `node.block`,
/// or a block name no other node's block shares.
fn last_step_of_block(steps: &[StepLine], name: &str) -> Result<u64, String> {
    let matches =
        |block: &str| block == name || block.split_once('.').is_some_and(|(_, b)| b == name);
    let mut blocks: Vec<&str> = steps
        .iter()
        .filter(|l| matches(&l.block))
        .map(|l| l.block.as_str())
        .collect();
    blocks.sort_unstable();
    blocks.dedup();
    match blocks.as_slice() {
        [] => Err(format!(
            "`{name}` is neither a snapshot (sn-…), a step number nor a block that ran on the branch"
        )),
        [_] => Ok(steps
            .iter()
            .rev()
            .find(|l| matches(&l.block))
            .map_or(0, |l| l.step)),
        several => Err(format!(
            "`{name}` names several blocks ({}): write NODE.BLOCK",
            several.join(", ")
        )),
    }
}

/// The steps of a branch from its events (see [`crate::Store::chain`]).
pub fn steps_of(chain: &[StoredEvent]) -> Vec<StepLine> {
    let mut steps: Vec<StepLine> = Vec::new();
    let mut started: Option<(u64, u32)> = None;
    let mut interrupted = 0;
    let mut lanes = Vec::new();
    let mut lane_retries: std::collections::BTreeMap<String, u32> = Default::default();
    for e in chain {
        match &e.event {
            Event::BlockStarted { step, attempt, .. } => {
                started = Some((*step, *attempt));
                lanes.clear();
                lane_retries.clear();
            }
            Event::LaneRetried { lane, .. } => *lane_retries.entry(lane.clone()).or_default() += 1,
            Event::RetryScheduled {
                step,
                retry,
                wait_ms,
                due_at_ms,
                ..
            } => {
                if let Some(line) = steps.iter_mut().rev().find(|l| l.step == *step) {
                    line.snapshot = e.snapshot.clone();
                    line.retry = Some(RetryLine {
                        retry: *retry,
                        wait_ms: *wait_ms,
                        due_at_ms: *due_at_ms,
                    });
                }
            }
            Event::LaneCompleted {
                lane,
                signal,
                duration_us,
                failure,
                ..
            } => lanes.push(LaneLine {
                lane: lane.clone(),
                signal: signal.clone(),
                duration_ms: *duration_us as f64 / 1000.0,
                failure: failure.clone(),
                retries: lane_retries.get(lane).copied().unwrap_or(0),
            }),
            Event::Resumed {
                interrupted: Some(_),
            } => interrupted += 1,
            Event::BlockCompleted {
                step,
                node,
                block,
                signal,
                duration_us,
                queued_us,
                failure,
                log,
                ..
            } => {
                let attempt = started.filter(|(s, _)| s == step).map_or(0, |(_, a)| a);
                steps.push(StepLine {
                    step: *step,
                    block: format!("{node}.{block}"),
                    attempt,
                    signal: signal.clone(),
                    action: None,
                    command: None,
                    duration_ms: *duration_us as f64 / 1000.0,
                    queued_ms: (*queued_us > 0).then(|| *queued_us as f64 / 1000.0),
                    failure: failure.clone(),
                    fallback_for: None,
                    interrupted: std::mem::take(&mut interrupted),
                    snapshot: None,
                    lanes: std::mem::take(&mut lanes),
                    warnings: warnings_of(log),
                    retry: None,
                });
            }
            Event::ActionTaken {
                step,
                action,
                command,
                gate_id,
                fallback_for,
            } => {
                if let Some(line) = steps.iter_mut().rev().find(|l| l.step == *step) {
                    line.fallback_for = fallback_for.clone();
                    line.action = Some(action.clone());
                    line.command = Some(match gate_id {
                        Some(id) => format!("gate {id}"),
                        None => command.to_string(),
                    });
                    line.snapshot = e.snapshot.clone();
                }
            }
            _ => {}
        }
    }
    steps
}
