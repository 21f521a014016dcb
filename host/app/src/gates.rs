//! Answering a run's gate: the open gate found on its branch, the answer
//! parsed against it, the re-ask budget of a mandatory (well-known) gate
//! kept, and the decision recorded and read back before the run goes on.

use wfhost_core::actions::WellKnownGate;
use wfhost_core::manifest::pinning::PinnedDefinition;
use wfhost_core::run::event::{Decision, Event, MAX_REASKS};
use wfhost_core::run::state::{Phase, RunState};
use wfhost_protocol::AppError;
use wfhost_store::{RunRecord, Store};

use crate::session_files::SessionFiles;

/// A decision on an open gate, checked and not yet recorded.
pub struct Answer {
    /// The gate, as `UD-<n>`.
    pub gate: String,
    pub branch: u32,
    /// The branch's state before the answer, and after it.
    pub state: RunState,
    pub next: RunState,
    pub decision: Decision,
    event: Event,
}

/// Gate ids are `UD-<n>`: `ud-1` names the same gate.
pub fn normalize(gate: &str) -> String {
    gate.trim().to_ascii_uppercase()
}

/// The open gate `gate` of `run`: its branch and the state there, or why
/// the gate cannot be answered (a question of another gate, closed, none).
pub fn open_gate(store: &Store, run: &RunRecord, gate: &str) -> Result<(u32, RunState), AppError> {
    let branches = store.branches(&run.id).map_err(crate::store_error)?;
    // Find the branch where this gate is open; remember an earlier answer.
    let mut answered = None;
    let mut asking = None;
    for info in &branches {
        let state = store
            .state(&run.id, info.branch)
            .map_err(crate::store_error)?;
        if matches!(&state.phase, Phase::Waiting { gate_id, .. } if *gate_id == gate) {
            return Ok((info.branch, state));
        }
        if let Some(d) = state.gates.get(gate).and_then(|g| g.decision.clone()) {
            answered = Some(d);
        }
        if let Phase::Waiting { gate_id, .. } = &state.phase
            && state
                .gate_asking(gate)
                .is_some_and(|g| g.gate_id == *gate_id)
        {
            asking = Some(gate_id.clone());
        }
    }
    let message = match (answered, asking) {
        (_, Some(asked)) => format!(
            "{gate} is a question of gate {asked} of run {}: answer the gate, all its questions at once, e.g. `wfhost gate {} {asked} '{{\"{gate}\": \"<answer>\"}}'`",
            run.id, run.id
        ),
        (Some(first), None) => format!(
            "gate {gate} of run {} is closed: it was already answered `{first}`; a decision is recorded once",
            run.id
        ),
        (None, None) => format!(
            "run {} has no open gate `{gate}`; `wfhost gates` lists the open ones",
            run.id
        ),
    };
    Err(AppError::bad_input(message).at(gate))
}

/// Decide `answer` for gate `gate` of `run`. An invalid answer to a
/// mandatory (well-known) gate is recorded as a re-ask (the gate stays
/// open; the error says so) at most `MAX_REASKS` times, after which the
/// decision is cancelled (the run ends BLOCKED); an invalid answer to any
/// other gate records nothing.
pub fn decide(
    store: &mut Store,
    run: &RunRecord,
    gate: &str,
    answer: &str,
) -> Result<Answer, AppError> {
    let gate = normalize(gate);
    let mandatory = WellKnownGate::from_decision_id(&gate).is_some();
    let (branch, state) = open_gate(store, run, &gate)?;
    let reasks = state.gates.get(&gate).map_or(0, |g| g.reasks);
    // With the run's pinned definition, a plain question takes a free
    // answer; without it, only the answer forms are answers.
    let workflow = store
        .definition(&run.workflow_hash)
        .map_err(|e| e.to_string())
        .and_then(|json| PinnedDefinition::parse(&json, &run.workflow_hash));
    let parsed = match &workflow {
        Ok(workflow) => state.parse_answer_in(workflow, &gate, answer),
        Err(_) => state.parse_answer(&gate, answer),
    };
    let decision = match parsed {
        Ok(d) => d,
        Err(why) if !mandatory => return Err(AppError::bad_input(why).at(gate)),
        Err(why) if reasks < MAX_REASKS => {
            return Err(reask(
                store,
                run,
                branch,
                &state,
                &gate,
                answer,
                why,
                reasks + 1,
            ));
        }
        // The re-ask budget is spent: the decision is cancelled and the
        // run ends BLOCKED.
        Err(why) => Decision::Cancelled {
            reason: format!(
                "no valid answer after {MAX_REASKS} re-asks; the last, `{answer}`, was invalid: {why}"
            ),
        },
    };
    let event = Event::GateAnswered {
        gate_id: gate.clone(),
        decision: decision.clone(),
    };
    let mut next = state.clone();
    next.apply(&event).map_err(AppError::bad_input)?;
    Ok(Answer {
        gate,
        branch,
        state,
        next,
        decision,
        event,
    })
}

/// Record the decision and read it back from the store (read-after-write)
/// before the run goes on.
pub fn record(store: &mut Store, run: &RunRecord, answer: &Answer) -> Result<(), AppError> {
    store
        .writer(&run.id, answer.branch)
        .and_then(|mut writer| writer.append_verified(std::slice::from_ref(&answer.event)))
        .map_err(crate::store_error)
}

/// Record an invalid answer to mandatory gate `gate` (the gate stays open
/// and is asked again); the error says why it was refused.
#[allow(clippy::too_many_arguments)]
fn reask(
    store: &mut Store,
    run: &RunRecord,
    branch: u32,
    state: &RunState,
    gate: &str,
    answer: &str,
    why: String,
    nth: u32,
) -> AppError {
    let event = Event::GateReasked {
        gate_id: gate.to_string(),
        answer: answer.to_string(),
        reason: why.clone(),
    };
    let mut next = state.clone();
    if let Err(e) = next.apply(&event) {
        return AppError::bad_input(e);
    }
    let recorded = store
        .writer(&run.id, branch)
        .and_then(|mut writer| writer.append_verified(std::slice::from_ref(&event)));
    if let Err(e) = recorded {
        return crate::store_error(e);
    }
    // The session folder shows the gate still pending.
    SessionFiles::load_pinned(store, run, branch);
    let left = MAX_REASKS - nth;
    let then = if left == 0 {
        "the next invalid answer cancels the decision and the run ends BLOCKED (mandatory_user_decision_missing)".to_string()
    } else {
        format!("{left} more invalid answers are asked again, then the decision is cancelled")
    };
    AppError::bad_input(format!(
        "{why}\ngate {gate} of run {} stays open and is asked again ({nth} of {MAX_REASKS}); {then}",
        run.id
    ))
    .at(gate)
}
