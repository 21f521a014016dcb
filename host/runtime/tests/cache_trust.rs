//! The compiled cache trusts only entries carrying a valid integrity
//! record: an entry overwritten from outside (as a plugin with write access
//! to the cache directory would) is never deserialized.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use wfhost_core::run::engine::BlockRequest;
use wfhost_core::run::payload::BlockContext;
use wfhost_guest_artifacts as guests;
use wfhost_runtime::admission::World;
use wfhost_runtime::cache::{CacheOutcome, ComponentCache};
use wfhost_runtime::plugins::{PluginRequest, PluginSource};
use wfhost_runtime::{PluginSet, RuntimeConfig, WasmRuntime};

fn runtime(cache: &Path) -> Arc<WasmRuntime> {
    Arc::new(
        WasmRuntime::new(RuntimeConfig {
            cache_dir: Some(cache.to_path_buf()),
            memory_limit: 64 << 20,
            pool_instances: 4,
            ..RuntimeConfig::default()
        })
        .unwrap(),
    )
}

/// `echo` and `probe`, loaded through the cache; the outcome of each.
fn load(cache: &Path, ws: &Path) -> (PluginSet, CacheOutcome, CacheOutcome) {
    let request = |name: &str, bytes: &'static [u8]| PluginRequest {
        name: name.into(),
        source: PluginSource::Builtin(bytes),
        world: World::Worker,
        grants: Vec::new(),
        http: None,
    };
    let set = PluginSet::load(
        runtime(cache),
        &[
            request("echo", guests::ECHO),
            request("probe", guests::TEST_PROBE),
        ],
        ws,
    )
    .unwrap();
    let (echo, probe) = (set.loads()[0].outcome, set.loads()[1].outcome);
    (set, echo, probe)
}

fn entry_of(cache: &Path, component: &[u8]) -> PathBuf {
    let digest = ComponentCache::digest(component);
    std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&digest)
        })
        .expect("a cache entry")
}

/// Run the plugin loaded as `echo`: the genuine echo appends an `ECHO`
/// segment with the message; the probe would fail (no `ops` in config).
async fn run_echo(set: &PluginSet) -> Result<String, String> {
    let context = BlockContext {
        workflow_id: "wf".into(),
        execution_id: "run-20260101-000000-00e4ec".into(),
        node_id: "main".into(),
        block_id: "a".into(),
        step_index: 1,
        attempt: 1,
        previous_block_id: None,
        static_memory: json!({}),
        inherited_memory: json!({}),
        artifacts: Default::default(),
        config: json!({"message": "genuine echo"}),
        file_restrictions: None,
        system_prompt: String::new(),
        assembled_context: String::new(),
        inputs: json!({}),
    };
    let result = set
        .run_worker(BlockRequest {
            worker: "echo".into(),
            context,
            payload: Vec::new(),
            timeout: None,
            lane: None,
        })
        .await;
    match result.outcome {
        Ok(output) => Ok(output.payload.last().unwrap().content.clone()),
        Err(f) => Err(f.message),
    }
}

