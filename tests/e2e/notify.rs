//! Notifications: outgoing webhooks from a durable outbox, delivered by
//! `wfhost serve` to a real HTTP receiver — signed, retried with the same
//! delivery id after a failure, in the Slack format, shown by `show`, and
//! delivered after a SIGKILL of the server.

use super::serve::{await_status, http_post, serve_with};
use super::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One request the receiver got: its headers (lower-case names) and body.
#[derive(Debug, Clone)]
struct Received {
    headers: Vec<(String, String)>,
    body: String,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

/// An HTTP receiver on loopback that answers 500 to its first `failing`
/// requests, then 200; what it got.
struct Receiver {
    addr: String,
    got: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    fn start(failing: usize) -> Receiver {
        Receiver::on("127.0.0.1:0", failing)
    }

    fn on(addr: &str, failing: usize) -> Receiver {
        let listener = std::net::TcpListener::bind(addr).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let got: Arc<Mutex<Vec<Received>>> = Arc::default();
        let seen = Arc::clone(&got);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut headers = Vec::new();
                let mut line = String::new();
                reader.read_line(&mut line).unwrap_or(0);
                loop {
                    line.clear();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some((k, v)) = line.trim_end().split_once(':') {
                        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                    }
                }
                let length: usize = headers
                    .iter()
                    .find(|(k, _)| k == "content-length")
                    .and_then(|(_, v)| v.parse().ok())
                    .unwrap_or(0);
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                let n = {
                    let mut all = seen.lock().unwrap();
                    all.push(Received {
                        headers,
                        body: String::from_utf8_lossy(&body).into(),
                    });
                    all.len()
                };
                let status = if n <= failing {
                    "500 Internal Server Error"
                } else {
                    "200 OK"
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
            }
        });
        Receiver { addr, got }
    }

    /// Wait until `ok` holds of what it got (at most 30 s).
    fn wait(&self, ok: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let got = self.got.lock().unwrap().clone();
            if ok(&got) || Instant::now() > deadline {
                return got;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn a_gate_and_a_runs_end_are_notified_signed_and_retried_with_the_same_delivery_id() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let receiver = Receiver::start(1);
    set_secret(s, "NOTIFY_KEY", "shared notification secret");
    let url = format!("http://{}/hook", receiver.addr);
    let out = wfhost(
        &[
            "notify",
            "add",
            "ci",
            &url,
            "--secret",
            "NOTIFY_KEY",
            "--on",
            "gate.opened,run.succeeded",
        ],
        s,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let served = serve_with(s, &[]);
    let ws = workspace_in(s);
    let gate_flow = repo().join("examples/review-gate/workflow.json");
    let (status, started) = http_post(
        &served.addr,
        "/v1/runs",
        &json!({"workflow": gate_flow, "workspace": ws}),
    );
    assert_eq!(status, 202, "{started}");
    let run = started["run_id"].as_str().unwrap().to_string();
    await_status(&served.addr, &run, "waiting");
    // The first attempt is answered 500; the second, a second later, 200.
    let got = receiver.wait(|g| g.len() >= 2);
    assert_eq!(got.len(), 2, "{got:#?}");
    assert_eq!(
        got[0].header("x-wfhost-delivery"),
        got[1].header("x-wfhost-delivery")
    );
    let gate = got[1].json();
    assert_eq!(gate["event"], "gate.opened", "{gate:#}");
    assert_eq!(gate["run_id"], run.as_str());
    assert_eq!(gate["answer"], format!("wfhost gate {run} UD-1 approved"));
    assert_eq!(
        gate["dashboard_url"],
        format!("http://{}/#/runs/{run}", served.addr)
    );
    // Signed over its timestamp and body with the target's secret.
    let stamp = got[1].header("x-wfhost-timestamp").unwrap();
    let expected = wfhost_core::webhook::sign(
        b"shared notification secret",
        &[stamp.as_bytes(), b".", got[1].body.as_bytes()],
    );
    assert_eq!(got[1].header("x-wfhost-signature"), Some(expected.as_str()));
    assert_eq!(got[1].header("x-wfhost-event"), Some("gate.opened"));

    let (status, _) = http_post(
        &served.addr,
        &format!("/v1/runs/{run}/gates/UD-1"),
        &json!({"answer": "approved"}),
    );
    assert_eq!(status, 202);
    await_status(&served.addr, &run, "succeeded");
    let got = receiver.wait(|g| g.len() >= 3);
    assert_eq!(got[2].json()["event"], "run.succeeded", "{got:#?}");
    let shown = stdout(&wfhost(&["show", &run], s));
    assert!(
        shown.contains("notified    gate.opened to ci: delivered after 2 attempt(s)")
            && shown.contains("notified    run.succeeded to ci: delivered after 1 attempt(s)"),
        "{shown}"
    );
    let detail: Value =
        serde_json::from_slice(&wfhost(&["show", &run, "--json"], s).stdout).unwrap();
    assert_eq!(
        detail["notifications"].as_array().unwrap().len(),
        2,
        "{detail:#}"
    );
}

#[test]
fn a_notification_in_the_outbox_is_delivered_after_a_sigkill_of_serve() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    // A port nobody listens on yet: the receiver comes up later there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/in");
    let out = wfhost(
        &[
            "notify",
            "add",
            "ops",
            &url,
            "--format",
            "slack",
            "--on",
            "run.failed",
        ],
        s,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A run that fails under `wfhost run`: its notification is in the
    // outbox with the run's end, before any server runs.
    let failing = s.join("failing.json");
    std::fs::write(
        &failing,
        json!({"id": "failing", "start_node": "main",
        "plugins": {"exec": {"grants": ["exec"]}},
        "nodes": {"main": {"entry_block": "fail", "blocks": {"fail": {
            "worker": "exec", "config": {"commands": [{"argv": ["false"]}]},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]}}}}})
        .to_string(),
    )
    .unwrap();
    let ws = workspace_in(s);
    let (code, report) = run_report(&failing, &ws, s);
    assert_eq!(code, Some(1), "{report:#}");
    let run = report["run_id"].as_str().unwrap().to_string();
    let outbox = |s: &Path| -> Value {
        let d: Value =
            serde_json::from_slice(&wfhost(&["show", &run, "--json"], s).stdout).unwrap();
        d["notifications"][0].clone()
    };
    let queued = outbox(s);
    assert_eq!(
        (&queued["state"], &queued["event"]),
        (&json!("pending"), &json!("run.failed")),
        "{queued:#}"
    );
    // A server tries (refused: nothing listens), and is killed outright.
    let mut served = serve_with(s, &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while outbox(s)["attempts"].as_u64().unwrap_or(0) < 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    served.child.kill().unwrap();
    served.child.wait().unwrap();
    assert_eq!(outbox(s)["state"], "pending");
    // The receiver comes up; a new server delivers it, with its id.
    let receiver = Receiver::on(&format!("127.0.0.1:{port}"), 0);
    let _served = serve_with(s, &[]);
    let got = receiver.wait(|g| !g.is_empty());
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(
        got[0].header("x-wfhost-delivery"),
        queued["delivery"].as_str()
    );
    let text = got[0].json()["text"].as_str().unwrap().to_string();
    assert!(
        text.contains(&format!("Run {run} of failing failed")),
        "{text}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while outbox(s)["state"] != "delivered" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(outbox(s)["state"], "delivered");
}

#[test]
fn a_target_is_checked_when_it_is_added() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    for (args, says) in [
        (
            vec!["notify", "add", "x", "ftp://example.com"],
            "not an http or https URL",
        ),
        (
            vec!["notify", "add", "x", "http://h", "--on", "run.exploded"],
            "not an event",
        ),
        (
            vec!["notify", "add", "x", "http://h", "--format", "teams"],
            "not a format",
        ),
        (
            vec!["notify", "add", "x y", "http://h"],
            "not a target name",
        ),
    ] {
        let out = wfhost(&args, s);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    assert_eq!(
        wfhost(&["notify", "add", "x", "http://h"], s).status.code(),
        Some(0)
    );
    assert_eq!(
        wfhost(&["notify", "add", "x", "http://h"], s).status.code(),
        Some(2),
        "names are unique"
    );
    let listed: Value =
        serde_json::from_slice(&wfhost(&["notify", "ls", "--json"], s).stdout).unwrap();
    assert_eq!(listed["targets"][0]["events"].as_array().unwrap().len(), 5);
    assert_eq!(wfhost(&["notify", "rm", "x"], s).status.code(), Some(0));
    assert_eq!(wfhost(&["notify", "rm", "x"], s).status.code(), Some(2));
}
