//! Commands that make an existing run go on: `resume` (after a crash),
//! `fork` (from an older snapshot, as a new branch) and `gate` (after a
//! human's answer).

use std::path::PathBuf;

use clap::Args;
use wfhost_core::actions::WellKnownGate;
use wfhost_core::run::event::{Decision, Event, MAX_REASKS};
use wfhost_core::run::state::{Phase, RunState};
use wfhost_store::{RunLock, RunRecord, Store};

use crate::execute::{Entry, Output, Prepared, PrintingSink, RuntimeChoice, execute, prepare};
use crate::session_files::{SessionFiles, SessionSink};
use crate::{Global, exit, report_error, store_error};

/// Options shared by every command that executes blocks.
#[derive(Args)]
pub struct ExecOptions {
    /// Where compiled plugins are cached.
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Compile plugins without reading or writing the cache.
    #[arg(long, conflicts_with = "cache_dir")]
    no_cache: bool,
    /// Also print plugin loads and every block's log.
    #[arg(long, short, conflicts_with = "json")]
    verbose: bool,
    /// Print only where the run came to rest: no line per block, no live
    /// status line.
    #[arg(long, short, conflicts_with_all = ["json", "verbose"])]
    quiet: bool,
    /// Print only a JSON report of where the run came to rest.
    #[arg(long)]
    json: bool,
    /// Where exec blocks that name no executor run: `local`,
    /// `container:IMAGE` or `slurm[:PARTITION]` (default: the one the run
    /// was started with).
    #[arg(long, value_name = "EXECUTOR")]
    executor: Option<wfhost_exec::Executor>,
    /// Run even if another run is using the workspace.
    #[arg(long)]
    shared_workspace: bool,
}

impl ExecOptions {
    fn output(&self) -> Output {
        Output {
            verbose: self.verbose,
            json: self.json,
            quiet: self.quiet,
        }
    }

    fn cache(&self) -> RuntimeChoice {
        RuntimeChoice {
            cache_dir: self.cache_dir.clone(),
            cache_disabled: self.no_cache,
            executor: self.executor.clone(),
        }
    }
}

#[derive(Args)]
pub struct ResumeArgs {
    /// The run: its id, or any part of it that is unique.
    run: String,
    /// The branch to continue (default: the one written last).
    #[arg(long)]
    branch: Option<u32>,
    #[command(flatten)]
    exec: ExecOptions,
}

#[derive(Args)]
pub struct ForkArgs {
    /// The run: its id, or any part of it that is unique.
    run: String,
    /// The snapshot to continue from (`wfhost show` lists them).
    #[arg(long, value_name = "SNAPSHOT")]
    at: String,
    #[command(flatten)]
    exec: ExecOptions,
}

#[derive(Args)]
pub struct GateArgs {
    /// The run: its id, or any part of it that is unique.
    run: String,
    /// The gate, e.g. `UD-1` (`wfhost gates` lists the open ones).
    gate: String,
    /// `approved`, or `changes-requested:<what to change>`; at a fan-in
    /// gate `use-lane:<lane>`, `use-lane:<file>=<lane>,...` or `resolved`;
    /// at `UD-REVIEW-STRATEGY` `per-batch` or `single-final`; at a
    /// well-known gate also `defer:<reason>` (the run ends BLOCKED).
    answer: String,
    #[command(flatten)]
    exec: ExecOptions,
}

/// The store, the run and its lock, or the exit code of why not.
fn open_run(global: &Global, id: &str) -> Result<(Store, RunRecord, RunLock), u8> {
    let store = global.existing_store()?;
    let run = store.resolve_run(id).map_err(store_error)?;
    let lock = store.lock_run(&run.id).map_err(store_error)?;
    Ok((store, run, lock))
}

