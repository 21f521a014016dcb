//! A runtime made ahead of need: `WasmRuntime::prewarm` builds the engine
//! and loads the components its cache directory holds; the next runtime
//! with the same engine settings starts with them, one with other settings
//! does not, and a warm-up never compiles.

use std::path::Path;

use wfhost_guest_artifacts as guests;
use wfhost_runtime::cache::CacheOutcome;
use wfhost_runtime::{RuntimeConfig, WasmRuntime};

fn config(cache: &Path, memory_limit: usize) -> RuntimeConfig {
    RuntimeConfig {
        cache_dir: Some(cache.to_path_buf()),
        pooling: false,
        pool_instances: 3,
        memory_limit,
        ..RuntimeConfig::default()
    }
}

fn echo_outcome(runtime: &WasmRuntime) -> CacheOutcome {
    runtime
        .cache()
        .load(runtime.engine(), guests::ECHO)
        .unwrap()
        .1
}

fn forget_compiled(cache: &Path) {
    std::fs::remove_dir_all(cache).unwrap();
}

#[test]
fn the_next_runtime_of_the_same_settings_starts_warm_and_no_other_does() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    // Nothing compiled yet: the warm-up loads nothing and compiles nothing.
    WasmRuntime::prewarm(&config(&cache, 64 << 20), &[guests::ECHO]).unwrap();
    let warm = WasmRuntime::new(config(&cache, 64 << 20)).unwrap();
    assert_eq!(echo_outcome(&warm), CacheOutcome::Compiled);
    drop(warm);

    // Compiled once (above), the warm-up loads it; then the file goes, so
    // only a runtime started warm finds it.
    WasmRuntime::prewarm(&config(&cache, 64 << 20), &[guests::ECHO]).unwrap();
    forget_compiled(&cache);
    let other = WasmRuntime::new(config(&cache, 32 << 20)).unwrap();
    assert_eq!(echo_outcome(&other), CacheOutcome::Compiled);
    forget_compiled(&cache);

    let warm = WasmRuntime::new(config(&cache, 64 << 20)).unwrap();
    assert_eq!(warm.cache_stats().hits + warm.cache_stats().compiles, 0);
    assert_eq!(echo_outcome(&warm), CacheOutcome::Hit);
    assert_eq!(warm.cache_stats().compiles, 0);

    // Taken once: the next one makes its own again.
    let cold = WasmRuntime::new(config(&cache, 64 << 20)).unwrap();
    assert_eq!(echo_outcome(&cold), CacheOutcome::Compiled);
}
