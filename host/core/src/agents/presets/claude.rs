//! Claude Code (`claude`, npm `@anthropic-ai/claude-code`) in print mode.
//!
//! Output: `--output-format stream-json --verbose`, one event a line:
//! `system` (`init`: `session_id`, `model`), `assistant` (a `message` with
//! its `id`, `model`, `content` — text and `tool_use` blocks — and its
//! `usage`, repeated on each of the message's lines), `user` (tool
//! results), then `result` (`is_error`, `result`, the run's `usage`,
//! `total_cost_usd`, `session_id`, `modelUsage`, `permission_denials`).
//! `--output-format json` prints that last object alone, which reads the
//! same.

use serde_json::{Map, Value};

use super::result::{Counts, Final, Seen, bounded, cost, count, object, text};
use super::{Block, Delivery, Invocation, OUTPUT_GLOB};

pub(super) const PASSTHROUGH: &[&str] = &[
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_MODEL",
];

pub(super) fn build(block: &Block) -> Invocation {
    let mut argv: Vec<String> = [
        "claude",
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
    ]
    .map(String::from)
    .to_vec();
    if let Some(model) = block.model {
        argv.extend(["--model".into(), model.into()]);
    }
    if let Some(session) = block.resume {
        argv.extend(["--resume".into(), session.into()]);
    }
    argv.extend(permissions(block.restrictions));
    Invocation {
        argv,
        delivery: Delivery::Stdin,
        env: vec![(
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
            "1".into(),
        )],
        files: Vec::new(),
    }
}

/// Unrestricted, file edits are accepted; restricted, only `Write` and
/// `Edit` of the restriction globs (and `.output/`) and `Bash` are
/// allowed, so the CLI refuses any other write of its own tools
/// (`permission_denials`). `acceptEdits` would accept edits anywhere in the
/// working directory, whatever `--allowedTools` says. What the shell does
/// is the host's to check (the snapshot).
fn permissions(restrictions: Option<&[String]>) -> Vec<String> {
    let Some(globs) = restrictions else {
        return vec!["--permission-mode".into(), "acceptEdits".into()];
    };
    let mut args = vec![
        "--permission-mode".to_string(),
        "default".to_string(),
        "--allowedTools".to_string(),
    ];
    for glob in globs.iter().map(String::as_str).chain([OUTPUT_GLOB]) {
        args.push(format!("Write({glob})"));
        args.push(format!("Edit({glob})"));
    }
    args.push("Bash".into());
    args
}

pub(super) fn fold(seen: &mut Seen, event: &Map<String, Value>) -> Result<(), String> {
    let event = Value::Object(event.clone());
    match event["type"].as_str() {
        Some("system") => {
            seen.session(event.get("session_id"));
            if let Some(model) = event["model"].as_str() {
                seen.model(model);
            }
        }
        Some("assistant") => assistant(seen, &event)?,
        Some("result") => result(seen, &event)?,
        _ => {}
    }
    Ok(())
}

fn counts(usage: &Value, what: &str) -> Result<Counts, String> {
    Ok(Counts {
        input: count(usage, "input_tokens", what)?,
        output: count(usage, "output_tokens", what)?,
        cache_read: count(usage, "cache_read_input_tokens", what)?,
        cache_creation: count(usage, "cache_creation_input_tokens", what)?,
    })
}

fn assistant(seen: &mut Seen, event: &Value) -> Result<(), String> {
    seen.session(event.get("session_id"));
    let message = &event["message"];
    if let Some(model) = message["model"].as_str() {
        seen.model(model);
    }
    if let Some(usage) = object(message, "usage")? {
        let id = message["id"].as_str().unwrap_or_default();
        seen.answer(id, counts(usage, "message.usage")?);
    }
    for block in message["content"].as_array().into_iter().flatten() {
        if block["type"] == "text"
            && let Some(said) = block["text"].as_str()
        {
            seen.text(said);
        }
    }
    Ok(())
}

