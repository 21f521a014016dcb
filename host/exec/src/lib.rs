//! Executors for exec blocks (seed 003): the host side of the
//! `wfhost:plugin/exec` capability.
//!
//! An exec block is checked against the safety policy
//! ([`wfhost_core::policy::exec`]) before anything runs and again right before each
//! command, with the executable resolved (so a symlink to a shell is still a
//! shell). Each execution writes an immutable **result bundle**:
//!
//! ```text
//! <bundle>/
//!   cmd-1.stdout  cmd-1.stderr  …      one pair per command, capped
//!   manifest.json                      timestamps, exit codes, paths, executor
//!   meta/env.json                      agent, run and stage ids, workdir, executor
//!   meta/repo.txt                      best-effort VCS snapshot (jj, else git)
//! ```
//!
//! Executors: [`run_local`] (host processes), [`ContainerPool`] (Docker
//! through bollard, with dormant containers) and [`SlurmExecutor`] (one
//! batch job per block); all three write the same layout.

pub mod agent;
mod bundle;
pub mod container;
pub mod containment;
pub mod counters;
pub mod forward;
pub mod lanes;
mod local;
mod repo;
pub mod scratch;
pub mod slurm;
pub mod spawn;

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;
use wfhost_core::policy::exec::{ExecCommand, ExecSpec, PolicyViolation};

pub use bundle::{BUNDLE_VERSION, BundleManifest, ContainerInfo, unique_bundle_dir};
pub use container::{ContainerOptions, ContainerPool};
pub use local::run_local;
pub use slurm::{SlurmExecutor, SlurmInfo, SlurmOptions};

/// Where an exec block runs; also the run-wide default for blocks that
/// name none (`wfhost run --executor`).
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Executor {
    #[default]
    Local,
    Container(ContainerOptions),
    Slurm(SlurmOptions),
}

/// The `--executor` spelling, which [`str::parse`] reads back; limits set
/// in a manifest (`cpus`, `memory_mb`, `time_limit`, …) are not part of it.
impl std::fmt::Display for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Executor::Local => f.write_str("local"),
            Executor::Container(o) => write!(f, "container:{}", o.image),
            Executor::Slurm(o) => match &o.partition {
                Some(p) => write!(f, "slurm:{p}"),
                None => f.write_str("slurm"),
            },
        }
    }
}

impl std::str::FromStr for Executor {
    type Err = String;

    /// `local`, `container:IMAGE` or `slurm[:PARTITION]`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, arg) = match s.split_once(':') {
            Some((kind, arg)) => (kind, Some(arg)),
            None => (s, None),
        };
        match (kind, arg) {
            ("local", None) => Ok(Executor::Local),
            ("container", Some(image)) if !image.is_empty() => {
                Ok(Executor::Container(ContainerOptions {
                    image: image.to_string(),
                    cpus: None,
                    memory_mb: None,
                    ..Default::default()
                }))
            }
            ("container", _) => {
                Err("`container` needs an image: `container:IMAGE` (a local image)".into())
            }
            ("slurm", partition) => Ok(Executor::Slurm(SlurmOptions {
                partition: partition.filter(|p| !p.is_empty()).map(str::to_string),
                ..Default::default()
            })),
            _ => Err(format!(
                "`{s}` is not an executor; use `local`, `container:IMAGE` or `slurm[:PARTITION]`"
            )),
        }
    }
}

/// Who is running a block, for `meta/env.json`.
#[derive(Debug, Clone, Serialize)]
pub struct BundleMeta {
    /// The host that ran the commands.
    pub agent_id: String,
    pub run_id: wfhost_core::ids::RunId,
    /// `node.block`: the stage in seed 003's terms.
    pub stage_id: String,
    pub step: u64,
    pub attempt: u32,
}

/// One exec block to run.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    pub spec: ExecSpec,
    /// The working directory commands' `cwd`s are relative to.
    pub workdir: PathBuf,
    /// Where the bundle goes; must not exist yet.
    pub bundle_dir: PathBuf,
    /// Variables set for every command before its own overrides (the env
    /// contract of seed 000).
    pub env: Vec<(String, String)>,
    pub meta: BundleMeta,
    /// When the block must be over; commands still running then are killed.
    pub deadline: Option<Instant>,
    /// Bytes kept of each command's stdout and of its stderr.
    pub output_cap: u64,
    /// Written to the first command's stdin, which is then closed (an
    /// agent's prompt or input JSON); `None` gives every command
    /// `/dev/null`. Local executor only.
    pub stdin: Option<Vec<u8>>,
    /// The secret values the commands were given: replaced by `***` in
    /// the output kept of them (the bundle's stdout and stderr files), so
    /// every reader of the bundle gets masked text.
    pub mask: wfhost_core::policy::secrets::Masker,
}

