//! Webhook triggers: `wfhost hook` and deliveries to `POST
//! /v1/hooks/NAME` on a real `wfhost serve` — a GitHub-signed delivery
//! starts a run with inputs from its payload; a bad signature, a stale
//! timestamp, a replayed delivery id and inputs the workflow refuses start
//! nothing.

use super::serve::{check_against_spec, http_get, serve_with};
use super::*;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;

const SECRET: &str = "hook secret, not in any log";

/// `POST /v1/hooks/NAME` with `headers` and `body`, as a sender sends it.
fn deliver(addr: &str, name: &str, headers: &[(&str, String)], body: &[u8]) -> (u16, Value) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let mut head = format!(
        "POST /v1/hooks/{name} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(b"\r\n").unwrap();
    s.write_all(body).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let status: u16 = raw[9..12].parse().unwrap();
    let body: Value =
        serde_json::from_str(raw.split_once("\r\n\r\n").unwrap().1).unwrap_or_default();
    check_against_spec("POST", &format!("/v1/hooks/{name}"), status, &body);
    (status, body)
}

fn github(body: &[u8], delivery: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "X-Hub-Signature-256",
            wfhost_core::webhook::sign(SECRET.as_bytes(), &[body]),
        ),
        ("X-GitHub-Delivery", delivery.to_string()),
        ("X-GitHub-Event", "release".to_string()),
    ]
}

fn run_count(s: &Path) -> usize {
    let runs: Value =
        serde_json::from_slice(&wfhost(&["runs", "--json"], s).stdout).unwrap_or_default();
    runs.as_array().map_or(0, Vec::len)
}

fn inputs_workflow() -> String {
    repo()
        .join("examples/inputs/workflow.json")
        .display()
        .to_string()
}

#[test]
fn a_github_delivery_starts_a_run_with_its_payload_as_inputs_and_nothing_else_does() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    set_secret(s, "GITHUB_HOOK", SECRET);
    let ws = s.join("ws-{run}").display().to_string();
    let out = wfhost(
        &[
            "hook",
            "add",
            "release",
            &inputs_workflow(),
            "--secret",
            "GITHUB_HOOK",
            "--map",
            "project=/repository/name",
            "--map",
            "version=/release/tag_name",
            "--set",
            "audience=developers",
            "-w",
            &ws,
        ],
        s,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let served = serve_with(s, &[]);
    let body = serde_json::to_vec(&json!({"action": "published", "release": {"tag_name": "1.4.0"}, "repository": {"name": "wfhost"}})).unwrap();
    let (status, started) = deliver(&served.addr, "release", &github(&body, "d-1"), &body);
    assert_eq!(status, 202, "{started}");
    let run = started["run_id"].as_str().unwrap().to_string();
    super::serve::await_status(&served.addr, &run, "succeeded");
    let (_, detail) = http_get(&served.addr, &format!("/v1/runs/{run}"));
    assert_eq!(
        detail["inputs"],
        json!({"project": "wfhost", "version": "1.4.0", "audience": "developers", "highlights": []}),
        "{detail:#}"
    );
    let runs = run_count(s);
    // A replay of the same delivery starts nothing.
    let (status, replay) = deliver(&served.addr, "release", &github(&body, "d-1"), &body);
    assert_eq!(
        (status, &replay["code"]),
        (409, &json!("duplicate_delivery")),
        "{replay}"
    );
    assert_eq!(replay["details"]["run_id"], run.as_str());
    // A body changed after signing, a wrong secret, no signature.
    let forged =
        serde_json::to_vec(&json!({"release": {"tag_name": "9.9.9"}, "repository": {"name": "x"}}))
            .unwrap();
    let (status, bad) = deliver(&served.addr, "release", &github(&body, "d-2"), &forged);
    assert_eq!(
        (status, &bad["code"]),
        (401, &json!("bad_signature")),
        "{bad}"
    );
    let other = vec![
        (
            "X-Hub-Signature-256",
            wfhost_core::webhook::sign(b"guess", &[&body]),
        ),
        ("X-GitHub-Delivery", "d-3".to_string()),
    ];
    assert_eq!(deliver(&served.addr, "release", &other, &body).0, 401);
    let none = vec![("X-GitHub-Delivery", "d-4".to_string())];
    assert_eq!(deliver(&served.addr, "release", &none, &body).0, 401);
    // Inputs the workflow refuses: 422 naming the input.
    let wrong = serde_json::to_vec(
        &json!({"release": {"tag_name": "v1"}, "repository": {"name": "wfhost"}}),
    )
    .unwrap();
    let (status, refused) = deliver(&served.addr, "release", &github(&wrong, "d-5"), &wrong);
    assert_eq!(
        (status, &refused["code"]),
        (422, &json!("invalid_inputs")),
        "{refused}"
    );
    assert_eq!(
        refused["details"]["pointer"], "/inputs/version",
        "{refused}"
    );
    let missing = serde_json::to_vec(&json!({"repository": {"name": "wfhost"}})).unwrap();
    let (status, refused) = deliver(&served.addr, "release", &github(&missing, "d-6"), &missing);
    assert_eq!(status, 422, "{refused}");
    // A refused delivery's id stays free: signed again, properly, it starts.
    let (status, _) = deliver(&served.addr, "release", &github(&body, "d-5"), &body);
    assert_eq!(status, 202);
    assert_eq!(
        run_count(s),
        runs + 1,
        "only the accepted deliveries started runs"
    );
    // No such hook; not JSON.
    assert_eq!(
        deliver(&served.addr, "nope", &github(&body, "x"), &body).0,
        404
    );
    let text = b"not json";
    assert_eq!(
        deliver(&served.addr, "release", &github(text, "d-7"), text).0,
        400
    );
    let shown: Value =
        serde_json::from_slice(&wfhost(&["hook", "show", "release", "--json"], s).stdout).unwrap();
    assert_eq!(
        shown["deliveries"].as_array().unwrap().len(),
        2,
        "{shown:#}"
    );
    // The secret is in no log and no answer.
    let db = std::fs::read(s.join("home").join("wfhost.db")).unwrap();
    assert!(!db.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()));
}

