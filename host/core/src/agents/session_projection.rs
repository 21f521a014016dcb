//! Seed 001's `.agents-work/<session>/status.json` and `tasks.yaml` as a
//! projection of a run's event log.
//!
//! [`SessionProjection`] is a pure fold, like [`crate::run::state::RunState`]:
//! built from the workflow and the session name, it takes the run's events
//! one by one ([`SessionProjection::apply`], with the time each was
//! recorded) and can say at any point what the two files contain
//! ([`SessionProjection::status`], [`SessionProjection::tasks`]). The host
//! rewrites both files after every recorded event; folding the whole log
//! again gives the same files, so a resumed run picks up where it was.
//!
//! # Mapping
//!
//! **Tasks** (`tasks.yaml`): one task per block of the workflow, id
//! `node.block` (the start node first, each node's entry block first, the
//! rest in name order). The goal is the block's `prompt.task`, else
//! "Run the `<worker>` worker"; the acceptance checks are its
//! `prompt.output_checklist`, else one generic check (plus one for a
//! `validation_schema`), so that every task has at least one. Status:
//!
//! - `not-started` until the block's first `block_started`;
//! - `in-progress` from each `block_started` (a retry too) to its
//!   `block_completed`;
//! - `implemented` when it completed with a success-like signal (anything
//!   not in [`FAILURE_SIGNALS`], without a `failure`);
//! - `blocked` when its last completion had a `failure` or a failure-like
//!   signal, when the run failed while it was running, or when the run
//!   failed on its transition (a `FAIL` action, or the engine giving up on
//!   its signal);
//! - `completed`: when a gate after the block passes (approved, answered,
//!   a review strategy chosen — not changes requested, not cancelled) its
//!   `implemented` task becomes `completed`, as seed 001's orchestrator
//!   promotes a task once its own gates pass; when the run ends
//!   successfully every task still `implemented` does too (the host is the
//!   orchestrator that promotes them).
//!
//! **`current_state`**: `ASK_USER` while the run waits at a gate (a `GATE`
//! action, a `NEEDS_DECISION` pause, a fan-in conflict gate); `DONE` once
//! it succeeded; `BLOCKED` once it failed; otherwise the state named by
//! the running node's `static_memory.session_state` (when it is one of
//! [`STATES`], e.g. `"DESIGN"`), else `IMPLEMENT_LOOP`.
//!
//! **`user_decisions`**: every gate opened is a `pending` decision whose
//! question is the gate's prompt, `asked_at` the time it opened and
//! `state_context` the state the run was in just before. Its id is the
//! gate id when that is a `UD-<N>` not yet used in the session (the engine
//! numbers gates that way, so `wfhost gate RUN UD-1 …` answers `UD-1`),
//! else [`SessionStatus::next_decision_id`]. `gate_answered` makes it
//! `answered`, with the answer's text (`approved`,
//! `changes-requested:<text>`, `use-lane:…`, a free answer), `resolved_at`
//! and a `resolution_reason` saying how the run goes on. A run that ends
//! while a decision is pending leaves none `pending`: cancelled by the
//! user (`wfhost cancel`) they are `cancelled`, any other end makes them
//! `skipped` (no longer applicable), each with the reason.
//!
//! **`retry_counts`**: per task that ran more than once, the executions
//! beyond the first (`attempt - 1` of its latest `block_started`), keyed by
//! the signal that sent the run back to it (`SIGNAL:VALIDATION_FAIL`,
//! `SIGNAL:GATE_CHANGES_REQUESTED`, …) — the host's analogue of seed 001's
//! fix loops. Only failure-like signals and requested changes count: a
//! block the work flows back to after a success is not retrying. A block re-run after a crash keeps its attempt number and is
//! not a retry. Tasks that never retried have no entry.
//!
//! **`known_issues`**: the open failures — per block, the `failure` of its
//! latest completion (cleared when it completes again without one), then
//! the run's failure reason once it failed.
//!
//! **`assumptions`**: empty; the host makes none (agents of the workflow
//! may keep their own files in the session folder). **`last_ci_result`**:
//! `unknown` (a run has no CI). **`last_update`**: the time of the last
//! applied event.
//!
//! Event kinds the projection does not know about only move
//! `last_update`; of the lane events, `fan_in_waiting` is a gate like any
//! other and `lanes_started`/`lane_completed` tell
//! [`SessionProjection::lanes_running`].

use std::collections::{BTreeMap, BTreeSet};

use crate::actions::WellKnownGate;
use crate::agents::session_artifacts::{
    ApproveDesignHistoryEntry, CorrectionDispatch, CorrectionStatus, DecisionStatus, GateTracking,
    STATES, SessionStatus, TaskEntry, TaskStatus, UserDecision, render_tasks_yaml, session_name,
};
use crate::manifest::Workflow;
use crate::run::event::gate_number;
use crate::run::event::{CommandRecord, Decision, Event, Outcome, blocker_of};
use crate::run::questions::{self, AskedQuestion, GateQuestion, QuestionState};

/// The start of the failure reason of a run the user cancelled
/// (`wfhost_store`'s `CANCELLED`).
pub const CANCELLED: &str = "cancelled";

/// Signals after which a block's task is `blocked` rather than
/// `implemented`.
pub const FAILURE_SIGNALS: &[&str] = &[
    crate::run::transitions::WORKER_ERROR,
    "SIGNAL:FAILED",
    "SIGNAL:BLOCKED",
    "SIGNAL:NEEDS_INFO",
    "SIGNAL:FAIL",
    crate::run::transitions::VALIDATION_FAIL,
];

/// The `static_memory` key of a node that names the session state
/// (one of [`STATES`]) reported while the node's blocks run.
pub const SESSION_STATE_KEY: &str = "session_state";

/// The state reported while a run goes on and its node names none.
pub const DEFAULT_STATE: &str = "IMPLEMENT_LOOP";

/// Whether a block run again after `cause` (the signal the run last acted
/// on) is a retry: after a failure-like signal or requested changes.
fn is_retry_cause(cause: &str) -> bool {
    cause == "RERUN"
        || cause == crate::run::transitions::GATE_CHANGES_REQUESTED
        || FAILURE_SIGNALS.contains(&cause)
}

/// Whether `decision` passes its gate: the run goes on past it (an
/// approval, an answer, a strategy), not back (requested changes) nor to
/// an end (a cancellation), nor into a parallel block's fan-in.
fn passes(decision: &Decision) -> bool {
    matches!(
        decision,
        Decision::Approved
            | Decision::Text { .. }
            | Decision::Strategy { .. }
            | Decision::Answers { .. }
    )
}

