//! The sandbox and limits, exercised by a real guest component (the probe
//! test guest) through the real runtime.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use wfhost_core::run::engine::{BlockRequest, BlockResult};
use wfhost_core::run::payload::BlockContext;
use wfhost_guest_artifacts as guests;
use wfhost_runtime::admission::World;
use wfhost_runtime::cache::CacheOutcome;
use wfhost_runtime::plugins::{PluginRequest, PluginSource};
use wfhost_runtime::{PluginSet, RuntimeConfig, WasmRuntime};

fn config(cache_dir: Option<PathBuf>) -> RuntimeConfig {
    RuntimeConfig {
        cache_dir,
        memory_limit: 64 << 20,
        pool_instances: 4,
        ..RuntimeConfig::default()
    }
}

/// A runtime whose cache lives in a directory shared by this test binary,
/// so only the first test pays for compiling the probe.
fn runtime() -> Arc<WasmRuntime> {
    let dir =
        std::env::temp_dir().join(format!("wfhost-sandbox-tests-cache-{}", std::process::id()));
    Arc::new(WasmRuntime::new(config(Some(dir))).unwrap())
}

fn request(name: &str, source: PluginSource, world: World) -> PluginRequest {
    PluginRequest {
        name: name.into(),
        source,
        world,
        grants: Vec::new(),
        http: None,
    }
}

/// A workspace inside a parent directory, so escapes have somewhere to land.
struct Fixture {
    root: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("ws")).unwrap();
        std::fs::create_dir(root.path().join("outside")).unwrap();
        std::fs::write(root.path().join("outside/secret.txt"), "top secret").unwrap();
        Fixture { root }
    }
    fn ws(&self) -> PathBuf {
        self.root.path().join("ws")
    }
    fn outside(&self) -> PathBuf {
        self.root.path().join("outside")
    }
    fn probe(&self) -> PluginSet {
        PluginSet::load(
            runtime(),
            &[request(
                "probe",
                PluginSource::Builtin(guests::TEST_PROBE),
                World::Worker,
            )],
            &self.ws(),
        )
        .unwrap()
    }
}

fn context(restrictions: Option<&[&str]>, ops: Value) -> BlockContext {
    BlockContext {
        workflow_id: "wf".into(),
        execution_id: "run-20260101-000000-00e4ec".into(),
        node_id: "main".into(),
        block_id: "probe".into(),
        step_index: 3,
        attempt: 1,
        previous_block_id: Some("main.before".into()),
        static_memory: json!({}),
        inherited_memory: json!({}),
        artifacts: Default::default(),
        config: json!({ "ops": ops }),
        inputs: json!({}),
        file_restrictions: restrictions.map(|r| r.iter().map(|s| s.to_string()).collect()),
        system_prompt: String::new(),
        assembled_context: String::new(),
    }
}

async fn run(set: &PluginSet, restrictions: Option<&[&str]>, ops: Value) -> BlockResult {
    run_with_timeout(set, restrictions, ops, None).await
}

async fn run_with_timeout(
    set: &PluginSet,
    restrictions: Option<&[&str]>,
    ops: Value,
    timeout: Option<Duration>,
) -> BlockResult {
    set.run_worker(BlockRequest {
        worker: "probe".into(),
        context: context(restrictions, ops),
        payload: Vec::new(),
        timeout,
        lane: None,
    })
    .await
}

/// The guest's own report of each op.
fn observed(result: &BlockResult) -> Vec<String> {
    let output = result
        .outcome
        .as_ref()
        .unwrap_or_else(|f| panic!("block failed: {}", f.message));
    output.payload.iter().map(|s| s.content.clone()).collect()
}

fn failure(result: &BlockResult) -> String {
    match &result.outcome {
        Ok(o) => panic!("block unexpectedly succeeded: {:?}", o.payload),
        Err(f) => f.message.clone(),
    }
}

fn write(path: &str) -> Value {
    json!({"op": "write", "path": path, "content": "x"})
}

fn no_file_named(root: &Path, name: &str) -> bool {
    walk(root)
        .iter()
        .all(|p| p.file_name().is_none_or(|n| n != name))
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if std::fs::symlink_metadata(&path).unwrap().is_dir() {
            out.extend(walk(&path));
        }
        out.push(path);
    }
    out
}

