//! The job runner (`wfhost agent`): lease jobs from a `wfhost serve`, run each with the
//! runtime `wfhost run` uses (the wasm sandbox; exec, container and Slurm
//! executors), send heartbeats while it runs, report the result. An agent
//! that loses its lease (the server gave the job to another agent, or the
//! run was cancelled) stops the job — its processes, containers and Slurm
//! jobs with it — and says so.
//!
//! The workspace contract: agent and server see the run's workspace at the
//! same path (a shared filesystem, as with Slurm). Before a job runs, the
//! workspace's identity file is compared with the job's; a mismatch fails
//! the job with the reason.
//!
//! Stopping: an agent asked to stop ([`Stop`]; `wfhost agent` asks on
//! SIGINT or SIGTERM, see [`stop_on_signals`]) leases nothing more, stops
//! the jobs it runs — as when a lease is lost — and hands their leases
//! back without a result, so that the server queues them again at once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use wfhost_core::run::engine::BlockRunner;
use wfhost_runtime::telemetry::TelemetryHub;
use wfhost_runtime::{PluginSet, WasmRuntime};

use super::http::{Client, Server};
use super::request::{JOB_FORMAT, JobRequest, JobResult, exec_policy, read_workspace_id};

/// How an agent is set up.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub server: Server,
    pub name: String,
    pub capabilities: Vec<String>,
    pub concurrency: usize,
    pub cache_dir: Option<PathBuf>,
    pub cache_disabled: bool,
    /// Say a line per job it ran (`wfhost agent`; a server's local agents
    /// stay quiet).
    pub report_jobs: bool,
}

/// What asks an agent to stop: its value becomes the reason (a signal's
/// name). An agent whose sender is gone is never asked.
pub type Stop = tokio::sync::watch::Receiver<Option<&'static str>>;

/// How long a lease is handed back for at most when the agent stops.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(3);

/// The most plugin sets (one per run workflow and workspace) kept loaded;
/// beyond it, the one used longest ago goes.
const LOADED_MAX: usize = 64;
/// How long a lease request waits on the server for a job.
const LEASE_WAIT_MS: u64 = 20_000;

/// A run's plugins as loaded on this agent, and where the telemetry of
/// its agent blocks is received (when its workflow runs agents).
#[derive(Clone)]
struct Loaded {
    plugins: Arc<PluginSet>,
    telemetry: Option<Arc<TelemetryHub>>,
}

type LoadedKey = (String, String, String);

/// The plugin sets loaded, least recently used first to go.
struct LoadedSets<T = Loaded> {
    sets: HashMap<LoadedKey, (T, u64)>,
    uses: u64,
}

impl<T> Default for LoadedSets<T> {
    fn default() -> Self {
        LoadedSets {
            sets: HashMap::new(),
            uses: 0,
        }
    }
}

impl<T: Clone> LoadedSets<T> {
    fn get(&mut self, key: &LoadedKey) -> Option<T> {
        self.uses += 1;
        let uses = self.uses;
        self.sets.get_mut(key).map(|(found, used)| {
            *used = uses;
            found.clone()
        })
    }

    fn insert(&mut self, key: LoadedKey, loaded: T) {
        if self.sets.len() >= LOADED_MAX
            && let Some(oldest) = self
                .sets
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
        {
            self.sets.remove(&oldest);
        }
        self.uses += 1;
        self.sets.insert(key, (loaded, self.uses));
    }
}

/// What the slots of one agent share.
struct Shared {
    config: AgentConfig,
    runtimes: std::sync::Mutex<HashMap<String, Arc<WasmRuntime>>>,
    /// By workflow, workspace and executor: the set and when it was last
    /// used (a count of uses).
    loaded: tokio::sync::Mutex<LoadedSets>,
    /// The telemetry listener, started for the first workflow that runs
    /// agents (None when it could not listen: telemetry is then off).
    telemetry: tokio::sync::OnceCell<Option<Arc<crate::telemetry::Hubs>>>,
    /// How many leases were handed back on stopping.
    handed_back: AtomicUsize,
}

/// How an agent's run ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// Asked to stop: it did, after handing back this many jobs.
    Stopped { handed_back: usize },
    /// It stopped by itself (the server refused its token, …): why.
    Failed(String),
}

