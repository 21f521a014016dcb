//! `agent`: runs an agent CLI for the block through the host's `agent`
//! capability, which the workflow must grant:
//! `"plugins": {"agent": {"grants": ["agent"]}}`.
//!
//! Config:
//! - `command` (required without a `preset`): the CLI's argv, e.g.
//!   `["claude", "-p", "{prompt}"]` or `["../agents/scripted_agent.py",
//!   "--role", "dev"]` (a relative program path with a `/` is resolved next
//!   to the workflow manifest). With a preset it replaces the preset's argv.
//! - `preset`: a known agent CLI (`claude-code`, `codex`, `gemini`,
//!   `opencode`); the host supplies its argv, permission flags from the
//!   block's file restrictions, offline environment (under `env`), its own
//!   state directory, and reads its output into the BlockOutput, usage
//!   included (`wfhost_core::agents::presets`).
//! - `model` (with a preset): the model the CLI is asked for.
//! - `resume` (with a preset): `true` continues the CLI's session of the
//!   block's previous execution in the run (a fix loop, a retry).
//! - `home` (with a preset): `isolated` (default: a state directory per
//!   run and block or lane) or `user` (the user's own `HOME`).
//! - `prompt_delivery`: `stdin` (default), `argument` (`{prompt}` in the
//!   argv, else appended) or `file` (`{prompt-file}` / `AGENT_PROMPT_FILE`).
//! - `block_type`: `plan`, `dev` (default), `test`, `review`, `devops`.
//! - `protocol`: `block-output` (default, seed 000) or `json` (seed 001:
//!   the universal input on stdin, JSON-only output on stdout).
//! - `input` (json protocol): the universal input's fields; `task` is
//!   required, `project_type` defaults to `mixed`, `repo_state` to an
//!   unknown CI state, `tools_available` to `[]`, `artifact_list` to the
//!   block's artifacts. `{session}` in any of its strings is the run's
//!   session folder (`.agents-work/<session>`, from `SESSION_DIR`). Every
//!   `task.context_files` entry must exist in the workspace before the
//!   agent runs: a missing one ends the block `SIGNAL:BLOCKED` naming it,
//!   and the agent is not run.
//! - `on_violation`: `rollback` (default: changes outside the block's
//!   file restrictions are undone) or `fail` (left in place; the block
//!   fails).
//! - `env`: extra environment variables; a value may be `{"secret":
//!   "NAME"}`, resolved by the host that runs the agent when it starts it
//!   and masked in the output it keeps.
//! - `env_passthrough`: names of variables of wfhost's own environment the
//!   agent gets (beyond the host's documented base).
//! - `executor`: `"local"` or `{"container": {"image": …}}`; unset, the
//!   run's default executor when that is a container, else local.
//!
//! Signals: the host's mapping of the outcome (see `agent-report.signal`
//! in `wit/since_v0.1.0/plugin.wit`): `SIGNAL:SUCCESS`, `SIGNAL:PARTIAL`,
//! `SIGNAL:FAILED`, and for the json protocol `SIGNAL:BLOCKED`,
//! `SIGNAL:NEEDS_INFO`, `SIGNAL:FAIL`, `SIGNAL:NEEDS_DECISION` (the engine
//! opens a gate unless the block routes it) and `SIGNAL:PROTOCOL_ERROR`.
//! The payload gets an `AGENT_OUTPUT` segment; for `NEEDS_DECISION` also
//! a `DECISION_REQUEST` (the agent's summary) followed by one question per
//! `gates.security_concerns` entry (`SECURITY_QUESTION`: never cancelled
//! for want of an answer) and per `artifacts.findings` entry
//! (`DECISION_QUESTION`), so the gate asks each under its own decision id.
//! The structured output is the BlockOutput.

use std::collections::BTreeMap;

use serde::Deserialize;
use wfhost_sdk::agent;
use wfhost_sdk::exec::ContainerOptions;
use wfhost_sdk::prelude::*;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum Executor {
    Local,
    Container {
        image: String,
        #[serde(default)]
        cpus: Option<f64>,
        #[serde(default)]
        memory_mb: Option<u64>,
        /// Endpoints relayed into the container (`host:port`; read and
        /// checked by the host).
        #[serde(default)]
        #[allow(dead_code)]
        forward: Vec<String>,
    },
}

#[derive(Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Delivery {
    #[default]
    Stdin,
    Argument,
    File,
}

