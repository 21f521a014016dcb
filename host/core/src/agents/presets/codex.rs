//! Codex (`codex`, npm `@openai/codex`) in `exec` mode.
//!
//! Endpoint: Codex reads no base-URL variable of its own, so when
//! `OPENAI_BASE_URL` is set (in the block's `env` or wfhost's
//! environment) the preset defines a provider for it on the command line
//! (`-c model_providers.wfhost.*`, OpenAI Responses, key from
//! `OPENAI_API_KEY`); without it Codex uses its own. Offline it needs its
//! plugin, app and analytics calls off (`--disable …`), or it waits for
//! them.
//!
//! Sandbox: `workspace-write` (the working directory and `/tmp` writable);
//! in a container, where its sandbox cannot start (no user namespaces),
//! `danger-full-access` — the host's snapshot is the check either way.
//! Codex has no per-path rules to mirror the restrictions with.
//!
//! Output (`--json`): `thread.started` (`thread_id`: the session),
//! `item.started`/`item.completed` (`file_change`, `command_execution`,
//! `agent_message` with the final `text`), then `turn.completed` with the
//! `usage` — `input_tokens` counts all input (cache reads and writes
//! included), and after a resume it is the session's total — or
//! `turn.failed` with the `error`. `error` lines alone are retry notices.

use serde_json::{Map, Value};

use super::result::{Counts, Final, Seen, bounded, count};
use super::{Block, Delivery, Invocation, toml_string};

pub(super) const PASSTHROUGH: &[&str] = &["OPENAI_API_KEY", "OPENAI_BASE_URL"];

pub(super) fn build(block: &Block) -> Invocation {
    let mut argv: Vec<String> = vec!["codex".into(), "exec".into()];
    if block.resume.is_some() {
        argv.push("resume".into());
    }
    argv.extend(["--json", "--skip-git-repo-check"].map(String::from));
    if let Some(model) = block.model {
        argv.extend(["-m".into(), model.into()]);
    }
    let sandbox = if block.container {
        "danger-full-access"
    } else {
        "workspace-write"
    };
    // `exec resume` takes no `-s`.
    argv.extend([
        "-c".into(),
        format!("sandbox_mode={}", toml_string(sandbox)),
    ]);
    if let Some(url) = (block.var)("OPENAI_BASE_URL").filter(|u| !u.trim().is_empty()) {
        for setting in [
            "model_provider=\"wfhost\"".to_string(),
            "model_providers.wfhost.name=\"wfhost\"".to_string(),
            format!(
                "model_providers.wfhost.base_url={}",
                toml_string(url.trim())
            ),
            "model_providers.wfhost.env_key=\"OPENAI_API_KEY\"".to_string(),
            "model_providers.wfhost.wire_api=\"responses\"".to_string(),
        ] {
            argv.extend(["-c".into(), setting]);
        }
    }
    argv.extend(
        [
            "--disable",
            "plugins",
            "--disable",
            "remote_plugin",
            "--disable",
            "apps",
            "-c",
            "analytics.enabled=false",
        ]
        .map(String::from),
    );
    if let Some(session) = block.resume {
        argv.push(session.into());
    }
    argv.push("-".into());
    Invocation {
        argv,
        delivery: Delivery::Stdin,
        env: Vec::new(),
        files: Vec::new(),
    }
}

