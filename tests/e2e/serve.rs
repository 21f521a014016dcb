//! `wfhost serve`: the API over the same store `wfhost run` writes.

use super::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;

/// A running `wfhost serve` on a free loopback port, stopped on drop.
struct Served {
    child: std::process::Child,
    addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(scratch: &Path) -> Served {
    let mut child = command(scratch)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    // `wfhost: serving http://127.0.0.1:PORT/v1 (store in …)`
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    Served { child, addr }
}

fn http_get(addr: &str, path: &str) -> (u16, serde_json::Value) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let status = raw[9..12].parse().unwrap();
    let body = raw.split_once("\r\n\r\n").unwrap().1;
    (status, serde_json::from_str(body).unwrap_or_default())
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
