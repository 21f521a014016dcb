//! The executor of `wfhost mcp`: the blocks between the ones an MCP client
//! performs run here, with plugins loaded once per (definition, workspace).
//! An advance holds the run's workspace lock while it executes (as a CLI
//! run does) and keeps the run's session folder (`.agents-work/`) current.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use wfhost_core::manifest::LoadedWorkflow;
use wfhost_core::manifest::pinning::PinnedDefinition;
use wfhost_core::run::engine::{self, ExternalAnswer};
use wfhost_core::run::event::{Event, EventSink, QueuedJob, SinkError};
use wfhost_core::run::state::RunState;
use wfhost_mcp::service::{Executing, Executor};
use wfhost_runtime::PluginSet;
use wfhost_store::{RunRecord, Store};

use crate::plugins::{
    RuntimeChoice, check_pinned_plugins, load_plugins, plugin_digests, start_runtime,
};
use crate::session_files::{Recorded, SessionFiles, SessionSink};
use crate::workspace::Workspace;

/// A workspace opened for runs, and the plugins loaded for it.
#[derive(Clone)]
struct Loaded {
    workspace: Workspace,
    plugins: Arc<PluginSet>,
}

/// Loads plugins once per (definition, workspace) and drives runs with
/// them.
pub struct McpExecutor {
    home: PathBuf,
    runtime: RuntimeChoice,
    /// By (pinned hash, workspace as named): the workspace, opened (checked
    /// and resolved) once, and the plugins loaded for it.
    plugins: Mutex<HashMap<(String, PathBuf), Loaded>>,
    /// A connection to the store for reading runs' histories (session
    /// files), opened when first needed.
    store: Mutex<Option<Store>>,
}

impl McpExecutor {
    pub fn new(home: PathBuf, runtime: RuntimeChoice) -> Self {
        McpExecutor {
            home,
            runtime,
            plugins: Mutex::new(HashMap::new()),
            store: Mutex::new(None),
        }
    }

    /// The session files of branch `branch` of `run`, when its workflow
    /// keeps them.
    fn session_files(
        &self,
        run: &RunRecord,
        branch: u32,
        loaded: &LoadedWorkflow,
    ) -> Option<SessionFiles> {
        if !loaded.workflow.uses_session_files() {
            return None;
        }
        let mut store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        if store.is_none() {
            *store = Store::open_existing(&self.home).ok();
        }
        SessionFiles::load(store.as_ref()?, run, branch, &loaded.workflow)
    }

    /// The workspace `dir` opened and the plugins of `loaded` (whose
    /// pinned hash is `hash`) for runs in it: done once, then found by the
    /// hash (a run's record carries it, so an advance does not hash the
    /// definition again).
    fn loaded(&self, loaded: &LoadedWorkflow, hash: &str, dir: &Path) -> Result<Loaded, String> {
        let key = (hash.to_string(), dir.to_path_buf());
        if let Some(found) = self.plugins.lock().expect("not poisoned").get(&key) {
            return Ok(found.clone());
        }
        let workspace = Workspace::open(dir, &self.home, &self.runtime).map_err(|e| e.message)?;
        let runtime = start_runtime(
            &self.runtime,
            wfhost_exec::Executor::Local,
            Some(&self.home),
            None,
        )
        .map_err(|e| e.message)?;
        let plugins = Arc::new(
            load_plugins(runtime, loaded, workspace.path(), Some(&self.home))
                .map_err(|e| e.message)?,
        );
        let found = Loaded { workspace, plugins };
        self.plugins
            .lock()
            .expect("not poisoned")
            .insert(key, found.clone());
        Ok(found)
    }
}

impl Executor for McpExecutor {
    fn prepare(
        &self,
        loaded: &LoadedWorkflow,
        workspace: &Path,
    ) -> Result<BTreeMap<String, String>, String> {
        let hash = PinnedDefinition::of(loaded).hash;
        Ok(plugin_digests(
            &self.loaded(loaded, &hash, workspace)?.plugins,
        ))
    }

    fn execute<'a>(
        &'a self,
        run: &'a RunRecord,
        branch: u32,
        loaded: &'a LoadedWorkflow,
        state: RunState,
        answer: Option<ExternalAnswer>,
        sink: &'a mut dyn EventSink,
    ) -> Executing<'a> {
        Box::pin(async move {
            let Loaded { workspace, plugins } =
                self.loaded(loaded, &run.workflow_hash, Path::new(&run.workspace))?;
            // Loaded by this process, perhaps after the run started in
            // another: the components must be the ones the run pinned.
            check_pinned_plugins(&run.id, &state.plugins, &plugin_digests(&plugins))
                .map_err(|e| e.message)?;
            // One run executes in a workspace at a time, whichever surface
            // started it.
            let _lock = workspace
                .lock(&run.id, &self.home, false)
                .map_err(|e| e.message)?;
            let files = self.session_files(run, branch, loaded);
            let mut sink = SessionSink::new(Unstamped(sink), files);
            let wf = &loaded.workflow;
            let report = match answer {
                Some(answer) => {
                    engine::complete_external(wf, &*plugins, &*plugins, state, &mut sink, answer)
                        .await
                }
                None => engine::drive(wf, &*plugins, &*plugins, state, &mut sink).await,
            };
            report.map_err(|e| e.to_string())
        })
    }
}

/// The MCP service's sink, whose events the session files date "now".
struct Unstamped<'a>(&'a mut dyn EventSink);

impl Recorded for Unstamped<'_> {
    fn recorded_at(&self) -> Vec<i64> {
        Vec::new()
    }
}

impl EventSink for Unstamped<'_> {
    fn append(&mut self, events: &[Event]) -> Result<(), SinkError> {
        self.0.append(events)
    }

    fn append_with_job(&mut self, events: &[Event], job: &QueuedJob) -> Result<(), SinkError> {
        self.0.append_with_job(events, job)
    }

    fn new_gate_id(&mut self) -> Result<String, SinkError> {
        self.0.new_gate_id()
    }

    fn new_gate_ids(&mut self, n: usize) -> Result<Vec<String>, SinkError> {
        self.0.new_gate_ids(n)
    }
}
