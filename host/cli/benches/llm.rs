//! The `llm` worker end to end through `wfhost run`, as whole processes:
//! a chain of 1, 10 and 100 `llm` blocks (10× and 100× the blocks a test
//! runs) against a model server on loopback that answers at once, so the
//! figures are wfhost's own cost per model call — the sandboxed worker,
//! the host's allowlist check, placeholder filling and masking, a new
//! connection per request, the answer's validation and its events. Side
//! by side: the same chain with the `scripted` worker (no HTTP: what the
//! capability adds), and the calls a user would otherwise make from
//! Python with the `openai` package (one process, a kept-alive
//! connection, no durability), when it is installed (`pip install openai`).
//!
//! `cargo bench -p wfhost --bench llm` — figures in docs/dev/benchmarks.md.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const ANSWER: &str = r#"{"verdict": "ok"}"#;

/// A chat-completions server answering every request at once, keeping
/// connections alive.
fn model_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(stream));
        }
    });
    port
}

fn serve(stream: TcpStream) {
    // One write per answer and no Nagle: a kept-alive client must not wait
    // on a delayed ACK.
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let answer = serde_json::json!({
            "id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": ANSWER}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        })
        .to_string();
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        );
        if out.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

fn manifest(dir: &Path, worker: &str, blocks: usize, port: u16) -> PathBuf {
    let config = match worker {
        "llm" => serde_json::json!({"api": "openai", "model": "m", "api_key_secret": "BENCH_KEY",
            "endpoint": format!("http://127.0.0.1:{port}/v1/chat/completions")}),
        _ => serde_json::json!({"responses": [ANSWER]}),
    };
    let mut nodes = serde_json::Map::new();
    for i in 0..blocks {
        let next = if i + 1 == blocks {
            "END".to_string()
        } else {
            format!("JUMP:b{}", i + 1)
        };
        nodes.insert(
            format!("b{i}"),
            serde_json::json!({"worker": worker, "config": config,
                "validation_schema": {"type": "object", "required": ["verdict"]},
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": next}]}),
        );
    }
    let wf = serde_json::json!({
        "id": "llm-bench", "start_node": "n",
        "plugins": {"llm": {"grants": ["http"], "http": {"allow": [
            {"host": format!("127.0.0.1:{port}"), "scheme": "http", "secrets": ["BENCH_KEY"]}]}}},
        "nodes": {"n": {"entry_block": "b0", "blocks": nodes}}
    });
    let path = dir.join(format!("{worker}-{blocks}.json"));
    std::fs::write(&path, wf.to_string()).unwrap();
    path
}

/// The median of three runs.
fn median(mut f: impl FnMut() -> Duration) -> Duration {
    let mut runs = [f(), f(), f()];
    runs.sort();
    runs[1]
}

fn wfhost_run(scratch: &Path, manifest: &Path) -> Duration {
    let ws = scratch.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_wfhost"))
        .args([
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
            "-q",
        ])
        .env("WFHOST_HOME", scratch.join("home"))
        .env("WFHOST_CACHE_DIR", scratch.join("cache"))
        .env("BENCH_KEY", "sk-bench")
        .output()
        .unwrap();
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

const OPENAI_LOOP: &str = r#"
import sys, time
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1], api_key="sk-bench")
for _ in range(int(sys.argv[2])):
    r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "judge"}])
    assert r.choices[0].message.content
"#;

fn python_openai(port: u16, calls: usize) -> Option<Duration> {
    let has = Command::new("python3")
        .args(["-c", "import openai"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has {
        return None;
    }
    let started = Instant::now();
    let out = Command::new("python3")
        .args(["-c", OPENAI_LOOP])
        .arg(format!("http://127.0.0.1:{port}/v1"))
        .arg(calls.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(started.elapsed())
}

fn main() {
    let port = model_server();
    let scratch = tempfile::tempdir().unwrap();
    println!("| worker | blocks | wall (median of 3) | per block (after the first) |");
    println!("|---|---|---|---|");
    for worker in ["llm", "scripted"] {
        let first = manifest(scratch.path(), worker, 1, port);
        // Compile the plugin once, outside the measurement.
        wfhost_run(scratch.path(), &first);
        let one = median(|| wfhost_run(scratch.path(), &first));
        println!("| {worker} | 1 | {:.0} ms | |", one.as_secs_f64() * 1e3);
        for n in [10, 100] {
            let chain = manifest(scratch.path(), worker, n, port);
            let wall = median(|| wfhost_run(scratch.path(), &chain));
            let per = (wall.saturating_sub(one)).as_secs_f64() * 1e3 / (n - 1) as f64;
            println!(
                "| {worker} | {n} | {:.0} ms | {per:.2} ms |",
                wall.as_secs_f64() * 1e3
            );
        }
    }
    match python_openai(port, 1).map(|_| median(|| python_openai(port, 1).unwrap())) {
        None => println!("\npython3 with `openai` not installed: `pip install openai` to compare"),
        Some(one) => {
            println!(
                "| python openai (no durability) | 1 | {:.0} ms | |",
                one.as_secs_f64() * 1e3
            );
            for n in [10, 100] {
                let wall = median(|| python_openai(port, n).unwrap());
                let per = (wall.saturating_sub(one)).as_secs_f64() * 1e3 / (n - 1) as f64;
                println!(
                    "| python openai (no durability) | {n} | {:.0} ms | {per:.2} ms |",
                    wall.as_secs_f64() * 1e3
                );
            }
        }
    }
}
