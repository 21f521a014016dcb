//! The container executor against a real Docker engine.
//!
//! Needs dockerd and the `wfhost-test/busybox:1` image: `scripts/services.sh
//! docker` (as root) provides both. Without them these tests skip with a
//! message, unless `WFHOST_REQUIRE_SERVICES=1` (set by CI), which makes a
//! missing service a failure.

use std::path::Path;
use std::time::{Duration, Instant};

use wfhost_core::policy::exec::{ExecCommand, ExecSpec};
use wfhost_exec::{BundleMeta, ContainerOptions, ContainerPool, ExecError, ExecRequest};

const IMAGE: &str = "wfhost-test/busybox:1";

async fn pool_or_skip() -> Option<ContainerPool> {
    let required = std::env::var("WFHOST_REQUIRE_SERVICES").is_ok_and(|v| v == "1");
    let problem = match ContainerPool::connect().await {
        Ok(pool) => match pool.docker().inspect_image(IMAGE).await {
            Ok(_) => return Some(pool),
            Err(e) => format!("the test image {IMAGE} is missing ({e})"),
        },
        Err(e) => e.to_string(),
    };
    if required {
        panic!("{problem} (WFHOST_REQUIRE_SERVICES=1)");
    }
    eprintln!(
        "skipping: {problem}; run `sudo scripts/services.sh docker` to start Docker and build the image"
    );
    None
}

fn cmd(argv: &[&str]) -> ExecCommand {
    ExecCommand {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: None,
        env: vec![],
    }
}

fn request(dir: &Path, run: &str, name: &str, commands: Vec<ExecCommand>) -> ExecRequest {
    ExecRequest {
        spec: ExecSpec {
            commands,
            allow_shell: false,
        },
        workdir: dir.to_path_buf(),
        bundle_dir: dir.join(format!(".output/exec/{name}")),
        env: vec![
            ("EXECUTION_ID".into(), run.into()),
            ("NODE_ID".into(), "main".into()),
            ("OUTPUT_DIR".into(), "/host/path/.output".into()),
        ],
        meta: BundleMeta {
            agent_id: "test".into(),
            run_id: run.parse().unwrap(),
            stage_id: "main.x".into(),
            step: 0,
            attempt: 1,
        },
        deadline: None,
        output_cap: 1 << 20,
        stdin: None,
        mask: Default::default(),
    }
}

fn busybox() -> ContainerOptions {
    ContainerOptions {
        image: IMAGE.into(),
        cpus: Some(1.0),
        memory_mb: Some(128),
        ..Default::default()
    }
}

fn manifest(dir: &Path, name: &str) -> serde_json::Value {
    serde_json::from_slice(
        &std::fs::read(dir.join(format!(".output/exec/{name}/manifest.json"))).unwrap(),
    )
    .unwrap()
}

/// A run id of its own for each test and process.
fn run_id(test: &str) -> String {
    let n = test
        .bytes()
        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    format!(
        "run-20260101-{:06}-{:06x}",
        n % 1_000_000,
        std::process::id() & 0xff_ffff
    )
}

#[tokio::test]
async fn the_workspace_is_mounted_and_the_env_contract_set() {
    let Some(pool) = pool_or_skip().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("in.txt"), "from the host\n").unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let mut env = cmd(&["env"]);
    env.env = vec![("EXTRA".into(), "1".into())];
    let mut pwd = cmd(&["pwd"]);
    pwd.cwd = Some("sub".into());
    let run = run_id("mount");
    let outcome = pool
        .run(
            &request(
                dir.path(),
                &run,
                "a",
                vec![
                    cmd(&["cat", "/workspace/in.txt"]),
                    env,
                    pwd,
                    cmd(&["touch", "made-inside"]),
                ],
            ),
            &busybox(),
        )
        .await
        .unwrap();
    assert!(outcome.succeeded, "{outcome:?}");
    let b = dir.path().join(".output/exec/a");
    assert_eq!(
        std::fs::read_to_string(b.join("cmd-1.stdout")).unwrap(),
        "from the host\n"
    );
    let env = std::fs::read_to_string(b.join("cmd-2.stdout")).unwrap();
    for var in [
        format!("EXECUTION_ID={run}"),
        "NODE_ID=main".into(),
        "OUTPUT_DIR=/workspace/.output".into(),
        "EXTRA=1".into(),
    ] {
        assert!(env.contains(&var), "{var} in {env}");
    }
    assert_eq!(
        std::fs::read_to_string(b.join("cmd-3.stdout")).unwrap(),
        "/workspace/sub\n"
    );
    assert!(
        dir.path().join("made-inside").exists(),
        "writes land in the host workspace"
    );
    let m = manifest(dir.path(), "a");
    assert_eq!(m["executor"], "container");
    assert_eq!(m["container"]["image"], IMAGE);
    pool.shutdown().await;
    assert!(
        pool.containers_of(&run).await.unwrap().is_empty(),
        "shutdown removes the run's containers"
    );
}

