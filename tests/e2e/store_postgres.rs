//! The run store on PostgreSQL through the binary: a home whose
//! `config.json` names a database (or `WFHOST_STORE`) keeps its runs
//! there; a run killed mid-block is resumed from it; a database that
//! cannot be reached or refuses the credentials is one line and a
//! non-zero exit.

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

/// A scratch directory whose home's store is a new database on a private
/// server the test may stop and start; None when there is none (skipped).
fn scratch_on_private_server() -> Option<(
    wfhost_store::testing::PrivateServer,
    TestDatabase,
    tempfile::TempDir,
)> {
    let server = wfhost_store::testing::PrivateServer::start()?;
    let db = server.database();
    let scratch = tempfile::tempdir().unwrap();
    db.configure(&scratch.path().join("home"));
    Some((server, db, scratch))
}

#[test]
fn a_run_on_postgres_killed_mid_block_is_resumed_from_the_database() {
    let Some((scratch, _db)) = scratch_on_postgres() else {
        return;
    };
    let s = scratch.path();
    let (mut child, _output) = super::durable::thinking_run(s, 1500, Stdio::inherit());
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

/// `wfhost store migrate --to URL`: a home with a finished run and one
/// waiting at a gate moves into an empty database, verified table by
/// table; once the home names the database, the gate is answered there
/// and the run ends. A database that holds runs is refused.
#[test]
fn a_home_moves_into_postgres_and_its_waiting_run_goes_on_there() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let hello = repo().join("examples/hello/workflow.json");
    let out = run_workflow(&hello, &workspace_in(s), s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let gate = repo().join("examples/review-gate/workflow.json");
    let ws = s.join("ws-gate");
    std::fs::create_dir_all(&ws).unwrap();
    let out = run_workflow(&gate, &ws, s);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let before: serde_json::Value =
        serde_json::from_slice(&wfhost(&["runs", "--json"], s).stdout).unwrap();
    assert_eq!(before.as_array().unwrap().len(), 2);

    let out = wfhost(&["store", "migrate", "--to", &db.url, "--json"], s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tables = report["tables"].as_array().unwrap();
    let rows = |name: &str| {
        tables.iter().find(|t| t["table"] == name).unwrap()["rows"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(rows("runs"), 2, "{report}");
    assert!(rows("events") > 10, "{report}");
    assert!(
        !report.to_string().contains("wfhost_test:wfhost_test@"),
        "password shown: {report}"
    );

    // A second move finds the database holding runs, and changes nothing.
    let again = wfhost(&["store", "migrate", "--to", &db.url], s);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("empty database"),
        "{}",
        stderr(&again)
    );

    // The home now uses the database: the same runs, and the gate goes on.
    db.configure(&s.join("home"));
    let after: serde_json::Value =
        serde_json::from_slice(&wfhost(&["runs", "--json"], s).stdout).unwrap();
    assert_eq!(after, before, "the runs read the same from the database");
    let id = before
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["status"] == "waiting")
        .expect("the gate's run waits")["id"]
        .as_str()
        .unwrap()
        .to_string();
    let out = wfhost(&["gate", &id, "UD-1", "approved"], s);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let show = shown_with_steps(&["show", &id, "--json"], s);
    assert_eq!(show["status"], "succeeded", "{show}");
}

/// Two servers with homes of their own on one database: a run started
/// through the first, whose blocks the second server's agent runs, goes
/// on to its end when the first server is SIGKILLed mid-run — its run
/// process and the jobs live on, and every step and job is recorded once.
#[test]
fn two_servers_on_one_database_a_run_outlives_the_server_it_started_on() {
    use super::leases::{jobs, start};
    use super::serve::{await_status, http_get, serve_with};
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    db.configure(&first.path().join("home"));
    db.configure(&second.path().join("home"));
    let mut a = serve_with(first.path(), &["--local-agents", "0", "--lease-ms", "2000"]);
    let b = serve_with(
        second.path(),
        &["--local-agents", "1", "--lease-ms", "2000"],
    );
    let blocks = 6;
    let manifest = super::block_chain(
        "naps",
        blocks,
        serde_json::json!({"worker": "exec", "config": {"commands": [{"argv": ["sleep", "0.3"]}]}}),
        serde_json::json!({"exec": {"grants": ["exec"]}}),
    );
    let ws = workspace_in(first.path());
    let run = start(&a, &manifest, &ws);
    // B's agent runs the first blocks; then the server the run was started
    // on dies.
    super::wait_until("two blocks done through the other server", || {
        jobs(&b, &run)
            .iter()
            .filter(|j| j["state"] == "succeeded")
            .count()
            >= 2
    });
    a.child.kill().unwrap(); // SIGKILL
    a.child.wait().unwrap();
    let shown = await_status(&b.addr, &run, "succeeded");
    assert_eq!(shown["steps"], blocks, "{shown}");
    let done = jobs(&b, &run);
    assert_eq!(done.len(), blocks, "one job per block: {done:?}");
    for job in &done {
        assert_eq!(job["state"], "succeeded", "{job}");
        assert_eq!(job["attempt"], 1, "no job ran twice: {job}");
    }
    let (_, steps) = http_get(&b.addr, &format!("/v1/runs/{run}/steps"));
    assert_eq!(steps["steps"].as_array().unwrap().len(), blocks, "{steps}");
}

/// A PostgreSQL restart in the middle of a run is survived: the run's
/// connection is made again and the run ends as if nothing happened.
/// While the server is down a command says so in one line, and works
/// again once it is back.
#[test]
fn a_database_restart_mid_run_is_survived_and_its_downtime_is_one_line() {
    let Some((server, _db, scratch)) = scratch_on_private_server() else {
        return;
    };
    let s = scratch.path();
    let (child, mut lines) = super::durable::thinking_run(s, 2500, Stdio::piped());
    // The rest of the output is read (and dropped) as it comes.
    let drained = std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
    std::thread::sleep(Duration::from_millis(300));
    server.ctl("restart");
    let out = child.wait_with_output().unwrap();
    drained.join().unwrap().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("connecting again"),
        "the restart was noticed: {}",
        stderr(&out)
    );
    let runs: serde_json::Value =
        serde_json::from_slice(&wfhost(&["runs", "--json"], s).stdout).unwrap();
    assert_eq!(runs[0]["status"], "succeeded", "{runs}");

    server.ctl("stop");
    let down = wfhost(&["runs"], s);
    assert_eq!(down.status.code(), Some(2), "{}", stderr(&down));
    assert!(
        stderr(&down).contains("is unavailable"),
        "{}",
        stderr(&down)
    );
    assert_eq!(stderr(&down).trim().lines().count(), 1, "{}", stderr(&down));
    server.ctl("start");
    let up = wfhost(&["runs", "--json"], s);
    assert_eq!(up.status.code(), Some(0), "{}", stderr(&up));
}

/// Two servers on one database, each with an agent of its own, three runs
/// started through both; the first server is SIGKILLed at seeded random
/// moments and started again, twice. Every run ends succeeded with each
/// of its steps recorded once and each job succeeded once (a job whose
/// agent died with its server ran again, on a lease of its own).
/// `WFHOST_CRASH_SEED` replays one seed.
#[test]
fn a_server_killed_again_and_again_loses_no_step_of_the_shared_runs() {
    use super::leases::{history, jobs, start};
    use super::serve::{await_status, http_get, serve_with};
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let seed: u64 = std::env::var("WFHOST_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("seed {seed} (WFHOST_CRASH_SEED={seed} replays it)");
    let mut rng = seed | 1;
    let mut below = |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    db.configure(&first.path().join("home"));
    db.configure(&second.path().join("home"));
    let options = ["--local-agents", "1", "--lease-ms", "1000"];
    let mut a = serve_with(first.path(), &options);
    let b = serve_with(second.path(), &options);
    let blocks = 5;
    let manifest = super::block_chain(
        "naps",
        blocks,
        serde_json::json!({"worker": "exec", "config": {"commands": [{"argv": ["sleep", "0.2"]}]}}),
        serde_json::json!({"exec": {"grants": ["exec"]}}),
    );
    let runs: Vec<String> = (0..3)
        .map(|i| {
            let ws = first.path().join(format!("ws{i}"));
            std::fs::create_dir_all(&ws).unwrap();
            start(if i % 2 == 0 { &a } else { &b }, &manifest, &ws)
        })
        .collect();
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(200 + below(800)));
        a.child.kill().unwrap(); // SIGKILL
        a.child.wait().unwrap();
        std::thread::sleep(Duration::from_millis(below(500)));
        a = serve_with(first.path(), &options);
    }
    for run in &runs {
        let shown = await_status(&b.addr, run, "succeeded");
        assert_eq!(shown["steps"], blocks, "seed {seed}: {shown}");
        let (_, steps) = http_get(&a.addr, &format!("/v1/runs/{run}/steps"));
        assert_eq!(
            steps["steps"].as_array().unwrap().len(),
            blocks,
            "seed {seed}: {steps}"
        );
        let done = jobs(&b, run);
        assert_eq!(
            done.len(),
            blocks,
            "seed {seed}: one job per block: {done:?}"
        );
        for job in &done {
            let succeeded = history(&b, job["id"].as_i64().unwrap())
                .iter()
                .filter(|h| h.starts_with("succeeded:"))
                .count();
            assert_eq!(succeeded, 1, "seed {seed}: {job}");
        }
    }
}