fn waiting_message(run: &RunRecord, gate_id: &str, prompt: &str) -> String {
    // A fan-in gate's prompt asks for a lane (see `wfhost_core::parallel::fan_out`).
    let forms = if gate_id == WellKnownGate::ReviewStrategy.decision_id() {
        "`per-batch` or `single-final` (or `defer:<reason>`)"
    } else if gate_id == WellKnownGate::ApproveDesign.decision_id() {
        "`approved` or `changes-requested:<text>` (or `defer:<reason>`)"
    } else if prompt.contains(wfhost_core::run::questions::ANSWER_FORMS) {
        "a JSON object of answers by question id or number (see the questions)"
    } else if prompt.contains("use-lane:") {
        "`use-lane:<lane>`, `use-lane:<file>=<lane>,...` or `resolved`"
    } else {
        "`approved` or `changes-requested:<text>`"
    };
    format!(
        "run {} is waiting at gate {gate_id} ({prompt}); answer it with `wfhost gate {} {gate_id} <answer>`, the answer {forms}",
        run.id, run.id
    )
}

pub fn resume(args: ResumeArgs, global: &Global) -> u8 {
    let (mut store, run, _lock) = match open_run(global, &args.run) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let branch = match args.branch {
        Some(b) => b,
        None => match store.current_branch(&run.id) {
            Ok(b) => b,
            Err(e) => return store_error(e),
        },
    };
    let state = match store.state(&run.id, branch) {
        Ok(s) => s,
        Err(e) => return store_error(e),
    };
    match &state.phase {
        Phase::Finished(_) => {
            report_error(format!(
                "run {} (branch {branch}) already {}; there is nothing to resume. `wfhost fork {} --at <snapshot>` continues it from an older point",
                run.id,
                state.phase.status(),
                run.id
            ));
            return exit::BAD_INPUT;
        }
        Phase::Waiting {
            gate_id, prompt, ..
        } => {
            eprintln!("{}", waiting_message(&run, gate_id, prompt));
            return exit::WAITING_AT_GATE;
        }
        Phase::Awaiting { node, block, .. } => {
            eprintln!(
                "run {} waits at {node}.{block}, an external block: an MCP client performs it (`wfhost mcp`)",
                run.id
            );
            return exit::WAITING_AT_GATE;
        }
        Phase::Ready { .. } | Phase::Deciding { .. } => {}
    }
    continue_run(
        &mut store,
        &run,
        branch,
        state,
        Resumption::AfterCrash,
        &args.exec,
    )
}

enum Resumption {
    AfterCrash,
    Recorded,
}

fn prepared(
    store: &Store,
    run: &RunRecord,
    state: &RunState,
    exec: &ExecOptions,
) -> Result<Prepared, u8> {
    let mut prepared = prepare(store, run, state, &exec.cache(), exec.output()).map_err(|e| {
        report_error(e);
        exit::BAD_INPUT
    })?;
    prepared.workspace_lock = crate::workspace_lock::lock(
        std::path::Path::new(&run.workspace),
        &run.id,
        store.home(),
        exec.shared_workspace,
    )?;
    Ok(prepared)
}

fn continue_run(
    store: &mut Store,
    run: &RunRecord,
    branch: u32,
    state: RunState,
    how: Resumption,
    exec: &ExecOptions,
) -> u8 {
    let prepared = match prepared(store, run, &state, exec) {
        Ok(p) => p,
        Err(code) => return code,
    };
    continue_prepared(store, run, branch, state, how, exec, prepared)
}

