//! OpenTelemetry export: the spans of a run, of a served run and of the
//! remote agent that ran its block, received by a real OTLP/HTTP receiver
//! (`tests/otlp/receiver.py`, decoding with the protocol's own generated
//! definitions from the `opentelemetry-proto` package, installed with pip
//! into a virtual environment under the target directory on first use).

use super::serve::{Served, await_status};
use super::*;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A trace the tests start, as a caller would with `TRACEPARENT`.
const TRACE: &str = "5f1e4b7c9a2d4e6f8a0b1c2d3e4f5a6b";
const CALLER_SPAN: &str = "a1b2c3d4e5f60718";

fn caller() -> String {
    format!("00-{TRACE}-{CALLER_SPAN}-01")
}

/// Python with `opentelemetry-proto`, or why not. Made once per process
/// (`cargo test` runs these tests as threads of one), aside and renamed
/// into place across processes (nextest runs each in its own).
fn receiver_python() -> Result<PathBuf, String> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let requirements = repo().join("tests/otlp/requirements.txt");
    let wanted = std::fs::read_to_string(&requirements).map_err(|e| e.to_string())?;
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("otlp-venv");
    let python = dir.join("bin/python");
    let stamp = dir.join(".installed");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == wanted) {
        return Ok(python);
    }
    // Made aside and renamed into place: tests in other processes may
    // be making it too.
    let building = dir.with_extension(format!("{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&building);
    let ok = |out: std::io::Result<std::process::Output>, what: &str| match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("{what}: {}", String::from_utf8_lossy(&o.stderr))),
        Err(e) => Err(format!("{what}: {e}")),
    };
    ok(
        Command::new("python3")
            .args(["-m", "venv"])
            .arg(&building)
            .output(),
        "python3 -m venv",
    )?;
    ok(
        Command::new(building.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(&requirements)
            .output(),
        "pip install",
    )?;
    std::fs::write(building.join(".installed"), &wanted).map_err(|e| e.to_string())?;
    // Another test's, made meanwhile, is as good; an outdated one goes.
    if !std::fs::read_to_string(&stamp).is_ok_and(|s| s == wanted) {
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::rename(&building, &dir);
    }
    let _ = std::fs::remove_dir_all(&building);
    Ok(python)
}

/// The receiver, on a free loopback port; killed on drop.
struct Receiver {
    child: std::process::Child,
    out: PathBuf,
    url: String,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Receiver {
    /// None when the receiver cannot be had (no PyPI), unless the
    /// services are required.
    fn start(scratch: &Path) -> Option<Receiver> {
        let python = match receiver_python() {
            Ok(p) => p,
            Err(e) => {
                assert!(
                    std::env::var("WFHOST_REQUIRE_SERVICES").as_deref() != Ok("1"),
                    "no OTLP receiver: {e}"
                );
                eprintln!("skipped: no OTLP receiver: {e}");
                return None;
            }
        };
        let out = scratch.join("spans.jsonl");
        let port_file = scratch.join("otlp.port");
        let child = Command::new(python)
            .arg(repo().join("tests/otlp/receiver.py"))
            .arg("--out")
            .arg(&out)
            .arg("--port-file")
            .arg(&port_file)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut receiver = Receiver {
            child,
            out,
            url: String::new(),
        };
        wait_until("the OTLP receiver listens", || port_file.exists());
        let port = std::fs::read_to_string(&port_file).unwrap();
        receiver.url = format!("http://127.0.0.1:{}", port.trim());
        Some(receiver)
    }

    /// Every span received so far; fails on anything the receiver refused.
    fn spans(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        let records: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let refused: Vec<&Value> = records
            .iter()
            .filter(|r| r.get("error").is_some())
            .collect();
        assert!(refused.is_empty(), "the receiver refused: {refused:?}");
        records
    }

    /// The spans once `ok` holds of them (waits up to 60 s).
    fn spans_when(&self, what: &str, ok: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let spans = self.spans();
            if ok(&spans) {
                return spans;
            }
            assert!(
                Instant::now() < deadline,
                "never: {what}; spans: {}",
                names(&spans)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn names(spans: &[Value]) -> String {
    spans
        .iter()
        .map(|s| format!("{}({})", s["name"], s["resource"]["wfhost.command"]))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The spans named `name` from the process of `command`.
fn named<'a>(spans: &'a [Value], name: &str, command: &str) -> Vec<&'a Value> {
    spans
        .iter()
        .filter(|s| s["name"] == name && s["resource"]["wfhost.command"] == command)
        .collect()
}

fn one<'a>(spans: &'a [Value], name: &str, command: &str) -> &'a Value {
    let found = named(spans, name, command);
    assert_eq!(found.len(), 1, "{name} of {command}: {}", names(spans));
    found[0]
}

fn parent_of<'a>(spans: &'a [Value], span: &Value) -> &'a Value {
    spans
        .iter()
        .find(|s| s["span_id"] == span["parent_span_id"])
        .unwrap_or_else(|| panic!("no parent of {span}"))
}

