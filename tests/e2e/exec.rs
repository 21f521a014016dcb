//! Exec blocks through the binary: the built-in `exec` worker, the `exec`
//! capability, the safety policy and result bundles.

use super::*;
use crate::run::write_manifest;

/// A workspace holding a copy of the exec-build example's project.
fn project_workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    let project = ws.path().join("project");
    std::fs::create_dir(&project).unwrap();
    for f in std::fs::read_dir(repo().join("examples/exec-build/project")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, project.join(f.file_name().unwrap())).unwrap();
    }
    ws
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
    let out = wfhost(
        &[
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.path().to_str().unwrap(),
            "--json",
        ],
        scratch.path(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
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
    assert!(result.contains("2 command(s) succeeded"), "{result}");
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
fn the_policy_refuses_shells_and_the_message_names_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = exec_manifest(
        dir.path(),
        serde_json::json!({"config": {"commands": [{"argv": ["/usr/bin/env", "bash", "-c", "echo hi"]}]},
                           "transitions": end_on_success()}),
        true,
    );
    let out = run_workflow(&manifest, dir.path(), dir.path());
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("refused by rule `no-shell`") && err.contains("allow_shell"),
        "{err}"
    );
    assert!(
        !dir.path().join(".output/exec").exists(),
        "nothing ran, no bundle"
    );
}

#[test]
fn bad_commands_fail_the_block_with_a_clear_message() {
    for (command, expected) in [
        (
            serde_json::json!({"argv": ["no-such-program-xyz"]}),
            "program `no-such-program-xyz` not found",
        ),
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
        let out = run_workflow(&manifest, dir.path(), dir.path());
        assert_eq!(out.status.code(), Some(1), "{expected}");
        assert!(
            stderr(&out).contains(expected),
            "{expected}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn executors_this_host_lacks_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = exec_manifest(
        dir.path(),
        serde_json::json!({"config": {"commands": [{"argv": ["true"]}], "executor": {"container": {"image": "busybox"}}},
                           "transitions": end_on_success()}),
        true,
    );
    let out = run_workflow(&manifest, dir.path(), dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("container executor is not available"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn exec_must_be_granted() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = exec_manifest(
        dir.path(),
        serde_json::json!({"config": {"commands": [{"argv": ["true"]}]}, "transitions": end_on_success()}),
        false,
    );
    let out = run_workflow(&manifest, dir.path(), dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("wfhost:plugin/exec") && err.contains("`exec`"),
        "{err}"
    );
}
