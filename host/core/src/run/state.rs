//! The state of a run as a fold of its events.
//!
//! [`RunState::apply`] is a pure function of the state and one event; the
//! engine calls it after each event is durable, and resuming a run is
//! [`RunState::replay`] of its log. Because both paths run the same code,
//! a resumed run has exactly the payload, ReturnStack, attempts and
//! statistics it would have had without the crash.
//!
//! `apply` is strict: an event that does not fit the state (a block
//! completing that was never due, a step out of order, an answer to a gate
//! that is not open) is refused with a message naming the event, which is
//! how a damaged or hand-edited log is detected instead of silently
//! producing a different run.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::actions::WellKnownGate;
use crate::parallel::fan_in::MergeStrategy;
use crate::run::event::{CommandRecord, Decision, Event, InterruptedBlock, MAX_REASKS, Outcome};
use crate::run::payload::{ContextSegment, ExecutionPayload, Statistics};
use crate::run::questions::{self, AskedQuestion, GateQuestion};

/// Where a run is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// About to execute `node.block`.
    Ready {
        node: String,
        block: String,
    },
    /// `node.block` completed with `signal`; its transition is next.
    Deciding {
        node: String,
        block: String,
        signal: String,
        /// The worker's failure, when the signal is `SIGNAL:WORKER_ERROR`.
        failure: Option<String>,
        /// The failure is one no retry mends.
        permanent: bool,
    },
    /// Paused until a human answers gate `gate_id`.
    Waiting {
        gate_id: String,
        node: String,
        block: String,
        prompt: String,
    },
    /// A `sleep` block waits until `due_at_ms` (unix ms); once due, it
    /// completes with `SIGNAL:SUCCESS` (see [`crate::timers`]). Or, with
    /// `retry`, the block (step `step`, attempt `attempt`) failed and runs
    /// again once due: its retry number `retry` (see [`crate::retry`]).
    Sleeping {
        step: u64,
        node: String,
        block: String,
        attempt: u32,
        due_at_ms: i64,
        retry: Option<u32>,
    },
    /// Paused until an MCP client performs the external block
    /// `node.block` (see [`crate::manifest::EXTERNAL_WORKER`]).
    Awaiting {
        step: u64,
        node: String,
        block: String,
        attempt: u32,
        prompt: String,
    },
    Finished(Outcome),
}

impl Phase {
    /// A one-word status for listings.
    pub fn status(&self) -> &'static str {
        match self {
            Phase::Ready { .. } | Phase::Deciding { .. } => "unfinished",
            Phase::Waiting { .. } | Phase::Awaiting { .. } => "waiting",
            Phase::Sleeping { .. } => "sleeping",
            Phase::Finished(Outcome::Succeeded) => "succeeded",
            Phase::Finished(Outcome::Failed { .. }) => "failed",
            Phase::Finished(Outcome::Cancelled { .. }) => "cancelled",
        }
    }
}

/// What one block did over a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct BlockStatistics {
    /// How many times the block ran to completion (interrupted executions
    /// are not counted: they run again).
    pub attempts: u32,
    pub tokens_used: u64,
    pub lines_written: u64,
    /// The agent CLIs' usage, broken down (absent when none).
    #[serde(skip_serializing_if = "crate::run::payload::ModelUsage::is_zero")]
    pub usage: crate::run::payload::ModelUsage,
    /// Total wall-clock time of its executions, in milliseconds when
    /// serialized.
    #[serde(rename = "duration_ms", serialize_with = "as_millis")]
    #[schemars(with = "f64")]
    pub duration: Duration,
    /// Total time its executions waited in a queue before they ran (jobs
    /// waiting for an agent), apart from `duration`; absent when none.
    #[serde(
        rename = "queued_ms",
        serialize_with = "as_millis",
        skip_serializing_if = "Duration::is_zero"
    )]
    #[schemars(with = "f64")]
    pub queued: Duration,
    /// Executions whose worker failed.
    pub failures: u32,
    /// The step at which the block first ran, to list blocks in the order
    /// the run reached them.
    #[serde(skip)]
    pub first_step: u64,
}

fn as_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_secs_f64() * 1e6).round() / 1e3)
}

/// A gate opened in this run's history.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct GateRecord {
    pub gate_id: String,
    pub node: String,
    pub block: String,
    pub step: u64,
    pub prompt: String,
    pub decision: Option<Decision>,
    /// Invalid answers recorded since the gate (last) opened
    /// ([`Event::GateReasked`]; mandatory gates only).
    #[serde(skip_serializing_if = "is_zero")]
    pub reasks: u32,
    /// The questions of a gate that asks several, and where each stands.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<AskedQuestion>,
}

impl GateRecord {
    /// The questions still waiting for an answer.
    pub fn pending_questions(&self) -> Vec<&GateQuestion> {
        self.questions
            .iter()
            .filter(|q| q.is_pending())
            .map(|q| &q.question)
            .collect()
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One finished lane of the parallel block being executed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneResult {
    pub lane: String,
    pub signal: String,
    pub changed: Vec<String>,
    pub failure: Option<String>,
    pub summary: Option<String>,
    pub payload: Vec<ContextSegment>,
    pub statistics: Statistics,
    pub duration_us: u64,
}

/// The fan-out of the parallel block being executed: which lanes exist,
/// which finished (in completion order) and where fan-in stands. It
/// survives a crash and a fan-in gate, and ends with the block's
/// completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FanOut {
    pub node: String,
    pub block: String,
    pub step: u64,
    pub lanes: Vec<String>,
    /// The list the lanes are the items of (`parallel.over`), if any: its
    /// lanes are fanned in in item order.
    pub over: Option<String>,
    pub merge_strategy: MergeStrategy,
    pub completed: Vec<LaneResult>,
    /// The lanes, and those of them completed, for lookups in a fan-out
    /// of thousands of lanes.
    known: BTreeSet<String>,
    done: BTreeSet<String>,
    /// Conflicting files waiting for a choice, with the lanes that changed
    /// them.
    pub unresolved: Vec<(String, Vec<String>)>,
    /// The open fan-in gate.
    pub gate: Option<String>,
    /// The user's lane choice, once the fan-in gate is answered.
    pub choice: Option<Decision>,
    pub fanned_in: bool,
    /// Failed attempts of lanes that ran again.
    pub retries: BTreeMap<String, u32>,
    /// When lanes retried under the block's retry policy run again (unix
    /// ms): a resumed fan-out still waits for them.
    pub retry_due: BTreeMap<String, i64>,
}

impl FanOut {
    pub fn is_complete(&self) -> bool {
        self.completed.len() == self.lanes.len()
    }