/// The variables of wfhost's own environment that every local command
/// (exec and agent) gets; `LC_*` too. Nothing else of wfhost's
/// environment is passed unless a block names it (`env_passthrough`).
pub const BASE_ENV: &[&str] = &[
    "PATH", "HOME", "LANG", "TERM", "TMPDIR", "USER", "LOGNAME", "SHELL", "TZ",
];

/// Whether `name` is one of [`BASE_ENV`] or `LC_*`.
pub fn in_base_env(name: &str) -> bool {
    BASE_ENV.contains(&name) || name.starts_with("LC_")
}

/// The [`BASE_ENV`] variables this process has, sorted.
pub fn base_env() -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| in_base_env(k))
        .collect();
    env.sort();
    env
}

/// What one command did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandResult {
    pub argv: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `None` when the command was killed by a signal, timed out, or never
    /// started.
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    pub started_ms: u64,
    pub ended_ms: u64,
    /// Paths relative to the bundle root.
    pub stdout: String,
    pub stderr: String,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub timed_out: bool,
    /// Why the command could not run (not found, refused right before
    /// execution, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl CommandResult {
    /// The result of command `index` before it ran: logs named, nothing
    /// recorded yet, started now.
    pub(crate) fn starting(index: usize, command: &wfhost_core::policy::exec::ExecCommand) -> Self {
        let (stdout, stderr) = bundle::log_names(index);
        CommandResult {
            argv: command.argv.clone(),
            cwd: command.cwd.clone(),
            exit_code: None,
            signal: None,
            started_ms: unix_ms(),
            ended_ms: 0,
            stdout,
            stderr,
            stdout_bytes: 0,
            stderr_bytes: 0,
            stdout_truncated: false,
            stderr_truncated: false,
            timed_out: false,
            error: None,
        }
    }

    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0) && self.error.is_none() && !self.timed_out
    }
}

/// An executed block: where its bundle is and what each command did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExecOutcome {
    pub bundle_dir: PathBuf,
    pub executor: &'static str,
    pub slurm_job_id: Option<String>,
    /// Commands that ran (the first failure stops the block).
    pub commands: Vec<CommandResult>,
    pub succeeded: bool,
}

/// Why an exec block did not run at all.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("{0}")]
    Refused(#[from] PolicyViolation),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Failed(String),
}

/// Who started a container or a Slurm job, as recorded on it (labels, job
/// comment), for `wfhost gc` to tell orphans from live work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub run_id: String,
    /// The wfhost process that started it.
    pub pid: Option<u32>,
    pub host: String,
}

impl Owner {
    /// Whether the process that started it still runs on this host. A
    /// different host's work is always treated as alive: this host cannot
    /// tell.
    pub fn process_alive(&self) -> bool {
        if !self.host.is_empty() && self.host != hostname() {
            return true;
        }
        let Some(pid) = self.pid.and_then(|p| i32::try_from(p).ok()) else {
            return false;
        };
        // SAFETY: signal 0 only checks that the process exists.
        let r = unsafe { libc::kill(pid, 0) };
        r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
}

/// This host's name, as recorded in bundles and on containers and jobs.
/// The directory `command` runs in (its `cwd` under `workdir`), which must
/// exist: a missing one is named as such, never reported as a program that
/// cannot be found.
pub(crate) fn working_dir(
    workdir: &Path,
    index: usize,
    command: &ExecCommand,
) -> Result<PathBuf, String> {
    let cwd = wfhost_core::policy::exec::resolve_cwd(workdir, command.cwd.as_deref());
    match std::fs::metadata(&cwd) {
        Ok(m) if m.is_dir() => Ok(cwd),
        Ok(_) => Err(format!(
            "command {index}: its working directory `{}` is not a directory",
            command.cwd.as_deref().unwrap_or(".")
        )),
        Err(_) => Err(format!(
            "command {index}: its working directory `{}` does not exist in the workspace",
            command.cwd.as_deref().unwrap_or(".")
        )),
    }
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

pub(crate) fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
