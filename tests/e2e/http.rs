//! The `http` capability through `wfhost run`: a worker (the HTTP probe)
//! granted `http` reaches the hosts its workflow allows on a loopback
//! server, and nothing else; secret placeholders are filled in only for
//! the hosts allowed to receive them and masked in what the guest sees;
//! redirects, big responses and slow servers are bounded.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{command, stderr, stdout, workspace_in};

const SECRET: &str = "sk-test-7f3a9c1e55";

/// What a test server answers: a status line, extra header lines (each
/// ending in CRLF), a body, and how long to wait first.
pub(super) struct Reply {
    pub status: &'static str,
    pub headers: String,
    pub body: Vec<u8>,
    pub delay: Duration,
}

impl Reply {
    pub fn new(status: &'static str, body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status,
            headers: String::new(),
            body: body.into(),
            delay: Duration::ZERO,
        }
    }
}

/// Answers a request (method, path, headers, body as JSON) on `port`.
pub(super) type Handler = Arc<dyn Fn(&Value, u16) -> Reply + Send + Sync>;

/// A loopback HTTP/1.1 server answering through a handler; every request
/// it got is kept.
pub(super) struct Server {
    pub port: u16,
    seen: Arc<Mutex<Vec<Value>>>,
}

impl Server {
    /// The probe's server: `/echo` answers with the request as JSON,
    /// `/redirect` sends to `localhost` (the same server under a name the
    /// tests do not allow), `/big` answers 2 MiB, `/slow` waits 10 s.
    pub fn start() -> Server {
        Server::start_with(Arc::new(probe_routes))
    }

    pub fn start_with(handler: Handler) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
        let kept = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (kept, handler) = (kept.clone(), handler.clone());
                std::thread::spawn(move || serve(stream, port, &kept, &*handler));
            }
        });
        Server { port, seen }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn seen(&self) -> Vec<Value> {
        self.seen.lock().unwrap().clone()
    }
}

fn probe_routes(request: &Value, port: u16) -> Reply {
    match request["path"].as_str().unwrap_or("") {
        "/echo" => Reply {
            headers: format!(
                "x-echo-auth: {}\r\n",
                request["headers"]["authorization"].as_str().unwrap_or("")
            ),
            ..Reply::new("200 OK", request.to_string())
        },
        "/redirect" => Reply {
            headers: format!("location: http://localhost:{port}/echo\r\n"),
            ..Reply::new("302 Found", "")
        },
        "/big" => Reply::new("200 OK", vec![b'x'; 2 << 20]),
        "/slow" => Reply {
            delay: Duration::from_secs(10),
            ..Reply::new("200 OK", "late")
        },
        _ => Reply::new("404 Not Found", ""),
    }
}

fn serve(
    stream: TcpStream,
    port: u16,
    seen: &Mutex<Vec<Value>>,
    handler: &(dyn Fn(&Value, u16) -> Reply + Send + Sync),
) {
    let Some(request) = read_request(&stream) else {
        return;
    };
    seen.lock().unwrap().push(request.clone());
    let reply = handler(&request, port);
    std::thread::sleep(reply.delay);
    let head = format!(
        "HTTP/1.1 {}\r\ncontent-length: {}\r\nconnection: close\r\n{}\r\n",
        reply.status,
        reply.body.len(),
        reply.headers
    );
    let mut out = stream;
    let _ = out.write_all(head.as_bytes());
    let _ = out.write_all(&reply.body);
}

/// Method, path, headers (lowercase names) and body, as JSON.
fn read_request(stream: &TcpStream) -> Option<Value> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut headers = serde_json::Map::new();
    let mut length = 0;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.trim_end().split_once(':') {
            let k = k.to_ascii_lowercase();
            if k == "content-length" {
                length = v.trim().parse().unwrap_or(0);
            }
            headers.insert(k, json!(v.trim()));
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(json!({"method": method, "path": path, "headers": headers,
        "body": String::from_utf8_lossy(&body)}))
}

/// A one-block workflow of the HTTP probe with `grant` as its `http`.
fn manifest(dir: &Path, grants: Value, http: Option<Value>, requests: Value) -> PathBuf {
    let mut plugin =
        json!({"path": wfhost_guest_artifacts::TEST_HTTP_PROBE_PATH, "grants": grants});
    if let Some(http) = http {
        plugin["http"] = http;
    }
    let wf = json!({
        "id": "http-probe", "start_node": "main",
        "plugins": {"probe": plugin},
        "nodes": {"main": {"entry_block": "x", "blocks": {"x": {
            "worker": "probe", "timeout": "60s",
            "config": {"requests": requests},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
        }}}}
    });
    let path = dir.join("http.json");
    std::fs::write(&path, serde_json::to_string_pretty(&wf).unwrap()).unwrap();
    path
}

