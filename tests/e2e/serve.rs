//! `wfhost serve`: the API over the same store `wfhost run` writes.

use super::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;

/// A running `wfhost serve` on a free loopback port, stopped on drop.
pub(super) struct Served {
    pub(super) child: std::process::Child,
    pub(super) addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) fn serve(scratch: &Path) -> Served {
    serve_with(scratch, &[])
}

/// `wfhost serve` on a free loopback port (unless `extra` gives
/// `--listen`) with `extra` options.
pub(super) fn serve_with(scratch: &Path, extra: &[&str]) -> Served {
    // A free port unless `extra` names the address.
    let listen: &[&str] = if extra.contains(&"--listen") {
        &[]
    } else {
        &["--listen", "127.0.0.1:0"]
    };
    let mut child = command(scratch)
        .arg("serve")
        .args(listen)
        .args(extra)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let addr = served_address(&mut child);
    Served { child, addr }
}

/// `wfhost serve` on a free loopback port with `extra` options and `env`,
/// its stderr (the server's warnings and traces) in `log`.
pub(super) fn serve_logging(
    scratch: &Path,
    log: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Served {
    let mut child = command(scratch)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(extra)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let addr = served_address(&mut child);
    Served { child, addr }
}

/// The address a `wfhost serve` started with piped stdout announces on
/// its first line: `wfhost: serving http://127.0.0.1:PORT/v1 (store in …)`
/// (`https://` with TLS).
pub(super) fn served_address(child: &mut std::process::Child) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.split("://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string()
}

/// One request, its status and JSON body (`null` when not JSON).
pub(super) fn http(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> (u16, serde_json::Value) {
    let body = body.map(|b| b.to_string());
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    if let Some(b) = &body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    write!(s, "{head}\r\n{}", body.unwrap_or_default()).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let status = raw[9..12].parse().unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let body: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    if head
        .to_ascii_lowercase()
        .contains("content-type: application/json")
    {
        check_against_spec(method, path, status, &body);
    }
    (status, body)
}

/// Fail unless `body`, the answer `status` to `method path`, is what the
/// API's OpenAPI document says that answer is: every JSON answer any test
/// gets is checked against the published schemas.
pub(super) fn check_against_spec(method: &str, path: &str, status: u16, body: &serde_json::Value) {
    static SPEC: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    let spec = SPEC.get_or_init(wfhost_server::openapi_spec);
    let route = path.split('?').next().unwrap_or(path);
    let Some(route) = route.strip_prefix("/v1") else {
        return;
    };
    let template = spec["paths"]
        .as_object()
        .unwrap()
        .keys()
        .find(|t| matches_template(t, route))
        .unwrap_or_else(|| panic!("{method} {path}: no such path in the OpenAPI document"));
    let operation = &spec["paths"][template][method.to_ascii_lowercase()];
    let response = &operation["responses"][status.to_string()];
    assert!(
        response.is_object(),
        "{method} {path}: answered {status}, which the OpenAPI document does not list: {body}"
    );
    let Some(schema) = response.pointer("/content/application~1json/schema") else {
        return;
    };
    let document = serde_json::json!({
        "allOf": [schema],
        "components": spec["components"],
    });
    let validator = jsonschema::validator_for(&document).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(body)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .take(5)
        .collect();
    assert!(
        errors.is_empty(),
        "{method} {path} -> {status}: not the documented answer: {errors:?}\n{body:#}"
    );
}

#[test]
#[should_panic(expected = "not the documented answer")]
fn an_answer_unlike_its_documented_schema_fails_the_test_that_got_it() {
    // Health always has its version and the server's clock.
    check_against_spec(
        "GET",
        "/v1/health",
        200,
        &serde_json::json!({"status": "ok"}),
    );
}

#[test]
#[should_panic(expected = "does not list")]
fn an_answer_with_an_undocumented_status_fails_the_test_that_got_it() {
    check_against_spec("GET", "/v1/runs?limit=1", 418, &serde_json::json!({}));
}

/// Whether `route` (`/runs/run-1/jobs`) is an instance of `template`
/// (`/runs/{id}/jobs`).
fn matches_template(template: &str, route: &str) -> bool {
    let (t, r): (Vec<&str>, Vec<&str>) =
        (template.split('/').collect(), route.split('/').collect());
    t.len() == r.len()
        && t.iter()
            .zip(&r)
            .all(|(t, r)| (t.starts_with('{') && !r.is_empty()) || t == r)
}

pub(super) fn http_get(addr: &str, path: &str) -> (u16, serde_json::Value) {
    http(addr, "GET", path, None)
}

#[test]
fn the_api_serves_the_runs_wfhost_run_records() {
    let scratch = tempfile::tempdir().unwrap();
    let served = serve(scratch.path());
    let ws = workspace_in(scratch.path());
    let out = run_workflow(
        &repo().join("examples/hello/workflow.json"),
        &ws,
        scratch.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (status, runs) = http_get(&served.addr, "/v1/runs");
    assert_eq!(status, 200, "{runs}");
    let run = &runs["runs"][0];
    assert_eq!(
        (run["workflow_id"].as_str(), run["status"].as_str()),
        (Some("hello"), Some("succeeded"))
    );
    let id = run["id"].as_str().unwrap();
    let (status, steps) = http_get(&served.addr, &format!("/v1/runs/{id}/steps"));
    assert_eq!(status, 200, "{steps}");
    assert!(!steps["steps"].as_array().unwrap().is_empty());
}

#[test]
fn serve_names_the_api_first_and_the_dashboard_next() {
    let scratch = tempfile::tempdir().unwrap();
    let mut child = command(scratch.path())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let (mut api, mut dashboard) = (String::new(), String::new());
    out.read_line(&mut api).unwrap();
    out.read_line(&mut dashboard).unwrap();
    let served = Served {
        child,
        addr: api
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("no address in {api:?}"))
            .to_string(),
    };
    let addr = &served.addr;
    assert!(
        api.starts_with(&format!("wfhost: serving http://{addr}/v1 (store in ")),
        "{api}"
    );
    assert_eq!(dashboard, format!("wfhost: dashboard at http://{addr}/\n"));
    let (status, _) = http_get(addr, "/");
    assert_eq!(status, 200);
}

#[test]
fn serving_beyond_loopback_without_tokens_is_refused() {
    let scratch = tempfile::tempdir().unwrap();
    let out = wfhost(&["serve", "--listen", "0.0.0.0:0"], scratch.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--auth-token-file"),
        "{}",
        stderr(&out)
    );
    let tokens = scratch.path().join("tokens.json");
    std::fs::write(&tokens, r#"{"clients": ["short"]}"#).unwrap();
    let out = wfhost(
        &[
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--auth-token-file",
            tokens.to_str().unwrap(),
        ],
        scratch.path(),
    );
    assert_eq!(out.status.code(), Some(2));
}

pub(super) fn http_post(
    addr: &str,
    path: &str,
    body: &serde_json::Value,
) -> (u16, serde_json::Value) {
    http(addr, "POST", path, Some(body))
}

/// The run's status once it is `want`, waiting up to 60 s.
pub(super) fn await_status(addr: &str, run: &str, want: &str) -> serde_json::Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (status, body) = http_get(addr, &format!("/v1/runs/{run}"));
        if status == 200 && body["status"] == want {
            return body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "run {run} never became {want}: {status} {body}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn runs_started_answered_and_forked_over_the_api_are_the_clis_runs() {
    let scratch = tempfile::tempdir().unwrap();
    let served = serve(scratch.path());
    let ws = workspace_in(scratch.path());
    let workflow = repo().join("examples/review-gate/workflow.json");
    let (status, started) = http_post(
        &served.addr,
        "/v1/runs",
        &serde_json::json!({"workflow": workflow, "workspace": ws}),
    );
    assert_eq!(status, 202, "{started}");
    let id = started["run_id"].as_str().unwrap().to_string();
    await_status(&served.addr, &id, "waiting");
    // The same run the CLI sees.
    let gates = wfhost(&["gates", "--json"], scratch.path());
    assert!(stdout(&gates).contains(&id), "{}", stdout(&gates));

    let gate = |g: &str, answer: &str| {
        http_post(
            &served.addr,
            &format!("/v1/runs/{id}/gates/{g}"),
            &serde_json::json!({"answer": answer}),
        )
    };
    let (status, err) = gate("UD-9", "approved");
    assert_eq!(
        (status, err["code"].as_str()),
        (409, Some("not_waiting")),
        "{err}"
    );
    // The CLI's own check, as the error.
    let (status, err) = gate("UD-1", "approved please");
    assert_eq!(status, 400, "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("changes-requested"),
        "{err}"
    );
    // An answer that looks like an option is an answer, never an option of
    // the command that records it: refused as an answer, nothing recorded.
    for answer in ["--help", "--version", "-q"] {
        let (status, err) = gate("UD-1", answer);
        assert_eq!(status, 400, "{answer}: {err}");
        assert!(
            err["message"]
                .as_str()
                .unwrap()
                .contains("changes-requested"),
            "{answer}: {err}"
        );
    }
    let (status, answered) = gate("UD-1", "approved");
    assert_eq!(status, 202, "{answered}");
    let run = await_status(&served.addr, &id, "succeeded");
    assert_eq!(run["run"]["id"], id.as_str(), "{run}");
    // Nothing to resume: the CLI's refusal, as the error (`busy` while the
    // process that ended the run is still exiting).
    let resume = || {
        http_post(
            &served.addr,
            &format!("/v1/runs/{id}/resume"),
            &serde_json::json!({}),
        )
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let (mut status, mut err) = resume();
    while status == 409 && err["code"] == "busy" && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        (status, err) = resume();
    }
    assert_eq!(status, 400, "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("nothing to resume"),
        "{err}"
    );

    // A new branch from the first snapshot: it waits at the gate again.
    let (_, events) = http_get(&served.addr, &format!("/v1/runs/{id}/events"));
    let snapshot = events["events"][0]["snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, forked) = http_post(
        &served.addr,
        &format!("/v1/runs/{id}/fork"),
        &serde_json::json!({"at": snapshot}),
    );
    assert_eq!(status, 202, "{forked}");
    assert_eq!(forked["branch"], 2, "{forked}");
    await_status(&served.addr, &id, "waiting");
    let (status, cancelled) = http_post(
        &served.addr,
        &format!("/v1/runs/{id}/cancel"),
        &serde_json::json!({"reason": "done here", "by": "ci"}),
    );
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert_eq!(
        cancelled["reason"], "cancelled by ci through the HTTP API: done here",
        "{cancelled}"
    );
    let (_, listed) = http_get(&served.addr, "/v1/runs?status=cancelled");
    assert_eq!(listed["runs"][0]["id"], id.as_str(), "{listed}");
    let (_, shown) = http_get(&served.addr, &format!("/v1/runs/{id}"));
    assert_eq!(shown["status"], "cancelled", "{shown}");
    assert_eq!(
        shown["failure"], "cancelled by ci through the HTTP API: done here",
        "{shown}"
    );
    // A name that is not one short line is refused, and nothing changes.
    let (status, refused) = http_post(
        &served.addr,
        &format!("/v1/runs/{id}/cancel"),
        &serde_json::json!({"by": "a\nb"}),
    );
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["details"]["pointer"], "/by", "{refused}");
}

#[test]
fn a_start_that_cannot_run_is_refused_with_the_reason_and_records_nothing() {
    let scratch = tempfile::tempdir().unwrap();
    let served = serve(scratch.path());
    let ws = workspace_in(scratch.path());
    let hello = repo().join("examples/hello/workflow.json");
    for (body, pointer) in [
        (
            serde_json::json!({"workflow": hello, "workspace": "relative/ws"}),
            "/workspace",
        ),
        (serde_json::json!({"workspace": ws}), "/workflow"),
        (
            serde_json::json!({"workflow": hello, "manifest": {}, "workspace": ws}),
            "/workflow",
        ),
        (
            serde_json::json!({"workflow": hello, "workspace": ws, "max_steps": "many"}),
            "/max_steps",
        ),
    ] {
        let (status, err) = http_post(&served.addr, "/v1/runs", &body);
        assert_eq!(status, 400, "{body}: {err}");
        assert_eq!(err["details"]["pointer"], pointer, "{err}");
    }
    // A manifest in the body that is not a workflow: the CLI's message.
    let (status, err) = http_post(
        &served.addr,
        "/v1/runs",
        &serde_json::json!({"manifest": {"id": "broken", "nodes": {}}, "workspace": ws}),
    );
    assert_eq!(status, 400, "{err}");
    assert!(
        err["message"].as_str().unwrap().contains("start_node"),
        "{err}"
    );
    let (_, runs) = http_get(&served.addr, "/v1/runs");
    assert_eq!(runs["runs"].as_array().map_or(0, Vec::len), 0, "{runs}");

    // A manifest in the body that is one runs, with its inputs.
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&hello).unwrap()).unwrap();
    let (status, started) = http_post(
        &served.addr,
        "/v1/runs",
        &serde_json::json!({"manifest": manifest, "workspace": ws}),
    );
    assert_eq!(status, 202, "{started}");
    await_status(
        &served.addr,
        started["run_id"].as_str().unwrap(),
        "succeeded",
    );
}

