//! Runtime benchmarks: `cargo bench -p wfhost-runtime`.
//!
//! A plain bench binary (no criterion) that prints medians, so the figures
//! in the README can be reproduced with one command. Measured:
//!
//! 1. compiling a plugin vs loading it from the compiled-component cache;
//! 2. the per-call cost of a no-op worker: fresh store, instantiate from a
//!    pre-instantiated component, call — with the sandbox's preopens;
//! 3. a 1,000-block linear workflow of no-op workers, end to end through
//!    the engine core (worker and action handler both wasm).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use sha2::Digest;
use wfhost_core::manifest;
use wfhost_core::run::engine::{self, BlockRequest, RunOptions, RunStatus};
use wfhost_core::run::payload::BlockContext;
use wfhost_core::workspace::restrictions::RestrictionPlan;
use wfhost_guest_artifacts as guests;
use wfhost_runtime::admission::World;
use wfhost_runtime::cache::ComponentCache;
use wfhost_runtime::plugins::{PluginRequest, PluginSource};
use wfhost_runtime::sandbox::Sandbox;
use wfhost_runtime::{PluginSet, RuntimeConfig, WasmRuntime};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn fmt(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.1} µs")
    }
}

fn runtime(cache_dir: Option<std::path::PathBuf>) -> Arc<WasmRuntime> {
    Arc::new(
        WasmRuntime::new(RuntimeConfig {
            cache_dir,
            ..RuntimeConfig::default()
        })
        .unwrap(),
    )
}