#[tokio::test]
async fn a_dormant_container_is_unpaused_and_a_removed_one_replaced() {
    let Some(pool) = pool_or_skip().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = run_id("dormant");
    pool.run(
        &request(dir.path(), &run, "first", vec![cmd(&["true"])]),
        &busybox(),
    )
    .await
    .unwrap();
    let first = manifest(dir.path(), "first");
    assert_eq!(first["container"]["warm"], false);
    let id = first["container"]["id"].as_str().unwrap().to_string();
    // Between blocks the container sleeps paused.
    let state = pool
        .docker()
        .inspect_container(&id, None)
        .await
        .unwrap()
        .state
        .unwrap();
    assert_eq!(state.paused, Some(true));

    // The woken container runs the second block with the second block's
    // environment, not the one it was created with.
    let mut second_request = request(dir.path(), &run, "second", vec![cmd(&["env"])]);
    for (key, value) in second_request.env.iter_mut() {
        if key == "NODE_ID" {
            *value = "main.second".into();
        }
    }
    second_request.env.push(("STEP_INDEX".into(), "1".into()));
    pool.run(&second_request, &busybox()).await.unwrap();
    let second = manifest(dir.path(), "second");
    assert_eq!(second["container"]["warm"], true);
    assert_eq!(second["container"]["id"], id.as_str());
    let env = std::fs::read_to_string(dir.path().join(".output/exec/second/cmd-1.stdout")).unwrap();
    let lines: Vec<&str> = env.lines().collect();
    assert!(lines.contains(&"NODE_ID=main.second"), "{env}");
    assert!(!lines.contains(&"NODE_ID=main"), "{env}");
    assert!(lines.contains(&"STEP_INDEX=1"), "{env}");
    assert!(lines.contains(&"OUTPUT_DIR=/workspace/.output"), "{env}");

    // Someone removes it: the next block starts a new one, correctly.
    pool.docker()
        .remove_container(
            &id,
            Some(bollard::query_parameters::RemoveContainerOptions {
                force: true,
                ..Default::default()
            }),
        )
        .await
        .unwrap();
    let outcome = pool
        .run(
            &request(dir.path(), &run, "third", vec![cmd(&["echo", "cold"])]),
            &busybox(),
        )
        .await
        .unwrap();
    assert!(outcome.succeeded);
    let third = manifest(dir.path(), "third");
    assert_eq!(third["container"]["warm"], false);
    assert_ne!(third["container"]["id"], id.as_str());
    pool.shutdown().await;
    assert!(pool.containers_of(&run).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_timeout_ends_the_command_and_its_container() {
    let Some(pool) = pool_or_skip().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = run_id("timeout");
    let mut req = request(dir.path(), &run, "slow", vec![cmd(&["sleep", "30"])]);
    req.deadline = Some(Instant::now() + Duration::from_secs(1));
    let t = Instant::now();
    let outcome = pool.run(&req, &busybox()).await.unwrap();
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    assert!(outcome.commands[0].timed_out);
    assert!(
        pool.containers_of(&run).await.unwrap().is_empty(),
        "the container went with the timeout"
    );
}

#[tokio::test]
async fn failures_are_clear_and_leave_nothing_behind() {
    let Some(pool) = pool_or_skip().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = run_id("failures");
    let unknown = ContainerOptions {
        image: "wfhost-test/no-such-image:9".into(),
        cpus: None,
        memory_mb: None,
        ..Default::default()
    };
    match pool
        .run(
            &request(dir.path(), &run, "x", vec![cmd(&["true"])]),
            &unknown,
        )
        .await
    {
        Err(ExecError::Invalid(m)) => assert!(
            m.contains("no-such-image") && m.contains("never pulls"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(pool.containers_of(&run).await.unwrap().is_empty());

    let outcome = pool
        .run(
            &request(dir.path(), &run, "y", vec![cmd(&["no-such-program-xyz"])]),
            &busybox(),
        )
        .await
        .unwrap();
    assert!(!outcome.succeeded);
    let error = outcome.commands[0].error.clone().unwrap_or_default();
    assert!(error.contains("not found"), "{outcome:?}");

    match pool
        .run(
            &request(dir.path(), &run, "z", vec![cmd(&["sh", "-c", "x"])]),
            &busybox(),
        )
        .await
    {
        Err(ExecError::Refused(v)) => assert_eq!(v.rule, "no-shell"),
        other => panic!("{other:?}"),
    }
    pool.shutdown().await;
    assert!(pool.containers_of(&run).await.unwrap().is_empty());
}

#[tokio::test]
async fn orphans_of_dead_runs_are_removed() {
    let Some(pool) = pool_or_skip().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = run_id("orphan");
    pool.run(
        &request(dir.path(), &run, "o", vec![cmd(&["true"])]),
        &busybox(),
    )
    .await
    .unwrap();
    // A host that crashed never calls shutdown; a later gc finds the container.
    drop(pool);
    let gc = ContainerPool::connect().await.unwrap();
    // Its owner is this (live) process: not an orphan.
    assert!(
        gc.remove_orphans(|o| o.process_alive())
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(gc.containers_of(&run).await.unwrap().len(), 1);
    // Once its run is known to be over, it is.
    let removed = gc.remove_orphans(|o| o.run_id != run).await.unwrap();
    assert_eq!(removed.len(), 1);
    assert!(gc.containers_of(&run).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_block_abandoned_mid_command_leaves_its_container_to_shutdown() {
    let Some(pool) = pool_or_skip().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = run_id("abandoned");
    let req = request(dir.path(), &run, "gone", vec![cmd(&["sleep", "60"])]);
    // The caller gives up (its future is dropped) while the command runs.
    let abandoned = tokio::time::timeout(Duration::from_secs(3), pool.run(&req, &busybox())).await;
    assert!(abandoned.is_err(), "the block was still running");
    assert_eq!(pool.containers_of(&run).await.unwrap().len(), 1);
    pool.shutdown().await;
    assert!(
        pool.containers_of(&run).await.unwrap().is_empty(),
        "shutdown removes the abandoned block's container"
    );
}

#[tokio::test]
async fn a_missing_working_directory_is_named_not_blamed_on_the_program() {
    let Some(pool) = pool_or_skip().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = run_id("cwd");
    let mut command = cmd(&["ls"]);
    command.cwd = Some("project".into());
    let outcome = pool
        .run(&request(dir.path(), &run, "cwd", vec![command]), &busybox())
        .await
        .unwrap();
    assert!(!outcome.succeeded);
    let error = outcome.commands[0].error.clone().unwrap_or_default();
    assert!(
        error.contains("working directory `project` does not exist in the workspace"),
        "{error}"
    );
    pool.shutdown().await;
}

#[tokio::test]
async fn the_first_command_reads_the_request_stdin_to_its_end() {
    let Some(pool) = pool_or_skip().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = run_id("stdin");
    // 1 MiB: more than a pipe holds, fed while the output is drained.
    let big: Vec<u8> = (0..(1 << 20)).map(|i| b'a' + (i % 26) as u8).collect();
    let mut r = request(
        dir.path(),
        &run,
        "stdin",
        vec![cmd(&["wc", "-c"]), cmd(&["cat"])],
    );
    r.stdin = Some(big.clone());
    let outcome = pool.run(&r, &busybox()).await.unwrap();
    assert!(outcome.succeeded, "{outcome:?}");
    let b = dir.path().join(".output/exec/stdin");
    assert_eq!(
        std::fs::read_to_string(b.join("cmd-1.stdout"))
            .unwrap()
            .trim(),
        big.len().to_string()
    );
    // The second command gets no stdin: `cat` ends at once with nothing.
    assert_eq!(std::fs::read_to_string(b.join("cmd-2.stdout")).unwrap(), "");
    pool.shutdown().await;
}
