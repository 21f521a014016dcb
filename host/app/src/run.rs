//! Driving a run that is recorded: its pinned definition and plugins
//! prepared ([`prepare`]), then the engine driven with the store as its log
//! ([`drive`]) until the run comes to rest, a signal stops it, or the
//! engine does. Shared by every command that makes a run go on (`run`,
//! `resume`, `fork`, `gate`, a run process of `wfhost serve`).

use std::path::Path;

use wfhost_core::manifest::LoadedWorkflow;
use wfhost_core::run::engine::{self, RunReport};
use wfhost_core::run::event::EventSink;
use wfhost_core::run::state::RunState;
use wfhost_protocol::{AppError, ErrorKind};
use wfhost_runtime::PluginSet;
use wfhost_store::{RunRecord, Store};

use crate::jobs::queue::{RunInfo, RunJobs};
use crate::plugins::{
    RuntimeChoice, check_pinned_plugins, load_plugins, pinned_workflow, plugin_digests,
    start_runtime,
};
use crate::session_files::{Recorded, SessionSink};
use crate::workspace::{Workspace, WorkspaceLock};

use wfhost_protocol::RUN_BLOCKS_AS_JOBS;

/// Whether this process executes runs for `wfhost serve`.
pub fn blocks_as_jobs() -> bool {
    std::env::var_os(RUN_BLOCKS_AS_JOBS).is_some_and(|v| v == "1")
}

/// Note that this process, executing runs for `wfhost serve`, holds
/// `run_id` (its lock just taken): should it die before the run comes to
/// rest, a server takes the run over. Nothing for any other process.
pub fn note_served(store: &Store, run_id: &wfhost_store::RunId) -> Result<(), AppError> {
    if blocks_as_jobs() {
        store.mark_served(run_id).map_err(crate::store_error)?;
    }
    Ok(())
}

/// The pinned workflow of a run, ready to execute, with its plugins.
pub struct Prepared {
    pub loaded: LoadedWorkflow,
    pub plugins: PluginSet,
    pub workspace: Workspace,
    /// The run's hold on its workspace while it executes.
    pub workspace_lock: Option<WorkspaceLock>,
    /// The home whose store records the run.
    pub home: std::path::PathBuf,
}

/// Load the run's pinned definition (never the file on disk, which may
/// have changed) and its plugins, checking they are the ones the run
/// started with. `slurm_watcher` is told of each Slurm job's state.
pub fn prepare(
    store: &Store,
    run: &RunRecord,
    state: &RunState,
    choice: &RuntimeChoice,
    slurm_watcher: Option<wfhost_exec::slurm::JobWatcher>,
) -> Result<Prepared, AppError> {
    let json = store
        .definition(&run.workflow_hash)
        .map_err(|e| AppError::bad_input(e).at(run.id.to_string()))?;
    let loaded = pinned_workflow(&run.id, &json, &run.workflow_hash, Path::new(&run.manifest))?;
    let workspace =
        Workspace::open(Path::new(&run.workspace), store.home(), choice).map_err(|e| AppError {
            message: format!("run {}: {}", run.id, e.message),
            ..e
        })?;
    let executor = match &choice.executor {
        Some(executor) => executor.clone(),
        None if state.default_executor.is_empty() => wfhost_exec::Executor::Local,
        None => state.default_executor.parse().map_err(|e| {
            AppError::bad_input(format!(
                "run {}: its recorded executor `{}`: {e}",
                run.id, state.default_executor
            ))
        })?,
    };
    let runtime = start_runtime(choice, executor, Some(store.home()), slurm_watcher)?;
    let plugins = load_plugins(runtime, &loaded, workspace.path(), Some(store.home()))?;
    check_pinned_plugins(&run.id, &state.plugins, &plugin_digests(&plugins))?;
    Ok(Prepared {
        loaded,
        plugins,
        workspace,
        workspace_lock: None,
        home: store.home().to_path_buf(),
    })
}