    pub fn finished(&self, lane: &str) -> bool {
        self.done.contains(lane)
    }

    /// Whether `lane` is one of the fan-out's lanes.
    pub fn has_lane(&self, lane: &str) -> bool {
        self.known.contains(lane)
    }

    /// The finished lanes in the order fan-in takes them: completion order,
    /// or item order for a fan-out over a list.
    pub fn in_fan_in_order(&self) -> Vec<&LaneResult> {
        let mut lanes: Vec<&LaneResult> = self.completed.iter().collect();
        if self.over.is_some() {
            lanes.sort_by_key(|r| r.lane.parse::<u64>().unwrap_or(u64::MAX));
        }
        lanes
    }
}

/// A return address on the ReturnStack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub node: String,
    pub block: String,
    /// The caller's payload, kept aside while an isolated node runs.
    pub saved_payload: Option<ExecutionPayload>,
    /// The caller's artifacts, likewise.
    pub saved_artifacts: Option<BTreeMap<String, String>>,
}

/// Everything about a run that its events determine.
#[derive(Debug, Clone, PartialEq)]
pub struct RunState {
    pub run_id: String,
    pub workflow_id: String,
    pub workflow_hash: String,
    pub plugins: BTreeMap<String, String>,
    /// The run's default executor (see [`crate::run::engine::RunOptions`]).
    pub default_executor: String,
    /// The run's inputs, as recorded in its `run_started` event.
    pub inputs: crate::run::inputs::Inputs,
    pub max_steps: u64,
    pub max_call_depth: usize,
    pub phase: Phase,
    pub payload: ExecutionPayload,
    pub stack: Vec<Frame>,
    /// `node.block` → latest structured output in the current scope.
    pub artifacts: BTreeMap<String, String>,
    /// `node.block` of the last completed block.
    pub previous: Option<String>,
    /// Steps taken: one per block completed, one per lane of a parallel
    /// block.
    pub steps: u64,
    /// Blocks completed, a parallel block once however many lanes it had:
    /// what the run's `max_steps` bounds.
    pub blocks_run: u64,
    /// The step of the block completed last, whose transition is next.
    pub last_step: u64,
    pub statistics: Statistics,
    /// Per block, keyed `node.block`.
    pub blocks: BTreeMap<String, BlockStatistics>,
    /// A block that started and has not completed.
    pub in_flight: Option<InterruptedBlock>,
    /// Gates opened on this branch's history, by id.
    pub gates: BTreeMap<String, GateRecord>,
    /// The lanes of the parallel block being executed.
    pub fan_out: Option<FanOut>,
    /// Events applied.
    pub events: u64,
    /// The workspace files the run's blocks wrote, first write first,
    /// each once (at most [`MAX_WRITTEN_KEPT`]).
    pub written: Vec<String>,
    /// Retries scheduled in a row for the block whose failure is being
    /// decided (0 once its transition is taken).
    pub retries: u32,
}

/// The most written files a run's state keeps.
pub const MAX_WRITTEN_KEPT: usize = 1000;

/// An event that does not fit the run's state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("event {index} ({kind}) does not fit the run: {message}")]
pub struct ReplayError {
    /// 0-based position of the event in the fold.
    pub index: u64,
    pub kind: &'static str,
    pub message: String,
}

impl RunState {
    /// What the run produced so far: its payload's last segment (the
    /// output of the last block that added one).
    pub fn result(&self) -> Option<&ContextSegment> {
        self.payload.last()
    }

    /// The state right after `started`, which must be a
    /// [`Event::RunStarted`].
    pub fn start(started: &Event) -> Result<RunState, ReplayError> {
        let Event::RunStarted {
            run_id,
            workflow_id,
            workflow_hash,
            plugins,
            start_node,
            start_block,
            max_steps,
            max_call_depth,
            default_executor,
            inputs,
            rerun_of,
        } = started
        else {
            return Err(ReplayError {
                index: 0,
                kind: started.kind(),
                message: "a run's first event must be run_started".into(),
            });
        };
        Ok(RunState {
            run_id: run_id.clone(),
            workflow_id: workflow_id.clone(),
            workflow_hash: workflow_hash.clone(),
            plugins: plugins.clone(),
            default_executor: default_executor.clone(),
            inputs: inputs.clone(),
            max_steps: *max_steps,
            max_call_depth: *max_call_depth,
            phase: Phase::Ready {
                node: start_node.clone(),
                block: start_block.clone(),
            },
            // A rerun from a step starts with what its run had then.
            payload: rerun_of
                .as_ref()
                .map(|r| r.payload.clone())
                .unwrap_or_default(),
            stack: Vec::new(),
            artifacts: rerun_of
                .as_ref()
                .map(|r| r.artifacts.clone())
                .unwrap_or_default(),
            previous: None,
            steps: 0,
            blocks_run: 0,
            last_step: 0,
            statistics: Statistics::default(),
            blocks: BTreeMap::new(),
            in_flight: None,
            gates: BTreeMap::new(),
            fan_out: None,
            events: 1,
            written: Vec::new(),
            retries: 0,
        })
    }