#[test]
fn a_run_killed_mid_way_is_resumed_over_the_api_to_its_end() {
    let scratch = tempfile::tempdir().unwrap();
    let served = serve(scratch.path());
    let ws = workspace_in(scratch.path());
    let n = 1500;
    let manifest = super::leases::chain(n);
    let (status, started) = http_post(
        &served.addr,
        "/v1/runs",
        &serde_json::json!({"manifest": manifest, "workspace": ws, "max_steps": n + 10}),
    );
    assert_eq!(status, 202, "{started}");
    let id = started["run_id"].as_str().unwrap().to_string();
    await_status(&served.addr, &id, "running");
    // SIGKILL the run's process: the one holding the run's lock.
    let store = wfhost_store::Store::open_existing(&scratch.path().join("home")).unwrap();
    let run_id = wfhost_store::RunId::parse(&id).unwrap();
    let pid = store.lock_holder(&run_id).expect("a process runs it");
    // SAFETY: kill(2) on the run process this server started.
    assert_eq!(
        unsafe { libc::kill(pid as i32, libc::SIGKILL) },
        0,
        "pid {pid}"
    );
    let run = await_status(&served.addr, &id, "interrupted");
    assert!(run["steps"].as_u64().unwrap() < n as u64, "{run}");
    let (status, resumed) = http_post(
        &served.addr,
        &format!("/v1/runs/{id}/resume"),
        &serde_json::json!({}),
    );
    assert_eq!(status, 202, "{resumed}");
    let run = await_status(&served.addr, &id, "succeeded");
    assert_eq!(run["steps"], n, "{run}");
}

