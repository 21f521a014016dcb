//! Commands that make an existing run go on: `resume` (after a crash),
//! `fork` (from an older snapshot, as a new branch) and `gate` (after a
//! human's answer).

use clap::Args;
use wfhost_core::actions::WellKnownGate;
use wfhost_core::run::state::{Phase, RunState};
use wfhost_store::{RunLock, RunRecord, Store};

use wfhost_app::session_files::{SessionFiles, SessionSink};
use wfhost_app::workspace::Workspace;
use wfhost_app::{AppError, gates};
use wfhost_protocol::Accepted;

use crate::execute::{Entry, Output, Prepared, PrintingSink, execute, prepare};
use crate::options::{CacheOptions, OutputOptions};
use crate::{Global, RuntimeChoice, exit, fail};

/// Options shared by every command that executes blocks.
#[derive(Args)]
pub struct ExecOptions {
    #[command(flatten)]
    cache: CacheOptions,
    #[command(flatten)]
    output: OutputOptions,
    /// Where exec blocks that name no executor run: `local`,
    /// `container:IMAGE` or `slurm[:PARTITION]` (default: the one the run
    /// was started with).
    #[arg(long, value_name = "EXECUTOR")]
    executor: Option<wfhost_exec::Executor>,
    /// Run even if another run is using the workspace.
    #[arg(long)]
    shared_workspace: bool,
    /// A run process of `wfhost serve` (see [`Output::served`]).
    #[arg(skip)]
    served: bool,
}

impl ExecOptions {
    /// For a run process of `wfhost serve`: only where the run came to
    /// rest is printed (to its log); cache and executor as the run's.
    pub fn quiet() -> Self {
        ExecOptions {
            cache: CacheOptions::default(),
            output: OutputOptions {
                quiet: true,
                ..OutputOptions::default()
            },
            executor: None,
            shared_workspace: false,
            served: true,
        }
    }

    fn output(&self) -> Output {
        Output {
            served: self.served,
            ..self.output.into()
        }
    }

    fn cache(&self) -> RuntimeChoice {
        self.cache.choice(self.executor.clone())
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
    /// Where to continue from: a snapshot (`sn-…`, the state after the
    /// step `wfhost show` lists it on), a step number (the state before
    /// that step, which runs again), or a block (`node.block`, or a block
    /// name unique in the run: before its last execution).
    #[arg(long, value_name = "SNAPSHOT|STEP|BLOCK")]
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
    /// well-known gate also `defer:<reason>` (the run ends BLOCKED); at
    /// any other gate, to a plain question ("Use sqlite or postgres?"),
    /// the answer itself (`postgres`).
    answer: String,
    #[command(flatten)]
    exec: ExecOptions,
}

/// The store, the run and its lock, or why not.
fn open_run(global: &Global, id: &str) -> Result<(Store, RunRecord, RunLock), AppError> {
    let store = global.app_existing_store()?;
    let run = store.resolve_run(id).map_err(wfhost_app::store_error)?;
    let lock = store.lock_run(&run.id).map_err(wfhost_app::store_error)?;
    wfhost_app::run::note_served(&store, &run.id)?;
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
        "`approved` or `changes-requested:<text>`, or to a plain question the answer itself"
    };
    format!(
        "run {} is waiting at gate {gate_id} ({prompt}); answer it with `wfhost gate {} {gate_id} <answer>`, the answer {forms}",
        run.id, run.id
    )
}

pub fn resume(args: ResumeArgs, global: &Global) -> u8 {
    let (run, branch) = (args.run.clone(), args.branch);
    resume_run(&run, branch, &args.exec, global, &mut |_| {}).unwrap_or_else(fail)
}

