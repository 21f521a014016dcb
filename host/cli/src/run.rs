//! `wfhost run`: start a durable run of a workflow.
//!
//! The workflow is checked and its plugins admitted before the store is
//! touched, so bad input leaves no trace. Then the normalized definition is
//! pinned under its hash, the run's first event written, and the engine
//! driven with the store as its log.

use std::path::PathBuf;

use clap::Args;
use wfhost_core::formats;
use wfhost_core::manifest;
use wfhost_core::manifest::pinning::PinnedDefinition;
use wfhost_core::run::engine::{self, RunOptions};
use wfhost_core::run::state::RunState;
use wfhost_store::RunRecord;

use crate::execute::{Entry, Output, Prepared, PrintingSink, execute, plugin_digests, print_loads};
use crate::{Global, builtin_names, exit, load_plugins, report_error, start_runtime, store_error};

#[derive(Args)]
pub struct RunArgs {
    /// The workflow manifest (JSON).
    manifest: PathBuf,
    /// The workspace: the directory the blocks work in. Required unless
    /// the manifest names one (`"workspace"`).
    #[arg(long, short = 'w', value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Run even if another run is using the workspace.
    #[arg(long)]
    shared_workspace: bool,
    /// Where compiled plugins are cached (default: $WFHOST_CACHE_DIR, else
    /// ~/.cache/wfhost/components).
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Compile plugins without reading or writing the cache.
    #[arg(long, conflicts_with = "cache_dir")]
    no_cache: bool,
    /// Stop a run after this many blocks (loop protection).
    #[arg(long, default_value_t = 10_000)]
    max_steps: u64,
    /// Also print plugin loads and every block's log.
    #[arg(long, short, conflicts_with = "json")]
    verbose: bool,
    /// Print only where the run came to rest: no line per block, no live
    /// status line.
    #[arg(long, short, conflicts_with_all = ["json", "verbose"])]
    quiet: bool,
    /// Print only a JSON report of the run (status, statistics per run and
    /// per block) on stdout.
    #[arg(long)]
    json: bool,
    /// A JSON file holding the run's inputs as an object (`-`: standard
    /// input), checked against the workflow's `inputs` schema.
    #[arg(long, value_name = "FILE")]
    input: Option<PathBuf>,
    /// Set one input (repeatable; wins over --input). VALUE is taken as
    /// text for a `string` input and parsed as JSON for any other type,
    /// e.g. `--set topic=rust --set count=3 --set 'tags=["a","b"]'`.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    set: Vec<String>,
    /// Where exec blocks that name no executor run: `local`,
    /// `container:IMAGE` (a local image) or `slurm[:PARTITION]`.
    #[arg(long, default_value = "local", value_name = "EXECUTOR")]
    executor: wfhost_exec::Executor,
    /// The session (workstream) the run belongs to: its runs are listed,
    /// kept and exported together (`wfhost session`). 1–256 characters,
    /// no control characters.
    #[arg(long, value_name = "ID", value_parser = session_tag)]
    session: Option<wfhost_store::SessionTag>,
    /// The new run's id, chosen by the caller (`wfhost serve` starting a
    /// run it has already answered for); `run-YYYYMMDD-HHMMSS-xxxxxx`.
    #[arg(long, hide = true, value_parser = run_id)]
    run_id: Option<wfhost_store::RunId>,
}

fn session_tag(id: &str) -> Result<wfhost_store::SessionTag, String> {
    wfhost_store::SessionTag::client(id, None)
}