/// How the engine is to be entered.
pub enum Entry {
    /// After a crash: record the resumption, re-run what was in flight.
    Resume(RunState),
    /// After a fork or a gate's answer, already recorded.
    Continue(RunState),
}

impl Entry {
    fn state(&self) -> &RunState {
        match self {
            Entry::Resume(state) | Entry::Continue(state) => state,
        }
    }
}

/// Drive the engine until the run comes to rest: its report. A SIGINT or
/// SIGTERM stops it (the running block's processes, containers and jobs
/// with it): an `Interrupted` error; an engine that stops (its log intact
/// up to the last recorded event): a `Failed` one.
pub fn drive<S: EventSink + Recorded>(
    prepared: &Prepared,
    run: &RunRecord,
    branch: u32,
    sink: &mut SessionSink<S>,
    entry: Entry,
) -> Result<RunReport, AppError> {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| AppError::internal(format!("cannot start the async runtime: {e}")))?;
    // The engine's `run` span goes under this one, which names the branch
    // and the process, so a run is followed across the processes that
    // drive it (a crash, a resume, a gate answered elsewhere).
    // Its parent, when traces are exported, is the span that handed the
    // run over (a server's request, the caller's `TRACEPARENT`).
    let span = tracing::info_span!(
        "drive",
        run_id = %run.id,
        branch,
        pid = std::process::id(),
    );
    wfhost_protocol::trace::adopt(&span, wfhost_protocol::trace::inbound());
    let _span = span.entered();
    let wf = &prepared.loaded.workflow;
    let plugins = &prepared.plugins;
    if let Some(folder) = sink.session_folder() {
        plugins.set_session_folder(&folder);
    }
    // Lane workspaces a crash left behind, except those of a fan-out the
    // run is still in (its finished lanes are not run again).
    let active = entry.state().fan_out.as_ref().map(|f| f.step);
    wfhost_runtime::lanes::remove_stale(plugins.workspace(), &run.id, active);
    // Staging copies and agent snapshots a killed wfhost left behind,
    // swept beside the run: it reads whole temporary directories, which
    // other programs may fill. Waited for once the run rests.
    let sweep = std::thread::Builder::new()
        .name("wfhost-scratch-sweep".into())
        .spawn(|| drop(wfhost_exec::scratch::remove_stale(None)))
        .ok();
    let jobs = run_jobs(plugins, run, branch, entry.state())
        .map_err(|e| AppError::bad_input(format!("run {}: {e}", run.id)))?;
    let ended = tokio.block_on(async {
        // Agents run here: their telemetry is served and recorded.
        if jobs.is_none()
            && plugins.runs_agents()
            && let Err(e) = crate::telemetry::serve(plugins).await
        {
            crate::warnings::warn(&format!(
                "{e}; agents of run {} get TELEMETRY_ENABLED=0",
                run.id
            ));
        }
        let engine = async {
            let mut report = match &jobs {
                Some(jobs) => enter(wf, jobs, plugins, entry, sink).await,
                None => enter(wf, plugins, plugins, entry, sink).await,
            }?;
            // A run resting at a `sleep` block: this process waits for it
            // (its due time is durable: an interruption loses nothing), but
            // one serving a server only for a timer due within
            // `SERVED_TIMER_HORIZON_MS` (the server resumes runs that much
            // ahead, so they wake on time); the server wakes the others.
            while let engine::RunStatus::Sleeping { due_at_ms, .. } = &report.status {
                let wait = due_at_ms.saturating_sub(wfhost_core::time::now_ms());
                if jobs.is_some() && wait > wfhost_protocol::SERVED_TIMER_HORIZON_MS {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(wait.max(0) as u64)).await;
                // Woken, the blocks go on as they ran: as jobs for a server.
                report = match &jobs {
                    Some(jobs) => engine::drive(wf, jobs, plugins, report.state, sink).await,
                    None => engine::drive(wf, plugins, plugins, report.state, sink).await,
                }?;
            }
            Ok(report)
        };
        // Ctrl-C or SIGTERM: the engine future is dropped, which kills the
        // running block's processes (their groups and every descendant) and
        // cancels its Slurm job; the decided events are recorded on the way.
        let ended = tokio::select! {
            result = engine => Ended::Rested(Box::new(result)),
            signal = interrupted() => Ended::Interrupted(signal),
        };
        // The run is at rest or stopped: its containers go. A second
        // Ctrl-C does not wait for that.
        tokio::select! {
            () = plugins.shutdown() => ended,
            _ = interrupted() => Ended::InterruptedTwice,
        }
    });
    if let (Ended::Rested(result), Some(jobs)) = (&ended, &jobs)
        && result.is_ok()
    {
        jobs.at_rest();
    }
    // A guest call abandoned at its deadline may have left a thread of the
    // blocking pool waiting in a file read (a FIFO): do not wait for it.
    tokio.shutdown_background();
    if let Some(sweep) = sweep {
        let _ = sweep.join();
    }
    match ended {
        Ended::Rested(result) => (*result).map_err(|e| {
            AppError::failed(format!(
                "run {} stopped: {e}\nits log is intact up to the last recorded event; `wfhost resume {}` continues it",
                run.id, run.id
            ))
        }),
        Ended::Interrupted(signal) => Err(stopped_by(&prepared.home, run, signal)),
        Ended::InterruptedTwice => Err(AppError::new(
            ErrorKind::Interrupted,
            format!(
                "interrupted again: exiting now (containers of run {} may be left; `wfhost gc` removes them)",
                run.id
            ),
        )),
    }
}