    /// Fold a whole log.
    pub fn replay<'a>(
        events: impl IntoIterator<Item = &'a Event>,
    ) -> Result<RunState, ReplayError> {
        let mut events = events.into_iter();
        let Some(first) = events.next() else {
            return Err(ReplayError {
                index: 0,
                kind: "none",
                message: "the log is empty".into(),
            });
        };
        let mut state = RunState::start(first)?;
        for event in events {
            state.apply(event)?;
        }
        Ok(state)
    }

    /// Whether the run can go on without a human: it is neither finished
    /// nor waiting at a gate.
    pub fn can_continue(&self) -> bool {
        matches!(self.phase, Phase::Ready { .. } | Phase::Deciding { .. })
    }

    /// Apply one event.
    pub fn apply(&mut self, event: &Event) -> Result<(), ReplayError> {
        let applied = match event {
            Event::RunStarted { .. } => Err("the run has already started".to_string()),
            Event::BlockStarted { .. } => self.block_started(event),
            Event::BlockCompleted { .. } => self.block_completed(event),
            Event::ActionTaken { .. } => self.action_taken(event),
            Event::GateAnswered { .. } => self.gate_answered(event),
            Event::GateReasked { .. } => self.gate_reasked(event),
            Event::RunFinished { .. } => self.run_finished(event),
            Event::Resumed { .. } => self.resumed(event),
            Event::ExternalAwaited { .. } => self.external_awaited(event),
            Event::TimerStarted { .. } => self.timer_started(event),
            Event::RetryScheduled { .. } => self.retry_scheduled(event),
            Event::InputsMerged { .. } => self.inputs_merged(event),
            Event::Checkpointed { .. } => self.checkpointed(event),
            Event::Forked { .. } => self.forked(event),
            Event::LanesStarted { .. } => self.lanes_started(event),
            Event::LaneRetried { .. } => self.lane_retried(event),
            Event::LaneCompleted { .. } => self.lane_completed(event),
            Event::LaneConflictDetected { .. } => self.lane_conflict_detected(event),
            Event::FanInWaiting { .. } => self.fan_in_waiting(event),
            Event::FanInCompleted { .. } => self.fan_in_completed(event),
            Event::Telemetry { .. } => self.telemetry(event),
        };
        applied.map_err(|message| ReplayError {
            index: self.events,
            kind: event.kind(),
            message,
        })?;
        self.events += 1;
        Ok(())
    }

    /// The cursor's block begins (an awaited external block's output arrived): its step and attempt must be the next.
    fn block_started(&mut self, event: &Event) -> Result<(), String> {
        let Event::BlockStarted {
            step,
            node,
            block,
            attempt,
        } = event
        else {
            return Err("not a block_started event".into());
        };
        // The block runs now: an awaited external block's output arrived,
        // or a failed block's retry is due.
        let resting_here = match &self.phase {
            Phase::Awaiting {
                node: n, block: b, ..
            }
            | Phase::Sleeping {
                node: n,
                block: b,
                retry: Some(_),
                ..
            } => n == node && b == block,
            _ => false,
        };
        if resting_here {
            self.phase = Phase::Ready {
                node: node.clone(),
                block: block.clone(),
            };
        }
        self.expect_ready(node, block)?;
        self.expect_step(*step)?;
        let due = self.attempts(node, block) + 1;
        if *attempt != due {
            return Err(format!(
                "attempt {attempt} of {node}.{block}, expected {due}"
            ));
        }
        if self
            .fan_out
            .as_ref()
            .is_some_and(|f| f.node != *node || f.block != *block || f.step != *step)
        {
            return Err(format!(
                "{node}.{block} starts while the fan-out of another block is unfinished"
            ));
        }
        self.in_flight = Some(InterruptedBlock {
            step: *step,
            node: node.clone(),
            block: block.clone(),
        });
        Ok(())
    }

    /// A block ended: its payload delta, artifact and statistics apply, and the run decides its transition.
    fn block_completed(&mut self, event: &Event) -> Result<(), String> {
        let Event::BlockCompleted {
            step,
            node,
            block,
            signal,
            payload,
            artifact,
            statistics,
            duration_us,
            queued_us,
            failure,
            permanent,
            log: _,
            written,
        } = event
        else {
            return Err("not a block_completed event".into());
        };
        if let Phase::Sleeping {
            step: s,
            node: n,
            block: b,
            retry: None,
            ..
        } = &self.phase
            && (s, n, b) == (step, node, block)
        {
            // The timer fired: the sleeping block completes.
            self.phase = Phase::Ready {
                node: node.clone(),
                block: block.clone(),
            };
        }
        self.expect_ready(node, block)?;
        self.expect_step(*step)?;
        payload.apply(&mut self.payload).ok_or_else(|| {
            format!(
                "keeps {} payload segments of {}",
                payload.keep,
                self.payload.len()
            )
        })?;
        let key = format!("{node}.{block}");
        if let Some(artifact) = artifact {
            self.artifacts.insert(key.clone(), artifact.clone());
        }
        self.statistics.add(*statistics);
        let per_block = self
            .blocks
            .entry(key.clone())
            .or_insert_with(|| BlockStatistics {
                first_step: *step,
                ..BlockStatistics::default()
            });
        per_block.attempts += 1;
        per_block.tokens_used += statistics.tokens_used;
        per_block.lines_written += statistics.lines_written;
        per_block.usage.add(statistics.usage);
        per_block.duration += Duration::from_micros(*duration_us);
        per_block.queued += Duration::from_micros(*queued_us);
        for path in written {
            if self.written.len() < MAX_WRITTEN_KEPT && !self.written.contains(path) {
                self.written.push(path.clone());
            }
        }
        per_block.failures += u32::from(failure.is_some());
        // Each lane of a parallel block had its own step index.
        let lanes = match self.fan_out.take() {
            Some(f) if f.node == *node && f.block == *block => {
                if !f.fanned_in {
                    return Err(format!(
                        "{node}.{block} completes before its lanes were fanned in"
                    ));
                }
                f.lanes.len() as u64
            }
            Some(f) => {
                return Err(format!(
                    "{node}.{block} completes during the fan-out of {}.{}",
                    f.node, f.block
                ));
            }
            None => 1,
        };
        self.steps += lanes.max(1);
        self.blocks_run += 1;
        self.last_step = *step;
        self.previous = Some(key);
        self.in_flight = None;
        self.phase = Phase::Deciding {
            node: node.clone(),
            block: block.clone(),
            signal: signal.clone(),
            failure: failure.clone(),
            permanent: *permanent,
        };
        Ok(())
    }

    /// The transition a completed block took: a jump, a call or return (the return stack), an end, a failure or a gate.
    fn action_taken(&mut self, event: &Event) -> Result<(), String> {
        let Event::ActionTaken {
            step,
            action: _,
            command,
            gate_id,
            fallback_for: _,
        } = event
        else {
            return Err("not a action_taken event".into());
        };
        let Phase::Deciding { node, block, .. } = &self.phase else {
            return Err(format!(
                "no block is awaiting its transition ({:?})",
                self.phase
            ));
        };
        if *step != self.last_step {
            return Err(format!(
                "transition of step {step}, but the last completed step is {}",
                self.last_step
            ));
        }
        let (node, block) = (node.clone(), block.clone());
        self.retries = 0;
        self.phase = match command {
            CommandRecord::Jump { to } => ready(to)?,
            CommandRecord::Call {
                node: callee,
                entry,
                return_to,
                isolated,
            } => {
                let back = ready(return_to)?;
                let Phase::Ready { node, block } = back else {
                    unreachable!("ready() returns Ready")
                };
                let (saved_payload, saved_artifacts) = if *isolated {
                    (
                        Some(std::mem::take(&mut self.payload)),
                        Some(std::mem::take(&mut self.artifacts)),
                    )
                } else {
                    (None, None)
                };
                self.stack.push(Frame {
                    node,
                    block,
                    saved_payload,
                    saved_artifacts,
                });
                Phase::Ready {
                    node: callee.clone(),
                    block: entry.clone(),
                }
            }
            CommandRecord::Return => {
                let Some(frame) = self.stack.pop() else {
                    return Err("RETURN with an empty return stack".into());
                };
                if let Some(mut saved) = frame.saved_payload {
                    // An isolated subroutine hands back only what it produced.
                    saved.append(&mut self.payload);
                    self.payload = saved;
                }
                if let Some(saved) = frame.saved_artifacts {
                    self.artifacts = saved;
                }
                Phase::Ready {
                    node: frame.node,
                    block: frame.block,
                }
            }
            CommandRecord::End => Phase::Finished(Outcome::Succeeded),
            CommandRecord::Fail { reason } => Phase::Finished(Outcome::Failed {
                reason: format!("block `{node}.{block}`: {reason}"),
            }),
            CommandRecord::Gate { prompt, questions } => {
                let Some(gate_id) = gate_id else {
                    return Err("a gate without a gate id".into());
                };
                self.open_gate(gate_id, node, block, *step, prompt, questions)?
            }
        };
        Ok(())
    }

    /// An open gate's answer: its questions settled (or asked again), a fan-in gate's lane choice, or a plain decision.
    fn gate_answered(&mut self, event: &Event) -> Result<(), String> {
        let Event::GateAnswered { gate_id, decision } = event else {
            return Err("not a gate_answered event".into());
        };
        let Phase::Waiting {
            gate_id: open,
            node,
            block,
            ..
        } = &self.phase
        else {
            return Err(format!("gate {gate_id} is not open"));
        };
        if open != gate_id {
            return Err(format!("gate {gate_id} answered while gate {open} is open"));
        }
        let (node, block) = (node.clone(), block.clone());
        let fan_in_gate = self
            .fan_out
            .as_ref()
            .is_some_and(|f| f.gate.as_deref() == Some(gate_id.as_str()));
        if fan_in_gate {
            let fan_out = self.fan_out.as_ref().expect("checked above");
            check_lane_choice(gate_id, decision, fan_out)?;
        } else if matches!(decision, Decision::UseLane { .. } | Decision::Resolved) {
            return Err(format!(
                "gate {gate_id} is not a fan-in gate: answer `approved`, `changes-requested:<text>` or, to a plain question, the answer itself"
            ));
        }
        check_well_known_answer(gate_id, decision)?;
        let gate = self.gates.get_mut(gate_id);
        if let Some(gate) = gate.filter(|g| !g.questions.is_empty()) {
            let settled = questions::apply(gate_id, &mut gate.questions, decision)?;
            gate.decision = Some(decision.clone());
            if !settled {
                // Security questions are asked again.
                gate.reasks += 1;
                self.phase = Phase::Waiting {
                    gate_id: gate_id.clone(),
                    node,
                    block,
                    prompt: questions::prompt(&gate.prompt, &gate.questions),
                };
                return Ok(());
            }
            self.payload.push(ContextSegment::new(
                format!("gate-{gate_id}"),
                "GATE_DECISION",
                questions::outcome(&gate.questions),
            ));
            self.phase = Phase::Deciding {
                node,
                block,
                signal: decision.signal().to_string(),
                failure: None,
                permanent: false,
            };
            return Ok(());
        }
        if matches!(decision, Decision::Answers { .. }) {
            return Err(format!(
                "gate {gate_id} asks no questions: `{decision}` is not an answer to it"
            ));
        }
        // A well-known gate may be answered more than once a run.
        let segment_id = match self.gates.get(gate_id) {
            Some(g) if WellKnownGate::from_decision_id(gate_id).is_some() => {
                format!("gate-{gate_id}-{}", g.step)
            }
            _ => format!("gate-{gate_id}"),
        };
        self.payload.push(ContextSegment::new(
            segment_id,
            "GATE_DECISION",
            decision.to_string(),
        ));
        if let Some(gate) = self.gates.get_mut(gate_id) {
            gate.decision = Some(decision.clone());
        }
        self.phase = if fan_in_gate {
            let fan_out = self.fan_out.as_mut().expect("checked above");
            fan_out.gate = None;
            fan_out.choice = Some(decision.clone());
            // The parallel block resumes its fan-in.
            Phase::Ready { node, block }
        } else {
            Phase::Deciding {
                node,
                block,
                signal: decision.signal().to_string(),
                failure: None,
                permanent: false,
            }
        };
        Ok(())
    }

    /// An invalid answer to a mandatory gate, recorded: it stays open, within its budget.
    fn gate_reasked(&mut self, event: &Event) -> Result<(), String> {
        let Event::GateReasked { gate_id, .. } = event else {
            return Err("not a gate_reasked event".into());
        };
        if !matches!(&self.phase, Phase::Waiting { gate_id: open, .. } if open == gate_id) {
            return Err(format!("gate {gate_id} is not open"));
        }
        if WellKnownGate::from_decision_id(gate_id).is_none() {
            return Err(format!(
                "gate {gate_id} is not a mandatory gate: an invalid answer to it is refused, not recorded"
            ));
        }
        let gate = self
            .gates
            .get_mut(gate_id)
            .ok_or_else(|| format!("gate {gate_id} was never opened"))?;
        if gate.reasks >= MAX_REASKS {
            return Err(format!(
                "gate {gate_id} was asked again {MAX_REASKS} times: the next invalid answer cancels it"
            ));
        }
        gate.reasks += 1;
        Ok(())
    }

    /// The run's end.
    fn run_finished(&mut self, event: &Event) -> Result<(), String> {
        let Event::RunFinished { outcome } = event else {
            return Err("not a run_finished event".into());
        };
        if matches!(self.phase, Phase::Finished(_)) {
            return Err("the run has already finished".into());
        }
        self.in_flight = None;
        self.phase = Phase::Finished(outcome.clone());
        Ok(())
    }

    /// A run taken up again: the block it names as interrupted must be the one the log says was running.
    fn resumed(&mut self, event: &Event) -> Result<(), String> {
        let Event::Resumed { interrupted } = event else {
            return Err("not a resumed event".into());
        };
        if matches!(self.phase, Phase::Finished(_)) {
            return Err("a finished run cannot resume".into());
        }
        if *interrupted != self.in_flight {
            return Err(format!(
                "names {interrupted:?} as interrupted, the log says {:?}",
                self.in_flight
            ));
        }
        self.in_flight = None;
        Ok(())
    }

    /// The run rests until a client performs the cursor's block.
    fn external_awaited(&mut self, event: &Event) -> Result<(), String> {
        let Event::ExternalAwaited {
            step,
            node,
            block,
            attempt,
            prompt,
        } = event
        else {
            return Err("not a external_awaited event".into());
        };
        self.expect_ready(node, block)?;
        self.expect_step(*step)?;
        let due = self.attempts(node, block) + 1;
        if *attempt != due {
            return Err(format!(
                "attempt {attempt} of {node}.{block}, expected {due}"
            ));
        }
        self.phase = Phase::Awaiting {
            step: *step,
            node: node.clone(),
            block: block.clone(),
            attempt: *attempt,
            prompt: prompt.clone(),
        };
        Ok(())
    }

    /// The running `sleep` block waits: the run rests until it is due. It
    /// is no longer in flight (a resumption does not run it again: it
    /// keeps its due time).
    fn timer_started(&mut self, event: &Event) -> Result<(), String> {
        let Event::TimerStarted {
            step,
            node,
            block,
            attempt,
            due_at_ms,
        } = event
        else {
            return Err("not a timer_started event".into());
        };
        self.expect_ready(node, block)?;
        self.expect_step(*step)?;
        let running = InterruptedBlock {
            step: *step,
            node: node.clone(),
            block: block.clone(),
        };
        if self.in_flight.as_ref() != Some(&running) {
            return Err(format!("{node}.{block} sleeps without having started"));
        }
        self.in_flight = None;
        self.phase = Phase::Sleeping {
            step: *step,
            node: node.clone(),
            block: block.clone(),
            attempt: *attempt,
            due_at_ms: *due_at_ms,
            retry: None,
        };
        Ok(())
    }

    /// The block whose failure is being decided runs again once due: the
    /// run rests until then.
    fn retry_scheduled(&mut self, event: &Event) -> Result<(), String> {
        let Event::RetryScheduled {
            step,
            node,
            block,
            attempt,
            retry,
            due_at_ms,
            ..
        } = event
        else {
            return Err("not a retry_scheduled event".into());
        };
        let Phase::Deciding {
            node: n, block: b, ..
        } = &self.phase
        else {
            return Err("no block is awaiting its transition".into());
        };
        if (n, b) != (node, block) || *step != self.last_step {
            return Err(format!(
                "a retry of [{step}] {node}.{block}, but [{}] {n}.{b} is deciding",
                self.last_step
            ));
        }
        let ran = self.attempts(node, block);
        if *attempt != ran {
            return Err(format!(
                "a retry after attempt {attempt} of {node}.{block}, which ran {ran} times"
            ));
        }
        if *retry != self.retries + 1 {
            return Err(format!(
                "retry {retry} of {node}.{block}, expected {}",
                self.retries + 1
            ));
        }
        self.retries = *retry;
        self.phase = Phase::Sleeping {
            step: *step,
            node: node.clone(),
            block: block.clone(),
            attempt: *attempt,
            due_at_ms: *due_at_ms,
            retry: Some(*retry),
        };
        Ok(())
    }

    /// Inputs merged by an awaited external block's client or a running block.
    fn inputs_merged(&mut self, event: &Event) -> Result<(), String> {
        let Event::InputsMerged { inputs } = event else {
            return Err("not a inputs_merged event".into());
        };
        // The client of an awaited external block, or a running
        // (control) block, merges inputs.
        if !matches!(self.phase, Phase::Awaiting { .. }) && self.in_flight.is_none() {
            return Err(
                "inputs are merged only while an external block is awaited or a block runs".into(),
            );
        }
        for (key, value) in inputs {
            self.inputs.insert(key.clone(), value.clone());
        }
        Ok(())
    }

    /// A checkpoint while an external block is awaited.
    fn checkpointed(&mut self, event: &Event) -> Result<(), String> {
        let Event::Checkpointed { .. } = event else {
            return Err("not a checkpointed event".into());
        };
        if !matches!(self.phase, Phase::Awaiting { .. }) {
            return Err("a checkpoint is recorded only while an external block is awaited".into());
        }
        Ok(())
    }

    /// A branch starts here, where the run was at rest.
    fn forked(&mut self, event: &Event) -> Result<(), String> {
        let Event::Forked { .. } = event else {
            return Err("not a forked event".into());
        };
        if !matches!(
            self.phase,
            Phase::Ready { .. }
                | Phase::Waiting { .. }
                | Phase::Awaiting { .. }
                | Phase::Sleeping { .. }
        ) {
            return Err("a branch can only start where the run was at rest".into());
        }
        self.in_flight = None;
        Ok(())
    }

    /// The running block fans out into lanes.
    fn lanes_started(&mut self, event: &Event) -> Result<(), String> {
        let Event::LanesStarted {
            step,
            lanes,
            merge_strategy,
            over,
        } = event
        else {
            return Err("not a lanes_started event".into());
        };
        let Some(running) = &self.in_flight else {
            return Err("no block is running".into());
        };
        if running.step != *step {
            return Err(format!(
                "lanes of step {step}, but step {} is running",
                running.step
            ));
        }
        if self.fan_out.is_some() {
            return Err("the block's lanes have already started".into());
        }
        if lanes.is_empty() {
            return Err("a fan-out without lanes".into());
        }
        self.fan_out = Some(FanOut {
            node: running.node.clone(),
            block: running.block.clone(),
            step: *step,
            lanes: lanes.clone(),
            over: over.clone(),
            merge_strategy: *merge_strategy,
            completed: Vec::new(),
            known: lanes.iter().cloned().collect(),
            done: BTreeSet::new(),
            unresolved: Vec::new(),
            gate: None,
            choice: None,
            fanned_in: false,
            retries: BTreeMap::new(),
            retry_due: BTreeMap::new(),
        });
        Ok(())
    }

    /// A lane's failed attempt, run again alone.
    fn lane_retried(&mut self, event: &Event) -> Result<(), String> {
        let Event::LaneRetried {
            step,
            lane,
            attempt,
            due_at_ms,
            ..
        } = event
        else {
            return Err("not a lane_retried event".into());
        };
        let fan_out = self.running_fan_out(*step)?;
        if !fan_out.has_lane(lane) || fan_out.finished(lane) {
            return Err(format!("lane `{lane}` is not running"));
        }
        let retries = fan_out.retries.entry(lane.clone()).or_default();
        if *attempt != *retries + 1 {
            return Err(format!(
                "attempt {attempt} of lane `{lane}`, expected {}",
                *retries + 1
            ));
        }
        *retries += 1;
        if let Some(due) = due_at_ms {
            fan_out.retry_due.insert(lane.clone(), *due);
        }
        Ok(())
    }

    /// A lane's result.
    fn lane_completed(&mut self, event: &Event) -> Result<(), String> {
        let Event::LaneCompleted {
            step,
            lane,
            signal,
            changed,
            failure,
            summary,
            statistics,
            duration_us,
            log: _,
            payload,
        } = event
        else {
            return Err("not a lane_completed event".into());
        };
        let fan_out = self.running_fan_out(*step)?;
        if !fan_out.has_lane(lane) {
            return Err(format!("lane `{lane}` is not one of the block's lanes"));
        }
        if fan_out.finished(lane) {
            return Err(format!("lane `{lane}` has already completed"));
        }
        fan_out.done.insert(lane.clone());
        fan_out.completed.push(LaneResult {
            lane: lane.clone(),
            signal: signal.clone(),
            changed: changed.clone(),
            failure: failure.clone(),
            summary: summary.clone(),
            payload: payload.clone(),
            statistics: *statistics,
            duration_us: *duration_us,
        });
        Ok(())
    }

    /// Lanes changed the same file: unresolved until a fan-in gate chooses, when nothing was applied.
    fn lane_conflict_detected(&mut self, event: &Event) -> Result<(), String> {
        let Event::LaneConflictDetected {
            step,
            conflicting_file,
            lanes,
            applied_from,
            ..
        } = event
        else {
            return Err("not a lane_conflict_detected event".into());
        };
        let fan_out = self.running_fan_out(*step)?;
        if !fan_out.is_complete() {
            return Err("a conflict before every lane finished".into());
        }
        if applied_from.is_none()
            && !fan_out
                .unresolved
                .iter()
                .any(|(f, _)| f == conflicting_file)
        {
            fan_out
                .unresolved
                .push((conflicting_file.clone(), lanes.clone()));
        }
        Ok(())
    }

    /// The fan-in waits at a gate for the lanes' conflicts.
    fn fan_in_waiting(&mut self, event: &Event) -> Result<(), String> {
        let Event::FanInWaiting {
            step,
            gate_id,
            prompt,
        } = event
        else {
            return Err("not a fan_in_waiting event".into());
        };
        if self.gates.contains_key(gate_id) {
            // Checked before the fan-out changes, so a refused event
            // changes nothing.
            return Err(format!("gate {gate_id} was opened before"));
        }
        let fan_out = self.running_fan_out(*step)?;
        if !fan_out.is_complete() || fan_out.unresolved.is_empty() {
            return Err("a fan-in gate needs finished lanes and unresolved conflicts".into());
        }
        fan_out.gate = Some(gate_id.clone());
        let (node, block) = (fan_out.node.clone(), fan_out.block.clone());
        // The block is paused, not interrupted.
        self.in_flight = None;
        self.phase = self.open_gate(gate_id, node, block, *step, prompt, &[])?;
        Ok(())
    }

    /// The lanes were merged.
    fn fan_in_completed(&mut self, event: &Event) -> Result<(), String> {
        let Event::FanInCompleted { step, .. } = event else {
            return Err("not a fan_in_completed event".into());
        };
        let fan_out = self.running_fan_out(*step)?;
        if !fan_out.is_complete() {
            return Err("fan-in before every lane finished".into());
        }
        if fan_out.gate.is_some() {
            return Err("fan-in while its gate is open".into());
        }
        fan_out.fanned_in = true;
        Ok(())
    }

    /// What the running block's agent sent.
    fn telemetry(&mut self, event: &Event) -> Result<(), String> {
        let Event::Telemetry {
            step, node, block, ..
        } = event
        else {
            return Err("not a telemetry event".into());
        };
        // Only the block running now can have sent it.
        let running = self
            .in_flight
            .as_ref()
            .filter(|b| b.step == *step && &b.node == node && &b.block == block);
        if running.is_none() {
            return Err(format!(
                "telemetry from {node}.{block} at step {step}, which is not running"
            ));
        }
        Ok(())
    }

    /// The per-block statistics in the order the run first reached each
    /// block.
    pub fn blocks_in_run_order(&self) -> Vec<(&String, &BlockStatistics)> {
        let mut blocks: Vec<_> = self.blocks.iter().collect();
        blocks.sort_by_key(|(_, b)| b.first_step);
        blocks
    }

    /// Completed executions of `node.block`.
    pub fn attempts(&self, node: &str, block: &str) -> u32 {
        self.blocks
            .get(&format!("{node}.{block}"))
            .map_or(0, |b| b.attempts)
    }

    /// Parse `answer` to gate `gate_id` as this run's gate takes it: a gate
    /// that asks questions by [`questions::parse`] (against its pending
    /// questions), any other by [`crate::run::event::parse_answer`].
    pub fn parse_answer(&self, gate_id: &str, answer: &str) -> Result<Decision, String> {
        let fan_in_gate = self
            .fan_out
            .as_ref()
            .is_some_and(|f| f.gate.as_deref() == Some(gate_id));
        match self.gates.get(gate_id) {
            Some(gate) if !gate.questions.is_empty() => {
                questions::parse(gate_id, &gate.pending_questions(), answer)
            }
            // A fan-in gate takes a lane choice only, never a free answer.
            _ if fan_in_gate => answer.parse(),
            _ => crate::run::event::parse_answer(gate_id, answer),
        }
    }

    /// Parse `answer` to gate `gate_id` of a run of `workflow`: as
    /// [`RunState::parse_answer`], and at an ordinary gate that asks a
    /// plain question any other text is a free answer
    /// ([`Decision::Text`]). A gate asks a plain question unless it is a
    /// well-known gate, a fan-in gate, a gate that asks several questions,
    /// or an approval: a gate whose block routes
    /// `SIGNAL:GATE_CHANGES_REQUESTED` (`approved` /
    /// `changes-requested:<text>` only, so a stray `yes` is refused).
    pub fn parse_answer_in(
        &self,
        workflow: &crate::manifest::Workflow,
        gate_id: &str,
        answer: &str,
    ) -> Result<Decision, String> {
        let strict = self.parse_answer(gate_id, answer);
        if strict.is_ok() || !self.asks_plain_question(workflow, gate_id) {
            return strict;
        }
        strict.or_else(|why| crate::run::event::free_answer(answer).ok_or(why))
    }

    /// Whether open gate `gate_id` asks a plain question (see
    /// [`RunState::parse_answer_in`]).
    pub fn asks_plain_question(&self, workflow: &crate::manifest::Workflow, gate_id: &str) -> bool {
        let Phase::Waiting {
            gate_id: open,
            node,
            block,
            ..
        } = &self.phase
        else {
            return false;
        };
        let fan_in_gate = self
            .fan_out
            .as_ref()
            .is_some_and(|f| f.gate.as_deref() == Some(gate_id));
        let questions = self
            .gates
            .get(gate_id)
            .is_some_and(|g| !g.questions.is_empty());
        if open != gate_id
            || fan_in_gate
            || questions
            || WellKnownGate::from_decision_id(gate_id).is_some()
        {
            return false;
        }
        let approval = workflow
            .nodes
            .get(node)
            .and_then(|n| n.blocks.get(block))
            .is_some_and(|b| {
                b.transitions
                    .iter()
                    .any(|t| t.on_signal == crate::run::transitions::GATE_CHANGES_REQUESTED)
            });
        !approval
    }

    /// How open gate `gate_id` is answered, as the rest of a `wfhost gate
    /// RUN GATE …` line: an example answer, then the other forms. A gate
    /// that asks several questions is answered with a JSON object of
    /// answers (never `approved`); a plain question with the answer itself.
    pub fn answer_forms(&self, gate_id: &str) -> String {
        let fan_in_gate = self
            .fan_out
            .as_ref()
            .is_some_and(|f| f.gate.as_deref() == Some(gate_id));
        let gate = self.gates.get(gate_id);
        if fan_in_gate {
            "use-lane:<lane>   (or use-lane:<file>=<lane>,...; or resolved after fixing the files yourself)".into()
        } else if let Some(g) = gate.filter(|g| !g.questions.is_empty()) {
            format!(
                "'{}'   ({}; `defer: <reason>` defers one)",
                questions::example(&g.pending_questions()),
                questions::ANSWER_FORMS
            )
        } else {
            match WellKnownGate::from_decision_id(gate_id) {
                Some(WellKnownGate::ReviewStrategy) => "per-batch   (or single-final)".into(),
                Some(WellKnownGate::ApproveDesign) => {
                    "approved   (or changes-requested:<what to change>)".into()
                }
                None => "approved   (or changes-requested:<what to change>; to a plain question, the answer itself, e.g. \"postgres\")".into(),
            }
        }
    }

    /// The gate that asks question `id`, when `id` is a question of a gate
    /// other than its first.
    pub fn gate_asking(&self, id: &str) -> Option<&GateRecord> {
        self.gates
            .values()
            .find(|g| g.gate_id != id && g.questions.iter().any(|q| q.question.id == id))
    }

    /// Record gate `gate_id` as opened by `node.block` at `step`; returns
    /// the phase of a run waiting at it.
    fn open_gate(
        &mut self,
        gate_id: &str,
        node: String,
        block: String,
        step: u64,
        prompt: &str,
        asked: &[GateQuestion],
    ) -> Result<Phase, String> {
        // A well-known gate opens again (a re-approval) and keeps its id;
        // any other id is opened once.
        let reopen = WellKnownGate::from_decision_id(gate_id).is_some()
            && self
                .gates
                .get(gate_id)
                .is_some_and(|g| g.decision.is_some());
        if self.gates.contains_key(gate_id) && !reopen {
            return Err(format!("gate {gate_id} was opened before"));
        }
        if let Some(first) = asked.first()
            && first.id != gate_id
        {
            return Err(format!(
                "gate {gate_id}'s first question is {}: a question gate is named by its first question",
                first.id
            ));
        }
        let questions: Vec<AskedQuestion> = asked.iter().cloned().map(AskedQuestion::new).collect();
        let waiting_prompt = if questions.is_empty() {
            prompt.to_string()
        } else {
            questions::prompt(prompt, &questions)
        };
        self.gates.insert(
            gate_id.to_string(),
            GateRecord {
                gate_id: gate_id.to_string(),
                node: node.clone(),
                block: block.clone(),
                step,
                prompt: prompt.to_string(),
                decision: None,
                reasks: 0,
                questions,
            },
        );
        Ok(Phase::Waiting {
            gate_id: gate_id.to_string(),
            node,
            block,
            prompt: waiting_prompt,
        })
    }

    /// The fan-out of the block running at `step`.
    fn running_fan_out(&mut self, step: u64) -> Result<&mut FanOut, String> {
        let running = self.in_flight.as_ref().map(|b| b.step);
        match &mut self.fan_out {
            None => Err(format!("step {step} has no fan-out")),
            Some(f) if f.step != step || running != Some(step) => Err(format!(
                "step {step} has no running fan-out (the fan-out is at step {})",
                f.step
            )),
            Some(f) => Ok(f),
        }
    }

    fn expect_ready(&self, node: &str, block: &str) -> Result<(), String> {
        match &self.phase {
            Phase::Ready { node: n, block: b } if n == node && b == block => Ok(()),
            other => Err(format!("{node}.{block} is not due to run ({other:?})")),
        }
    }

    fn expect_step(&self, step: u64) -> Result<(), String> {
        if step == self.steps {
            Ok(())
        } else {
            Err(format!("step {step}, expected step {}", self.steps))
        }
    }
}

