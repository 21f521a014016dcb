//! The process-wide wasmtime engine.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::bindings;
use crate::cache::{CacheStats, ComponentCache};
use crate::config::RuntimeConfig;
use crate::host_state::HostState;

/// How often the epoch advances; timeouts are measured in these ticks.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(5);

/// The wasmtime engine, linker and compiled-component cache, shared by
/// every plugin of the process. Dropping it stops the epoch ticker.
pub struct WasmRuntime {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<HostState>,
    pub(crate) cache: ComponentCache,
    pub(crate) config: RuntimeConfig,
    pub(crate) ticker: Arc<Ticker>,
    ticker_thread: Option<JoinHandle<()>>,
}

/// The epoch ticker's state: it advances the epoch every [`EPOCH_TICK`]
/// while at least one guest store exists, and sleeps (parked, no wake-ups)
/// while none does — an idle `wfhost serve` or `wfhost mcp`, or a run
/// process waiting for its agents, costs no timer. A deadline is counted
/// from the epoch when its store starts, so a pause between stores
/// changes none.
pub(crate) struct Ticker {
    stop: AtomicBool,
    active: AtomicUsize,
    /// Ticks made so far (for tests).
    ticks: std::sync::atomic::AtomicU64,
    thread: std::sync::OnceLock<std::thread::Thread>,
}

/// One guest store alive: the ticker runs while any is.
pub(crate) struct Ticking(Arc<Ticker>);

impl Ticker {
    pub(crate) fn start(self: &Arc<Self>) -> Ticking {
        if self.active.fetch_add(1, Ordering::SeqCst) == 0
            && let Some(thread) = self.thread.get()
        {
            thread.unpark();
        }
        Ticking(self.clone())
    }