/// Run the agent until `stop` asks it to stop, or until the server refuses
/// its token.
pub async fn run(config: AgentConfig, stop: Stop) -> Ended {
    let shared = Arc::new(Shared {
        config: config.clone(),
        runtimes: Default::default(),
        loaded: Default::default(),
        telemetry: Default::default(),
        handed_back: AtomicUsize::new(0),
    });
    let mut slots = tokio::task::JoinSet::new();
    for slot in 0..config.concurrency.max(1) {
        slots.spawn(slot_loop(shared.clone(), slot, stop.clone()));
    }
    while let Some(ended) = slots.join_next().await {
        match ended {
            Ok(None) => {}
            Ok(Some(why)) => return Ended::Failed(why),
            Err(e) => return Ended::Failed(format!("an agent slot failed: {e}")),
        }
    }
    // Every slot stopped as asked, its job with it: the containers and
    // Slurm jobs the loaded workflows still hold go too.
    let loaded: Vec<Loaded> = shared
        .loaded
        .lock()
        .await
        .sets
        .values()
        .map(|(l, _)| l.clone())
        .collect();
    for loaded in loaded {
        loaded.plugins.shutdown().await;
    }
    Ended::Stopped {
        handed_back: shared.handed_back.load(Ordering::SeqCst),
    }
}

/// Resolves once the agent is asked to stop, with the reason (never when
/// nobody can ask). Cancel-safe.
async fn stopping(stop: &mut Stop) -> &'static str {
    let why = stop.wait_for(Option::is_some).await.map(|why| *why);
    match why {
        Ok(why) => why.unwrap_or("stopped"),
        Err(_) => std::future::pending().await,
    }
}

/// Whether the agent was asked to stop, now: by `stop`, or by a signal
/// whose handler has run but whose news has not reached `stop` yet.
fn stop_asked(stop: &Stop) -> Option<&'static str> {
    (*stop.borrow()).or_else(signalled_now)
}

/// The signal that asked this process's agent to stop (0: none yet).
static SIGNALLED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_stop_signal(signal: libc::c_int) {
    if SIGNALLED.swap(signal, Ordering::SeqCst) != 0 {
        // A second signal: stop at once (async-signal-safe).
        // SAFETY: `_exit` may be called from a signal handler.
        unsafe { libc::_exit(130) };
    }
}

/// Make SIGINT and SIGTERM ask this process's agent to stop
/// ([`signalled`]); a second one ends the process at once. The handler
/// only records the signal, so a job's result that is made after it
/// arrived (the job's processes may have got the same signal, as from
/// `scancel`) is seen to be the stop's doing and handed back instead.
pub fn stop_on_signals() -> std::io::Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed `sigaction` is valid; the handler only does an
        // atomic swap and `_exit`, both async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_stop_signal as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

fn signalled_now() -> Option<&'static str> {
    match SIGNALLED.load(Ordering::SeqCst) {
        0 => None,
        libc::SIGINT => Some("SIGINT"),
        libc::SIGTERM => Some("SIGTERM"),
        _ => Some("a signal"),
    }
}

