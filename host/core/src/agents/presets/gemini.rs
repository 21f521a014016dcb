//! Gemini CLI (`gemini`, npm `@google/gemini-cli`), headless.
//!
//! Runs with `--yolo` (no questions) in a trusted workspace
//! (`GEMINI_CLI_TRUST_WORKSPACE`, else it refuses to act and exits 55),
//! the prompt on stdin (`-p ""` appends nothing). With its own home the
//! preset writes `.gemini/settings.json` (API-key auth: else it exits 41)
//! and, for a restricted block, a policy (`.gemini/policies/wfhost.toml`)
//! that lets its file tools write only the restriction globs and
//! `.output/`; its shell stays allowed (the host's snapshot checks what it
//! did). It writes error reports to `TMPDIR`, given one per home.
//!
//! Output (`--output-format stream-json`): `init` (`session_id`, `model`),
//! `message` (the assistant's text in `delta`s), `tool_use`,
//! `tool_result`, then `result` (`status`, `error`, `stats`: `input` is
//! the uncached input, `cached` the cache reads, `output_tokens`, per
//! model under `models`). `--output-format json` prints one object
//! (`session_id`, `response`, `stats.models[*].tokens`, `error`), which
//! reads too.

use serde_json::{Map, Value};

use super::result::{Counts, Final, Seen, bounded, count};
use super::{Block, Delivery, Invocation, OUTPUT_GLOB, glob_regex, toml_string};

pub(super) const PASSTHROUGH: &[&str] = &[
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GEMINI_BASE_URL",
    "GEMINI_MODEL",
];

pub(super) fn build(block: &Block) -> Invocation {
    let mut argv: Vec<String> = ["gemini", "--output-format", "stream-json", "--yolo"]
        .map(String::from)
        .to_vec();
    if let Some(model) = block.model {
        argv.extend(["-m".into(), model.into()]);
    }
    if let Some(session) = block.resume {
        argv.extend(["--resume".into(), session.into()]);
    }
    argv.extend(["-p".into(), String::new()]);
    let mut env = vec![("GEMINI_CLI_TRUST_WORKSPACE".to_string(), "true".to_string())];
    let mut files = vec![(
        ".gemini/settings.json".to_string(),
        serde_json::json!({"security": {"auth": {"selectedType": "gemini-api-key"}}}).to_string(),
    )];
    if let Some(home) = block.home {
        env.push(("TMPDIR".into(), format!("{home}/tmp")));
        files.push(("tmp/.keep".into(), String::new()));
    }
    if let Some(globs) = block.restrictions {
        files.push((
            ".gemini/policies/wfhost.toml".into(),
            policy(block.workspace, globs),
        ));
    }
    Invocation {
        argv,
        delivery: Delivery::Stdin,
        env,
        files,
    }
}

/// The policy that allows the file tools to write the restriction globs
/// (and `.output/`) in the workspace and nothing else.
fn policy(workspace: &str, globs: &[String]) -> String {
    let root = glob_regex(workspace.trim_end_matches('/'));
    let mut out = String::from("# Written by wfhost: the block's file restrictions.\n");
    for glob in globs.iter().map(String::as_str).chain([OUTPUT_GLOB]) {
        let pattern = format!("\"file_path\":\"{root}/{}\"", glob_regex(glob));
        out.push_str(&format!(
            "\n[[rule]]\ntoolName = [\"write_file\", \"replace\"]\nargsPattern = {}\ndecision = \"allow\"\npriority = 500\n",
            toml_string(&pattern)
        ));
    }
    out.push_str(
        "\n[[rule]]\ntoolName = [\"write_file\", \"replace\"]\ndecision = \"deny\"\npriority = 400\n",
    );
    out
}

