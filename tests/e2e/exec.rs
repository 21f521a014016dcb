//! Exec blocks through the binary: the built-in `exec` worker, the `exec`
//! capability, the safety policy and result bundles.

use super::*;
use crate::run::write_manifest;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A workspace holding a copy of the exec-build example's project.
pub(super) fn project_workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    let project = ws.path().join("project");
    std::fs::create_dir(&project).unwrap();
    for f in std::fs::read_dir(repo().join("examples/exec-build/project")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, project.join(f.file_name().unwrap())).unwrap();
    }
    ws
}

/// `wfhost run MANIFEST -w WS --json`, which must succeed; its report.
fn run_json(manifest: &Path, ws: &Path, scratch: &Path) -> serde_json::Value {
    let out = wfhost(
        &[
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
            "--json",
        ],
        scratch,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A one-block workflow running `commands` with the exec worker.
fn exec_manifest(dir: &Path, block: serde_json::Value, grant: bool) -> PathBuf {
    let mut wf = serde_json::json!({
        "id": "exec-test", "start_node": "main",
        "nodes": {"main": {"entry_block": "x", "blocks": {"x": block}}}
    });
    if grant {
        wf["plugins"] = serde_json::json!({"exec": {"grants": ["exec"]}});
    }
    wf["nodes"]["main"]["blocks"]["x"]["worker"] = "exec".into();
    write_manifest(dir, wf)
}

fn end_on_success() -> serde_json::Value {
    serde_json::json!([
        {"on_signal": "SIGNAL:SUCCESS", "action": "END"},
        {"on_signal": "SIGNAL:EXEC_FAILED", "action": "FAIL:a command failed"},
        {"on_signal": "SIGNAL:EXEC_TIMEOUT", "action": "FAIL:timed out"}
    ])
}

#[test]
fn the_exec_build_example_builds_tests_and_leaves_a_bundle() {
    let ws = project_workspace();
    let scratch = tempfile::tempdir().unwrap();
    let manifest = repo().join("examples/exec-build/workflow.json");
    let report = run_json(&manifest, ws.path(), scratch.path());
    let run_id = report["run_id"].as_str().unwrap();
    let result = report["payload"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["type"] == "EXEC_RESULT")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(result.contains("2 commands succeeded"), "{result}");
    let bundle = ws
        .path()
        .join(format!(".output/exec/{run_id}/step-0-main.build"));
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["executor"], "local");
    assert_eq!(m["succeeded"], true);
    assert_eq!(m["commands"][1]["exit_code"], 0);
    assert!(
        std::fs::read_to_string(bundle.join("cmd-2.stderr"))
            .unwrap()
            .contains("Ran 3 tests")
    );
    let env: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("meta/env.json")).unwrap()).unwrap();
    assert_eq!(env["run_id"], run_id);
    assert_eq!(env["stage_id"], "main.build");
    assert!(bundle.join("meta/repo.txt").is_file());
}