#[tokio::test]
async fn write_inside_a_restriction_lands() {
    let fx = Fixture::new();
    let result = run(
        &fx.probe(),
        Some(&["out/**"]),
        json!([write("out/a.txt"), write("out/deep/b.txt")]),
    )
    .await;
    let seen = observed(&result);
    assert!(seen[0].starts_with("ok"), "{seen:?}");
    assert_eq!(
        std::fs::read_to_string(fx.ws().join("out/a.txt")).unwrap(),
        "x"
    );
    // create_dir is not part of a plain write: the nested one needs its parent.
    assert!(seen[1].starts_with("err"), "{seen:?}");
}

#[tokio::test]
async fn write_outside_a_restriction_fails_in_the_guest_and_lands_nowhere() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.ws().join("src")).unwrap();
    let result = run(
        &fx.probe(),
        Some(&["out/**"]),
        json!([write("src/x.txt"), write("top.txt"), write("/workspace/abs.txt"),
               {"op": "mkdir", "path": "newdir"}, {"op": "remove", "path": "out"}]),
    )
    .await;
    for seen in observed(&result) {
        assert!(seen.starts_with("err"), "{seen}");
    }
    assert!(!fx.ws().join("src/x.txt").exists());
    assert!(!fx.ws().join("top.txt").exists());
    assert!(!fx.ws().join("abs.txt").exists());
    assert!(!fx.ws().join("newdir").exists());
}

#[tokio::test]
async fn read_only_workspace_is_still_readable() {
    let fx = Fixture::new();
    std::fs::write(fx.ws().join("input.txt"), "data").unwrap();
    let result = run(
        &fx.probe(),
        Some(&[]),
        json!([{"op": "read", "path": "input.txt"}, write(".output/o.json")]),
    )
    .await;
    let seen = observed(&result);
    assert_eq!(seen[0], "ok: \"data\"");
    assert!(
        seen[1].starts_with("ok"),
        "`.output/` is always writable: {seen:?}"
    );
    assert!(fx.ws().join(".output/o.json").exists());
}

#[tokio::test]
async fn dot_dot_and_absolute_paths_cannot_leave_the_workspace() {
    let fx = Fixture::new();
    let escape_rel = "../outside/secret.txt";
    let host_abs = fx.outside().join("secret.txt").display().to_string();
    let result = run(
        &fx.probe(),
        None, // even an unrestricted block stays inside the workspace
        json!([
            {"op": "read", "path": escape_rel},
            {"op": "read", "path": "out/../../outside/secret.txt"},
            {"op": "read", "path": host_abs},
            write("../escape.txt"),
            write("/escape.txt"),
            write("/tmp/wfhost-escape.txt"),
            {"op": "list", "path": "/"},
        ]),
    )
    .await;
    let seen = observed(&result);
    for s in &seen[..6] {
        assert!(s.starts_with("err"), "{seen:?}");
    }
    assert!(
        !seen[6].contains("etc"),
        "the guest must not see the host root: {}",
        seen[6]
    );
    assert!(no_file_named(fx.root.path(), "escape.txt"));
    assert!(!Path::new("/tmp/wfhost-escape.txt").exists());
}

#[tokio::test]
async fn planted_symlinks_do_not_lead_out() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.ws().join("out")).unwrap();
    std::os::unix::fs::symlink(fx.outside(), fx.ws().join("link")).unwrap();
    std::os::unix::fs::symlink(fx.outside(), fx.ws().join("out/link")).unwrap();
    let result = run(
        &fx.probe(),
        Some(&["out/**"]),
        json!([
            {"op": "read", "path": "link/secret.txt"},
            write("out/link/pwned.txt"),
        ]),
    )
    .await;
    let seen = observed(&result);
    assert!(seen.iter().all(|s| s.starts_with("err")), "{seen:?}");
    assert!(!fx.outside().join("pwned.txt").exists());
}

