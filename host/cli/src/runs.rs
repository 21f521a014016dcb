//! Reading the store: `runs`, `show`, `events` and `gates`. Every view is
//! a projection of the event log; nothing here writes.

use std::path::Path;

use clap::Args;
use serde::Serialize;
use wfhost_core::formats;
use wfhost_core::manifest::pinning::PinnedDefinition;
use wfhost_store::time::format_utc;
use wfhost_store::{Store, StoredEvent};

use wfhost_core::run::event::action_line;
use wfhost_core::run::transitions::FAIL_DEFAULT;
use wfhost_core::text::{count, escape};

use crate::style::Style;
use crate::{Global, builtin_names, exit, store_error};

#[derive(Args)]
pub struct RunsArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct ShowArgs {
    /// The run: its id, or any part of it that is unique.
    run: String,
    /// The branch to show (default: the one written last).
    #[arg(long)]
    branch: Option<u32>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct EventsArgs {
    /// The run: its id, or any part of it that is unique.
    run: String,
    /// Keep printing events as a live run writes them, until it stops.
    #[arg(long, short)]
    follow: bool,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct GatesArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// No store yet means no runs, not an error, for listings.
fn store_for_listing(global: &Global) -> Result<Option<Store>, u8> {
    let home = wfhost_store::resolve_home(global.home.as_deref()).map_err(store_error)?;
    match Store::open_existing(&home) {
        Ok(s) => Ok(Some(s)),
        Err(wfhost_store::StoreError::NoStore { .. }) => Ok(None),
        Err(e) => Err(store_error(e)),
    }
}

#[derive(Serialize)]
struct RunLine {
    id: String,
    workflow: String,
    status: String,
    started: String,
    started_ms: i64,
    branches: usize,
}

pub fn runs(args: RunsArgs, global: &Global) -> u8 {
    let store = match store_for_listing(global) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let mut lines = Vec::new();
    if let Some(store) = &store {
        let runs = match store.runs() {
            Ok(r) => r,
            Err(e) => return store_error(e),
        };
        for run in runs {
            let (branches, current) = match (store.branches(&run.id), store.current_branch(&run.id))
            {
                (Ok(b), Ok(c)) => (b, c),
                (Err(e), _) | (_, Err(e)) => return store_error(e),
            };
            let status = branches
                .iter()
                .find(|b| b.branch == current)
                .map(|b| b.status.clone())
                .unwrap_or_default();
            lines.push(RunLine {
                id: run.id.to_string(),
                workflow: run.workflow_id,
                status,
                started: format_utc(run.created_at),
                started_ms: run.created_at,
                branches: branches.len(),
            });
        }
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&lines).unwrap_or_default()
        );
        return exit::SUCCESS;
    }
    if lines.is_empty() {
        println!("no runs yet");
        return exit::SUCCESS;
    }
    let width = lines
        .iter()
        .map(|l| l.workflow.len())
        .max()
        .unwrap_or(8)
        .max(8);
    println!(
        "{:<26}  {:<width$}  {:<11}  {:<20}  branches",
        "RUN", "WORKFLOW", "STATUS", "STARTED"
    );
    for l in &lines {
        println!(
            "{:<26}  {:<width$}  {:<11}  {:<20}  {}",
            l.id, l.workflow, l.status, l.started, l.branches
        );
    }
    exit::SUCCESS
}

/// Whether the manifest on disk still pins to the run's hash: `None` when
/// it cannot be read any more.
fn manifest_changed(manifest_path: &str, pinned: &str) -> Option<bool> {
    let loaded = formats::load(Path::new(manifest_path), &builtin_names()).ok()?;
    Some(PinnedDefinition::of(&loaded).hash != pinned)
}