/// Resolves once SIGINT or SIGTERM arrived (see [`stop_on_signals`]):
/// its name.
pub async fn signalled() -> &'static str {
    loop {
        if let Some(signal) = signalled_now() {
            return signal;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn slot_loop(shared: Arc<Shared>, slot: usize, mut stop: Stop) -> Option<String> {
    let config = &shared.config;
    let mut client = Client::new(config.server.clone());
    let mut backoff = Duration::from_millis(250);
    let ask = json!({
        "agent": config.name,
        "capabilities": config.capabilities,
        "wait_ms": LEASE_WAIT_MS,
    });
    loop {
        let answer = tokio::select! {
            biased;
            _ = stopping(&mut stop) => return None,
            answer = client.post(
                "/agent/lease",
                &ask,
                Duration::from_millis(LEASE_WAIT_MS + 10_000),
            ) => answer,
        };
        let job = match answer {
            Ok(a) if a.status == 200 => a.body.get("job").cloned().unwrap_or(Value::Null),
            Ok(a) if a.status == 401 => {
                return Some(format!(
                    "the server at {} refused the agent's token",
                    config.server.authority
                ));
            }
            Ok(a) => {
                crate::warnings::note(&format!(
                    "agent {} ({slot}): the server answered {}: {}",
                    config.name, a.status, a.body
                ));
                tokio::select! {
                    _ = stopping(&mut stop) => return None,
                    () = pause(&mut backoff) => continue,
                }
            }
            Err(_) if client.refused().is_some() => return client.refused(),
            Err(e) => {
                crate::warnings::note(&format!(
                    "agent {} ({slot}): {e}; trying again in {} ms",
                    config.name,
                    backoff.as_millis()
                ));
                tokio::select! {
                    _ = stopping(&mut stop) => return None,
                    () = pause(&mut backoff) => continue,
                }
            }
        };
        backoff = Duration::from_millis(250);
        if job.is_null() {
            continue;
        }
        run_job(&shared, &mut client, job, &mut stop).await;
    }
}

async fn pause(backoff: &mut Duration) {
    tokio::time::sleep(*backoff).await;
    *backoff = (*backoff * 2).min(Duration::from_secs(10));
}

/// A leased job as the server handed it out.
struct Leased {
    id: i64,
    attempt: u64,
    token: String,
    heartbeat: Duration,
}

fn leased(job: &Value) -> Option<Leased> {
    Some(Leased {
        id: job.get("id")?.as_i64()?,
        attempt: job.get("attempt")?.as_u64()?,
        token: job.get("token")?.as_str()?.to_string(),
        heartbeat: Duration::from_millis(job.get("heartbeat_ms")?.as_u64()?.max(50)),
    })
}

async fn run_job(shared: &Shared, client: &mut Client, job: Value, stop: &mut Stop) {
    let name = &shared.config.name;
    let Some(lease) = leased(&job) else {
        crate::warnings::note(&format!(
            "agent {name}: the server sent a job without a lease: {job}"
        ));
        return;
    };
    // One span per leased job, with what follows it across processes: the
    // run, its block and the job's attempt.
    let text = |key: &str| job.get(key).and_then(Value::as_str).unwrap_or_default();
    let span = tracing::info_span!(
        "job",
        agent = %name,
        job_id = lease.id,
        attempt = lease.attempt,
        run_id = text("run_id"),
        node = text("node"),
        block = text("block"),
    );
    // Under the block's span in the run's process, across the server.
    let parent = job
        .get("request")
        .and_then(|r| r.get(wfhost_protocol::trace::TRACEPARENT))
        .and_then(Value::as_str);
    wfhost_protocol::trace::adopt(&span, parent);
    tracing::Instrument::instrument(run_leased(shared, client, &job, lease, stop), span).await;
}

async fn run_leased(
    shared: &Shared,
    client: &mut Client,
    job: &Value,
    lease: Leased,
    stop: &mut Stop,
) {
    let name = &shared.config.name;
    let job = job.clone();
    // Asked to stop while the job runs: the job's future is dropped (its
    // processes, containers and Slurm jobs stop) and the job handed back.
    let started = std::time::Instant::now();
    let result = tokio::select! {
        result = execute(shared, &lease, &job) => result,
        why = stopping(stop) => {
            release(shared, client, &lease, why).await;
            return;
        }
    };
    // None: the lease was lost (the job was stopped).
    let Some(result) = result else {
        return;
    };
    // A result made after a stop was asked for may be the stop's doing
    // (`scancel` signals the job's processes too): hand it back instead.
    if let Some(why) = stop_asked(stop) {
        release(shared, client, &lease, why).await;
        return;
    }
    if result.telemetry_dropped > 0 {
        crate::warnings::note(&format!(
            "agent {name}: job {}: {} telemetry events left out (over {} KiB)",
            lease.id,
            result.telemetry_dropped,
            super::request::MAX_JOB_TELEMETRY_BYTES >> 10
        ));
    }
    if shared.config.report_jobs {
        crate::warnings::note(&job_line(name, &lease, &job, &result, started.elapsed()));
    }
    complete(shared, client, &lease, result).await;
}

/// `agent a1: job 12 (run-…, main.build, attempt 1): SIGNAL:SUCCESS in
/// 1.2 s`, or `failed in 0.3 s: <why>`.
fn job_line(name: &str, lease: &Leased, job: &Value, result: &JobResult, took: Duration) -> String {
    let text = |key: &str| job.get(key).and_then(Value::as_str).unwrap_or("?");
    let lane = job
        .get("lane")
        .and_then(Value::as_str)
        .filter(|l| !l.is_empty())
        .map(|l| format!(" lane {l}"))
        .unwrap_or_default();
    let what = format!(
        "agent {name}: job {} ({}, {}.{}{lane}, attempt {})",
        lease.id,
        text("run_id"),
        text("node"),
        text("block"),
        lease.attempt
    );
    let took = format!("{:.1} s", took.as_secs_f64());
    let line = match (&result.output, &result.failure) {
        (Some(output), _) => format!("{what}: {} in {took}", output.signal),
        (None, Some(why)) => format!("{what}: failed in {took}: {why}"),
        (None, None) => format!("{what}: failed in {took}"),
    };
    wfhost_core::text::escape(&line)
}

/// Give the job of `lease` back to the server without a result: it is
/// queued again at once. Best effort, and quick: when the server cannot
/// be told, the lease runs out instead.
async fn release(shared: &Shared, client: &mut Client, lease: &Leased, why: &str) {
    let name = &shared.config.name;
    let body = json!({
        "attempt": lease.attempt,
        "token": lease.token,
        "reason": format!("the agent stopped ({why})"),
    });
    let path = format!("/jobs/{}/release", lease.id);
    match client.post(&path, &body, RELEASE_TIMEOUT).await {
        Ok(a) if a.status == 200 => {
            shared.handed_back.fetch_add(1, Ordering::SeqCst);
            crate::warnings::note(&format!(
                "agent {name}: stopped job {} and handed it back ({why})",
                lease.id
            ));
        }
        // The lease had ended already: nothing to give back.
        Ok(a) if a.status == 409 => {}
        Ok(a) => crate::warnings::note(&format!(
            "agent {name}: handing job {} back: the server answered {}: {}; its lease will run out instead",
            lease.id, a.status, a.body
        )),
        Err(e) => crate::warnings::note(&format!(
            "agent {name}: handing job {} back: {e}; its lease will run out instead",
            lease.id
        )),
    }
}

/// Run the job of `lease`: its result, or None when the lease was lost.
async fn execute(shared: &Shared, lease: &Leased, job: &Value) -> Option<JobResult> {
    let request = job
        .get("request")
        .cloned()
        .ok_or_else(|| "the job has no request".to_string())
        .and_then(|r| {
            serde_json::from_value::<JobRequest>(r).map_err(|e| format!("cannot read the job: {e}"))
        });
    Some(match request {
        Ok(request) => match prepare(shared, &request).await {
            Ok(loaded) => {
                let ran = heartbeat_while(
                    shared,
                    lease,
                    Forward::new(&loaded, &request),
                    contained(loaded.plugins.run_block(request.block_request())),
                )
                .await;
                // Its agents have ended (their addresses with them): what
                // they sent goes with the result.
                let telemetry = job_telemetry(&loaded, &request);
                JobResult::of(ran?).with_telemetry(telemetry)
            }
            Err(e) => JobResult::failed(e),
        },
        Err(e) => JobResult::failed(e),
    })
}

/// A block whose host side panics is a failed job with the reason, not a
/// dead agent slot: the server's own local agents run in its process, next
/// to every other run it serves.
async fn contained(
    block: impl std::future::Future<Output = wfhost_core::run::engine::BlockResult>,
) -> wfhost_core::run::engine::BlockResult {
    use futures_util::FutureExt;
    match std::panic::AssertUnwindSafe(block).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => wfhost_core::run::engine::BlockResult {
            outcome: Err(wfhost_core::run::engine::BlockFailure::new(format!(
                "the host failed while running the block: {}",
                wfhost_core::limits::panic_message(panic.as_ref())
            ))),
            log: Vec::new(),
        },
    }
}

/// The telemetry the job's agents sent (its block's, in its lane) and
/// nobody took yet.
fn job_telemetry(loaded: &Loaded, request: &JobRequest) -> Vec<Value> {
    let Some(hub) = &loaded.telemetry else {
        return Vec::new();
    };
    hub.take_where(|t| is_jobs(request, t))
        .into_iter()
        .map(|t| t.body)
        .collect()
}

/// Whether `t` was sent by an agent of the block `request` runs.
fn is_jobs(request: &JobRequest, t: &wfhost_core::run::engine::Telemetry) -> bool {
    let (step, lane) = request.telemetry_step_and_lane();
    t.step == step
        && t.node == request.context.node_id
        && t.block == request.context.block_id
        && t.lane.as_deref() == lane
}

/// Where a running job's telemetry is taken from, to be forwarded to the
/// server as it arrives.
struct Forward<'a> {
    hub: Option<&'a TelemetryHub>,
    request: &'a JobRequest,
}