#[derive(Deserialize, Default, Clone, Copy, PartialEq)]
#[serde(rename_all = "kebab-case")]
enum Protocol {
    #[default]
    BlockOutput,
    Json,
}

#[derive(Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum OnViolation {
    #[default]
    Rollback,
    Fail,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    command: Vec<String>,
    /// A known agent CLI (`claude-code`): the host supplies its argv,
    /// environment and result adapter (`wfhost_core::agents::presets`).
    #[serde(default)]
    preset: Option<String>,
    /// The model a preset's CLI is asked for.
    #[serde(default)]
    model: Option<String>,
    /// Continue the preset CLI's session of the block's previous
    /// execution (read and checked by the host).
    #[serde(default)]
    #[allow(dead_code)]
    resume: Option<serde_json::Value>,
    /// Where the preset's CLI keeps its state: `isolated` or `user` (read
    /// and checked by the host).
    #[serde(default)]
    #[allow(dead_code)]
    home: Option<serde_json::Value>,
    #[serde(default)]
    prompt_delivery: Delivery,
    #[serde(default = "default_block_type")]
    block_type: String,
    #[serde(default)]
    protocol: Protocol,
    #[serde(default)]
    input: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    on_violation: OnViolation,
    #[serde(default)]
    env: BTreeMap<String, wfhost_sdk::env::EnvValue>,
    #[serde(default)]
    env_passthrough: Vec<String>,
    #[serde(default)]
    executor: Option<Executor>,
}

fn default_block_type() -> String {
    "dev".into()
}

/// The universal input JSON: the configured fields over the defaults.
fn input_json(config: &Config, ctx: &BlockContext) -> Result<Option<String>, PluginError> {
    if config.protocol != Protocol::Json {
        if config.input.is_some() {
            return Err(PluginError::new(
                "bad-config",
                "`input` is only for `\"protocol\": \"json\"`",
            ));
        }
        return Ok(None);
    }
    let Some(input) = &config.input else {
        return Err(PluginError::new(
            "bad-config",
            "the json protocol needs `input` with at least a `task`",
        ));
    };
    if !input.contains_key("task") {
        return Err(PluginError::new("bad-config", "`input.task` is required"));
    }
    let mut full = serde_json::Map::new();
    full.insert("project_type".into(), "mixed".into());
    full.insert(
        "repo_state".into(),
        serde_json::json!({"branch": "", "ci_status": "unknown"}),
    );
    full.insert("tools_available".into(), serde_json::json!([]));
    full.insert(
        "artifact_list".into(),
        ctx.artifacts
            .iter()
            .map(|a| serde_json::Value::String(a.block_id.clone()))
            .collect(),
    );
    let session = std::env::var("SESSION_DIR").ok();
    for (k, v) in input {
        full.insert(k.clone(), with_session(v, session.as_deref())?);
    }
    Ok(Some(serde_json::Value::Object(full).to_string()))
}

/// `value` with `{session}` in its strings replaced by the session folder.
fn with_session(
    value: &serde_json::Value,
    session: Option<&str>,
) -> Result<serde_json::Value, PluginError> {
    use serde_json::Value;
    Ok(match value {
        Value::String(s) if s.contains("{session}") => match session {
            Some(dir) => Value::String(s.replace("{session}", dir)),
            None => {
                return Err(PluginError::new(
                    "bad-config",
                    format!("`{s}` names `{{session}}`, but this run keeps no session folder"),
                ));
            }
        },
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| with_session(v, session))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), with_session(v, session)?)))
                .collect::<Result<_, PluginError>>()?,
        ),
        other => other.clone(),
    })
}

/// The first `task.context_files` entry that is not a file of the
/// workspace (the current directory), with why; checked before the agent
/// runs, as the contract requires.
fn missing_context_file(input_json: &str) -> Option<String> {
    let input: serde_json::Value = serde_json::from_str(input_json).ok()?;
    let files = input["task"]["context_files"].as_array()?;
    files.iter().find_map(|entry| {
        let path = entry.as_str()?;
        let escapes = std::path::Path::new(path).components().any(|c| {
            !matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        });
        if path.is_empty() || escapes {
            Some(format!(
                "context file `{path}` is not a path inside the workspace"
            ))
        } else if !std::path::Path::new(path).is_file() {
            Some(format!("context file `{path}` is missing"))
        } else {
            None
        }
    })
}