/// A fan-in gate's answer must choose, for every conflicting file, one of
/// the lanes that changed it.
fn check_lane_choice(gate_id: &str, decision: &Decision, fan_out: &FanOut) -> Result<(), String> {
    if *decision == Decision::Resolved {
        return Ok(());
    }
    let Decision::UseLane { all, files } = decision else {
        return Err(format!(
            "gate {gate_id} asks which lane's version to keep: answer `use-lane:<lane>`, `use-lane:<file>=<lane>,...` or, after settling the files in the workspace yourself, `resolved` (lanes: {})",
            fan_out.lanes.join(", ")
        ));
    };
    if let Some(lane) = all
        && !fan_out.has_lane(lane)
    {
        return Err(format!(
            "`{lane}` is not a lane of this fan-out (lanes: {})",
            fan_out.lanes.join(", ")
        ));
    }
    for file in files.keys() {
        if !fan_out.unresolved.iter().any(|(f, _)| f == file) {
            return Err(format!(
                "`{file}` is not a conflicting file at gate {gate_id}"
            ));
        }
    }
    for (file, lanes) in &fan_out.unresolved {
        match decision.lane_for(file) {
            None => {
                return Err(format!(
                    "no lane chosen for `{file}` (changed by {})",
                    lanes.join(", ")
                ));
            }
            Some(lane) if !lanes.iter().any(|l| l == lane) => {
                return Err(format!(
                    "`{file}` was changed by {}, not by `{lane}`",
                    lanes.join(", ")
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn ready(address: &str) -> Result<Phase, String> {
    match address.split_once('.') {
        Some((node, block)) if !node.is_empty() && !block.is_empty() => Ok(Phase::Ready {
            node: node.to_string(),
            block: block.to_string(),
        }),
        _ => Err(format!("`{address}` is not a node.block address")),
    }
}

/// A well-known gate takes only its own answers; a cancellation only a
/// well-known gate.
fn check_well_known_answer(gate_id: &str, decision: &Decision) -> Result<(), String> {
    let gate = WellKnownGate::from_decision_id(gate_id);
    let fits = match (gate, decision) {
        (_, Decision::UseLane { .. } | Decision::Resolved) => true,
        (None, Decision::Approved | Decision::ChangesRequested { .. }) => true,
        (None, Decision::Strategy { .. } | Decision::Cancelled { .. }) => false,
        (None, Decision::Text { .. }) => true,
        (Some(_), Decision::Text { .. }) => false,
        // Whether the gate asks questions is checked by the caller.
        (None, Decision::Answers { .. }) => true,
        (Some(_), Decision::Answers { .. }) => false,
        (Some(_), Decision::Cancelled { .. }) => true,
        (Some(WellKnownGate::ApproveDesign), d) => {
            matches!(d, Decision::Approved | Decision::ChangesRequested { .. })
        }
        (Some(WellKnownGate::ReviewStrategy), d) => matches!(d, Decision::Strategy { .. }),
    };
    if fits {
        Ok(())
    } else {
        Err(format!("`{decision}` is not an answer to gate {gate_id}"))
    }
}