pub(super) fn fold(seen: &mut Seen, event: &Map<String, Value>) -> Result<(), String> {
    match event.get("type").and_then(Value::as_str) {
        Some("thread.started") => seen.session(event.get("thread_id")),
        Some("item.completed") => {
            let item = &event["item"];
            if item["type"] == "agent_message"
                && let Some(text) = item["text"].as_str()
            {
                seen.text(text);
            }
        }
        Some("turn.completed") => {
            let usage = event.get("usage").unwrap_or(&Value::Null);
            if !(usage.is_object() || usage.is_null()) {
                return Err("`usage` is not an object".into());
            }
            let all = count(usage, "input_tokens", "usage")?;
            let read = count(usage, "cached_input_tokens", "usage")?;
            let written = count(usage, "cache_write_input_tokens", "usage")?;
            let counts = Counts {
                input: all.saturating_sub(read).saturating_sub(written),
                output: count(usage, "output_tokens", "usage")?,
                cache_read: read,
                cache_creation: written,
            };
            seen.last = Some(Final {
                is_error: false,
                summary: None,
                counts: Some(counts),
            });
        }
        Some("turn.failed") => {
            let message = event["error"]["message"].as_str().unwrap_or("(no message)");
            seen.last = Some(Final {
                is_error: true,
                summary: Some(bounded(message, super::MAX_SUMMARY_CHARS)),
                counts: None,
            });
        }
        _ => {}
    }
    Ok(())
}