#[tokio::test]
async fn an_entry_overwritten_with_another_plugins_code_is_recompiled_not_run() {
    let cache = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let (_, echo, probe) = load(cache.path(), ws.path());
    assert_eq!(
        (echo, probe),
        (CacheOutcome::Compiled, CacheOutcome::Compiled)
    );
    let (_, echo, probe) = load(cache.path(), ws.path());
    assert_eq!((echo, probe), (CacheOutcome::Hit, CacheOutcome::Hit));

    let echo_entry = entry_of(cache.path(), guests::ECHO);
    let probe_entry = entry_of(cache.path(), guests::TEST_PROBE);
    // 1. The probe's whole entry, integrity record included, copied over
    //    echo's: the record is bound to the probe's digest.
    std::fs::copy(&probe_entry, &echo_entry).unwrap();
    let (set, echo, probe) = load(cache.path(), ws.path());
    assert_eq!((echo, probe), (CacheOutcome::Replaced, CacheOutcome::Hit));
    assert_eq!(run_echo(&set).await, Ok("genuine echo".to_string()));

    // 2. The probe's code as wasmtime serializes it, as a plugin that
    //    compiled it itself would write.
    let rt = runtime(cache.path());
    let compiled = wasmtime::component::Component::new(rt.engine(), guests::TEST_PROBE)
        .unwrap()
        .serialize()
        .unwrap();
    std::fs::write(&echo_entry, &compiled).unwrap();
    let (set, echo, _) = load(cache.path(), ws.path());
    assert_eq!(echo, CacheOutcome::Replaced);
    assert_eq!(run_echo(&set).await, Ok("genuine echo".to_string()));
    assert_eq!(set.loads()[0].digest, ComponentCache::digest(guests::ECHO));

    // The rewritten entry is trusted again.
    let (set, echo, _) = load(cache.path(), ws.path());
    assert_eq!(echo, CacheOutcome::Hit);
    assert_eq!(run_echo(&set).await, Ok("genuine echo".to_string()));
}

#[tokio::test]
async fn entries_are_not_trusted_under_another_key() {
    let cache = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    load(cache.path(), ws.path());
    // Whoever plants a key of their own choosing (with entries made under
    // it) gains nothing: a key readable by others is replaced.
    let key = cache.path().join(wfhost_runtime::cache::KEY_FILE);
    std::fs::remove_file(&key).unwrap();
    std::fs::write(&key, [0u8; 32]).unwrap();
    let (_, echo, probe) = load(cache.path(), ws.path());
    assert_eq!(
        (echo, probe),
        (CacheOutcome::Replaced, CacheOutcome::Replaced)
    );
    let (_, echo, _) = load(cache.path(), ws.path());
    assert_eq!(echo, CacheOutcome::Hit);
}

#[test]
fn a_fifo_or_a_link_in_place_of_an_entry_does_not_stall_the_load() {
    let cache = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    load(cache.path(), ws.path());
    let echo_entry = entry_of(cache.path(), guests::ECHO);
    std::fs::remove_file(&echo_entry).unwrap();
    let c = std::ffi::CString::new(echo_entry.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (_, echo, _) = load(cache.path(), ws.path());
    assert_eq!(echo, CacheOutcome::Replaced);
    let probe_entry = entry_of(cache.path(), guests::TEST_PROBE);
    std::fs::remove_file(&echo_entry).unwrap();
    std::os::unix::fs::symlink(&probe_entry, &echo_entry).unwrap();
    let (_, echo, _) = load(cache.path(), ws.path());
    assert_eq!(echo, CacheOutcome::Replaced);
    assert!(!std::fs::symlink_metadata(&echo_entry).unwrap().is_symlink());
}

#[test]
fn a_runtime_loads_the_same_component_from_memory_the_second_time() {
    let cache = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let runtime = runtime(cache.path());
    let request = PluginRequest {
        name: "echo".into(),
        source: PluginSource::Builtin(guests::ECHO),
        world: World::Worker,
        grants: Vec::new(),
        http: None,
    };
    let first =
        PluginSet::load(runtime.clone(), std::slice::from_ref(&request), ws.path()).unwrap();
    assert_eq!(first.loads()[0].outcome, CacheOutcome::Compiled);
    // The compiled file is gone: a second load in the same process needs
    // neither it nor a compile.
    std::fs::remove_file(entry_of(cache.path(), guests::ECHO)).unwrap();
    let second = PluginSet::load(runtime.clone(), &[request], ws.path()).unwrap();
    assert_eq!(second.loads()[0].outcome, CacheOutcome::Hit);
    assert_eq!(runtime.cache_stats().compiles, 1);
    assert!(!entry_of_exists(cache.path(), guests::ECHO));
}

fn entry_of_exists(cache: &Path, component: &[u8]) -> bool {
    let digest = ComponentCache::digest(component);
    std::fs::read_dir(cache).unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(&digest)
    })
}
