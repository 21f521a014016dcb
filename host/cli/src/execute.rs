//! How a run that goes on is shown: the sink that prints a line per event
//! (and the live status line) beside the store, and the report of where
//! the run came to rest. Preparing and driving the run is the application
//! layer's (`wfhost_app::run`); this module prints around it.

use std::path::PathBuf;
use std::time::Duration;

use wfhost_core::run::engine::{RunReport, RunStatus};
use wfhost_core::run::event::{Event, EventSink, QueuedJob, SinkError};
use wfhost_core::run::state::RunState;
use wfhost_core::text::{count, escape};
use wfhost_runtime::PluginSet;
use wfhost_runtime::cache::CacheOutcome;
use wfhost_store::{BranchWriter, RunRecord, Store};

use crate::progress::Live;
use crate::screen::Screen;
use crate::style::Style;
use crate::{RuntimeChoice, exit, fail, report_error};
use wfhost_app::AppError;
pub use wfhost_app::run::{Entry, Prepared};
use wfhost_app::session_files::{Recorded, SessionSink};

/// How a run's progress is printed.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    pub verbose: bool,
    pub json: bool,
    /// Only where the run came to rest: no line per block, no status line,
    /// no line naming the run first, no statistics per block.
    pub quiet: bool,
    /// A run process of `wfhost serve`: quiet, but its log still names the
    /// run first and ends with the statistics per block.
    pub served: bool,
}

impl Output {
    /// Whether the line naming the run (`run … of …`, `… continues`) and
    /// the statistics per block are printed.
    pub fn header(self) -> bool {
        !self.json && (!self.quiet || self.served)
    }

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

/// [`wfhost_app::run::prepare`] with the status line's Slurm watcher; the
/// plugins loaded are printed with `-v`.
pub fn prepare(
    store: &Store,
    run: &RunRecord,
    state: &RunState,
    choice: &RuntimeChoice,
    output: Output,
) -> Result<Prepared, AppError> {
    let prepared = wfhost_app::run::prepare(
        store,
        run,
        state,
        choice,
        Some(crate::progress::slurm_watcher()),
    )?;
    print_loads(&prepared.plugins, output);
    Ok(prepared)
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

/// Drive the engine ([`wfhost_app::run::drive`]) and report where the
/// run came to rest; returns the exit code.
pub fn execute(
    prepared: &Prepared,
    run: &RunRecord,
    mut sink: SessionSink<PrintingSink<'_>>,
    entry: Entry,
) -> u8 {
    let branch = sink.writer.branch();
    let output = sink.output;
    let result = wfhost_app::run::drive(prepared, run, branch, &mut sink, entry);
    sink.stop_live();
    match result {
        Ok(report) => report_run(run, branch, &report, output, sink.screen.cause()),
        Err(e) => fail(e),
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
        RunStatus::Cancelled { .. } => exit::CANCELLED,
        RunStatus::WaitingAtGate { .. }
        | RunStatus::AwaitingExternal { .. }
        | RunStatus::Sleeping { .. } => exit::WAITING_AT_GATE,
    };
    if output.json {
        print_report_json(run, branch, report);
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
        RunStatus::Cancelled { by, reason } => {
            let text = wfhost_core::run::event::Outcome::cancelled_text(by, reason.as_deref());
            println!("run {} {}: {summary}", run.id, style.bad(&escape(&text)));
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
            println!(
                "answer with: wfhost gate {} {gate_id} {}",
                run.id,
                report.state.answer_forms(gate_id)
            );
        }
        RunStatus::Sleeping {
            node,
            block,
            due_at_ms,
            retry,
            ..
        } => {
            let due = wfhost_core::time::iso_utc(*due_at_ms);
            let what = match retry {
                Some(n) => format!("until retry {n} of {node}.{block} at {due}"),
                None => format!("at {node}.{block} until {due}"),
            };
            println!("run {} sleeping {what} ({summary})", run.id);
            println!(
                "a running `wfhost serve` on this home wakes it then; or `wfhost resume {}`",
                run.id
            );
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
    if output.header() {
        print_block_statistics(&report.state);
        crate::result::print(&report.state, run.id.as_str());
    }
    code
}

/// The run's report as `RunReport` JSON (`wfhost schema RunReport`).
fn print_report_json(run: &RunRecord, branch: u32, report: &RunReport) {
    let (status, detail) = match &report.status {
        RunStatus::Succeeded => ("succeeded", serde_json::Value::Null),
        RunStatus::Failed { reason } => ("failed", serde_json::json!({ "reason": reason })),
        RunStatus::Cancelled { by, reason } => (
            "cancelled",
            serde_json::json!({ "cancelled_by": by, "reason": reason }),
        ),
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
        RunStatus::Sleeping {
            step,
            node,
            block,
            due_at_ms,
            retry,
        } => (
            "sleeping",
            serde_json::json!({ "timer": { "step": step, "node": node, "block": block, "due_at_ms": due_at_ms, "retry": retry } }),
        ),
    };
    let mut out = serde_json::json!({
        "run_id": run.id,
        "branch": branch,
        "workflow_id": run.workflow_id,
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
        "host_costs": wfhost_app::costs::now(),
    });
    if let (Some(out), serde_json::Value::Object(extra)) =
        (out.as_object_mut(), crate::result::json(&report.state))
    {
        out.extend(extra);
    }
    if let (Some(out), serde_json::Value::Object(extra)) = (out.as_object_mut(), detail) {
        out.extend(extra);
    }
    println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
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
            "  {name}: {}, {}{}, {}, {}{}{}",
            count(b.attempts, "run"),
            count(b.tokens_used, "token"),
            usage_note(&b.usage),
            count(b.lines_written, "line"),
            ms(b.duration),
            if b.queued.is_zero() {
                String::new()
            } else {
                format!(" (+{} queued)", ms(b.queued))
            },
            if b.failures > 0 {
                format!(", {} failed", b.failures)
            } else {
                String::new()
            }
        );
    }
}