pub fn show(args: ShowArgs, global: &Global) -> u8 {
    let store = match global.existing_store() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let run = match store.resolve_run(&args.run) {
        Ok(r) => r,
        Err(e) => return store_error(e),
    };
    let branch = match args.branch {
        Some(b) => b,
        None => match store.current_branch(&run.id) {
            Ok(b) => b,
            Err(e) => return store_error(e),
        },
    };
    let (branches, chain) = match (store.branches(&run.id), store.chain(&run.id, branch)) {
        (Ok(b), Ok(c)) => (b, c),
        (Err(e), _) | (_, Err(e)) => return store_error(e),
    };
    let state = match store.state(&run.id, branch) {
        Ok(s) => s,
        Err(e) => return store_error(e),
    };
    let changed = manifest_changed(&run.manifest, &run.workflow_hash);
    let warning = match changed {
        Some(true) => Some(format!(
            "the manifest {} has changed since the run started; the run keeps executing its pinned definition {}",
            run.manifest, run.workflow_hash
        )),
        None => Some(format!(
            "the manifest {} cannot be loaded any more; the run keeps executing its pinned definition",
            run.manifest
        )),
        Some(false) => None,
    };
    let status = branches
        .iter()
        .find(|b| b.branch == branch)
        .map(|b| b.status.clone())
        .unwrap_or_default();
    let steps = wfhost_store::view::steps_of(&chain);
    let gates: Vec<_> = state.gates.values().cloned().collect();
    let failure = match &state.phase {
        wfhost_core::run::state::Phase::Finished(wfhost_core::run::event::Outcome::Failed {
            reason,
        }) => Some(reason.clone()),
        _ => None,
    };
    let start_snapshot = chain.first().and_then(|e| e.snapshot.clone());

    if args.json {
        let out = serde_json::json!({
            "run": run,
            "branch": branch,
            "status": status,
            "failure": failure,
            "inputs": state.inputs,
            "warnings": warning.iter().collect::<Vec<_>>(),
            "start_snapshot": start_snapshot,
            "branches": branches,
            "steps": steps,
            "gates": gates,
            "statistics": state.statistics,
            "blocks": state.blocks,
            "payload": state.payload,
            "events": chain.len(),
        });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return exit::SUCCESS;
    }

    let style = Style::stdout();
    println!("run {}  (workflow {})", run.id, run.workflow_id);
    println!(
        "  definition  {} pinned from {}",
        run.workflow_hash, run.manifest
    );
    if let Some(w) = &warning {
        println!("  warning: {w}");
    }
    println!("  workspace   {}", run.workspace);
    println!("  started     {}", format_utc(run.created_at));
    println!("  status      {status} (branch {branch})");
    if let Some(reason) = &failure {
        println!("  failure     {}", style.bad(reason));
    }
    for (i, (name, value)) in state.inputs.iter().enumerate() {
        let label = if i == 0 { "inputs" } else { "" };
        println!("  {label:<11} {name} = {value}");
    }
    println!();
    println!("branches");
    for b in &branches {
        println!(
            "  {} {:<3} {:<11} {}{}  last written {}",
            if b.branch == branch { "*" } else { " " },
            b.branch,
            b.status,
            count(b.events, "event"),
            b.forked_from
                .as_ref()
                .map(|s| format!(", forked from {s}"))
                .unwrap_or_default(),
            format_utc(b.last_at)
        );
    }
    println!();
    println!(
        "steps (branch {branch}; fork from a snapshot with `wfhost fork {} --at SNAPSHOT`)",
        run.id
    );
    if let Some(s) = &start_snapshot {
        println!("  {:<15} (start)", s);
    }
    for l in &steps {
        print_step(l, style);
    }
    if !gates.is_empty() {
        println!();
        println!("gates");
        for g in &gates {
            println!(
                "  {:<6} {}.{} \"{}\": {}",
                g.gate_id,
                g.node,
                g.block,
                escape(&g.prompt),
                g.decision
                    .as_ref()
                    .map_or("open".to_string(), |d| d.to_string())
            );
        }
    }
    println!();
    println!(
        "statistics: {}, {}{}, {} written",
        count(state.steps, "step"),
        count(state.statistics.tokens_used, "token"),
        crate::execute::usage_note(&state.statistics.usage),
        count(state.statistics.lines_written, "line")
    );
    crate::execute::print_block_statistics(&state);
    exit::SUCCESS
}