fn bench_compile_vs_cache() {
    let rt = runtime(None);
    let compile: Vec<Duration> = (0..10)
        .map(|_| {
            let cache = ComponentCache::new(rt.engine(), None);
            let t = Instant::now();
            cache.load(rt.engine(), guests::ECHO).unwrap();
            t.elapsed()
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let cache = ComponentCache::new(rt.engine(), Some(dir.path().to_path_buf()));
    cache.load(rt.engine(), guests::ECHO).unwrap();
    let cached: Vec<Duration> = (0..100)
        .map(|_| {
            let t = Instant::now();
            cache.load(rt.engine(), guests::ECHO).unwrap();
            t.elapsed()
        })
        .collect();
    assert_eq!(cache.stats().hits, 100);
    println!(
        "| load `echo` ({} KiB component) | compile: {} | cached: {} |",
        guests::ECHO.len() / 1024,
        fmt(median(compile)),
        fmt(median(cached))
    );
    // The integrity check of a hit: read the entry and hash it (an
    // HMAC-SHA256 is two SHA-256 passes, the second over 96 bytes).
    let entry = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .unwrap();
    let check: Vec<Duration> = (0..100)
        .map(|_| {
            let t = Instant::now();
            let bytes = std::fs::read(&entry).unwrap();
            std::hint::black_box(sha2::Sha256::digest(&bytes));
            t.elapsed()
        })
        .collect();
    println!(
        "| of which: integrity check (read + HMAC-SHA256 of the {} KiB entry) | median {} | |",
        std::fs::metadata(&entry).unwrap().len() / 1024,
        fmt(median(check))
    );
    // For comparison, a load without any check: wasmtime maps the raw
    // compiled bytes from a file.
    let raw = dir.path().join("raw.cwasm");
    let compiled = wasmtime::component::Component::new(rt.engine(), guests::ECHO)
        .unwrap()
        .serialize()
        .unwrap();
    std::fs::write(&raw, compiled).unwrap();
    let unchecked: Vec<Duration> = (0..100)
        .map(|_| {
            let t = Instant::now();
            // SAFETY: bytes this engine serialized just above.
            std::hint::black_box(unsafe {
                wasmtime::component::Component::deserialize_file(rt.engine(), &raw).unwrap()
            });
            t.elapsed()
        })
        .collect();
    println!(
        "| for comparison: unchecked load of the raw entry (`deserialize_file`) | median {} | |",
        fmt(median(unchecked))
    );
}

/// A probe call doing ten reads of a small workspace file: guest file I/O
/// goes through tokio's blocking pool (so a stuck read can be abandoned at
/// the block's deadline).
fn bench_file_io(tokio: &tokio::runtime::Runtime) {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("f.txt"), "hello").unwrap();
    let set = PluginSet::load(
        runtime(None),
        &[PluginRequest {
            name: "probe".into(),
            source: PluginSource::Builtin(guests::TEST_PROBE),
            world: World::Worker,
            grants: vec![],
            http: None,
        }],
        ws.path(),
    )
    .unwrap();
    let ops: Vec<_> = (0..10)
        .map(|_| json!({"op": "read", "path": "/workspace/f.txt"}))
        .collect();
    let request = BlockRequest {
        worker: "probe".into(),
        context: BlockContext {
            workflow_id: "bench".into(),
            execution_id: "e".into(),
            node_id: "main".into(),
            block_id: "probe".into(),
            step_index: 0,
            attempt: 1,
            previous_block_id: None,
            static_memory: json!({}),
            inherited_memory: json!({}),
            artifacts: Default::default(),
            config: json!({ "ops": ops }),
            file_restrictions: None,
            system_prompt: String::new(),
            assembled_context: String::new(),
            inputs: json!({}),
        },
        payload: vec![],
        timeout: None,
        lane: None,
    };
    let samples: Vec<Duration> = (0..2000)
        .map(|_| {
            let t = Instant::now();
            let r = tokio.block_on(set.run_worker(request.clone()));
            let d = t.elapsed();
            assert!(r.outcome.is_ok());
            d
        })
        .collect();
    println!(
        "| probe worker call reading a 5-byte file 10 times (unrestricted) | median {} | |",
        fmt(median(samples))
    );
}

/// `noop` (returns the payload unchanged) and `actions-core`.
fn noop_set(rt: Arc<WasmRuntime>, ws: &std::path::Path) -> PluginSet {
    PluginSet::load(
        rt,
        &[
            PluginRequest {
                name: "noop".into(),
                source: PluginSource::Builtin(guests::TEST_NOOP),
                world: World::Worker,
                grants: vec![],
                http: None,
            },
            PluginRequest {
                name: "actions-core".into(),
                source: PluginSource::Builtin(guests::ACTIONS_CORE),
                world: World::ActionHandler,
                grants: vec![],
                http: None,
            },
        ],
        ws,
    )
    .unwrap()
}

fn bench_per_call(tokio: &tokio::runtime::Runtime) {
    let ws = tempfile::tempdir().unwrap();
    let set = noop_set(runtime(None), ws.path());
    let prepare: Vec<Duration> = (0..3000)
        .map(|_| {
            let plan = RestrictionPlan::new(Some(&["out/**".to_string()])).unwrap();
            let t = Instant::now();
            let sandbox = Sandbox::prepare(ws.path(), &plan).unwrap();
            let d = t.elapsed();
            sandbox.finish(true, &Default::default()).unwrap();
            d
        })
        .collect();
    println!(
        "| of which: sandbox preparation (`out/**`) | median {} | |",
        fmt(median(prepare))
    );
    for (label, restrictions) in [
        ("unrestricted: 1 preopen", None),
        ("read-only, `[]`: 2 preopens", Some(vec![])),
        ("`out/**`: 3 preopens", Some(vec!["out/**".to_string()])),
    ] {
        let request = BlockRequest {
            worker: "noop".into(),
            context: BlockContext {
                workflow_id: "bench".into(),
                execution_id: "e".into(),
                node_id: "main".into(),
                block_id: "noop".into(),
                step_index: 0,
                attempt: 1,
                previous_block_id: None,
                static_memory: json!({}),
                inherited_memory: json!({}),
                artifacts: Default::default(),
                config: serde_json::Value::Null,
                inputs: json!({}),
                file_restrictions: restrictions,
                system_prompt: String::new(),
                assembled_context: String::new(),
            },
            payload: vec![],
            timeout: None,
            lane: None,
        };
        let samples: Vec<Duration> = (0..3000)
            .map(|_| {
                let t = Instant::now();
                let r = tokio.block_on(set.run_worker(request.clone()));
                let d = t.elapsed();
                assert!(r.outcome.is_ok());
                d
            })
            .collect();
        println!(
            "| no-op worker call ({label}) | median {} | p90 {} |",
            fmt(median(samples.clone())),
            fmt({
                let mut s = samples;
                s.sort();
                s[s.len() * 9 / 10]
            })
        );
    }
}

fn bench_linear_workflow(tokio: &tokio::runtime::Runtime) {
    const BLOCKS: usize = 1000;
    let mut blocks = serde_json::Map::new();
    for i in 0..BLOCKS {
        let action = if i + 1 == BLOCKS {
            "END".to_string()
        } else {
            format!("JUMP:b{}", i + 1)
        };
        blocks.insert(
            format!("b{i}"),
            json!({"worker": "noop", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": action}]}),
        );
    }
    let text = json!({"id": "linear", "start_node": "main",
        "nodes": {"main": {"entry_block": "b0", "blocks": blocks}}})
    .to_string();
    let path = std::path::Path::new("linear.json");
    let wf = manifest::parse(path, &text).unwrap();
    assert!(manifest::check(path, &wf, &["noop", "actions-core"]).is_empty());
    let ws = tempfile::tempdir().unwrap();
    let set = noop_set(runtime(None), ws.path());
    let mut totals = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let report = tokio
            .block_on(engine::run(
                &wf,
                &set,
                &set,
                &RunOptions::new("bench"),
                &mut wfhost_core::run::event::DiscardLog::default(),
            ))
            .expect("the discarding log never fails");
        totals.push(t.elapsed());
        assert_eq!(report.status, RunStatus::Succeeded);
        assert_eq!(report.steps, BLOCKS as u64);
    }
    let total = median(totals);
    println!(
        "| {BLOCKS}-block linear workflow (wasm worker + wasm action handler per step) | total {} | {} per block |",
        fmt(total),
        fmt(total / BLOCKS as u32)
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing
    // and expects a quick run, so only the full run measures.
    if !std::env::args().any(|a| a == "--bench") {
        println!("run with `cargo bench -p wfhost-runtime` to measure");
        return;
    }
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // `cargo bench -p wfhost-runtime -- call` runs only the matching groups.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let wanted = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));
    println!("| benchmark | result | |");
    println!("|---|---|---|");
    if wanted("load") {
        bench_compile_vs_cache();
    }
    if wanted("call") {
        bench_per_call(&tokio);
    }
    if wanted("io") {
        bench_file_io(&tokio);
    }
    if wanted("workflow") {
        bench_linear_workflow(&tokio);
    }
}
