//! Reading the store: `runs`, `show`, `events` and `gates`. Every view is
//! a projection of the event log; nothing here writes.

use std::path::Path;

use clap::Args;
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
    /// Only runs with this status.
    #[arg(long, value_name = "STATUS", value_parser = clap::builder::PossibleValuesParser::new(wfhost_store::RUN_STATUSES))]
    status: Option<String>,
    /// Only runs of this workflow id.
    #[arg(long, value_name = "ID")]
    workflow: Option<String>,
    /// Only runs whose id, workflow id, workspace or session contains
    /// this text (case-insensitive).
    #[arg(long, value_name = "TEXT")]
    grep: Option<String>,
    /// Only runs started since: an age (`30m`, `12h`, `7d`, `2w`) or a UTC
    /// date or time (`2026-11-20`, `2026-11-20T08:30:00Z`).
    #[arg(long, value_name = "WHEN")]
    since: Option<String>,
    /// At most this many runs, newest first.
    #[arg(long, short = 'n', value_name = "N", default_value_t = 50)]
    limit: usize,
    /// Print JSON: an array of runs, each as the HTTP API lists it.
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
    /// Print the run as JSON: the object `GET /v1/runs/{id}` answers
    /// (the API's `Run` schema).
    #[arg(long)]
    json: bool,
    /// With --json: print the branch's steps instead, one row each, as
    /// `GET /v1/runs/{id}/steps` does (`{branch, steps}`).
    #[arg(long, requires = "json")]
    steps: bool,
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

pub fn runs(args: RunsArgs, global: &Global) -> u8 {
    let since_ms = match &args.since {
        Some(since) => match wfhost_store::time::parse_since(since, wfhost_store::time::now_ms()) {
            Ok(ms) => Some(ms),
            Err(e) => {
                crate::report_error(format!("--since: {e}"));
                return exit::BAD_INPUT;
            }
        },
        None => None,
    };
    if args.limit == 0 {
        crate::report_error("--limit must be at least 1");
        return exit::BAD_INPUT;
    }
    let filtered = args.status.is_some()
        || args.workflow.is_some()
        || args.grep.is_some()
        || since_ms.is_some();
    let filter = wfhost_store::RunFilter {
        status: args.status,
        workflow: args.workflow,
        text: args.grep,
        since_ms,
        ..Default::default()
    };
    let page = match store_for_listing(global) {
        Ok(None) => wfhost_store::RunPage {
            runs: Vec::new(),
            next_after: None,
        },
        Ok(Some(store)) => match store.list_runs(&filter, args.limit) {
            Ok(page) => page,
            Err(wfhost_store::ListError::Store(e)) => return store_error(e),
            Err(e) => {
                crate::report_error(e.to_string());
                return exit::BAD_INPUT;
            }
        },
        Err(code) => return code,
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&page.runs).unwrap_or_default()
        );
        return exit::SUCCESS;
    }
    print_runs(&page, args.limit, filtered);
    exit::SUCCESS
}

/// The runs as a table, and a line saying when there are more.
fn print_runs(page: &wfhost_store::RunPage, limit: usize, filtered: bool) {
    if page.runs.is_empty() {
        println!(
            "{}",
            if filtered {
                "no runs match"
            } else {
                "no runs yet"
            }
        );
        return;
    }
    let width = page
        .runs
        .iter()
        .map(|r| r.run.workflow_id.len())
        .max()
        .unwrap_or(8)
        .max(8);
    println!(
        "{:<26}  {:<width$}  {:<11}  {:<20}  branches",
        "RUN", "WORKFLOW", "STATUS", "STARTED"
    );
    for r in &page.runs {
        println!(
            "{:<26}  {:<width$}  {:<11}  {:<20}  {}",
            r.run.id,
            escape(&r.run.workflow_id),
            r.status,
            format_utc(r.run.created_at),
            r.branches
        );
    }
    if page.next_after.is_some() {
        println!("(the newest {limit}; `--limit N` shows more)");
    }
}

/// The jobs a served run waits for: queued for an agent, or leased by one.
fn print_open_jobs(jobs: &[wfhost_store::OpenJob]) {
    let now = wfhost_store::time::now_ms();
    for job in jobs {
        let lane = match job.lane.as_str() {
            "" => String::new(),
            lane => format!(" lane {}", escape(lane)),
        };
        let what = format!(
            "job {} ({}.{}{lane}, attempt {})",
            job.job,
            escape(&job.node),
            escape(&job.block),
            job.attempt
        );
        let since = format!(
            "since {} ({} ago)",
            format_utc(job.since_ms),
            ago(now - job.since_ms)
        );
        match (job.state, &job.agent) {
            (wfhost_store::JobState::Leased, Some(agent)) => {
                println!(
                    "  job         {what} runs on agent {} {since}",
                    escape(agent)
                );
            }
            _ => println!("  waiting     for an agent: {what} queued {since}"),
        }
    }
}

