//! `wfhost schedule`: workflows started on a cron expression's ticks by a
//! running `wfhost serve` on the same home — added, listed, paused,
//! resumed, removed and triggered by hand here.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use wfhost_store::schedules::{Schedule, Spec, Tick, tick_state};
use wfhost_store::time::{format_utc, now_ms};

use crate::{Global, exit, report_error, store_error};

#[derive(Args)]
pub struct ScheduleArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Add a schedule: WORKFLOW started on the ticks of a cron expression.
    Add(AddArgs),
    /// List the schedules: expression, next tick, last tick and its run.
    #[command(visible_alias = "list")]
    Ls {
        /// Print JSON (`{"schedules": [...]}`).
        #[arg(long)]
        json: bool,
    },
    /// Show one schedule and its recent ticks.
    Show {
        name: String,
        /// Print JSON (`{"schedule": ..., "ticks": [...]}`).
        #[arg(long)]
        json: bool,
    },
    /// Stop starting runs (ticks meanwhile are not caught up).
    Pause { name: String },
    /// Start runs again from the next tick.
    Resume { name: String },
    /// Remove a schedule (its runs stay).
    Rm { name: String },
    /// Start a run of the schedule now (a running server starts it).
    Trigger { name: String },
}

#[derive(Args)]
struct AddArgs {
    /// The schedule's name: letters, digits, `-` and `_`.
    name: String,
    /// The cron expression: five fields (minute hour day month weekday),
    /// or six with seconds first; `@hourly`, `@daily`, ... too.
    #[arg(long)]
    cron: String,
    /// The IANA time zone the expression is read in (default UTC).
    #[arg(long)]
    tz: Option<String>,
    /// The workflow file to run.
    workflow: PathBuf,
    /// The runs' workspace (default: the current directory); `{run}` in it
    /// stands for each run's id, a workspace of its own.
    #[arg(long, short)]
    workspace: Option<PathBuf>,
    /// A JSON file of inputs (`-`: standard input).
    #[arg(long)]
    input: Option<PathBuf>,
    /// An input, NAME=VALUE (repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    sets: Vec<String>,
    /// What a tick does while the schedule's last run still goes: `skip`
    /// (default), `queue` (it starts when that run ends; one waits at
    /// most) or `allow`.
    #[arg(long, default_value = "skip")]
    overlap: String,
    /// How many runs to start for ticks missed while no server ran
    /// (default 1: one for the missed window; 0: none; at most 100).
    #[arg(long, default_value_t = 1)]
    catch_up: u32,
}

pub fn schedule(args: ScheduleArgs, global: &Global) -> u8 {
    match args.action {
        Action::Add(add) => self::add(add, global),
        Action::Ls { json } => list(json, global),
        Action::Show { name, json } => show(&name, json, global),
        Action::Pause { name } => pause(&name, true, global),
        Action::Resume { name } => pause(&name, false, global),
        Action::Rm { name } => remove(&name, global),
        Action::Trigger { name } => trigger(&name, global),
    }
}

