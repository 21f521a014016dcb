//! Executing a durable run: shared by `run`, `resume`, `fork` and `gate`.
//!
//! Every command that makes a run go on does the same things: take the
//! run's lock, load the pinned definition and its plugins, drive the engine
//! with the store as its event log, print progress, and exit with the code
//! of where the run came to rest.

use std::path::{Path, PathBuf};
use std::time::Duration;

use wfhost_core::manifest::LoadedWorkflow;
use wfhost_core::run::engine::{self, RunReport, RunStatus};
use wfhost_core::run::event::{Event, EventSink, QueuedJob, SinkError};
use wfhost_core::run::state::RunState;
use wfhost_core::text::{count, escape};
use wfhost_runtime::PluginSet;
use wfhost_runtime::cache::CacheOutcome;
use wfhost_store::{BranchWriter, RunRecord, Store};

use crate::progress::Live;
use crate::screen::Screen;
use crate::style::Style;
use crate::{RuntimeChoice, exit, load_plugins, report_error, start_runtime};
use wfhost_app::AppError;
use wfhost_app::plugins::{check_pinned_plugins, pinned_workflow, plugin_digests};
use wfhost_app::session_files::{Recorded, SessionSink};
use wfhost_app::workspace::{Workspace, WorkspaceLock};

/// How a run's progress is printed.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    pub verbose: bool,
    pub json: bool,
    /// Only where the run came to rest: no line per block, no status line.
    pub quiet: bool,
}

impl Output {
    /// Whether a line per event is printed.
    fn events(self) -> bool {
        !self.json && !self.quiet
    }

    /// Whether the live status line is drawn: only for a person at a
    /// terminal (standard output and standard error both terminals).
    fn live(self) -> bool {
        use std::io::IsTerminal;
        self.events() && std::io::stdout().is_terminal() && std::io::stderr().is_terminal()
    }
}

/// The engine's sink: the store, plus a line per event for the person
/// watching, and the live status line on a terminal.
pub struct PrintingSink<'s> {
    pub writer: BranchWriter<'s>,
    pub output: Output,
    screen: Screen,
    live: Option<Live>,
    /// With `-v`: the running block's command output as it is written.
    output_lines: Option<crate::live_output::LiveOutput>,
}

impl<'s> PrintingSink<'s> {
    pub fn new(writer: BranchWriter<'s>, output: Output, run: &RunRecord) -> Self {
        let live = output.live().then(Live::start);
        let output_lines = (output.verbose && output.events()).then(|| {
            let print: crate::live_output::Print = match &live {
                Some(live) => live.printer(),
                None => std::sync::Arc::new(|lines: &[String]| {
                    for line in lines {
                        println!("{line}");
                    }
                }),
            };
            crate::live_output::LiveOutput::new(
                PathBuf::from(&run.workspace),
                run.id.clone(),
                print,
            )
        });
        PrintingSink {
            writer,
            output,
            screen: Screen::new(Style::stdout(), output.verbose),
            live,
            output_lines,
        }
    }

    /// Clear the status line for good (the run is at rest).
    fn stop_live(&mut self) {
        self.live = None;
    }
}

impl PrintingSink<'_> {
    fn print(&mut self, events: &[Event]) {
        for event in events {
            let mut lines = match &mut self.output_lines {
                Some(follow) => follow.observe(event),
                None => Vec::new(),
            };
            lines.extend(self.screen.lines(event));
            if let Some(live) = &self.live {
                live.observe(event);
                live.print(&lines);
            } else if self.output.events() {
                for line in lines {
                    println!("{line}");
                }
            }
        }
    }
}

impl Recorded for PrintingSink<'_> {
    fn recorded_at(&self) -> Vec<i64> {
        self.writer.recorded_at()
    }
}

