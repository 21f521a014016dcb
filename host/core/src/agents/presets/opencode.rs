//! opencode (`opencode`, npm `opencode-ai`) in `run` mode.
//!
//! Configuration comes in `OPENCODE_CONFIG_CONTENT`: when
//! `OPENAI_BASE_URL` is set (in the block's `env` or wfhost's
//! environment), a provider `wfhost` for that OpenAI-compatible endpoint
//! (key from `OPENAI_API_KEY`) and the block's model in it (`-m
//! wfhost/<model>`); else `config.model` is opencode's own
//! `provider/model`. A restricted block gets `permission.edit` rules that
//! deny its write and edit tools everywhere but the restriction globs and
//! `.output/` (opencode matches them against the path from the git root,
//! or from `/` outside a repository, hence each glob also under `**/`);
//! its shell stays allowed (the host's snapshot checks what it did).
//! `--title` skips its title side call; the models list and update check
//! are off (offline, each costs seconds).
//!
//! Output (`--format json`): one event a line, each with the `sessionID`:
//! `step_start`, `tool_use` (`part.tool`, `part.state`), `text`
//! (`part.text`), `step_finish` (`part.tokens`: `input` uncached,
//! `output`, `cache.read`, `cache.write`; `part.cost`; `part.reason`
//! `stop` at the end), `error` (`error.data.message`).

use serde_json::{Map, Value};

use super::result::{Counts, Final, Seen, bounded, count};
use super::{Block, Delivery, Invocation, OUTPUT_GLOB};

pub(super) const PASSTHROUGH: &[&str] = &["OPENAI_API_KEY", "OPENAI_BASE_URL"];

/// The provider name the preset's configuration defines.
const PROVIDER: &str = "wfhost";

pub(super) fn build(block: &Block) -> Invocation {
    let mut argv: Vec<String> = ["opencode", "run", "--format", "json", "--title", "wfhost"]
        .map(String::from)
        .to_vec();
    let endpoint = (block.var)("OPENAI_BASE_URL").filter(|u| !u.trim().is_empty());
    let mut config = serde_json::json!({"autoupdate": false});
    if let Some(url) = &endpoint {
        let mut models = serde_json::Map::new();
        if let Some(model) = block.model {
            models.insert(model.into(), serde_json::json!({"name": model}));
        }
        config["provider"] = serde_json::json!({PROVIDER: {
            "npm": "@ai-sdk/openai-compatible",
            "name": PROVIDER,
            "options": {"baseURL": url.trim(), "apiKey": "{env:OPENAI_API_KEY}"},
            "models": models,
        }});
    }
    if let Some(model) = block.model {
        let model = match &endpoint {
            Some(_) => format!("{PROVIDER}/{model}"),
            None => model.to_string(),
        };
        config["model"] = model.clone().into();
        config["small_model"] = model.clone().into();
        argv.extend(["-m".into(), model]);
    }
    if let Some(globs) = block.restrictions {
        let mut edit = serde_json::Map::new();
        edit.insert("*".into(), "deny".into());
        for glob in globs.iter().map(String::as_str).chain([OUTPUT_GLOB]) {
            edit.insert(glob.into(), "allow".into());
            edit.insert(format!("**/{glob}"), "allow".into());
        }
        config["permission"] = serde_json::json!({"edit": edit, "bash": "allow"});
    }
    if let Some(session) = block.resume {
        argv.extend(["-s".into(), session.into()]);
    }
    Invocation {
        argv,
        delivery: Delivery::Stdin,
        env: vec![
            ("OPENCODE_CONFIG_CONTENT".into(), config.to_string()),
            ("OPENCODE_DISABLE_MODELS_FETCH".into(), "1".into()),
            ("OPENCODE_DISABLE_AUTOUPDATE".into(), "1".into()),
        ],
        files: Vec::new(),
    }
}

