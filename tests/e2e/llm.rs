//! The built-in `llm` worker through `wfhost run`, against a scripted
//! model server on loopback that speaks OpenAI's chat completions and
//! Anthropic's messages, whole or streamed: the key reaches the server
//! only (filled in by the host), the answer goes through the engine's
//! cleaning and validation (with the retry loop), and the usage is summed
//! per run.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::http::{Reply, Server};
use super::{command, stderr, stdout, workspace_in};

const KEY: &str = "sk-model-3b9e2d7a41";

/// A model server answering `answers` in turn (the last one again when
/// they run out), with `input`/`output` tokens each; a wrong key gets 401.
fn model_server(answers: &[&str], input: u64, output: u64) -> Server {
    let queue: Arc<Mutex<VecDeque<String>>> =
        Arc::new(Mutex::new(answers.iter().map(|a| a.to_string()).collect()));
    Server::start_with(Arc::new(move |request: &Value, _| {
        let body: Value =
            serde_json::from_str(request["body"].as_str().unwrap()).unwrap_or_default();
        let anthropic = request["path"] == "/v1/messages";
        let key = if anthropic {
            request["headers"]["x-api-key"]
                .as_str()
                .unwrap_or("")
                .to_string()
        } else {
            request["headers"]["authorization"]
                .as_str()
                .unwrap_or("")
                .replace("Bearer ", "")
        };
        if key != KEY {
            return Reply::new(
                "401 Unauthorized",
                r#"{"error":{"message":"invalid api key"}}"#,
            );
        }
        let busy = queue
            .lock()
            .unwrap()
            .front()
            .is_some_and(|a| a == "HTTP 503");
        if busy {
            queue.lock().unwrap().pop_front();
            return Reply::new(
                "503 Service Unavailable",
                r#"{"error":{"message":"overloaded"}}"#,
            );
        }
        if false {
            return Reply::new(
                "401 Unauthorized",
                r#"{"error":{"message":"invalid api key"}}"#,
            );
        }
        let answer = {
            let mut q = queue.lock().unwrap();
            if q.len() > 1 {
                q.pop_front().unwrap()
            } else {
                q.front().cloned().unwrap()
            }
        };
        let stream = body["stream"] == true;
        let text = match (anthropic, stream) {
            (false, false) => {
                json!({"choices": [{"message": {"role": "assistant", "content": answer}}],
                "usage": {"prompt_tokens": input, "completion_tokens": output}})
                .to_string()
            }
            (true, false) => json!({"content": [{"type": "text", "text": answer}],
                "usage": {"input_tokens": input, "output_tokens": output}})
            .to_string(),
            (false, true) => openai_stream(&answer, input, output),
            (true, true) => anthropic_stream(&answer, input, output),
        };
        let mut reply = Reply::new("200 OK", text);
        if stream {
            reply.headers = "content-type: text/event-stream\r\n".into();
        }
        reply
    }))
}

/// Halves of a text, as a stream sends it in pieces.
fn pieces(text: &str) -> [&str; 2] {
    let mut mid = text.len() / 2;
    while !text.is_char_boundary(mid) {
        mid += 1;
    }
    [&text[..mid], &text[mid..]]
}

fn openai_stream(answer: &str, input: u64, output: u64) -> String {
    let mut out = String::new();
    for piece in pieces(answer) {
        let chunk = json!({"choices": [{"delta": {"content": piece}}]});
        out.push_str(&format!("data: {chunk}\n\n"));
    }
    let usage =
        json!({"choices": [], "usage": {"prompt_tokens": input, "completion_tokens": output}});
    out.push_str(&format!("data: {usage}\n\ndata: [DONE]\n\n"));
    out
}