/// Whether a completion with `signal` (and `failure`) leaves its task
/// blocked.
pub fn is_failure(signal: &str, failure: Option<&str>) -> bool {
    failure.is_some() || FAILURE_SIGNALS.contains(&signal)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum RunPhase {
    Running,
    Waiting,
    Succeeded,
    Failed,
}

/// A gate's decision record and the block that opened it.
#[derive(Debug, Clone)]
struct GateSlot {
    decision: usize,
    block: String,
    /// A gate that asks several questions: each, with its record's index.
    questions: Vec<(AskedQuestion, usize)>,
}

/// `status.json` and `tasks.yaml` of one session, folded from a run's
/// events (see the module docs for the mapping).
#[derive(Debug, Clone)]
pub struct SessionProjection {
    session: String,
    tasks: Vec<TaskEntry>,
    /// `node.block` → index in `tasks`.
    index: BTreeMap<String, usize>,
    /// Node → the state its `static_memory` names.
    node_states: BTreeMap<String, String>,
    /// `node.block` → the contract agent it plays, where it names one.
    agent_names: BTreeMap<String, String>,
    /// `node.block` → the task id its agent is dispatched with
    /// (`config.input.task.id`), where it names one.
    dispatched_ids: BTreeMap<String, String>,
    /// Task ids whose gates passed: the blocks' `node.block` and the ids
    /// their agents were dispatched with.
    gates_passed: BTreeSet<String>,
    phase: RunPhase,
    /// The node of the block that ran last.
    current_node: Option<String>,
    /// The block between its start and its completion.
    running: Option<String>,
    /// The block whose transition is next (after its completion or its
    /// gate's answer).
    deciding: Option<String>,
    /// The signal the run last acted on: the cause of the next retry.
    last_signal: Option<String>,
    decisions: Vec<UserDecision>,
    gates: BTreeMap<String, GateSlot>,
    retry_counts: BTreeMap<String, BTreeMap<String, u32>>,
    /// Per block, the retries already counted in `retry_counts`.
    retries: BTreeMap<String, u32>,
    /// Open block failures, in the order they appeared.
    block_issues: Vec<(String, String)>,
    /// Lanes of the running parallel block that have not completed.
    lanes_pending: BTreeSet<String>,
    run_issue: Option<String>,
    last_update: String,
    /// The well-known gate the run waits at.
    waiting_well_known: Option<WellKnownGate>,
    gate_tracking: Option<GateTracking>,
    /// The correction block running (its `node.block`), once dispatched.
    correcting: Option<String>,
    history: Vec<ApproveDesignHistoryEntry>,
    blocker: Option<String>,
}

impl SessionProjection {
    /// The projection of a run of `workflow` that has not started, for
    /// session `session` (`YYYY-MM-DD_<slug>`).
    pub fn new(workflow: &Workflow, session: impl Into<String>) -> Self {
        let mut nodes: Vec<&String> = workflow.nodes.keys().collect();
        nodes.sort_by_key(|n| (**n != workflow.start_node, n.as_str()));
        let mut tasks = Vec::new();
        let mut index = BTreeMap::new();
        let mut node_states = BTreeMap::new();
        let mut agent_names = BTreeMap::new();
        let mut dispatched_ids = BTreeMap::new();
        for node_id in nodes {
            let node = &workflow.nodes[node_id];
            if let Some(state) = node
                .static_memory
                .get(SESSION_STATE_KEY)
                .and_then(|v| v.as_str())
                .filter(|s| STATES.contains(s))
            {
                node_states.insert(node_id.clone(), state.to_string());
            }
            let mut blocks: Vec<&String> = node.blocks.keys().collect();
            blocks.sort_by_key(|b| (**b != node.entry_block, b.as_str()));
            for block_id in blocks {
                let block = &node.blocks[block_id];
                let prompt = block.prompt.as_ref();
                let goal = prompt
                    .and_then(|p| p.task.as_deref())
                    .filter(|t| !t.trim().is_empty())
                    .map_or_else(
                        || format!("Run the `{}` worker", block.worker),
                        str::to_string,
                    );
                let mut checks: Vec<String> = prompt
                    .map(|p| p.output_checklist.clone())
                    .unwrap_or_default();
                if checks.is_empty() {
                    checks.push("The block completes with a success signal".to_string());
                    if block.validation_schema.is_some() {
                        checks.push("Its output satisfies the block's validation_schema".into());
                    }
                }
                let id = format!("{node_id}.{block_id}");
                let prefix = prompt.and_then(|p| p.prefix.as_deref());
                if let Some(name) = super::agent_protocol::agent_name(block_id, prefix) {
                    agent_names.insert(id.clone(), name.to_string());
                }
                if let Some(task) = block
                    .config
                    .pointer("/input/task/id")
                    .and_then(|v| v.as_str())
                    .filter(|t| !t.trim().is_empty())
                {
                    dispatched_ids.insert(id.clone(), task.to_string());
                }
                index.insert(id.clone(), tasks.len());
                tasks.push(TaskEntry {
                    id,
                    goal,
                    status: TaskStatus::NotStarted,
                    acceptance_checks: checks,
                });
            }
        }
        SessionProjection {
            session: session.into(),
            tasks,
            index,
            node_states,
            agent_names,
            dispatched_ids,
            gates_passed: BTreeSet::new(),
            phase: RunPhase::Running,
            current_node: None,
            running: None,
            deciding: None,
            last_signal: None,
            decisions: Vec::new(),
            gates: BTreeMap::new(),
            retry_counts: BTreeMap::new(),
            retries: BTreeMap::new(),
            block_issues: Vec::new(),
            run_issue: None,
            lanes_pending: BTreeSet::new(),
            last_update: String::new(),
            waiting_well_known: None,
            gate_tracking: None,
            correcting: None,
            history: Vec::new(),
            blocker: None,
        }
    }

    /// Whether lanes of a parallel block are running: lanes isolated by a
    /// copy measure what they changed against the main workspace, which
    /// must not change under them, so the files are not rewritten then.
    pub fn lanes_running(&self) -> bool {
        !self.lanes_pending.is_empty()
    }

    /// The session name.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// Fold one event recorded at `at` (ISO-8601 UTC).
    pub fn apply(&mut self, event: &Event, at: &str) {
        self.last_update = at.to_string();
        match event {
            Event::RunStarted { start_node, .. } => {
                self.phase = RunPhase::Running;
                self.current_node = Some(start_node.clone());
            }
            Event::BlockStarted {
                node,
                block,
                attempt,
                ..
            } => self.block_started(node, block, *attempt, at),
            Event::BlockCompleted {
                step,
                node,
                block,
                signal,
                failure,
                ..
            } => self.block_completed(*step, node, block, signal, failure.as_deref()),
            Event::ActionTaken {
                command, gate_id, ..
            } => self.action_taken(command, gate_id.as_deref(), at),
            Event::FanInWaiting {
                gate_id, prompt, ..
            } => {
                let block = self.running.clone().unwrap_or_default();
                self.open_gate(Some(gate_id), prompt, block, at);
            }
            Event::GateAnswered { gate_id, decision } => self.gate_answered(gate_id, decision, at),
            Event::RunFinished { outcome } => {
                self.lanes_pending.clear();
                self.finish(outcome);
                self.resolve_pending(outcome, at);
            }
            Event::LanesStarted { lanes, .. } => {
                self.lanes_pending = lanes.iter().cloned().collect();
            }
            Event::LaneCompleted { lane, .. } => {
                self.lanes_pending.remove(lane);
            }
            _ => {}
        }
    }

    /// A block starts (or starts again): its task is in progress, a rerun
    /// counted as a retry by its cause, a queued design correction
    /// dispatched.
    fn block_started(&mut self, node: &str, block: &str, attempt: u32, at: &str) {
        let key = format!("{node}.{block}");
        let wanted = attempt.saturating_sub(1);
        let counted = self.retries.get(&key).copied().unwrap_or(0);
        if wanted > counted {
            let cause = self
                .last_signal
                .clone()
                .unwrap_or_else(|| "RERUN".to_string());
            // A fix loop is a retry; a block that runs again because
            // the work flowed back to it after a success is not.
            if is_retry_cause(&cause) {
                *self
                    .retry_counts
                    .entry(key.clone())
                    .or_default()
                    .entry(cause)
                    .or_default() += wanted - counted;
            }
            self.retries.insert(key.clone(), wanted);
        }
        self.set_status(&key, TaskStatus::InProgress);
        // Its task is worked on again: it is promoted again only once a
        // gate after this run of it passes.
        self.gates_passed.remove(&key);
        if let Some(id) = self.dispatched_ids.get(&key) {
            self.gates_passed.remove(id);
        }
        // The first block after a queued correction does it. A block
        // re-run after a crash is the same dispatch.
        if let Some(t) = &mut self.gate_tracking {
            let t = &mut t.approve_design;
            if t.correction_status == CorrectionStatus::Queued {
                t.correction_status = CorrectionStatus::Dispatched;
                t.last_correction_dispatch = CorrectionDispatch {
                    agent: Some(
                        self.agent_names
                            .get(&key)
                            .cloned()
                            .unwrap_or_else(|| key.clone()),
                    ),
                    task_id: Some(key.clone()),
                    at: Some(at.to_string()),
                };
                self.correcting = Some(key.clone());
            }
        }
        self.current_node = Some(node.to_string());
        self.running = Some(key);
        self.deciding = None;
        self.phase = RunPhase::Running;
    }

    /// A block completed: its task implemented or blocked, its failure
    /// kept as an issue, a design correction it carried completed.
    fn block_completed(
        &mut self,
        step: u64,
        node: &str,
        block: &str,
        signal: &str,
        failure: Option<&str>,
    ) {
        let key = format!("{node}.{block}");
        let failed = is_failure(signal, failure);
        self.set_status(
            &key,
            if failed {
                TaskStatus::Blocked
            } else {
                TaskStatus::Implemented
            },
        );
        self.block_issues.retain(|(b, _)| *b != key);
        if let Some(why) = failure {
            self.block_issues
                .push((key.clone(), format!("{key} (step {step}): {why}")));
        }
        if self.correcting.as_ref() == Some(&key) {
            self.correcting = None;
            if let Some(t) = &mut self.gate_tracking {
                t.approve_design.correction_status = CorrectionStatus::Completed;
            }
        }
        self.last_signal = Some(signal.to_string());
        self.running = None;
        self.lanes_pending.clear();
        self.deciding = Some(key);
    }

    /// The command a block's signal led to: a gate opened, the run ended
    /// or failed, or the work moves on.
    fn action_taken(&mut self, command: &CommandRecord, gate_id: Option<&str>, at: &str) {
        match command {
            CommandRecord::Gate { prompt, questions } => {
                let block = self.deciding.clone().unwrap_or_default();
                match gate_id {
                    Some(id) if !questions.is_empty() => {
                        self.open_questions(id, questions, block, at)
                    }
                    id => self.open_gate(id, prompt, block, at),
                }
            }
            CommandRecord::End => self.finish(&Outcome::Succeeded),
            CommandRecord::Fail { reason } => {
                let reason = match &self.deciding {
                    Some(block) => format!("block `{block}`: {reason}"),
                    None => reason.clone(),
                };
                self.finish(&Outcome::Failed { reason });
            }
            CommandRecord::Jump { .. } | CommandRecord::Call { .. } | CommandRecord::Return => {
                self.deciding = None;
            }
        }
    }

    /// A gate was answered: its decision resolved (or its questions
    /// answered), a requested design change queued, the run going on.
    fn gate_answered(&mut self, gate_id: &str, decision: &Decision, at: &str) {
        let Some(slot) = self.gates.get(gate_id).cloned() else {
            return;
        };
        if !slot.questions.is_empty() {
            self.answer_questions(gate_id, slot, decision, at);
            return;
        }
        let d = &mut self.decisions[slot.decision];
        d.resolved_at = Some(at.to_string());
        if let Decision::Cancelled { reason } = decision {
            d.status = DecisionStatus::Cancelled;
            d.answer = None;
            d.resolution_reason = Some(reason.clone());
        } else {
            d.status = DecisionStatus::Answered;
            d.answer = Some(decision.to_string());
            d.resolution_reason = Some(match decision {
                Decision::UseLane { .. } => {
                    "lane choice recorded; the parallel block resumes its fan-in".to_string()
                }
                _ => format!("the run continues with {}", decision.signal()),
            });
        }
        if gate_id == WellKnownGate::ApproveDesign.decision_id()
            && let Decision::ChangesRequested { .. } = decision
        {
            self.history.push(ApproveDesignHistoryEntry {
                at: at.to_string(),
                decision_id: gate_id.to_string(),
                answer: decision.to_string(),
                state_context: d.state_context.clone(),
            });
            let t = &mut self
                .gate_tracking
                .get_or_insert_with(GateTracking::default)
                .approve_design;
            t.correction_status = CorrectionStatus::Queued;
            self.correcting = None;
        }
        self.waiting_well_known = None;
        self.phase = RunPhase::Running;
        if passes(decision) {
            self.gate_passed(&slot.block);
        }
        if matches!(decision, Decision::UseLane { .. }) {
            // The parallel block itself goes on.
            self.running = Some(slot.block);
        } else {
            self.last_signal = Some(decision.signal().to_string());
            self.deciding = Some(slot.block);
        }
    }

    fn set_status(&mut self, key: &str, status: TaskStatus) {
        match self.index.get(key) {
            Some(&i) => self.tasks[i].status = status,
            None => {
                // A block the workflow does not declare (a log of another
                // definition): it still gets a task.
                self.index.insert(key.to_string(), self.tasks.len());
                self.tasks.push(TaskEntry {
                    id: key.to_string(),
                    goal: format!("Run block `{key}`"),
                    status,
                    acceptance_checks: vec!["The block completes with a success signal".into()],
                });
            }
        }
    }

    fn open_gate(&mut self, gate_id: Option<&str>, prompt: &str, block: String, at: &str) {
        if let Some(gate) = gate_id.and_then(WellKnownGate::from_decision_id) {
            // At most once a session: a re-approval asks the same record
            // again (its earlier changes-requested answers are in the
            // history file).
            let record = UserDecision {
                decision_id: gate.decision_id().to_string(),
                question: prompt.to_string(),
                status: DecisionStatus::Pending,
                answer: None,
                asked_at: at.to_string(),
                resolved_at: None,
                state_context: gate.name().to_string(),
                resolution_reason: None,
            };
            let index = match self
                .decisions
                .iter()
                .position(|d| d.decision_id == gate.decision_id())
            {
                Some(i) => {
                    self.decisions[i] = record;
                    i
                }
                None => {
                    self.decisions.push(record);
                    self.decisions.len() - 1
                }
            };
            self.gates.insert(
                gate.decision_id().to_string(),
                GateSlot {
                    decision: index,
                    block,
                    questions: Vec::new(),
                },
            );
            self.waiting_well_known = Some(gate);
            self.phase = RunPhase::Waiting;
            return;
        }
        let state_context = self.current_state();
        let sequential = |id: &str| {
            id.strip_prefix("UD-")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        };
        let decision_id = match gate_id {
            Some(id) if sequential(id) && !self.decisions.iter().any(|d| d.decision_id == id) => {
                id.to_string()
            }
            _ => self.status().next_decision_id(),
        };
        if let Some(id) = gate_id {
            self.gates.insert(
                id.to_string(),
                GateSlot {
                    decision: self.decisions.len(),
                    block,
                    questions: Vec::new(),
                },
            );
        }
        self.decisions.push(UserDecision {
            decision_id,
            question: prompt.to_string(),
            status: DecisionStatus::Pending,
            answer: None,
            asked_at: at.to_string(),
            resolved_at: None,
            state_context,
            resolution_reason: None,
        });
        self.phase = RunPhase::Waiting;
    }

    /// A gate that asks several questions: one pending decision per
    /// question.
    fn open_questions(&mut self, gate_id: &str, asked: &[GateQuestion], block: String, at: &str) {
        let state_context = self.current_state();
        let mut questions = Vec::new();
        for q in asked {
            let fresh = gate_number(&q.id).is_some()
                && !self.decisions.iter().any(|d| d.decision_id == q.id);
            let decision_id = if fresh {
                q.id.clone()
            } else {
                self.status().next_decision_id()
            };
            questions.push((AskedQuestion::new(q.clone()), self.decisions.len()));
            self.decisions.push(UserDecision {
                decision_id,
                question: q.text.clone(),
                status: DecisionStatus::Pending,
                answer: None,
                asked_at: at.to_string(),
                resolved_at: None,
                state_context: state_context.clone(),
                resolution_reason: None,
            });
        }
        self.gates.insert(
            gate_id.to_string(),
            GateSlot {
                decision: questions.first().map_or(0, |(_, i)| *i),
                block,
                questions,
            },
        );
        self.phase = RunPhase::Waiting;
    }

    /// An answer to a gate that asks questions: each question's record
    /// follows it; the run goes on once none is pending.
    fn answer_questions(
        &mut self,
        gate_id: &str,
        mut slot: GateSlot,
        decision: &Decision,
        at: &str,
    ) {
        let mut asked: Vec<AskedQuestion> = slot.questions.iter().map(|(q, _)| q.clone()).collect();
        let Ok(settled) = questions::apply(gate_id, &mut asked, decision) else {
            return;
        };
        for ((old, index), new) in slot.questions.iter_mut().zip(asked) {
            let d = &mut self.decisions[*index];
            match &new.state {
                QuestionState::Pending => {}
                _ if old.state == new.state => {}
                QuestionState::Answered { answer } => {
                    d.status = DecisionStatus::Answered;
                    d.answer = Some(answer.clone());
                    d.resolved_at = Some(at.to_string());
                    d.resolution_reason = None;
                }
                QuestionState::Cancelled { reason } => {
                    d.status = DecisionStatus::Cancelled;
                    d.answer = None;
                    d.resolved_at = Some(at.to_string());
                    d.resolution_reason = Some(reason.clone());
                }
            }
            *old = new;
        }
        let block = slot.block.clone();
        self.gates.insert(gate_id.to_string(), slot);
        if settled {
            self.phase = RunPhase::Running;
            self.last_signal = Some(decision.signal().to_string());
            self.gate_passed(&block);
            self.deciding = Some(block);
        }
    }

    /// The gate after block `key` passed: its task, when implemented, is
    /// completed (seed 001: the orchestrator promotes a task once its own
    /// gates pass), and its ids are remembered for a tasks.yaml an agent
    /// keeps ([`SessionProjection::gates_passed`]).
    fn gate_passed(&mut self, key: &str) {
        if let Some(&i) = self.index.get(key)
            && self.tasks[i].status == TaskStatus::Implemented
        {
            self.tasks[i].status = TaskStatus::Completed;
        }
        self.gates_passed.insert(key.to_string());
        if let Some(id) = self.dispatched_ids.get(key) {
            self.gates_passed.insert(id.clone());
        }
    }

    /// The task ids whose gates passed: each gated block's `node.block`
    /// and the task id its agent was dispatched with
    /// (`config.input.task.id`). A tasks.yaml an agent keeps has those
    /// tasks promoted from `implemented` to `completed`.
    pub fn gates_passed(&self) -> &BTreeSet<String> {
        &self.gates_passed
    }

    fn finish(&mut self, outcome: &Outcome) {
        match outcome {
            Outcome::Succeeded => {
                self.phase = RunPhase::Succeeded;
                for t in &mut self.tasks {
                    if t.status == TaskStatus::Implemented {
                        t.status = TaskStatus::Completed;
                    }
                }
            }
            Outcome::Failed { reason } => {
                self.block_unfinished_tasks();
                self.run_issue = Some(format!("run failed: {reason}"));
                self.blocker = blocker_of(reason).map(str::to_string);
            }
            Outcome::Cancelled { by, reason } => {
                self.block_unfinished_tasks();
                let text = Outcome::cancelled_text(by, reason.as_deref());
                self.run_issue = Some(format!("run {text}"));
            }
        }
    }

    /// The run ended without success: the tasks under way are blocked.
    fn block_unfinished_tasks(&mut self) {
        self.phase = RunPhase::Failed;
        for key in [self.running.take(), self.deciding.take()]
            .into_iter()
            .flatten()
        {
            self.set_status(&key, TaskStatus::Blocked);
        }
    }

    /// The run ended while decisions were pending: none is left
    /// `pending`. A run the user cancelled (`wfhost cancel`; before event
    /// format 8, a failure whose reason starts `cancelled`) cancels them — the user cancelled the
    /// decision with the run; any other end skips them, the question no
    /// longer applying once the run is over (seed 001's `skipped`).
    fn resolve_pending(&mut self, outcome: &Outcome, at: &str) {
        let (status, reason) = match outcome {
            Outcome::Failed { reason } if reason.starts_with(CANCELLED) => {
                (DecisionStatus::Cancelled, format!("the run was {reason}"))
            }
            Outcome::Cancelled { by, reason } => (
                DecisionStatus::Cancelled,
                format!(
                    "the run was {}",
                    Outcome::cancelled_text(by, reason.as_deref())
                ),
            ),
            Outcome::Failed { reason } => (
                DecisionStatus::Skipped,
                format!("no longer applicable: the run failed ({reason})"),
            ),
            Outcome::Succeeded => (
                DecisionStatus::Skipped,
                "no longer applicable: the run succeeded".to_string(),
            ),
        };
        for d in &mut self.decisions {
            if d.status == DecisionStatus::Pending {
                d.status = status;
                d.answer = None;
                d.resolved_at = Some(at.to_string());
                d.resolution_reason = Some(reason.clone());
            }
        }
        self.waiting_well_known = None;
    }

    /// The workflow position `status.json` reports.
    pub fn current_state(&self) -> String {
        match self.phase {
            RunPhase::Waiting => match self.waiting_well_known {
                Some(gate) => gate.name().to_string(),
                None => "ASK_USER".to_string(),
            },
            RunPhase::Succeeded => "DONE".to_string(),
            RunPhase::Failed => "BLOCKED".to_string(),
            RunPhase::Running => self
                .current_node
                .as_ref()
                .and_then(|n| self.node_states.get(n))
                .cloned()
                .unwrap_or_else(|| DEFAULT_STATE.to_string()),
        }
    }

    /// `status.json`.
    pub fn status(&self) -> SessionStatus {
        SessionStatus {
            current_state: self.current_state(),
            session: self.session.clone(),
            assumptions: Vec::new(),
            user_decisions: self.decisions.clone(),
            retry_counts: self.retry_counts.clone(),
            known_issues: self
                .block_issues
                .iter()
                .map(|(_, issue)| issue.clone())
                .chain(self.run_issue.clone())
                .collect(),
            last_ci_result: "unknown".to_string(),
            last_update: self.last_update.clone(),
            gate_tracking: self.gate_tracking.clone(),
            blocker: self.blocker.clone(),
        }
    }

    /// The lines of `approve-design-history.jsonl`: one per
    /// `changes-requested` answer to `UD-APPROVE-DESIGN`, in the order
    /// recorded. Folded from the log, so each answer appears exactly once
    /// however often the run crashed and resumed.
    pub fn approve_design_history(&self) -> &[ApproveDesignHistoryEntry] {
        &self.history
    }

    /// Whether the run waits for a user decision (`ASK_USER`,
    /// `APPROVE_DESIGN`, `REVIEW_STRATEGY`).
    pub fn in_decision_state(&self) -> bool {
        self.phase == RunPhase::Waiting
    }

    /// Whether the run has ended.
    pub fn finished(&self) -> bool {
        matches!(self.phase, RunPhase::Succeeded | RunPhase::Failed)
    }

    /// The tasks of `tasks.yaml`.
    pub fn tasks(&self) -> Vec<TaskEntry> {
        self.tasks.clone()
    }

    /// `tasks.yaml`, rendered.
    pub fn tasks_yaml(&self) -> String {
        render_tasks_yaml(&self.tasks)
    }
}

/// The session folder of branch `branch` of run `run_id` of workflow
/// `workflow_id`: `YYYY-MM-DD_<workflow>-<HHMMSS>-<random>` from a run id
/// `run-YYYYMMDD-HHMMSS-<random>` (`-b<N>` added for a forked branch), so
/// that every run, and every branch, has its own folder while a resumed
/// run keeps its own. The workflow part is shortened so the run's part
/// always fits. A run id of another shape is used whole, dated
/// `fallback_date` (`YYYY-MM-DD`).
pub fn run_session_name(
    run_id: &str,
    workflow_id: &str,
    branch: u32,
    fallback_date: &str,
) -> String {
    let parts: Vec<&str> = run_id.split('-').collect();
    let (date, run_part) = match parts.as_slice() {
        ["run", date, time, rest @ ..]
            if date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit()) && !rest.is_empty() =>
        {
            (
                format!("{}-{}-{}", &date[..4], &date[4..6], &date[6..]),
                format!("{time}-{}", rest.join("-")),
            )
        }
        _ => (fallback_date.to_string(), run_id.to_string()),
    };
    let mut run_part = slug(&run_part);
    if branch > 1 {
        run_part.push_str(&format!("-b{branch}"));
    }
    run_part.truncate(40);
    let room = 40usize.saturating_sub(run_part.len() + 1);
    let mut wf = slug(workflow_id);
    wf.truncate(room);
    let wf = wf.trim_matches('-');
    session_name(&date, &format!("{wf} {run_part}"))
}

