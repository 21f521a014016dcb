//! Executors for exec blocks (seed 003): the host side of the
//! `wfhost:plugin/exec` capability.
//!
//! An exec block is checked against the safety policy
//! ([`wfhost_core::exec`]) before anything runs and again right before each
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
//! Only the local executor exists so far; containers (bollard) and Slurm
//! come next and write the same layout.

mod bundle;
mod local;
mod repo;

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;
use wfhost_core::exec::{ExecSpec, PolicyViolation};

pub use bundle::{BUNDLE_VERSION, BundleManifest, unique_bundle_dir};
pub use local::run_local;

/// Who is running a block, for `meta/env.json`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BundleMeta {
    /// The host that ran the commands.
    pub agent_id: String,
    pub run_id: String,
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

pub(crate) fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
