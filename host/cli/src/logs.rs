//! `wfhost logs`: what a run's blocks wrote, block by block.
//!
//! For every block execution on the run's branch (and every lane of a
//! parallel block): the block's line as the run printed it, its error or
//! validation error, the log lines its worker wrote (recorded in the run's
//! events), and the commands of its result bundles — the exec and agent
//! bundles under `.output/exec/RUN/` and `.output/agent/RUN/` in the
//! workspace, named `step-STEP-NODE.BLOCK` — with their stdout and stderr.
//!
//! The bundles are in the workspace, which workers write: they are read as
//! untrusted. Symbolic links are never followed, each file is read up to a
//! cap, and every line is escaped.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use wfhost_core::manifest::pinning::PinnedDefinition;
use wfhost_core::run::event::Event;
use wfhost_core::text::escape;
use wfhost_store::{RunRecord, Store, StoredEvent};

use crate::style::Style;
use crate::{Global, exit, report_error, store_error};

use wfhost_core::workspace::bundles::{FILE_CAP, LiveLine, LiveTail, bundle_dirs, read_file};

#[derive(Args)]
#[command(after_help = "Examples:\n  \
    wfhost logs run-20261123-005752-00e59a\n  \
    wfhost logs 00e59a main.build\n  \
    wfhost logs 00e59a build --follow")]
pub struct LogsArgs {
    /// The run (its id, or a part of it that names one run).
    run: String,
    /// Only this block: `node.block`, or `block` for a block of that name in
    /// any node.
    block: Option<String>,
    /// Keep printing blocks as a live run completes them, until it stops;
    /// a running block's command output is shown as it is written.
    #[arg(long, short)]
    follow: bool,
    /// The branch (default: the one written last).
    #[arg(long)]
    branch: Option<u32>,
}

pub fn logs(args: LogsArgs, global: &Global) -> u8 {
    let store = match global.existing_store() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let run = match store.resolve_run(&args.run) {
        Ok(r) => r,
        Err(e) => return store_error(e),
    };
    if let Some(block) = &args.block
        && let Err(e) = check_block(&store, &run, block)
    {
        report_error(e);
        return exit::BAD_INPUT;
    }
    let branch = match args
        .branch
        .map_or_else(|| store.current_branch(&run.id), Ok)
    {
        Ok(b) => b,
        Err(e) => return store_error(e),
    };
    let mut printer = Printer {
        workspace: PathBuf::from(&run.workspace),
        run_id: run.id.clone(),
        filter: args.block,
        style: Style::stdout(),
        current: None,
        open: None,
        lanes: Vec::new(),
        live: None,
    };
    match follow(&store, &run, branch, args.follow, &mut printer) {
        Ok(()) => exit::SUCCESS,
        Err(e) => store_error(e),
    }
}

/// Print the branch's blocks so far, then, with `follow`, the ones a live
/// run completes until it stops.
fn follow(
    store: &Store,
    run: &RunRecord,
    branch: u32,
    follow: bool,
    printer: &mut Printer,
) -> Result<(), wfhost_store::StoreError> {
    // Whether the run was executing *before* reading, so that the last
    // events written before it stopped are still printed.
    let mut live = follow && store.is_running(&run.id);
    let chain = store.chain(&run.id, branch)?;
    let mut last = chain.iter().map(|e| e.seq).max().unwrap_or(0);
    chain.iter().for_each(|e| printer.event(&e.event));
    while live {
        std::thread::sleep(Duration::from_millis(200));
        live = store.is_running(&run.id);
        let batch: Vec<StoredEvent> = store.events_after(&run.id, last)?;
        for e in &batch {
            last = e.seq;
            if e.branch == branch {
                printer.event(&e.event);
            }
        }
        if live {
            printer.running();
        }
    }
    if !store.is_running(&run.id) {
        printer.interrupted_at_end(&run.id);
    }
    Ok(())
}

