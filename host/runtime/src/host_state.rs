//! The per-call store state: WASI context, resource limits, captured logs.

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::bindings::log;
use crate::capture::CappedCapture;
use crate::host_capabilities::ExecScope;
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
    /// Set for worker calls; action handlers cannot run commands.
    pub exec: Option<ExecScope>,
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
    /// The model tokens the block's agents consumed, as their outputs
    /// report them (`usage`), added to the block's statistics.
    pub agent_tokens: u64,
    /// The same, broken down as the CLIs reported it.
    pub agent_usage: wfhost_core::run::payload::ModelUsage,
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