/// Continue run `id` after a crash (branch `branch`, else the one written
/// last); `accepted` is told once it is held and ready to go on.
pub fn resume_run(
    id: &str,
    branch: Option<u32>,
    exec: &ExecOptions,
    global: &Global,
    accepted: &mut dyn FnMut(&Accepted),
) -> Result<u8, AppError> {
    let (mut store, run, _lock) = open_run(global, id)?;
    let branch = match branch {
        Some(b) => b,
        None => store
            .current_branch(&run.id)
            .map_err(wfhost_app::store_error)?,
    };
    let state = store
        .state(&run.id, branch)
        .map_err(wfhost_app::store_error)?;
    match &state.phase {
        Phase::Finished(_) => {
            return Err(AppError::bad_input(format!(
                "run {} (branch {branch}) already {}; there is nothing to resume. `wfhost fork {} --at <snapshot>` continues it from an older point",
                run.id,
                state.phase.status(),
                run.id
            )));
        }
        Phase::Waiting {
            gate_id, prompt, ..
        } => {
            eprintln!("{}", waiting_message(&run, gate_id, prompt));
            return Ok(exit::WAITING_AT_GATE);
        }
        Phase::Awaiting { node, block, .. } => {
            eprintln!(
                "run {} waits at {node}.{block}, an external block: an MCP client performs it (`wfhost mcp`)",
                run.id
            );
            return Ok(exit::WAITING_AT_GATE);
        }
        // A sleeping run goes on: woken at once when due, else once the
        // wait is over (this process waits, unless it serves).
        Phase::Ready { .. } | Phase::Deciding { .. } | Phase::Sleeping { .. } => {}
    }
    let prepared = prepared(&store, &run, &state, exec)?;
    accepted(&Accepted {
        branch: Some(branch),
    });
    continue_prepared(
        &mut store,
        &run,
        branch,
        state,
        Resumption::AfterCrash,
        exec,
        prepared,
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
) -> Result<Prepared, AppError> {
    let mut prepared = prepare(store, run, state, &exec.cache(), exec.output())?;
    prepared.workspace_lock =
        prepared
            .workspace
            .lock(&run.id, store.home(), exec.shared_workspace)?;
    Ok(prepared)
}

fn continue_prepared(
    store: &mut Store,
    run: &RunRecord,
    branch: u32,
    state: RunState,
    how: Resumption,
    exec: &ExecOptions,
    prepared: Prepared,
) -> Result<u8, AppError> {
    let output = exec.output();
    let files = SessionFiles::load(store, run, branch, &prepared.loaded.workflow);
    let mut writer = store
        .writer(&run.id, branch)
        .map_err(wfhost_app::store_error)?;
    // Decisions that cannot be persisted in status.json: the run ends
    // BLOCKED rather than going on.
    if let Some(end) = files.as_ref().and_then(SessionFiles::blocked_end) {
        writer
            .append_verified(std::slice::from_ref(&end))
            .map_err(wfhost_app::store_error)?;
        return Err(AppError::failed(end.describe()));
    }
    if output.header() {
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
    Ok(execute(&prepared, run, sink, entry))
}

pub fn fork(args: ForkArgs, global: &Global) -> u8 {
    fork_run(&args.run, &args.at, &args.exec, global, &mut |_| {}).unwrap_or_else(fail)
}

/// The snapshot `at` names on the run's current branch (a snapshot id, a
/// step number or a block).
fn fork_point(store: &wfhost_store::Store, run_id: &str, at: &str) -> Result<String, AppError> {
    let branch = store
        .current_branch(run_id)
        .map_err(wfhost_app::store_error)?;
    let chain = store
        .chain(run_id, branch)
        .map_err(wfhost_app::store_error)?;
    wfhost_store::view::fork_point(&chain, at)
        .map_err(|e| AppError::bad_input(format!("run {run_id}: --at {e}")).at(run_id))
}

/// A new branch of run `id` from snapshot `at`, continued; `accepted` is
/// told once the branch exists.
pub fn fork_run(
    id: &str,
    at: &str,
    exec: &ExecOptions,
    global: &Global,
    accepted: &mut dyn FnMut(&Accepted),
) -> Result<u8, AppError> {
    let (mut store, run, _lock) = open_run(global, id)?;
    Workspace::open(
        std::path::Path::new(&run.workspace),
        store.home(),
        &exec.cache(),
    )?;
    let at = &fork_point(&store, &run.id, at)?;
    let branch = store.fork(&run.id, at).map_err(wfhost_app::store_error)?;
    accepted(&Accepted {
        branch: Some(branch),
    });
    let state = store
        .state(&run.id, branch)
        .map_err(wfhost_app::store_error)?;
    if exec.output().header() {
        println!("run {} branch {branch} forked from {at}", run.id);
    }
    if let Phase::Waiting {
        gate_id, prompt, ..
    } = &state.phase
    {
        // The new branch's session folder shows the gate it waits at.
        SessionFiles::load_pinned(&store, &run, branch);
        eprintln!("{}", waiting_message(&run, gate_id, prompt));
        return Ok(exit::WAITING_AT_GATE);
    }
    let prepared = prepared(&store, &run, &state, exec)?;
    continue_prepared(
        &mut store,
        &run,
        branch,
        state,
        Resumption::Recorded,
        exec,
        prepared,
    )
}

pub fn gate(args: GateArgs, global: &Global) -> u8 {
    let answer = GateAnswer {
        run: args.run.clone(),
        gate: args.gate.clone(),
        answer: args.answer.clone(),
    };
    answer_gate(answer, &args.exec, global, &mut |_| {}).unwrap_or_else(fail)
}

/// An answer to a run's gate, as given.
pub struct GateAnswer {
    /// The run: its id, or a unique part of it.
    pub run: String,
    pub gate: String,
    pub answer: String,
}

/// Answer a gate: the answer is checked, recorded and read back
/// (`accepted` is told then), and the run goes on. An invalid answer to a
/// mandatory (well-known) gate is recorded as a re-ask, at most
/// `MAX_REASKS` times; to any other gate it records nothing.
pub fn answer_gate(
    given: GateAnswer,
    exec: &ExecOptions,
    global: &Global,
    accepted: &mut dyn FnMut(&Accepted),
) -> Result<u8, AppError> {
    let (mut store, run, _lock) = open_run(global, &given.run)?;
    let answer = gates::decide(&mut store, &run, &given.gate, &given.answer)?;
    // Check that the run can be continued before recording anything.
    let prepared = prepared(&store, &run, &answer.state, exec)?;
    gates::record(&mut store, &run, &answer)?;
    accepted(&Accepted {
        branch: Some(answer.branch),
    });
    if exec.output().header() {
        println!(
            "gate {} of run {} answered: {}",
            answer.gate, run.id, answer.decision
        );
    }
    if let Phase::Waiting {
        gate_id, prompt, ..
    } = &answer.next.phase
    {
        // Security questions were left without an answer: the gate asks
        // them again; the session folder shows the answered ones.
        SessionFiles::load_pinned(&store, &run, answer.branch);
        eprintln!(
            "security questions are never cancelled for want of an answer: answer them or defer them explicitly (`defer: <reason>`)\n{}",
            waiting_message(&run, gate_id, prompt)
        );
        return Ok(exit::WAITING_AT_GATE);
    }
    continue_prepared(
        &mut store,
        &run,
        answer.branch,
        answer.next,
        Resumption::Recorded,
        exec,
        prepared,
    )
}