#[test]
fn a_failing_test_fails_the_run_and_keeps_the_evidence() {
    let ws = project_workspace();
    let scratch = tempfile::tempdir().unwrap();
    let test = ws.path().join("project/test_calc.py");
    let broken = std::fs::read_to_string(&test)
        .unwrap()
        .replace("add(2, 3), 5", "add(2, 3), 6");
    std::fs::write(&test, broken).unwrap();
    let manifest = repo().join("examples/exec-build/workflow.json");
    let out = wfhost(
        &[
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.path().to_str().unwrap(),
        ],
        scratch.path(),
    );
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("the build or its tests failed"),
        "{}",
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("main.build -> SIGNAL:EXEC_FAILED"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn the_policy_refuses_shells_before_the_run_and_validate_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = exec_manifest(
        dir.path(),
        serde_json::json!({"config": {"commands": [{"argv": ["ls"]}, {"argv": ["/usr/bin/env", "bash", "-c", "echo hi"]}]},
                           "transitions": end_on_success()}),
        true,
    );
    let pointer = "/nodes/main/blocks/x/config/commands/1";
    let hint = "set `\"allow_shell\": true` in the block's `config`";
    let checked = wfhost(&["validate", manifest.to_str().unwrap()], dir.path());
    assert_eq!(checked.status.code(), Some(2), "{}", stdout(&checked));
    let err = stderr(&checked);
    assert!(
        err.contains(pointer) && err.contains("refused by rule `no-shell`") && err.contains(hint),
        "{err}"
    );
    let out = run_workflow(&manifest, &workspace_in(dir.path()), dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains(pointer) && err.contains(hint), "{err}");
    assert!(
        !dir.path().join("ws/.output").exists(),
        "nothing ran, no bundle"
    );
    // Allowed in the block's config, the same commands pass.
    let allowed = exec_manifest(
        dir.path(),
        serde_json::json!({"config": {"commands": [{"argv": ["/usr/bin/env", "bash", "-c", "echo hi"]}],
                                      "allow_shell": true},
                           "transitions": end_on_success()}),
        true,
    );
    let checked = wfhost(&["validate", allowed.to_str().unwrap()], dir.path());
    assert_eq!(checked.status.code(), Some(0), "{}", stderr(&checked));
}

#[test]
fn bad_commands_are_refused_before_the_run_or_fail_the_block() {
    // The policy's refusals are known before anything runs (exit 2).
    for (command, expected) in [
        (
            serde_json::json!({"argv": ["ls"], "env": {"A": "x\u{0}y"}}),
            "is not a valid environment override",
        ),
        (
            serde_json::json!({"argv": ["ls"], "cwd": "../.."}),
            "leaves the working directory",
        ),
        (
            serde_json::json!({"argv": ["rm", "-rf", "/"]}),
            "refused by rule `destructive-path`",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let manifest = exec_manifest(
            dir.path(),
            serde_json::json!({"config": {"commands": [command]}, "transitions": end_on_success()}),
            true,
        );
        let out = run_workflow(&manifest, &workspace_in(dir.path()), dir.path());
        assert_eq!(out.status.code(), Some(2), "{expected}");
        let err = stderr(&out);
        assert!(
            err.contains(expected) && err.contains("/nodes/main/blocks/x/config/commands/0"),
            "{expected}: {err}"
        );
    }
    // A program that is not there is known only when the command starts.
    let dir = tempfile::tempdir().unwrap();
    let manifest = exec_manifest(
        dir.path(),
        serde_json::json!({"config": {"commands": [{"argv": ["no-such-program-xyz"]}]},
                           "transitions": end_on_success()}),
        true,
    );
    let out = run_workflow(&manifest, &workspace_in(dir.path()), dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("program `no-such-program-xyz` not found"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn executors_and_images_that_are_missing_say_so() {
    for (executor, expected) in [
        (
            serde_json::json!({"slurm": {"partition": "nosuch"}}),
            vec![
                "partition",
                "Slurm is not available",
                "Slurm is not reachable",
            ],
        ),
        (
            serde_json::json!({"container": {"image": "wfhost-test/no-such-image:9"}}),
            vec!["never pulls", "cannot reach Docker"],
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let manifest = exec_manifest(
            dir.path(),
            serde_json::json!({"config": {"commands": [{"argv": ["true"]}], "executor": executor},
                               "transitions": end_on_success()}),
            true,
        );
        let out = run_workflow(&manifest, &workspace_in(dir.path()), dir.path());
        assert_eq!(out.status.code(), Some(1));
        let err = stderr(&out);
        assert!(
            expected.iter().any(|e| err.contains(e)),
            "{expected:?}: {err}"
        );
    }
}

#[test]
fn exec_must_be_granted() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = exec_manifest(
        dir.path(),
        serde_json::json!({"config": {"commands": [{"argv": ["true"]}]}, "transitions": end_on_success()}),
        false,
    );
    let out = run_workflow(&manifest, &workspace_in(dir.path()), dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("wfhost:plugin/exec") && err.contains("`exec`"),
        "{err}"
    );
}

/// Whether Docker and the test image are there; skips (or, under
/// `WFHOST_REQUIRE_SERVICES=1`, fails) otherwise.
pub(super) fn docker_ready() -> bool {
    let ok = Command::new("docker")
        .args(["image", "inspect", "wfhost-test/busybox:1"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("WFHOST_REQUIRE_SERVICES").as_deref() != Ok("1"),
            "Docker or the image wfhost-test/busybox:1 is missing (WFHOST_REQUIRE_SERVICES=1)"
        );
        eprintln!(
            "skipping: Docker or wfhost-test/busybox:1 missing; run `sudo scripts/services.sh docker`"
        );
    }
    ok
}

#[test]
fn the_exec_container_example_reuses_its_dormant_container_and_cleans_up() {
    if !docker_ready() {
        return;
    }
    let ws = project_workspace();
    let scratch = tempfile::tempdir().unwrap();
    let manifest = repo().join("examples/exec-container/workflow.json");
    let report = run_json(&manifest, ws.path(), scratch.path());
    let run_id = report["run_id"].as_str().unwrap();
    let manifest_of = |block: &str| -> serde_json::Value {
        let path = ws
            .path()
            .join(format!(".output/exec/{run_id}/{block}/manifest.json"));
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    };
    let survey = manifest_of("step-0-main.survey");
    let check = manifest_of("step-1-main.check");
    assert_eq!(survey["executor"], "container");
    assert_eq!(survey["container"]["warm"], false);
    assert_eq!(
        check["container"]["warm"], true,
        "the second block woke the first's container"
    );
    assert_eq!(check["container"]["id"], survey["container"]["id"]);
    // Written inside the container, visible on the host.
    assert!(ws.path().join(".output/reports/calc.py").is_file());
    // No container of the run is left once it is at rest.
    let left = Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=dev.wfhost.run={run_id}"),
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&left.stdout).trim().is_empty(),
        "containers left behind"
    );
}

/// Whether a Slurm cluster answers; skips (or, under
/// `WFHOST_REQUIRE_SERVICES=1`, fails) otherwise.
pub(super) fn slurm_ready() -> bool {
    let ok = Command::new("sinfo")
        .args(["-h", "-o", "%T"])
        .output()
        .is_ok_and(|o| o.status.success() && !o.stdout.is_empty());
    if !ok {
        assert!(
            std::env::var("WFHOST_REQUIRE_SERVICES").as_deref() != Ok("1"),
            "Slurm does not answer (WFHOST_REQUIRE_SERVICES=1)"
        );
        eprintln!("skipping: Slurm does not answer; run `sudo scripts/services.sh slurm`");
    }
    ok
}

#[test]
fn the_exec_slurm_example_builds_and_tests_as_a_slurm_job() {
    if !slurm_ready() {
        return;
    }
    let ws = project_workspace();
    let scratch = tempfile::tempdir().unwrap();
    let manifest = repo().join("examples/exec-slurm/workflow.json");
    let report = run_json(&manifest, ws.path(), scratch.path());
    let run_id = report["run_id"].as_str().unwrap();
    let bundle = ws
        .path()
        .join(format!(".output/exec/{run_id}/step-0-main.build"));
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["executor"], "slurm");
    assert_eq!(m["slurm"]["state"], "COMPLETED");
    assert!(m["slurm_job_id"].as_str().is_some_and(|id| !id.is_empty()));
    let tests = std::fs::read_to_string(bundle.join("cmd-2.stderr")).unwrap();
    assert!(tests.contains("OK"), "{tests}");
}

/// A one-block workflow running the capability probe with `ops`.
fn probe_manifest(dir: &Path, grants: &[&str], ops: serde_json::Value) -> PathBuf {
    let wf = serde_json::json!({
        "id": "capability-probe", "start_node": "main",
        "plugins": {"probe": {"path": wfhost_guest_artifacts::TEST_CAPABILITY_PROBE_PATH, "grants": grants}},
        "nodes": {"main": {"entry_block": "x", "blocks": {"x": {
            "worker": "probe",
            "timeout": "120s",
            "config": {"ops": ops},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
        }}}}
    });
    write_manifest(dir, wf)
}

/// The probe's `PROBE` segments, in order.
fn probe_results(report: &serde_json::Value) -> Vec<String> {
    report["payload"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["type"] == "PROBE")
        .map(|s| s["content"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_plugin_drives_a_container_through_the_container_capability() {
    if !docker_ready() {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("in.txt"), "host file\n").unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let manifest = probe_manifest(
        scratch.path(),
        &["container", "slurm"],
        serde_json::json!([
            {"op": "container_run", "image": "wfhost-test/busybox:1",
             "argv": ["cat", "/workspace/in.txt"]},
            {"op": "container_wait", "timeout_ms": 20000},
            {"op": "container_logs"},
            {"op": "container_remove"},
            {"op": "container_status"},
            {"op": "container_run", "image": "wfhost-test/busybox:1", "argv": ["sleep", "60"]},
            {"op": "container_pause"},
            {"op": "container_status"},
            {"op": "container_unpause"},
            {"op": "container_status"},
            {"op": "container_status_of", "id": "0123456789ab"},
            {"op": "container_run", "image": "wfhost-test/busybox:1", "argv": ["sh", "-c", "x"]},
            {"op": "container_run", "image": "wfhost-test/no-such-image:1", "argv": ["true"]}
        ]),
    );
    let r = probe_results(&run_json(&manifest, ws.path(), scratch.path()));
    assert!(r[0].starts_with("ok: "), "{r:?}");
    assert_eq!(r[1], "ok: exited(0)");
    assert_eq!(r[2], "ok: host file\n|");
    assert_eq!(r[3], "ok: ");
    assert!(
        r[4].starts_with("err: invalid"),
        "removed means no longer ours: {r:?}"
    );
    assert!(r[5].starts_with("ok: "), "{r:?}");
    let sleeper = r[5].trim_start_matches("ok: ").to_string();
    assert_eq!(r[7], "ok: paused");
    assert_eq!(r[9], "ok: running");
    assert!(r[10].starts_with("err: invalid"), "{r:?}");
    assert!(
        r[11].starts_with("err: refused") && r[11].contains("no-shell"),
        "{r:?}"
    );
    assert!(
        r[12].starts_with("err: invalid") && r[12].contains("never pulls"),
        "{r:?}"
    );
    // The run is at rest: the sleeper it left is gone.
    let left = Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--no-trunc",
            "--filter",
            &format!("id={sleeper}"),
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&left.stdout).trim().is_empty(),
        "containers left behind"
    );
}

#[test]
fn a_plugin_without_the_grant_cannot_import_container_or_slurm() {
    let ws = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let manifest = probe_manifest(scratch.path(), &["exec"], serde_json::json!([]));
    let out = run_workflow(&manifest, ws.path(), scratch.path());
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("wfhost:plugin/container") && err.contains("wfhost:plugin/slurm"),
        "{err}"
    );
}

#[test]
fn a_plugin_submits_watches_and_cancels_slurm_jobs() {
    if !slurm_ready() {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    // Inline code (`python3 -c`) counts as a shell; a script file does not.
    std::fs::write(ws.path().join("exit4.py"), "raise SystemExit(4)\n").unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let manifest = probe_manifest(
        scratch.path(),
        &["container", "slurm"],
        serde_json::json!([
            {"op": "slurm_submit", "commands": [["touch", "from-slurm"], ["python3", "exit4.py"]], "partition": "debug"},
            {"op": "slurm_wait", "timeout_ms": 60000},
            {"op": "slurm_submit", "commands": [["sleep", "60"]], "partition": "debug"},
            {"op": "slurm_cancel"},
            {"op": "slurm_wait", "timeout_ms": 60000},
            {"op": "slurm_status_of", "id": "999999"},
            {"op": "slurm_submit", "commands": [["true"]], "partition": "nosuch"}
        ]),
    );
    let r = probe_results(&run_json(&manifest, ws.path(), scratch.path()));
    assert!(r[0].starts_with("ok: "), "{r:?}");
    assert!(
        r[1].starts_with("ok: FAILED finished=true succeeded=false")
            && r[1].contains("exits=[Some(0), Some(4)]"),
        "{r:?}"
    );
    assert!(ws.path().join("from-slurm").exists());
    assert_eq!(r[3], "ok: ");
    assert!(r[4].starts_with("ok: CANCELLED finished=true"), "{r:?}");
    assert!(r[5].starts_with("err: invalid"), "{r:?}");
    assert!(
        r[6].starts_with("err: invalid") && r[6].contains("partition"),
        "{r:?}"
    );
}

#[test]
fn unreachable_docker_or_slurm_fails_the_block_clearly_and_keeps_the_run_record() {
    // A PATH without Slurm's commands, and a Docker socket nobody listens on.
    let bin = tempfile::tempdir().unwrap();
    for tool in ["true", "python3"] {
        if let Ok(p) = which(tool) {
            std::os::unix::fs::symlink(p, bin.path().join(tool)).unwrap();
        }
    }
    for (executor, expected) in [
        (
            serde_json::json!({"slurm": {"partition": "debug"}}),
            "Slurm is not available on this host: `sbatch` not found",
        ),
        (
            serde_json::json!({"container": {"image": "wfhost-test/busybox:1"}}),
            "cannot reach Docker",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let manifest = exec_manifest(
            dir.path(),
            serde_json::json!({"config": {"commands": [{"argv": ["true"]}], "executor": executor},
                               "transitions": end_on_success()}),
            true,
        );
        let out = command(dir.path())
            .env("PATH", bin.path())
            .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
            .args([
                "run",
                manifest.to_str().unwrap(),
                "--workspace",
                workspace_in(dir.path()).to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        let err = stderr(&out);
        assert!(err.contains(expected), "{expected}: {err}");
        // The failed run is on record, with the reason.
        let runs = wfhost(&["runs", "--json"], dir.path());
        let runs = stdout(&runs);
        assert!(runs.contains("failed"), "{runs}");
        assert!(
            !dir.path().join("ws/.output/exec").exists()
                || tree(&dir.path().join("ws/.output/exec")).is_empty()
                || tree(&dir.path().join("ws/.output/exec"))
                    .iter()
                    .all(|p| !p.contains("manifest.json")),
            "no bundle for a block that never ran"
        );
    }
}

fn which(tool: &str) -> Result<PathBuf, ()> {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
        .ok_or(())
}

#[test]
fn the_executor_flag_moves_blocks_that_name_none() {
    let ws = project_workspace();
    let scratch = tempfile::tempdir().unwrap();
    let bad = wfhost(
        &[
            "run",
            repo()
                .join("examples/exec-build/workflow.json")
                .to_str()
                .unwrap(),
            "-w",
            ws.path().to_str().unwrap(),
            "--executor",
            "kubernetes",
        ],
        scratch.path(),
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("`kubernetes` is not an executor"),
        "{}",
        stderr(&bad)
    );
    let mut cases = Vec::new();
    if slurm_ready() {
        cases.push(("slurm:debug", "slurm"));
    }
    if docker_ready() {
        cases.push(("container:wfhost-test/busybox:1", "container"));
    }
    for (flag, executor) in cases {
        let manifest = exec_manifest(
            scratch.path(),
            serde_json::json!({"config": {"commands": [{"argv": ["grep", "-c", "def", "calc.py"], "cwd": "project"}]},
                               "transitions": end_on_success()}),
            true,
        );
        let out = wfhost(
            &[
                "run",
                manifest.to_str().unwrap(),
                "-w",
                ws.path().to_str().unwrap(),
                "--json",
                "--executor",
                flag,
            ],
            scratch.path(),
        );
        assert_eq!(out.status.code(), Some(0), "{flag}: {}", stderr(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let run_id = report["run_id"].as_str().unwrap();
        let m: serde_json::Value = serde_json::from_slice(
            &std::fs::read(
                ws.path()
                    .join(format!(".output/exec/{run_id}/step-0-main.x/manifest.json")),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(m["executor"], executor, "{flag}");
    }
}

/// Start `wfhost run` on a one-block workflow whose command sleeps, wait
/// until `leftover(pid)` finds what the block started for the wfhost
/// process `pid`, SIGKILL wfhost, and return the scratch dir and the
/// leftover.
fn crash_mid_block(
    executor: serde_json::Value,
    leftover: impl Fn(u32) -> Option<String>,
) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let manifest = exec_manifest(
        dir.path(),
        serde_json::json!({"timeout": "600s",
                           "config": {"commands": [{"argv": ["sleep", "300"]}], "executor": executor},
                           "transitions": end_on_success()}),
        true,
    );
    let mut child = command(dir.path())
        .args([
            "run",
            manifest.to_str().unwrap(),
            "--workspace",
            workspace_in(dir.path()).to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let found = loop {
        if let Some(found) = leftover(child.id()) {
            break found;
        }
        assert!(std::time::Instant::now() < until, "the block never started");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    child.kill().unwrap(); // SIGKILL: no shutdown, no cleanup
    child.wait().unwrap();
    (dir, found)
}

fn lines(program: &str, args: &[&str]) -> Vec<String> {
    let out = Command::new(program).args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn gc_removes_the_container_and_cancels_the_job_a_crashed_run_left() {
    if docker_ready() {
        let of = |pid: u32| {
            lines(
                "docker",
                &[
                    "ps",
                    "-aq",
                    "--filter",
                    &format!("label=dev.wfhost.pid={pid}"),
                ],
            )
        };
        let (dir, pid) = crash_mid_block(
            serde_json::json!({"container": {"image": "wfhost-test/busybox:1"}}),
            |pid| (!of(pid).is_empty()).then(|| pid.to_string()),
        );
        let pid: u32 = pid.parse().unwrap();
        let left = of(pid);
        assert_eq!(left.len(), 1, "the crash left its container");
        let gc = wfhost(&["gc", "--json"], dir.path());
        let report: serde_json::Value = serde_json::from_slice(&gc.stdout).unwrap();
        let removed = report["orphan_containers_removed"].as_array().unwrap();
        assert!(
            removed
                .iter()
                .any(|id| id.as_str().unwrap().starts_with(&left[0])),
            "{report}"
        );
        assert!(of(pid).is_empty());
    }
    if slurm_ready() {
        let job_of = |pid: u32| {
            lines("squeue", &["-h", "-o", "%i %k"])
                .into_iter()
                .find(|j| j.contains(&format!(";pid={pid};")))
                .map(|j| j.split_whitespace().next().unwrap().to_string())
        };
        let (dir, id) =
            crash_mid_block(serde_json::json!({"slurm": {"partition": "debug"}}), job_of);
        let gc = wfhost(&["gc", "--json"], dir.path());
        let report: serde_json::Value = serde_json::from_slice(&gc.stdout).unwrap();
        assert!(
            report["orphan_slurm_jobs_cancelled"]
                .as_array()
                .unwrap()
                .iter()
                .any(|j| j == id.as_str()),
            "{report}"
        );
    }
}

#[test]
fn a_resumed_run_keeps_the_executor_it_was_started_with() {
    let executor = if slurm_ready() {
        ("slurm:debug", "slurm")
    } else if docker_ready() {
        ("container:wfhost-test/busybox:1", "container")
    } else {
        return;
    };
    let ws = project_workspace();
    let scratch = tempfile::tempdir().unwrap();
    let wf = serde_json::json!({
        "id": "gate-then-exec", "start_node": "main",
        "plugins": {"exec": {"grants": ["exec"]}},
        "nodes": {"main": {"entry_block": "ask", "blocks": {
            "ask": {"worker": "echo", "config": {"message": "go?"}, "transitions": [
                {"on_signal": "SIGNAL:SUCCESS", "action": "GATE:Run the build?"},
                {"on_signal": "SIGNAL:GATE_APPROVED", "action": "JUMP:build"},
                {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL:no"}
            ]},
            "build": {"worker": "exec",
                      "config": {"commands": [{"argv": ["grep", "-c", "def", "calc.py"], "cwd": "project"}]},
                      "transitions": end_on_success()}
        }}}
    });
    let manifest = write_manifest(scratch.path(), wf);
    let out = wfhost(
        &[
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.path().to_str().unwrap(),
            "--json",
            "--executor",
            executor.0,
        ],
        scratch.path(),
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run_id = report["run_id"].as_str().unwrap().to_string();
    // A later process, without the flag, continues the run.
    let out = wfhost(&["gate", &run_id, "UD-1", "approved"], scratch.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let m: serde_json::Value = serde_json::from_slice(
        &std::fs::read(ws.path().join(format!(
            ".output/exec/{run_id}/step-1-main.build/manifest.json"
        )))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(m["executor"], executor.1);
}

/// Whether `pid` is a live (not zombie) process.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .chars()
            .next();
        state != Some('Z') && state != Some('X')
    })
}

#[test]
fn ctrl_c_stops_the_blocks_processes_and_the_run_resumes_to_success() {
    let ws = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    // The first attempt leaves a daemon behind (its own session) and
    // sleeps; the attempt after the resume succeeds at once.
    let script = "if [ -e done ]; then exit 0; fi; touch done; \
                  setsid sh -c 'echo $$ > daemon.pid; exec sleep 60' </dev/null >/dev/null 2>&1 & \
                  echo $$ > block.pid; exec sleep 60";
    let manifest = exec_manifest(
        scratch.path(),
        serde_json::json!({
            "config": {"allow_shell": true, "commands": [{"argv": ["sh", "-c", script]}]},
            "transitions": end_on_success(),
        }),
        true,
    );
    let mut child = command(scratch.path())
        .args([
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.path().to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let read_pid = |name: &str| {
        std::fs::read_to_string(ws.path().join(name))
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
    };
    while (read_pid("block.pid").is_none() || read_pid("daemon.pid").is_none())
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (block, daemon) = (
        read_pid("block.pid").unwrap(),
        read_pid("daemon.pid").unwrap(),
    );
    // SAFETY: signalling the wfhost child this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let status = child.wait().unwrap();
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(
        err.contains("interrupted (SIGINT)") && err.contains("wfhost resume"),
        "{err}"
    );
    std::thread::sleep(Duration::from_millis(100));
    assert!(!alive(block), "the block's process {block} survived Ctrl-C");
    assert!(
        !alive(daemon),
        "the block's daemon {daemon} survived Ctrl-C"
    );

    let runs = wfhost(&["runs", "--json"], scratch.path());
    let id = serde_json::from_slice::<serde_json::Value>(&runs.stdout).unwrap()[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let resumed = wfhost(&["resume", &id], scratch.path());
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
}

/// Containers labelled with run `id` (any state).
fn containers_of(id: &str) -> Vec<String> {
    let out = Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=dev.wfhost.run={id}"),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn cancel_stops_a_live_runs_container_and_is_recorded() {
    if !docker_ready() {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let manifest = exec_manifest(
        scratch.path(),
        serde_json::json!({
            "timeout": "120s",
            "config": {
                "executor": {"container": {"image": "wfhost-test/busybox:1"}},
                "commands": [{"argv": ["sleep", "60"]}]
            },
            "transitions": end_on_success(),
        }),
        true,
    );
    let child = command(scratch.path())
        .args([
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.path().to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the run to be recorded and its container to exist.
    let deadline = Instant::now() + Duration::from_secs(60);
    let id = loop {
        let runs = wfhost(&["runs", "--json"], scratch.path());
        let listed: serde_json::Value =
            serde_json::from_slice(&runs.stdout).unwrap_or(serde_json::Value::Null);
        if let Some(id) = listed[0]["id"].as_str()
            && !containers_of(id).is_empty()
        {
            break id.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "the run never started its container"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let tail = &id[id.len() - 6..];
    let out = wfhost(&["cancel", tail, "--reason", "wrong input"], scratch.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(" with wfhost cancel: wrong input"),
        "{}",
        stdout(&out)
    );
    // The run's own terminal says who stopped it and why, and never
    // offers to resume it.
    let stopped = child.wait_with_output().unwrap();
    let said = stderr(&stopped);
    assert_eq!(stopped.status.code(), Some(5), "{said}");
    assert!(said.contains(" with wfhost cancel: wrong input"), "{said}");
    assert!(said.contains("will not continue"), "{said}");
    assert!(!said.contains("resume"), "{said}");
    assert!(
        containers_of(&id).is_empty(),
        "the container survived the cancel"
    );
    let events = wfhost(&["events", &id, "--json"], scratch.path());
    let last: serde_json::Value =
        serde_json::from_str(stdout(&events).lines().last().unwrap()).unwrap();
    assert_eq!(last["event"]["type"], "run_finished", "{last}");
    assert_eq!(last["event"]["outcome"]["status"], "cancelled", "{last}");
    assert_eq!(last["event"]["outcome"]["reason"], "wrong input", "{last}");
    assert!(
        last["event"]["outcome"]["by"]
            .as_str()
            .is_some_and(|by| by.ends_with(" with wfhost cancel")),
        "{last}"
    );
    let listed: serde_json::Value =
        serde_json::from_slice(&wfhost(&["runs", "--json"], scratch.path()).stdout).unwrap();
    assert_eq!(listed[0]["status"], "cancelled", "{listed}");
    // Cancelling again, resuming or deleting it: clear answers.
    let again = wfhost(&["cancel", &id], scratch.path());
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again).contains("was cancelled already"),
        "{}",
        stderr(&again)
    );
    let resume = wfhost(&["resume", &id], scratch.path());
    assert_eq!(resume.status.code(), Some(2), "{}", stderr(&resume));
    assert!(stderr(&resume).contains("cancelled"), "{}", stderr(&resume));
    let rm = wfhost(&["rm", &id], scratch.path());
    assert_eq!(rm.status.code(), Some(0), "{}", stderr(&rm));
    let show = wfhost(&["show", &id], scratch.path());
    assert_eq!(show.status.code(), Some(2));
}

#[test]
fn cancel_closes_a_waiting_run_and_rm_refuses_a_running_one() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = workspace_in(s);
    let gate = wfhost(
        &[
            "run",
            repo()
                .join("examples/review-gate/workflow.json")
                .to_str()
                .unwrap(),
            "-w",
            ws.to_str().unwrap(),
        ],
        s,
    );
    assert_eq!(gate.status.code(), Some(3), "{}", stderr(&gate));
    let runs: serde_json::Value =
        serde_json::from_slice(&wfhost(&["runs", "--json"], s).stdout).unwrap();
    let id = runs[0]["id"].as_str().unwrap().to_string();
    let out = wfhost(&["cancel", &id], s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let gates = wfhost(&["gate", &id, "UD-1", "approved"], s);
    assert_eq!(gates.status.code(), Some(2), "{}", stderr(&gates));
    // rm: an unknown name among several removes nothing.
    let before = wfhost(&["runs", "--json"], s).stdout;
    let rm = wfhost(&["rm", &id, "no-such-run"], s);
    assert_eq!(rm.status.code(), Some(2));
    assert_eq!(wfhost(&["runs", "--json"], s).stdout, before);
    // A run that is executing is refused by rm.
    let mut live = command(s)
        .args([
            "run",
            repo()
                .join("examples/durable/workflow.json")
                .to_str()
                .unwrap(),
            "-w",
            tempfile::tempdir().unwrap().keep().to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let live_id = loop {
        let runs: serde_json::Value =
            serde_json::from_slice(&wfhost(&["runs", "--json"], s).stdout).unwrap_or_default();
        if let Some(r) = runs
            .as_array()
            .and_then(|a| a.iter().find(|r| r["id"] != id.as_str()))
        {
            break r["id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    };
    let rm = wfhost(&["rm", &live_id], s);
    assert_eq!(rm.status.code(), Some(4), "{}", stderr(&rm));
    assert!(stderr(&rm).contains("is executing"), "{}", stderr(&rm));
    assert_eq!(live.wait().unwrap().code(), Some(0));
}

/// A guest cannot plant a link for a later host process to follow out of
/// the workspace: the link is never made, so the exec block's `rm -rf`
/// removes only what is inside.
#[test]
fn a_link_planted_by_a_plugin_never_leads_a_later_exec_block_out() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    std::fs::create_dir_all(ws.join("notes")).unwrap();
    std::fs::create_dir(root.path().join("victim")).unwrap();
    std::fs::write(root.path().join("victim/precious.txt"), "keep me").unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let wf = serde_json::json!({
        "id": "plant-then-exec", "start_node": "main",
        "plugins": {
            "probe": {"path": wfhost_guest_artifacts::TEST_PROBE_PATH},
            "exec": {"grants": ["exec"]}
        },
        "nodes": {"main": {"entry_block": "plant", "blocks": {
            "plant": {"worker": "probe",
                      "config": {"ops": [
                          {"op": "symlink", "target": "../../victim", "link": "notes/cache"},
                          {"op": "symlink", "target": "../../victim", "link": "notes/../notes/cache"},
                          {"op": "symlink", "target": "x/../../../victim", "link": "notes/cache"}
                      ]},
                      "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:clean"}]},
            "clean": {"worker": "exec",
                      "config": {"commands": [{"argv": ["rm", "-rf", "notes/cache/"]}]},
                      "transitions": end_on_success()}
        }}}
    });
    let manifest = write_manifest(scratch.path(), wf);
    let report = run_json(&manifest, &ws, scratch.path());
    let planted: Vec<String> = report["payload"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["type"] == "PROBE")
        .map(|s| s["content"].as_str().unwrap().to_string())
        .collect();
    assert!(planted.iter().all(|p| p.starts_with("err")), "{planted:?}");
    assert!(std::fs::symlink_metadata(ws.join("notes/cache")).is_err());
    assert_eq!(
        std::fs::read_to_string(root.path().join("victim/precious.txt")).unwrap(),
        "keep me"
    );
}

/// The write limits hold while an exec command writes into the workspace
/// (a host process, outside the sandbox): the command is stopped, the
/// block fails naming the limit.
#[test]
fn an_exec_command_filling_the_disk_is_stopped_while_it_writes() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = scratch.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let manifest = exec_manifest(
        scratch.path(),
        serde_json::json!({
            "timeout": "60s",
            "limits": {"max_written_bytes": 4_000_000},
            "config": {"allow_shell": true, "commands": [{"argv": [
                "python3", "-c",
                "f = open('big.bin', 'wb')\nfor _ in range(1000000): f.write(bytes(65536)); f.flush()"
            ]}]},
            "transitions": [{"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "END"}]
        }),
        true,
    );
    let started = std::time::Instant::now();
    let report = run_json(&manifest, &ws, scratch.path());
    let took = started.elapsed();
    let error = report["payload"][0]["content"].as_str().unwrap_or_default();
    assert!(
        error.contains("was stopped")
            && error.contains("over its limit of 4000000 (`limits.max_written_bytes`)"),
        "{report}"
    );
    assert!(took < std::time::Duration::from_secs(20), "{took:?}");
    let written = std::fs::metadata(ws.join("big.bin")).map_or(0, |m| m.len());
    assert!(written < 400_000_000, "{written} bytes stayed");
    // The command was killed, not left writing.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let later = std::fs::metadata(ws.join("big.bin")).map_or(0, |m| m.len());
    assert_eq!(later, written, "the command kept writing");
}