pub fn run(args: RunArgs, global: &Global) -> u8 {
    let workflow = match formats::load(&args.manifest, &builtin_names()) {
        Ok(wf) => wf,
        Err(errors) => {
            report_error(errors);
            return exit::BAD_INPUT;
        }
    };
    if let Err(errors) = crate::validate::slurm_options(&workflow) {
        report_error(errors);
        return exit::BAD_INPUT;
    }
    if let Err(errors) = crate::validate::agent_presets(&workflow) {
        report_error(errors);
        return exit::BAD_INPUT;
    }
    let inputs = match crate::inputs::read(&workflow.workflow, args.input.as_deref(), &args.set) {
        Ok(inputs) => inputs,
        Err(e) => {
            report_error(e);
            return exit::BAD_INPUT;
        }
    };
    let workspace = match chosen_workspace(args.workspace.as_deref(), &workflow) {
        Ok(w) => w,
        Err(message) => {
            report_error(message);
            return exit::BAD_INPUT;
        }
    };
    match std::fs::metadata(&workspace) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            report_error(format!(
                "workspace {} is not a directory",
                workspace.display()
            ));
            return exit::BAD_INPUT;
        }
        Err(e) => {
            report_error(format!("workspace {}: {e}", workspace.display()));
            return exit::BAD_INPUT;
        }
    }
    if let Err(code) = crate::guard::check_run_workspace(
        &workspace,
        global,
        args.cache_dir.as_deref(),
        args.no_cache,
    ) {
        return code;
    }
    let output = Output {
        verbose: args.verbose,
        json: args.json,
        quiet: args.quiet,
    };
    let default_executor = match &args.executor {
        wfhost_exec::Executor::Local => String::new(),
        other => other.to_string(),
    };
    // A secret set nowhere stops the run before anything is recorded (a
    // run for `wfhost serve` resolves them where its jobs run).
    let as_jobs = std::env::var_os(wfhost_server::RUN_BLOCKS_AS_JOBS).is_some_and(|v| v == "1");
    if !as_jobs
        && let Err(code) = crate::secret::check_references(&workflow, global.home().ok().as_deref())
    {
        return code;
    }
    let runtime = match start_runtime(
        args.cache_dir,
        args.no_cache,
        args.executor,
        global.home().ok().as_deref(),
    ) {
        Ok(rt) => rt,
        Err(e) => {
            report_error(e);
            return exit::BAD_INPUT;
        }
    };
    let plugins = match load_plugins(
        runtime,
        &workflow,
        &workspace,
        global.home().ok().as_deref(),
    ) {
        Ok(p) => p,
        Err(e) => {
            report_error(e);
            return exit::BAD_INPUT;
        }
    };
    print_loads(&plugins, output);
    for w in crate::validate::signal_warnings(&workflow.workflow, &plugins) {
        eprintln!(
            "warning: {}: {}: {}",
            workflow.file.display(),
            w.location,
            w.message
        );
    }

    // Everything is checked: only now does the run touch the store.
    let mut store = match global.open_store() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let pin = PinnedDefinition::of(&workflow);
    let now = wfhost_store::time::now_ms();
    let record = RunRecord {
        id: args
            .run_id
            .clone()
            .unwrap_or_else(|| wfhost_store::new_run_id(now)),
        workflow_id: workflow.workflow.id.clone(),
        workflow_hash: pin.hash.clone(),
        manifest: std::path::absolute(&workflow.file)
            .unwrap_or_else(|_| workflow.file.clone())
            .display()
            .to_string(),
        workspace: std::path::absolute(&workspace)
            .unwrap_or_else(|_| workspace.clone())
            .display()
            .to_string(),
        created_at: now,
    };
    let mut options = RunOptions::new(record.id.clone());
    options.max_steps = args.max_steps;
    options.workflow_hash = pin.hash.clone();
    options.plugins = plugin_digests(&plugins);
    options.default_executor = default_executor;
    options.inputs = inputs;
    let started = engine::started_event(&workflow.workflow, &options);
    let lock = match store.lock_run(&record.id) {
        Ok(lock) => lock,
        Err(e) => return store_error(e),
    };
    let workspace_lock = match crate::workspace_lock::lock(
        &workspace,
        &record.id,
        store.home(),
        args.shared_workspace,
    ) {
        Ok(l) => l,
        Err(code) => return code,
    };
    if let Err(e) = store.create_run_in(&record, &pin.json, &started, args.session.as_ref()) {
        return store_error(e);
    }
    if !args.json {
        println!(
            "run {} of {} ({}) in {}",
            record.id,
            workflow.workflow.id,
            workflow.file.display(),
            plugins.workspace().display()
        );
    }
    let state = match RunState::start(&started) {
        Ok(s) => s,
        Err(e) => {
            report_error(e);
            return exit::RUN_FAILED;
        }
    };
    let files = crate::session_files::SessionFiles::load(&store, &record, 1, &workflow.workflow);
    let writer = match store.writer(&record.id, 1) {
        Ok(w) => w,
        Err(e) => return store_error(e),
    };
    let prepared = Prepared {
        loaded: workflow,
        plugins,
        workspace_lock,
    };
    let code = execute(
        &prepared,
        &record,
        crate::session_files::SessionSink::new(PrintingSink::new(writer, output, &record), files),
        Entry::Continue(state),
    );
    drop(lock);
    code
}

/// The workspace a run uses: `--workspace`, else the manifest's
/// `workspace` (relative to the manifest). Never a silent default.
fn chosen_workspace(
    flag: Option<&std::path::Path>,
    workflow: &manifest::LoadedWorkflow,
) -> Result<PathBuf, String> {
    if let Some(dir) = flag {
        return Ok(dir.to_path_buf());
    }
    match &workflow.workflow.workspace {
        Some(dir) => Ok(workflow.base_dir().join(dir)),
        None => Err(format!(
            "no workspace: pass --workspace DIR (the directory the blocks work in), or name one in {} (\"workspace\": \"DIR\", relative to the manifest)",
            workflow.file.display()
        )),
    }
}

fn run_id(id: &str) -> Result<wfhost_store::RunId, String> {
    wfhost_store::RunId::parse(id).map_err(|e| e.to_string())
}
