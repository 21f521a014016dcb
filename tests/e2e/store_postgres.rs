//! The run store on PostgreSQL through the binary: a home whose
//! `config.json` names a database (or `WFHOST_STORE`) keeps its runs
//! there; a run killed mid-block is resumed from it; a database that
//! cannot be reached or refuses the credentials is one line and a
//! non-zero exit.

use std::io::BufRead;
use std::process::Stdio;
use std::time::Duration;

use wfhost_store::testing::TestDatabase;

use super::*;

/// A scratch directory whose home's store is a new database (dropped with
/// it); None when there is no PostgreSQL to test against (skipped).
fn scratch_on_postgres() -> Option<(tempfile::TempDir, TestDatabase)> {
    let db = TestDatabase::create()?;
    let scratch = tempfile::tempdir().unwrap();
    db.configure(&scratch.path().join("home"));
    Some((scratch, db))
}

#[test]
fn a_run_on_postgres_killed_mid_block_is_resumed_from_the_database() {
    let Some((scratch, _db)) = scratch_on_postgres() else {
        return;
    };
    let s = scratch.path();
    let ws = workspace_in(s);
    let manifest = repo().join("examples/durable/workflow.json");
    let mut child = command(s)
        .args([
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
        ])
        .args(["--set", "think_ms=1500"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("run run-"), "{first}");
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(
        !s.join("home").join(wfhost_store::STORE_FILE).exists(),
        "no embedded store was made"
    );
    let runs: serde_json::Value =
        serde_json::from_slice(&wfhost(&["runs", "--json"], s).stdout).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(runs[0]["status"], "interrupted", "{runs}");
    let id = runs[0]["id"].as_str().unwrap().to_string();
    let out = wfhost(&["resume", &id], s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let show = shown_with_steps(&["show", &id, "--json"], s);
    assert_eq!(show["status"], "succeeded", "{show}");
    assert_eq!(show["steps"][0]["interrupted"], 1, "{show}");
    let events = run_events(s, &id);
    assert_eq!(events[0]["type"], "run_started", "{:?}", events[0]);
}

#[test]
fn an_unreachable_database_or_wrong_credentials_is_one_line_and_a_failure() {
    let Some((scratch, db)) = scratch_on_postgres() else {
        return;
    };
    let s = scratch.path();
    let wrong_password = db
        .url
        .replacen("wfhost_test:wfhost_test@", "wfhost_test:nope@", 1);
    assert_ne!(
        wrong_password, db.url,
        "the test URL has the test role's password"
    );
    for (url, says) in [
        (
            "postgres://wfhost_test:pw@127.0.0.1:1/nowhere",
            "cannot connect",
        ),
        (wrong_password.as_str(), "password authentication failed"),
        ("mysql://root@db/x", "postgres://"),
    ] {
        let out = command(s)
            .env("WFHOST_STORE", url)
            .args(["runs"])
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_ne!(out.status.code(), Some(0), "{url}: {err}");
        assert!(err.contains(says), "{url}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{url}: {err}");
        assert!(
            !err.contains("nope") && !err.contains(":pw@"),
            "a password printed: {err}"
        );
    }
}