/// Reads an SSE stream for up to `wait`, until `done` says so; the
/// messages as (event type, data) pairs.
fn read_sse(
    addr: &str,
    path: &str,
    wait: std::time::Duration,
    done: impl Fn(&[(String, String)]) -> bool,
) -> Vec<(String, String)> {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_millis(200)))
        .unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let deadline = std::time::Instant::now() + wait;
    let mut raw = Vec::new();
    let mut messages = Vec::new();
    while std::time::Instant::now() < deadline {
        let mut buf = [0u8; 8192];
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
        // Chunked framing aside, each message is `event:`/`data:` lines.
        let text = String::from_utf8_lossy(&raw).into_owned();
        messages = text
            .split("\n\n")
            .filter_map(|block| {
                let mut kind = String::new();
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(k) = line.strip_prefix("event: ") {
                        kind = k.trim().to_string();
                    } else if let Some(d) = line.strip_prefix("data: ") {
                        data.push_str(d);
                    }
                }
                (!data.is_empty()).then_some((kind, data))
            })
            .collect();
        if done(&messages) {
            break;
        }
    }
    messages
}

/// `?output=true` adds the running block's output to the event stream, as
/// `output` events without an id; it never reaches the durable log, and a
/// stream without it has none.
#[test]
fn the_event_stream_carries_a_running_blocks_output_when_asked() {
    let scratch = tempfile::tempdir().unwrap();
    let served = serve(scratch.path());
    let ws = workspace_in(scratch.path());
    let script = "for i in $(seq 1 60); do echo tick $i; sleep 0.1; done";
    let manifest = super::run::write_manifest(
        scratch.path(),
        serde_json::json!({
            "id": "ticks",
            "plugins": {"exec": {"grants": ["exec"]}},
            "start_node": "main",
            "nodes": {"main": {"entry_block": "tick", "blocks": {"tick": {
                "worker": "exec",
                "config": {"commands": [{"argv": ["sh", "-c", script]}], "allow_shell": true},
                "transitions": [
                    {"on_signal": "SIGNAL:SUCCESS", "action": "END"},
                    {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL:no ticks"}
                ]
            }}}}
        }),
    );
    let (status, started) = http_post(
        &served.addr,
        "/v1/runs",
        &serde_json::json!({"workflow": manifest, "workspace": ws}),
    );
    assert_eq!(status, 202, "{started}");
    let run = started["run_id"].as_str().unwrap().to_string();
    let saw_tick = |m: &[(String, String)]| {
        m.iter()
            .any(|(k, d)| k == "output" && d.contains("\"text\":\"tick "))
    };
    let with = read_sse(
        &served.addr,
        &format!("/v1/runs/{run}/events/stream?output=true"),
        std::time::Duration::from_secs(30),
        saw_tick,
    );
    assert!(saw_tick(&with), "{with:#?}");
    let line: serde_json::Value = with
        .iter()
        .find(|(k, _)| k == "output")
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .unwrap();
    assert_eq!(line["block"], "main.tick", "{line}");
    assert_eq!(line["stream"], "stdout", "{line}");
    assert_eq!(line["progress"], false, "{line}");
    let without = read_sse(
        &served.addr,
        &format!("/v1/runs/{run}/events/stream"),
        std::time::Duration::from_secs(2),
        |_| false,
    );
    assert!(
        !without.is_empty() && without.iter().all(|(k, _)| k != "output"),
        "{without:#?}"
    );
    await_status(&served.addr, &run, "succeeded");
    // Sixty lines, and the log has the run's few events, none a line.
    let events = run_events(scratch.path(), &run);
    assert!(events.len() < 10, "{events:#?}");
}

/// SIGTERM stops an idle server at once, local agents and all: their
/// lease's long poll does not hold the stop (it held it for up to 20 s).
#[test]
fn an_idle_server_with_local_agents_stops_at_once_on_sigterm() {
    let scratch = tempfile::tempdir().unwrap();
    let mut served = serve_with(scratch.path(), &["--local-agents", "2"]);
    // Let the agents start their long polls.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let asked = std::time::Instant::now();
    // SAFETY: kill(2) on the server process this test started.
    assert_eq!(
        unsafe { libc::kill(served.child.id() as i32, libc::SIGTERM) },
        0
    );
    let deadline = asked + std::time::Duration::from_secs(5);
    let status = loop {
        if let Some(status) = served.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still serving 5 s after SIGTERM"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
}

/// The `wfhost serve-run` processes started by the process `pid`.
fn run_processes_of(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    let mut found: Vec<u32> = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .filter(|child| {
            std::fs::read(format!("/proc/{child}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|arg| arg == b"serve-run"))
        })
        .collect();
    found.sort_unstable();
    found
}

/// Whether process `pid` has ended (gone, or a zombie no one reaped yet).
fn ended(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
    })
}

#[test]
fn a_spare_run_process_waits_for_the_next_run_and_ends_with_the_server() {
    let scratch = tempfile::tempdir().unwrap();
    let mut child = command(scratch.path())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("WFHOST_LOG", "wfhost_app::run=info")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let addr = served_address(&mut child);
    let mut served = Served { child, addr };
    let server = served.child.id();
    let ws = workspace_in(scratch.path());
    let manifest = super::block_chain(
        "spare",
        2,
        serde_json::json!({"worker": "echo"}),
        serde_json::json!({}),
    );
    let start = |addr: &str| {
        let (status, started) = http_post(
            addr,
            "/v1/runs",
            &serde_json::json!({"manifest": manifest, "workspace": ws}),
        );
        assert_eq!(status, 202, "{started}");
        let id = started["run_id"].as_str().unwrap().to_string();
        await_status(addr, &id, "succeeded");
        id
    };
    // The first run's process is started for it; once it has ended, one
    // spare waits.
    start(&served.addr);
    super::wait_until("one spare run process", || {
        run_processes_of(server).len() == 1
    });
    let spare = run_processes_of(server)[0];

    // The next run is carried out by that spare, its messages in the run's
    // own log; another spare is started for the run after.
    let id = start(&served.addr);
    let log =
        std::fs::read_to_string(scratch.path().join(format!("home/serve-logs/{id}.log"))).unwrap();
    assert!(log.contains(&format!("run {id} of spare")), "{log}");
    assert!(
        log.contains(&format!("pid={spare}")),
        "run {id} not by the spare {spare}:\n{log}"
    );
    super::wait_until("a new spare", || {
        let now = run_processes_of(server);
        now.len() == 1 && now[0] != spare
    });
    let next = run_processes_of(server)[0];

    // A spare nobody asks for ends with its server, however the server ends.
    served.child.kill().unwrap();
    served.child.wait().unwrap();
    super::wait_until("the spare ends after its server", || ended(next));
    let early = std::fs::read_to_string(scratch.path().join("home/serve-logs/.spare.log")).unwrap();
    assert!(!early.contains("error"), "{early}");
}