impl<'a> Forward<'a> {
    fn new(loaded: &'a Loaded, request: &'a JobRequest) -> Self {
        Forward {
            hub: loaded.telemetry.as_deref(),
            request,
        }
    }

    /// The job's next events (waits for some; never resolves without a
    /// hub). Cancel-safe.
    async fn next(&self) -> Vec<Value> {
        let Some(hub) = self.hub else {
            return std::future::pending().await;
        };
        let first = hub.next_where(|t| is_jobs(self.request, t)).await;
        first.into_iter().map(|t| t.body).collect()
    }
}

/// Run `block` while sending heartbeats and forwarding its telemetry as
/// it arrives; None when the lease was lost (the block was stopped).
async fn heartbeat_while<F: std::future::Future>(
    shared: &Shared,
    lease: &Leased,
    forward: Forward<'_>,
    block: F,
) -> Option<F::Output> {
    let name = &shared.config.name;
    let mut client = Client::new(shared.config.server.clone());
    // The first beat one period from now. (Not `interval`'s first tick,
    // due at once: a timer is rounded up to the next millisecond, so
    // awaiting it cost every job up to a millisecond before it started.)
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::now() + lease.heartbeat,
        lease.heartbeat,
    );
    tokio::pin!(block);
    let beat = json!({"attempt": lease.attempt, "token": lease.token});
    loop {
        let (what, path, body) = tokio::select! {
            result = &mut block => return Some(result),
            _ = tick.tick() => ("heartbeat", format!("/jobs/{}/heartbeat", lease.id), beat.clone()),
            events = forward.next() => (
                "telemetry",
                format!("/jobs/{}/telemetry", lease.id),
                json!({"attempt": lease.attempt, "token": lease.token, "events": events}),
            ),
        };
        match client.post(&path, &body, lease.heartbeat).await {
            Ok(a) if a.status == 409 => {
                let why = a
                    .body
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("the lease is gone");
                crate::warnings::note(&format!(
                    "agent {name}: lost the lease of job {} ({why}); stopped it",
                    lease.id
                ));
                return None;
            }
            Ok(a) if a.status != 200 => {
                crate::warnings::note(&format!(
                    "agent {name}: {what} of job {}: the server answered {}: {}",
                    lease.id, a.status, a.body
                ));
            }
            Ok(a) => {
                let dropped = a.body.get("dropped").and_then(Value::as_u64).unwrap_or(0);
                if dropped > 0 {
                    crate::warnings::note(&format!(
                        "agent {name}: job {}: the server left out {dropped} telemetry events (over the job's caps)",
                        lease.id
                    ));
                }
            }
            // The lease may still hold: keep going, try again (telemetry
            // that did not reach the server is not sent again).
            Err(e) => {
                crate::warnings::note(&format!("agent {name}: {what} of job {}: {e}", lease.id))
            }
        }
    }
}