/// The host checks `.output` fully once per workspace and process, then
/// only looks that it is still the same directory: a guest that swaps it
/// for a link between blocks must not get the next block a mount outside.
#[tokio::test]
async fn an_output_dir_swapped_for_a_link_between_blocks_is_refused() {
    let fx = Fixture::new();
    let set = fx.probe();
    // The first block has `.output` made and checked.
    observed(&run(&set, Some(&[]), json!([write(".output/first.txt")])).await);
    // An unrestricted block moves it aside and plants a link in its place.
    let swap = run(
        &set,
        None,
        json!([
            {"op": "rename", "from": ".output", "to": "moved"},
            {"op": "symlink", "target": "moved", "link": ".output"},
        ]),
    )
    .await;
    assert!(
        observed(&swap).iter().all(|s| s.starts_with("ok")),
        "{swap:?}"
    );
    assert!(
        std::fs::symlink_metadata(fx.ws().join(".output"))
            .unwrap()
            .is_symlink()
    );
    // A read-only block would otherwise write into the workspace.
    for restrictions in [Some(&[][..]), None, Some(&["out/**"][..])] {
        let refused = run(&set, restrictions, json!([write(".output/pwned.txt")])).await;
        let message = failure(&refused);
        assert!(message.contains("symbolic link"), "{message}");
        assert!(!fx.ws().join("moved/pwned.txt").exists());
    }
    // So is a link out of the workspace planted from the host side (a
    // command a block ran, say).
    std::fs::remove_file(fx.ws().join(".output")).unwrap();
    std::os::unix::fs::symlink(fx.outside(), fx.ws().join(".output")).unwrap();
    let refused = run(&set, Some(&[]), json!([write(".output/pwned.txt")])).await;
    assert!(failure(&refused).contains("symbolic link"));
    assert!(!fx.outside().join("pwned.txt").exists());
    // A real directory swapped in is checked again (and gets its
    // `.gitignore`) before it is mounted.
    std::fs::remove_file(fx.ws().join(".output")).unwrap();
    std::fs::create_dir(fx.ws().join(".output")).unwrap();
    observed(&run(&set, Some(&[]), json!([write(".output/again.txt")])).await);
    assert!(fx.ws().join(".output/.gitignore").is_file());
    assert!(fx.ws().join(".output/again.txt").is_file());
}

/// A small block's staged copies are made in memory when there is a tmpfs
/// at `/dev/shm` (a disk makes directory churn cost more than the copy).
#[test]
fn small_staged_copies_are_made_in_memory() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.ws().join("out")).unwrap();
    std::fs::write(fx.ws().join("out/a.txt"), "a").unwrap();
    let plan =
        wfhost_core::workspace::restrictions::RestrictionPlan::new(Some(&["out/**".to_string()]))
            .unwrap();
    let sandbox = wfhost_runtime::sandbox::Sandbox::prepare(&fx.ws(), &plan).unwrap();
    let staged = &sandbox
        .mounts()
        .iter()
        .find(|m| m.guest.ends_with("/out"))
        .unwrap()
        .host;
    let expected = wfhost_exec::scratch::bases()[0].path.clone();
    assert!(
        staged.starts_with(&expected),
        "{staged:?} not in {expected:?}"
    );
    assert!(staged.join("a.txt").is_file());
    sandbox.finish(true, &Default::default()).unwrap();
}