    fn run(&self, engine: &Engine) {
        while !self.stop.load(Ordering::Relaxed) {
            if self.active.load(Ordering::SeqCst) == 0 {
                // Woken by the next store (or the stop); a spurious wake
                // only looks again.
                std::thread::park();
                continue;
            }
            std::thread::sleep(EPOCH_TICK);
            engine.increment_epoch();
            self.ticks.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Ticking {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What makes two runtimes' engines interchangeable: the settings
/// [`WasmRuntime::prewarm`] builds an engine, linker and cache from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct EngineKey {
    pooling: bool,
    pool_instances: u32,
    memory_limit: usize,
    cache_dir: Option<std::path::PathBuf>,
}

impl EngineKey {
    fn of(config: &RuntimeConfig) -> Self {
        EngineKey {
            pooling: config.pooling,
            pool_instances: config.pool_instances,
            memory_limit: config.memory_limit,
            cache_dir: config.cache_dir.clone(),
        }
    }
}

/// An engine with its linker and component cache (components maybe
/// loaded already), not yet a runtime.
struct Parts {
    engine: Engine,
    linker: Linker<HostState>,
    cache: ComponentCache,
    /// False when the pool was asked for but could not be reserved.
    pooling: bool,
}

/// Parts made ahead of need by [`WasmRuntime::prewarm`], taken by the next
/// [`WasmRuntime::new`] whose settings make the same engine.
static PREWARMED: std::sync::Mutex<Option<(EngineKey, Parts)>> = std::sync::Mutex::new(None);

impl WasmRuntime {
    pub fn new(config: RuntimeConfig) -> wasmtime::Result<Self> {
        let key = EngineKey::of(&config);
        let warm = {
            let mut prewarmed = PREWARMED.lock().unwrap_or_else(|e| e.into_inner());
            match prewarmed.as_ref() {
                Some((made_for, _)) if *made_for == key => prewarmed.take(),
                _ => None,
            }
        };
        let parts = match warm {
            Some((_, parts)) => {
                // Its counts describe this runtime's loads, not the warm-up's.
                parts.cache.reset_stats();
                parts
            }
            None => Self::parts(&config)?,
        };
        Self::finish(parts, config)
    }

    /// Make the engine, linker and cache the next [`WasmRuntime::new`] with
    /// settings like `config`'s would make, and load those of `components`
    /// the cache's directory holds: a process that knows it will start a
    /// runtime soon (a spare run process of `wfhost serve`) does this while
    /// it waits, so the runtime costs little when asked for. Nothing is
    /// compiled: the compiler's threads would keep the priority of the
    /// thread that started them, and a warm-up may run at a low one.
    pub fn prewarm(config: &RuntimeConfig, components: &[&[u8]]) -> wasmtime::Result<()> {
        let parts = Self::parts(config)?;
        for bytes in components {
            parts.cache.preload(&parts.engine, bytes);
        }
        *PREWARMED.lock().unwrap_or_else(|e| e.into_inner()) = Some((EngineKey::of(config), parts));
        Ok(())
    }

    fn parts(config: &RuntimeConfig) -> wasmtime::Result<Parts> {
        let (engine, pooling) = match Self::build_engine(config, config.pooling) {
            Ok(engine) => (engine, config.pooling),
            // The pool reserves virtual memory up front; where that is not
            // allowed (strict overcommit, small address-space limits), run
            // without it rather than not at all.
            Err(_) if config.pooling => (Self::build_engine(config, false)?, false),
            Err(e) => return Err(e),
        };
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        crate::links::add_to_linker(&mut linker)?;
        crate::special_files::add_to_linker(&mut linker)?;
        bindings::log::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)?;
        bindings::executor_types::add_to_linker::<HostState, HasSelf<HostState>>(
            &mut linker,
            |s| s,
        )?;
        crate::capabilities::link_all(&mut linker)?;
        let cache = ComponentCache::new(&engine, config.cache_dir.clone());
        Ok(Parts {
            engine,
            linker,
            cache,
            pooling,
        })
    }

    fn build_engine(config: &RuntimeConfig, pooling: bool) -> wasmtime::Result<Engine> {
        let mut wasm = Config::new();
        wasm.wasm_component_model(true);
        wasm.epoch_interruption(true);
        if pooling {
            let n = config.pool_instances;
            let mut pool = PoolingAllocationConfig::new();
            pool.total_component_instances(n)
                .total_core_instances(n * 8)
                .total_memories(n * 2)
                .total_tables(n * 8)
                .total_stacks(n)
                .max_core_instances_per_component(32)
                .max_memories_per_component(2)
                .max_tables_per_component(8)
                .max_memory_size(config.memory_limit)
                // Reset small memories with memset instead of madvise: a
                // block's instance is short-lived and its slot reused at once.
                .linear_memory_keep_resident(2 << 20)
                .table_keep_resident(64 << 10)
                .pagemap_scan(Enabled::Auto);
            wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        }
        Engine::new(&wasm)
    }

    fn finish(parts: Parts, config: RuntimeConfig) -> wasmtime::Result<Self> {
        let Parts {
            engine,
            linker,
            cache,
            pooling,
        } = parts;
        let config = RuntimeConfig { pooling, ..config };
        let ticker = Arc::new(Ticker {
            stop: AtomicBool::new(false),
            active: AtomicUsize::new(0),
            ticks: std::sync::atomic::AtomicU64::new(0),
            thread: std::sync::OnceLock::new(),
        });
        let thread = {
            let engine = engine.clone();
            let ticker = ticker.clone();
            std::thread::Builder::new()
                .name("wfhost-epoch".into())
                .spawn(move || ticker.run(&engine))?
        };
        let _ = ticker.thread.set(thread.thread().clone());

        Ok(WasmRuntime {
            engine,
            linker,
            cache,
            config,
            ticker,
            ticker_thread: Some(thread),
        })
    }

    /// The settings in force (`pooling` is false if the pool could not be
    /// reserved).
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The compiled-component cache, in memory and on disk.
    pub fn cache(&self) -> &ComponentCache {
        &self.cache
    }
}

impl Drop for WasmRuntime {
    fn drop(&mut self) {
        self.ticker.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker_thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// Epoch ticks for a wall-clock timeout, rounded up.
pub(crate) fn ticks(timeout: Duration) -> u64 {
    u64::try_from(timeout.as_nanos() / EPOCH_TICK.as_nanos())
        .unwrap_or(u64::MAX / 2)
        .max(1)
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_epoch_advances_only_while_a_guest_store_lives() {
        let runtime = WasmRuntime::new(RuntimeConfig {
            pooling: false,
            ..RuntimeConfig::default()
        })
        .unwrap();
        let ticks = || runtime.ticker.ticks.load(Ordering::Relaxed);
        std::thread::sleep(EPOCH_TICK * 4);
        let idle = ticks();
        std::thread::sleep(EPOCH_TICK * 10);
        assert_eq!(ticks(), idle, "no ticks while no store exists");
        let store = runtime.ticker.start();
        std::thread::sleep(EPOCH_TICK * 10);
        assert!(
            ticks() >= idle + 3,
            "ticks while a store exists: {}",
            ticks() - idle
        );
        drop(store);
        std::thread::sleep(EPOCH_TICK * 3);
        let after = ticks();
        std::thread::sleep(EPOCH_TICK * 10);
        assert_eq!(ticks(), after, "parked again once the last store is gone");
    }
}
