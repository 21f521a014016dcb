//! Starting a run: everything a new run needs checked first — the
//! workflow, its inputs, the workspace, the secrets, the plugins — so that
//! bad input leaves no trace ([`check`]); then the run recorded under its
//! pinned definition, its locks taken ([`record`]). Driving it is
//! [`crate::run::drive`].

use std::path::{Path, PathBuf};

use wfhost_core::formats;
use wfhost_core::manifest::LoadedWorkflow;
use wfhost_core::manifest::pinning::PinnedDefinition;
use wfhost_core::run::engine::{self, RunOptions};
use wfhost_core::run::inputs::Inputs;
use wfhost_core::run::state::RunState;
use wfhost_protocol::AppError;
use wfhost_runtime::PluginSet;
use wfhost_store::{RunId, RunLock, RunRecord, SessionTag, Store};

use crate::plugins::{RuntimeChoice, builtin_names, load_plugins, plugin_digests, start_runtime};
use crate::run::Prepared;
use crate::workspace::Workspace;

/// What a new run is started from, besides its inputs.
pub struct NewRun<'a> {
    pub manifest: &'a Path,
    /// `--workspace`; else the manifest's `workspace`.
    pub workspace: Option<&'a Path>,
    pub runtime: &'a RuntimeChoice,
    /// Where exec blocks that name no executor run.
    pub executor: wfhost_exec::Executor,
    pub slurm_watcher: Option<wfhost_exec::slurm::JobWatcher>,
    /// The definition itself, when not read from `manifest` (a rerun of a
    /// run's pinned definition).
    pub definition: Option<LoadedWorkflow>,
}

/// A workflow checked for a new run: nothing is recorded yet.
pub struct Checked {
    pub workflow: LoadedWorkflow,
    pub inputs: Inputs,
    pub workspace: Workspace,
    pub plugins: PluginSet,
    pub executor: wfhost_exec::Executor,
}

/// Check everything a new run of `new` in `home` needs, touching nothing;
/// `inputs` reads the run's inputs against the workflow.
pub fn check(
    new: NewRun<'_>,
    home: &Path,
    inputs: impl FnOnce(&wfhost_core::manifest::Workflow) -> Result<Inputs, String>,
) -> Result<Checked, AppError> {
    let place = || new.manifest.display().to_string();
    let workflow = match new.definition {
        Some(workflow) => workflow,
        None => formats::load(new.manifest, &builtin_names())
            .map_err(|errors| AppError::bad_input(errors).at(place()))?,
    };
    crate::checks::slurm_options(&workflow).map_err(|e| AppError::bad_input(e).at(place()))?;
    crate::checks::agent_presets(&workflow).map_err(|e| AppError::bad_input(e).at(place()))?;
    crate::checks::exec_policy(&workflow).map_err(|e| AppError::bad_input(e).at(place()))?;
    let inputs = inputs(&workflow.workflow).map_err(|e| AppError::bad_input(e).at("inputs"))?;
    let given = chosen_workspace(new.workspace, &workflow)?;
    let workspace = Workspace::open(&given, home, new.runtime)?;
    // A secret set nowhere stops the run before anything is recorded (a
    // run for `wfhost serve` resolves them where its jobs run).
    if !crate::run::blocks_as_jobs() {
        crate::checks::check_references(&workflow, Some(home))?;
    }
    let runtime = start_runtime(
        new.runtime,
        new.executor.clone(),
        Some(home),
        new.slurm_watcher,
    )?;
    let plugins = load_plugins(runtime, &workflow, workspace.path(), Some(home))?;
    Ok(Checked {
        workflow,
        inputs,
        workspace,
        plugins,
        executor: new.executor,
    })
}

/// How a checked run is recorded.
pub struct Recording {
    /// Chosen by the caller (a run `wfhost serve` answered for), else new.
    pub run_id: Option<RunId>,
    pub max_steps: u64,
    pub session: Option<SessionTag>,
    /// Run even if another run is using the workspace.
    pub shared_workspace: bool,
    /// Where a rerun starts and what it starts with.
    pub rerun: Option<crate::rerun::Seed>,
}

/// A run recorded and held, ready to be driven from `state`.
pub struct Recorded {
    pub record: RunRecord,
    pub state: RunState,
    pub prepared: Prepared,
    /// This process executes the run until it is dropped.
    pub lock: RunLock,
}

/// Record `checked` in `store`: its pinned definition, its first event,
/// the run's lock and its workspace's.
pub fn record(store: &mut Store, checked: Checked, how: Recording) -> Result<Recorded, AppError> {
    let Checked {
        workflow,
        inputs,
        workspace,
        plugins,
        executor,
    } = checked;
    let pin = PinnedDefinition::of(&workflow);
    let now = wfhost_store::time::now_ms();
    let record = RunRecord {
        id: how.run_id.unwrap_or_else(|| wfhost_store::new_run_id(now)),
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
    options.max_steps = how.max_steps;
    options.workflow_hash = pin.hash.clone();
    options.plugins = plugin_digests(&plugins);
    options.default_executor = match &executor {
        wfhost_exec::Executor::Local => String::new(),
        other => other.to_string(),
    };
    options.inputs = inputs;
    if let Some(seed) = how.rerun {
        options.start_at = seed.start_at;
        options.rerun_of = Some(seed.rerun_of);
    }
    let started = engine::started_event(&workflow.workflow, &options);
    let lock = store.lock_run(&record.id).map_err(crate::store_error)?;
    let workspace_lock = workspace.lock(&record.id, store.home(), how.shared_workspace)?;
    store
        .create_run_in(&record, &pin.json, &started, how.session.as_ref())
        .map_err(crate::store_error)?;
    crate::run::note_served(store, &record.id)?;
    let state = RunState::start(&started).map_err(AppError::failed)?;
    Ok(Recorded {
        record,
        state,
        prepared: Prepared {
            loaded: workflow,
            plugins,
            workspace,
            workspace_lock,
            home: store.home().to_path_buf(),
        },
        lock,
    })
}

/// The workspace a run uses: `--workspace`, else the manifest's
/// `workspace` (relative to the manifest). Never a silent default.
/// The workspace when neither `--workspace` nor the manifest names one.
pub const WORKSPACE_ENV: &str = "WFHOST_WORKSPACE";

fn chosen_workspace(flag: Option<&Path>, workflow: &LoadedWorkflow) -> Result<PathBuf, AppError> {
    if let Some(dir) = flag {
        return Ok(dir.to_path_buf());
    }
    match &workflow.workflow.workspace {
        Some(dir) => Ok(workflow.base_dir().join(dir)),
        // The project's or user's default (`workspace` in wfhost.toml).
        None => match std::env::var_os(WORKSPACE_ENV).filter(|v| !v.is_empty()) {
            Some(dir) => Ok(PathBuf::from(dir)),
            None => Err(AppError::bad_input(format!(
                "no workspace: pass --workspace DIR (the directory the blocks work in), name one in {} (\"workspace\": \"DIR\", relative to the manifest), or set `workspace` in wfhost.toml",
                workflow.file.display()
            ))),
        },
    }
}