#[tokio::test]
async fn a_symlink_the_guest_creates_does_not_lead_out_for_guest_or_host() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.ws().join("out")).unwrap();
    let set = fx.probe();
    let first = run(
        &set,
        Some(&["out/**"]),
        json!([
            {"op": "symlink", "target": "../..", "link": "out/evil"},
            write("out/evil/outside/pwned.txt"),
            {"op": "read", "path": "out/evil/outside/secret.txt"},
        ]),
    )
    .await;
    // WASI alone would let a guest create a link whose target leaves the
    // workspace (it just cannot follow it); the link guard refuses to make
    // it, so no later host process (an exec command, an agent) can follow
    // it out.
    let seen = observed(&first);
    assert!(seen.iter().all(|s| s.starts_with("err")), "{seen:?}");
    assert!(std::fs::symlink_metadata(fx.ws().join("out/evil")).is_err());
    assert!(!fx.outside().join("pwned.txt").exists());

    // A link already in the workspace (put there by the user): the host's
    // own copy, diff and apply (staging for an exact pattern) must carry it
    // as a link and never follow it.
    std::os::unix::fs::symlink("../..", fx.ws().join("out/evil")).unwrap();
    let second = run(
        &set,
        Some(&["**/*.md"]),
        json!([write("notes.md"), write("out/evil/outside/pwned.md")]),
    )
    .await;
    let seen = observed(&second);
    assert!(
        seen[0].starts_with("ok") && seen[1].starts_with("err"),
        "{seen:?}"
    );
    assert!(fx.ws().join("notes.md").exists());
    assert!(
        std::fs::symlink_metadata(fx.ws().join("out/evil"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(no_file_named(fx.root.path(), "pwned.txt"));
    assert!(no_file_named(fx.root.path(), "pwned.md"));
    assert_eq!(
        std::fs::read_to_string(fx.outside().join("secret.txt")).unwrap(),
        "top secret"
    );
}

#[tokio::test]
async fn exact_patterns_are_staged_and_applied_only_when_all_changes_match() {
    let fx = Fixture::new();
    let set = fx.probe();
    let ok = run(
        &set,
        Some(&["**/*.md"]),
        json!([
            {"op": "mkdir", "path": "docs"}, write("docs/guide.md"), write("README.md")
        ]),
    )
    .await;
    assert!(observed(&ok).iter().all(|s| s.starts_with("ok")));
    assert!(fx.ws().join("docs/guide.md").exists());
    assert!(fx.ws().join("README.md").exists());

    // The guest can write to its staged copy, but a non-matching change
    // fails the block and nothing of it is applied.
    let bad = run(
        &set,
        Some(&["**/*.md"]),
        json!([write("more.md"), write("main.rs")]),
    )
    .await;
    let message = failure(&bad);
    assert!(
        message.contains("main.rs") && message.contains("outside its file restrictions"),
        "{message}"
    );
    assert!(!fx.ws().join("more.md").exists());
    assert!(!fx.ws().join("main.rs").exists());
}

#[tokio::test]
async fn endless_loop_times_out_and_the_host_stays_healthy() {
    let fx = Fixture::new();
    let set = fx.probe();
    let started = std::time::Instant::now();
    let result = run_with_timeout(
        &set,
        None,
        json!([{"op": "spin"}]),
        Some(Duration::from_millis(300)),
    )
    .await;
    let message = failure(&result);
    assert!(message.contains("timed out after 300ms"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(30));
    // The same plugin set keeps working.
    let again = run(&set, None, json!([write("after.txt")])).await;
    assert!(observed(&again)[0].starts_with("ok"));
}

#[tokio::test]
async fn memory_bomb_hits_the_cap() {
    let fx = Fixture::new();
    let result = run(&fx.probe(), None, json!([{"op": "alloc", "mib": 512}])).await;
    let message = failure(&result);
    assert!(message.contains("memory limit of 64 MiB"), "{message}");
    // Within the cap is fine.
    let result = run(&fx.probe(), None, json!([{"op": "alloc", "mib": 16}])).await;
    assert_eq!(observed(&result)[0], "ok: 16");
}

#[tokio::test]
async fn a_panic_becomes_a_failed_block_with_the_guest_message() {
    let fx = Fixture::new();
    let result = run(
        &fx.probe(),
        None,
        json!([{"op": "panic", "message": "kaboom 42"}]),
    )
    .await;
    let message = failure(&result);
    assert!(
        message.contains("trapped") && message.contains("kaboom 42"),
        "{message}"
    );
    assert!(result.log.iter().any(|l| l.contains("kaboom 42")));
}

#[tokio::test]
async fn a_trap_names_its_cause() {
    let fx = Fixture::new();
    let exit = run(&fx.probe(), None, json!([{"op": "exit", "code": 0}])).await;
    let message = failure(&exit);
    assert!(message.contains("called exit(0)"), "{message}");
    let overflow = run(&fx.probe(), None, json!([{"op": "recurse"}])).await;
    let message = failure(&overflow);
    // Rust guests keep their stack in linear memory: it overflows out of bounds.
    assert!(
        message.contains("wasm trap: ") && message.contains("stack overflow"),
        "{message}"
    );
    assert!(!message.contains("error while executing"), "{message}");
}

#[tokio::test]
async fn a_returned_error_becomes_a_failed_block() {
    let fx = Fixture::new();
    let result = run(
        &fx.probe(),
        None,
        json!([{"op": "fail", "code": "bad-input", "message": "no spec.md"}]),
    )
    .await;
    assert_eq!(
        failure(&result),
        "plugin `probe` failed: bad-input: no spec.md"
    );
}

#[tokio::test]
async fn output_and_logs_are_captured_and_capped() {
    let fx = Fixture::new();
    let rt = Arc::new(
        WasmRuntime::new(RuntimeConfig {
            max_output_bytes: 10_000,
            max_log_bytes: 64,
            ..config(None)
        })
        .unwrap(),
    );
    let set = PluginSet::load(
        rt,
        &[request(
            "probe",
            PluginSource::Builtin(guests::TEST_PROBE),
            World::Worker,
        )],
        &fx.ws(),
    )
    .unwrap();
    let result = run(
        &set,
        None,
        json!([
            {"op": "print", "stdout": "to stdout", "stderr": "to stderr"},
            {"op": "log", "message": "to the log"},
            {"op": "print", "stdout": "y".repeat(500), "stderr": ""},
        ]),
    )
    .await;
    assert!(result.outcome.is_ok());
    let log = result.log.join("\n");
    assert!(log.contains("[stdout] to stdout"), "{log}");
    assert!(log.contains("[stderr] to stderr"), "{log}");
    assert!(log.contains("[info] to the log"), "{log}");
    assert!(
        log.contains("bytes of stdout dropped past the cap"),
        "{log}"
    );

    let huge = run(&set, None, json!([{"op": "huge", "bytes": 20_000}])).await;
    assert!(failure(&huge).contains("over the cap of 10000 bytes"));

    let not_utf8 = run(&set, None, json!([{"op": "bad_utf8"}])).await;
    let message = failure(&not_utf8);
    assert!(
        message.contains("plugin `probe` trapped") && message.to_lowercase().contains("utf-8"),
        "{message}"
    );
}

#[tokio::test]
async fn the_environment_is_the_contract_and_nothing_else() {
    let fx = Fixture::new();
    let result = run(&fx.probe(), Some(&["src/**"]), json!([{"op": "env"}])).await;
    let env = &observed(&result)[0];
    for expected in [
        "(\"WORKFLOW_ID\", \"wf\")",
        "(\"EXECUTION_ID\", \"run-20260101-000000-00e4ec\")",
        "(\"NODE_ID\", \"main.probe\")",
        "(\"BLOCK_ID\", \"probe\")",
        "(\"STEP_INDEX\", \"3\")",
        "(\"FILE_RESTRICTIONS\", \"[\\\"src/**\\\"]\")",
        "(\"OUTPUT_DIR\", \"/workspace/.output\")",
        "(\"PREVIOUS_BLOCK_ID\", \"main.before\")",
    ] {
        assert!(env.contains(expected), "{expected} missing from {env}");
    }
    assert!(!env.contains("HOME") && !env.contains("PATH"), "{env}");
}

/// `NODE_ID` follows the agent contract for every guest: `node.block`, and
/// in a lane the lane's agent id (`node.block.lane`), the value an agent CLI
/// the block runs gets.
#[tokio::test]
async fn a_guest_sees_the_node_id_an_agent_would() {
    use wfhost_core::run::engine::{LaneKey, Lanes};
    let fx = Fixture::new();
    let set = fx.probe();
    let key = LaneKey {
        run_id: format!("run-20260101-000004-{:06x}", std::process::id() & 0xff_ffff),
        step: 0,
        node: "main".into(),
        block: "probe".into(),
        lane: "left".into(),
    };
    set.create_lane(&key).await.unwrap();
    let result = set
        .run_worker(BlockRequest {
            worker: "probe".into(),
            context: context(None, json!([{"op": "env"}])),
            payload: Vec::new(),
            timeout: None,
            lane: Some(key.clone()),
        })
        .await;
    let env = observed(&result)[0].clone();
    set.remove_lanes(&key.run_id, 0).await;
    let expected = format!("(\"NODE_ID\", \"{}\")", key.agent_id());
    assert_eq!(key.agent_id(), "main.probe.left");
    assert!(env.contains(&expected), "{expected} missing from {env}");
}

#[test]
fn an_ungranted_capability_is_refused_at_load() {
    let fx = Fixture::new();
    let err = PluginSet::load(
        runtime(),
        &[request(
            "net",
            PluginSource::Builtin(guests::TEST_NET_PROBE),
            World::Worker,
        )],
        &fx.ws(),
    )
    .err()
    .unwrap();
    assert_eq!(err.plugin, "net");
    assert!(err.message.contains("wasi:sockets/"), "{err}");
    assert!(err.to_string().contains("plugin `net`"), "{err}");
}

#[test]
fn the_second_start_of_a_plugin_is_served_from_the_compiled_cache() {
    let cache = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let load = || {
        let rt = Arc::new(WasmRuntime::new(config(Some(cache.path().to_path_buf()))).unwrap());
        let set = PluginSet::load(
            rt.clone(),
            &[request(
                "echo",
                PluginSource::Builtin(guests::ECHO),
                World::Worker,
            )],
            ws.path(),
        )
        .unwrap();
        (set.loads()[0].outcome, rt.cache_stats())
    };
    let (first, stats) = load();
    assert_eq!(first, CacheOutcome::Compiled);
    assert_eq!((stats.compiles, stats.hits), (1, 0));
    let (second, stats) = load();
    assert_eq!(second, CacheOutcome::Hit);
    assert_eq!((stats.compiles, stats.hits), (0, 1));

    // A corrupted entry is not trusted: it is recompiled and replaced.
    for entry in std::fs::read_dir(cache.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "cwasm") {
            std::fs::write(path, b"garbage").unwrap();
        }
    }
    let (third, stats) = load();
    assert_eq!(third, CacheOutcome::Replaced);
    assert_eq!((stats.compiles, stats.rejected), (1, 1));
    assert_eq!(load().0, CacheOutcome::Hit);
}

#[test]
fn files_that_are_not_components_of_the_right_world_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let try_load = |bytes: &[u8], world: World| {
        let path = dir.path().join("plugin.wasm");
        std::fs::write(&path, bytes).unwrap();
        PluginSet::load(
            rt.clone(),
            &[request("p", PluginSource::File(path), world)],
            dir.path(),
        )
        .err()
        .unwrap()
        .to_string()
    };
    assert!(try_load(b"hello", World::Worker).contains("not a WebAssembly file"));
    assert!(
        try_load(b"\0asm\x01\0\0\0", World::Worker)
            .contains("core WebAssembly module, not a component")
    );
    assert!(
        try_load(guests::ACTIONS_CORE, World::Worker)
            .contains("is an action-handler component, but it is used as a worker")
    );
    assert!(
        try_load(guests::ECHO, World::ActionHandler)
            .contains("is a worker component, but it is used as an action-handler")
    );
    let missing = PluginSet::load(
        rt.clone(),
        &[request(
            "p",
            PluginSource::File(dir.path().join("nope.wasm")),
            World::Worker,
        )],
        dir.path(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        missing.contains("nope.wasm") && missing.contains("cannot read"),
        "{missing}"
    );
}

#[tokio::test]
async fn a_failed_block_leaves_the_workspace_as_it_was() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.ws().join("out")).unwrap();
    std::fs::write(fx.ws().join("out/kept.txt"), "before").unwrap();
    let set = fx.probe();
    for failing in [
        json!({"op": "panic", "message": "late crash"}),
        json!({"op": "fail", "code": "x", "message": "gave up"}),
        json!({"op": "bad_utf8"}),
    ] {
        let result = run(
            &set,
            Some(&["out/**"]),
            json!([
                {"op": "write", "path": "out/kept.txt", "content": "after"},
                write("out/new.txt"),
                {"op": "remove", "path": "out/kept.txt"},
                failing,
            ]),
        )
        .await;
        assert!(result.outcome.is_err());
        assert_eq!(
            std::fs::read_to_string(fx.ws().join("out/kept.txt")).unwrap(),
            "before"
        );
        assert!(!fx.ws().join("out/new.txt").exists());
    }
    // The same writes in a block that succeeds land.
    let ok = run(
        &set,
        Some(&["out/**"]),
        json!([write("out/new.txt"), {"op": "remove", "path": "out/kept.txt"}]),
    )
    .await;
    assert!(observed(&ok).iter().all(|s| s.starts_with("ok")));
    assert!(fx.ws().join("out/new.txt").exists());
    assert!(!fx.ws().join("out/kept.txt").exists());
}