/// One line of `show`'s steps.
fn print_step(l: &wfhost_store::view::StepLine, style: Style) {
    let fallback = l
        .fallback_for
        .as_ref()
        .map(|s| format!(" (no transition: {} -> {FAIL_DEFAULT})", escape(s)))
        .unwrap_or_default();
    println!(
        "  {:<15} [{}] {} #{} -> {}{fallback}  {} ({:.1} ms){}{}",
        l.snapshot.as_deref().unwrap_or("-"),
        l.step,
        l.block,
        l.attempt,
        style.signal(&l.signal),
        escape(&match (&l.action, &l.command) {
            (Some(action), Some(command)) => action_line(action, command),
            (Some(action), None) => action.clone(),
            (None, _) => "(no transition)".into(),
        }),
        l.duration_ms,
        l.failure
            .as_ref()
            .map(|f| format!("; {}", style.bad(&format!("failed: {f}"))))
            .unwrap_or_default(),
        if l.interrupted > 0 {
            format!("; interrupted {}x, ran again", l.interrupted)
        } else {
            String::new()
        }
    );
    for warning in &l.warnings {
        println!(
            "  {:<15} {}",
            "",
            style.bad(&format!("warning: {}", escape(warning)))
        );
    }
    for lane in &l.lanes {
        println!(
            "  {:<15} [{}.{}] -> {} ({:.1} ms){}",
            "",
            l.step,
            escape(&lane.lane),
            style.signal(&lane.signal),
            lane.duration_ms,
            lane.failure
                .as_ref()
                .map(|f| format!("; {}", style.bad(&format!("failed: {f}"))))
                .unwrap_or_default()
        );
    }
}

fn print_event(e: &StoredEvent, json: bool) {
    if json {
        println!("{}", serde_json::to_string(e).unwrap_or_default());
    } else {
        println!(
            "{:>5}  b{:<3} {}  {:<15} {}{}",
            e.seq,
            e.branch,
            format_utc(e.at),
            e.event.kind(),
            e.event.describe(),
            e.snapshot
                .as_ref()
                .map(|s| format!("  [{s}]"))
                .unwrap_or_default()
        );
    }
}

pub fn events(args: EventsArgs, global: &Global) -> u8 {
    let store = match global.existing_store() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let run = match store.resolve_run(&args.run) {
        Ok(r) => r,
        Err(e) => return store_error(e),
    };
    let mut last = 0;
    loop {
        // Whether the run was executing *before* reading, so that the
        // last events written before it stopped are still printed.
        let live = args.follow && store.is_running(&run.id);
        let batch = match store.events_after(&run.id, last) {
            Ok(b) => b,
            Err(e) => return store_error(e),
        };
        for e in &batch {
            print_event(e, args.json);
            last = e.seq;
        }
        if !live {
            return exit::SUCCESS;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

pub fn gates(args: GatesArgs, global: &Global) -> u8 {
    let store = match store_for_listing(global) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let gates = match store.as_ref().map(|s| s.open_gates()).transpose() {
        Ok(g) => g.unwrap_or_default(),
        Err(e) => return store_error(e),
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&gates).unwrap_or_default()
        );
        return exit::SUCCESS;
    }
    if gates.is_empty() {
        println!("no open gates");
        return exit::SUCCESS;
    }
    for g in &gates {
        println!(
            "{} {}  {} branch {}  {}.{}  opened {}\n    {}",
            g.run_id,
            g.gate_id,
            g.workflow_id,
            g.branch,
            g.node,
            g.block,
            format_utc(g.opened_at),
            g.prompt
        );
    }
    exit::SUCCESS
}