/// Report `result`, retrying while the server cannot be reached (the same
/// completion is answered the same way however often it is sent).
async fn complete(shared: &Shared, client: &mut Client, lease: &Leased, result: JobResult) {
    let name = &shared.config.name;
    let succeeded = result.output.is_some();
    let Ok(Value::Object(result)) = serde_json::to_value(&result) else {
        crate::warnings::note(&format!(
            "agent {name}: job {}: cannot encode its result",
            lease.id
        ));
        return;
    };
    let body = json!({"attempt": lease.attempt, "token": lease.token, "succeeded": succeeded, "result": result});
    let path = format!("/jobs/{}/complete", lease.id);
    let mut backoff = Duration::from_millis(100);
    for _ in 0..30 {
        match client.post(&path, &body, Duration::from_secs(30)).await {
            Ok(a) if a.status == 200 => return,
            Ok(a) if a.status == 409 => {
                let why = a.body.get("message").and_then(Value::as_str).unwrap_or("");
                crate::warnings::note(&format!(
                    "agent {name}: the result of job {} was refused: {why}",
                    lease.id
                ));
                return;
            }
            Ok(a) => crate::warnings::note(&format!(
                "agent {name}: completing job {}: the server answered {}: {}",
                lease.id, a.status, a.body
            )),
            Err(e) => {
                crate::warnings::note(&format!("agent {name}: completing job {}: {e}", lease.id))
            }
        }
        pause(&mut backoff).await;
    }
    crate::warnings::note(&format!(
        "agent {name}: gave up reporting job {}; its lease will expire and it will run again",
        lease.id
    ));
}

