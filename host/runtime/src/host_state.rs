//! The per-call store state: WASI context, resource limits, captured logs.

use std::path::PathBuf;
use std::time::Instant;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::bindings::{exec, log};
use crate::capture::CappedCapture;

/// Lines a plugin logged through `wfhost:plugin/log`, capped in bytes.
#[derive(Debug, Default)]
pub struct BlockLog {
    pub lines: Vec<String>,
    bytes: usize,
    cap: usize,
    pub dropped: usize,
}

impl BlockLog {
    pub fn with_cap(cap: usize) -> Self {
        BlockLog {
            cap,
            ..Default::default()
        }
    }

    pub fn push(&mut self, line: String) {
        if self.bytes + line.len() > self.cap {
            self.dropped += 1;
            return;
        }
        self.bytes += line.len();
        self.lines.push(line);
    }
}

/// Caps linear memory and remembers that the cap was hit, so the failure
/// can say so rather than report a bare trap.
pub struct MemoryCap {
    pub limit: usize,
    pub hit: bool,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.hit = true;
            wasmtime::bail!(
                "memory limit of {} MiB exceeded (wanted {} MiB)",
                self.limit >> 20,
                desired >> 20
            );
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// What the `exec` capability needs to know about the calling block.
#[derive(Debug, Clone)]
pub struct ExecScope {
    /// The host path of the workspace.
    pub workspace: PathBuf,
    pub run_id: String,
    pub node_id: String,
    pub block_id: String,
    pub step: u64,
    pub attempt: u32,
    /// The env contract, with host paths.
    pub env: Vec<(String, String)>,
    /// The block's timeout, as an instant.
    pub deadline: Instant,
    pub output_cap: u64,
}

pub struct HostState {
    /// Set for worker calls; action handlers cannot run commands.
    pub exec: Option<ExecScope>,
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    pub memory: MemoryCap,
    pub log: BlockLog,
    pub stdout: CappedCapture,
    pub stderr: CappedCapture,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl log::Host for HostState {
    fn log(&mut self, level: log::Level, message: String) {
        let level = match level {
            log::Level::Trace => "trace",
            log::Level::Debug => "debug",
            log::Level::Info => "info",
            log::Level::Warn => "warn",
            log::Level::Error => "error",
        };
        self.log.push(format!("[{level}] {message}"));
    }
}

impl exec::Host for HostState {
    async fn run(&mut self, block: exec::ExecBlock) -> Result<exec::ExecResult, exec::ExecError> {
        let Some(scope) = self.exec.clone() else {
            return Err(exec::ExecError::Unavailable(
                "exec blocks can only be run by a block worker".into(),
            ));
        };
        match &block.executor {
            exec::Executor::Local => {}
            exec::Executor::Container(_) => {
                return Err(exec::ExecError::Unavailable(
                    "the container executor is not available in this wfhost yet".into(),
                ));
            }
            exec::Executor::Slurm(_) => {
                return Err(exec::ExecError::Unavailable(
                    "the Slurm executor is not available in this wfhost yet".into(),
                ));
            }
        }
        let spec = wfhost_core::exec::ExecSpec {
            commands: block
                .commands
                .into_iter()
                .map(|c| wfhost_core::exec::ExecCommand {
                    argv: c.argv,
                    cwd: c.cwd,
                    env: c.env,
                })
                .collect(),
            allow_shell: block.allow_shell,
        };
        let parent = scope.workspace.join(".output/exec").join(&scope.run_id);
        let bundle_dir = wfhost_exec::unique_bundle_dir(
            &parent,
            &format!("step-{}-{}.{}", scope.step, scope.node_id, scope.block_id),
        );
        let request = wfhost_exec::ExecRequest {
            spec,
            workdir: scope.workspace.clone(),
            bundle_dir,
            env: scope.env.clone(),
            meta: wfhost_exec::BundleMeta {
                agent_id: hostname(),
                run_id: scope.run_id.clone(),
                stage_id: format!("{}.{}", scope.node_id, scope.block_id),
                step: scope.step,
                attempt: scope.attempt,
            },
            deadline: Some(scope.deadline),
            output_cap: scope.output_cap,
        };
        match wfhost_exec::run_local(&request).await {
            Ok(outcome) => Ok(exec::ExecResult {
                bundle_dir: outcome
                    .bundle_dir
                    .strip_prefix(&scope.workspace)
                    .unwrap_or(&outcome.bundle_dir)
                    .display()
                    .to_string(),
                executor: outcome.executor.to_string(),
                slurm_job_id: outcome.slurm_job_id,
                succeeded: outcome.succeeded,
                commands: outcome
                    .commands
                    .into_iter()
                    .map(|c| exec::CommandResult {
                        argv: c.argv,
                        exit_code: c.exit_code,
                        started_ms: c.started_ms,
                        ended_ms: c.ended_ms,
                        stdout_path: c.stdout,
                        stderr_path: c.stderr,
                        stdout_truncated: c.stdout_truncated,
                        stderr_truncated: c.stderr_truncated,
                        timed_out: c.timed_out,
                        error: c.error,
                    })
                    .collect(),
            }),
            Err(wfhost_exec::ExecError::Refused(v)) => Err(exec::ExecError::Refused(v.to_string())),
            Err(wfhost_exec::ExecError::Invalid(m)) => Err(exec::ExecError::Invalid(m)),
            Err(wfhost_exec::ExecError::Unavailable(m)) => Err(exec::ExecError::Unavailable(m)),
            Err(wfhost_exec::ExecError::Failed(m)) => Err(exec::ExecError::Failed(m)),
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}
