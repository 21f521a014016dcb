//! The HTTP API over real loopback HTTP, against a real store file.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use wfhost_core::run::event::{CommandRecord, Event, EventSink, PayloadDelta};
use wfhost_core::run::payload::Statistics;
use wfhost_server::{ConnectionLimits, ServerConfig, Tokens};
use wfhost_store::{Durability, RunRecord, Store};

fn started(run_id: &str, workflow: &str) -> Event {
    Event::RunStarted {
        run_id: run_id.into(),
        workflow_id: workflow.into(),
        workflow_hash: wfhost_core::manifest::pinning::hash_of("{}"),
        plugins: Default::default(),
        start_node: "main".into(),
        start_block: "a".into(),
        max_steps: 100_000,
        max_call_depth: 8,
        default_executor: String::new(),
        inputs: Default::default(),
        rerun_of: None,
    }
}

fn step(n: u64, last: bool) -> Vec<Event> {
    vec![
        Event::BlockStarted {
            step: n,
            node: "main".into(),
            block: "a".into(),
            attempt: n as u32 + 1,
        },
        Event::BlockCompleted {
            step: n,
            node: "main".into(),
            block: "a".into(),
            signal: "SIGNAL:SUCCESS".into(),
            payload: PayloadDelta::default(),
            artifact: None,
            statistics: Statistics::default(),
            duration_us: 10,
            queued_us: 0,
            failure: None,
            permanent: false,
            log: vec![],
            written: Vec::new(),
        },
        Event::ActionTaken {
            step: n,
            action: if last { "END" } else { "JUMP:a" }.into(),
            command: if last {
                CommandRecord::End
            } else {
                CommandRecord::Jump {
                    to: "main.a".into(),
                }
            },
            gate_id: None,
            fallback_for: None,
        },
    ]
}

/// A run of `steps` steps; finished when `finish`.
fn add_run(home: &Path, id: &str, workflow: &str, steps: u64, finish: bool) {
    add_run_in(home, id, workflow, steps, finish, None)
}

/// [`add_run`] in session `session`.
fn add_run_in(
    home: &Path,
    id: &str,
    workflow: &str,
    steps: u64,
    finish: bool,
    session: Option<&str>,
) {
    let mut store = Store::open(home, Durability::Normal).unwrap();
    let record = RunRecord {
        id: wfhost_store::RunId::parse(id).unwrap(),
        workflow_id: workflow.into(),
        workflow_hash: wfhost_core::manifest::pinning::hash_of("{}"),
        manifest: "/nowhere/wf.json".into(),
        workspace: "/tmp".into(),
        created_at: 1,
    };
    let tag = session.map(|s| wfhost_store::SessionTag::client(s, None).unwrap());
    store
        .create_run_in(&record, "{}", &started(id, workflow), tag.as_ref())
        .unwrap();
    let mut w = store.writer(id, 1).unwrap();
    for n in 0..steps {
        w.append(&step(n, finish && n + 1 == steps)).unwrap();
    }
}

fn append_steps(home: &Path, id: &str, from: u64, count: u64) {
    let mut store = Store::open(home, Durability::Normal).unwrap();
    let mut w = store.writer(id, 1).unwrap();
    for n in from..from + count {
        w.append(&step(n, false)).unwrap();
    }
}

/// The projects root of the test servers.
const PROJECTS_ROOT: &str = "/srv/projects";

struct Server {
    addr: SocketAddr,
    _rt: tokio::runtime::Runtime,
}

fn start(home: &Path, tokens: Option<Tokens>) -> Server {
    start_with(home, tokens, ConnectionLimits::default())
}

fn start_with(home: &Path, tokens: Option<Tokens>, limits: ConnectionLimits) -> Server {
    start_running(home, tokens, limits, None)
}

fn start_running(
    home: &Path,
    tokens: Option<Tokens>,
    limits: ConnectionLimits,
    runner: Option<std::sync::Arc<dyn wfhost_server::RunService>>,
) -> Server {
    start_rooted(home, tokens, limits, runner, Path::new(PROJECTS_ROOT))
}

fn start_rooted(
    home: &Path,
    tokens: Option<Tokens>,
    limits: ConnectionLimits,
    runner: Option<std::sync::Arc<dyn wfhost_server::RunService>>,
    root: &Path,
) -> Server {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let config = ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        home: home.to_path_buf(),
        tokens,
        runner,
        lease: wfhost_server::jobs::DEFAULT_LEASE,
        limits,
        projects_root: Some(root.to_path_buf()),
        tls: None,
        take_over: None,
    };
    rt.spawn(async move {
        wfhost_server::serve(config, move |addr| tx.send(addr).unwrap())
            .await
            .unwrap();
    });
    let addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    Server { addr, _rt: rt }
}

/// One HTTP/1.1 request (`Host: localhost` unless `headers` give one);
/// the whole response as text.
fn raw_response(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &[u8],
) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|h| h.to_ascii_lowercase().starts_with("host:"))
    {
        head.push_str("Host: localhost\r\n");
    }
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    String::from_utf8_lossy(&raw).to_string()
}