fn two_blocks() -> Value {
    json!({"id": "traced", "start_node": "main",
        "plugins": {"exec": {"grants": ["exec"]}},
        "nodes": {"main": {"entry_block": "build", "blocks": {
            "build": {"worker": "exec",
                "config": {"commands": [{"argv": ["true"]}]},
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:note"}]},
            "note": {"worker": "echo",
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]}}}}})
}

#[test]
fn a_run_exports_its_spans_under_the_callers_trace() {
    let scratch = tempfile::tempdir().unwrap();
    let Some(receiver) = Receiver::start(scratch.path()) else {
        return;
    };
    let ws = workspace_in(scratch.path());
    let manifest = scratch.path().join("wf.json");
    std::fs::write(&manifest, two_blocks().to_string()).unwrap();
    // The standard variable, and the caller's span as TRACEPARENT.
    let out = command(scratch.path())
        .args([
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
            "--json",
        ])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url)
        .env("TRACEPARENT", caller())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run_id = report["run_id"].as_str().unwrap().to_string();
    // Sent before the command ended.
    let spans = receiver.spans();
    assert!(
        spans.iter().all(|s| s["trace_id"] == TRACE),
        "{}",
        names(&spans)
    );
    let drive = one(&spans, "drive", "run");
    assert_eq!(drive["parent_span_id"], CALLER_SPAN);
    assert_eq!(drive["attributes"]["run_id"], run_id.as_str());
    let run = one(&spans, "run", "run");
    assert_eq!(run["parent_span_id"], drive["span_id"]);
    let blocks = named(&spans, "block", "run");
    assert_eq!(blocks.len(), 2, "{}", names(&spans));
    for block in &blocks {
        assert_eq!(block["parent_span_id"], run["span_id"]);
        assert_eq!(block["attributes"]["run_id"], run_id.as_str());
    }
    // The exec block's host call, under its block.
    let call = spans
        .iter()
        .find(|s| s["name"] == "host_call" && s["attributes"]["function"] == "run")
        .unwrap_or_else(|| panic!("no exec host call: {}", names(&spans)));
    let mut up = parent_of(&spans, call);
    while up["name"] != "block" {
        up = parent_of(&spans, up);
    }
    assert_eq!(up["attributes"]["block"], "build");
    assert_eq!(drive["resource"]["service.name"], "wfhost");
    // Nothing of the libraries under wfhost (its HTTP client's own).
    assert!(
        spans.iter().all(|s| s["scope"] == "wfhost"),
        "{}",
        names(&spans)
    );
}

#[test]
fn without_an_endpoint_nothing_is_sent_and_a_bad_one_is_refused() {
    let scratch = tempfile::tempdir().unwrap();
    let Some(receiver) = Receiver::start(scratch.path()) else {
        return;
    };
    let ws = workspace_in(scratch.path());
    let manifest = scratch.path().join("wf.json");
    std::fs::write(&manifest, two_blocks().to_string()).unwrap();
    let run = |extra: &[&str], env: &[(&str, &str)]| {
        let mut cmd = command(scratch.path());
        cmd.args([
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
        ])
        .args(extra)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };
    // Off by default, and when the SDK is disabled.
    assert_eq!(
        run(&[], &[("TRACEPARENT", &caller())]).status.code(),
        Some(0)
    );
    let disabled = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url.as_str()),
        ("OTEL_SDK_DISABLED", "true"),
    ];
    assert_eq!(run(&[], &disabled).status.code(), Some(0));
    assert_eq!(receiver.spans(), Vec::<Value>::new());
    // A flag that is not a URL: refused before anything runs.
    let out = run(&["--otlp-endpoint", "127.0.0.1:4318"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--otlp-endpoint \"127.0.0.1:4318\": not an http:// or https:// URL"),
        "{}",
        stderr(&out)
    );
    // The flag wins over the variable (which names nothing listening).
    let out = run(
        &["--otlp-endpoint", &receiver.url],
        &[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://127.0.0.1:9/v1/traces",
        )],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!named(&receiver.spans(), "run", "run").is_empty());
}

/// `POST path` with a JSON body and a `traceparent` header.
fn post_traced(addr: &str, path: &str, body: &Value, traceparent: &str) -> (u16, Value) {
    let body = body.to_string();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         traceparent: {traceparent}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let status = raw[9..12].parse().unwrap();
    let body = raw.split_once("\r\n\r\n").unwrap().1;
    (status, serde_json::from_str(body).unwrap_or_default())
}