/// `4 s`, `3 min`, `2 h`.
fn ago(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..120 => format!("{s} s"),
        120..7200 => format!("{} min", s / 60),
        _ => format!("{} h", s / 3600),
    }
}

/// Whether the manifest on disk still pins to the run's hash: `None` when
/// it cannot be read any more.
fn manifest_changed(manifest_path: &str, pinned: &str) -> Option<bool> {
    let loaded = formats::load(Path::new(manifest_path), &builtin_names()).ok()?;
    Some(PinnedDefinition::of(&loaded).hash != pinned)
}

/// Why the run's manifest on disk is not what it pinned, if it is not.
fn manifest_warning(run: &wfhost_store::RunRecord) -> Option<String> {
    match manifest_changed(&run.manifest, &run.workflow_hash) {
        Some(true) => Some(format!(
            "the manifest {} has changed since the run started; the run keeps executing its pinned definition {}",
            run.manifest, run.workflow_hash
        )),
        None => Some(format!(
            "the manifest {} cannot be loaded any more; the run keeps executing its pinned definition",
            run.manifest
        )),
        Some(false) => None,
    }
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
    if args.json {
        return match print_json(&store, run, args.branch, args.steps) {
            Ok(()) => exit::SUCCESS,
            Err(e) => store_error(e),
        };
    }
    let shown = match gather(&store, run, args.branch) {
        Ok(shown) => shown,
        Err(e) => return store_error(e),
    };
    print_text(&shown);
    exit::SUCCESS
}

/// Everything `show` prints of a run's branch: the run as the API shows
/// it, its state, and its step rows.
struct Shown {
    detail: wfhost_store::detail::RunDetail,
    state: wfhost_core::run::state::RunState,
    steps: Vec<wfhost_store::view::StepLine>,
}

fn gather(
    store: &Store,
    run: wfhost_store::RunRecord,
    branch: Option<u32>,
) -> Result<Shown, wfhost_store::StoreError> {
    let branch = match branch {
        Some(b) => b,
        None => store.current_branch(&run.id)?,
    };
    let warning = manifest_warning(&run);
    let chain = store.chain(&run.id, branch)?;
    let (mut detail, state) = wfhost_store::detail::RunDetail::gather(store, run, branch)?;
    detail.warnings.extend(warning);
    Ok(Shown {
        detail,
        state,
        steps: wfhost_store::view::steps_of(&chain),
    })
}

/// The run as the API's `Run` object (with the manifest check the API
/// does not make), or its steps as the API's `Steps`.
fn print_json(
    store: &Store,
    run: wfhost_store::RunRecord,
    branch: Option<u32>,
    steps: bool,
) -> Result<(), wfhost_store::StoreError> {
    let branch = match branch {
        Some(b) => b,
        None => store.current_branch(&run.id)?,
    };
    let out = if steps {
        let chain = store.chain(&run.id, branch)?;
        serde_json::json!({"branch": branch, "steps": wfhost_store::view::steps_of(&chain)})
    } else {
        let warning = manifest_warning(&run);
        let (mut detail, _) = wfhost_store::detail::RunDetail::gather(store, run, branch)?;
        detail.warnings.extend(warning);
        serde_json::to_value(detail).unwrap_or_default()
    };
    println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    Ok(())
}

fn print_text(s: &Shown) {
    let style = Style::stdout();
    print_head(s, style);
    println!();
    println!("branches");
    for b in &s.detail.branches {
        println!(
            "  {} {:<3} {:<11} {}{}  last written {}",
            if b.branch == s.detail.branch {
                "*"
            } else {
                " "
            },
            b.branch,
            b.status,
            count(b.events, "event"),
            b.forked_from
                .as_ref()
                .map(|f| format!(", forked from {f}"))
                .unwrap_or_default(),
            format_utc(b.last_at)
        );
    }
    println!();
    print_steps(s, style);
    println!();
    let state = &s.state;
    println!(
        "statistics: {}, {}{}, {} written",
        count(state.steps, "step"),
        count(state.statistics.tokens_used, "token"),
        crate::execute::usage_note(&state.statistics.usage),
        count(state.statistics.lines_written, "line")
    );
    crate::execute::print_block_statistics(state);
    println!();
    crate::result::print(state, s.detail.run.id.as_str());
}