/// `block` must name a block of the run's pinned definition.
fn check_block(store: &Store, run: &RunRecord, block: &str) -> Result<(), String> {
    let json = store
        .definition(&run.workflow_hash)
        .map_err(|e| e.to_string())?;
    let workflow = PinnedDefinition::parse(&json, &run.workflow_hash)
        .map_err(|e| format!("run {}: {e}", run.id))?;
    let names: Vec<String> = workflow
        .nodes
        .iter()
        .flat_map(|(n, node)| node.blocks.keys().map(move |b| format!("{n}.{b}")))
        .collect();
    if names.iter().any(|n| matches(n, block)) {
        return Ok(());
    }
    Err(format!(
        "run {} has no block `{}` (its blocks: {})",
        run.id,
        escape(block),
        names.join(", ")
    ))
}

/// Whether `node.block` is what `filter` names.
fn matches(name: &str, filter: &str) -> bool {
    name == filter || name.split_once('.').is_some_and(|(_, b)| b == filter)
}

struct Printer {
    workspace: PathBuf,
    run_id: wfhost_store::RunId,
    filter: Option<String>,
    style: Style,
    /// Step and `node.block` of the block started last.
    current: Option<(u64, String)>,
    /// The same while that block has not completed.
    open: Option<(u64, String)>,
    /// The lanes of the running parallel block, in step order.
    lanes: Vec<String>,
    /// The output of the running block's commands shown so far (follow).
    live: Option<((u64, String), LiveTail)>,
}

impl Printer {
    fn wanted(&self, name: &str) -> bool {
        self.filter.as_deref().is_none_or(|f| matches(name, f))
    }

    fn event(&mut self, event: &Event) {
        match event {
            Event::BlockStarted {
                step, node, block, ..
            } => {
                self.current = Some((*step, format!("{node}.{block}")));
                self.open = self.current.clone();
                self.lanes.clear();
            }
            Event::LanesStarted { lanes, .. } => self.lanes = lanes.clone(),
            Event::BlockCompleted {
                step,
                node,
                block,
                signal,
                payload,
                failure,
                log,
                duration_us,
                written,
                ..
            } => {
                let name = format!("{node}.{block}");
                self.open = None;
                if !self.wanted(&name) {
                    return;
                }
                let shown = self.finish_live(*step, &name);
                self.heading(&format!("[{step}] {name}"), signal, *duration_us);
                self.problem("error", failure.as_deref());
                let validation = payload.push.iter().find(|s| s.kind == "VALIDATION_ERROR");
                self.problem("validation error", validation.map(|s| s.content.as_str()));
                print_outputs(&payload.push);
                if !written.is_empty() {
                    let written: Vec<String> = written.iter().map(|p| escape(p)).collect();
                    println!("  wrote: {}", written.join(", "));
                }
                print_log(log);
                self.bundles(*step, &name, shown);
            }
            Event::LaneCompleted {
                lane,
                signal,
                failure,
                log,
                duration_us,
                ..
            } => {
                let Some((step, name)) = self.current.clone() else {
                    return;
                };
                if !self.wanted(&name) {
                    return;
                }
                self.heading(&format!("[{step}.{lane}] {name}"), signal, *duration_us);
                self.problem("error", failure.as_deref());
                print_log(log);
                let index = self.lanes.iter().position(|l| l == lane).unwrap_or(0);
                self.bundles(step + index as u64, &name, false);
            }
            _ => {}
        }
    }

    /// The log ends with a block that started and never completed, and
    /// the run is not executing: it was interrupted there. What its
    /// commands wrote before they stopped is shown with it.
    fn interrupted_at_end(&self, run_id: &str) {
        let Some((step, name)) = &self.open else {
            return;
        };
        if !self.wanted(name) {
            return;
        }
        println!(
            "[{step}] {} -> {} (the run stopped while it ran; `wfhost resume {run_id}` runs it again)",
            escape(name),
            self.style.bad("interrupted")
        );
        self.bundles(*step, name, false);
    }