/// SIGTERM, then wait: the process sends its last spans as it ends.
fn stop(child: &mut std::process::Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "it did not end on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_served_run_and_its_remote_agent_share_one_trace() {
    let scratch = tempfile::tempdir().unwrap();
    let Some(receiver) = Receiver::start(scratch.path()) else {
        return;
    };
    let endpoint = receiver.url.clone();
    // Batches every 100 ms, so the long-lived processes' spans arrive
    // while they run.
    let otel = |cmd: &mut Command| {
        cmd.env("OTEL_BSP_SCHEDULE_DELAY", "100")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT");
    };
    let mut serve_cmd = command(scratch.path());
    otel(&mut serve_cmd);
    let mut child = serve_cmd
        .args(["serve", "--listen", "127.0.0.1:0", "--local-agents", "0"])
        .args(["--otlp-endpoint", &endpoint])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let addr = super::serve::served_address(&mut child);
    let mut served = Served { child, addr };
    let mut agent_cmd = command(scratch.path());
    otel(&mut agent_cmd);
    let mut agent = agent_cmd
        .args(["agent", "--server", &format!("http://{}", served.addr)])
        .args(["--name", "remote", "--otlp-endpoint", &endpoint])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(scratch.path().join("agent.log")).unwrap())
        .spawn()
        .unwrap();
    let ws = scratch.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let (status, body) = post_traced(
        &served.addr,
        "/v1/runs",
        &json!({"manifest": two_blocks(), "workspace": ws}),
        &caller(),
    );
    assert_eq!(status, 202, "{body}");
    let run_id = body["run_id"].as_str().unwrap().to_string();
    await_status(&served.addr, &run_id, "succeeded");
    let (_, jobs) = super::serve::http_get(&served.addr, &format!("/v1/runs/{run_id}/jobs"));
    let job_ids: Vec<i64> = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect();
    assert_eq!(job_ids.len(), 2, "{jobs}");
    stop(&mut agent);
    stop(&mut served.child);
    let spans = receiver.spans_when("both jobs' spans from the agent and the server", |s| {
        named(s, "job", "agent").len() == 2
            && named(s, "job.complete", "serve").len() == 2
            && named(s, "block", "serve-run").len() == 2
    });
    let ours: Vec<Value> = spans
        .iter()
        .filter(|s| s["trace_id"] == TRACE)
        .cloned()
        .collect();
    // The request that started the run: under the caller's span.
    let start = ours
        .iter()
        .find(|s| s["name"] == "POST /v1/runs")
        .unwrap_or_else(|| panic!("no start request: {}", names(&spans)));
    assert_eq!(start["parent_span_id"], CALLER_SPAN);
    assert_eq!(start["kind"], 2, "a server span");
    assert_eq!(start["resource"]["wfhost.command"], "serve");
    // The run process's drive: under that request, across the process.
    let drive = one(&ours, "drive", "serve-run");
    assert_eq!(drive["parent_span_id"], start["span_id"]);
    assert_eq!(drive["attributes"]["run_id"], run_id.as_str());
    assert_ne!(
        drive["resource"]["process.pid"],
        start["resource"]["process.pid"]
    );
    let run = one(&ours, "run", "serve-run");
    assert_eq!(run["parent_span_id"], drive["span_id"]);
    // Each block's job, run by the agent under the block's span.
    for job in named(&ours, "job", "agent") {
        let block = parent_of(&ours, job);
        assert_eq!(block["name"], "block");
        assert_eq!(block["resource"]["wfhost.command"], "serve-run");
        assert_eq!(block["parent_span_id"], run["span_id"]);
        assert_eq!(job["attributes"]["run_id"], run_id.as_str());
        assert_eq!(job["attributes"]["block"], block["attributes"]["block"]);
        let job_id = job["attributes"]["job_id"].as_i64().unwrap();
        assert!(job_ids.contains(&job_id), "{job_id} not in {job_ids:?}");
        // The server's lease and completion of that job: each under a
        // request span whose parent is the agent's.
        let completed = named(&ours, "job.complete", "serve")
            .into_iter()
            .find(|c| c["attributes"]["job_id"] == job_id)
            .unwrap_or_else(|| panic!("job {job_id} completed outside the trace"));
        let request = parent_of(&ours, completed);
        assert_eq!(request["kind"], 2);
        let mut up = parent_of(&ours, request);
        while up["span_id"] != job["span_id"] {
            assert_eq!(up["resource"]["wfhost.command"], "agent");
            up = parent_of(&ours, up);
        }
    }
    // Each lease names the job it handed out and its run.
    let leases: Vec<&Value> = named(&spans, "job.lease", "serve")
        .into_iter()
        .filter(|l| l["attributes"].get("job_id").is_some())
        .collect();
    assert_eq!(leases.len(), 2, "{}", names(&spans));
    for lease in leases {
        assert!(job_ids.contains(&lease["attributes"]["job_id"].as_i64().unwrap()));
        assert_eq!(lease["attributes"]["run_id"], run_id.as_str());
    }
}