/// The run's plugins, loaded once per workflow, workspace and executor,
/// after the job's checks: its format, its workspace's identity, the
/// exec policy, its plugins' digests.
async fn prepare(shared: &Shared, request: &JobRequest) -> Result<Loaded, String> {
    if request.format != JOB_FORMAT {
        return Err(format!(
            "the job is in format {}; this agent reads format {JOB_FORMAT} (run the same wfhost version as the server)",
            request.format
        ));
    }
    check_workspace(&shared.config.name, request)?;
    exec_policy(&request.worker, &request.context.config)
        .map_err(|e| e.replace("before a job was created", "on the agent"))?;
    let key = (
        request.workflow_hash.clone(),
        request.workspace.clone(),
        request.executor.clone(),
    );
    let mut loaded = shared.loaded.lock().await;
    if let Some(found) = loaded.get(&key) {
        return Ok(found);
    }
    let runtime = runtime_for(shared, &request.executor)?;
    let definition = fetch_definition(shared, &request.workflow_hash).await?;
    let job = request.clone();
    let plugins = tokio::task::spawn_blocking(move || load(runtime, &job, &definition))
        .await
        .map_err(|e| format!("loading the plugins failed: {e}"))??;
    let telemetry = match plugins.runs_agents() {
        true => telemetry_hub(shared).await,
        false => None,
    };
    if let Some(hub) = &telemetry {
        plugins.record_telemetry(Arc::clone(hub));
    }
    let found = Loaded {
        plugins: Arc::new(plugins),
        telemetry,
    };
    loaded.insert(key, found.clone());
    Ok(found)
}

/// A telemetry hub of its own for a workflow that runs agents, behind the
/// agent's listener (started the first time).
async fn telemetry_hub(shared: &Shared) -> Option<Arc<TelemetryHub>> {
    let name = &shared.config.name;
    let hubs = shared
        .telemetry
        .get_or_init(|| async {
            crate::telemetry::listen()
                .await
                .map_err(|e| {
                    crate::warnings::note(&format!(
                        "agent {name}: {e}; its agents' telemetry is off"
                    ))
                })
                .ok()
        })
        .await
        .as_ref()?;
    hubs.hub()
        .map_err(|e| {
            crate::warnings::note(&format!("agent {name}: {e}; its agents' telemetry is off"))
        })
        .ok()
}

fn check_workspace(agent: &str, request: &JobRequest) -> Result<(), String> {
    let workspace = Path::new(&request.workspace);
    let found = read_workspace_id(workspace)?;
    if found.as_deref() == Some(request.workspace_id.as_str()) {
        return Ok(());
    }
    let what = match found {
        None if !workspace.is_dir() => "does not exist here".to_string(),
        None => "has no workspace identity here".to_string(),
        Some(other) => format!("has another identity here ({other})"),
    };
    Err(format!(
        "the run's workspace {} {what}, not the server's ({}): agent `{agent}` and the server must see the workspace at the same path (a shared filesystem)",
        request.workspace, request.workspace_id
    ))
}

fn runtime_for(shared: &Shared, executor: &str) -> Result<Arc<WasmRuntime>, String> {
    let mut runtimes = shared.runtimes.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(rt) = runtimes.get(executor) {
        return Ok(rt.clone());
    }
    let parsed = if executor.is_empty() {
        wfhost_exec::Executor::Local
    } else {
        executor
            .parse()
            .map_err(|e| format!("the job's executor `{executor}`: {e}"))?
    };
    let choice = crate::plugins::RuntimeChoice {
        cache_dir: shared.config.cache_dir.clone(),
        cache_disabled: shared.config.cache_disabled,
        executor: None,
    };
    let rt = crate::plugins::start_runtime(&choice, parsed, None, None).map_err(|e| e.message)?;
    runtimes.insert(executor.to_string(), rt.clone());
    Ok(rt)
}