    fn heading(&self, what: &str, signal: &str, duration_us: u64) {
        println!(
            "{} -> {} ({:.1} ms)",
            escape(what),
            self.style.signal(signal),
            duration_us as f64 / 1000.0
        );
    }

    fn problem(&self, label: &str, text: Option<&str>) {
        if let Some(text) = text {
            println!("  {}", self.style.bad(&format!("{label}: {text}")));
        }
    }

    /// Print what the running block's commands wrote since the last call
    /// (`--follow`): their capture files grow while they run.
    fn running(&mut self) {
        let Some((step, name)) = self.current.clone() else {
            return;
        };
        if !self.wanted(&name) || !self.lanes.is_empty() {
            return;
        }
        let key = (step, name.clone());
        if self.live.as_ref().is_none_or(|(k, _)| *k != key) {
            self.live = Some((key, LiveTail::default()));
        }
        let (_, tail) = self.live.as_mut().expect("just set");
        let first = !tail.seen();
        let lines = tail.poll(&self.workspace, &self.run_id, step, &name, false);
        if first && !lines.is_empty() {
            println!("  [{step}] {name} running …");
        }
        print_live(&lines);
    }

    /// The rest of a followed block's output, when it ends; whether any of
    /// it was shown live (its bundle then lists its commands only).
    fn finish_live(&mut self, step: u64, name: &str) -> bool {
        match self.live.take() {
            Some(((s, n), mut tail)) if s == step && n == name => {
                let lines = tail.poll(&self.workspace, &self.run_id, step, name, true);
                print_live(&lines);
                tail.seen()
            }
            _ => false,
        }
    }

    /// Print the bundles of the execution at `step` of `name` (without
    /// their output when it was `shown` live).
    fn bundles(&self, step: u64, name: &str, shown: bool) {
        for dir in bundle_dirs(&self.workspace, &self.run_id, step, name) {
            let rel = dir.strip_prefix(&self.workspace).unwrap_or(&dir);
            println!("  bundle {}", escape(&rel.display().to_string()));
            if let Err(e) = print_bundle(&dir, shown) {
                println!("    (cannot read it: {})", escape(&e));
            }
        }
    }
}

/// The most lines of one output segment `logs` prints.
const MAX_OUTPUT_LINES: usize = 20;

/// What a block added to the payload: `output (KIND): …`, each segment
/// at most [`MAX_OUTPUT_LINES`] lines (validation errors are shown as
/// problems).
fn print_outputs(pushed: &[wfhost_core::run::payload::ContextSegment]) {
    for segment in pushed.iter().filter(|s| s.kind != "VALIDATION_ERROR") {
        let lines: Vec<&str> = segment.content.lines().collect();
        let first = lines.first().copied().unwrap_or_default();
        println!(
            "  output ({}): {}",
            escape(&segment.kind),
            escape_keeping_tabs(first)
        );
        for line in lines.iter().skip(1).take(MAX_OUTPUT_LINES - 1) {
            println!("    {}", escape_keeping_tabs(line));
        }
        if lines.len() > MAX_OUTPUT_LINES {
            println!("    … {} more lines", lines.len() - MAX_OUTPUT_LINES);
        }
    }
}

fn print_log(log: &[String]) {
    for line in log {
        println!("  log: {}", escape(line));
    }
}

fn print_live(lines: &[LiveLine]) {
    for line in lines {
        if line.progress {
            println!("    » {}", escape(&line.text));
            continue;
        }
        let sep = if line.text.is_empty() { "" } else { " " };
        println!(
            "    {}|{sep}{}",
            line.stream,
            escape_keeping_tabs(&line.text)
        );
    }
}

