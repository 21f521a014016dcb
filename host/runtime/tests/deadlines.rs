//! Every block obeys its deadline, also when the guest waits in a host call
//! (a sleep) where the epoch interrupt cannot reach it; a guest cannot open
//! a FIFO at all, and FIFOs in the workspace never stall the host's staging
//! copy.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wfhost_core::run::engine::{BlockRequest, BlockResult};
use wfhost_core::run::payload::BlockContext;
use wfhost_guest_artifacts as guests;
use wfhost_runtime::admission::World;
use wfhost_runtime::plugins::{PluginRequest, PluginSource};
use wfhost_runtime::{PluginSet, RuntimeConfig, WasmRuntime};

fn plugins(ws: &Path) -> PluginSet {
    let cache = std::env::temp_dir().join(format!(
        "wfhost-deadline-tests-cache-{}",
        std::process::id()
    ));
    let rt = WasmRuntime::new(RuntimeConfig {
        cache_dir: Some(cache),
        memory_limit: 64 << 20,
        pool_instances: 4,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let request = |name: &str, bytes: &'static [u8]| PluginRequest {
        name: name.into(),
        source: PluginSource::Builtin(bytes),
        world: World::Worker,
        grants: Vec::new(),
        http: None,
    };
    PluginSet::load(
        Arc::new(rt),
        &[
            request("scripted", guests::SCRIPTED),
            request("probe", guests::TEST_PROBE),
        ],
        ws,
    )
    .unwrap()
}

async fn run(
    set: &PluginSet,
    worker: &str,
    config: Value,
    restrictions: Option<&[&str]>,
    timeout: Duration,
) -> BlockResult {
    let context = BlockContext {
        workflow_id: "wf".into(),
        execution_id: "run-20260101-000000-00e4ec".into(),
        node_id: "main".into(),
        block_id: "slow".into(),
        step_index: 1,
        attempt: 1,
        previous_block_id: None,
        static_memory: json!({}),
        inherited_memory: json!({}),
        artifacts: Default::default(),
        config,
        file_restrictions: restrictions.map(|r| r.iter().map(|s| s.to_string()).collect()),
        system_prompt: String::new(),
        assembled_context: String::new(),
        inputs: json!({}),
    };
    set.run_worker(BlockRequest {
        worker: worker.into(),
        context,
        payload: Vec::new(),
        timeout: Some(timeout),
        lane: None,
    })
    .await
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

fn failure(result: &BlockResult) -> String {
    result
        .outcome
        .as_ref()
        .expect_err("the block failed")
        .message
        .clone()
}

#[tokio::test]
async fn a_guest_sleeping_past_its_timeout_fails_at_the_deadline() {
    let ws = tempfile::tempdir().unwrap();
    let set = plugins(ws.path());
    let start = Instant::now();
    let config = json!({"responses": ["late"], "delay_ms": 30_000});
    let result = run(&set, "scripted", config, None, Duration::from_secs(1)).await;
    let took = start.elapsed();
    assert!(took < Duration::from_secs(2), "took {took:?}");
    assert!(
        failure(&result).contains("timed out after 1s"),
        "{}",
        failure(&result)
    );
}

#[tokio::test]
async fn a_guest_cannot_open_a_fifo_or_wait_on_one() {
    let ws = tempfile::tempdir().unwrap();
    let fifo = ws.path().join("pipe");
    mkfifo(&fifo);
    std::os::unix::fs::symlink("pipe", ws.path().join("to-pipe")).unwrap();
    let set = plugins(ws.path());
    let start = Instant::now();
    let ops = json!({"ops": [
        {"op": "read", "path": "/workspace/pipe"},
        {"op": "read", "path": "/workspace/to-pipe"},
        {"op": "write", "path": "/workspace/pipe", "content": "x"},
        {"op": "list", "path": "/workspace"},
    ]});
    let result = run(&set, "probe", ops, None, Duration::from_secs(5)).await;
    let took = start.elapsed();
    // Refused before any open is attempted: nothing waits for a writer.
    assert!(took < Duration::from_secs(2), "took {took:?}");
    let output = result.outcome.expect("the block itself succeeds");
    let seen: Vec<&str> = output.payload.iter().map(|s| s.content.as_str()).collect();
    assert!(
        seen[..3].iter().all(|s| s.contains("not permitted")),
        "{seen:?}"
    );
    assert!(
        seen[3].contains("pipe"),
        "the FIFO is still listed: {seen:?}"
    );
}

#[tokio::test]
async fn a_fifo_in_the_workspace_does_not_stall_a_restricted_block() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("out")).unwrap();
    mkfifo(&ws.path().join("pipe"));
    mkfifo(&ws.path().join("out/pipe"));
    let set = plugins(ws.path());
    let ops = json!({"ops": [
        {"op": "write", "path": "/workspace/out/a.txt", "content": "a"},
        {"op": "write", "path": "/workspace/notes.md", "content": "n"},
        {"op": "list", "path": "/workspace/out"},
    ]});
    let start = Instant::now();
    // `out/**` stages a copy of `out/`; `*.md` stages the whole root.
    let result = run(
        &set,
        "probe",
        ops,
        Some(&["out/**", "*.md"]),
        Duration::from_secs(5),
    )
    .await;
    assert!(start.elapsed() < Duration::from_secs(5));
    let output = result.outcome.expect("the block succeeds");
    let seen: Vec<&str> = output.payload.iter().map(|s| s.content.as_str()).collect();
    assert_eq!(seen, ["ok: ()", "ok: ()", "ok: [\"a.txt\"]"]);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("out/a.txt")).unwrap(),
        "a"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes.md")).unwrap(),
        "n"
    );
    // The FIFOs are left as they were.
    assert!(std::fs::symlink_metadata(ws.path().join("out/pipe")).is_ok());
}
