//! Secrets through the binary: `wfhost secret`, `{"secret": NAME}` env
//! references resolved only when a command starts, their values masked
//! everywhere the host keeps output, and the clean environment of exec
//! commands.

use super::*;
use crate::run::write_manifest;
use std::io::Write;
use std::process::Stdio;

const VALUE: &str = "s3cr3t-v4lue-42";

/// `wfhost secret set NAME` with `value` on stdin.
fn set_secret(scratch: &Path, name: &str, value: &str) -> Output {
    let mut child = command(scratch)
        .args(["secret", "set", name])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{value}\n").as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// A one-block workflow whose exec block runs `argv` with `env` and
/// `env_passthrough`.
fn manifest(dir: &Path, argv: &[&str], extra: serde_json::Value) -> PathBuf {
    let mut config = serde_json::json!({"commands": [{"argv": argv}]});
    if let Some(env) = extra.get("env") {
        config["commands"][0]["env"] = env.clone();
    }
    if let Some(pass) = extra.get("env_passthrough") {
        config["env_passthrough"] = pass.clone();
    }
    write_manifest(
        dir,
        serde_json::json!({
            "id": "secrets", "start_node": "main",
            "plugins": {"exec": {"grants": ["exec"]}},
            "nodes": {"main": {"entry_block": "x", "blocks": {"x": {
                "worker": "exec",
                "config": config,
                "transitions": [
                    {"on_signal": "SIGNAL:SUCCESS", "action": "END"},
                    {"on_signal": "SIGNAL:EXEC_FAILED", "action": "FAIL:failed"}
                ]
            }}}}
        }),
    )
}

/// The bytes of every file below `dir` that contain `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for rel in tree(dir) {
        let path = dir.join(&rel);
        if let Ok(bytes) = std::fs::read(&path)
            && bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
        {
            found.push(rel);
        }
    }
    found
}

/// The stdout file of the run's first command.
fn command_stdout(ws: &Path) -> String {
    let file = tree(ws)
        .into_iter()
        .find(|p| p.starts_with(".output/exec/") && p.ends_with("cmd-1.stdout"))
        .expect("a bundle with cmd-1.stdout");
    std::fs::read_to_string(ws.join(file)).unwrap()
}

#[test]
fn a_secret_reaches_the_command_and_nothing_the_host_keeps() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = workspace_in(scratch.path());
    let out = set_secret(scratch.path(), "TOKEN", VALUE);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ls = wfhost(&["secret", "ls"], scratch.path());
    assert_eq!(stdout(&ls), "TOKEN\n");
    let file = scratch.path().join("home/secrets/TOKEN");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), VALUE);

    // `printenv` prints the value it got; the host keeps `***` in its
    // place, which it writes only where it found exactly the value.
    let m = manifest(
        scratch.path(),
        &["printenv", "TOKEN"],
        serde_json::json!({"env": {"TOKEN": {"secret": "TOKEN"}}}),
    );
    let (code, report) = run_report(&m, &ws, scratch.path());
    assert_eq!(code, Some(0), "{report}");
    let run = report["run_id"].as_str().unwrap().to_string();
    assert_eq!(command_stdout(&ws), "***\n");

    // Nowhere the host keeps or shows: store, bundle, export, logs, show.
    assert_eq!(
        files_containing(&scratch.path().join("home"), VALUE),
        ["secrets/TOKEN"]
    );
    assert!(files_containing(&ws, VALUE).is_empty());
    let export = wfhost(&["export", &run, "-o", "-"], scratch.path());
    assert_eq!(export.status.code(), Some(0), "{}", stderr(&export));
    let exported = String::from_utf8_lossy(&export.stdout);
    assert!(!exported.contains(VALUE));
    assert!(exported.contains("TOKEN"), "the reference is kept");
    let logs = wfhost(&["logs", &run], scratch.path());
    assert_eq!(logs.status.code(), Some(0), "{}", stderr(&logs));
    assert!(stdout(&logs).contains("***"), "{}", stdout(&logs));
    assert!(!stdout(&logs).contains(VALUE));
    let show = wfhost(&["show", &run, "--json"], scratch.path());
    assert!(!stdout(&show).contains(VALUE));
    assert!(!report.to_string().contains(VALUE));

    // rm, and a bad name.
    let rm = wfhost(&["secret", "rm", "TOKEN"], scratch.path());
    assert_eq!(rm.status.code(), Some(0), "{}", stderr(&rm));
    assert_eq!(stdout(&wfhost(&["secret", "ls"], scratch.path())), "");
    let bad = set_secret(scratch.path(), "BAD-NAME", "x");
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("BAD-NAME"), "{}", stderr(&bad));
}

#[test]
fn a_secret_falls_back_to_the_environment_and_is_masked() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = workspace_in(scratch.path());
    let m = manifest(
        scratch.path(),
        &["env"],
        serde_json::json!({"env": {"API_KEY": {"secret": "WF_TEST_API_KEY"}}}),
    );
    let out = command(scratch.path())
        .args(["run", m.to_str().unwrap(), "-w", ws.to_str().unwrap()])
        .env("WF_TEST_API_KEY", VALUE)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let seen = command_stdout(&ws);
    assert!(seen.contains("API_KEY=***\n"), "{seen}");
    // The fallback variable itself is not passed: only what the block names.
    assert!(!seen.contains("WF_TEST_API_KEY"), "{seen}");
    assert!(files_containing(scratch.path(), VALUE).is_empty());
}

#[test]
fn commands_get_a_clean_environment_and_what_the_block_passes_through() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = workspace_in(scratch.path());
    let run_env = |extra: serde_json::Value| {
        let m = manifest(scratch.path(), &["env"], extra);
        let _ = std::fs::remove_dir_all(ws.join(".output"));
        let out = command(scratch.path())
            .args(["run", m.to_str().unwrap(), "-w", ws.to_str().unwrap()])
            .env("MY_SECRET", "s3cr3t")
            .env("LC_WFTEST", "kept")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        command_stdout(&ws)
    };
    let plain = run_env(serde_json::json!({}));
    assert!(!plain.contains("MY_SECRET"), "{plain}");
    assert!(!plain.contains("WFHOST_HOME"), "{plain}");
    assert!(plain.lines().any(|l| l.starts_with("PATH=")), "{plain}");
    assert!(plain.contains("LC_WFTEST=kept\n"), "{plain}");
    assert!(plain.contains("NODE_ID="), "{plain}");
    // Passthrough is not a secret: passed as it is, not masked.
    let passed = run_env(serde_json::json!({"env_passthrough": ["MY_SECRET"]}));
    assert!(passed.contains("MY_SECRET=s3cr3t\n"), "{passed}");
}

#[test]
fn an_unset_secret_is_refused_before_anything_runs() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = workspace_in(scratch.path());
    let m = manifest(
        scratch.path(),
        &["printenv", "TOKEN"],
        serde_json::json!({"env": {"TOKEN": {"secret": "WF_TEST_NEVER_SET"}}}),
    );
    let out = run_workflow(&m, &ws, scratch.path());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("WF_TEST_NEVER_SET"), "{err}");
    assert!(
        err.contains("/nodes/main/blocks/x/config/commands/0/env/TOKEN"),
        "{err}"
    );
    assert!(!scratch.path().join("home/wfhost.db").exists());
    assert!(tree(&ws).is_empty(), "{:?}", tree(&ws));
}