pub(super) fn fold(seen: &mut Seen, event: &Map<String, Value>) -> Result<(), String> {
    let value = Value::Object(event.clone());
    match event.get("type").and_then(Value::as_str) {
        Some("init") => {
            seen.session(event.get("session_id"));
            if let Some(model) = event.get("model").and_then(Value::as_str) {
                seen.model(model);
            }
        }
        Some("message") if event.get("role").and_then(Value::as_str) == Some("assistant") => {
            let text = event.get("content").and_then(Value::as_str).unwrap_or("");
            seen.append_text(text);
        }
        Some("tool_use") => seen.end_text(),
        Some("result") => {
            let is_error = event.get("status").and_then(Value::as_str) != Some("success");
            let message = value["error"]["message"].as_str().map(|m| bounded(m, 4096));
            let stats = value.get("stats").unwrap_or(&Value::Null);
            let counts = Counts {
                input: count(stats, "input", "stats")?,
                output: count(stats, "output_tokens", "stats")?,
                cache_read: count(stats, "cached", "stats")?,
                cache_creation: 0,
            };
            if let Some(models) = stats["models"].as_object() {
                for name in models.keys() {
                    seen.model(name);
                }
            }
            seen.last = Some(Final {
                is_error,
                summary: if is_error { message } else { None },
                counts: Some(counts),
            });
        }
        // `--output-format json`: one object, no `type`.
        None if event.contains_key("response") || event.contains_key("stats") => {
            json_object(seen, &value)?
        }
        _ => {}
    }
    Ok(())
}

fn json_object(seen: &mut Seen, value: &Value) -> Result<(), String> {
    seen.session(value.get("session_id"));
    let mut counts = Counts::default();
    for (name, model) in value["stats"]["models"].as_object().into_iter().flatten() {
        seen.model(name);
        let tokens = &model["tokens"];
        let what = format!("stats.models.{name}.tokens");
        counts.input = counts.input.saturating_add(count(tokens, "input", &what)?);
        counts.output = counts
            .output
            .saturating_add(count(tokens, "candidates", &what)?);
        counts.cache_read = counts
            .cache_read
            .saturating_add(count(tokens, "cached", &what)?);
    }
    let error = value["error"]["message"].as_str().map(|m| bounded(m, 4096));
    let response = value["response"]
        .as_str()
        .map(|r| bounded(r, super::MAX_SUMMARY_CHARS));
    seen.last = Some(Final {
        is_error: error.is_some(),
        summary: error.or(response),
        counts: Some(counts),
    });
    Ok(())
}