/// The run's identity, where it stands and its inputs.
fn print_head(s: &Shown, style: Style) {
    let (d, run) = (&s.detail, &s.detail.run);
    println!("run {}  (workflow {})", run.id, run.workflow_id);
    println!(
        "  definition  {} pinned from {}",
        run.workflow_hash, run.manifest
    );
    for w in &d.warnings {
        println!("  warning: {w}");
    }
    println!("  workspace   {}", run.workspace);
    println!("  started     {}", format_utc(run.created_at));
    if let Some(rerun) = &d.rerun_of {
        let (old, step) = (&rerun.run_id, rerun.from_step);
        let from = step.map_or(" from the beginning".to_string(), |n| {
            format!(" from its step {n}")
        });
        println!("  rerun of    {old}{from}");
    }
    if let Some(t) = &d.trigger {
        let how = if t.manual {
            "triggered by hand"
        } else {
            "tick"
        };
        println!(
            "  started by  schedule {} ({how} {})",
            t.schedule,
            format_utc(t.tick_ms)
        );
    }
    println!("  status      {} (branch {})", d.status, d.branch);
    if let Some(timer) = &d.timer {
        let (node, block, due) = (&timer.node, &timer.block, format_utc(timer.due_at_ms));
        let what = match timer.retry {
            Some(n) => format!("retry {n} of {node}.{block} due at {due}"),
            None => format!("at {node}.{block} until {due}"),
        };
        println!(
            "  sleeping    {what} (a running `wfhost serve` wakes it then; else `wfhost resume {}`)",
            run.id
        );
    }
    print_open_jobs(&d.open_jobs);
    for n in &d.notifications {
        let how = match (n.state.as_str(), &n.last_error) {
            ("delivered", _) => format!("delivered after {} attempt(s)", n.attempts),
            (state, Some(e)) => format!("{state} after {} attempt(s): {e}", n.attempts),
            (state, None) => state.to_string(),
        };
        println!("  notified    {} to {}: {how}", n.event, n.target);
    }
    if let Some(reason) = &d.failure {
        println!("  failure     {}", style.bad(reason));
    }
    for (i, (name, value)) in s.state.inputs.iter().enumerate() {
        let label = if i == 0 { "inputs" } else { "" };
        println!("  {label:<11} {name} = {value}");
    }
}

/// The branch's steps with their snapshots, and its gates.
fn print_steps(s: &Shown, style: Style) {
    println!(
        "steps (branch {}; the snapshot on a step's line is the state after it)",
        s.detail.branch
    );
    println!(
        "  to run step N again as a new branch: `wfhost fork {} --at N` (or --at BLOCK, or --at SNAPSHOT)",
        s.detail.run.id
    );
    if let Some(snapshot) = &s.detail.start_snapshot {
        println!("  {snapshot:<15} (start)");
    }
    for l in &s.steps {
        print_step(l, style);
    }
    if s.state.gates.is_empty() {
        return;
    }
    println!();
    println!("gates");
    for g in s.state.gates.values() {
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

/// One line of `show`'s steps.
fn print_step(l: &wfhost_store::view::StepLine, style: Style) {
    let fallback = l
        .fallback_for
        .as_ref()
        .map(|s| format!(" (no transition: {} -> {FAIL_DEFAULT})", escape(s)))
        .unwrap_or_default();
    println!(
        "  {:<15} [{}] {} #{} -> {}{fallback}  {} ({:.1} ms{}){}{}",
        l.snapshot.as_deref().unwrap_or("-"),
        l.step,
        l.block,
        l.attempt,
        style.signal(&l.signal),
        escape(&match (&l.action, &l.command) {
            (Some(action), Some(command)) => action_line(action, command),
            (Some(action), None) => action.clone(),
            (None, _) => match &l.retry {
                Some(r) => format!(
                    "retry {} in {}",
                    r.retry,
                    wfhost_core::text::wait(r.wait_ms)
                ),
                None => "(no transition)".into(),
            },
        }),
        l.duration_ms,
        l.queued_ms
            .map(|q| format!(", after {q:.1} ms waiting for an agent"))
            .unwrap_or_default(),
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
            "  {:<15} [{}.{}] -> {} ({:.1} ms{}){}",
            "",
            l.step,
            escape(&lane.lane),
            style.signal(&lane.signal),
            lane.duration_ms,
            match lane.retries {
                0 => String::new(),
                n => format!(", after {} failed", wfhost_core::text::count(n, "attempt")),
            },
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