/// The tree under `dir` as (path, bytes), links as their targets.
fn snapshot_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                out.push((rel + "/", Vec::new()));
                stack.push(p);
            } else if meta.file_type().is_symlink() {
                out.push((
                    rel,
                    std::fs::read_link(&p)
                        .unwrap()
                        .display()
                        .to_string()
                        .into_bytes(),
                ));
            } else {
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn a_full_disk_while_applying_leaves_the_workspace_as_it_was() {
    // A 1 MiB tmpfs holds the workspace; the block's staged copies live in
    // $TMPDIR, so the block succeeds and the disk fills while applying.
    let fx = Fixture::new();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(fx.ws())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        if std::env::var_os("WFHOST_REQUIRE_SERVICES").is_some() {
            panic!("cannot mount a tmpfs (root needed) for the full-disk test");
        }
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(fx.ws());
    std::fs::create_dir(fx.ws().join("out")).unwrap();
    std::fs::write(fx.ws().join("out/a.txt"), "original").unwrap();
    std::fs::write(fx.ws().join("out/z.txt"), "kept").unwrap();
    // The host makes `.output/` (with its .gitignore) before any block;
    // not part of the test.
    wfhost_core::workspace::ensure_host_dir(&fx.ws(), ".output").unwrap();
    let before = snapshot_of(&fx.ws());
    let set = fx.probe();
    let result = run(
        &set,
        Some(&["out/**"]),
        json!([
            {"op": "write", "path": "out/a.txt", "content": "changed"},
            {"op": "write", "path": "out/b.txt", "content": "new"},
            {"op": "write", "path": "out/c.bin", "content": "x".repeat(2 << 20)},
            {"op": "remove", "path": "out/z.txt"},
        ]),
    )
    .await;
    let message = failure(&result);
    assert!(message.contains("none were applied"), "{message}");
    assert_eq!(snapshot_of(&fx.ws()), before, "the workspace changed");
}

fn seen_ok(seen: &[String]) -> Vec<bool> {
    seen.iter().map(|s| s.starts_with("ok")).collect()
}

fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

#[tokio::test]
async fn an_unrestricted_block_makes_only_links_that_stay_inside() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.ws().join("notes")).unwrap();
    let result = run(
        &fx.probe(),
        None,
        json!([
            {"op": "symlink", "target": "../../outside", "link": "notes/cache"},
            {"op": "symlink", "target": "..", "link": "up"},
            {"op": "symlink", "target": "sub/../../..", "link": "notes/tricky"},
            {"op": "symlink", "target": "../docs/guide.md", "link": "notes/guide"},
            {"op": "symlink", "target": "..", "link": "notes/root"},
        ]),
    )
    .await;
    assert_eq!(
        seen_ok(&observed(&result)),
        [false, false, false, true, true]
    );
    assert!(!is_link(&fx.ws().join("notes/cache")));
    assert!(!is_link(&fx.ws().join("up")));
    assert!(!is_link(&fx.ws().join("notes/tricky")));
    assert_eq!(
        std::fs::read_link(fx.ws().join("notes/guide")).unwrap(),
        Path::new("../docs/guide.md")
    );
}

