//! Agent CLI presets: `"config": {"preset": "claude-code"}` on an agent
//! block runs a known coding-agent CLI the way wfhost has tested it — its
//! argv, how the prompt reaches it, the permission flags that mirror the
//! block's `file_restrictions` inside the CLI's own loop, the environment
//! that keeps it offline, and the adapter that turns its final result into
//! the block's BlockOutput (status, summary, usage).
//!
//! A preset is one [`Preset`] entry in [`PRESETS`]; a new CLI is a new
//! entry (and, when its final result is a format of its own, a new
//! [`ResultFormat`] with its parser here). Pure: argv and env in, verdict
//! out; running the CLI and reading its stdout belong to the executor.
//!
//! The CLI's own permission checks are a convenience (it is told no
//! before it writes); the guarantee stays the host's: the workspace is
//! snapshotted, and changes outside the restrictions are undone or fail
//! the block whatever the CLI did.

use serde_json::Value;

use super::block_output::{MAX_USAGE_TEXT, Usage};

/// How a CLI's final result is read from its stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultFormat {
    /// Claude Code's `--output-format json`: one object with `type:
    /// "result"`, `is_error`, `result`, `usage`, `total_cost_usd`,
    /// `session_id`, `modelUsage`, `permission_denials`.
    ClaudeJson,
}

/// A known agent CLI.
#[derive(Debug)]
pub struct Preset {
    /// The name a block's `config.preset` uses.
    pub name: &'static str,
    /// Where the CLI comes from, and the version wfhost's tests run.
    pub package: &'static str,
    pub tested_version: &'static str,
    /// The program, looked up on `PATH` (a block's `command` replaces the
    /// whole argv).
    pub program: &'static str,
    /// The arguments after the program, before the permission flags.
    pub args: &'static [&'static str],
    /// The flag that takes the block's `config.model`.
    pub model_flag: &'static str,
    /// Set for the CLI, before the block's own `env` (which wins).
    pub env: &'static [(&'static str, &'static str)],
    /// Variables of wfhost's own environment the CLI gets when set (its
    /// endpoint, key and model): commands start from a cleared environment,
    /// and these are what a user sets for the CLI anyway.
    pub passthrough: &'static [&'static str],
    /// The permission flags for the block's file restrictions (`None`:
    /// unrestricted).
    pub permissions: fn(Option<&[String]>) -> Vec<String>,
    /// How its final result is read.
    pub result: ResultFormat,
}

/// Every preset, by name.
pub const PRESETS: &[Preset] = &[Preset {
    name: "claude-code",
    package: "@anthropic-ai/claude-code",
    tested_version: "2.1.197",
    program: "claude",
    args: &["-p", "--output-format", "json"],
    model_flag: "--model",
    env: &[("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")],
    passthrough: &[
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_MODEL",
        "CLAUDE_CONFIG_DIR",
    ],
    permissions: claude_permissions,
    result: ResultFormat::ClaudeJson,
}];

/// The directory the contract's outputs go to, writable whatever the
/// restrictions say.
const OUTPUT_GLOB: &str = ".output/**";

/// Claude Code in print mode: unrestricted, file edits are accepted;
/// restricted, only `Write` and `Edit` of the restriction globs (and
/// `.output/`) are allowed, so the CLI refuses any other write itself
/// (`permission_denials`). `acceptEdits` would accept edits anywhere in the
/// working directory, whatever `--allowedTools` says.
fn claude_permissions(restrictions: Option<&[String]>) -> Vec<String> {
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
    args
}