fn result(seen: &mut Seen, event: &Value) -> Result<(), String> {
    let is_error = match event.get("is_error") {
        Some(Value::Bool(b)) => *b,
        None | Some(Value::Null) => false,
        Some(_) => return Err("`is_error` is not true or false".into()),
    };
    let summary = text(event, "result")?.map(|s| bounded(s, super::MAX_SUMMARY_CHARS));
    let totals = match object(event, "usage")? {
        Some(usage) => Some(counts(usage, "usage")?),
        None => None,
    };
    seen.cost_usd = cost(event, "total_cost_usd")?;
    seen.session(event.get("session_id"));
    // The models that answered, by name (the CLI may use more than one).
    if let Some(models) = event["modelUsage"].as_object() {
        for name in models.keys() {
            seen.model(name);
        }
    }
    if let Some(list) = event["permission_denials"].as_array() {
        seen.denied = list.iter().take(100).map(denial).collect();
    }
    seen.last = Some(Final {
        is_error,
        summary: Some(summary.unwrap_or_default()),
        counts: totals,
    });
    Ok(())
}

fn denial(d: &Value) -> String {
    let tool = d["tool_name"].as_str().unwrap_or("a tool");
    match d["tool_input"]["file_path"].as_str() {
        Some(path) => bounded(&format!("{tool} {path}"), 1024),
        None => bounded(tool, 1024),
    }
}