/// One HTTP/1.1 request; the status and the body.
fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &[u8],
) -> (u16, String) {
    let text = raw_response(addr, method, path, headers, body);
    let status = text[9..12].parse().unwrap();
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

fn get(addr: SocketAddr, path: &str) -> (u16, Value) {
    let (status, body) = request(addr, "GET", path, &[], b"");
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

#[test]
fn runs_are_listed_filtered_and_paged() {
    let home = tempfile::tempdir().unwrap();
    let server = start(home.path(), None);
    // No store yet: an empty list, not an error.
    assert_eq!(get(server.addr, "/v1/runs").1["runs"], Value::Array(vec![]));
    add_run(home.path(), "run-20260101-000000-000a02", "alpha", 3, true);
    add_run(home.path(), "run-20260101-000000-000a03", "beta", 2, false);
    add_run(home.path(), "run-20260101-000000-000a04", "alpha", 1, false);
    let (status, all) = get(server.addr, "/v1/runs");
    assert_eq!(status, 200, "{all}");
    let ids: Vec<&str> = all["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "run-20260101-000000-000a04",
            "run-20260101-000000-000a03",
            "run-20260101-000000-000a02"
        ]
    );
    let (_, alpha) = get(server.addr, "/v1/runs?workflow=alpha&status=succeeded");
    assert_eq!(alpha["runs"][0]["id"], "run-20260101-000000-000a02");
    assert_eq!(alpha["runs"].as_array().unwrap().len(), 1);
    let (_, first) = get(server.addr, "/v1/runs?limit=2");
    assert_eq!(first["next_after"], "run-20260101-000000-000a03");
    let (_, second) = get(
        server.addr,
        "/v1/runs?limit=2&after=run-20260101-000000-000a03",
    );
    assert_eq!(second["runs"][0]["id"], "run-20260101-000000-000a02");
    assert_eq!(second["next_after"], Value::Null);

    // Errors are data with the right status.
    let (status, err) = get(server.addr, "/v1/runs?status=snoozing");
    assert_eq!((status, err["code"].as_str()), (400, Some("bad_request")));
    assert!(err["details"]["allowed"].is_array(), "{err}");
    let (status, err) = get(server.addr, "/v1/runs?limit=0");
    assert_eq!(status, 400, "{err}");
    let (status, err) = get(server.addr, "/v1/runs?colour=red");
    assert_eq!(status, 400, "{err}");
    assert!(err["message"].as_str().unwrap().contains("colour"), "{err}");
    let (status, err) = get(server.addr, "/v1/runs/run-");
    assert_eq!((status, err["code"].as_str()), (404, Some("not_found")));
    let (status, err) = get(server.addr, "/v1/nowhere");
    assert_eq!((status, err["code"].as_str()), (404, Some("not_found")));
}

#[test]
fn a_run_its_branches_steps_and_events_in_pages() {
    let home = tempfile::tempdir().unwrap();
    add_run(home.path(), "run-20260101-000000-000a07", "w", 400, true);
    let server = start(home.path(), None);
    let (status, run) = get(server.addr, "/v1/runs/run-20260101-000000-000a07");
    assert_eq!(status, 200, "{run}");
    assert_eq!(
        (run["status"].as_str(), run["steps"].as_u64()),
        (Some("succeeded"), Some(400))
    );
    assert!(run["server_now_ms"].as_u64().unwrap() > 0);
    let (_, branches) = get(server.addr, "/v1/runs/run-20260101-000000-000a07/branches");
    assert_eq!(branches["branches"][0]["events"], 1 + 400 * 3);
    let (_, steps) = get(server.addr, "/v1/runs/run-20260101-000000-000a07/steps");
    assert_eq!(steps["steps"].as_array().unwrap().len(), 400);
    // Paged by sequence: every event once, in order.
    let mut seen = Vec::new();
    let mut after = 0;
    loop {
        let (status, page) = get(
            server.addr,
            &format!("/v1/runs/run-20260101-000000-000a07/events?after={after}&limit=250"),
        );
        assert_eq!(status, 200, "{page}");
        for e in page["events"].as_array().unwrap() {
            seen.push(e["seq"].as_u64().unwrap());
        }
        match page["next_after"].as_u64() {
            Some(next) => after = next,
            None => break,
        }
    }
    assert_eq!(seen, (1..=1 + 400 * 3).collect::<Vec<u64>>());
    let (status, _) = get(
        server.addr,
        "/v1/runs/run-20260101-000000-000a07/events?limit=5000",
    );
    assert_eq!(status, 400);
}

/// Read SSE events from a stream until `n` have arrived; their ids.
fn sse_ids(addr: SocketAddr, path: &str, last_event_id: Option<u64>, n: usize) -> Vec<u64> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let extra = last_event_id
        .map(|id| format!("Last-Event-ID: {id}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n{extra}\r\n"
    )
    .unwrap();
    let mut ids = Vec::new();
    let mut lines = BufReader::new(s).lines();
    while ids.len() < n {
        let line = lines.next().unwrap().unwrap();
        if let Some(id) = line.strip_prefix("id: ") {
            ids.push(id.trim().parse().unwrap());
        }
    }
    ids
}

#[test]
fn the_event_stream_resumes_from_last_event_id_and_follows_new_events() {
    let home = tempfile::tempdir().unwrap();
    add_run(home.path(), "run-20260101-000000-000a06", "w", 2, false);
    let server = start(home.path(), None);
    // 1 + 2*3 = 7 events so far.
    assert_eq!(
        sse_ids(
            server.addr,
            "/v1/runs/run-20260101-000000-000a06/events/stream",
            None,
            7
        ),
        (1..=7).collect::<Vec<_>>()
    );
    // A reconnect after event 4 gets exactly 5.. and then what is written
    // while it listens.
    let addr = server.addr;
    let reader = std::thread::spawn(move || {
        sse_ids(
            addr,
            "/v1/runs/run-20260101-000000-000a06/events/stream",
            Some(4),
            6,
        )
    });
    std::thread::sleep(Duration::from_millis(300));
    append_steps(home.path(), "run-20260101-000000-000a06", 2, 1);
    assert_eq!(reader.join().unwrap(), (5..=10).collect::<Vec<_>>());
    assert_eq!(
        sse_ids(
            server.addr,
            "/v1/runs/run-20260101-000000-000a06/events/stream?after=9",
            None,
            1
        ),
        [10]
    );
    let (status, err) = request(
        server.addr,
        "GET",
        "/v1/runs/run-20260101-000000-000a06/events/stream",
        &["Last-Event-ID: yesterday"],
        b"",
    );
    assert_eq!(status, 400, "{err}");
}

#[test]
fn tokens_guard_every_endpoint_and_reveal_nothing() {
    let home = tempfile::tempdir().unwrap();
    add_run(home.path(), "run-20260101-000000-000a0c", "w", 1, true);
    let token = "c".repeat(40);
    let tokens = Tokens {
        clients: vec![token.clone()],
        agents: vec!["a".repeat(40)],
    };
    let server = start(home.path(), Some(tokens));
    for path in [
        "/v1/runs",
        "/v1/runs/run-20260101-000000-000a0c",
        "/v1/openapi.json",
        "/v1/health",
    ] {
        for header in [
            None,
            Some("Authorization: Bearer wrong"),
            Some(&*format!("Authorization: Bearer {}", "a".repeat(40))),
        ] {
            let (status, body) = request(server.addr, "GET", path, header.as_slice(), b"");
            assert_eq!(status, 401, "{path} {header:?}: {body}");
            assert!(!body.contains("run-20260101-000000-000a0c"));
        }
    }
    let auth = format!("Authorization: Bearer {token}");
    let (status, body) = request(server.addr, "GET", "/v1/runs", &[&auth], b"");
    assert_eq!(status, 200);
    assert!(body.contains("run-20260101-000000-000a0c"));
}

#[test]
fn a_non_loopback_address_needs_tokens() {
    let config = ServerConfig {
        listen: "0.0.0.0:0".parse().unwrap(),
        home: "/nowhere".into(),
        tokens: None,
        runner: None,
        lease: wfhost_server::jobs::DEFAULT_LEASE,
        limits: Default::default(),
        projects_root: None,
        tls: None,
        take_over: None,
    };
    assert!(config.check().unwrap_err().contains("--auth-token-file"));
    let relative_root = ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        projects_root: Some("projects".into()),
        ..config
    };
    assert!(relative_root.check().unwrap_err().contains("absolute"));
}