/// Run it; returns what the probe saw (one list of hops per request),
/// the whole output, and the run's stored events as text.
fn run(scratch: &Path, manifest: &Path, env: &[(&str, &str)]) -> (Vec<Value>, String, String) {
    let ws = workspace_in(scratch);
    let mut cmd = command(scratch);
    cmd.args([
        "run",
        manifest.to_str().unwrap(),
        "-w",
        ws.to_str().unwrap(),
        "--json",
    ]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(0), "{all}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let seen = report["payload"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["type"] == "HTTP")
        .map(|s| serde_json::from_str(s["content"].as_str().unwrap()).unwrap())
        .unwrap_or_else(|| panic!("no HTTP segment: {all}"));
    let run_id = report["run_id"].as_str().unwrap().to_string();
    let events = super::wfhost(&["events", &run_id, "--json"], scratch);
    let logs = super::wfhost(&["logs", &run_id], scratch);
    (seen, format!("{all}{}", stdout(&logs)), stdout(&events))
}

fn allow(server: &Server, extra: Value) -> Value {
    let mut http = json!({"allow": [
        {"host": format!("127.0.0.1:{}", server.port), "scheme": "http",
         "methods": ["GET", "POST"], "secrets": ["API_KEY"]}
    ]});
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            http[k] = v;
        }
    }
    http
}

#[test]
fn an_allowed_host_gets_the_secret_and_the_guest_sees_it_masked() {
    let server = Server::start();
    let scratch = tempfile::tempdir().unwrap();
    super::set_secret(scratch.path(), "API_KEY", SECRET);
    let m = manifest(
        scratch.path(),
        json!(["http"]),
        Some(allow(&server, json!({}))),
        json!([{"method": "POST", "url": server.url("/echo"),
                "headers": [["authorization", "Bearer ${secret.API_KEY}"]],
                "body": "{\"key\": \"${secret.API_KEY}\"}"},
               {"url": server.url("/echo?key=${secret.API_KEY}")}]),
    );
    let (seen, all, events) = run(scratch.path(), &m, &[]);
    // The server got the value, in the header and the body.
    let got = server.seen();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(
        got[1]["path"],
        format!("/echo?key={SECRET}"),
        "in the URL too"
    );
    assert_eq!(
        got[0]["headers"]["authorization"],
        format!("Bearer {SECRET}")
    );
    assert_eq!(got[0]["body"], format!("{{\"key\": \"{SECRET}\"}}"));
    // The guest saw the answer with the value masked, and so does the store.
    let hop = &seen[0][0];
    assert_eq!(hop["status"], 200, "{seen:?}");
    let shown = hop.to_string();
    assert!(
        !shown.contains(SECRET) && shown.contains("Bearer ***"),
        "{shown}"
    );
    assert!(!all.contains(SECRET), "{all}");
    assert!(!events.contains(SECRET), "the store holds the secret");
}

#[test]
fn hosts_off_the_list_redirects_to_them_and_misplaced_secrets_are_refused() {
    let server = Server::start();
    let scratch = tempfile::tempdir().unwrap();
    super::set_secret(scratch.path(), "API_KEY", SECRET);
    let mut http = allow(&server, json!({}));
    // `localhost` is allowed, but not to receive API_KEY.
    http["allow"].as_array_mut().unwrap().push(
        json!({"host": format!("localhost:{}", server.port), "scheme": "http", "methods": ["GET"]}),
    );
    let localhost = format!("http://localhost:{}/echo", server.port);
    let m = manifest(
        scratch.path(),
        json!(["http"]),
        Some(http),
        json!([
            {"url": format!("http://127.0.0.2:{}/echo", server.port)},
            {"url": server.url("/redirect"), "follow": true},
            {"url": localhost, "headers": [["x-key", "${secret.API_KEY}"]]},
            {"method": "DELETE", "url": server.url("/echo")},
            {"url": format!("https://127.0.0.1:{}/echo", server.port)}
        ]),
    );
    let (seen, all, _) = run(scratch.path(), &m, &[]);
    let error = |i: usize, hop: usize| seen[i][hop]["error"].as_str().unwrap_or("").to_string();
    assert_eq!(error(0, 0), "Denied", "{seen:?}");
    // The redirect itself arrives; following it to the same host by
    // another name is a request like any other: allowed (GET, no secret).
    assert_eq!(seen[1][0]["status"], 302);
    assert_eq!(seen[1][1]["status"], 200, "{seen:?}");
    assert_eq!(
        error(2, 0),
        "Denied",
        "a secret sent where it is not allowed"
    );
    assert_eq!(error(3, 0), "Denied", "a method not allowed");
    assert_eq!(error(4, 0), "Denied", "a scheme not allowed");
    // Only the two allowed requests reached the server.
    let paths: Vec<String> = server
        .seen()
        .iter()
        .map(|r| r["path"].to_string())
        .collect();
    assert_eq!(paths.len(), 2, "{paths:?}");
    for says in [
        "host `127.0.0.2` is not in plugins.probe.http.allow",
        "carries the placeholder of secret `API_KEY`",
        "be sent GET, POST only",
        "over http only",
    ] {
        assert!(all.contains(says), "missing `{says}` in: {all}");
    }
    assert!(!all.contains(SECRET));
}