fn anthropic_stream(answer: &str, input: u64, output: u64) -> String {
    let mut events = vec![
        json!({"type": "message_start", "message": {"usage": {"input_tokens": input, "output_tokens": 1}}}),
    ];
    for piece in pieces(answer) {
        events.push(
            json!({"type": "content_block_delta", "delta": {"type": "text_delta", "text": piece}}),
        );
    }
    events.push(json!({"type": "message_delta", "usage": {"output_tokens": output}}));
    events.push(json!({"type": "message_stop"}));
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

/// A workflow of `blocks` (`ask`, then the next…) of the `llm` worker
/// with `config`, each validated against `schema`, allowed to reach
/// `server` with the key.
fn manifest(dir: &Path, server: &Server, config: Value, blocks: &[&str], attempts: u32) -> PathBuf {
    manifest_with(dir, server, config, blocks, attempts, json!({}))
}

/// [`manifest`], each block also with the fields of `extra`.
fn manifest_with(
    dir: &Path,
    server: &Server,
    config: Value,
    blocks: &[&str],
    attempts: u32,
    extra: Value,
) -> PathBuf {
    let mut nodes = serde_json::Map::new();
    for (i, id) in blocks.iter().enumerate() {
        let next = blocks
            .get(i + 1)
            .map_or("END".to_string(), |n| format!("JUMP:{n}"));
        let mut block = json!({
            "worker": "llm", "config": config, "max_attempts": attempts,
            "prompt": {"task": "Judge the change. Answer with JSON {\"verdict\": ...}."},
            "validation_schema": {"type": "object", "required": ["verdict"],
                "properties": {"verdict": {"enum": ["ok", "bad"]}}},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": next},
                            {"on_signal": "SIGNAL:VALIDATION_FAIL", "action": format!("JUMP:{id}")}]
        });
        for (k, v) in extra.as_object().unwrap() {
            block[k] = v.clone();
        }
        nodes.insert(id.to_string(), block);
    }
    let wf = json!({
        "id": "llm-test", "start_node": "main",
        "plugins": {"llm": {"grants": ["http"], "http": {"allow": [
            {"host": format!("127.0.0.1:{}", server.port), "scheme": "http",
             "methods": ["POST"], "secrets": ["MODEL_KEY"]}]}}},
        "nodes": {"main": {"entry_block": blocks[0], "blocks": nodes}}
    });
    let path = dir.join("llm.json");
    std::fs::write(&path, serde_json::to_string_pretty(&wf).unwrap()).unwrap();
    path
}

