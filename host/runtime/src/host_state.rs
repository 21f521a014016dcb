//! The per-call store state: WASI context, resource limits, captured logs,
//! and the capabilities' views of it (`crate::capabilities`: each gets
//! what it uses, as WASI gets its `WasiCtxView`).

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::bindings::{executor_types, log};
use crate::capabilities::agent::{AgentCtxView, AgentState, AgentView};
use crate::capabilities::container::{ContainerCtxView, ContainerView};
use crate::capabilities::exec::{ExecCtxView, ExecView};
use crate::capabilities::scope::ExecScope;
use crate::capabilities::slurm::{SlurmCtxView, SlurmView};
use crate::capture::CappedCapture;
use crate::links::GuestMounts;
use crate::write_watch::WriteWatch;

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

pub struct HostState {
    /// Keeps the epoch ticker running while this store lives.
    pub(crate) _ticking: crate::runtime::Ticking,
    /// The calling block, for the executor capabilities: set for worker
    /// calls; action handlers cannot run commands.
    pub scope: Option<ExecScope>,
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    /// The block's preopens, for the link guard (`crate::links`).
    pub mounts: GuestMounts,
    /// Epoch ticks left before the deadline, and the length of the slice
    /// the engine is in: the deadline is checked in slices so that the
    /// write limits can be looked at between them.
    pub ticks_left: u64,
    pub slice: u64,
    /// The block's writable mounts and their limits (workers only).
    pub watch: Option<WriteWatch>,
    /// The write limit the guest passed, when it was stopped for it.
    pub limit_hit: Option<String>,
    /// The `agent` capability's state: what the block's agents consumed.
    pub agent: AgentState,
    pub memory: MemoryCap,
    pub log: BlockLog,
    pub stdout: CappedCapture,
    pub stderr: CappedCapture,
    /// The `http` capability: the plugin's policy and its refusals.
    pub http: crate::capabilities::http::HttpState,
    pub http_ctx: wasmtime_wasi_http::WasiHttpCtx,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl ExecView for HostState {
    fn exec(&mut self) -> ExecCtxView<'_> {
        ExecCtxView {
            scope: self.scope.as_ref(),
        }
    }
}

impl ContainerView for HostState {
    fn container(&mut self) -> ContainerCtxView<'_> {
        ContainerCtxView {
            scope: self.scope.as_ref(),
        }
    }
}

impl SlurmView for HostState {
    fn slurm(&mut self) -> SlurmCtxView<'_> {
        SlurmCtxView {
            scope: self.scope.as_ref(),
        }
    }
}

impl AgentView for HostState {
    fn agent(&mut self) -> AgentCtxView<'_> {
        AgentCtxView {
            scope: self.scope.as_ref(),
            state: &mut self.agent,
        }
    }
}

impl wasmtime_wasi_http::WasiHttpView for HostState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView {
            ctx: &mut self.http_ctx,
            table: &mut self.table,
            hooks: &mut self.http,
        }
    }
}

/// `executor-types` is types only (part of the base sandbox).
impl executor_types::Host for HostState {}

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