/// The names of every preset, for messages.
pub fn names() -> String {
    PRESETS
        .iter()
        .map(|p| format!("`{}`", p.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The preset called `name`, or why there is none.
pub fn find(name: &str) -> Result<&'static Preset, String> {
    PRESETS.iter().find(|p| p.name == name).ok_or_else(|| {
        format!(
            "`{name}` is not an agent preset; the presets are {}",
            names()
        )
    })
}

impl Preset {
    /// The argv for a block: program, arguments, model, permission flags.
    /// The prompt goes on stdin.
    pub fn argv(&self, model: Option<&str>, restrictions: Option<&[String]>) -> Vec<String> {
        let mut argv = vec![self.program.to_string()];
        argv.extend(self.args.iter().map(|a| a.to_string()));
        if let Some(model) = model {
            argv.push(self.model_flag.to_string());
            argv.push(model.to_string());
        }
        argv.extend((self.permissions)(restrictions));
        argv
    }
}

/// A CLI's final result, as the adapter read it.
#[derive(Debug, Clone, PartialEq)]
pub struct CliResult {
    /// The CLI says it failed (an API error, a limit, …).
    pub is_error: bool,
    /// Its final message (bounded: [`MAX_SUMMARY_CHARS`]).
    pub summary: String,
    /// What the model consumed.
    pub usage: Usage,
    /// Tool calls the CLI's permissions refused, as `Tool path` (or the
    /// tool alone).
    pub denied: Vec<String>,
}

/// The most characters of a final message kept as the block's summary.
pub const MAX_SUMMARY_CHARS: usize = 16 * 1024;

/// Read a CLI's final result from its whole stdout (already bounded by the
/// output cap). Every defect — not UTF-8, not one JSON object, not a
/// result, a count that is not a whole number within `u64` — is an `Err`
/// saying why; nothing panics.
pub fn parse_result(format: ResultFormat, stdout: &[u8]) -> Result<CliResult, String> {
    match format {
        ResultFormat::ClaudeJson => parse_claude(stdout),
    }
}

fn parse_claude(stdout: &[u8]) -> Result<CliResult, String> {
    let text = std::str::from_utf8(stdout).map_err(|e| {
        format!(
            "the CLI's output is not UTF-8 (invalid byte at offset {})",
            e.valid_up_to()
        )
    })?;
    let text = text.trim();
    if text.is_empty() {
        return Err("the CLI printed no final result".into());
    }
    // The size is the caller's bound (the output cap).
    crate::limits::json_depth(text.as_bytes())
        .map_err(|e| format!("the CLI's final result is {e}"))?;
    let value: Value = serde_json::from_str(text)
        .map_err(|e| format!("the CLI's final result is not one JSON object: {e}"))?;
    let Some(object) = value.as_object() else {
        return Err("the CLI's final result is not a JSON object".into());
    };
    if object.get("type").and_then(Value::as_str) != Some("result") {
        return Err("the CLI's output is not its final result (`type` is not `result`)".into());
    }
    let is_error = match object.get("is_error") {
        Some(Value::Bool(b)) => *b,
        None => false,
        Some(_) => return Err("`is_error` is not true or false".into()),
    };
    let summary = match object.get("result") {
        Some(Value::String(s)) => bounded(s, MAX_SUMMARY_CHARS),
        None | Some(Value::Null) => String::new(),
        Some(_) => return Err("`result` is not text".into()),
    };
    let usage_value = object.get("usage").unwrap_or(&Value::Null);
    let count = |key: &str| -> Result<u64, String> {
        match usage_value.get(key) {
            None | Some(Value::Null) => Ok(0),
            Some(v) => v.as_u64().ok_or_else(|| {
                format!("usage.{key} is {v}, not a token count (a whole number up to 2^64-1)")
            }),
        }
    };
    if !(usage_value.is_object() || usage_value.is_null()) {
        return Err("`usage` is not an object".into());
    }
    let cost_usd = match object.get("total_cost_usd") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_f64() {
            Some(c) if c.is_finite() && c >= 0.0 => Some(c),
            _ => return Err(format!("total_cost_usd is {v}, not a cost")),
        },
    };
    let text_field = |v: Option<&Value>| -> Option<String> {
        v.and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(|s| bounded(s, MAX_USAGE_TEXT))
    };
    // The models that answered, by name (the CLI may use more than one).
    let model = object
        .get("modelUsage")
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect::<Vec<_>>().join(", "))
        .filter(|m| !m.is_empty())
        .map(|m| bounded(&m, MAX_USAGE_TEXT));
    let usage = Usage {
        input_tokens: count("input_tokens")?,
        output_tokens: count("output_tokens")?,
        cache_read_tokens: count("cache_read_input_tokens")?,
        cache_creation_tokens: count("cache_creation_input_tokens")?,
        cost_usd,
        model,
        session_id: text_field(object.get("session_id")),
    };
    let denied = object
        .get("permission_denials")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .take(100)
                .map(|d| {
                    let tool = d["tool_name"].as_str().unwrap_or("a tool");
                    match d["tool_input"]["file_path"].as_str() {
                        Some(path) => bounded(&format!("{tool} {path}"), 1024),
                        None => bounded(tool, 1024),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(CliResult {
        is_error,
        summary,
        usage,
        denied,
    })
}

/// At most `max` characters of `text`, marked when cut.
fn bounded(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((at, _)) => format!("{}… (cut at {max} characters)", &text[..at]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A result Claude Code 2.1.197 printed under the scripted model
    /// server (`tests/fixtures/model_server.py`).
    const RECORDED: &str = r#"{"type":"result","subtype":"success","is_error":false,"api_error_status":null,"duration_ms":147,"duration_api_ms":71,"num_turns":2,"result":"Wrote docs/hello.md.","stop_reason":"end_turn","session_id":"b57939b6-a474-4891-a6d5-e8efa10cd74f","total_cost_usd":0.0026750000000000003,"usage":{"input_tokens":320,"cache_creation_input_tokens":0,"cache_read_input_tokens":50,"output_tokens":42,"server_tool_use":{"web_search_requests":0,"web_fetch_requests":0},"service_tier":"standard"},"modelUsage":{"claude-test-1":{"inputTokens":320,"outputTokens":42,"cacheReadInputTokens":50,"cacheCreationInputTokens":0,"costUSD":0.0026750000000000003}},"permission_denials":[],"terminal_reason":"completed","uuid":"388d02d3-563e-4fd1-bc79-fdf66e7af6b6"}"#;

    /// The same CLI when the API refused its request.
    const RECORDED_ERROR: &str = r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":400,"duration_ms":108,"num_turns":1,"result":"API Error: 400 scenario exhausted","session_id":"4461954b-3ede-4246-bf80-87adb7f7b941","total_cost_usd":0,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0},"modelUsage":{},"permission_denials":[]}"#;

    #[test]
    fn a_recorded_result_is_read() {
        let r = parse_result(ResultFormat::ClaudeJson, format!("{RECORDED}\n").as_bytes()).unwrap();
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
        let r = parse_result(ResultFormat::ClaudeJson, RECORDED_ERROR.as_bytes()).unwrap();
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
        let r = parse_result(ResultFormat::ClaudeJson, text.as_bytes()).unwrap();
        assert_eq!(r.denied, ["Write /w/README.md", "Bash"]);
    }

    #[test]
    fn truncated_output_is_a_reason() {
        for cut in [1, 10, RECORDED.len() / 2, RECORDED.len() - 1] {
            let e =
                parse_result(ResultFormat::ClaudeJson, &RECORDED.as_bytes()[..cut]).unwrap_err();
            assert!(e.contains("not one JSON object"), "{cut}: {e}");
        }
        let e = parse_result(ResultFormat::ClaudeJson, b"  \n").unwrap_err();
        assert_eq!(e, "the CLI printed no final result");
    }

    #[test]
    fn invalid_utf8_is_a_reason() {
        let mut bytes = RECORDED.as_bytes().to_vec();
        bytes[40] = 0xff;
        let e = parse_result(ResultFormat::ClaudeJson, &bytes).unwrap_err();
        assert!(e.contains("not UTF-8") && e.contains("offset 40"), "{e}");
    }

    #[test]
    fn other_json_is_not_a_result() {
        for (text, why) in [
            ("[1, 2]", "not a JSON object"),
            (r#"{"type": "assistant"}"#, "not its final result"),
            (r#"{"type":"result","is_error":"no"}"#, "`is_error`"),
            (r#"{"type":"result","result":7}"#, "`result` is not text"),
            (
                r#"{"type":"result","usage":[]}"#,
                "`usage` is not an object",
            ),
            (r#"{"type":"result","total_cost_usd":-1}"#, "not a cost"),
            (
                "{\"type\":\"result\"} {\"type\":\"result\"}",
                "not one JSON object",
            ),
            ("Error: not logged in", "not one JSON object"),
        ] {
            let e = parse_result(ResultFormat::ClaudeJson, text.as_bytes()).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let e = parse_result(ResultFormat::ClaudeJson, deep.as_bytes()).unwrap_err();
        assert!(e.contains("nested"), "{e}");
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
            let e = parse_result(ResultFormat::ClaudeJson, text.as_bytes()).unwrap_err();
            assert!(
                e.contains("usage.output_tokens") && e.contains("not a token count"),
                "{bad}: {e}"
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
        let r = parse_result(ResultFormat::ClaudeJson, text.as_bytes()).unwrap();
        assert_eq!(r.usage.tokens(), u64::MAX);
    }

    #[test]
    fn long_texts_are_cut() {
        let long = "é".repeat(MAX_SUMMARY_CHARS + 10);
        let text = RECORDED
            .replace("Wrote docs/hello.md.", &long)
            .replace("b57939b6-a474-4891-a6d5-e8efa10cd74f", &"s".repeat(10_000));
        let r = parse_result(ResultFormat::ClaudeJson, text.as_bytes()).unwrap();
        assert!(r.summary.starts_with(&"é".repeat(MAX_SUMMARY_CHARS)));
        assert!(r.summary.ends_with("(cut at 16384 characters)"));
        assert!(r.usage.session_id.unwrap().chars().count() < MAX_USAGE_TEXT + 40);
    }

    #[test]
    fn a_hundred_megabytes_is_refused_by_the_caller_or_parsed_without_panic() {
        // The executor reads at most the output cap and reports a longer
        // stdout as truncated; what it hands over parses or is refused.
        let mut big = String::from(r#"{"type":"result","result":""#);
        big.push_str(&"x".repeat(100 << 20));
        let e = parse_result(ResultFormat::ClaudeJson, big.as_bytes()).unwrap_err();
        assert!(
            e.contains("not one JSON object"),
            "{}",
            &e[..e.len().min(200)]
        );
    }

    #[test]
    fn claude_code_argv() {
        let p = find("claude-code").unwrap();
        assert_eq!(
            p.argv(None, None),
            [
                "claude",
                "-p",
                "--output-format",
                "json",
                "--permission-mode",
                "acceptEdits"
            ]
        );
        let globs = vec!["docs/**".to_string()];
        assert_eq!(
            p.argv(Some("claude-test-1"), Some(&globs)),
            [
                "claude",
                "-p",
                "--output-format",
                "json",
                "--model",
                "claude-test-1",
                "--permission-mode",
                "default",
                "--allowedTools",
                "Write(docs/**)",
                "Edit(docs/**)",
                "Write(.output/**)",
                "Edit(.output/**)"
            ]
        );
    }

    #[test]
    fn unknown_presets_name_the_known_ones() {
        let e = find("claude").unwrap_err();
        assert_eq!(
            e,
            "`claude` is not an agent preset; the presets are `claude-code`"
        );
    }
}