fn continue_prepared(
    store: &mut Store,
    run: &RunRecord,
    branch: u32,
    state: RunState,
    how: Resumption,
    exec: &ExecOptions,
    prepared: Prepared,
) -> u8 {
    let output = exec.output();
    let files = SessionFiles::load(store, run, branch, &prepared.loaded.workflow);
    let mut writer = match store.writer(&run.id, branch) {
        Ok(w) => w,
        Err(e) => return store_error(e),
    };
    // Decisions that cannot be persisted in status.json: the run ends
    // BLOCKED rather than going on.
    if let Some(end) = files.as_ref().and_then(SessionFiles::blocked_end) {
        if let Err(e) = writer.append_verified(std::slice::from_ref(&end)) {
            return store_error(e);
        }
        report_error(end.describe());
        return exit::RUN_FAILED;
    }
    if !output.json {
        println!(
            "run {} branch {branch} of {} continues",
            run.id, run.workflow_id
        );
    }
    let entry = match how {
        Resumption::AfterCrash => Entry::Resume(state),
        Resumption::Recorded => Entry::Continue(state),
    };
    let sink = SessionSink::new(PrintingSink::new(writer, output, run), files);
    execute(&prepared, run, sink, entry)
}

pub fn fork(args: ForkArgs, global: &Global) -> u8 {
    let (mut store, run, _lock) = match open_run(global, &args.run) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let workspace = std::path::Path::new(&run.workspace);
    if let Err(e) = crate::guard::check_workspace(workspace, store.home(), &args.exec.cache()) {
        report_error(e);
        return exit::BAD_INPUT;
    }
    let branch = match store.fork(&run.id, &args.at) {
        Ok(b) => b,
        Err(e) => return store_error(e),
    };
    let state = match store.state(&run.id, branch) {
        Ok(s) => s,
        Err(e) => return store_error(e),
    };
    if !args.exec.json {
        println!("run {} branch {branch} forked from {}", run.id, args.at);
    }
    if let Phase::Waiting {
        gate_id, prompt, ..
    } = &state.phase
    {
        // The new branch's session folder shows the gate it waits at.
        SessionFiles::load_pinned(&store, &run, branch);
        eprintln!("{}", waiting_message(&run, gate_id, prompt));
        return exit::WAITING_AT_GATE;
    }
    continue_run(
        &mut store,
        &run,
        branch,
        state,
        Resumption::Recorded,
        &args.exec,
    )
}