#[test]
fn a_redirect_to_a_host_off_the_list_is_refused() {
    let server = Server::start();
    let scratch = tempfile::tempdir().unwrap();
    let m = manifest(
        scratch.path(),
        json!(["http"]),
        Some(allow(&server, json!({}))),
        json!([{"url": server.url("/redirect"), "follow": true}]),
    );
    let (seen, all, _) = run(scratch.path(), &m, &[]);
    assert_eq!(seen[0][0]["status"], 302, "{seen:?}");
    assert_eq!(seen[0][1]["error"], "Denied", "{seen:?}");
    assert!(
        all.contains("host `localhost` is not in plugins.probe.http.allow"),
        "{all}"
    );
    assert_eq!(server.seen().len(), 1);
}

#[test]
fn big_responses_and_slow_servers_are_bounded() {
    let server = Server::start();
    let scratch = tempfile::tempdir().unwrap();
    let m = manifest(
        scratch.path(),
        json!(["http"]),
        Some(allow(
            &server,
            json!({"timeout": "1s", "max_response_bytes": 1048576}),
        )),
        json!([{"url": server.url("/big")}, {"url": server.url("/slow")}]),
    );
    let started = Instant::now();
    let (seen, all, _) = run(scratch.path(), &m, &[]);
    assert_eq!(seen[0][0]["error"], "TooLarge", "{seen:?}");
    assert_eq!(seen[1][0]["error"], "Timeout", "{seen:?}");
    assert!(all.contains("over its size limit"), "{all}");
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn the_operator_allowlist_narrows_what_a_workflow_grants() {
    let server = Server::start();
    let scratch = tempfile::tempdir().unwrap();
    let m = manifest(
        scratch.path(),
        json!(["http"]),
        Some(allow(&server, json!({}))),
        json!([{"url": server.url("/echo")}]),
    );
    let (seen, all, _) = run(
        scratch.path(),
        &m,
        &[("WFHOST_HTTP_ALLOW", "api.example.com")],
    );
    assert_eq!(seen[0][0]["error"], "Denied", "{seen:?}");
    assert!(all.contains("operator's http_allow"), "{all}");
    assert!(server.seen().is_empty());
    let bad = command(scratch.path())
        .args([
            "run",
            m.to_str().unwrap(),
            "-w",
            workspace_in(scratch.path()).to_str().unwrap(),
        ])
        .env("WFHOST_HTTP_ALLOW", "https://x.com")
        .output()
        .unwrap();
    assert_ne!(bad.status.code(), Some(0));
    assert!(
        stderr(&bad).contains("WFHOST_HTTP_ALLOW"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn a_plugin_importing_wasi_http_without_the_grant_and_bad_grants_are_refused() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = workspace_in(scratch.path());
    let m = manifest(scratch.path(), json!([]), None, json!([]));
    let out = command(scratch.path())
        .args(["run", m.to_str().unwrap(), "-w", ws.to_str().unwrap()])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("wasi:http/outgoing-handler")
            && stderr(&out).contains("add \"http\""),
        "{}",
        stderr(&out)
    );
    let m = manifest(
        scratch.path(),
        json!(["http"]),
        Some(
            json!({"allow": [{"host": "https://api.example.com/v1"}, {"host": "ok.com", "methods": ["get"]}]}),
        ),
        json!([]),
    );
    let out = command(scratch.path())
        .args(["validate", m.to_str().unwrap()])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let err = stderr(&out) + &stdout(&out);
    for says in [
        "/plugins/probe/http/allow/0/host",
        "is not a host",
        "/plugins/probe/http/allow/1/methods/0",
    ] {
        assert!(err.contains(says), "missing `{says}`: {err}");
    }
    let m = manifest(scratch.path(), json!(["http"]), None, json!([]));
    let out = command(scratch.path())
        .args(["validate", m.to_str().unwrap()])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!((stderr(&out) + &stdout(&out)).contains("is granted `http` but no host"));
}

#[test]
fn plugin_call_grants_http_to_the_hosts_it_is_told() {
    let server = Server::start();
    let scratch = tempfile::tempdir().unwrap();
    let probe = wfhost_guest_artifacts::TEST_HTTP_PROBE_PATH;
    let config = json!({"requests": [{"url": server.url("/echo")}]}).to_string();
    let allow = format!("http://127.0.0.1:{}", server.port);
    let out = super::wfhost(
        &[
            "plugin",
            "call",
            probe,
            "--grant",
            "http",
            "--http-allow",
            &allow,
            "--block-config",
            &config,
            "--json",
        ],
        scratch.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(r#"\"status\":200"#),
        "{}",
        stdout(&out)
    );
    assert_eq!(server.seen().len(), 1);
    let out = super::wfhost(
        &[
            "plugin",
            "call",
            probe,
            "--grant",
            "http",
            "--block-config",
            &config,
        ],
        scratch.path(),
    );
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("is granted `http` but no host"),
        "{}",
        stderr(&out)
    );
    let out = super::wfhost(
        &[
            "plugin",
            "call",
            probe,
            "--grant",
            "http",
            "--http-allow",
            "https://x.com/v1",
        ],
        scratch.path(),
    );
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("--http-allow (/allow/0/host)"),
        "{}",
        stderr(&out)
    );
}
