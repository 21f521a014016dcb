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

/// Loads plugins once per (definition, workspace) and drives runs with
/// them.
pub struct McpExecutor {
    home: PathBuf,
    runtime: RuntimeChoice,
    plugins: Mutex<HashMap<(String, PathBuf), Arc<PluginSet>>>,
}

impl McpExecutor {
    pub fn new(home: PathBuf, runtime: RuntimeChoice) -> Self {
        McpExecutor {
            home,
            runtime,
            plugins: Mutex::new(HashMap::new()),
        }
    }

    /// The plugins of `loaded`, whose pinned hash is `hash`, for runs in
    /// `workspace`: loaded once, then found by the hash (a run's record
    /// carries it, so an advance does not hash the definition again).
    fn plugin_set(
        &self,
        loaded: &LoadedWorkflow,
        hash: &str,
        workspace: &Workspace,
    ) -> Result<Arc<PluginSet>, String> {
        let key = (hash.to_string(), workspace.path().to_path_buf());
        if let Some(found) = self.plugins.lock().expect("not poisoned").get(&key) {
            return Ok(found.clone());
        }
        let runtime = start_runtime(
            &self.runtime,
            wfhost_exec::Executor::Local,
            Some(&self.home),
            None,
        )
        .map_err(|e| e.message)?;
        let set = Arc::new(
            load_plugins(runtime, loaded, workspace.path(), Some(&self.home))
                .map_err(|e| e.message)?,
        );
        self.plugins
            .lock()
            .expect("not poisoned")
            .insert(key, set.clone());
        Ok(set)
    }

    fn workspace(&self, dir: &Path) -> Result<Workspace, String> {
        Workspace::open(dir, &self.home, &self.runtime).map_err(|e| e.message)
    }
}

impl Executor for McpExecutor {
    fn prepare(
        &self,
        loaded: &LoadedWorkflow,
        workspace: &Path,
    ) -> Result<BTreeMap<String, String>, String> {
        let hash = PinnedDefinition::of(loaded).hash;
        let workspace = self.workspace(workspace)?;
        Ok(plugin_digests(
            &*self.plugin_set(loaded, &hash, &workspace)?,
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
            let workspace = self.workspace(Path::new(&run.workspace))?;
            let plugins = self.plugin_set(loaded, &run.workflow_hash, &workspace)?;
            // Loaded by this process, perhaps after the run started in
            // another: the components must be the ones the run pinned.
            check_pinned_plugins(&run.id, &state.plugins, &plugin_digests(&plugins))
                .map_err(|e| e.message)?;
            // One run executes in a workspace at a time, whichever surface
            // started it.
            let _lock = workspace
                .lock(&run.id, &self.home, false)
                .map_err(|e| e.message)?;
            let files = Store::open_existing(&self.home)
                .ok()
                .and_then(|store| SessionFiles::load(&store, run, branch, &loaded.workflow));
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