#[test]
fn a_timestamped_delivery_is_refused_outside_the_hooks_window() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    set_secret(s, "CI_HOOK", SECRET);
    let ws = s.join("ws-{run}").display().to_string();
    let hello = repo()
        .join("examples/hello/workflow.json")
        .display()
        .to_string();
    let out = wfhost(
        &[
            "hook", "add", "ci", &hello, "--format", "sha256", "--secret", "CI_HOOK", "--window",
            "60", "-w", &ws,
        ],
        s,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let served = serve_with(s, &[]);
    let body = br#"{"commit": "abc"}"#;
    let signed = |at: i64, id: &str| {
        let stamp = at.to_string();
        vec![
            (
                "X-Wfhost-Signature",
                wfhost_core::webhook::sign(SECRET.as_bytes(), &[stamp.as_bytes(), b".", body]),
            ),
            ("X-Wfhost-Timestamp", stamp),
            ("X-Wfhost-Delivery", id.to_string()),
        ]
    };
    let now = wfhost_core::time::now_ms() / 1000;
    let (status, stale) = deliver(&served.addr, "ci", &signed(now - 120, "c-1"), body);
    assert_eq!((status, &stale["code"]), (401, &json!("stale")), "{stale}");
    let (status, ok) = deliver(&served.addr, "ci", &signed(now, "c-1"), body);
    assert_eq!(status, 202, "{ok}");
    assert_eq!(
        deliver(&served.addr, "ci", &signed(now, "c-1"), body).0,
        409
    );
}

