//! The plugins of one workflow, loaded, checked and ready to run.
//!
//! [`PluginSet`] implements the engine core's [`WorkerHost`] roles
//! ([`BlockRunner`], [`Lanes`], [`SessionReads`], [`TelemetrySource`]) and
//! [`ActionInterpreter`]: every block runs in a fresh store instantiated
//! from a pre-instantiated component, with its own sandbox, memory cap,
//! timeout and captured logs. Whatever the guest does (trap, panic, error,
//! endless loop, memory bomb) becomes a failed block, never a host crash.
//!
//! [`WorkerHost`]: wfhost_core::run::engine::WorkerHost

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::ResourceTable;
use wasmtime::{Store, Trap};
use wasmtime_wasi::WasiCtxBuilder;
use wfhost_core::command::{BlockRef, EngineCommand};
use wfhost_core::manifest::LoadedWorkflow;
use wfhost_core::run::engine::{
    ActionInterpreter, BlockFailure, BlockRequest, BlockResult, BlockRunner, LaneKey, Lanes,
    RunView, SessionReads, Telemetry, TelemetrySource,
};
use wfhost_core::run::payload::{BlockContext, ContextSegment, Statistics, WorkerOutput};
use wfhost_core::workspace::restrictions::RestrictionPlan;

use crate::admission::{self, World};
use crate::bindings::types as wit;
use crate::bindings::{ActionHandler, ActionHandlerPre, WorkerPre};
use crate::cache::{CacheOutcome, ComponentCache};
use crate::capabilities::agent::AgentState;
use crate::capabilities::resources::RunResources;
use crate::capabilities::scope::{ExecScope, TelemetryTarget};
use crate::capture::CappedCapture;
use crate::guest_view::GuestView;
use crate::host_state::{BlockLog, HostState, MemoryCap};
use crate::links::GuestMounts;
use crate::runtime::{WasmRuntime, ticks};
use crate::sandbox::{GUEST_WORKSPACE, Sandbox};
use crate::write_watch::WriteWatch;

/// Where a plugin's component comes from.
#[derive(Debug, Clone)]
pub enum PluginSource {
    /// Embedded in the binary (first-party plugins).
    Builtin(&'static [u8]),
    File(PathBuf),
}

/// One plugin to load.
#[derive(Debug, Clone)]
pub struct PluginRequest {
    pub name: String,
    pub source: PluginSource,
    pub world: World,
    pub grants: Vec<String>,
    /// Where it may send HTTP requests, when it is granted `http`.
    pub http: Option<wfhost_core::policy::http::HttpGrant>,
}

/// A plugin that could not be loaded, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    pub plugin: String,
    /// `builtin` or the component's path.
    pub origin: String,
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: plugin `{}`: {}",
            self.origin, self.plugin, self.message
        )
    }
}

impl std::error::Error for LoadError {}

/// What loading one plugin did, for diagnostics and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginLoad {
    pub name: String,
    pub origin: String,
    pub world: World,
    pub digest: String,
    pub outcome: CacheOutcome,
    /// The signals the plugin declares it emits (`None`: it does not say).
    pub declared_signals: Option<Vec<String>>,
    /// The version of the `wfhost:plugin` package the component targets
    /// (`0.1.0`), read from its exports; it runs with that version's
    /// bindings.
    pub wit_version: String,
}

/// An instantiated action handler waiting for its next call.
struct IdleHandler {
    store: Store<HostState>,
    instance: ActionHandler,
}

pub struct PluginSet {
    runtime: Arc<WasmRuntime>,
    workspace: PathBuf,
    /// The workflow manifest's directory: relative agent commands are
    /// resolved against it, like plugin paths.
    manifest_dir: Option<PathBuf>,
    workers: HashMap<String, WorkerPre>,
    /// The `http` policy of each worker granted `http`.
    http: HashMap<String, Arc<wfhost_core::policy::http::Policy>>,
    /// Write limits of blocks that set them, by (node, block); the others
    /// get the defaults.
    limits: HashMap<(String, String), wfhost_core::manifest::WriteLimits>,
    /// The contract agent each block plays, by (node, block), where it
    /// plays one.
    roles: HashMap<(String, String), &'static str>,
    handlers: HashMap<String, ActionHandlerPre>,
    /// Instances of action handlers kept between calls, by handler name:
    /// a handler is a pure function of its input, so an instance that
    /// returned normally serves the next action (the store's limits and
    /// deadline are reset per call; one that trapped or erred is dropped).
    idle_handlers: std::sync::Mutex<HashMap<String, Vec<IdleHandler>>>,
    loads: Vec<PluginLoad>,
    /// Containers and Slurm jobs the run's plugins started.
    resources: Arc<RunResources>,
    /// Whether a worker is granted the `agent` capability.
    runs_agents: bool,
    /// The host's telemetry endpoint, when it serves one: agents' events
    /// are recorded in the run's log.
    telemetry: std::sync::OnceLock<Arc<crate::telemetry::TelemetryHub>>,
    /// The run's session folder, workspace-relative
    /// (`.agents-work/<session>`), when the run keeps one.
    session_folder: std::sync::Mutex<Option<String>>,
}