/// What a line is worth showing while the CLI works.
pub(super) fn progress(event: &Value) -> Option<super::Progress> {
    use super::Progress;
    Some(match event["type"].as_str()? {
        "init" if event.get("session_id").is_some() => Progress::Hide,
        "message" if event.get("role").is_some() => Progress::Hide,
        "tool_use" if event.get("tool_name").is_some() => {
            let name = event["tool_name"].as_str().unwrap_or("a tool");
            let params = &event["parameters"];
            match (params["file_path"].as_str(), params["command"].as_str()) {
                (Some(path), _) => Progress::Show(format!("{name} {path}")),
                (None, Some(command)) => Progress::Show(format!("{name}: {command}")),
                _ => Progress::Show(name.to_string()),
            }
        }
        "tool_result" if event.get("tool_id").is_some() => match event["status"].as_str() {
            Some("error") => Progress::Show(format!(
                "refused: {}",
                event["error"]["message"].as_str().unwrap_or("(no message)")
            )),
            _ => Progress::Hide,
        },
        "result" if event.get("status").is_some() => match event["status"].as_str() {
            Some("success") => Progress::Hide,
            _ => Progress::Show(format!(
                "error: {}",
                event["error"]["message"].as_str().unwrap_or("(no message)")
            )),
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{CliResult, ResultFormat, find, parse_result};
    use super::*;

    fn parse(text: &str) -> Result<CliResult, super::super::ResultError> {
        parse_result(ResultFormat::Gemini, text.as_bytes())
    }

    /// Recorded with Gemini CLI 0.61.0 (`testdata/README.md`): the server
    /// charged 2700 in, 82 out, 2700 cache read.
    const STREAM: &str = include_str!("../testdata/gemini-success-stream.jsonl");

    #[test]
    fn a_recorded_stream_is_read_as_the_server_charged_it() {
        let r = parse(STREAM).unwrap();
        assert!(!r.is_error);
        assert_eq!(r.summary, "Wrote docs/hello.md and docs/sh.txt.");
        let u = &r.usage;
        assert_eq!(
            (u.input_tokens, u.output_tokens, u.cache_read_tokens),
            (2700, 82, 2700)
        );
        assert_eq!(u.model.as_deref(), Some("gemini-2.5-pro"));
        assert_eq!(
            u.session_id.as_deref(),
            Some("52629d0e-8c45-4d7c-8744-76d2c0dfa8cd")
        );
    }

    #[test]
    fn the_json_object_reads_the_same_with_side_calls_summed() {
        let r = parse(include_str!("../testdata/gemini-success.json")).unwrap();
        assert!(!r.is_error);
        assert_eq!(r.summary, "Wrote docs/hello.md and docs/sh.txt.");
        assert_eq!(
            (
                r.usage.input_tokens,
                r.usage.output_tokens,
                r.usage.cache_read_tokens
            ),
            (2700, 82, 2700)
        );
        // The router's side call counts: 103 / 8 / 40 charged.
        let r = parse(include_str!("../testdata/gemini-router.json")).unwrap();
        assert_eq!(
            (
                r.usage.input_tokens,
                r.usage.output_tokens,
                r.usage.cache_read_tokens
            ),
            (103, 8, 40)
        );
    }

    #[test]
    fn an_api_error_is_an_error_with_the_message() {
        let r = parse(include_str!("../testdata/gemini-error-stream.jsonl")).unwrap();
        assert!(r.is_error);
        assert!(r.summary.contains("scripted failure"), "{}", r.summary);
        // `json`: nothing on stdout at all.
        let e = parse(include_str!("../testdata/gemini-error.json")).unwrap_err();
        assert!(
            e.why.starts_with("the CLI printed no final result"),
            "{e:?}"
        );
    }

    #[test]
    fn a_resumed_run_keeps_its_session_and_counts_its_own_tokens() {
        let first = parse(include_str!("../testdata/gemini-resume-first.json")).unwrap();
        let second = parse(include_str!("../testdata/gemini-resume.json")).unwrap();
        assert_eq!(first.usage.session_id, second.usage.session_id);
        assert_eq!(
            (second.usage.input_tokens, second.usage.cache_read_tokens),
            (600, 500)
        );
        assert!(!find("gemini").unwrap().cumulative_usage);
    }

    #[test]
    fn absurd_counts_are_refused() {
        let bad = STREAM.replace("\"output_tokens\":82", "\"output_tokens\":1e99");
        let e = parse(&bad).unwrap_err();
        assert!(e.why.contains("stats.output_tokens"), "{e:?}");
    }

    #[test]
    fn restrictions_become_a_policy_for_the_file_tools() {
        let p = find("gemini").unwrap();
        let none = |_: &str| None;
        let globs = vec!["docs/**".to_string()];
        let inv = p.invocation(&Block {
            model: Some("gemini-2.5-pro"),
            restrictions: Some(&globs),
            home: Some("/w/.output/agent/r/home/b"),
            resume: Some("s-1"),
            workspace: "/w/my ws",
            container: false,
            var: &none,
        });
        assert_eq!(
            inv.argv.join(" "),
            "gemini --output-format stream-json --yolo -m gemini-2.5-pro --resume s-1 -p "
        );
        assert!(inv.env.contains(&(
            "TMPDIR".to_string(),
            "/w/.output/agent/r/home/b/tmp".to_string()
        )));
        let policy = &inv
            .files
            .iter()
            .find(|(f, _)| f == ".gemini/policies/wfhost.toml")
            .unwrap()
            .1;
        assert!(
            policy.contains(r#"argsPattern = "\"file_path\":\"/w/my ws/docs/[^\"]*\"""#),
            "{policy}"
        );
        assert!(policy.contains(".output/"), "{policy}");
        assert!(policy.contains("decision = \"deny\""), "{policy}");
    }

    #[test]
    fn progress_names_the_tool_calls() {
        let shown = super::super::tests::shown_steps(STREAM);
        assert_eq!(
            shown,
            [
                "write_file /tmp/wfhost-agent-fixtures/gemini/ws/docs/hello.md",
                "run_shell_command: echo hi > docs/sh.txt && chmod 600 docs/sh.txt"
            ]
        );
    }
}