fn invocation(config: &Config, ctx: &BlockContext) -> Result<agent::AgentInvocation, PluginError> {
    if config.preset.is_none() && config.model.is_some() {
        return Err(PluginError::new(
            "bad-config",
            "`model` is for a `preset`; with a `command` of your own, pass the model in it",
        ));
    }
    // With a preset, no command: the host's argv for it.
    let needs_command = config.preset.is_none() || !config.command.is_empty();
    if needs_command && config.command.first().is_none_or(|p| p.trim().is_empty()) {
        return Err(PluginError::new(
            "bad-config",
            "`command` needs at least the program (or name a `preset`)",
        ));
    }
    Ok(agent::AgentInvocation {
        argv: config.command.clone(),
        env: wfhost_sdk::env::to_wire(&config.env_passthrough, &config.env),
        prompt: ctx.system_prompt.clone(),
        prompt_delivery: match config.prompt_delivery {
            Delivery::Stdin => agent::PromptDelivery::Stdin,
            Delivery::Argument => agent::PromptDelivery::Argument,
            Delivery::File => agent::PromptDelivery::File,
        },
        protocol: match config.protocol {
            Protocol::BlockOutput => agent::Protocol::BlockOutput,
            Protocol::Json => agent::Protocol::Json,
        },
        input_json: input_json(config, ctx)?,
        block_type: config.block_type.clone(),
        on_violation: match config.on_violation {
            OnViolation::Rollback => agent::OnViolation::Rollback,
            OnViolation::Fail => agent::OnViolation::Fail,
        },
        executor: config.executor.as_ref().map(|e| match e {
            Executor::Local => agent::AgentExecutor::Local,
            Executor::Container {
                image,
                cpus,
                memory_mb,
                ..
            } => agent::AgentExecutor::Container(ContainerOptions {
                image: image.clone(),
                cpus: *cpus,
                memory_mb: *memory_mb,
            }),
        }),
    })
}

/// The `AGENT_OUTPUT` segment: what the agent did, in a few lines.
fn report_text(report: &agent::AgentReport, agent_id: &str) -> String {
    let output: serde_json::Value = serde_json::from_str(&report.block_output).unwrap_or_default();
    let mut lines = vec![format!(
        "agent {agent_id} -> {} ({}): {}",
        report.signal,
        output["status"].as_str().unwrap_or("?"),
        output["summary"].as_str().unwrap_or("")
    )];
    if let Some(defect) = &report.defect {
        lines.push(format!("output replaced: {defect}"));
    }
    if let Some(e) = &report.protocol_error {
        lines.push(format!("protocol error: {e}"));
    }
    let list = |paths: &[String]| {
        if paths.is_empty() {
            "none".to_string()
        } else {
            paths.join(", ")
        }
    };
    lines.push(format!(
        "changed: modified {}; created {}; removed {}",
        list(&report.files_modified),
        list(&report.files_created),
        list(&report.files_removed)
    ));
    if let Some(m) = &report.claim_mismatch {
        lines.push(format!("claims differ from the workspace: {m}"));
    }
    if !report.violations.is_empty() {
        // On the run's screen and in `show`, even when the block succeeds.
        log::warn(format!(
            "changes outside the file restrictions {}: {}",
            if report.rolled_back {
                "were rolled back"
            } else {
                "were left in place; the block fails"
            },
            report.violations.join(", ")
        ));
        lines.push(format!(
            "outside the file restrictions ({}): {}",
            if report.rolled_back {
                "rolled back"
            } else {
                "left in place; the block fails"
            },
            report.violations.join(", ")
        ));
    }
    lines.push(format!("bundle {}", report.result.bundle_dir));
    lines.join("\n")
}

pub struct Agent;