impl PluginSet {
    /// Load every plugin `workflow` uses: its blocks' workers and its action
    /// handler. `builtins` are the embedded first-party plugins by name.
    /// `workspace` must exist; it is canonicalized.
    pub fn for_workflow(
        runtime: Arc<WasmRuntime>,
        workflow: &LoadedWorkflow,
        builtins: &[(&str, &'static [u8])],
        workspace: &Path,
    ) -> Result<Self, LoadError> {
        let wf = &workflow.workflow;
        let mut requests: Vec<PluginRequest> = Vec::new();
        let mut want = |name: &str, world: World| {
            if requests.iter().any(|r| r.name == name && r.world == world) {
                return;
            }
            let builtin = || {
                PluginSource::Builtin(
                    builtins
                        .iter()
                        .find(|(n, _)| *n == name)
                        .map(|(_, b)| *b)
                        .unwrap_or(&[]),
                )
            };
            let (source, grants, http) = match wf.plugins.get(name) {
                Some(spec) => (
                    match &spec.path {
                        Some(path) => PluginSource::File(workflow.base_dir().join(path)),
                        None => builtin(),
                    },
                    spec.grants.clone(),
                    spec.http.clone(),
                ),
                None => (builtin(), Vec::new(), None),
            };
            requests.push(PluginRequest {
                name: name.to_string(),
                source,
                world,
                grants,
                http,
            });
        };
        want(&wf.action_handler, World::ActionHandler);
        for handler in wf.action_handlers.values() {
            want(handler, World::ActionHandler);
        }
        for node in wf.nodes.values() {
            for block in node.blocks.values() {
                // External blocks are performed by an MCP client, control
                // blocks by the engine.
                if !wfhost_core::manifest::is_engine_worker(&block.worker) {
                    want(&block.worker, World::Worker);
                }
            }
        }
        let mut set = Self::load(runtime, &requests, workspace)?;
        for (node_id, node) in &wf.nodes {
            for (block_id, block) in &node.blocks {
                if let Some(limits) = block.limits {
                    set.limits
                        .insert((node_id.clone(), block_id.clone()), limits);
                }
                let prefix = block.prompt.as_ref().and_then(|p| p.prefix.as_deref());
                if let Some(role) =
                    wfhost_core::agents::agent_protocol::agent_name(block_id, prefix)
                {
                    set.roles.insert((node_id.clone(), block_id.clone()), role);
                }
            }
        }
        // Agents run in the workspace, not where wfhost was started.
        set.manifest_dir = Some(
            std::path::absolute(workflow.base_dir())
                .unwrap_or_else(|_| workflow.base_dir().to_path_buf()),
        );
        Ok(set)
    }

    /// Load the given plugins.
    pub fn load(
        runtime: Arc<WasmRuntime>,
        requests: &[PluginRequest],
        workspace: &Path,
    ) -> Result<Self, LoadError> {
        let workspace = workspace.canonicalize().map_err(|e| LoadError {
            plugin: String::new(),
            origin: workspace.display().to_string(),
            message: format!("workspace is not usable: {e}"),
        })?;
        let resources = Arc::new(RunResources::new(runtime.config().slurm_watcher.clone()));
        let mut set = PluginSet {
            runtime,
            workspace,
            manifest_dir: None,
            workers: HashMap::new(),
            http: HashMap::new(),
            handlers: HashMap::new(),
            idle_handlers: Default::default(),
            loads: Vec::new(),
            resources,
            limits: HashMap::new(),
            roles: HashMap::new(),
            runs_agents: requests
                .iter()
                .any(|r| r.world == World::Worker && r.grants.iter().any(|g| g == "agent")),
            telemetry: std::sync::OnceLock::new(),
            session_folder: std::sync::Mutex::new(None),
        };
        for request in requests {
            set.load_one(request)?;
        }
        Ok(set)
    }

    fn load_one(&mut self, request: &PluginRequest) -> Result<(), LoadError> {
        let origin = match &request.source {
            PluginSource::Builtin(_) => "builtin".to_string(),
            PluginSource::File(path) => path.display().to_string(),
        };
        let fail = |message: String| LoadError {
            plugin: request.name.clone(),
            origin: origin.clone(),
            message,
        };
        let file_bytes;
        let bytes: &[u8] = match &request.source {
            PluginSource::Builtin([]) => {
                return Err(fail("no such built-in plugin".into()));
            }
            PluginSource::Builtin(bytes) => bytes,
            PluginSource::File(path) => {
                file_bytes = wfhost_core::workspace::regular_file::read_regular(
                    path,
                    wfhost_core::workspace::regular_file::MAX_PLUGIN_BYTES,
                )
                .map_err(|e| fail(format!("cannot read: {e}")))?;
                &file_bytes
            }
        };
        admission::check_header(bytes).map_err(|m| fail(format!("is {m}")))?;
        let rt = &self.runtime;
        let (component, outcome) = rt
            .cache
            .load(&rt.engine, bytes)
            .map_err(|e| fail(format!("is not a valid component: {e:#}")))?;
        let wit_version =
            admission::check_world(&rt.engine, &component, request.world).map_err(fail)?;
        admission::check_imports(&rt.engine, &component, &request.grants).map_err(fail)?;
        if let Some(policy) = self.http_policy(request).map_err(fail)? {
            self.http.insert(request.name.clone(), Arc::new(policy));
        }
        let pre = rt
            .linker
            .instantiate_pre(&component)
            .map_err(|e| fail(format!("cannot be linked: {e:#}")))?;
        match request.world {
            World::Worker => {
                let pre = WorkerPre::new(&wit_version, pre).map_err(|e| fail(format!("{e:#}")))?;
                self.workers.insert(request.name.clone(), pre);
            }
            World::ActionHandler => {
                let pre =
                    ActionHandlerPre::new(&wit_version, pre).map_err(|e| fail(format!("{e:#}")))?;
                self.handlers.insert(request.name.clone(), pre);
            }
        }
        self.loads.push(PluginLoad {
            name: request.name.clone(),
            origin,
            world: request.world,
            digest: ComponentCache::digest(bytes),
            outcome,
            declared_signals: admission::declared_signals(bytes),
            wit_version,
        });
        Ok(())
    }

    /// The `http` policy of a worker granted `http` (with the operator's
    /// allowlist), or `None`.
    fn http_policy(
        &self,
        request: &PluginRequest,
    ) -> Result<Option<wfhost_core::policy::http::Policy>, String> {
        let granted = request.grants.iter().any(|g| g == "http");
        match (&request.http, granted, request.world) {
            (Some(grant), true, World::Worker) => grant
                .policy(&request.name, self.runtime.config.http_allow.clone())
                .map(Some),
            (None, true, _) => Err(format!(
                "is granted `http` but no host: add `plugins.{}.http.allow`",
                request.name
            )),
            _ => Ok(None),
        }
    }

    /// Remove the containers the run's plugins started or keep dormant and
    /// cancel their unfinished Slurm jobs; call when the run comes to rest.
    pub async fn shutdown(&self) {
        self.resources.shutdown().await;
    }

    /// The run's session folder (workspace-relative), which artifact gates
    /// read.
    pub fn set_session_folder(&self, folder: &str) {
        *self.session_folder.lock().expect("not poisoned") = Some(folder.to_string());
    }

    /// The run's session folder (workspace-relative), if set.
    pub fn session_folder(&self) -> Option<String> {
        self.session_folder.lock().expect("not poisoned").clone()
    }

    /// `name` in the session folder: `Ok(None)` when it does not exist;
    /// read from the workspace's handle without passing a link.
    pub fn session_artifact_text(&self, name: &str) -> Result<Option<String>, String> {
        let Some(folder) = self.session_folder.lock().expect("not poisoned").clone() else {
            return Err("this run keeps no session folder".into());
        };
        let rel = format!("{folder}/{name}");
        let limit = wfhost_core::agents::artifact_content::MAX_ARTIFACT_BYTES as u64 + 1;
        match wfhost_core::workspace::read_file(&self.workspace, &rel, limit) {
            Ok(bytes) => String::from_utf8(bytes)
                .map(Some)
                .map_err(|_| format!("{rel} is not UTF-8 text")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{rel}: {e}")),
        }
    }

    /// What each plugin load did (cache hit or compile).
    pub fn loads(&self) -> &[PluginLoad] {
        &self.loads
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    fn new_store(
        &self,
        mut wasi: WasiCtxBuilder,
        mounts: GuestMounts,
        watch: Option<WriteWatch>,
        timeout: Duration,
        scope: Option<ExecScope>,
        http: Option<Arc<wfhost_core::policy::http::Policy>>,
    ) -> Store<HostState> {
        let config = &self.runtime.config;
        let stdout = CappedCapture::new(config.max_log_bytes);
        let stderr = CappedCapture::new(config.max_log_bytes);
        wasi.stdout(stdout.clone()).stderr(stderr.clone());
        let state = HostState {
            _ticking: self.runtime.ticker.start(),
            scope,
            wasi: wasi.build(),
            table: ResourceTable::new(),
            mounts,
            ticks_left: 0,
            slice: 0,
            watch,
            limit_hit: None,
            agent: AgentState::default(),
            memory: MemoryCap {
                limit: config.memory_limit,
                hit: false,
            },
            log: BlockLog::with_cap(config.max_log_bytes),
            stdout,
            stderr,
            http: crate::capabilities::http::HttpState::new(http, config.secrets.clone()),
            http_ctx: wasmtime_wasi_http::WasiHttpCtx::new(),
        };
        let mut store = Store::new(&self.runtime.engine, state);
        store.limiter(|s| &mut s.memory);
        store.epoch_deadline_callback(deadline_slice_ended);
        arm_deadline(&mut store, timeout);
        store
    }

    /// Execute one block with its worker plugin.
    #[tracing::instrument(name = "plugin", level = "debug", skip_all, fields(plugin = %request.worker, lane = request.lane.as_ref().map(|k| k.lane.as_str())))]
    pub async fn run_worker(&self, request: BlockRequest) -> BlockResult {
        // Everything the guest reads, and the failure that later plugins
        // read as a WORKER_ERROR segment, passes one view: in the guest's
        // terms, without the host's paths — whichever step failed.
        let lane = request
            .lane
            .as_ref()
            .and_then(|k| crate::lanes::lane_path(k).ok());
        let view = GuestView::new(lane.as_deref().unwrap_or(&self.workspace), &self.workspace);
        let mut result = self.run_worker_in(request, &view).await;
        if let Err(failure) = &mut result.outcome {
            failure.message = view.text(&failure.message);
        }
        result
    }

    async fn run_worker_in(&self, request: BlockRequest, view: &GuestView) -> BlockResult {
        let name = request.worker.clone();
        let failed = |message: String| BlockResult {
            outcome: Err(BlockFailure::new(message)),
            log: Vec::new(),
        };
        let Some(pre) = self.workers.get(&name) else {
            return failed(format!("no worker plugin named `{name}` is loaded"));
        };
        let plan = match RestrictionPlan::new(request.context.file_restrictions.as_deref()) {
            Ok(plan) => plan,
            Err(e) => return failed(e.to_string()),
        };
        // The run id names directories (exec bundles, lanes) and goes
        // into batch scripts: checked before anything is made of it.
        let run_id = match wfhost_core::ids::RunId::parse(&request.context.execution_id) {
            Ok(id) => id,
            Err(e) => return failed(e.to_string()),
        };
        // A lane works in its own workspace.
        let workspace = match &request.lane {
            Some(key) => match crate::lanes::lane_path(key) {
                Ok(path) => path,
                Err(e) => return failed(e),
            },
            None => self.workspace.clone(),
        };
        // `.output/` exists before the first block runs: the sandbox makes
        // it (with its `.gitignore`) when it mounts it.
        let sandbox = match Sandbox::prepare(&workspace, &plan) {
            Ok(s) => s,
            Err(e) => return failed(e),
        };
        // Guest filesystem calls run in place: a hop to tokio's blocking
        // pool per call cost more than the block itself. Nothing a guest
        // can open blocks without end: special files are refused at
        // `open-at` (`crate::special_files`).
        let mut wasi = WasiCtxBuilder::new();
        wasi.allow_blocking_current_thread(true);
        if let Err(e) = sandbox.apply_to(&mut wasi) {
            return failed(e);
        }
        let ctx = &request.context;
        // `NODE_ID` is the agent contract's name of the block (or lane),
        // the same for the guest, its commands and its agents.
        let agent_id = match &request.lane {
            Some(key) => key.agent_id(),
            None => format!("{}.{}", ctx.node_id, ctx.block_id),
        };
        let mut guest_env = contract_env(ctx, &agent_id);
        // The run's session folder, workspace-relative: the guest, its
        // commands and its agents all work in the workspace.
        if let Some(folder) = self.session_folder.lock().expect("not poisoned").clone() {
            guest_env.push(("SESSION_DIR".into(), folder));
        }
        wasi.envs(&guest_env);
        let timeout = request
            .timeout
            .unwrap_or(self.runtime.config.default_timeout);
        let mut env = guest_env;
        // Commands run on the host: they see host paths.
        for (key, value) in env.iter_mut() {
            if key == "OUTPUT_DIR" {
                *value = workspace.join(".output").display().to_string();
            }
        }
        let exec = ExecScope {
            workspace: workspace.clone(),
            run_id,
            node_id: ctx.node_id.clone(),
            block_id: ctx.block_id.clone(),
            step: ctx.step_index,
            attempt: ctx.attempt,
            env,
            deadline: deadline_after(timeout),
            resources: self.resources.clone(),
            default_executor: self.runtime.config.default_executor.clone(),
            output_cap: self.runtime.config.max_exec_output_bytes,
            agent_id,
            restrictions: ctx.file_restrictions.clone(),
            manifest_dir: self.manifest_dir.clone(),
            telemetry: self.telemetry_target(&request),
            lane: request.lane.clone(),
            container_forward: wfhost_exec::forward::from_config(&ctx.config)
                .map_err(|e| format!("config.executor.container.forward: {e}")),
            agent: wfhost_core::agents::presets::Settings::from_config(&ctx.config)
                .map_err(|(field, e)| format!("config.{field}: {e}")),
            secrets: self.runtime.config.secrets.clone(),
            role: self
                .roles
                .get(&(ctx.node_id.clone(), ctx.block_id.clone()))
                .map(|r| r.to_string()),
        };
        let limits = self
            .limits
            .get(&(ctx.node_id.clone(), ctx.block_id.clone()))
            .copied()
            .unwrap_or_default();
        let mounts = GuestMounts::new(sandbox.mounts());
        let writable = sandbox.mounts().iter().filter(|m| m.writable);
        let roots: Vec<PathBuf> = writable.map(|m| m.host.clone()).collect();
        // While the guest waits in a host call (an exec command, an agent,
        // a container), the epoch check does not run: the same limits are
        // looked at beside the call, over the live workspace too, where
        // host processes write.
        let mut host_roots = roots.clone();
        if !host_roots.contains(&workspace) {
            host_roots.push(workspace.clone());
        }
        let mut host_watch = WriteWatch::new(host_roots, limits);
        let watch = WriteWatch::new(roots, limits);
        let http = self.http.get(&name).cloned();
        let mut store = self.new_store(wasi, mounts, Some(watch), timeout, Some(exec), http);

        let context = view.context(&request.context);
        let payload: Vec<wit::ContextSegment> =
            request.payload.iter().map(|s| view.segment(s)).collect();
        let (call, limit_hit) = within_deadline(
            timeout,
            Some(&mut host_watch),
            pre.run(&mut store, &context, &payload),
        )
        .await;
        if limit_hit.is_some() {
            store.data_mut().limit_hit = limit_hit;
        }
        let mut outcome = match call {
            Ok(Ok(output)) => self.accept_output(&name, output),
            Ok(Err(e)) => Err(plugin_failure(&name, &e)),
            Err(e) => Err(BlockFailure::new(describe_trap(
                &name,
                &e,
                store.data(),
                timeout,
            ))),
        };
        // What the block's agents consumed counts with what the guest
        // reports itself.
        let (agent_tokens, agent_usage) = (store.data().agent.tokens, store.data().agent.usage);
        if let Ok(output) = &mut outcome {
            output.statistics.tokens_used =
                output.statistics.tokens_used.saturating_add(agent_tokens);
            output.statistics.usage.add(agent_usage);
        }
        let log = drain_log(&mut store);
        drop(store);
        apply_changes(sandbox, &mut outcome, &limits);
        BlockResult { outcome, log }
    }

    /// Whether a worker may run agent CLIs (is granted `agent`): only then
    /// is there telemetry to receive.
    pub fn runs_agents(&self) -> bool {
        self.runs_agents
    }

    /// Record what the run's agents send to `hub` (the host serves it).
    /// Set once: later calls change nothing.
    pub fn record_telemetry(&self, hub: Arc<crate::telemetry::TelemetryHub>) {
        let _ = self.telemetry.set(hub);
    }

    fn telemetry_target(&self, request: &BlockRequest) -> TelemetryTarget {
        if let Some(url) = &self.runtime.config.telemetry_url {
            return TelemetryTarget::External(url.clone());
        }
        match self.telemetry.get() {
            None => TelemetryTarget::Off,
            Some(hub) => TelemetryTarget::Recorded {
                hub: Arc::clone(hub),
                step: request
                    .lane
                    .as_ref()
                    .map_or(request.context.step_index, |k| k.step),
                lane: request.lane.as_ref().map(|k| k.lane.clone()),
            },
        }
    }

    fn accept_output(
        &self,
        name: &str,
        output: wit::WorkerOutput,
    ) -> Result<WorkerOutput, BlockFailure> {
        let size: usize = output
            .payload
            .iter()
            .map(|s| s.id.len() + s.kind.len() + s.content.len())
            .sum::<usize>()
            + output.signal.len()
            + output.structured_output.as_ref().map_or(0, String::len);
        let cap = self.runtime.config.max_output_bytes;
        if size > cap {
            return Err(BlockFailure::new(format!(
                "plugin `{name}` returned {size} bytes of output, over the cap of {cap} bytes"
            )));
        }
        if output.signal.trim().is_empty() {
            return Err(BlockFailure::new(format!(
                "plugin `{name}` returned an empty signal"
            )));
        }
        Ok(WorkerOutput {
            payload: output
                .payload
                .into_iter()
                .map(|s| ContextSegment::new(s.id, s.kind, s.content))
                .collect(),
            signal: output.signal,
            structured_output: output.structured_output,
            statistics: Statistics {
                tokens_used: output.statistics.tokens_used,
                lines_written: output.statistics.lines_written,
                ..Default::default()
            },
            written: Vec::new(),
        })
    }

    /// Interpret one action with the named action-handler plugin.
    #[tracing::instrument(name = "plugin", level = "debug", skip_all, fields(plugin = %handler))]
    pub async fn interpret_action(
        &self,
        handler: &str,
        action: &str,
        view: &RunView,
    ) -> Result<EngineCommand, String> {
        let Some(pre) = self.handlers.get(handler) else {
            return Err(format!(
                "no action handler plugin named `{handler}` is loaded"
            ));
        };
        let timeout = self.runtime.config.action_timeout;
        let view = wit::RunView {
            workflow_id: view.workflow_id.clone(),
            execution_id: view.execution_id.clone(),
            node_id: view.node_id.clone(),
            block_id: view.block_id.clone(),
            signal: view.signal.clone(),
            step_index: view.step_index,
            return_stack: view.return_stack.clone(),
        };
        let (mut store, instance) = match self.take_idle_handler(handler) {
            Some(IdleHandler { store, instance }) => (store, Some(instance)),
            None => (
                self.new_store(
                    WasiCtxBuilder::new(),
                    GuestMounts::default(),
                    None,
                    timeout,
                    None,
                    None,
                ),
                None,
            ),
        };
        arm_deadline(&mut store, timeout);
        let (call, _) = within_deadline(timeout, None, async {
            let instance = match instance {
                Some(i) => i,
                None => pre.instantiate(&mut store).await?,
            };
            let command = instance.interpret(&mut store, action, &view).await?;
            Ok((command, instance))
        })
        .await;
        match call {
            Ok((Ok(command), instance)) => {
                self.park_handler(handler, IdleHandler { store, instance });
                Ok(from_wit_command(command))
            }
            Ok((Err(e), _)) => Err(format!("handler `{handler}`: {}: {}", e.code, e.message)),
            Err(e) => Err(describe_trap(handler, &e, store.data(), timeout)),
        }
    }

    fn take_idle_handler(&self, handler: &str) -> Option<IdleHandler> {
        let mut idle = self.idle_handlers.lock().ok()?;
        idle.get_mut(handler)?.pop()
    }

    fn park_handler(&self, handler: &str, mut parked: IdleHandler) {
        let data = parked.store.data_mut();
        data.log = BlockLog::with_cap(self.runtime.config.max_log_bytes);
        if let Ok(mut idle) = self.idle_handlers.lock() {
            idle.entry(handler.to_string()).or_default().push(parked);
        }
    }
}

impl BlockRunner for PluginSet {
    fn run_block(&self, request: BlockRequest) -> impl Future<Output = BlockResult> + Send {
        let lane = request.lane.clone();
        let resources = self.resources.clone();
        let run = self.run_worker(request);
        async move {
            let result = run.await;
            if let Some(lane) = &lane {
                resources.lane_finished(lane).await;
            }
            result
        }
    }
}

impl Lanes for PluginSet {
    fn lane_window(
        &self,
        block: &wfhost_core::manifest::Block,
        max_concurrent: Option<u32>,
    ) -> usize {
        let config = self.runtime.config();
        crate::lanes::window(
            block,
            max_concurrent,
            &config.default_executor,
            config.lane_capacity(),
        )
    }

    fn lanes_starting(&self, lanes: &[LaneKey], max_concurrent: Option<u32>) {
        self.resources.lanes_starting(lanes, max_concurrent);
    }

    fn create_lane(&self, lane: &LaneKey) -> impl Future<Output = Result<(), String>> + Send {
        crate::lanes::create(&self.workspace, lane)
    }

    fn lane_exists(&self, lane: &LaneKey) -> bool {
        crate::lanes::exists(lane)
    }

    fn lane_changes(
        &self,
        lane: &LaneKey,
    ) -> impl Future<Output = Result<Vec<String>, String>> + Send {
        crate::lanes::changes(&self.workspace, lane)
    }

    fn merge_lane(
        &self,
        lane: &LaneKey,
        files: &[String],
    ) -> impl Future<Output = Result<Vec<String>, String>> + Send {
        crate::lanes::merge(&self.workspace, lane, files)
    }

    fn remove_lanes(&self, run_id: &str, step: u64) -> impl Future<Output = ()> + Send {
        crate::lanes::remove_step(&self.workspace, run_id, step)
    }

    fn wait_until(&self, due_at_ms: i64) -> impl Future<Output = ()> + Send {
        let left = due_at_ms.saturating_sub(wfhost_core::time::now_ms());
        tokio::time::sleep(Duration::from_millis(u64::try_from(left).unwrap_or(0)))
    }
}

impl SessionReads for PluginSet {
    fn session_artifact(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<String>, String>> + Send {
        std::future::ready(self.session_artifact_text(name))
    }
}

impl TelemetrySource for PluginSet {
    async fn telemetry(&self) -> Vec<Telemetry> {
        match self.telemetry.get() {
            Some(hub) => hub.next().await,
            None => std::future::pending().await,
        }
    }

    fn telemetry_now(&self) -> Vec<Telemetry> {
        self.telemetry.get().map(|h| h.take()).unwrap_or_default()
    }
}

impl ActionInterpreter for PluginSet {
    fn interpret(
        &self,
        handler: &str,
        action: &str,
        view: &RunView,
    ) -> impl Future<Output = Result<EngineCommand, String>> + Send {
        self.interpret_action(handler, action, view)
    }
}

/// The seed-000 environment contract, as far as it applies to a sandboxed
/// worker (no telemetry: plugins have no network). `node_id` is the
/// block's `NODE_ID`: `node.block`, or `node.block.lane` in a lane.
fn contract_env(ctx: &BlockContext, node_id: &str) -> Vec<(String, String)> {
    let restrictions =
        wfhost_core::workspace::restrictions::env_value(ctx.file_restrictions.as_deref());
    vec![
        ("WORKFLOW_ID".into(), ctx.workflow_id.clone()),
        ("EXECUTION_ID".into(), ctx.execution_id.clone()),
        ("NODE_ID".into(), node_id.to_string()),
        ("BLOCK_ID".into(), ctx.block_id.clone()),
        ("STEP_INDEX".into(), ctx.step_index.to_string()),
        ("FILE_RESTRICTIONS".into(), restrictions),
        ("TELEMETRY_ENABLED".into(), "0".into()),
        ("OUTPUT_DIR".into(), format!("{GUEST_WORKSPACE}/.output")),
        (
            "PREVIOUS_BLOCK_ID".into(),
            ctx.previous_block_id.clone().unwrap_or_default(),
        ),
    ]
}

fn from_wit_ref(r: wit::BlockRef) -> BlockRef {
    BlockRef {
        node: r.node,
        block: r.block,
    }
}

fn from_wit_command(c: wit::EngineCommand) -> EngineCommand {
    match c {
        wit::EngineCommand::Jump(r) => EngineCommand::Jump(from_wit_ref(r)),
        wit::EngineCommand::Call(t) => EngineCommand::Call {
            node: t.node,
            return_to: t.return_to.map(from_wit_ref),
        },
        wit::EngineCommand::Return => EngineCommand::Return,
        wit::EngineCommand::End => EngineCommand::End,
        wit::EngineCommand::Fail(reason) => EngineCommand::Fail(reason),
        wit::EngineCommand::Gate(prompt) => EngineCommand::Gate(prompt),
    }
}

fn drain_log(store: &mut Store<HostState>) -> Vec<String> {
    let state = store.data_mut();
    let mut lines = std::mem::take(&mut state.log.lines);
    lines.extend(
        state
            .http
            .take_notes()
            .into_iter()
            .map(|l| format!("[wfhost] {l}")),
    );
    if state.log.dropped > 0 {
        lines.push(format!(
            "[wfhost] {} log lines dropped past the cap",
            state.log.dropped
        ));
    }
    for (stream, capture) in [("stdout", &state.stdout), ("stderr", &state.stderr)] {
        let (text, dropped) = capture.take();
        lines.extend(text.lines().map(|l| format!("[{stream}] {l}")));
        if dropped > 0 {
            lines.push(format!(
                "[wfhost] {dropped} bytes of {stream} dropped past the cap"
            ));
        }
    }
    lines
}

/// How long after its timeout a guest call still waiting in a host call is
/// abandoned. Host capabilities end their own work at the deadline (an exec
/// command or agent is killed then) and return; the grace lets the plugin
/// report that as its own failure instead of being cut off mid-answer.
const HOST_CALL_GRACE: Duration = Duration::from_millis(500);

/// Epoch ticks per deadline slice: the write limits are looked at between
/// slices (`WriteWatch::check_if_due` decides whether it is time).
const SLICE_TICKS: u64 = 4;

/// Give a store `timeout` from now, counted in slices.
fn arm_deadline(store: &mut Store<HostState>, timeout: Duration) {
    let data = store.data_mut();
    data.ticks_left = ticks(timeout);
    data.slice = data.ticks_left.min(SLICE_TICKS);
    let slice = data.slice;
    store.set_epoch_deadline(slice);
}

/// The end of a deadline slice: the timeout, a passed write limit, or
/// another slice.
fn deadline_slice_ended(
    mut ctx: wasmtime::StoreContextMut<'_, HostState>,
) -> wasmtime::Result<wasmtime::UpdateDeadline> {
    let state = ctx.data_mut();
    state.ticks_left = state.ticks_left.saturating_sub(state.slice);
    if state.ticks_left == 0 {
        return Err(wasmtime::Error::new(Trap::Interrupt));
    }
    if let Some(watch) = state.watch.as_mut()
        && let Err(limit) = watch.check_if_due()
    {
        state.limit_hit = Some(limit);
        return Err(wasmtime::Error::new(Trap::Interrupt));
    }
    state.slice = state.ticks_left.min(SLICE_TICKS);
    Ok(wasmtime::UpdateDeadline::Continue(state.slice))
}

/// Race a guest call against its timeout. The epoch deadline stops a guest
/// running wasm code; this stops one waiting in a host call (a sleep, a
/// poll, an exec command): at the timeout plus [`HOST_CALL_GRACE`], the
/// call is dropped and reported as the same interrupt. With a `watch`, the
/// write limits are looked at while the call waits; over one, the call is
/// dropped (which kills the commands it was waiting on) and the limit is
/// returned beside the interrupt.
async fn within_deadline<T>(
    timeout: Duration,
    watch: Option<&mut WriteWatch>,
    call: impl Future<Output = wasmtime::Result<T>>,
) -> (wasmtime::Result<T>, Option<String>) {
    let limit = timeout.saturating_add(HOST_CALL_GRACE);
    let interrupted = || Err(wasmtime::Error::new(Trap::Interrupt));
    let watching = async {
        match watch {
            Some(watch) => loop {
                tokio::time::sleep(crate::write_watch::CHECK_EVERY).await;
                if let Err(limit) = watch.check_if_due() {
                    return limit;
                }
            },
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        result = tokio::time::timeout(limit, call) => match result {
            Ok(result) => (result, None),
            Err(_) => (interrupted(), None),
        },
        limit = watching => (interrupted(), Some(limit)),
    }
}

/// Turn a wasmtime error into a failure message that says what happened.
/// The block failure of a worker that returned plugin error `e`: a
/// `bad-config` one is permanent (no retry mends it).
fn plugin_failure(name: &str, e: &wit::PluginError) -> BlockFailure {
    BlockFailure::of_plugin_error(
        &e.code,
        format!("plugin `{name}` failed: {}: {}", e.code, e.message),
    )
}

fn describe_trap(
    plugin: &str,
    error: &wasmtime::Error,
    state: &HostState,
    timeout: Duration,
) -> String {
    if state.memory.hit {
        return format!(
            "plugin `{plugin}` exceeded its memory limit of {} MiB",
            state.memory.limit >> 20
        );
    }
    if let Some(limit) = &state.limit_hit {
        return format!("plugin `{plugin}` was stopped: {limit}");
    }
    if error.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
        return format!("plugin `{plugin}` timed out after {timeout:?}");
    }
    let mut message = format!("plugin `{plugin}` trapped: {}", trap_cause(error));
    // A panicking Rust guest prints its message to stderr before aborting.
    let stderr = state.stderr.peek();
    let stderr = stderr.trim();
    if !stderr.is_empty() {
        let tail: String = stderr
            .chars()
            .rev()
            .take(2000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        message.push_str(&format!("; guest stderr: {}", tail.replace('\n', " | ")));
    }
    message
}

/// What made a guest stop, in words: the kind of trap, an `exit` call, or
/// the innermost error (a string that is not UTF-8, say), never only
/// wasmtime's "error while executing at wasm backtrace".
fn trap_cause(error: &wasmtime::Error) -> String {
    if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return format!(
            "the plugin called exit({}) instead of returning from the call",
            exit.0
        );
    }
    if let Some(trap) = error.downcast_ref::<Trap>() {
        let kind = match trap {
            Trap::StackOverflow => "stack overflow",
            Trap::UnreachableCodeReached => {
                "unreachable code reached (a Rust guest panicked or aborted)"
            }
            Trap::MemoryOutOfBounds => {
                "out-of-bounds memory access (also how a stack overflow in the guest's own stack shows)"
            }
            Trap::IntegerDivisionByZero => "integer division by zero",
            Trap::IntegerOverflow => "integer overflow",
            Trap::BadConversionToInteger => "invalid conversion to integer",
            Trap::IndirectCallToNull | Trap::BadSignature => "invalid indirect call",
            Trap::TableOutOfBounds => "out-of-bounds table access",
            Trap::HeapMisaligned => "misaligned memory access",
            _ => "",
        };
        return if kind.is_empty() {
            format!("wasm trap: {trap}")
        } else {
            format!("wasm trap: {kind}")
        };
    }
    let causes: Vec<String> = error
        .chain()
        .map(|c| first_line(&c.to_string()).trim().to_string())
        .filter(|l| !l.is_empty() && !l.starts_with("error while executing at wasm backtrace"))
        .collect();
    if causes.is_empty() {
        first_line(&format!("{error:#}")).to_string()
    } else {
        causes.join(": ")
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

/// `now + timeout`, saturating far in the future rather than overflowing
/// (manifest durations are bounded; this keeps any other caller safe).
fn deadline_after(timeout: Duration) -> std::time::Instant {
    let now = std::time::Instant::now();
    now.checked_add(timeout)
        .or_else(|| now.checked_add(Duration::from_secs(365 * 24 * 3600)))
        .unwrap_or(now)
}

/// A successful block's staged changes applied, the files they wrote
/// recorded with its output; a refusal (a write outside its restrictions,
/// over its limits) fails the block instead.
fn apply_changes(
    sandbox: crate::sandbox::Sandbox,
    outcome: &mut Result<WorkerOutput, BlockFailure>,
    limits: &wfhost_core::manifest::WriteLimits,
) {
    match sandbox.finish(outcome.is_ok(), limits) {
        Ok(applied) => {
            if let Ok(output) = outcome {
                output.written = applied;
            }
        }
        Err(message) => *outcome = Err(BlockFailure::new(message)),
    }
}

#[cfg(test)]
mod message_tests {
    use super::*;

    #[test]
    fn trap_causes_are_named() {
        let exit = wasmtime::Error::new(wasmtime_wasi::I32Exit(0));
        assert!(
            trap_cause(&exit).contains("exit(0)"),
            "{}",
            trap_cause(&exit)
        );
        let trap = wasmtime::Error::new(Trap::StackOverflow)
            .context("error while executing at wasm backtrace:\n    0: f");
        assert_eq!(trap_cause(&trap), "wasm trap: stack overflow");
        let utf8 = wasmtime::Error::msg("invalid utf-8 sequence of 1 bytes from index 3")
            .context("error while executing at wasm backtrace:\n    0: f");
        assert!(
            trap_cause(&utf8).contains("invalid utf-8"),
            "{}",
            trap_cause(&utf8)
        );
    }
}