/// Why the run stopped at `signal`: someone cancelling it (who and why,
/// and that it is over), or an interruption it can be resumed from.
fn stopped_by(home: &Path, run: &RunRecord, signal: &str) -> AppError {
    match wfhost_store::Cancellation::pending(home, &run.id) {
        Some(cancellation) => AppError::new(
            ErrorKind::Cancelled,
            format!(
                "run {} {}; its running block's processes, containers and jobs were stopped, and it will not continue",
                run.id,
                cancellation.text()
            ),
        ),
        None => AppError::new(
            ErrorKind::Interrupted,
            format!(
                "run {} interrupted ({signal}): the running block's processes, containers and jobs were stopped; `wfhost resume {}` continues it",
                run.id, run.id
            ),
        ),
    }
}

/// For a run executed for `wfhost serve`: its blocks as jobs for agents.
fn run_jobs<'p>(
    plugins: &'p PluginSet,
    run: &RunRecord,
    branch: u32,
    state: &RunState,
) -> Result<Option<RunJobs<'p>>, String> {
    if !blocks_as_jobs() {
        return Ok(None);
    }
    let home = wfhost_store::resolve_home(None).map_err(|e| e.to_string())?;
    RunJobs::new(
        plugins,
        RunInfo {
            home,
            run_id: run.id.to_string(),
            branch,
            workflow_hash: run.workflow_hash.clone(),
            manifest: run.manifest.clone(),
            executor: state.default_executor.clone(),
        },
    )
    .map(Some)
}

/// Enter the engine with `workers` executing the blocks.
async fn enter<W: engine::WorkerHost + Sync, S: EventSink + Recorded>(
    wf: &wfhost_core::manifest::Workflow,
    workers: &W,
    actions: &PluginSet,
    entry: Entry,
    sink: &mut SessionSink<S>,
) -> Result<RunReport, engine::EngineError> {
    match entry {
        Entry::Resume(state) => engine::resume(wf, workers, actions, state, sink).await,
        Entry::Continue(state) => engine::drive(wf, workers, actions, state, sink).await,
    }
}

/// How the engine's drive ended.
enum Ended {
    Rested(Box<Result<RunReport, engine::EngineError>>),
    /// A signal asked the run to stop: its name.
    Interrupted(&'static str),
    /// A second signal came while the run's containers were being removed.
    InterruptedTwice,
}

/// The first SIGINT or SIGTERM (never, if they cannot be watched).
async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}