impl Worker for Agent {
    fn run(ctx: BlockContext, mut payload: Payload) -> Result<WorkerOutput, PluginError> {
        let config: Config = ctx.config()?;
        let invocation = invocation(&config, &ctx)?;
        if let Some(why) = invocation
            .input_json
            .as_deref()
            .and_then(missing_context_file)
        {
            log::warn(format!("BLOCKED before the agent ran: {why}"));
            payload.push(segment(
                "AGENT_OUTPUT",
                format!("BLOCKED: {why}; the agent was not run"),
            ));
            return Ok(WorkerOutput::new(payload, "SIGNAL:BLOCKED"));
        }
        let report = agent::run(&invocation).map_err(|e| match e {
            wfhost_sdk::exec::ExecError::Refused(m) => PluginError::new("refused", m),
            wfhost_sdk::exec::ExecError::Invalid(m) => PluginError::new("invalid", m),
            wfhost_sdk::exec::ExecError::Unavailable(m) => PluginError::new("unavailable", m),
            wfhost_sdk::exec::ExecError::Failed(m) => PluginError::new("failed", m),
        })?;
        if let Some(error) = report.result.commands.iter().find_map(|c| c.error.clone()) {
            return Err(PluginError::new(
                "agent-not-started",
                format!("{error} (bundle {})", report.result.bundle_dir),
            ));
        }
        // The output names the block as the agent saw it (a lane's NODE_ID
        // includes the lane).
        let agent_id = serde_json::from_str::<serde_json::Value>(&report.block_output)
            .ok()
            .and_then(|o| o["blockId"].as_str().map(str::to_string))
            .unwrap_or_else(|| format!("{}.{}", ctx.node_id, ctx.block_id));
        let text = report_text(&report, &agent_id);
        log::info(text.lines().next().unwrap_or_default());
        payload.push(segment("AGENT_OUTPUT", text));
        if let Some(question) = &report.decision_prompt {
            payload.push(segment("DECISION_REQUEST", question.clone()));
            for (kind, text) in decision_questions(report.protocol_output.as_deref()) {
                payload.push(segment(kind, text));
            }
        }
        Ok(WorkerOutput::new(payload, report.signal.clone())
            .with_structured_output(report.block_output.clone()))
    }
}