#[test]
fn token_files_must_be_private_and_hold_long_tokens() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.json");
    let write = |text: &str, mode: u32| {
        std::fs::write(&file, text).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    let good = format!(r#"{{"clients": ["{}"]}}"#, "x".repeat(32));
    write(&good, 0o644);
    assert!(Tokens::read(&file).unwrap_err().contains("chmod 600"));
    write(&good, 0o600);
    assert_eq!(Tokens::read(&file).unwrap().clients.len(), 1);
    write(r#"{"clients": ["short"]}"#, 0o600);
    assert!(Tokens::read(&file).unwrap_err().contains("too short"));
    write(r#"{"clients": []}"#, 0o600);
    assert!(Tokens::read(&file).unwrap_err().contains("no token"));
    write(r#"{"client": ["x"]}"#, 0o600);
    assert!(Tokens::read(&file).is_err());
}

#[test]
fn the_openapi_document_describes_every_endpoint() {
    let home = tempfile::tempdir().unwrap();
    let server = start(home.path(), None);
    let (status, doc) = get(server.addr, "/v1/openapi.json");
    assert_eq!(status, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    let paths: Vec<&String> = doc["paths"].as_object().unwrap().keys().collect();
    for p in [
        "/health",
        "/runs",
        "/runs/{id}",
        "/runs/{id}/branches",
        "/runs/{id}/summary",
        "/runs/{id}/steps",
        "/runs/{id}/events",
        "/runs/{id}/events/stream",
        "/gates",
        "/openapi.json",
        "/runs/{id}/cancel",
        "/runs/{id}/export",
        "/runs/{id}/report",
        "/runs/{id}/bundles",
        "/runs/{id}/definition",
        "/workflows",
        "/sessions",
        "/sessions/{id}",
        "/sessions/{id}/export",
        "/runs/import",
        "/runs/{id}/gates/{gate}",
        "/runs/{id}/resume",
        "/runs/{id}/fork",
        "/runs/{id}/jobs",
        "/jobs/{id}",
        "/jobs/{id}/heartbeat",
        "/jobs/{id}/telemetry",
        "/jobs/{id}/complete",
        "/jobs/{id}/release",
        "/agent/lease",
    ] {
        assert!(paths.iter().any(|k| *k == p), "{p} is not documented");
    }
    // And every documented GET answers (not the fallback's 404).
    add_run_in(
        home.path(),
        "run-20260101-000000-000a00",
        "w",
        1,
        true,
        Some("s1"),
    );
    let job = queue_job(home.path(), "run-20260101-000000-000a00");
    let hello =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hello/workflow.json");
    let schedule = wfhost_store::schedules::Spec {
        name: "s1".into(),
        cron: "@daily".into(),
        workflow: hello,
        workspace: "/tmp".into(),
        ..Default::default()
    }
    .define(0)
    .unwrap();
    wfhost_store::Store::open_existing(home.path())
        .unwrap()
        .add_schedule(&schedule)
        .unwrap();
    for p in paths {
        if p.ends_with("/stream") || doc["paths"][p.as_str()].get("get").is_none() {
            continue;
        }
        let id = if p.starts_with("/jobs/") {
            job.to_string()
        } else if p.starts_with("/sessions/") {
            "s1".into()
        } else {
            "run-20260101-000000-000a00".into()
        };
        let hash = wfhost_core::manifest::pinning::hash_of("{}");
        let mut path = p
            .replace("{id}", &id)
            .replace("{hash}", &hash)
            .replace("{name}", "s1");
        if p.ends_with("/bundles") {
            path.push_str("?step=0&block=main.a");
        }
        let (status, body) = get(server.addr, &format!("/v1{path}"));
        assert_eq!(status, 200, "{p}: {body}");
    }
    // A definition comes byte for byte; an unknown or malformed hash is 404.
    let hash = wfhost_core::manifest::pinning::hash_of("{}");
    let exact = request(
        server.addr,
        "GET",
        &format!("/v1/definitions/{hash}"),
        &[],
        b"",
    );
    assert_eq!(exact, (200, "{}".to_string()));
    let other = wfhost_core::manifest::pinning::hash_of("[]");
    for missing in [other.as_str(), "sha256:zz", "..%2F..%2Fetc"] {
        let (status, body) = get(server.addr, &format!("/v1/definitions/{missing}"));
        assert_eq!(status, 404, "{missing}: {body}");
    }
}

fn post(addr: SocketAddr, path: &str, body: &[u8]) -> (u16, Value) {
    let (status, body) = request(
        addr,
        "POST",
        path,
        &["Content-Type: application/json"],
        body,
    );
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

#[test]
fn a_cancel_records_the_end_once_and_says_why_it_cannot() {
    let home = tempfile::tempdir().unwrap();
    add_run(home.path(), "run-20260101-000000-000a0a", "w", 3, false);
    add_run(home.path(), "run-20260101-000000-000a05", "w", 1, true);
    let server = start(home.path(), None);
    let (status, body) = post(
        server.addr,
        "/v1/runs/run-20260101-000000-000a0a/cancel",
        br#"{"reason": "api"}"#,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reason"], "cancelled by the HTTP API: api");
    assert_eq!(body["status"], "cancelled");
    let (_, run) = get(server.addr, "/v1/runs/run-20260101-000000-000a0a");
    assert_eq!(run["status"], "cancelled", "{run}");
    // Again, or a run that ended by itself: a conflict that says how it ended.
    let (status, body) = post(
        server.addr,
        "/v1/runs/run-20260101-000000-000a0a/cancel",
        b"",
    );
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("finished")),
        "{body}"
    );
    assert!(body["message"].as_str().unwrap().contains("was cancelled"));
    let (status, body) = post(
        server.addr,
        "/v1/runs/run-20260101-000000-000a05/cancel",
        b"{}",
    );
    assert_eq!(status, 409, "{body}");
    assert!(body["message"].as_str().unwrap().contains("succeeded"));
    let (status, _) = post(server.addr, "/v1/runs/run-nope/cancel", b"{}");
    assert_eq!(status, 404);
    // Nothing else was written to the finished runs.
    let (_, events) = get(
        server.addr,
        "/v1/runs/run-20260101-000000-000a0a/events?limit=1000",
    );
    let finished = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"]["type"] == "run_finished")
        .count();
    assert_eq!(finished, 1);
}

#[test]
fn bad_bodies_are_400s_naming_the_pointer_and_big_ones_413s() {
    let home = tempfile::tempdir().unwrap();
    add_run(home.path(), "run-20260101-000000-000a0a", "w", 1, false);
    let server = start(home.path(), None);
    let url = "/v1/runs/run-20260101-000000-000a0a/cancel";
    for (body, pointer) in [
        (&br#"{"reason": 5}"#[..], "/reason"),
        (br#"{"wait_s": 100000}"#, "/wait_s"),
        (br#"{"wait_s": -1}"#, "/wait_s"),
        (br#"{"reason": "x", "bogus": 1}"#, "/bogus"),
        (br#"{"reason": "#, "/reason"),
        (br#"[1, 2]"#, ""),
    ] {
        let (status, err) = post(server.addr, url, body);
        assert_eq!(status, 400, "{}: {err}", String::from_utf8_lossy(body));
        assert_eq!(err["code"], "bad_request");
        assert_eq!(err["details"]["pointer"], pointer, "{err}");
    }
    let big = format!(
        r#"{{"reason": "{}"}}"#,
        "x".repeat(wfhost_server::MAX_BODY_BYTES)
    );
    let (status, err) = post(server.addr, url, big.as_bytes());
    assert_eq!(status, 413, "{err}");
    assert_eq!(err["code"], "payload_too_large");
    assert_eq!(err["details"]["limit_bytes"], wfhost_server::MAX_BODY_BYTES);
    let (status, _) = post(server.addr, "/v1/runs/import", big.as_bytes());
    assert_eq!(status, 413);
    // None of it touched the run.
    let (_, run) = get(server.addr, "/v1/runs/run-20260101-000000-000a0a");
    assert_ne!(run["status"], "failed", "{run}");
}

/// A definition that parses as a workflow, so its run's bundle imports.
const DEFINITION: &str = r#"{"id":"w","nodes":{"main":{"blocks":{"a":{"transitions":[{"action":"END","on_signal":"SIGNAL:SUCCESS"}],"worker":"echo"}},"entry_block":"a"}},"start_node":"main"}"#;

fn add_real_run(home: &Path, id: &str) {
    let mut store = Store::open(home, Durability::Normal).unwrap();
    let hash = wfhost_core::manifest::pinning::hash_of(DEFINITION);
    let record = RunRecord {
        id: wfhost_store::RunId::parse(id).unwrap(),
        workflow_id: "w".into(),
        workflow_hash: hash.clone(),
        manifest: "/nowhere/wf.json".into(),
        workspace: "/tmp".into(),
        created_at: 1,
    };
    let mut first = started(id, "w");
    if let Event::RunStarted { workflow_hash, .. } = &mut first {
        *workflow_hash = hash;
    }
    store.create_run(&record, DEFINITION, &first).unwrap();
    store.writer(id, 1).unwrap().append(&step(0, true)).unwrap();
}

#[test]
fn a_run_exported_from_one_server_imports_into_another_once() {
    let here = tempfile::tempdir().unwrap();
    add_real_run(here.path(), "run-20260101-000000-000a09");
    let source = start(here.path(), None);
    let (status, bundle) = get(source.addr, "/v1/runs/run-20260101-000000-000a09/export");
    assert_eq!(status, 200, "{bundle}");
    assert_eq!(bundle["format"], "wfhost-run-bundle");
    assert_eq!(bundle["events"].as_array().unwrap().len(), 4);
    let (status, _) = get(source.addr, "/v1/runs/run-nope/export");
    assert_eq!(status, 404);

    let there = tempfile::tempdir().unwrap();
    let target = start(there.path(), None);
    let text = serde_json::to_vec(&bundle).unwrap();
    // A bundle edited on the way is refused whole.
    let mut edited = bundle.clone();
    edited["run"]["workspace"] = "/elsewhere".into();
    let (status, err) = post(
        target.addr,
        "/v1/runs/import",
        &serde_json::to_vec(&edited).unwrap(),
    );
    assert_eq!(status, 400, "{err}");
    assert!(
        err["message"].as_str().unwrap().contains("checksum"),
        "{err}"
    );
    let (status, err) = post(target.addr, "/v1/runs/import", b"{\"format\": ");
    assert_eq!(status, 400, "{err}");
    // A bundle re-sealed with a run id that is a path or a script line is
    // refused: ids become file names.
    let parsed = wfhost_store::Bundle::parse(&serde_json::to_vec(&bundle).unwrap()).unwrap();
    for hostile in wfhost_store::forgery::HOSTILE_RUN_IDS {
        let forged = wfhost_store::forgery::forge(&parsed, "run-20260101-000000-000a09", hostile);
        let (status, err) = post(target.addr, "/v1/runs/import", forged.as_bytes());
        assert_eq!(status, 400, "{hostile:?}: {err}");
        assert!(err["message"].as_str().unwrap().contains("run id"), "{err}");
    }
    assert!(!there.path().join("locks").exists());
    let (status, _) = get(target.addr, "/v1/runs/run-20260101-000000-000a09");
    assert_eq!(status, 404);

    let (status, body) = post(target.addr, "/v1/runs/import", &text);
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["run_id"], "run-20260101-000000-000a09");
    let (status, run) = get(target.addr, "/v1/runs/run-20260101-000000-000a09");
    assert_eq!(status, 200);
    assert_eq!(run["status"], "succeeded", "{run}");
    let (status, err) = post(target.addr, "/v1/runs/import", &text);
    assert_eq!(
        (status, err["code"].as_str()),
        (409, Some("exists")),
        "{err}"
    );
}

#[test]
fn a_server_without_an_executable_says_it_starts_no_runs() {
    let home = tempfile::tempdir().unwrap();
    add_run(home.path(), "run-20260101-000000-000a0a", "w", 1, false);
    let server = start(home.path(), None);
    let (status, err) = post(
        server.addr,
        "/v1/runs",
        br#"{"workflow": "/w.json", "workspace": "/ws"}"#,
    );
    assert_eq!(
        (status, err["code"].as_str()),
        (501, Some("not_available")),
        "{err}"
    );
    let (status, _) = post(
        server.addr,
        "/v1/runs/run-20260101-000000-000a0a/resume",
        b"{}",
    );
    assert_eq!(status, 501);
}

/// The application layer in process: records each request it is given
/// and answers with the next of its scripted answers.
#[derive(Debug, Default)]
struct FakeRuns {
    seen: std::sync::Mutex<Vec<wfhost_protocol::RunRequest>>,
    answers: std::sync::Mutex<
        std::collections::VecDeque<Result<wfhost_server::Submitted, wfhost_protocol::AppError>>,
    >,
}

impl wfhost_server::RunService for FakeRuns {
    fn submit(
        &self,
        _home: &Path,
        request: &wfhost_protocol::RunRequest,
    ) -> Result<wfhost_server::Submitted, wfhost_protocol::AppError> {
        self.seen.lock().unwrap().push(request.clone());
        self.answers.lock().unwrap().pop_front().expect("an answer")
    }
}

#[test]
fn the_application_layers_errors_become_statuses_by_their_kind() {
    use wfhost_protocol::{Accepted, AppError, RunRequest};
    use wfhost_server::Submitted;
    let home = tempfile::tempdir().unwrap();
    let id = "run-20260101-000000-000b0b";
    add_run(home.path(), id, "w", 1, false);
    let fake = std::sync::Arc::new(FakeRuns::default());
    fake.answers.lock().unwrap().extend([
        Err(AppError::bad_input("no such file /--help").at("/--help")),
        Err(AppError::busy("workspace /ws is in use by run r (pid 7)")),
        Err(AppError::not_found("unknown run")),
        Err(AppError::internal("cannot start")),
        Ok(Submitted::Starting),
        Ok(Submitted::Accepted(Accepted { branch: Some(3) })),
    ]);
    let server = start_running(
        home.path(),
        None,
        ConnectionLimits::default(),
        Some(fake.clone()),
    );
    // Text that looks like options is a path like any other.
    let start = br#"{"workflow": "/--help", "workspace": "/-x", "executor": "--", "max_steps": 3}"#;
    let (status, err) = post(server.addr, "/v1/runs", start);
    assert_eq!(
        (status, err["code"].as_str()),
        (400, Some("bad_request")),
        "{err}"
    );
    assert_eq!(err["message"], "no such file /--help");
    assert_eq!(err["details"]["place"], "/--help");
    let (status, err) = post(server.addr, &format!("/v1/runs/{id}/resume"), b"{}");
    assert_eq!((status, err["code"].as_str()), (409, Some("busy")), "{err}");
    let (status, err) = post(server.addr, &format!("/v1/runs/{id}/resume"), b"{}");
    assert_eq!(
        (status, err["code"].as_str()),
        (404, Some("not_found")),
        "{err}"
    );
    let (status, err) = post(server.addr, &format!("/v1/runs/{id}/resume"), b"{}");
    assert_eq!(
        (status, err["code"].as_str()),
        (500, Some("internal")),
        "{err}"
    );
    let (status, body) = post(
        server.addr,
        &format!("/v1/runs/{id}/resume"),
        b"{\"branch\": 2}",
    );
    assert_eq!(
        (status, body["starting"].as_bool()),
        (202, Some(true)),
        "{body}"
    );
    let (status, body) = post(
        server.addr,
        &format!("/v1/runs/{id}/fork"),
        br#"{"at": "-h"}"#,
    );
    assert_eq!((status, body["branch"].as_u64()), (202, Some(3)), "{body}");
    let seen = fake.seen.lock().unwrap().clone();
    let RunRequest::Start {
        manifest,
        workspace,
        executor,
        max_steps,
        run_id,
        ..
    } = &seen[0]
    else {
        panic!("{seen:?}")
    };
    assert_eq!(
        (
            manifest.as_str(),
            workspace.as_str(),
            executor.as_deref(),
            *max_steps
        ),
        ("/--help", "/-x", Some("--"), Some(3))
    );
    assert!(wfhost_store::RunId::parse(run_id).is_ok());
    assert_eq!(
        seen[4],
        RunRequest::Resume {
            run_id: id.into(),
            branch: Some(2)
        }
    );
    assert_eq!(
        seen[5],
        RunRequest::Fork {
            run_id: id.into(),
            at: "-h".into()
        }
    );
    // A run that is not known is refused before the service is asked.
    let (status, _) = post(
        server.addr,
        "/v1/runs/run-20260101-000000-00ffff/resume",
        b"{}",
    );
    assert_eq!(status, 404);
    assert_eq!(fake.seen.lock().unwrap().len(), 6);
}

/// A queued job of run `run`; its id.
fn queue_job(home: &Path, run: &str) -> i64 {
    queue_job_at(home, run, 7)
}

/// A queued job of run `run` for the block at `step`; its id.
fn queue_job_at(home: &Path, run: &str, step: u64) -> i64 {
    let mut store = Store::open(home, Durability::Normal).unwrap();
    let needs = vec!["wasm".to_string()];
    let job = wfhost_store::NewJob {
        run_id: run,
        branch: 1,
        step,
        lane: "",
        node: "main",
        block: "a",
        requires: &needs,
        request: "{\"block\": \"a\"}",
    };
    store.enqueue_job(&job, 1).unwrap().id
}

#[test]
fn agents_lease_and_complete_under_a_fence_with_their_own_tokens() {
    let home = tempfile::tempdir().unwrap();
    add_run(home.path(), "run-20260101-000000-000a00", "w", 1, false);
    let id = queue_job(home.path(), "run-20260101-000000-000a00");
    let client = format!("Authorization: Bearer {}", "c".repeat(40));
    let agent = format!("Authorization: Bearer {}", "a".repeat(40));
    let tokens = Tokens {
        clients: vec!["c".repeat(40)],
        agents: vec!["a".repeat(40)],
    };
    let server = start(home.path(), Some(tokens));
    let call = |auth: &str, method: &str, path: &str, body: &str| {
        request(
            server.addr,
            method,
            path,
            &[auth, "Content-Type: application/json"],
            body.as_bytes(),
        )
    };
    let ask = r#"{"agent": "a1", "capabilities": ["wasm"]}"#;
    // A client token is not an agent's; a bad capability names its place.
    assert_eq!(call(&client, "POST", "/v1/agent/lease", ask).0, 401);
    let (status, body) = call(
        &agent,
        "POST",
        "/v1/agent/lease",
        r#"{"agent": "a1", "capabilities": ["gpu"]}"#,
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("/capabilities/0"), "{body}");
    let (status, body) = call(&agent, "POST", "/v1/agent/lease", ask);
    assert_eq!(status, 200, "{body}");
    let leased: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(leased["job"]["id"], id);
    assert_eq!(leased["job"]["request"]["block"], "a");
    assert!(leased["server_now_ms"].as_i64().unwrap() > 0);
    let token = leased["job"]["token"].as_str().unwrap();
    // Nothing else is queued.
    let (_, body) = call(&agent, "POST", "/v1/agent/lease", ask);
    assert!(body.contains(r#""job":null"#), "{body}");
    let heartbeat = |token: &str| {
        call(
            &agent,
            "POST",
            &format!("/v1/jobs/{id}/heartbeat"),
            &format!(r#"{{"attempt": 1, "token": "{token}"}}"#),
        )
    };
    assert_eq!(heartbeat(token).0, 200);
    let (status, body) = heartbeat("forged");
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("lease_lost"), "{body}");
    // Telemetry while it runs: the lease holder's only, objects only.
    let telemetry = |auth: &str, token: &str, events: &str| {
        call(
            auth,
            "POST",
            &format!("/v1/jobs/{id}/telemetry"),
            &format!(r#"{{"attempt": 1, "token": "{token}", "events": {events}}}"#),
        )
    };
    let (status, body) = telemetry(&agent, token, r#"[{"type": "a"}, {"type": "b"}]"#);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""accepted":2"#), "{body}");
    let (status, body) = telemetry(&agent, "forged", r#"[{"type": "c"}]"#);
    assert_eq!((status, body.contains("lease_lost")), (409, true), "{body}");
    let (status, body) = telemetry(&agent, token, r#"[{"type": "c"}, 1]"#);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("/events/1"), "{body}");
    assert_eq!(telemetry(&client, token, "[]").0, 401);
    let complete = |result: &str| {
        let body = format!(
            r#"{{"attempt": 1, "token": "{token}", "succeeded": true, "result": {result}}}"#
        );
        call(&agent, "POST", &format!("/v1/jobs/{id}/complete"), &body)
    };
    let first = complete(r#"{"output": 1}"#);
    assert_eq!(first.0, 200, "{}", first.1);
    // Replayed: the same answer, byte for byte; nothing changes.
    assert_eq!(complete(r#"{"output": 1}"#), first);
    // The same lease with another result is refused.
    assert_eq!(complete(r#"{"output": 2}"#).0, 409);
    assert_eq!(heartbeat(token).0, 409, "a completed job has no lease");
    // Clients read jobs; agents do not.
    assert_eq!(call(&agent, "GET", &format!("/v1/jobs/{id}"), "").0, 401);
    let (status, body) = call(&client, "GET", &format!("/v1/jobs/{id}"), "");
    assert_eq!(status, 200, "{body}");
    let shown: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(shown["job"]["state"], "succeeded");
    // Run and completed, but its output signalled no success.
    assert_eq!(shown["job"]["outcome"], "failed", "{shown}");
    let kinds: Vec<&str> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["queued", "leased", "succeeded", "refused"]);
}

/// A job's `outcome` is what its block came to, apart from the lease's
/// `state`: a block whose command failed was still run and completed.
#[test]
fn a_jobs_outcome_is_what_its_block_came_to() {
    let home = tempfile::tempdir().unwrap();
    let run = "run-20260101-000000-000a0c";
    add_run(home.path(), run, "w", 1, false);
    let ok = queue_job_at(home.path(), run, 1);
    let failing = queue_job_at(home.path(), run, 2);
    let server = start(home.path(), None);
    let send = |method: &str, path: &str, body: &str| -> Value {
        let (status, text) = request(server.addr, method, path, &[], body.as_bytes());
        assert_eq!(status, 200, "{path}: {text}");
        serde_json::from_str(&text).unwrap()
    };
    let ask = r#"{"agent": "a1", "capabilities": ["wasm"], "wait_ms": 2000}"#;
    for (id, signal) in [(ok, "SIGNAL:SUCCESS"), (failing, "SIGNAL:EXEC_FAILED")] {
        let leased = send("POST", "/v1/agent/lease", ask);
        assert_eq!(leased["job"]["id"], id, "{leased}");
        let token = leased["job"]["token"].as_str().unwrap();
        let body = json!({"attempt": 1, "token": token, "succeeded": true,
            "result": {"output": {"signal": signal}}});
        send(
            "POST",
            &format!("/v1/jobs/{id}/complete"),
            &body.to_string(),
        );
    }
    let jobs = send("GET", &format!("/v1/runs/{run}/jobs"), "");
    let shown: Vec<(&str, &str)> = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| (j["state"].as_str().unwrap(), j["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(shown, [("succeeded", "succeeded"), ("succeeded", "failed")]);
    let one = send("GET", &format!("/v1/jobs/{ok}"), "");
    assert_eq!(one["job"]["outcome"], "succeeded", "{one}");
}

#[test]
fn an_agent_that_stops_hands_its_lease_back_and_the_job_is_queued_again() {
    let home = tempfile::tempdir().unwrap();
    add_run(home.path(), "run-20260101-000000-000a00", "w", 1, false);
    let id = queue_job(home.path(), "run-20260101-000000-000a00");
    let agent = format!("Authorization: Bearer {}", "a".repeat(40));
    let client = format!("Authorization: Bearer {}", "c".repeat(40));
    let tokens = Tokens {
        clients: vec!["c".repeat(40)],
        agents: vec!["a".repeat(40)],
    };
    let server = start(home.path(), Some(tokens));
    let call = |auth: &str, path: &str, body: &str| {
        request(
            server.addr,
            "POST",
            path,
            &[auth, "Content-Type: application/json"],
            body.as_bytes(),
        )
    };
    let lease = |name: &str| -> Value {
        let ask = format!(r#"{{"agent": "{name}", "capabilities": ["wasm"]}}"#);
        let (status, body) = call(&agent, "/v1/agent/lease", &ask);
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    };
    let first = lease("a1");
    let token = first["job"]["token"].as_str().unwrap().to_string();
    let release = |auth: &str, attempt: u32, token: &str, reason: &str| {
        call(
            auth,
            &format!("/v1/jobs/{id}/release"),
            &json!({"attempt": attempt, "token": token, "reason": reason}).to_string(),
        )
    };
    // Agents only; the lease holder only; a reason of bounded size.
    assert_eq!(release(&client, 1, &token, "").0, 401);
    let (status, body) = release(&agent, 1, "forged", "");
    assert_eq!((status, body.contains("lease_lost")), (409, true), "{body}");
    let (status, body) = release(&agent, 1, &token, &"x".repeat(501));
    assert_eq!((status, body.contains("/reason")), (400, true), "{body}");
    let (status, body) = release(&agent, 1, &token, "stopped (SIGTERM)");
    assert_eq!(status, 200, "{body}");
    let released: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (released["state"].as_str(), released["attempt"].as_u64()),
        (Some("queued"), Some(2))
    );
    // Handed back once: the old lease is gone.
    assert_eq!(release(&agent, 1, &token, "").0, 409);
    // Another agent gets it at once, as attempt 2.
    let second = lease("a2");
    assert_eq!(
        (
            second["job"]["id"].as_i64(),
            second["job"]["attempt"].as_u64()
        ),
        (Some(id), Some(2))
    );
    let (status, body) = request(
        server.addr,
        "GET",
        &format!("/v1/jobs/{id}"),
        &[&client],
        b"",
    );
    assert_eq!(status, 200, "{body}");
    let shown: Value = serde_json::from_str(&body).unwrap();
    let history: Vec<String> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{}:{}",
                e["kind"].as_str().unwrap(),
                e["agent"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        history,
        ["queued:", "leased:a1", "requeued:a1", "leased:a2"]
    );
    assert!(
        shown["history"][2]["detail"]
            .as_str()
            .unwrap()
            .ends_with("handed back by a1: stopped (SIGTERM)"),
        "{shown}"
    );
}

#[test]
fn a_branch_is_paged_from_either_end_and_the_runs_found_by_text_and_session() {
    let home = tempfile::tempdir().unwrap();
    add_run_in(
        home.path(),
        "run-20260101-000000-000a07",
        "w",
        300,
        false,
        Some("chat-7"),
    );
    add_run(
        home.path(),
        "run-20260101-000000-000a0b",
        "shipping",
        1,
        true,
    );
    let server = start(home.path(), None);
    // Backward from the newest: pages of the branch's chain, in write order.
    let mut seen: Vec<u64> = Vec::new();
    let mut path =
        "/v1/runs/run-20260101-000000-000a07/events?branch=1&before=18446744073709551615&limit=128"
            .to_string();
    loop {
        let (status, page) = get(server.addr, &path);
        assert_eq!(status, 200, "{page}");
        let mut seqs: Vec<u64> = page["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
        seqs.extend(seen);
        seen = seqs;
        match page["next_before"].as_u64() {
            Some(first) => {
                path = format!(
                    "/v1/runs/run-20260101-000000-000a07/events?branch=1&before={first}&limit=128"
                )
            }
            None => break,
        }
    }
    assert_eq!(seen, (1..=1 + 300 * 3).collect::<Vec<u64>>());
    let (_, first) = get(
        server.addr,
        "/v1/runs/run-20260101-000000-000a07/events?branch=1&limit=2",
    );
    assert_eq!(
        (
            first["events"][1]["seq"].as_u64(),
            first["next_after"].as_u64()
        ),
        (Some(2), Some(2))
    );
    for bad in [
        "/v1/runs/run-20260101-000000-000a07/events?before=5",
        "/v1/runs/run-20260101-000000-000a07/events?branch=1&before=5&after=1",
        "/v1/runs/run-20260101-000000-000a07/events?branch=9",
    ] {
        let (status, err) = get(server.addr, bad);
        assert_eq!(status, 400, "{bad}: {err}");
    }

    // Text matches ids, workflows, workspaces and sessions, in any case.
    let ids = |path: &str| -> Vec<String> {
        let (status, list) = get(server.addr, path);
        assert_eq!(status, 200, "{list}");
        list["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids("/v1/runs?q=SHIPP"), ["run-20260101-000000-000a0b"]);
    assert_eq!(ids("/v1/runs?q=chat-7"), ["run-20260101-000000-000a07"]);
    assert_eq!(
        ids("/v1/runs?session=chat-7"),
        ["run-20260101-000000-000a07"]
    );
    assert!(ids("/v1/runs?q=nothing-like-it").is_empty());
    let (_, all) = get(server.addr, "/v1/runs");
    let long = all["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "run-20260101-000000-000a07")
        .unwrap();
    assert_eq!(long["session"], "chat-7");

    // Sessions: listed, shown with their runs, exported as a bundle.
    let (_, sessions) = get(server.addr, "/v1/sessions");
    assert_eq!(sessions["sessions"][0]["id"], "chat-7", "{sessions}");
    let (status, one) = get(server.addr, "/v1/sessions/chat-7");
    assert_eq!(
        (status, one["runs"][0]["id"].as_str()),
        (200, Some("run-20260101-000000-000a07")),
        "{one}"
    );
    let (status, bundle) = get(server.addr, "/v1/sessions/chat-7/export");
    assert_eq!(
        (status, bundle["format"].as_str()),
        (200, Some("wfhost-session-bundle"))
    );
    for missing in ["/v1/sessions/nope", "/v1/sessions/nope/export"] {
        let (status, err) = get(server.addr, missing);
        assert_eq!(
            (status, err["code"].as_str()),
            (404, Some("not_found")),
            "{missing}: {err}"
        );
    }
}

#[test]
fn a_run_exports_as_a_markdown_report() {
    let home = tempfile::tempdir().unwrap();
    add_run(
        home.path(),
        "run-20260101-000000-000a08",
        "report-flow",
        3,
        true,
    );
    let server = start(home.path(), None);
    let (status, text) = request(
        server.addr,
        "GET",
        "/v1/runs/run-20260101-000000-000a08/report",
        &[],
        b"",
    );
    assert_eq!(status, 200, "{text}");
    assert!(
        text.starts_with("# Run `run-20260101-000000-000a08`"),
        "{text}"
    );
    assert!(text.contains("| Workflow | `report-flow` |"), "{text}");
    assert!(text.contains("## Steps (3)"), "{text}");
    assert!(text.contains("| 2 | `main.a` |"), "{text}");
    assert!(text.contains("## Outcome\n\nSucceeded."), "{text}");
    let (status, _) = request(
        server.addr,
        "GET",
        "/v1/runs/run-20260101-000000-000a08/report?branch=4",
        &[],
        b"",
    );
    assert_eq!(status, 400);
}

#[test]
fn the_dashboard_is_served_and_web_pages_cannot_act_through_the_browser() {
    let home = tempfile::tempdir().unwrap();
    add_run(home.path(), "run-20260101-000000-000a01", "w", 1, false);
    let server = start(home.path(), None);
    let raw = |method: &str, path: &str, headers: &[&str], body: &[u8]| {
        raw_response(server.addr, method, path, headers, body)
    };
    // The page and its assets, with a policy that allows nothing foreign.
    for (path, kind) in [
        ("/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
    ] {
        let out = raw("GET", path, &["Host: localhost:7464"], b"");
        assert!(out.starts_with("HTTP/1.1 200"), "{path}: {out}");
        let lower = out.to_ascii_lowercase();
        assert!(
            lower.contains(&format!("content-type: {kind}")),
            "{path}: {out}"
        );
        assert!(
            lower.contains("content-security-policy: default-src 'none'"),
            "{path}"
        );
        assert!(lower.contains("x-content-type-options: nosniff"), "{path}");
    }
    // DNS rebinding: a foreign name for this loopback server is refused.
    for host in ["evil.example:7464", "127.0.0.1.evil.example"] {
        let out = raw("GET", "/v1/runs", &[&format!("Host: {host}")], b"");
        assert!(out.starts_with("HTTP/1.1 403"), "{host}: {out}");
        assert!(out.contains("not a loopback name"), "{out}");
    }
    for host in ["localhost:1", "127.0.0.1:7464", "[::1]:7464"] {
        let out = raw("GET", "/v1/runs", &[&format!("Host: {host}")], b"");
        assert!(out.starts_with("HTTP/1.1 200"), "{host}: {out}");
    }
    // A page of another origin cannot act; the dashboard's own origin can.
    let cancel = br#"{"reason": "x", "wait_s": 0}"#;
    for extra in [
        "Origin: http://evil.example",
        "Origin: null",
        "Sec-Fetch-Site: cross-site",
    ] {
        let out = raw(
            "POST",
            "/v1/runs/run-20260101-000000-000a01/cancel",
            &[
                "Host: 127.0.0.1:7464",
                "Content-Type: application/json",
                extra,
            ],
            cancel,
        );
        assert!(out.starts_with("HTTP/1.1 403"), "{extra}: {out}");
    }
    let out = raw(
        "POST",
        "/v1/runs/run-20260101-000000-000a01/cancel",
        &[
            "Host: 127.0.0.1:7464",
            "Origin: http://127.0.0.1:7464",
            "Sec-Fetch-Site: same-origin",
            "Content-Type: application/json",
        ],
        cancel,
    );
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    let (_, run) = get(server.addr, "/v1/runs/run-20260101-000000-000a01");
    assert_eq!(run["status"], "cancelled", "{run}");
}

// Connections: caps, timeouts, and authentication before anything else.

/// Short timeouts, so the tests wait little.
fn quick_limits() -> ConnectionLimits {
    ConnectionLimits {
        header_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_millis(300),
        ..ConnectionLimits::default()
    }
}

/// A connection to `addr` from the loopback address `from` (127.0.0.0/8
/// is all loopback, so each test peer can have its own address).
fn connect_from(from: &str, addr: SocketAddr) -> TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    let stream = rt
        .block_on(async {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind(format!("{from}:0").parse().unwrap())?;
            socket.connect(addr).await
        })
        .unwrap()
        .into_std()
        .unwrap();
    stream.set_nonblocking(false).unwrap();
    stream
}

/// Whether the server closed `s` within `wait` (EOF or reset), reading and
/// discarding whatever it sent first.
fn closed_within(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// One request on a kept-alive connection; the status, the head and the
/// body (read to its Content-Length).
fn exchange(s: &mut TcpStream, path: &str, headers: &[&str]) -> (u16, String, String) {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n");
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).unwrap(), 1, "the answer's head was cut");
        raw.push(byte[0]);
    }
    let head = String::from_utf8(raw).unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    s.read_exact(&mut body).unwrap();
    (
        head[9..12].parse().unwrap(),
        head,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

fn tokens() -> (Tokens, String) {
    let token = "c".repeat(40);
    let tokens = Tokens {
        clients: vec![token.clone()],
        agents: vec!["a".repeat(40)],
    };
    (tokens, format!("Authorization: Bearer {token}"))
}

#[test]
fn half_sent_requests_and_silent_connections_are_closed_after_the_header_timeout() {
    let home = tempfile::tempdir().unwrap();
    let server = start_with(home.path(), None, quick_limits());
    let started = std::time::Instant::now();
    let mut waiting: Vec<TcpStream> = (0..30)
        .map(|i| {
            let mut s = TcpStream::connect(server.addr).unwrap();
            if i % 2 == 0 {
                // Headers begun, never finished.
                s.write_all(b"GET /v1/runs HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
                    .unwrap();
            }
            s
        })
        .collect();
    for s in &mut waiting {
        assert!(
            closed_within(s, Duration::from_secs(5)),
            "still open after {:?}",
            started.elapsed()
        );
    }
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(3),
        "closed after {took:?}, with a header timeout of 300 ms"
    );
    // Bytes trickling in do not extend the time the headers have.
    let mut s = TcpStream::connect(server.addr).unwrap();
    let started = std::time::Instant::now();
    for part in [
        &b"GET /v1/runs HTTP/1.1\r\n"[..],
        b"Host: localhost\r\n",
        b"X-A: 1\r\n",
    ] {
        if s.write_all(part).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(120));
    }
    assert!(closed_within(&mut s, Duration::from_secs(5)));
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn an_idle_kept_alive_connection_is_closed_but_the_event_stream_is_not() {
    let home = tempfile::tempdir().unwrap();
    add_run(home.path(), "run-20260101-000000-000a06", "w", 2, false);
    let server = start_with(home.path(), None, quick_limits());
    // Kept alive between requests, then closed once idle too long.
    let mut s = TcpStream::connect(server.addr).unwrap();
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(exchange(&mut s, "/v1/health", &[]).0, 200);
    }
    let idle = std::time::Instant::now();
    assert!(closed_within(&mut s, Duration::from_secs(5)));
    assert!(
        idle.elapsed() >= Duration::from_millis(250),
        "{:?}",
        idle.elapsed()
    );
    // The event stream outlives many idle timeouts: events written after
    // two seconds of silence still arrive on it.
    let addr = server.addr;
    let reader = std::thread::spawn(move || {
        sse_ids(
            addr,
            "/v1/runs/run-20260101-000000-000a06/events/stream",
            None,
            10,
        )
    });
    std::thread::sleep(Duration::from_secs(2));
    append_steps(home.path(), "run-20260101-000000-000a06", 2, 1);
    assert_eq!(reader.join().unwrap(), (1..=10).collect::<Vec<_>>());
}

#[test]
fn without_a_token_a_request_is_answered_401_at_once_unread_and_its_connection_closed() {
    let home = tempfile::tempdir().unwrap();
    let (tokens, auth) = tokens();
    // The default timeouts (10 s, 60 s): a close within them is the 401's.
    let server = start_with(home.path(), Some(tokens), ConnectionLimits::default());
    for auth in [None, Some("Authorization: Bearer wrong")] {
        let mut s = TcpStream::connect(server.addr).unwrap();
        let started = std::time::Instant::now();
        // A body of 100 MB announced, a few bytes sent, more asked for.
        let mut head = String::from(
            "POST /v1/runs/import HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\nExpect: 100-continue\r\n",
        );
        if let Some(auth) = auth {
            head.push_str(auth);
            head.push_str("\r\n");
        }
        head.push_str("\r\n{\"x\":");
        s.write_all(head.as_bytes()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut answer = Vec::new();
        let read = s.read_to_end(&mut answer);
        assert!(
            read.is_ok() || read.unwrap_err().kind() == std::io::ErrorKind::ConnectionReset,
            "the connection stays open"
        );
        let answer = String::from_utf8_lossy(&answer).to_ascii_lowercase();
        assert!(answer.starts_with("http/1.1 401"), "{answer}");
        assert!(!answer.contains("100 continue"), "{answer}");
        assert!(answer.contains("connection: close"), "{answer}");
        assert!(started.elapsed() < Duration::from_secs(2));
    }
    // An agent's token on a client endpoint: 401, and closed.
    let mut s = TcpStream::connect(server.addr).unwrap();
    let agent = format!("Authorization: Bearer {}", "a".repeat(40));
    let (status, head, _) = exchange(&mut s, "/v1/runs", &[&agent]);
    assert_eq!(status, 401);
    assert!(
        head.to_ascii_lowercase().contains("connection: close"),
        "{head}"
    );
    assert!(closed_within(&mut s, Duration::from_secs(2)));
    // The dashboard's page needs no token, but its connection is not kept.
    let mut s = TcpStream::connect(server.addr).unwrap();
    assert_eq!(exchange(&mut s, "/", &[]).0, 200);
    assert!(closed_within(&mut s, Duration::from_secs(2)));
    // With the token, the connection is kept for the next request.
    let mut s = TcpStream::connect(server.addr).unwrap();
    for _ in 0..3 {
        let (status, head, _) = exchange(&mut s, "/v1/runs", &[&auth]);
        assert_eq!(status, 200, "{head}");
        assert!(!head.to_ascii_lowercase().contains("connection: close"));
    }
}

#[test]
fn a_peer_over_its_cap_is_closed_at_once_and_other_peers_are_served() {
    let home = tempfile::tempdir().unwrap();
    let (tokens, auth) = tokens();
    let limits = ConnectionLimits {
        max_connections_per_peer: 4,
        ..ConnectionLimits::default()
    };
    let server = start_with(home.path(), Some(tokens), limits);
    // Four authenticated, kept-alive connections: the fifth is refused.
    let mut kept: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = connect_from("127.0.0.3", server.addr);
            assert_eq!(exchange(&mut s, "/v1/health", &[&auth]).0, 200);
            s
        })
        .collect();
    for _ in 0..3 {
        let mut over = connect_from("127.0.0.3", server.addr);
        let started = std::time::Instant::now();
        assert!(closed_within(&mut over, Duration::from_secs(2)));
        assert!(started.elapsed() < Duration::from_secs(1));
    }
    for s in &mut kept {
        assert_eq!(exchange(s, "/v1/health", &[&auth]).0, 200);
    }
    let mut other = connect_from("127.0.0.4", server.addr);
    assert_eq!(exchange(&mut other, "/v1/health", &[&auth]).0, 200);
    // Connections that only hold a place make room for the peer's next
    // one: the oldest is closed.
    let mut idle: Vec<TcpStream> = (0..4)
        .map(|_| connect_from("127.0.0.5", server.addr))
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let mut newest = connect_from("127.0.0.5", server.addr);
    assert_eq!(exchange(&mut newest, "/v1/health", &[&auth]).0, 200);
    assert!(closed_within(&mut idle[0], Duration::from_secs(2)));
    assert!(!closed_within(&mut idle[1], Duration::from_millis(200)));
}

#[test]
fn a_flood_of_idle_connections_from_many_peers_does_not_keep_a_token_holder_out() {
    let home = tempfile::tempdir().unwrap();
    let (tokens, auth) = tokens();
    let limits = ConnectionLimits {
        max_connections: 40,
        max_connections_per_peer: 20,
        ..ConnectionLimits::default()
    };
    let server = start_with(home.path(), Some(tokens), limits);
    let _flood: Vec<TcpStream> = (0..120)
        .map(|i| connect_from(&format!("127.0.1.{}", i % 8 + 1), server.addr))
        .collect();
    let started = std::time::Instant::now();
    let mut s = TcpStream::connect(server.addr).unwrap();
    assert_eq!(exchange(&mut s, "/v1/runs", &[&auth]).0, 200);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_relative_project_path_is_resolved_under_the_projects_root() {
    use wfhost_protocol::{Accepted, RunRequest};
    use wfhost_server::Submitted;
    let home = tempfile::tempdir().unwrap();
    let fake = std::sync::Arc::new(FakeRuns::default());
    fake.answers.lock().unwrap().extend([
        Ok(Submitted::Accepted(Accepted { branch: None })),
        Ok(Submitted::Accepted(Accepted { branch: None })),
        Ok(Submitted::Accepted(Accepted { branch: None })),
        Ok(Submitted::Accepted(Accepted { branch: None })),
    ]);
    let server = start_running(
        home.path(),
        None,
        ConnectionLimits::default(),
        Some(fake.clone()),
    );
    let graph = |project: &str| {
        serde_json::json!({
            "workflow": {"name": "ci", "nodes": [{"id": "build", "type": "exec_block",
                "exec": {"commands": [{"argv": ["make"], "timeout_sec": 60, "allow_failure": true}]}}]},
            "project_path": project,
        })
        .to_string()
    };
    for (given, resolved) in [
        (".", "/srv/projects"),
        ("./app/", "/srv/projects/app"),
        ("team/app", "/srv/projects/team/app"),
        ("/abs/app", "/abs/app"),
    ] {
        let (status, body) = post(server.addr, "/v1/runs", graph(given).as_bytes());
        assert_eq!(status, 202, "{given}: {body}");
        let seen = fake.seen.lock().unwrap().clone();
        let Some(RunRequest::Start { workspace, .. }) = seen.last() else {
            panic!("no start request for {given}");
        };
        assert_eq!(workspace, resolved, "{given}");
    }
    for bad in ["..", "app/../../etc", "../other"] {
        let before = fake.seen.lock().unwrap().len();
        let (status, err) = post(server.addr, "/v1/runs", graph(bad).as_bytes());
        assert_eq!(status, 400, "{bad}: {err}");
        assert_eq!(err["details"]["pointer"], "/project_path", "{err}");
        assert!(
            err["message"].as_str().unwrap().contains("may not leave"),
            "{err}"
        );
        assert_eq!(
            fake.seen.lock().unwrap().len(),
            before,
            "{bad} reached the runner"
        );
    }
}

/// A workflow with declared inputs: `topic` required, `count` an integer.
const WITH_INPUTS: &str = r#"{"id": "hello", "description": "Say hello\nat length",
  "inputs": {"type": "object", "required": ["topic"], "properties": {
    "topic": {"type": "string", "description": "What about"},
    "count": {"type": "integer", "default": 2}}},
  "start_node": "main", "nodes": {"main": {"entry_block": "a", "blocks": {"a": {
    "worker": "echo", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]}}}}}"#;

#[test]
fn the_workflows_under_the_projects_root_are_listed_with_their_inputs() {
    let home = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("team/flows")).unwrap();
    std::fs::write(root.path().join("team/flows/hello.json"), WITH_INPUTS).unwrap();
    std::fs::write(
        root.path().join("broken.json"),
        r#"{"start_node": 1, "nodes": []}"#,
    )
    .unwrap();
    std::fs::write(root.path().join("package.json"), r#"{"name": "x"}"#).unwrap();
    std::fs::write(outside.path().join("secret.json"), WITH_INPUTS).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("escape")).unwrap();
    let server = start_rooted(
        home.path(),
        None,
        ConnectionLimits::default(),
        None,
        root.path(),
    );
    let (status, body) = get(server.addr, "/v1/workflows");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["root"], root.path().display().to_string());
    assert_eq!(body["truncated"], false);
    let listed = body["workflows"].as_array().unwrap();
    let paths: Vec<&str> = listed.iter().map(|w| w["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["broken.json", "team/flows/hello.json"], "{body}");
    assert!(listed[0]["error"].is_string(), "{body}");
    let hello = &listed[1];
    assert_eq!(hello["id"], "hello");
    assert_eq!(hello["description"], "Say hello");
    assert_eq!(hello["inputs"]["properties"]["count"]["default"], 2);
}

#[test]
fn a_runs_pinned_definition_is_served() {
    let home = tempfile::tempdir().unwrap();
    let id = "run-20260101-000000-000c0c";
    add_run(home.path(), id, "w", 1, true);
    let server = start(home.path(), None);
    let (status, body) = get(server.addr, &format!("/v1/runs/{id}/definition"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["hash"], wfhost_core::manifest::pinning::hash_of("{}"));
    assert_eq!(body["definition"], json!({}));
    let (status, _) = get(
        server.addr,
        "/v1/runs/run-20260101-000000-000c0d/definition",
    );
    assert_eq!(status, 404);
}

#[test]
fn a_start_with_bad_inputs_names_the_input_and_starts_nothing() {
    use wfhost_protocol::Accepted;
    use wfhost_server::Submitted;
    let home = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let flow = root.path().join("hello.json");
    std::fs::write(&flow, WITH_INPUTS).unwrap();
    let fake = std::sync::Arc::new(FakeRuns::default());
    fake.answers
        .lock()
        .unwrap()
        .push_back(Ok(Submitted::Accepted(Accepted { branch: None })));
    let server = start_rooted(
        home.path(),
        None,
        ConnectionLimits::default(),
        Some(fake.clone()),
        root.path(),
    );
    let body =
        |inputs: Value| json!({"workflow": flow, "workspace": "/ws", "inputs": inputs}).to_string();
    for (inputs, pointer) in [
        (json!({"count": 1}), "/inputs/topic"),
        (json!({"topic": "x", "count": "many"}), "/inputs/count"),
        (json!({"topic": "x", "nope": 1}), "/inputs/nope"),
    ] {
        let (status, err) = post(server.addr, "/v1/runs", body(inputs.clone()).as_bytes());
        assert_eq!(status, 400, "{inputs}: {err}");
        assert_eq!(err["details"]["pointer"], pointer, "{err}");
        assert_eq!(err["details"]["problems"][0]["pointer"], pointer, "{err}");
    }
    assert!(
        fake.seen.lock().unwrap().is_empty(),
        "a bad start reached the runner"
    );
    let (status, body) = post(
        server.addr,
        "/v1/runs",
        body(json!({"topic": "x"})).as_bytes(),
    );
    assert_eq!(status, 202, "{body}");
}