#[test]
fn a_hook_needs_a_secret_unless_it_is_added_unsigned_and_a_delivery_needs_no_token() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let hello = repo()
        .join("examples/hello/workflow.json")
        .display()
        .to_string();
    for (args, says) in [
        (
            vec!["hook", "add", "h", hello.as_str()],
            "needs --secret NAME",
        ),
        (
            vec![
                "hook",
                "add",
                "h",
                hello.as_str(),
                "--format",
                "unsigned",
                "--secret",
                "X",
            ],
            "an unsigned hook checks no signature",
        ),
        (
            vec![
                "hook",
                "add",
                "h",
                hello.as_str(),
                "--format",
                "md5",
                "--secret",
                "X",
            ],
            "not a hook format",
        ),
        (
            vec!["hook", "add", "h h", hello.as_str(), "--secret", "X"],
            "not a hook name",
        ),
        (
            vec![
                "hook",
                "add",
                "h",
                hello.as_str(),
                "--secret",
                "X",
                "--map",
                "a=ref",
            ],
            "not a JSON pointer",
        ),
        (
            vec!["hook", "add", "h", "/nonexistent.json", "--secret", "X"],
            "workflow",
        ),
    ] {
        let out = wfhost(&args, s);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    let ws = s.join("ws").display().to_string();
    std::fs::create_dir_all(&ws).unwrap();
    let out = wfhost(
        &[
            "hook", "add", "open", &hello, "--format", "unsigned", "-w", &ws,
        ],
        s,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A server with tokens: the hook list wants one, a delivery does not.
    let tokens = s.join("tokens.json");
    let token = "c".repeat(40);
    std::fs::write(
        &tokens,
        format!(r#"{{"clients": ["{token}"], "agents": []}}"#),
    )
    .unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let served = serve_with(
        s,
        &[
            "--auth-token-file",
            tokens.to_str().unwrap(),
            "--local-agents",
            "0",
        ],
    );
    let (status, _) = http_get(&served.addr, "/v1/hooks");
    assert_eq!(status, 401);
    let (status, started) = deliver(&served.addr, "open", &[], b"{}");
    assert_eq!(status, 202, "{started}");
    assert!(started["run_id"].as_str().is_some());
}

#[test]
fn a_hook_that_answers_gates_answers_the_one_its_delivery_names() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    set_secret(s, "CHATOPS", SECRET);
    let out = wfhost(
        &[
            "hook",
            "add",
            "approve",
            "--answers-gates",
            "--secret",
            "CHATOPS",
        ],
        s,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let hello = repo()
        .join("examples/hello/workflow.json")
        .display()
        .to_string();
    let out = wfhost(
        &[
            "hook",
            "add",
            "bad",
            &hello,
            "--answers-gates",
            "--secret",
            "CHATOPS",
        ],
        s,
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "a hook that answers starts nothing"
    );
    let served = serve_with(s, &[]);
    let ws = workspace_in(s);
    let gate_flow = repo().join("examples/review-gate/workflow.json");
    let (status, started) = super::serve::http_post(
        &served.addr,
        "/v1/runs",
        &json!({"workflow": gate_flow, "workspace": ws}),
    );
    assert_eq!(status, 202, "{started}");
    let run = started["run_id"].as_str().unwrap().to_string();
    super::serve::await_status(&served.addr, &run, "waiting");
    // No gate named: 422, nothing answered; a gate the run does not wait
    // at: 409.
    let partial = serde_json::to_vec(&json!({"run_id": run, "answer": "approved"})).unwrap();
    let (status, refused) = deliver(&served.addr, "approve", &github(&partial, "a-1"), &partial);
    assert_eq!(
        (status, &refused["details"]["pointer"]),
        (422, &json!("/gate")),
        "{refused}"
    );
    let elsewhere =
        serde_json::to_vec(&json!({"run_id": run, "gate": "UD-9", "answer": "approved"})).unwrap();
    let (status, refused) = deliver(
        &served.addr,
        "approve",
        &github(&elsewhere, "a-2"),
        &elsewhere,
    );
    assert_eq!(
        (status, &refused["code"]),
        (409, &json!("not_waiting")),
        "{refused}"
    );
    let body =
        serde_json::to_vec(&json!({"run_id": run, "gate": "UD-1", "answer": "approved"})).unwrap();
    let (status, answered) = deliver(&served.addr, "approve", &github(&body, "a-3"), &body);
    assert_eq!(status, 202, "{answered}");
    assert_eq!(
        (&answered["gate"], &answered["hook"]),
        (&json!("UD-1"), &json!("approve"))
    );
    super::serve::await_status(&served.addr, &run, "succeeded");
    assert_eq!(
        deliver(&served.addr, "approve", &github(&body, "a-3"), &body).0,
        409
    );
}