/// `wfhost run --json`: exit code, report, and everything printed.
fn run(scratch: &Path, manifest: &Path) -> (Option<i32>, Value, String) {
    let ws = workspace_in(scratch);
    let out = command(scratch)
        .args([
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    let all = format!("{}{}", stdout(&out), stderr(&out));
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{all}"));
    (out.status.code(), report, all)
}

fn segments(report: &Value, kind: &str) -> Vec<String> {
    report["payload"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["type"] == kind)
        .map(|s| s["content"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_structured_answer_is_validated_and_its_usage_summed_over_the_run() {
    let server = model_server(&[r#"{"verdict": "ok"}"#], 120, 30);
    let scratch = tempfile::tempdir().unwrap();
    super::set_secret(scratch.path(), "MODEL_KEY", KEY);
    let config = json!({"api": "openai", "model": "test-model",
        "endpoint": server.url("/v1/chat/completions"), "api_key_secret": "MODEL_KEY"});
    let m = manifest(scratch.path(), &server, config, &["ask", "again"], 1);
    let (code, report, all) = run(scratch.path(), &m);
    assert_eq!(code, Some(0), "{all}");
    assert_eq!(
        segments(&report, "VALIDATED_OUTPUT"),
        [r#"{"verdict":"ok"}"#; 2]
    );
    // Two blocks of 150 tokens each.
    assert_eq!(report["statistics"]["tokens_used"], 300, "{report:#}");
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0]["headers"]["authorization"], format!("Bearer {KEY}"));
    let body: Value = serde_json::from_str(seen[0]["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["model"], "test-model");
    let prompt = body["messages"].to_string();
    assert!(prompt.contains("Judge the change"), "{prompt}");
    assert!(!all.contains(KEY), "{all}");
}

#[test]
fn a_streamed_anthropic_answer_in_fences_is_cleaned_and_validated() {
    let answer = "Here is my judgement:\n```json\n{\"verdict\": \"bad\"}\n```\nThanks!";
    let server = model_server(&[answer], 40, 9);
    let scratch = tempfile::tempdir().unwrap();
    super::set_secret(scratch.path(), "MODEL_KEY", KEY);
    let config = json!({"api": "anthropic", "model": "claude-test", "stream": true,
        "endpoint": server.url("/v1/messages"), "api_key_secret": "MODEL_KEY", "max_tokens": 256});
    let m = manifest(scratch.path(), &server, config, &["ask"], 1);
    let (code, report, all) = run(scratch.path(), &m);
    assert_eq!(code, Some(0), "{all}");
    assert_eq!(
        segments(&report, "VALIDATED_OUTPUT"),
        [r#"{"verdict":"bad"}"#]
    );
    assert_eq!(segments(&report, "AI_RESPONSE"), [answer]);
    assert_eq!(report["statistics"]["tokens_used"], 49);
    let seen = server.seen();
    assert_eq!(seen[0]["headers"]["x-api-key"], KEY);
    assert_eq!(seen[0]["headers"]["anthropic-version"], "2023-06-01");
}

#[test]
fn an_invalid_answer_is_retried_with_the_error_then_fails_validation() {
    let server = model_server(&["I think it is fine.", r#"{"verdict": "maybe"}"#], 10, 5);
    let scratch = tempfile::tempdir().unwrap();
    super::set_secret(scratch.path(), "MODEL_KEY", KEY);
    let config = json!({"api": "openai", "model": "m", "stream": true,
        "endpoint": server.url("/v1/chat/completions"), "api_key_secret": "MODEL_KEY"});
    let m = manifest(scratch.path(), &server, config, &["ask"], 2);
    let (code, report, all) = run(scratch.path(), &m);
    assert_ne!(code, Some(0), "{all}");
    let seen = server.seen();
    assert_eq!(seen.len(), 2, "one retry: {seen:?}");
    // The retry's prompt carries why the first answer was refused.
    assert!(
        seen[1]["body"]
            .as_str()
            .unwrap()
            .contains("VALIDATION_ERROR"),
        "{}",
        seen[1]["body"]
    );
    assert_eq!(segments(&report, "VALIDATION_ERROR").len(), 2, "{report:#}");
    let run_id = report["run_id"].as_str().unwrap();
    let events = super::run_events(scratch.path(), run_id);
    let signals: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "block_completed")
        .filter_map(|e| e["signal"].as_str())
        .collect();
    assert_eq!(signals, ["SIGNAL:VALIDATION_FAIL"; 2], "{events:#?}");
    assert_eq!(report["statistics"]["tokens_used"], 30);
}

#[test]
fn a_wrong_key_and_a_missing_grant_fail_the_block_for_good() {
    let server = model_server(&["{}"], 1, 1);
    let scratch = tempfile::tempdir().unwrap();
    super::set_secret(scratch.path(), "MODEL_KEY", "sk-wrong-key-0000");
    let config = json!({"api": "openai", "model": "m",
        "endpoint": server.url("/v1/chat/completions"), "api_key_secret": "MODEL_KEY"});
    let retry = json!({"retry": {"max_attempts": 3, "initial": "100ms"}});
    let m = manifest_with(scratch.path(), &server, config.clone(), &["ask"], 3, retry);
    let (code, _, all) = run(scratch.path(), &m);
    assert_ne!(code, Some(0));
    assert!(all.contains("401: invalid api key"), "{all}");
    assert_eq!(
        server.seen().len(),
        1,
        "a 401 is not retried by the retry policy"
    );
    assert!(!all.contains("sk-wrong-key-0000"), "{all}");
    // The endpoint's host is not allowed: refused, and the log says why.
    let other =
        json!({"endpoint": format!("http://localhost:{}/v1/chat/completions", server.port)});
    let mut config = config;
    config["endpoint"] = other["endpoint"].clone();
    let m = manifest(scratch.path(), &server, config, &["ask"], 1);
    let (code, report, all) = run(scratch.path(), &m);
    assert_ne!(code, Some(0));
    assert!(
        all.contains("bad-config: the host refused the request"),
        "{all}"
    );
    let logs = super::wfhost(
        &["logs", report["run_id"].as_str().unwrap()],
        scratch.path(),
    );
    let logs = stdout(&logs);
    assert!(
        logs.contains("host `localhost` is not in plugins.llm.http.allow"),
        "{logs}"
    );
    assert_eq!(server.seen().len(), 1);
}

#[test]
fn an_overloaded_server_is_retried_by_the_blocks_retry_policy() {
    let server = model_server(&["HTTP 503", r#"{"verdict": "ok"}"#], 8, 2);
    let scratch = tempfile::tempdir().unwrap();
    super::set_secret(scratch.path(), "MODEL_KEY", KEY);
    let config = json!({"api": "openai", "model": "m",
        "endpoint": server.url("/v1/chat/completions"), "api_key_secret": "MODEL_KEY"});
    let retry = json!({"retry": {"max_attempts": 3, "initial": "100ms"}});
    let m = manifest_with(scratch.path(), &server, config, &["ask"], 3, retry);
    let (code, report, all) = run(scratch.path(), &m);
    assert_eq!(code, Some(0), "{all}");
    assert_eq!(server.seen().len(), 2);
    assert_eq!(
        segments(&report, "VALIDATED_OUTPUT"),
        [r#"{"verdict":"ok"}"#]
    );
}