/// The questions of a `NEEDS_DECISION` universal output: its security
/// concerns, then its findings.
fn decision_questions(protocol_output: Option<&str>) -> Vec<(&'static str, String)> {
    let Some(output) =
        protocol_output.and_then(|o| serde_json::from_str::<serde_json::Value>(o).ok())
    else {
        return Vec::new();
    };
    let texts = |value: &serde_json::Value| -> Vec<String> {
        value
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect()
    };
    let mut questions: Vec<(&'static str, String)> = texts(&output["gates"]["security_concerns"])
        .into_iter()
        .map(|t| ("SECURITY_QUESTION", t))
        .collect();
    questions.extend(
        texts(&output["artifacts"]["findings"])
            .into_iter()
            .map(|t| ("DECISION_QUESTION", t)),
    );
    questions
}

export_worker!(Agent);
wfhost_sdk::declare_signals![
    "SIGNAL:SUCCESS",
    "SIGNAL:PARTIAL",
    "SIGNAL:FAILED",
    "SIGNAL:BLOCKED",
    "SIGNAL:NEEDS_INFO",
    "SIGNAL:FAIL",
    "SIGNAL:NEEDS_DECISION",
    "SIGNAL:PROTOCOL_ERROR"
];

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(config: serde_json::Value) -> BlockContext {
        BlockContext::for_test("implement", config)
    }

    #[test]
    fn a_decision_asks_security_concerns_then_findings() {
        let output = serde_json::json!({
            "status": "NEEDS_DECISION", "summary": "Two medium findings.",
            "artifacts": {"findings": ["Keep the session cookie 30 days?", " "]},
            "gates": {"meets_definition_of_done": false, "needs_review": false,
                      "needs_tests": false, "security_concerns": ["Log the raw token?"]}
        })
        .to_string();
        assert_eq!(
            decision_questions(Some(&output)),
            [
                ("SECURITY_QUESTION", "Log the raw token?".to_string()),
                (
                    "DECISION_QUESTION",
                    "Keep the session cookie 30 days?".to_string()
                )
            ]
        );
        assert!(decision_questions(None).is_empty());
        assert!(decision_questions(Some("not json")).is_empty());
    }

    #[test]
    fn a_preset_needs_no_command() {
        let c = ctx(serde_json::json!({"preset": "claude-code", "model": "m"}));
        let config: Config = c.config().unwrap();
        let inv = invocation(&config, &c).unwrap();
        assert!(inv.argv.is_empty(), "the host supplies the preset's argv");
        assert!(matches!(inv.prompt_delivery, agent::PromptDelivery::Stdin));
        let c = ctx(serde_json::json!({"preset": "claude-code", "command": ["claude", "-p"]}));
        let config: Config = c.config().unwrap();
        assert_eq!(invocation(&config, &c).unwrap().argv, ["claude", "-p"]);
        for bad in [
            serde_json::json!({}),
            serde_json::json!({"command": []}),
            serde_json::json!({"command": ["x"], "model": "m"}),
        ] {
            let c = ctx(bad.clone());
            let config: Config = c.config().unwrap();
            assert!(invocation(&config, &c).is_err(), "{bad}");
        }
    }

    #[test]
    fn config_maps_to_the_invocation() {
        let c = ctx(serde_json::json!({
            "command": ["agent", "-p", "{prompt}"],
            "prompt_delivery": "argument",
            "block_type": "plan",
            "on_violation": "fail",
            "env": {"A": "1"},
            "executor": {"container": {"image": "img:1"}}
        }));
        let config: Config = c.config().unwrap();
        let inv = invocation(&config, &c).unwrap();
        assert_eq!(inv.argv, ["agent", "-p", "{prompt}"]);
        assert!(matches!(
            inv.prompt_delivery,
            agent::PromptDelivery::Argument
        ));
        assert!(matches!(inv.on_violation, agent::OnViolation::Fail));
        assert_eq!(inv.block_type, "plan");
        assert_eq!(inv.env, [("A".to_string(), "1".to_string())]);
        assert!(
            matches!(inv.executor, Some(agent::AgentExecutor::Container(ref o)) if o.image == "img:1")
        );
        assert!(inv.input_json.is_none());
    }

    #[test]
    fn json_protocol_input_fills_defaults_and_needs_a_task() {
        let c = ctx(serde_json::json!({
            "command": ["a"], "protocol": "json",
            "input": {"task": {"id": "T-1", "title": "t", "goal": "g"}, "tools_available": ["git"]}
        }));
        let config: Config = c.config().unwrap();
        let input: serde_json::Value =
            serde_json::from_str(&input_json(&config, &c).unwrap().unwrap()).unwrap();
        assert_eq!(input["task"]["id"], "T-1");
        assert_eq!(input["project_type"], "mixed");
        assert_eq!(input["repo_state"]["ci_status"], "unknown");
        assert_eq!(input["tools_available"][0], "git");

        let c = ctx(serde_json::json!({"command": ["a"], "protocol": "json"}));
        let config: Config = c.config().unwrap();
        assert!(input_json(&config, &c).is_err());
        let c = ctx(serde_json::json!({"command": ["a"], "input": {"task": {}}}));
        let config: Config = c.config().unwrap();
        assert!(input_json(&config, &c).is_err());
    }

    #[test]
    fn session_placeholders_and_context_files() {
        let input =
            serde_json::json!({"task": {"context_files": ["{session}/spec.md", "README.md"]}});
        let filled = with_session(&input, Some(".agents-work/2026-11-23_s")).unwrap();
        assert_eq!(
            filled["task"]["context_files"][0],
            ".agents-work/2026-11-23_s/spec.md"
        );
        assert_eq!(filled["task"]["context_files"][1], "README.md");
        let e = with_session(&input, None).unwrap_err();
        assert!(
            e.message.contains("keeps no session folder"),
            "{}",
            e.message
        );

        // Tests run in the crate's directory.
        let files = |list: serde_json::Value| {
            serde_json::json!({"task": {"context_files": list}}).to_string()
        };
        assert_eq!(
            missing_context_file(&files(serde_json::json!(["Cargo.toml", "src/lib.rs"]))),
            None
        );
        let why =
            missing_context_file(&files(serde_json::json!(["Cargo.toml", "spec.md"]))).unwrap();
        assert_eq!(why, "context file `spec.md` is missing");
        for escaping in ["../Cargo.toml", "/etc/hostname", ""] {
            let why = missing_context_file(&files(serde_json::json!([escaping]))).unwrap();
            assert!(why.contains("not a path inside the workspace"), "{why}");
        }
        assert_eq!(missing_context_file(&files(serde_json::json!("src"))), None);
        assert!(
            missing_context_file(&files(serde_json::json!(["src"]))).is_some(),
            "a directory is not a file"
        );
    }

    #[test]
    fn bad_configs_are_refused() {
        for bad in [
            serde_json::json!({}),
            serde_json::json!({"command": []}),
            serde_json::json!({"command": ["a"], "prompt_delivery": "telepathy"}),
            serde_json::json!({"command": ["a"], "unknown": 1}),
        ] {
            let c = ctx(bad.clone());
            let parsed: Result<Config, _> = c.config();
            assert!(
                parsed.is_err() || invocation(&parsed.unwrap(), &c).is_err(),
                "{bad}"
            );
        }
    }
}