/// An absolute form of `path` (against the current directory).
fn absolute(path: &std::path::Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

fn add(args: AddArgs, global: &Global) -> u8 {
    let workflow_file = absolute(&args.workflow);
    let inputs = match read_inputs(&workflow_file, &args) {
        Ok(inputs) => inputs,
        Err(message) => {
            report_error(message);
            return exit::BAD_INPUT;
        }
    };
    let workspace = absolute(
        args.workspace
            .as_deref()
            .unwrap_or(std::path::Path::new(".")),
    );
    let spec = Spec {
        name: args.name.clone(),
        cron: args.cron.clone(),
        tz: args.tz.clone(),
        workflow: workflow_file,
        workspace,
        inputs,
        overlap: Some(args.overlap.clone()),
        catch_up: Some(args.catch_up),
    };
    let schedule = match spec.define(now_ms()) {
        Ok(s) => s,
        Err(p) => {
            let at = match &p.pointer {
                Some(pointer) => format!("{} ({pointer})", p.field),
                None => p.field.to_string(),
            };
            report_error(format!("schedule {}: {at}: {}", args.name, p.message));
            return exit::BAD_INPUT;
        }
    };
    let mut store = match global.open_store() {
        Ok(store) => store,
        Err(code) => return code,
    };
    if let Err(e) = store.add_schedule(&schedule) {
        return store_error(e);
    }
    println!(
        "schedule {} added: {} ({}), next run {}",
        schedule.name,
        schedule.cron,
        schedule.tz,
        next(&schedule)
    );
    println!("a running `wfhost serve` on this home starts its runs");
    exit::SUCCESS
}

/// The run's inputs as `wfhost run` reads them, checked against the
/// workflow's `inputs` schema (the workflow must read).
fn read_inputs(
    file: &std::path::Path,
    args: &AddArgs,
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    if args.input.is_none() && args.sets.is_empty() {
        return Ok(serde_json::Map::new());
    }
    let workflow = wfhost_core::manifest::read(file)
        .and_then(|text| wfhost_core::formats::parse_any(file, &text))
        .map_err(|e| e.to_string())?;
    crate::inputs::read(&workflow, args.input.as_deref(), &args.sets)
}

fn next(s: &Schedule) -> String {
    match (s.paused, s.next_tick_ms) {
        (true, _) => "paused".into(),
        (false, Some(ms)) => format_utc(ms),
        (false, None) => "never (the expression has no tick left)".into(),
    }
}

fn list(json: bool, global: &Global) -> u8 {
    let store = match global.open_store() {
        Ok(store) => store,
        Err(code) => return code,
    };
    let schedules = match store.schedules() {
        Ok(s) => s,
        Err(e) => return store_error(e),
    };
    if json {
        let out = serde_json::json!({ "schedules": schedules, "server_now_ms": now_ms() });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return exit::SUCCESS;
    }
    if schedules.is_empty() {
        println!("no schedules: `wfhost schedule add NAME --cron EXPR WORKFLOW` adds one");
        return exit::SUCCESS;
    }
    println!(
        "{:<20} {:<20} {:<16} {:<22} LAST",
        "NAME", "CRON", "TZ", "NEXT"
    );
    for s in &schedules {
        let last = match store.ticks(&s.name, 1) {
            Ok(ticks) => ticks.first().map(tick_line).unwrap_or_else(|| "-".into()),
            Err(e) => return store_error(e),
        };
        println!(
            "{:<20} {:<20} {:<16} {:<22} {last}",
            s.name,
            s.cron,
            s.tz,
            next(s)
        );
    }
    exit::SUCCESS
}

fn tick_line(t: &Tick) -> String {
    let when = format_utc(t.tick_ms);
    let by = if t.manual { " (triggered)" } else { "" };
    match (t.state.as_str(), &t.run_id, &t.reason) {
        (tick_state::SKIPPED, _, Some(why)) => format!("{when}{by} skipped: {why}"),
        (tick_state::FAILED, _, Some(why)) => format!("{when}{by} failed: {why}"),
        (state, Some(run), _) => format!("{when}{by} {state} {run}"),
        (state, None, _) => format!("{when}{by} {state}"),
    }
}

fn show(name: &str, json: bool, global: &Global) -> u8 {
    let store = match global.open_store() {
        Ok(store) => store,
        Err(code) => return code,
    };
    let (schedule, ticks) = match store
        .schedule(name)
        .and_then(|s| Ok((s, store.ticks(name, 20)?)))
    {
        Ok((Some(s), ticks)) => (s, ticks),
        Ok((None, _)) => return unknown(name),
        Err(e) => return store_error(e),
    };
    if json {
        let out = serde_json::json!({ "schedule": schedule, "ticks": ticks });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return exit::SUCCESS;
    }
    println!("schedule {}", schedule.name);
    println!("  cron        {} ({})", schedule.cron, schedule.tz);
    println!("  workflow    {}", schedule.workflow);
    println!("  workspace   {}", schedule.workspace);
    if !schedule.inputs.is_empty() {
        println!(
            "  inputs      {}",
            serde_json::Value::Object(schedule.inputs.clone())
        );
    }
    println!(
        "  overlap     {}; catch-up {} run(s) after downtime",
        schedule.overlap, schedule.catch_up
    );
    println!("  next        {}", next(&schedule));
    if schedule.missed > 0 {
        println!(
            "  missed      {} tick(s) while no server looked",
            schedule.missed
        );
    }
    println!("ticks (newest first)");
    for t in &ticks {
        println!("  {}", tick_line(t));
    }
    exit::SUCCESS
}

fn unknown(name: &str) -> u8 {
    report_error(format!(
        "no schedule named `{name}`; `wfhost schedule ls` lists them"
    ));
    exit::BAD_INPUT
}

fn pause(name: &str, paused: bool, global: &Global) -> u8 {
    let mut store = match global.open_store() {
        Ok(store) => store,
        Err(code) => return code,
    };
    match store.pause_schedule(name, paused, now_ms()) {
        Ok(Some(_)) if paused => println!("schedule {name} paused"),
        Ok(Some(resumed)) => println!("schedule {name} resumed: next run {}", next(&resumed)),
        Ok(None) => return unknown(name),
        Err(e) => return store_error(e),
    }
    exit::SUCCESS
}

fn remove(name: &str, global: &Global) -> u8 {
    let mut store = match global.open_store() {
        Ok(store) => store,
        Err(code) => return code,
    };
    match store.remove_schedule(name) {
        Ok(true) => {
            println!("schedule {name} removed (its runs stay)");
            exit::SUCCESS
        }
        Ok(false) => unknown(name),
        Err(e) => store_error(e),
    }
}

fn trigger(name: &str, global: &Global) -> u8 {
    let mut store = match global.open_store() {
        Ok(store) => store,
        Err(code) => return code,
    };
    let tick = match store.trigger_schedule(name, now_ms()) {
        Ok(tick) => tick,
        Err(e) => return store_error(e),
    };
    println!(
        "run {} of schedule {name} triggered: a running `wfhost serve` on this home starts it",
        tick.run_id.unwrap_or_default()
    );
    exit::SUCCESS
}
