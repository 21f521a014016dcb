//! Limits and settings of the wasm runtime.

use std::path::PathBuf;
use std::time::Duration;

/// Settings of a [`crate::WasmRuntime`]. The defaults suit `wfhost run`.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Where compiled components are cached; `None` disables the disk cache.
    pub cache_dir: Option<PathBuf>,
    /// Linear memory cap of one plugin instance, in bytes.
    pub memory_limit: usize,
    /// Timeout of a block that sets none.
    pub default_timeout: Duration,
    /// Timeout of one action-handler call.
    pub action_timeout: Duration,
    /// Cap on what a worker returns (payload and structured output), bytes.
    pub max_output_bytes: usize,
    /// Cap on each of a block's captured stdout, stderr and log, bytes.
    pub max_log_bytes: usize,
    /// Cap on the stdout and on the stderr kept of each exec command, bytes
    /// (truncation is recorded in the bundle).
    pub max_exec_output_bytes: u64,
    /// Where exec blocks that name no executor run.
    pub default_executor: wfhost_exec::Executor,
    /// Use the pooling instance allocator (faster instantiation; reserves
    /// virtual address space up front).
    pub pooling: bool,
    /// Instances the pool holds at once (concurrently running plugins).
    pub pool_instances: u32,
    /// Where agent CLIs send telemetry (`TELEMETRY_URL`, with
    /// `TELEMETRY_ENABLED=1`); from `$WFHOST_TELEMETRY_URL`. None disables
    /// it.
    pub telemetry_url: Option<String>,
    /// Told the state of every Slurm job of the run each time it is polled
    /// (for a status line).
    pub slurm_watcher: Option<wfhost_exec::slurm::JobWatcher>,
    /// Where `{"secret": NAME}` env references are resolved when a
    /// command starts (default: this process's environment only; the CLI
    /// gives the home's secrets first).
    pub secrets: wfhost_core::policy::secrets::Secrets,
    /// The operator's allowlist for the `http` capability (`http_allow`
    /// in the user's config): a request must match it as well as the
    /// workflow's grant. `None`: the workflow's grant alone.
    pub http_allow: Option<Vec<wfhost_core::policy::http::HostPattern>>,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            cache_dir: default_cache_dir(),
            memory_limit: 256 << 20,
            default_timeout: Duration::from_secs(300),
            action_timeout: Duration::from_secs(5),
            max_output_bytes: 16 << 20,
            max_log_bytes: 1 << 20,
            max_exec_output_bytes: 16 << 20,
            default_executor: wfhost_exec::Executor::Local,
            pooling: true,
            // A window of Slurm lanes (1,024) at once, with room for the
            // run's other plugins; lanes run no more than the pool holds
            // ([`RuntimeConfig::lane_capacity`]).
            pool_instances: (crate::lanes::SLURM_LANE_WINDOW + LANE_RESERVE) as u32,
            telemetry_url: std::env::var("WFHOST_TELEMETRY_URL")
                .ok()
                .filter(|u| !u.trim().is_empty()),
            slurm_watcher: None,
            secrets: Default::default(),
            http_allow: None,
        }
    }
}

/// Plugin instances kept for a run's other plugins (its action handler,
/// a block beside a fan-out) when lanes fill the pool.
const LANE_RESERVE: usize = 64;

/// The most lanes that run at once without a pool: a window of Slurm
/// lanes.
const UNPOOLED_LANES: usize = crate::lanes::SLURM_LANE_WINDOW;

impl RuntimeConfig {
    /// How many lanes of a parallel block may run at once: the pool's
    /// instances less those kept for the run's other plugins.
    pub fn lane_capacity(&self) -> usize {
        if self.pooling {
            let pool = self.pool_instances as usize;
            pool.saturating_sub(LANE_RESERVE.min(pool / 2)).max(1)
        } else {
            UNPOOLED_LANES
        }
    }
}

/// Set (to anything but `0` or nothing), no compiled plugin is cached
/// unless a cache directory is named explicitly: what `wfhost serve
/// --no-cache` gives the processes that execute its runs.
pub const NO_CACHE_ENV: &str = "WFHOST_NO_CACHE";

/// `$WFHOST_CACHE_DIR`, else `$XDG_CACHE_HOME/wfhost/components`, else
/// `~/.cache/wfhost/components`; none when `$WFHOST_NO_CACHE` is set.
pub fn default_cache_dir() -> Option<PathBuf> {
    if std::env::var_os(NO_CACHE_ENV).is_some_and(|v| !v.is_empty() && v != "0") {
        return None;
    }
    if let Some(dir) = std::env::var_os("WFHOST_CACHE_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("wfhost").join("components"))
}