/// What a line is worth showing while the CLI works.
pub(super) fn progress(event: &Value) -> Option<super::Progress> {
    use super::Progress;
    let kind = event["type"].as_str()?;
    let item = &event["item"];
    Some(match kind {
        "thread.started" | "turn.started" | "turn.completed" | "item.updated" => Progress::Hide,
        "turn.failed" => Progress::Show(format!(
            "error: {}",
            event["error"]["message"].as_str().unwrap_or("(no message)")
        )),
        // A retry notice ("Reconnecting... 2/5").
        "error" if event["message"].is_string() && event.get("sessionID").is_none() => {
            Progress::Show(event["message"].as_str().unwrap_or_default().to_string())
        }
        "item.started" if item["type"] == "command_execution" => {
            let command = item["command"].as_str().unwrap_or_default();
            let command = command
                .strip_prefix("/bin/bash -lc ")
                .map(|c| c.trim_matches('\''))
                .unwrap_or(command);
            Progress::Show(format!("Bash: {command}"))
        }
        "item.completed" if item["type"] == "file_change" => {
            let changes: Vec<String> = item["changes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    let verb = match c["kind"].as_str() {
                        Some("add") => "Write",
                        Some("delete") => "Delete",
                        _ => "Edit",
                    };
                    format!("{verb} {}", c["path"].as_str().unwrap_or("?"))
                })
                .collect();
            if changes.is_empty() {
                Progress::Hide
            } else {
                Progress::Show(changes.join("; "))
            }
        }
        "item.started" | "item.completed" if item.is_object() => Progress::Hide,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{CliResult, ResultFormat, find, parse_result};
    use super::*;

    fn parse(text: &str) -> Result<CliResult, super::super::ResultError> {
        parse_result(ResultFormat::Codex, text.as_bytes())
    }

    /// Recorded with Codex 0.169.0 (`testdata/README.md`): the server
    /// charged 2700 in, 82 out, 2700 cache read, 64 cache written.
    const SUCCESS: &str = include_str!("../testdata/codex-success.jsonl");

    #[test]
    fn a_recorded_run_is_read_as_the_server_charged_it() {
        let r = parse(SUCCESS).unwrap();
        assert!(!r.is_error);
        assert_eq!(r.summary, "Wrote docs/hello.md and docs/sh.txt.");
        let u = &r.usage;
        assert_eq!(
            (
                u.input_tokens,
                u.output_tokens,
                u.cache_read_tokens,
                u.cache_creation_tokens
            ),
            (2700, 82, 2700, 64)
        );
        assert_eq!(
            u.session_id.as_deref(),
            Some("01a217b8-6efb-79f2-a658-f10ba38cf95f")
        );
    }

    #[test]
    fn a_failed_turn_is_an_error_with_the_message() {
        let r = parse(include_str!("../testdata/codex-error.jsonl")).unwrap();
        assert!(r.is_error);
        assert!(r.summary.contains("scripted failure"), "{}", r.summary);
        // Exhausted after a tool call: an error, and no usage was reported.
        let r = parse(include_str!("../testdata/codex-exhausted.jsonl")).unwrap();
        assert!(r.is_error);
        assert!(r.summary.contains("scenario exhausted"), "{}", r.summary);
        assert_eq!(r.usage.tokens(), 0);
    }

    #[test]
    fn a_resumed_run_reports_the_sessions_total() {
        let first = parse(include_str!("../testdata/codex-resume-first.jsonl")).unwrap();
        let second = parse(include_str!("../testdata/codex-resume.jsonl")).unwrap();
        assert_eq!(first.usage.session_id, second.usage.session_id);
        // 500/9/100 then 600/8/500 charged: the second says the sum; the
        // host subtracts the first (`Preset::cumulative_usage`).
        assert_eq!(
            (first.usage.input_tokens, first.usage.output_tokens),
            (500, 9)
        );
        assert_eq!(
            (second.usage.input_tokens, second.usage.output_tokens),
            (1100, 17)
        );
        assert!(find("codex").unwrap().cumulative_usage);
    }

    #[test]
    fn a_stream_cut_before_its_turn_ends_is_not_a_result() {
        let cut: String = SUCCESS
            .lines()
            .filter(|l| !l.contains("turn.completed"))
            .map(|l| format!("{l}\n"))
            .collect();
        let e = parse(&cut).unwrap_err();
        assert_eq!(e.why, "the CLI printed no final result");
        let usage = e.usage.unwrap();
        assert_eq!(usage.tokens(), 0);
        assert!(usage.session_id.is_some());
    }

    #[test]
    fn absurd_counts_are_refused() {
        let bad = SUCCESS.replace("\"output_tokens\":82", "\"output_tokens\":-82");
        let e = parse(&bad).unwrap_err();
        assert!(e.why.contains("usage.output_tokens"), "{e:?}");
        let bad = SUCCESS.replace(
            "\"usage\":{\"input_tokens\"",
            "\"usage\":[],\"x\":{\"input_tokens\"",
        );
        assert!(parse(&bad).unwrap_err().why.contains("`usage`"));
        // Cached more than the input: no underflow.
        let odd = SUCCESS.replace("\"input_tokens\":5464", "\"input_tokens\":3");
        assert_eq!(parse(&odd).unwrap().usage.input_tokens, 0);
    }

    fn block<'a>(
        var: &'a dyn Fn(&str) -> Option<String>,
        resume: Option<&'a str>,
        container: bool,
    ) -> Block<'a> {
        Block {
            model: Some("gpt-5.5"),
            restrictions: None,
            home: None,
            resume,
            workspace: "/w",
            container,
            var,
        }
    }

    #[test]
    fn argv() {
        let p = find("codex").unwrap();
        let none = |_: &str| None;
        let inv = p.invocation(&block(&none, None, false));
        assert_eq!(
            inv.argv.join(" "),
            "codex exec --json --skip-git-repo-check -m gpt-5.5 -c sandbox_mode=\"workspace-write\" --disable plugins --disable remote_plugin --disable apps -c analytics.enabled=false -"
        );
        let url = |k: &str| (k == "OPENAI_BASE_URL").then(|| "http://127.0.0.1:9/v1".to_string());
        let inv = p.invocation(&block(&url, Some("0193-ab"), true));
        let argv = inv.argv.join(" ");
        assert!(argv.starts_with("codex exec resume --json"), "{argv}");
        assert!(
            argv.contains("sandbox_mode=\"danger-full-access\""),
            "{argv}"
        );
        assert!(
            argv.contains("-c model_providers.wfhost.base_url=\"http://127.0.0.1:9/v1\""),
            "{argv}"
        );
        assert!(argv.ends_with("0193-ab -"), "{argv}");
    }

    #[test]
    fn progress_names_the_commands_and_files() {
        let shown = super::super::tests::shown_steps(SUCCESS);
        assert_eq!(
            shown,
            [
                "Write /tmp/wfhost-agent-fixtures/codex/ws/docs/hello.md",
                "Bash: echo hi > docs/sh.txt && chmod 600 docs/sh.txt"
            ]
        );
    }
}