/// Print a bundle's commands and their captured output (unless it was
/// `shown` live already).
fn print_bundle(dir: &Path, shown: bool) -> Result<(), String> {
    // The manifest is written when the execution ends: without it, the
    // execution was interrupted (a crash, a cancel, a lost lease).
    if !dir.join("manifest.json").exists() {
        return print_interrupted_bundle(dir, shown);
    }
    let (text, _) = read_file(dir, "manifest.json")?;
    let manifest: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("manifest.json: {e}"))?;
    let commands = manifest["commands"].as_array().cloned().unwrap_or_default();
    for command in &commands {
        println!("  $ {}", escape(&command_line(command)));
        if let Some(error) = command["error"].as_str() {
            println!("    error: {}", escape(error));
        }
        if shown {
            continue;
        }
        for stream in ["stdout", "stderr"] {
            let Some(name) = command[stream].as_str() else {
                continue;
            };
            match read_file(dir, name) {
                Ok((text, more)) => print_stream(stream, &text, more),
                Err(e) => println!("    {stream}: (cannot read it: {})", escape(&e)),
            }
        }
    }
    Ok(())
}

/// An interrupted execution's bundle: what its commands wrote before
/// they stopped, command by command.
fn print_interrupted_bundle(dir: &Path, shown: bool) -> Result<(), String> {
    println!(
        "    (interrupted: its commands did not finish; what they wrote before they stopped follows)"
    );
    if shown {
        return Ok(());
    }
    let entries = std::fs::read_dir(dir).map_err(|e| e.to_string())?;
    let mut streams: Vec<(u32, String, String)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let (command, stream) = name.strip_prefix("cmd-")?.split_once('.')?;
            let n: u32 = command.parse().ok()?;
            matches!(stream, "stdout" | "stderr").then(|| (n, stream.to_string(), name.clone()))
        })
        .collect();
    streams.sort();
    for (n, stream, name) in streams {
        match read_file(dir, &name) {
            Ok((text, more)) => {
                println!("  command {n}:");
                print_stream(&stream, &text, more);
            }
            Err(e) => println!("    {stream}: (cannot read it: {})", escape(&e)),
        }
    }
    Ok(())
}

/// `argv…   (cwd DIR, exit N)`.
fn command_line(command: &serde_json::Value) -> String {
    let argv: Vec<String> = command["argv"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).map(quoted).collect())
        .unwrap_or_default();
    let mut how = Vec::new();
    if let Some(cwd) = command["cwd"].as_str() {
        how.push(format!("cwd {cwd}"));
    }
    if command["timed_out"].as_bool() == Some(true) {
        how.push("timed out".to_string());
    }
    match (command["exit_code"].as_i64(), command["signal"].as_i64()) {
        (Some(code), _) => how.push(format!("exit {code}")),
        (None, Some(signal)) => how.push(format!("killed by signal {signal}")),
        (None, None) => {}
    }
    if how.is_empty() {
        return argv.join(" ");
    }
    format!("{}   ({})", argv.join(" "), how.join(", "))
}

/// `arg` as a shell would need it: as it is when plain, else in single
/// quotes.
fn quoted(arg: &str) -> String {
    wfhost_core::text::shell_word(arg)
}

fn print_stream(stream: &str, text: &str, more: bool) {
    for line in text.lines() {
        let sep = if line.is_empty() { "" } else { " " };
        println!("    {stream}|{sep}{}", escape_keeping_tabs(line));
    }
    if more {
        println!("    {stream}| … (cut at {} KiB)", FILE_CAP / 1024);
    }
}

/// A captured line, escaped, its tabs left as tabs.
pub(crate) fn escape_keeping_tabs(line: &str) -> String {
    line.split('\t').map(escape).collect::<Vec<_>>().join("\t")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_filters_match_full_or_bare_names() {
        assert!(matches("main.build", "main.build"));
        assert!(matches("main.build", "build"));
        assert!(!matches("main.build", "main"));
        assert!(!matches("main.build", "uild"));
    }

    #[test]
    fn commands_are_shown_as_a_shell_would_take_them() {
        let c = serde_json::json!({"argv": ["sh", "-c", "echo 'x' >&2", ""], "exit_code": 1});
        assert_eq!(
            command_line(&c),
            "sh -c 'echo '\\''x'\\'' >&2' ''   (exit 1)"
        );
    }
}