#[tokio::test]
async fn a_link_cannot_be_moved_or_hard_linked_to_where_it_leads_out() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.ws().join("a/b")).unwrap();
    let result = run(
        &fx.probe(),
        None,
        json!([
            // Inside at depth 2: ../../x is the workspace's x.
            {"op": "symlink", "target": "../../x", "link": "a/b/l"},
            // At the root the same text leads two levels out.
            {"op": "rename", "from": "a/b/l", "to": "l"},
            {"op": "hard_link", "from": "a/b/l", "to": "l2"},
            // The directory holding it, moved up a level.
            {"op": "rename", "from": "a/b", "to": "c"},
            // Moved sideways or deeper, it still stays inside.
            {"op": "rename", "from": "a/b", "to": "a/b2"},
            {"op": "mkdir", "path": "a/b2/deeper"},
            {"op": "rename", "from": "a/b2/l", "to": "a/b2/deeper/l"},
        ]),
    )
    .await;
    assert_eq!(
        seen_ok(&observed(&result)),
        [true, false, false, false, true, true, true]
    );
    assert!(!is_link(&fx.ws().join("l")));
    assert!(!is_link(&fx.ws().join("l2")));
    assert!(!fx.ws().join("c").exists());
    assert!(is_link(&fx.ws().join("a/b2/deeper/l")));
}

#[tokio::test]
async fn a_link_a_user_left_cannot_be_moved_out_by_a_guest() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.ws().join("a/b")).unwrap();
    std::fs::write(fx.ws().join("x"), "workspace file").unwrap();
    std::os::unix::fs::symlink("../../x", fx.ws().join("a/b/l")).unwrap();
    let result = run(
        &fx.probe(),
        None,
        json!([
            {"op": "rename", "from": "a/b", "to": "c"},
            {"op": "read", "path": "a/b/l"},
        ]),
    )
    .await;
    assert_eq!(seen_ok(&observed(&result)), [false, true]);
    assert!(is_link(&fx.ws().join("a/b/l")));
    assert!(!fx.ws().join("c").exists());
}
