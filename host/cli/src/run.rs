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

use wfhost_app::AppError;
use wfhost_app::plugins::plugin_digests;
use wfhost_app::session_files::{SessionFiles, SessionSink};
use wfhost_app::workspace::Workspace;
use wfhost_protocol::Accepted;

use crate::execute::{Entry, Output, Prepared, PrintingSink, execute, print_loads};
use crate::options::{CacheOptions, OutputOptions};
use crate::{Global, RuntimeChoice, builtin_names, fail, load_plugins, start_runtime};

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
            },
            inputs: InputSource::Given(None),
            executor: wfhost_exec::Executor::Local,
            session: None,
            run_id: Some(run_id),
        }
    }
}

/// Blocks a run may execute unless told otherwise.
const DEFAULT_MAX_STEPS: u64 = 10_000;

pub fn run(args: RunArgs, global: &Global) -> u8 {
    start(args.into(), global, &mut |_| {}).unwrap_or_else(fail)
}

/// A workflow checked for a new run: nothing is recorded yet.
struct Checked {
    workflow: manifest::LoadedWorkflow,
    inputs: wfhost_core::run::inputs::Inputs,
    workspace: Workspace,
    plugins: wfhost_runtime::PluginSet,
}

/// Check everything a new run needs — the workflow, its inputs, the
/// workspace, the secrets, the plugins — touching nothing.
fn check(spec: &RunSpec, home: &std::path::Path) -> Result<Checked, AppError> {
    let place = || spec.manifest.display().to_string();
    let workflow = formats::load(&spec.manifest, &builtin_names())
        .map_err(|errors| AppError::bad_input(errors).at(place()))?;
    crate::validate::slurm_options(&workflow).map_err(|e| AppError::bad_input(e).at(place()))?;
    crate::validate::agent_presets(&workflow).map_err(|e| AppError::bad_input(e).at(place()))?;
    let inputs = match &spec.inputs {
        InputSource::Args { file, set } => {
            crate::inputs::read(&workflow.workflow, file.as_deref(), set)
        }
        InputSource::Given(given) => wfhost_core::run::inputs::resolve(
            workflow.workflow.inputs.as_ref(),
            given.clone().map(serde_json::Value::Object),
            Vec::new(),
        ),
    }
    .map_err(|e| AppError::bad_input(e).at("inputs"))?;
    let given = chosen_workspace(spec.workspace.as_deref(), &workflow)?;
    let workspace = Workspace::open(&given, home, &spec.runtime)?;
    // A secret set nowhere stops the run before anything is recorded (a
    // run for `wfhost serve` resolves them where its jobs run).
    if !wfhost_app::run::blocks_as_jobs() {
        crate::secret::check_references(&workflow, Some(home))?;
    }
    let runtime = start_runtime(&spec.runtime, spec.executor.clone(), Some(home))?;
    let plugins = load_plugins(runtime, &workflow, workspace.path(), Some(home))?;
    Ok(Checked {
        workflow,
        inputs,
        workspace,
        plugins,
    })
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
    let Checked {
        workflow,
        inputs,
        workspace,
        plugins,
    } = check(&spec, &home)?;
    let output = spec.output;
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
    let mut store = global.app_store()?;
    let pin = PinnedDefinition::of(&workflow);
    let now = wfhost_store::time::now_ms();
    let record = RunRecord {
        id: spec
            .run_id
            .clone()
            .unwrap_or_else(|| wfhost_store::new_run_id(now)),
        workflow_id: workflow.workflow.id.clone(),
        workflow_hash: pin.hash.clone(),
        manifest: std::path::absolute(&workflow.file)
            .unwrap_or_else(|_| workflow.file.clone())
            .display()
            .to_string(),
        workspace: workspace.absolute().display().to_string(),
        created_at: now,
    };
    let mut options = RunOptions::new(record.id.clone());
    options.max_steps = spec.max_steps;
    options.workflow_hash = pin.hash.clone();
    options.plugins = plugin_digests(&plugins);
    options.default_executor = match &spec.executor {
        wfhost_exec::Executor::Local => String::new(),
        other => other.to_string(),
    };
    options.inputs = inputs;
    let started = engine::started_event(&workflow.workflow, &options);
    let lock = store
        .lock_run(&record.id)
        .map_err(wfhost_app::store_error)?;
    let workspace_lock = workspace.lock(&record.id, store.home(), spec.shared_workspace)?;
    store
        .create_run_in(&record, &pin.json, &started, spec.session.as_ref())
        .map_err(wfhost_app::store_error)?;
    accepted(&Accepted { branch: Some(1) });
    if !output.json {
        println!(
            "run {} of {} ({}) in {}",
            record.id,
            workflow.workflow.id,
            workflow.file.display(),
            plugins.workspace().display()
        );
    }
    let state = RunState::start(&started).map_err(AppError::failed)?;
    let files = SessionFiles::load(&store, &record, 1, &workflow.workflow);
    let writer = store
        .writer(&record.id, 1)
        .map_err(wfhost_app::store_error)?;
    let prepared = Prepared {
        loaded: workflow,
        plugins,
        workspace,
        workspace_lock,
    };
    let code = execute(
        &prepared,
        &record,
        SessionSink::new(PrintingSink::new(writer, output, &record), files),
        Entry::Continue(state),
    );
    drop(lock);
    Ok(code)
}

/// The workspace a run uses: `--workspace`, else the manifest's
/// `workspace` (relative to the manifest). Never a silent default.
fn chosen_workspace(
    flag: Option<&std::path::Path>,
    workflow: &manifest::LoadedWorkflow,
) -> Result<PathBuf, AppError> {
    if let Some(dir) = flag {
        return Ok(dir.to_path_buf());
    }
    match &workflow.workflow.workspace {
        Some(dir) => Ok(workflow.base_dir().join(dir)),
        None => Err(AppError::bad_input(format!(
            "no workspace: pass --workspace DIR (the directory the blocks work in), or name one in {} (\"workspace\": \"DIR\", relative to the manifest)",
            workflow.file.display()
        ))),
    }
}

fn run_id(id: &str) -> Result<wfhost_store::RunId, String> {
    wfhost_store::RunId::parse(id).map_err(|e| e.to_string())
}