/// `sslmode=require&sslrootcert=CA` in the store's URL: the connection is
/// TLS and the server's certificate is verified against that CA (name
/// included); a CA that did not sign it is refused in one line that says
/// what to name.
#[test]
fn the_store_over_tls_verifies_the_server_against_the_ca_named() {
    let scratch = tempfile::tempdir().unwrap();
    let Some(pki) = super::tls::Pki::make(scratch.path()) else {
        return;
    };
    let Some(server) = wfhost_store::testing::PrivateServer::start_with_tls(
        Path::new(&pki.path("server.pem")),
        Path::new(&pki.path("server.key")),
    ) else {
        return;
    };
    let db = server.database();
    let s = scratch.path();
    let url = |ca: &str| {
        format!(
            "{}?sslmode=verify-full&sslrootcert={}",
            db.url,
            pki.path(ca)
        )
    };
    let hello = repo().join("examples/hello/workflow.json");
    let out = command(s)
        .env("WFHOST_STORE", url("ca.pem"))
        .args([
            "run",
            hello.to_str().unwrap(),
            "-w",
            workspace_in(s).to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let refused = command(s)
        .env("WFHOST_STORE", url("other-ca.pem"))
        .args(["runs"])
        .output()
        .unwrap();
    let err = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(
        err.contains("certificate") && err.contains("sslrootcert"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// Least privilege: once the tables exist (made by their owner), a role
/// with only SELECT, INSERT, UPDATE and DELETE on them (and the use of
/// their sequences) runs workflows, gates and all, and cannot change the
/// schema.
#[test]
fn a_role_with_only_data_privileges_runs_workflows() {
    let Some(server) = wfhost_store::testing::PrivateServer::start() else {
        return;
    };
    let db = server.database();
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    // The owner makes the tables.
    let out = command(s)
        .env("WFHOST_STORE", &db.url)
        .args(["runs"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let store = wfhost_store::Store::open_in(
        &s.join("owner-home"),
        &wfhost_store::Location::Postgres(db.url.clone()),
        wfhost_store::Durability::Full,
    )
    .unwrap();
    let name = db.url.rsplit('/').next().unwrap().to_string();
    wfhost_store::testing::execute_batch(
        &store,
        &format!(
            "CREATE ROLE wfhost_app LOGIN PASSWORD 'app'; GRANT CONNECT ON DATABASE {name} TO wfhost_app"
        ),
    )
    .unwrap();
    wfhost_store::testing::execute_batch(
        &store,
        "GRANT USAGE ON SCHEMA public TO wfhost_app;
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO wfhost_app;
         GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO wfhost_app;",
    )
    .unwrap();
    let app_url = db
        .url
        .replacen("wfhost_test:wfhost_test@", "wfhost_app:app@", 1);
    let gate = repo().join("examples/review-gate/workflow.json");
    let as_app = |args: &[&str]| {
        command(s)
            .env("WFHOST_STORE", &app_url)
            .args(args)
            .output()
            .unwrap()
    };
    let ws = workspace_in(s);
    let out = as_app(&["run", gate.to_str().unwrap(), "-w", ws.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let runs: serde_json::Value =
        serde_json::from_slice(&as_app(&["runs", "--json"]).stdout).unwrap();
    let id = runs[0]["id"].as_str().unwrap().to_string();
    let out = as_app(&["gate", &id, "UD-1", "approved"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // And no more than that.
    let denied = wfhost_store::testing::execute_batch(
        &wfhost_store::Store::open_in(
            &s.join("app-home"),
            &wfhost_store::Location::Postgres(app_url.clone()),
            wfhost_store::Durability::Full,
        )
        .unwrap(),
        "DROP TABLE events",
    )
    .unwrap_err();
    assert!(denied.contains("must be owner"), "{denied}");
}

/// While the database is down a server answers every request that needs
/// the store — reads and a run's start alike — `503 store_unavailable`,
/// recording nothing; once it is back the same start is accepted.
#[test]
fn a_server_whose_database_is_down_answers_503_to_a_start() {
    use super::serve::{await_status, http_get, http_post, serve_with};
    let Some((server, _db, scratch)) = scratch_on_private_server() else {
        return;
    };
    let s = scratch.path();
    let served = serve_with(s, &["--local-agents", "1"]);
    let ws = workspace_in(s);
    let manifest = super::block_chain(
        "naps",
        1,
        serde_json::json!({"worker": "exec", "config": {"commands": [{"argv": ["true"]}]}}),
        serde_json::json!({"exec": {"grants": ["exec"]}}),
    );
    let body = serde_json::json!({"manifest": manifest, "workspace": ws});
    server.ctl("stop");
    let (status, refused) = http_post(&served.addr, "/v1/runs", &body);
    assert_eq!(status, 503, "{refused}");
    assert_eq!(refused["code"], "store_unavailable", "{refused}");
    let (status, listed) = http_get(&served.addr, "/v1/runs");
    assert_eq!(
        (status, &listed["code"]),
        (503, &serde_json::json!("store_unavailable"))
    );
    server.ctl("start");
    let (_, listed) = http_get(&served.addr, "/v1/runs");
    assert_eq!(
        listed["runs"].as_array().map(Vec::len),
        Some(0),
        "nothing recorded: {listed}"
    );
    let (status, started) = http_post(&served.addr, "/v1/runs", &body);
    assert_eq!(status, 202, "{started}");
    await_status(
        &served.addr,
        started["run_id"].as_str().unwrap(),
        "succeeded",
    );
}