impl EventSink for PrintingSink<'_> {
    fn append(&mut self, events: &[Event]) -> Result<(), SinkError> {
        self.writer.append(events)?;
        self.print(events);
        Ok(())
    }

    fn append_with_job(&mut self, events: &[Event], job: &QueuedJob) -> Result<(), SinkError> {
        self.writer.append_with_job(events, job)?;
        self.print(events);
        Ok(())
    }

    fn new_gate_id(&mut self) -> Result<String, SinkError> {
        self.writer.new_gate_id()
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// The pinned workflow of a run, ready to execute, with its plugins.
pub struct Prepared {
    pub loaded: LoadedWorkflow,
    pub plugins: PluginSet,
    pub workspace: Workspace,
    /// The run's hold on its workspace while it executes.
    pub workspace_lock: Option<WorkspaceLock>,
}

/// Load the run's pinned definition (never the file on disk, which may
/// have changed) and its plugins, checking they are the ones the run
/// started with.
pub fn prepare(
    store: &Store,
    run: &RunRecord,
    state: &RunState,
    cache: &RuntimeChoice,
    output: Output,
) -> Result<Prepared, AppError> {
    let json = store
        .definition(&run.workflow_hash)
        .map_err(|e| AppError::bad_input(e).at(run.id.to_string()))?;
    let loaded = pinned_workflow(&run.id, &json, &run.workflow_hash, Path::new(&run.manifest))?;
    let workspace =
        Workspace::open(Path::new(&run.workspace), store.home(), cache).map_err(|e| AppError {
            message: format!("run {}: {}", run.id, e.message),
            ..e
        })?;
    let executor = match &cache.executor {
        Some(executor) => executor.clone(),
        None if state.default_executor.is_empty() => wfhost_exec::Executor::Local,
        None => state.default_executor.parse().map_err(|e| {
            AppError::bad_input(format!(
                "run {}: its recorded executor `{}`: {e}",
                run.id, state.default_executor
            ))
        })?,
    };
    let runtime = start_runtime(cache, executor, Some(store.home()))?;
    let plugins = load_plugins(runtime, &loaded, workspace.path(), Some(store.home()))?;
    check_pinned_plugins(&run.id, &state.plugins, &plugin_digests(&plugins))?;
    print_loads(&plugins, output);
    Ok(Prepared {
        loaded,
        plugins,
        workspace,
        workspace_lock: None,
    })
}

pub fn print_loads(plugins: &PluginSet, output: Output) {
    if !output.verbose {
        return;
    }
    for load in plugins.loads() {
        let how = match load.outcome {
            CacheOutcome::Hit => "compiled cache hit",
            CacheOutcome::Compiled => "compiled",
            CacheOutcome::Replaced => {
                "compiled: its cache entry failed the integrity check and was replaced"
            }
        };
        println!(
            "plugin {} ({}, {}): {how}, sha256 {}",
            load.name,
            load.world.name(),
            load.origin,
            &load.digest[..16]
        );
    }
}

/// How the engine is to be entered.
pub enum Entry {
    /// After a crash: record the resumption, re-run what was in flight.
    Resume(RunState),
    /// After a fork or a gate's answer, already recorded.
    Continue(RunState),
}

/// Drive the engine and report; returns the exit code.
pub fn execute(
    prepared: &Prepared,
    run: &RunRecord,
    mut sink: SessionSink<PrintingSink<'_>>,
    entry: Entry,
) -> u8 {
    let tokio = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            report_error(format!("cannot start the async runtime: {e}"));
            return exit::BAD_INPUT;
        }
    };
    let wf = &prepared.loaded.workflow;
    let plugins = &prepared.plugins;
    if let Some(folder) = sink.session_folder() {
        plugins.set_session_folder(&folder);
    }
    let branch = sink.writer.branch();
    let output = sink.output;
    // Lane workspaces a crash left behind, except those of a fan-out the
    // run is still in (its finished lanes are not run again).
    let state = match &entry {
        Entry::Resume(state) | Entry::Continue(state) => state,
    };
    let active = state.fan_out.as_ref().map(|f| f.step);
    wfhost_runtime::lanes::remove_stale(plugins.workspace(), &run.id, active);
    // Staging copies and agent snapshots a killed wfhost left behind.
    wfhost_exec::scratch::remove_stale(None);
    let jobs = match run_jobs(plugins, run, branch, state) {
        Ok(jobs) => jobs,
        Err(e) => {
            report_error(format!("run {}: {e}", run.id));
            return exit::BAD_INPUT;
        }
    };
    let ended = tokio.block_on(async {
        // Agents run here: their telemetry is served and recorded.
        if jobs.is_none()
            && plugins.runs_agents()
            && let Err(e) = wfhost_app::telemetry::serve(plugins).await
        {
            eprintln!("warning: {e}; agents of run {} get TELEMETRY_ENABLED=0", run.id);
        }
        let engine = async {
            match &jobs {
                Some(jobs) => enter(wf, jobs, plugins, entry, &mut sink).await,
                None => enter(wf, plugins, plugins, entry, &mut sink).await,
            }
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
            () = plugins.shutdown() => {}
            _ = interrupted() => {
                eprintln!("interrupted again: exiting now (containers of run {} may be left; `wfhost gc` removes them)", run.id);
                std::process::exit(i32::from(exit::INTERRUPTED));
            }
        }
        ended
    });
    sink.stop_live();
    // A guest call abandoned at its deadline may have left a thread of the
    // blocking pool waiting in a file read (a FIFO): do not wait for it.
    tokio.shutdown_background();
    let result = match ended {
        Ended::Rested(result) => *result,
        Ended::Interrupted(signal) => {
            report_error(format!(
                "run {} interrupted ({signal}): the running block's processes, containers and jobs were stopped; `wfhost resume {}` continues it",
                run.id, run.id
            ));
            return exit::INTERRUPTED;
        }
    };
    match result {
        Ok(report) => report_run(run, branch, &report, output, sink.screen.cause()),
        Err(e) => {
            report_error(format!(
                "run {} stopped: {e}\nits log is intact up to the last recorded event; `wfhost resume {}` continues it",
                run.id, run.id
            ));
            exit::RUN_FAILED
        }
    }
}