pub fn gate(mut args: GateArgs, global: &Global) -> u8 {
    // Gate ids are `UD-<n>`: `ud-1` names the same gate.
    args.gate = args.gate.trim().to_ascii_uppercase();
    // An invalid answer to a mandatory (well-known) gate is recorded
    // below: the gate is asked again, at most `MAX_REASKS` times. An
    // invalid answer to any other gate records nothing.
    let mandatory = WellKnownGate::from_decision_id(&args.gate).is_some();
    let (mut store, run, _lock) = match open_run(global, &args.run) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let branches = match store.branches(&run.id) {
        Ok(b) => b,
        Err(e) => return store_error(e),
    };
    // Find the branch where this gate is open; remember an earlier answer.
    let mut open = None;
    let mut answered = None;
    let mut asking = None;
    for info in &branches {
        let state = match store.state(&run.id, info.branch) {
            Ok(s) => s,
            Err(e) => return store_error(e),
        };
        if matches!(&state.phase, Phase::Waiting { gate_id, .. } if *gate_id == args.gate) {
            open = Some((info.branch, state));
            break;
        }
        if let Some(d) = state.gates.get(&args.gate).and_then(|g| g.decision.clone()) {
            answered = Some(d);
        }
        if let Phase::Waiting { gate_id, .. } = &state.phase
            && state
                .gate_asking(&args.gate)
                .is_some_and(|g| g.gate_id == *gate_id)
        {
            asking = Some(gate_id.clone());
        }
    }
    let Some((branch, state)) = open else {
        let message = match (answered, asking) {
            (_, Some(gate)) => format!(
                "{} is a question of gate {gate} of run {}: answer the gate, all its questions at once, e.g. `wfhost gate {} {gate} '{{\"{}\": \"<answer>\"}}'`",
                args.gate, run.id, run.id, args.gate
            ),
            (Some(first), None) => format!(
                "gate {} of run {} is closed: it was already answered `{first}`; a decision is recorded once",
                args.gate, run.id
            ),
            (None, None) => format!(
                "run {} has no open gate `{}`; `wfhost gates` lists the open ones",
                run.id, args.gate
            ),
        };
        report_error(message);
        return exit::BAD_INPUT;
    };
    let output = args.exec.output();
    let reasks = state.gates.get(&args.gate).map_or(0, |g| g.reasks);
    let decision = match state.parse_answer(&args.gate, &args.answer) {
        Ok(d) => d,
        Err(why) if !mandatory => {
            report_error(why);
            return exit::BAD_INPUT;
        }
        Err(why) if reasks < MAX_REASKS => {
            return reask(&mut store, &run, branch, &state, &args, why, reasks + 1);
        }
        // The re-ask budget is spent: the decision is cancelled and the
        // run ends BLOCKED.
        Err(why) => Decision::Cancelled {
            reason: format!(
                "no valid answer after {MAX_REASKS} re-asks; the last, `{}`, was invalid: {why}",
                args.answer
            ),
        },
    };
    let event = Event::GateAnswered {
        gate_id: args.gate.clone(),
        decision: decision.clone(),
    };
    let mut next = state.clone();
    if let Err(e) = next.apply(&event) {
        report_error(e);
        return exit::BAD_INPUT;
    }
    // Check that the run can be continued before recording anything.
    let prepared = match prepared(&store, &run, &state, &args.exec) {
        Ok(p) => p,
        Err(code) => return code,
    };
    {
        let mut writer = match store.writer(&run.id, branch) {
            Ok(w) => w,
            Err(e) => return store_error(e),
        };
        // Read-after-write: the decision is read back from the store
        // before the run goes on.
        if let Err(e) = writer.append_verified(std::slice::from_ref(&event)) {
            return store_error(e);
        }
    }
    if !output.json {
        println!("gate {} of run {} answered: {decision}", args.gate, run.id);
    }
    if let Phase::Waiting {
        gate_id, prompt, ..
    } = &next.phase
    {
        // Security questions were left without an answer: the gate asks
        // them again; the session folder shows the answered ones.
        SessionFiles::load_pinned(&store, &run, branch);
        eprintln!(
            "security questions are never cancelled for want of an answer: answer them or defer them explicitly (`defer: <reason>`)\n{}",
            waiting_message(&run, gate_id, prompt)
        );
        return exit::WAITING_AT_GATE;
    }
    continue_prepared(
        &mut store,
        &run,
        branch,
        next,
        Resumption::Recorded,
        &args.exec,
        prepared,
    )
}

/// Record an invalid answer to mandatory gate `args.gate` (the gate stays
/// open and is asked again) and say why it was refused.
fn reask(
    store: &mut Store,
    run: &RunRecord,
    branch: u32,
    state: &RunState,
    args: &GateArgs,
    why: String,
    nth: u32,
) -> u8 {
    let event = Event::GateReasked {
        gate_id: args.gate.clone(),
        answer: args.answer.clone(),
        reason: why.clone(),
    };
    let mut next = state.clone();
    if let Err(e) = next.apply(&event) {
        report_error(e);
        return exit::BAD_INPUT;
    }
    {
        let mut writer = match store.writer(&run.id, branch) {
            Ok(w) => w,
            Err(e) => return store_error(e),
        };
        if let Err(e) = writer.append_verified(std::slice::from_ref(&event)) {
            return store_error(e);
        }
    }
    // The session folder shows the gate still pending.
    SessionFiles::load_pinned(store, run, branch);
    let left = MAX_REASKS - nth;
    let then = if left == 0 {
        "the next invalid answer cancels the decision and the run ends BLOCKED (mandatory_user_decision_missing)".to_string()
    } else {
        format!("{left} more invalid answers are asked again, then the decision is cancelled")
    };
    report_error(format!(
        "{why}\ngate {} of run {} stays open and is asked again ({nth} of {MAX_REASKS}); {then}",
        args.gate, run.id
    ));
    exit::BAD_INPUT
}