/// Lowercase ASCII letters and digits, runs of anything else one dash,
/// no dash at either end (like [`session_name`]'s slug, without its
/// fallback).
fn slug(text: &str) -> String {
    let mut slug = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    slug.trim_end_matches('-').to_string()
}

pub use crate::time::iso_utc;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::session_artifacts::is_session_name;
    use crate::run::event::PayloadDelta;
    use crate::run::payload::Statistics;

    fn workflow(json: serde_json::Value) -> Workflow {
        serde_json::from_value(json).unwrap()
    }

    /// The review-gate example: `draft` gates, `ship` ends.
    fn review_gate() -> Workflow {
        workflow(serde_json::json!({
            "id": "review-gate", "start_node": "main",
            "nodes": {"main": {"entry_block": "draft", "blocks": {
                "ship": {"worker": "echo", "transitions": [
                    {"on_signal": "SIGNAL:SUCCESS", "action": "END"}]},
                "draft": {"worker": "scripted",
                    "prompt": {"task": "Draft the plan", "output_checklist": ["a plan", "tests named"]},
                    "transitions": [
                    {"on_signal": "SIGNAL:SUCCESS", "action": "GATE:Approve the plan?"},
                    {"on_signal": "SIGNAL:GATE_APPROVED", "action": "JUMP:ship"},
                    {"on_signal": "SIGNAL:GATE_CHANGES_REQUESTED", "action": "JUMP:draft"}]}
            }}}
        }))
    }

    fn started(wf: &str) -> Event {
        Event::RunStarted {
            run_id: "run-20261122-101503-3c1f0a".into(),
            workflow_id: wf.into(),
            workflow_hash: "sha256:00".into(),
            plugins: BTreeMap::new(),
            start_node: "main".into(),
            start_block: "draft".into(),
            max_steps: 100,
            max_call_depth: 8,
            default_executor: String::new(),
            inputs: Default::default(),
            rerun_of: None,
        }
    }

    fn start(step: u64, block: &str, attempt: u32) -> Event {
        Event::BlockStarted {
            step,
            node: "main".into(),
            block: block.into(),
            attempt,
        }
    }

    fn done(step: u64, block: &str, signal: &str, failure: Option<&str>) -> Event {
        Event::BlockCompleted {
            step,
            node: "main".into(),
            block: block.into(),
            signal: signal.into(),
            payload: PayloadDelta::default(),
            artifact: None,
            statistics: Statistics::default(),
            duration_us: 10,
            queued_us: 0,
            failure: failure.map(str::to_string),
            permanent: false,
            log: vec![],
            written: Vec::new(),
        }
    }

    fn action(step: u64, command: CommandRecord, gate_id: Option<&str>) -> Event {
        Event::ActionTaken {
            step,
            action: "X".into(),
            command,
            gate_id: gate_id.map(str::to_string),
            fallback_for: None,
        }
    }

    fn jump(step: u64, to: &str) -> Event {
        action(step, CommandRecord::Jump { to: to.into() }, None)
    }

    fn gate(step: u64, id: &str) -> Event {
        action(
            step,
            CommandRecord::Gate {
                prompt: "Approve the plan?".into(),
                questions: Vec::new(),
            },
            Some(id),
        )
    }

    fn at(i: usize) -> String {
        format!("2026-11-22T10:{:02}:{:02}Z", i / 60, i % 60)
    }

    /// Fold `events`, checking that `status.json` validates after each.
    fn fold(wf: &Workflow, events: &[Event]) -> SessionProjection {
        let mut p = SessionProjection::new(wf, "2026-11-22_review-gate-101503-3c1f0a");
        for (i, e) in events.iter().enumerate() {
            p.apply(e, &at(i));
            let status = p.status();
            status
                .validate()
                .unwrap_or_else(|err| panic!("after event {i} ({}): {err}", e.kind()));
            assert_eq!(status.last_update, at(i));
            // It is what gets written: JSON that reads back the same.
            let json = serde_json::to_string_pretty(&status).unwrap();
            assert_eq!(
                serde_json::from_str::<SessionStatus>(&json).unwrap(),
                status
            );
        }
        p
    }

    fn statuses(p: &SessionProjection) -> Vec<(String, TaskStatus)> {
        p.tasks().into_iter().map(|t| (t.id, t.status)).collect()
    }

    #[test]
    fn a_successful_run_completes_every_task_it_ran() {
        let wf = workflow(serde_json::json!({
            "id": "hello", "start_node": "main",
            "nodes": {
                "main": {"entry_block": "greet", "blocks": {
                    "greet": {"worker": "echo"},
                    "done": {"worker": "echo"},
                    "unused": {"worker": "echo"}}},
                "aside": {"entry_block": "x", "static_memory": {"session_state": "DESIGN"},
                    "blocks": {"x": {"worker": "echo", "validation_schema": {"type": "object"}}}}
            }
        }));
        let fresh = SessionProjection::new(&wf, "2026-11-22_hello");
        assert_eq!(
            fresh
                .tasks()
                .iter()
                .map(|t| t.id.as_str())
                .collect::<Vec<_>>(),
            ["main.greet", "main.done", "main.unused", "aside.x"],
            "start node first, entry blocks first"
        );
        let mut p = fold(&wf, &[started("hello"), start(0, "greet", 1)]);
        assert_eq!(p.status().current_state, "IMPLEMENT_LOOP");
        assert_eq!(p.tasks()[0].status, TaskStatus::InProgress);
        for (i, e) in [
            done(0, "greet", "SIGNAL:SUCCESS", None),
            action(
                0,
                CommandRecord::Call {
                    node: "aside".into(),
                    entry: "x".into(),
                    return_to: "main.done".into(),
                    isolated: false,
                },
                None,
            ),
            Event::BlockStarted {
                step: 1,
                node: "aside".into(),
                block: "x".into(),
                attempt: 1,
            },
        ]
        .iter()
        .enumerate()
        {
            p.apply(e, &at(10 + i));
        }
        assert_eq!(
            p.status().current_state,
            "DESIGN",
            "the node names its state"
        );
        for (i, e) in [
            Event::BlockCompleted {
                step: 1,
                node: "aside".into(),
                block: "x".into(),
                signal: "SIGNAL:UNEXPECTED".into(),
                payload: PayloadDelta::default(),
                artifact: None,
                statistics: Statistics::default(),
                duration_us: 1,
                queued_us: 0,
                failure: None,
                permanent: false,
                log: vec![],
                written: Vec::new(),
            },
            action(1, CommandRecord::Return, None),
            start(2, "done", 1),
            done(2, "done", "SIGNAL:SUCCESS", None),
            action(2, CommandRecord::End, None),
        ]
        .iter()
        .enumerate()
        {
            p.apply(e, &at(20 + i));
            p.status().validate().unwrap();
        }
        let status = p.status();
        assert_eq!(status.current_state, "DONE");
        assert!(status.user_decisions.is_empty());
        assert!(status.retry_counts.is_empty());
        assert!(status.known_issues.is_empty());
        assert_eq!(status.last_update, at(24));
        assert_eq!(
            statuses(&p),
            [
                ("main.greet".to_string(), TaskStatus::Completed),
                ("main.done".to_string(), TaskStatus::Completed),
                ("main.unused".to_string(), TaskStatus::NotStarted),
                ("aside.x".to_string(), TaskStatus::Completed),
            ]
        );
        assert_eq!(
            p.tasks_yaml(),
            "tasks:\n  - id: \"main.greet\"\n    goal: \"Run the `echo` worker\"\n    status: completed\n    acceptance_checks:\n      - \"The block completes with a success signal\"\n  - id: \"main.done\"\n    goal: \"Run the `echo` worker\"\n    status: completed\n    acceptance_checks:\n      - \"The block completes with a success signal\"\n  - id: \"main.unused\"\n    goal: \"Run the `echo` worker\"\n    status: not-started\n    acceptance_checks:\n      - \"The block completes with a success signal\"\n  - id: \"aside.x\"\n    goal: \"Run the `echo` worker\"\n    status: completed\n    acceptance_checks:\n      - \"The block completes with a success signal\"\n      - \"Its output satisfies the block's validation_schema\"\n"
        );
    }

    #[test]
    fn a_gate_is_a_pending_decision_until_answered() {
        let wf = review_gate();
        let mut events = vec![
            started("review-gate"),
            start(0, "draft", 1),
            done(0, "draft", "SIGNAL:SUCCESS", None),
            gate(0, "UD-1"),
        ];
        let p = fold(&wf, &events);
        let status = p.status();
        assert_eq!(status.current_state, "ASK_USER");
        assert_eq!(
            status.user_decisions,
            [UserDecision {
                decision_id: "UD-1".into(),
                question: "Approve the plan?".into(),
                status: DecisionStatus::Pending,
                answer: None,
                asked_at: at(3),
                resolved_at: None,
                state_context: "IMPLEMENT_LOOP".into(),
                resolution_reason: None,
            }]
        );
        assert_eq!(
            p.tasks_yaml(),
            "tasks:\n  - id: \"main.draft\"\n    goal: \"Draft the plan\"\n    status: implemented\n    acceptance_checks:\n      - \"a plan\"\n      - \"tests named\"\n  - id: \"main.ship\"\n    goal: \"Run the `echo` worker\"\n    status: not-started\n    acceptance_checks:\n      - \"The block completes with a success signal\"\n"
        );

        // Changes requested: the draft runs again (a retry), gates again.
        events.extend([
            Event::GateAnswered {
                gate_id: "UD-1".into(),
                decision: Decision::ChangesRequested {
                    text: "add a \"load\" test".into(),
                },
            },
            jump(0, "main.draft"),
            start(1, "draft", 2),
        ]);
        let p = fold(&wf, &events);
        let status = p.status();
        assert_eq!(status.current_state, "IMPLEMENT_LOOP");
        let d = &status.user_decisions[0];
        assert_eq!(d.status, DecisionStatus::Answered);
        assert_eq!(
            d.answer.as_deref(),
            Some("changes-requested:add a \"load\" test")
        );
        assert_eq!(d.resolved_at.as_deref(), Some(at(4).as_str()));
        assert_eq!(
            d.resolution_reason.as_deref(),
            Some("the run continues with SIGNAL:GATE_CHANGES_REQUESTED")
        );
        assert_eq!(p.tasks()[0].status, TaskStatus::InProgress);
        assert_eq!(
            status.retry_counts,
            BTreeMap::from([(
                "main.draft".to_string(),
                BTreeMap::from([("SIGNAL:GATE_CHANGES_REQUESTED".to_string(), 1)])
            )])
        );

        events.extend([
            done(1, "draft", "SIGNAL:SUCCESS", None),
            gate(1, "UD-2"),
            Event::GateAnswered {
                gate_id: "UD-2".into(),
                decision: Decision::Approved,
            },
            jump(1, "main.ship"),
            start(2, "ship", 1),
            done(2, "ship", "SIGNAL:SUCCESS", None),
            action(2, CommandRecord::End, None),
        ]);
        let p = fold(&wf, &events);
        let status = p.status();
        assert_eq!(status.current_state, "DONE");
        assert_eq!(
            status
                .user_decisions
                .iter()
                .map(|d| (d.decision_id.as_str(), d.status, d.answer.as_deref()))
                .collect::<Vec<_>>(),
            [
                (
                    "UD-1",
                    DecisionStatus::Answered,
                    Some("changes-requested:add a \"load\" test")
                ),
                ("UD-2", DecisionStatus::Answered, Some("approved")),
            ]
        );
        assert_eq!(status.user_decisions[1].asked_at, at(8));
        assert_eq!(
            status.user_decisions[1].resolved_at.as_deref(),
            Some(at(9).as_str())
        );
        assert_eq!(status.next_decision_id(), "UD-3");
        assert_eq!(
            statuses(&p),
            [
                ("main.draft".to_string(), TaskStatus::Completed),
                ("main.ship".to_string(), TaskStatus::Completed),
            ]
        );
        // The answer text is escaped in both files.
        let json = serde_json::to_string_pretty(&status).unwrap();
        assert!(
            json.contains(r#""answer": "changes-requested:add a \"load\" test""#),
            "{json}"
        );
    }

    #[test]
    fn gate_ids_that_are_taken_or_not_sequential_get_the_next_id() {
        let wf = review_gate();
        let p = fold(
            &wf,
            &[
                started("review-gate"),
                start(0, "draft", 1),
                done(0, "draft", "SIGNAL:SUCCESS", None),
                gate(0, "gate-a"),
                Event::GateAnswered {
                    gate_id: "gate-a".into(),
                    decision: Decision::Approved,
                },
                jump(0, "main.draft"),
                start(1, "draft", 2),
                done(1, "draft", "SIGNAL:SUCCESS", None),
                // A branch may number its gates past the ones of others.
                gate(1, "UD-7"),
            ],
        );
        let ids: Vec<_> = p
            .status()
            .user_decisions
            .iter()
            .map(|d| d.decision_id.clone())
            .collect();
        assert_eq!(ids, ["UD-1", "UD-7"]);
        assert_eq!(
            p.status().user_decisions[0].status,
            DecisionStatus::Answered
        );
    }

    #[test]
    fn failures_block_tasks_and_become_known_issues() {
        let wf = review_gate();
        // A worker error, handled by the transition table, then a FAIL.
        let p = fold(
            &wf,
            &[
                started("review-gate"),
                start(0, "draft", 1),
                done(0, "draft", "SIGNAL:WORKER_ERROR", Some("trap: out of fuel")),
                action(
                    0,
                    CommandRecord::Fail {
                        reason: "unexpected signal".into(),
                    },
                    None,
                ),
            ],
        );
        let status = p.status();
        assert_eq!(status.current_state, "BLOCKED");
        assert_eq!(
            status.known_issues,
            [
                "main.draft (step 0): trap: out of fuel",
                "run failed: block `main.draft`: unexpected signal",
            ]
        );
        assert_eq!(p.tasks()[0].status, TaskStatus::Blocked);
        assert_eq!(p.tasks()[1].status, TaskStatus::NotStarted);

        // A success-like signal the engine has no transition for.
        let p = fold(
            &wf,
            &[
                started("review-gate"),
                start(0, "draft", 1),
                done(0, "draft", "SIGNAL:NOPE", None),
                Event::RunFinished {
                    outcome: Outcome::Failed {
                        reason: "`main.draft` emitted `SIGNAL:NOPE`".into(),
                    },
                },
            ],
        );
        assert_eq!(p.tasks()[0].status, TaskStatus::Blocked);
        assert_eq!(
            p.status().known_issues,
            ["run failed: `main.draft` emitted `SIGNAL:NOPE`"]
        );

        // The run fails (e.g. the host gives up) while a block runs.
        let p = fold(
            &wf,
            &[
                started("review-gate"),
                start(0, "draft", 1),
                Event::RunFinished {
                    outcome: Outcome::Failed {
                        reason: "stopped".into(),
                    },
                },
            ],
        );
        assert_eq!(p.status().current_state, "BLOCKED");
        assert_eq!(p.tasks()[0].status, TaskStatus::Blocked);

        for signal in FAILURE_SIGNALS {
            let p = fold(
                &wf,
                &[
                    started("review-gate"),
                    start(0, "draft", 1),
                    done(0, "draft", signal, None),
                ],
            );
            assert_eq!(p.tasks()[0].status, TaskStatus::Blocked, "{signal}");
            assert_eq!(p.status().current_state, "IMPLEMENT_LOOP");
        }
        for signal in [
            "SIGNAL:SUCCESS",
            "SIGNAL:GATE_APPROVED",
            "SIGNAL:UNEXPECTED",
        ] {
            let p = fold(
                &wf,
                &[
                    started("review-gate"),
                    start(0, "draft", 1),
                    done(0, "draft", signal, None),
                ],
            );
            assert_eq!(p.tasks()[0].status, TaskStatus::Implemented, "{signal}");
        }
    }

    #[test]
    fn a_task_is_completed_when_its_own_gate_passes() {
        let mut json = serde_json::to_value(review_gate()).unwrap();
        json["nodes"]["main"]["blocks"]["draft"]["config"] =
            serde_json::json!({"input": {"task": {"id": "T-001"}}});
        let wf: Workflow = serde_json::from_value(json).unwrap();
        let mut events = vec![
            started("review-gate"),
            start(0, "draft", 1),
            done(0, "draft", "SIGNAL:SUCCESS", None),
            gate(0, "UD-1"),
        ];
        let p = fold(&wf, &events);
        assert_eq!(p.tasks()[0].status, TaskStatus::Implemented);
        assert!(p.gates_passed().is_empty());
        // Changes requested: the task goes back, not forward.
        let mut back = events.clone();
        back.push(answered("UD-1", "changes-requested: more tests"));
        let p = fold(&wf, &back);
        assert_eq!(p.tasks()[0].status, TaskStatus::Implemented);
        assert!(p.gates_passed().is_empty());
        // Approved: completed while the run goes on.
        events.push(answered("UD-1", "approved"));
        let p = fold(&wf, &events);
        assert_eq!(p.status().current_state, "IMPLEMENT_LOOP");
        assert_eq!(p.tasks()[0].status, TaskStatus::Completed);
        assert_eq!(
            p.gates_passed().iter().collect::<Vec<_>>(),
            ["T-001", "main.draft"]
        );
        // The block runs again (its task reworked): promoted again only
        // after a new gate passes.
        let mut rework = events.clone();
        rework.extend([jump(0, "main.draft"), start(1, "draft", 2)]);
        let p = fold(&wf, &rework);
        assert_eq!(p.tasks()[0].status, TaskStatus::InProgress);
        assert!(p.gates_passed().is_empty(), "{:?}", p.gates_passed());
        // `ship` ran without a gate: implemented until the run succeeds.
        events.extend([
            jump(0, "main.ship"),
            Event::BlockStarted {
                step: 1,
                node: "main".into(),
                block: "ship".into(),
                attempt: 1,
            },
            done(1, "ship", "SIGNAL:SUCCESS", None),
        ]);
        let p = fold(&wf, &events);
        assert_eq!(
            statuses(&p),
            [
                ("main.draft".to_string(), TaskStatus::Completed),
                ("main.ship".to_string(), TaskStatus::Implemented)
            ]
        );
        // A free answer to a plain question passes its gate too.
        let mut free = events[..4].to_vec();
        free.push(Event::GateAnswered {
            gate_id: "UD-1".into(),
            decision: Decision::Text {
                text: "postgres".into(),
            },
        });
        let p = fold(&wf, &free);
        assert_eq!(p.tasks()[0].status, TaskStatus::Completed);
        assert_eq!(
            p.status().user_decisions[0].answer.as_deref(),
            Some("postgres")
        );
    }

    #[test]
    fn a_run_that_ends_at_a_gate_cancels_or_skips_its_pending_decisions() {
        let wf = review_gate();
        let waiting = vec![
            started("review-gate"),
            start(0, "draft", 1),
            done(0, "draft", "SIGNAL:SUCCESS", None),
            gate(0, "UD-1"),
        ];
        let s = fold(&wf, &waiting).status();
        assert_eq!(s.current_state, "ASK_USER");
        assert_eq!(s.user_decisions[0].status, DecisionStatus::Pending);
        let end = |reason: &str| {
            let mut events = waiting.clone();
            events.push(Event::RunFinished {
                outcome: Outcome::Failed {
                    reason: reason.into(),
                },
            });
            fold(&wf, &events).status()
        };
        // `wfhost cancel` at the gate.
        let s = end("cancelled: wrong branch");
        assert_eq!(s.current_state, "BLOCKED");
        let d = &s.user_decisions[0];
        assert_eq!(d.status, DecisionStatus::Cancelled);
        assert_eq!(d.answer, None);
        assert_eq!(d.resolved_at.as_deref(), Some(at(4).as_str()));
        assert_eq!(
            d.resolution_reason.as_deref(),
            Some("the run was cancelled: wrong branch")
        );
        // Any other end: the question no longer applies.
        let s = end("status.json could not be written");
        let d = &s.user_decisions[0];
        assert_eq!(d.status, DecisionStatus::Skipped);
        assert_eq!(
            d.resolution_reason.as_deref(),
            Some("no longer applicable: the run failed (status.json could not be written)")
        );
        // An answered decision stays answered.
        let mut events = waiting.clone();
        events.push(answered("UD-1", "approved"));
        events.push(Event::RunFinished {
            outcome: Outcome::Failed {
                reason: "cancelled by the user".into(),
            },
        });
        let s = fold(&wf, &events).status();
        assert_eq!(s.user_decisions[0].status, DecisionStatus::Answered);
    }

    #[test]
    fn retries_count_by_cause_and_a_crash_is_no_retry() {
        let wf = review_gate();
        let p = fold(
            &wf,
            &[
                started("review-gate"),
                start(0, "draft", 1),
                done(0, "draft", "SIGNAL:VALIDATION_FAIL", None),
                jump(0, "main.draft"),
                start(1, "draft", 2),
                done(1, "draft", "SIGNAL:WORKER_ERROR", Some("timeout after 30s")),
                jump(1, "main.draft"),
                start(2, "draft", 3),
                // The host died here; the interrupted block runs again with
                // the same attempt.
                Event::Resumed {
                    interrupted: Some(crate::run::event::InterruptedBlock {
                        step: 2,
                        node: "main".into(),
                        block: "draft".into(),
                    }),
                },
                start(2, "draft", 3),
            ],
        );
        let status = p.status();
        assert_eq!(
            status.retry_counts,
            BTreeMap::from([(
                "main.draft".to_string(),
                BTreeMap::from([
                    ("SIGNAL:VALIDATION_FAIL".to_string(), 1),
                    ("SIGNAL:WORKER_ERROR".to_string(), 1),
                ])
            )])
        );
        assert_eq!(p.tasks()[0].status, TaskStatus::InProgress);
        assert_eq!(
            status.known_issues,
            ["main.draft (step 1): timeout after 30s"]
        );

        // The retry succeeds: the issue is resolved, the task implemented.
        let mut p = p;
        p.apply(&done(2, "draft", "SIGNAL:SUCCESS", None), &at(99));
        assert!(p.status().known_issues.is_empty());
        assert_eq!(p.tasks()[0].status, TaskStatus::Implemented);
        assert_eq!(
            p.status().retry_counts["main.draft"].values().sum::<u32>(),
            2
        );
    }

    #[test]
    fn a_block_the_work_flows_back_to_after_a_success_is_no_retry() {
        let wf = review_gate();
        let p = fold(
            &wf,
            &[
                started("review-gate"),
                start(0, "draft", 1),
                done(0, "draft", "SIGNAL:SUCCESS", None),
                jump(0, "main.draft"),
                start(1, "draft", 2),
                done(1, "draft", "SIGNAL:FAIL", None),
                jump(1, "main.draft"),
                start(2, "draft", 3),
            ],
        );
        assert_eq!(
            p.status().retry_counts,
            BTreeMap::from([(
                "main.draft".to_string(),
                BTreeMap::from([("SIGNAL:FAIL".to_string(), 1)])
            )]),
            "only the run after the failure is a retry"
        );
    }

    #[test]
    fn a_fan_in_gate_is_a_decision_and_lanes_hold_the_files_back() {
        let wf = review_gate();
        let lane = |name: &str| Event::LaneCompleted {
            step: 0,
            lane: name.into(),
            signal: "SIGNAL:SUCCESS".into(),
            changed: vec!["notes.md".into()],
            failure: None,
            summary: None,
            payload: vec![],
            statistics: Statistics::default(),
            duration_us: 1,
            log: vec![],
        };
        let mut events = vec![
            started("review-gate"),
            start(0, "draft", 1),
            Event::LanesStarted {
                step: 0,
                lanes: vec!["a".into(), "b".into()],
                merge_strategy: crate::parallel::fan_in::MergeStrategy::default(),
                over: None,
            },
            lane("b"),
        ];
        let p = fold(&wf, &events);
        assert!(p.lanes_running(), "lane a still runs");
        assert_eq!(p.tasks()[0].status, TaskStatus::InProgress);
        events.push(lane("a"));
        assert!(!fold(&wf, &events).lanes_running());
        let p = fold(
            &wf,
            &[
                events,
                vec![Event::FanInWaiting {
                    step: 0,
                    gate_id: "UD-1".into(),
                    prompt: "Which lane's notes.md?".into(),
                }],
            ]
            .concat(),
        );
        let status = p.status();
        assert_eq!(status.current_state, "ASK_USER");
        assert_eq!(status.user_decisions[0].question, "Which lane's notes.md?");
        assert!(!p.lanes_running(), "every lane completed before the gate");
        let mut p = p;
        p.apply(
            &Event::GateAnswered {
                gate_id: "UD-1".into(),
                decision: "use-lane:a".parse().unwrap(),
            },
            &at(50),
        );
        let status = p.status();
        status.validate().unwrap();
        assert_eq!(status.current_state, "IMPLEMENT_LOOP");
        assert_eq!(
            status.user_decisions[0].answer.as_deref(),
            Some("use-lane:a")
        );
        assert_eq!(p.tasks()[0].status, TaskStatus::InProgress);
    }

    fn answered(id: &str, answer: &str) -> Event {
        Event::GateAnswered {
            gate_id: id.into(),
            decision: crate::run::event::parse_answer(id, answer).unwrap(),
        }
    }

    #[test]
    fn well_known_gates_keep_one_record_an_audit_trail_and_the_correction_status() {
        let wf = review_gate();
        let approve = "UD-APPROVE-DESIGN";
        let mut events = vec![
            started("review-gate"),
            start(0, "draft", 1),
            done(0, "draft", "SIGNAL:SUCCESS", None),
            gate(0, approve),
        ];
        let p = fold(&wf, &events);
        let s = p.status();
        assert_eq!(s.current_state, "APPROVE_DESIGN");
        assert_eq!(s.user_decisions[0].decision_id, approve);
        assert_eq!(s.user_decisions[0].state_context, "APPROVE_DESIGN");
        assert_eq!(s.gate_tracking, None, "absent until first used");

        events.push(answered(approve, "changes-requested: fewer modules"));
        let p = fold(&wf, &events);
        let t = &p.status().gate_tracking.unwrap().approve_design;
        assert_eq!(t.correction_status, CorrectionStatus::Queued);
        assert_eq!(p.approve_design_history().len(), 1);
        assert_eq!(
            p.approve_design_history()[0].answer,
            "changes-requested:fewer modules"
        );
        assert_eq!(
            p.approve_design_history()[0].state_context,
            "APPROVE_DESIGN"
        );

        // The correction starts: dispatched. The host crashes before it
        // completes; the resumed run re-executes the same block — the same
        // dispatch, not a second one.
        events.extend([jump(0, "main.draft"), start(1, "draft", 2)]);
        let dispatched_at = at(events.len() - 1);
        let check_dispatched = |p: &SessionProjection| {
            let t = p.status().gate_tracking.unwrap().approve_design;
            assert_eq!(t.correction_status, CorrectionStatus::Dispatched);
            assert_eq!(
                t.last_correction_dispatch.task_id.as_deref(),
                Some("main.draft")
            );
            assert_eq!(
                t.last_correction_dispatch.at.as_deref(),
                Some(dispatched_at.as_str())
            );
        };
        check_dispatched(&fold(&wf, &events));
        events.extend([
            Event::Resumed {
                interrupted: Some(crate::run::event::InterruptedBlock {
                    step: 1,
                    node: "main".into(),
                    block: "draft".into(),
                }),
            },
            start(1, "draft", 2),
        ]);
        check_dispatched(&fold(&wf, &events));
        events.push(done(1, "draft", "SIGNAL:SUCCESS", None));
        let p = fold(&wf, &events);
        let t = p.status().gate_tracking.unwrap().approve_design;
        assert_eq!(t.correction_status, CorrectionStatus::Completed);

        // Asked again: the same record, pending again; approved.
        events.push(gate(1, approve));
        let p = fold(&wf, &events);
        let s = p.status();
        assert_eq!(s.user_decisions.len(), 1, "a well-known id appears once");
        assert_eq!(s.user_decisions[0].status, DecisionStatus::Pending);
        events.push(answered(approve, "approved"));
        // The history holds each changes-requested answer once, however
        // often the log is folded again.
        let p = fold(&wf, &events);
        assert_eq!(p.approve_design_history().len(), 1);
        assert_eq!(
            p.status().user_decisions[0].answer.as_deref(),
            Some("approved")
        );

        // The review strategy: canonical only.
        events.extend([
            jump(1, "main.draft"),
            start(2, "draft", 3),
            done(2, "draft", "SIGNAL:SUCCESS", None),
        ]);
        events.push(gate(2, "UD-REVIEW-STRATEGY"));
        assert_eq!(fold(&wf, &events).status().current_state, "REVIEW_STRATEGY");
        events.push(answered("UD-REVIEW-STRATEGY", "once at the end"));
        let s = fold(&wf, &events).status();
        assert_eq!(s.user_decisions[1].answer.as_deref(), Some("single-final"));

        // An ad-hoc gate after them is UD-1.
        events.extend([
            jump(2, "main.draft"),
            start(3, "draft", 4),
            done(3, "draft", "SIGNAL:SUCCESS", None),
            gate(3, "UD-1"),
        ]);
        let s = fold(&wf, &events).status();
        assert_eq!(s.user_decisions[2].decision_id, "UD-1");
        assert_eq!(s.current_state, "ASK_USER");
    }

    #[test]
    fn a_cancelled_mandatory_decision_blocks_the_session() {
        let wf = review_gate();
        let approve = "UD-APPROVE-DESIGN";
        let mut events = vec![
            started("review-gate"),
            start(0, "draft", 1),
            done(0, "draft", "SIGNAL:SUCCESS", None),
            gate(0, approve),
            Event::GateReasked {
                gate_id: approve.into(),
                answer: "yes".into(),
                reason: "not an answer".into(),
            },
        ];
        let s = fold(&wf, &events).status();
        assert_eq!(
            s.user_decisions[0].status,
            DecisionStatus::Pending,
            "asked again"
        );
        events.push(answered(approve, "defer: next sprint"));
        events.push(Event::RunFinished {
            outcome: Outcome::Failed {
                reason: crate::run::event::blocked_reason(
                    crate::run::event::MANDATORY_DECISION_MISSING,
                    "decision UD-APPROVE-DESIGN cancelled: user deferred: next sprint",
                ),
            },
        });
        let s = fold(&wf, &events).status();
        let d = &s.user_decisions[0];
        assert_eq!(d.status, DecisionStatus::Cancelled);
        assert_eq!(d.answer, None);
        assert_eq!(
            d.resolution_reason.as_deref(),
            Some("user deferred: next sprint")
        );
        assert_eq!(s.current_state, "BLOCKED");
        assert_eq!(
            s.blocker.as_deref(),
            Some("mandatory_user_decision_missing")
        );
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["blocker"], "mandatory_user_decision_missing");
    }

    #[test]
    fn run_session_names_are_per_run_and_branch() {
        let id = "run-20261122-101503-3c1f0a";
        assert_eq!(
            run_session_name(id, "review-gate", 1, "2000-01-01"),
            "2026-11-22_review-gate-101503-3c1f0a"
        );
        assert_eq!(
            run_session_name(id, "review-gate", 2, "2000-01-01"),
            "2026-11-22_review-gate-101503-3c1f0a-b2"
        );
        let long = run_session_name(id, &"Very Long Workflow Name ".repeat(5), 12, "x");
        assert!(long.ends_with("-101503-3c1f0a-b12"), "{long}");
        assert!(is_session_name(&long), "{long}");
        assert!(long.len() <= "2026-11-22_".len() + 40, "{long}");
        assert_eq!(
            run_session_name(id, "!!!", 1, "x"),
            "2026-11-22_101503-3c1f0a"
        );
        assert_eq!(
            run_session_name("imported_Run.7", "wf", 1, "2026-01-02"),
            "2026-01-02_wf-imported-run-7"
        );
    }
}