/// For a run executed for `wfhost serve`: its blocks as jobs for agents.
fn run_jobs<'p>(
    plugins: &'p PluginSet,
    run: &RunRecord,
    branch: u32,
    state: &RunState,
) -> Result<Option<crate::jobs::queue::RunJobs<'p>>, String> {
    if std::env::var_os(wfhost_server::RUN_BLOCKS_AS_JOBS).is_none_or(|v| v != "1") {
        return Ok(None);
    }
    let home = wfhost_store::resolve_home(None).map_err(|e| e.to_string())?;
    crate::jobs::queue::RunJobs::new(
        plugins,
        crate::jobs::queue::RunInfo {
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
async fn enter<W: engine::WorkerHost + Sync>(
    wf: &wfhost_core::manifest::Workflow,
    workers: &W,
    actions: &PluginSet,
    entry: Entry,
    sink: &mut SessionSink<PrintingSink<'_>>,
) -> Result<RunReport, wfhost_core::run::engine::EngineError> {
    match entry {
        Entry::Resume(state) => engine::resume(wf, workers, actions, state, sink).await,
        Entry::Continue(state) => engine::drive(wf, workers, actions, state, sink).await,
    }
}

/// How the engine's drive ended.
enum Ended {
    Rested(Box<Result<RunReport, wfhost_core::run::engine::EngineError>>),
    /// A signal asked the run to stop: its name.
    Interrupted(&'static str),
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

/// Print where the run came to rest; returns the exit code. `cause`: the
/// error of the last block that had one, named when the run failed.
pub fn report_run(
    run: &RunRecord,
    branch: u32,
    report: &RunReport,
    output: Output,
    cause: Option<&str>,
) -> u8 {
    let code = match &report.status {
        RunStatus::Succeeded => exit::SUCCESS,
        RunStatus::Failed { .. } => exit::RUN_FAILED,
        RunStatus::WaitingAtGate { .. } | RunStatus::AwaitingExternal { .. } => {
            exit::WAITING_AT_GATE
        }
    };
    if output.json {
        let (status, detail) = match &report.status {
            RunStatus::Succeeded => ("succeeded", serde_json::Value::Null),
            RunStatus::Failed { reason } => ("failed", serde_json::json!({ "reason": reason })),
            RunStatus::WaitingAtGate {
                gate_id,
                node,
                block,
                prompt,
            } => (
                "waiting",
                serde_json::json!({ "gate": { "id": gate_id, "node": node, "block": block, "prompt": prompt } }),
            ),
            RunStatus::AwaitingExternal {
                step,
                node,
                block,
                prompt,
            } => (
                "waiting",
                serde_json::json!({ "external": { "step": step, "node": node, "block": block, "prompt": prompt } }),
            ),
        };
        let mut out = serde_json::json!({
            "run_id": run.id,
            "branch": branch,
            "workflow": run.workflow_id,
            "workflow_hash": run.workflow_hash,
            "manifest": run.manifest,
            "execution_id": run.id,
            "status": status,
            "steps": report.steps,
            "duration_ms": report.duration.as_secs_f64() * 1000.0,
            "statistics": report.statistics,
            "blocks": report.blocks(),
            "payload": report.payload(),
        });
        if let (Some(out), serde_json::Value::Object(extra)) = (out.as_object_mut(), detail) {
            out.extend(extra);
        }
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return code;
    }
    let style = Style::stdout();
    let stats = report.statistics;
    let summary = format!(
        "{}, {} written, {}{}, {}",
        count(report.steps, "step"),
        count(stats.lines_written, "line"),
        count(stats.tokens_used, "token"),
        usage_note(&stats.usage),
        ms(report.duration)
    );
    match &report.status {
        RunStatus::Succeeded => println!("run {} {}: {summary}", run.id, style.good("succeeded")),
        RunStatus::Failed { reason } => {
            println!("run {} {}: {summary}", run.id, style.bad("failed"));
            report_error(escape(reason));
            if let Some(cause) = cause.filter(|c| !reason.contains(c)) {
                report_error(format!("caused by: {}", escape(cause)));
            }
        }
        RunStatus::WaitingAtGate {
            gate_id,
            node,
            block,
            prompt,
        } => {
            println!(
                "run {} waiting at gate {gate_id} after {node}.{block}: {} ({summary})",
                run.id,
                escape(prompt)
            );
            let fan_in = report
                .state
                .fan_out
                .as_ref()
                .is_some_and(|f| f.gate.as_deref() == Some(gate_id.as_str()));
            if fan_in {
                println!(
                    "answer with: wfhost gate {} {gate_id} use-lane:<lane>   (or use-lane:<file>=<lane>,...; or resolved after fixing the files yourself)",
                    run.id
                );
            } else if gate_id == "UD-REVIEW-STRATEGY" {
                println!(
                    "answer with: wfhost gate {} {gate_id} per-batch   (or single-final)",
                    run.id
                );
            } else {
                println!(
                    "answer with: wfhost gate {} {gate_id} approved   (or changes-requested:<what to change>)",
                    run.id
                );
            }
        }
        RunStatus::AwaitingExternal { node, block, .. } => {
            println!(
                "run {} waiting at {node}.{block}, an external block: an MCP client performs it ({summary})",
                run.id
            );
            println!(
                "continue with an MCP client of `wfhost mcp` (same --home): its resume_session tool with runId {} returns the tokens",
                run.id
            );
        }
    }
    print_block_statistics(&report.state);
    code
}

/// ` (in 1200 · out 80 · cache 700 read · $0.0123)`: what agent CLIs
/// reported of the tokens, or nothing when they reported none.
pub fn usage_note(usage: &wfhost_core::run::payload::ModelUsage) -> String {
    if usage.is_zero() {
        String::new()
    } else {
        format!(" ({})", usage.describe())
    }
}

/// One line per block, in the order the run first reached them.
pub fn print_block_statistics(state: &RunState) {
    for (name, b) in state.blocks_in_run_order() {
        println!(
            "  {name}: {}, {}{}, {}, {}{}",
            count(b.attempts, "run"),
            count(b.tokens_used, "token"),
            usage_note(&b.usage),
            count(b.lines_written, "line"),
            ms(b.duration),
            if b.failures > 0 {
                format!(", {} failed", b.failures)
            } else {
                String::new()
            }
        );
    }
}