/// What a line is worth showing while the CLI works: its tool calls.
pub(super) fn progress(event: &Value) -> Option<super::Progress> {
    use super::Progress;
    match event["type"].as_str()? {
        "assistant" => {
            let mut said = Vec::new();
            for block in event["message"]["content"].as_array()? {
                if block["type"] == "tool_use" {
                    let name = block["name"].as_str().unwrap_or("a tool");
                    let input = &block["input"];
                    let detail = input["file_path"]
                        .as_str()
                        .or(input["command"].as_str())
                        .or(input["pattern"].as_str())
                        .or(input["path"].as_str());
                    said.push(match detail {
                        Some(d) if name == "Bash" => format!("Bash: {d}"),
                        Some(d) => format!("{name} {d}"),
                        None => name.to_string(),
                    });
                }
            }
            Some(if said.is_empty() {
                Progress::Hide
            } else {
                Progress::Show(said.join("; "))
            })
        }
        "system" | "user" | "stream_event" => Some(Progress::Hide),
        "result" if event.get("is_error").is_some() || event.get("subtype").is_some() => {
            Some(match event["is_error"].as_bool() {
                Some(true) => Progress::Show(format!(
                    "error: {}",
                    event["result"].as_str().unwrap_or("(no message)")
                )),
                _ => Progress::Hide,
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ResultFormat, find, parse_result};
    use super::*;

    /// What Claude Code 2.1.197 printed with `--output-format stream-json
    /// --verbose` under the scripted model server
    /// (`tests/fixtures/model_server.py`): a Write, a Bash call and a
    /// final text; the server charged 450 in, 73 out, 55 cache read.
    const STREAM: &str = include_str!("../testdata/claude-stream.jsonl");

    /// The same CLI's `--output-format json`.
    const RECORDED: &str = r#"{"type":"result","subtype":"success","is_error":false,"api_error_status":null,"duration_ms":147,"duration_api_ms":71,"num_turns":2,"result":"Wrote docs/hello.md.","stop_reason":"end_turn","session_id":"b57939b6-a474-4891-a6d5-e8efa10cd74f","total_cost_usd":0.0026750000000000003,"usage":{"input_tokens":320,"cache_creation_input_tokens":0,"cache_read_input_tokens":50,"output_tokens":42,"server_tool_use":{"web_search_requests":0,"web_fetch_requests":0},"service_tier":"standard"},"modelUsage":{"claude-test-1":{"inputTokens":320,"outputTokens":42,"cacheReadInputTokens":50,"cacheCreationInputTokens":0,"costUSD":0.0026750000000000003}},"permission_denials":[],"terminal_reason":"completed","uuid":"388d02d3-563e-4fd1-bc79-fdf66e7af6b6"}"#;

    /// The same CLI when the API refused its request.
    const RECORDED_ERROR: &str = r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":400,"duration_ms":108,"num_turns":1,"result":"API Error: 400 scenario exhausted","session_id":"4461954b-3ede-4246-bf80-87adb7f7b941","total_cost_usd":0,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0},"modelUsage":{},"permission_denials":[]}"#;

    fn parse(text: &str) -> Result<super::super::CliResult, super::super::ResultError> {
        parse_result(ResultFormat::Claude, text.as_bytes())
    }

    #[test]
    fn a_recorded_stream_is_read() {
        let r = parse(STREAM).unwrap();
        assert!(!r.is_error);
        assert_eq!(r.summary, "Wrote docs/hello.md.");
        assert_eq!(
            (
                r.usage.input_tokens,
                r.usage.output_tokens,
                r.usage.cache_read_tokens
            ),
            (450, 73, 55)
        );
        assert_eq!(r.usage.model.as_deref(), Some("claude-test-1"));
        assert_eq!(
            r.usage.session_id.as_deref(),
            Some("4228e495-6f55-44f4-b8e2-9ab1be4ace1c")
        );
    }

    #[test]
    fn a_stream_cut_before_its_result_keeps_what_it_streamed() {
        let cut: String = STREAM
            .lines()
            .filter(|l| !l.contains(r#""type":"result""#))
            .map(|l| format!("{l}\n"))
            .collect();
        let e = parse(&cut).unwrap_err();
        assert_eq!(e.why, "the CLI printed no final result");
        let usage = e.usage.unwrap();
        // The input of every answer; output counts come only with the
        // result (the CLI streams each answer before its end).
        assert_eq!((usage.input_tokens, usage.cache_read_tokens), (450, 55));
        assert_eq!(
            usage.session_id.as_deref(),
            Some("4228e495-6f55-44f4-b8e2-9ab1be4ace1c")
        );
        // Cut in the middle of a line: the same.
        let e = parse(&STREAM[..STREAM.len() - 40]).unwrap_err();
        assert!(
            e.why.starts_with("the CLI printed no final result"),
            "{e:?}"
        );
        assert_eq!(e.usage.unwrap().input_tokens, 450);
    }

    #[test]
    fn a_recorded_result_object_is_read() {
        let r = parse(&format!("{RECORDED}\n")).unwrap();
        assert!(!r.is_error);
        assert_eq!(r.summary, "Wrote docs/hello.md.");
        assert_eq!(r.usage.input_tokens, 320);
        assert_eq!(r.usage.output_tokens, 42);
        assert_eq!(r.usage.cache_read_tokens, 50);
        assert_eq!(r.usage.cache_creation_tokens, 0);
        assert_eq!(r.usage.tokens(), 412);
        assert_eq!(r.usage.model.as_deref(), Some("claude-test-1"));
        assert_eq!(
            r.usage.session_id.as_deref(),
            Some("b57939b6-a474-4891-a6d5-e8efa10cd74f")
        );
        assert!((r.usage.cost_usd.unwrap() - 0.002675).abs() < 1e-9);
        assert!(r.denied.is_empty());
    }

    #[test]
    fn an_error_result_says_so() {
        let r = parse(RECORDED_ERROR).unwrap();
        assert!(r.is_error);
        assert_eq!(r.summary, "API Error: 400 scenario exhausted");
        assert_eq!(r.usage.tokens(), 0);
        assert_eq!(r.usage.model, None);
    }

    #[test]
    fn denials_are_listed() {
        let text = RECORDED.replace(
            r#""permission_denials":[]"#,
            r#""permission_denials":[{"tool_name":"Write","tool_use_id":"t","tool_input":{"file_path":"/w/README.md","content":"x"}},{"tool_name":"Bash"}]"#,
        );
        let r = parse(&text).unwrap();
        assert_eq!(r.denied, ["Write /w/README.md", "Bash"]);
    }

    #[test]
    fn defective_results_are_reasons() {
        for (text, why) in [
            (r#"{"type":"result","is_error":"no"}"#, "`is_error`"),
            (r#"{"type":"result","result":7}"#, "`result` is not text"),
            (
                r#"{"type":"result","usage":[]}"#,
                "`usage` is not an object",
            ),
            (r#"{"type":"result","total_cost_usd":-1}"#, "not a cost"),
            (r#"{"type": "assistant"}"#, "no final result"),
            ("[1, 2]", "no final result (its output ends with [1, 2])"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.why.contains(why), "{text}: {e:?}");
        }
    }

    #[test]
    fn absurd_usage_is_refused_or_saturates_never_panics() {
        for bad in [
            "18446744073709551616",
            "1e30",
            "-1",
            "3.5",
            "\"many\"",
            "99999999999999999999999999999999999999",
        ] {
            let text = RECORDED.replace(
                r#""output_tokens":42"#,
                &format!(r#""output_tokens":{bad}"#),
            );
            let e = parse(&text).unwrap_err();
            assert!(
                e.why.contains("usage.output_tokens") && e.why.contains("not a token count"),
                "{bad}: {e:?}"
            );
        }
        // Each count within u64, their sum beyond: the total saturates.
        let text = RECORDED
            .replace(
                r#""output_tokens":42"#,
                r#""output_tokens":18446744073709551615"#,
            )
            .replace(
                r#""input_tokens":320"#,
                r#""input_tokens":18446744073709551615"#,
            );
        assert_eq!(parse(&text).unwrap().usage.tokens(), u64::MAX);
    }

    #[test]
    fn long_texts_are_cut() {
        let long = "é".repeat(super::super::MAX_SUMMARY_CHARS + 10);
        let text = RECORDED
            .replace("Wrote docs/hello.md.", &long)
            .replace("b57939b6-a474-4891-a6d5-e8efa10cd74f", &"s".repeat(10_000));
        let r = parse(&text).unwrap();
        assert!(
            r.summary
                .starts_with(&"é".repeat(super::super::MAX_SUMMARY_CHARS))
        );
        assert!(r.summary.ends_with("(cut at 16384 characters)"));
        assert!(r.usage.session_id.unwrap().chars().count() < 300);
    }

    fn block<'a>(
        model: Option<&'a str>,
        restrictions: Option<&'a [String]>,
        resume: Option<&'a str>,
    ) -> Block<'a> {
        Block {
            model,
            restrictions,
            home: None,
            resume,
            workspace: "/w",
            container: false,
            var: &super::super::tests::no_env,
        }
    }

    #[test]
    fn argv() {
        let p = find("claude-code").unwrap();
        let base = [
            "claude",
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
        ];
        let inv = p.invocation(&block(None, None, None));
        assert_eq!(
            inv.argv,
            [&base[..], &["--permission-mode", "acceptEdits"]].concat()
        );
        assert_eq!(inv.delivery, Delivery::Stdin);
        let globs = vec!["docs/**".to_string()];
        let inv = p.invocation(&block(Some("claude-test-1"), Some(&globs), Some("s-1")));
        assert_eq!(
            inv.argv,
            [
                &base[..],
                &[
                    "--model",
                    "claude-test-1",
                    "--resume",
                    "s-1",
                    "--permission-mode",
                    "default",
                    "--allowedTools",
                    "Write(docs/**)",
                    "Edit(docs/**)",
                    "Write(.output/**)",
                    "Edit(.output/**)",
                    "Bash"
                ]
            ]
            .concat()
        );
    }

    #[test]
    fn progress_names_the_tool_calls() {
        let shown = super::super::tests::shown_steps(STREAM);
        assert_eq!(
            shown,
            ["Write ./docs/hello.md", "Bash: echo hi > docs/sh.txt"]
        );
    }
}