pub(super) fn fold(seen: &mut Seen, event: &Map<String, Value>) -> Result<(), String> {
    seen.session(event.get("sessionID"));
    let part = event.get("part").unwrap_or(&Value::Null);
    match event.get("type").and_then(Value::as_str) {
        Some("text") => {
            if let Some(text) = part["text"].as_str() {
                seen.text(text);
            }
        }
        Some("step_finish") => {
            let tokens = part.get("tokens").unwrap_or(&Value::Null);
            let cache = tokens.get("cache").unwrap_or(&Value::Null);
            seen.step(Counts {
                input: count(tokens, "input", "part.tokens")?,
                output: count(tokens, "output", "part.tokens")?,
                cache_read: count(cache, "read", "part.tokens.cache")?,
                cache_creation: count(cache, "write", "part.tokens.cache")?,
            });
            if let Some(cost) = super::result::cost(part, "cost")?.filter(|c| *c > 0.0) {
                seen.cost_usd = Some(seen.cost_usd.unwrap_or(0.0) + cost);
            }
            if part["reason"] == "stop" {
                seen.last = Some(Final::default());
            }
        }
        Some("error") => {
            let error = event.get("error").unwrap_or(&Value::Null);
            let message = error["data"]["message"]
                .as_str()
                .or(error["message"].as_str())
                .or(error["name"].as_str())
                .unwrap_or("(no message)");
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
    event.get("sessionID")?;
    let part = &event["part"];
    Some(match event["type"].as_str()? {
        "tool_use" => {
            let tool = part["tool"].as_str().unwrap_or("a tool");
            let state = &part["state"];
            let input = &state["input"];
            let said = match (input["filePath"].as_str(), input["command"].as_str()) {
                (Some(path), _) => format!("{tool} {path}"),
                (None, Some(command)) => format!("{tool}: {command}"),
                _ => tool.to_string(),
            };
            match state["status"].as_str() {
                Some("error") => Progress::Show(format!("{said} (refused)")),
                _ => Progress::Show(said),
            }
        }
        "error" => Progress::Show(format!(
            "error: {}",
            event["error"]["data"]["message"]
                .as_str()
                .unwrap_or("(no message)")
        )),
        _ => Progress::Hide,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{CliResult, ResultFormat, find, parse_result};
    use super::*;

    fn parse(text: &str) -> Result<CliResult, super::super::ResultError> {
        parse_result(ResultFormat::Opencode, text.as_bytes())
    }

    /// Recorded with opencode 1.18.33 (`testdata/README.md`): the server
    /// charged 2700 in, 82 out, 2700 cache read.
    const SUCCESS: &str = include_str!("../testdata/opencode-success.jsonl");

    #[test]
    fn a_recorded_run_is_read_as_the_server_charged_it() {
        let r = parse(SUCCESS).unwrap();
        assert!(!r.is_error);
        assert_eq!(r.summary, "Wrote docs/hello.md and docs/sh.txt.");
        let u = &r.usage;
        assert_eq!(
            (u.input_tokens, u.output_tokens, u.cache_read_tokens),
            (2700, 82, 2700)
        );
        assert_eq!(
            u.session_id.as_deref(),
            Some("ses_de847470cffeB03HLqc8P8t0Wd")
        );
        assert_eq!(u.cost_usd, None, "a cost of 0 is no cost said");
    }

    #[test]
    fn an_error_is_an_error_and_what_ran_before_it_counts() {
        let r = parse(include_str!("../testdata/opencode-error.jsonl")).unwrap();
        assert!(r.is_error);
        assert_eq!(r.summary, "scripted failure");
        let r = parse(include_str!("../testdata/opencode-exhausted.jsonl")).unwrap();
        assert!(r.is_error);
        assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (10, 2));
    }

    #[test]
    fn a_run_cut_before_its_last_step_keeps_its_usage() {
        let cut: String = SUCCESS
            .lines()
            .filter(|l| !l.contains("\"reason\":\"stop\""))
            .map(|l| format!("{l}\n"))
            .collect();
        let e = parse(&cut).unwrap_err();
        assert_eq!(e.why, "the CLI printed no final result");
        let u = e.usage.unwrap();
        assert_eq!((u.input_tokens, u.output_tokens), (2500, 70));
    }

    #[test]
    fn a_resumed_run_counts_its_own_tokens() {
        let first = parse(include_str!("../testdata/opencode-resume-first.jsonl")).unwrap();
        let second = parse(include_str!("../testdata/opencode-resume.jsonl")).unwrap();
        assert_eq!(first.usage.session_id, second.usage.session_id);
        assert_eq!(
            (second.usage.input_tokens, second.usage.cache_read_tokens),
            (600, 500)
        );
    }

    #[test]
    fn absurd_counts_are_refused() {
        let bad = SUCCESS.replacen("\"output\":40", "\"output\":\"40\"", 1);
        let e = parse(&bad).unwrap_err();
        assert!(e.why.contains("part.tokens.output"), "{e:?}");
    }

    #[test]
    fn the_configuration_names_the_endpoint_model_and_permissions() {
        let p = find("opencode").unwrap();
        let url = |k: &str| (k == "OPENAI_BASE_URL").then(|| "http://127.0.0.1:9/v1".to_string());
        let globs = vec!["docs/**".to_string()];
        let inv = p.invocation(&Block {
            model: Some("test-model"),
            restrictions: Some(&globs),
            home: None,
            resume: Some("ses_1"),
            workspace: "/w",
            container: false,
            var: &url,
        });
        assert_eq!(
            inv.argv.join(" "),
            "opencode run --format json --title wfhost -m wfhost/test-model -s ses_1"
        );
        let config: Value = serde_json::from_str(
            &inv.env
                .iter()
                .find(|(k, _)| k == "OPENCODE_CONFIG_CONTENT")
                .unwrap()
                .1,
        )
        .unwrap();
        assert_eq!(
            config["provider"]["wfhost"]["options"]["baseURL"],
            "http://127.0.0.1:9/v1"
        );
        assert_eq!(config["model"], "wfhost/test-model");
        let edit = &config["permission"]["edit"];
        assert_eq!(edit["*"], "deny");
        assert_eq!(edit["docs/**"], "allow");
        assert_eq!(edit["**/docs/**"], "allow");
        assert_eq!(edit["**/.output/**"], "allow");
    }

    #[test]
    fn progress_names_the_tool_calls() {
        let shown = super::super::tests::shown_steps(SUCCESS);
        assert_eq!(
            shown,
            [
                "write /tmp/wfhost-agent-fixtures/opencode/ws/docs/hello.md",
                "bash: echo hi > docs/sh.txt && chmod 600 docs/sh.txt"
            ]
        );
    }
}
