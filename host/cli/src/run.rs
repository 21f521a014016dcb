//! `wfhost run`: start a durable run of a workflow — its arguments read
//! into a [`RunSpec`], checked and recorded by `wfhost_app::start` (bad
//! input leaves no trace), driven by `wfhost_app::run`, printed here.

use std::path::PathBuf;

use clap::Args;
use wfhost_app::AppError;
use wfhost_app::checks::signal_warnings;
use wfhost_app::session_files::{SessionFiles, SessionSink};
use wfhost_app::start::{NewRun, Recorded, Recording};
use wfhost_protocol::Accepted;

use crate::execute::{Entry, Output, PrintingSink, execute, print_loads};
use crate::options::{CacheOptions, OutputOptions};
use crate::{Global, RuntimeChoice, fail};

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
    #[command(flatten)]
    cache: CacheOptions,
    /// Stop a run after this many blocks (loop protection).
    #[arg(long, default_value_t = DEFAULT_MAX_STEPS)]
    max_steps: u64,
    #[command(flatten)]
    output: OutputOptions,
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
    #[arg(
        long,
        default_value = "local",
        env = "WFHOST_EXECUTOR",
        value_name = "EXECUTOR"
    )]
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

/// Where a new run's inputs come from.
pub enum InputSource {
    /// `--input FILE` and `--set NAME=VALUE`.
    Args {
        file: Option<PathBuf>,
        set: Vec<String>,
    },
    /// Given whole (a request to `wfhost serve`).
    Given(Option<serde_json::Map<String, serde_json::Value>>),
}

/// Everything a new run is started with.
pub struct RunSpec {
    pub manifest: PathBuf,
    pub workspace: Option<PathBuf>,
    pub shared_workspace: bool,
    pub runtime: RuntimeChoice,
    pub max_steps: u64,
    pub output: Output,
    pub inputs: InputSource,
    pub executor: wfhost_exec::Executor,
    pub session: Option<wfhost_store::SessionTag>,
    pub run_id: Option<wfhost_store::RunId>,
    /// The definition itself, when not read from `manifest` (a rerun).
    pub definition: Option<wfhost_core::manifest::LoadedWorkflow>,
    /// Where a rerun starts and what it starts with.
    pub rerun: Option<wfhost_app::rerun::Seed>,
}

impl From<RunArgs> for RunSpec {
    fn from(args: RunArgs) -> Self {
        RunSpec {
            manifest: args.manifest,
            workspace: args.workspace,
            shared_workspace: args.shared_workspace,
            runtime: args.cache.choice(None),
            max_steps: args.max_steps,
            output: args.output.into(),
            inputs: InputSource::Args {
                file: args.input,
                set: args.set,
            },
            executor: args.executor,
            session: args.session,
            run_id: args.run_id,
            definition: None,
            rerun: None,
        }
    }
}

impl RunSpec {
    /// A run for `wfhost serve`: quiet, its id chosen by the server.
    pub fn served(manifest: PathBuf, workspace: PathBuf, run_id: wfhost_store::RunId) -> Self {
        RunSpec {
            manifest,
            workspace: Some(workspace),
            shared_workspace: false,
            runtime: RuntimeChoice::default(),
            max_steps: DEFAULT_MAX_STEPS,
            output: Output {
                verbose: false,
                json: false,
                quiet: true,
                served: true,
            },
            inputs: InputSource::Given(None),
            executor: wfhost_exec::Executor::Local,
            session: None,
            run_id: Some(run_id),
            definition: None,
            rerun: None,
        }
    }
}

/// Blocks a run may execute unless told otherwise.
const DEFAULT_MAX_STEPS: u64 = 10_000;

pub fn run(args: RunArgs, global: &Global) -> u8 {
    start(args.into(), global, &mut |_| {}).unwrap_or_else(fail)
}

/// Start a run of `spec`: checked first (bad input leaves no trace), then
/// recorded — `accepted` is told once the run is durable — then driven to
/// where it comes to rest; returns the exit code of that.
pub fn start(
    spec: RunSpec,
    global: &Global,
    accepted: &mut dyn FnMut(&Accepted),
) -> Result<u8, AppError> {
    let home = global.app_home()?;
    let new = NewRun {
        manifest: &spec.manifest,
        workspace: spec.workspace.as_deref(),
        runtime: &spec.runtime,
        executor: spec.executor.clone(),
        slurm_watcher: Some(crate::progress::slurm_watcher()),
        definition: spec.definition,
    };
    let checked = wfhost_app::start::check(new, &home, |workflow| match &spec.inputs {
        InputSource::Args { file, set } => crate::inputs::read(workflow, file.as_deref(), set),
        InputSource::Given(given) => wfhost_core::run::inputs::resolve(
            workflow.inputs.as_ref(),
            given.clone().map(serde_json::Value::Object),
            Vec::new(),
        ),
    })?;
    let output = spec.output;
    print_loads(&checked.plugins, output);
    let workflow = &checked.workflow;
    for w in signal_warnings(&workflow.workflow, &checked.plugins) {
        eprintln!(
            "warning: {}: {}: {}",
            workflow.file.display(),
            w.location,
            w.message
        );
    }
    // Everything is checked: only now does the run touch the store.
    let mut store = global.app_store()?;
    let how = Recording {
        run_id: spec.run_id,
        max_steps: spec.max_steps,
        session: spec.session,
        shared_workspace: spec.shared_workspace,
        rerun: spec.rerun,
    };
    let Recorded {
        record,
        state,
        prepared,
        lock,
    } = wfhost_app::start::record(&mut store, checked, how)?;
    accepted(&Accepted { branch: Some(1) });
    if output.header() {
        println!(
            "run {} of {} ({}) in {}",
            record.id,
            prepared.loaded.workflow.id,
            prepared.loaded.file.display(),
            prepared.plugins.workspace().display()
        );
    }
    let files = SessionFiles::load(&store, &record, 1, &prepared.loaded.workflow);
    let writer = store
        .writer(&record.id, 1)
        .map_err(wfhost_app::store_error)?;
    let code = execute(
        &prepared,
        &record,
        SessionSink::new(PrintingSink::new(writer, output, &record), files),
        Entry::Continue(state),
    );
    drop(lock);
    Ok(code)
}

fn run_id(id: &str) -> Result<wfhost_store::RunId, String> {
    wfhost_store::RunId::parse(id).map_err(|e| e.to_string())
}