/// The run's pinned definition, from the server (checked against its hash
/// when it is parsed).
async fn fetch_definition(shared: &Shared, hash: &str) -> Result<String, String> {
    let mut client = Client::new(shared.config.server.clone());
    let (status, body) = client
        .get(&format!("/definitions/{hash}"), Duration::from_secs(60))
        .await
        .map_err(|e| format!("fetching the run's definition {hash}: {e}"))?;
    if status != 200 {
        let said = String::from_utf8_lossy(&body[..body.len().min(500)]).into_owned();
        return Err(format!(
            "fetching the run's definition {hash}: the server answered {status}: {said}"
        ));
    }
    String::from_utf8(body.to_vec())
        .map_err(|_| format!("the run's definition {hash} from the server is not UTF-8"))
}

fn load(
    runtime: Arc<WasmRuntime>,
    request: &JobRequest,
    definition: &str,
) -> Result<PluginSet, String> {
    // The same checks as a run that goes on in its own process: the
    // pinned definition, then exactly the plugins the run started with.
    let loaded = crate::plugins::pinned_workflow(
        &request.run_id,
        definition,
        &request.workflow_hash,
        Path::new(&request.manifest),
    )
    .map_err(|e| e.message)?;
    let plugins =
        crate::plugins::load_plugins(runtime, &loaded, Path::new(&request.workspace), None)
            .map_err(|e| e.message)?;
    if let Some(folder) = &request.session_folder {
        // Only a session folder of the workspace, never a path out of it.
        let name = folder.strip_prefix(".agents-work/").unwrap_or_default();
        if !wfhost_core::agents::session_artifacts::is_session_name(name) {
            return Err(format!(
                "run {}: `{folder}` is not a session folder (`.agents-work/YYYY-MM-DD_<slug>`)",
                request.run_id
            ));
        }
        plugins.set_session_folder(folder);
    }
    crate::plugins::check_pinned_plugins(
        &request.run_id,
        &request.plugins,
        &crate::plugins::plugin_digests(&plugins),
    )
    .map_err(|e| e.message)?;
    Ok(plugins)
}

#[cfg(test)]
mod loaded_sets_tests {
    use super::*;

    #[test]
    fn the_set_used_longest_ago_goes_first() {
        let key = |i: usize| (format!("wf{i}"), "ws".to_string(), "local".to_string());
        let mut sets = LoadedSets::<usize>::default();
        for i in 0..LOADED_MAX {
            sets.insert(key(i), i);
        }
        assert_eq!(sets.get(&key(0)), Some(0), "used again: now the newest");
        sets.insert(key(LOADED_MAX), LOADED_MAX);
        assert_eq!(sets.sets.len(), LOADED_MAX);
        assert_eq!(sets.get(&key(0)), Some(0));
        assert_eq!(sets.get(&key(1)), None, "the least recently used went");
        assert_eq!(sets.get(&key(LOADED_MAX)), Some(LOADED_MAX));
    }
}

#[cfg(test)]
mod heartbeat_tests {
    use super::*;

    fn shared() -> Shared {
        Shared {
            config: AgentConfig {
                server: Server::parse("http://127.0.0.1:9", &Default::default()).unwrap(),
                name: "test".into(),
                capabilities: Vec::new(),
                concurrency: 1,
                cache_dir: None,
                cache_disabled: true,
                report_jobs: false,
            },
            runtimes: Default::default(),
            loaded: Default::default(),
            telemetry: Default::default(),
            handed_back: AtomicUsize::new(0),
        }
    }

    /// A job's block runs at once: no timer is awaited before it (a timer
    /// due "now" is rounded up to the next millisecond, so awaiting one
    /// delayed every job by up to a millisecond). On a paused clock that
    /// wait shows as time gone by.
    #[tokio::test(start_paused = true)]
    async fn a_job_runs_without_waiting_for_a_timer() {
        let shared = shared();
        let request = super::super::request::job_in_lane(None);
        let lease = Leased {
            id: 1,
            attempt: 1,
            token: "t".into(),
            heartbeat: Duration::from_secs(5),
        };
        // Between two milliseconds, as a real clock nearly always is.
        tokio::time::advance(Duration::from_micros(500)).await;
        let before = tokio::time::Instant::now();
        let forward = Forward {
            hub: None,
            request: &request,
        };
        let ran = heartbeat_while(&shared, &lease, forward, async { 7 }).await;
        assert_eq!(ran, Some(7));
        assert_eq!(
            tokio::time::Instant::now() - before,
            Duration::ZERO,
            "the job waited for a timer before it ran"
        );
    }
}
