//! A preset's part of an agent invocation
//! ([`wfhost_core::agents::presets`]): the CLI's argv and prompt delivery
//! (unless the block gives its own `command`), its environment under the
//! block's own `env`, its configuration files, its own state directory
//! (per run and block or lane), and the session it continues.
//!
//! The state directory is `.output/agent/<run>/home/<NODE_ID>` in the
//! workspace: outside what the change detection watches, and where a
//! container sees it too. The session id the CLI reported is recorded
//! there after each invocation (`.wfhost-session`: the session id and the
//! usage the CLI reported), so a block executed again in the run with
//! `resume: true` continues it.

use wfhost_core::agents::block_output::Usage;
use wfhost_core::agents::presets::{self, Delivery, Home, Preset, ResultFormat};
use wfhost_core::ids::SafeName;
use wfhost_exec::agent::{AgentExecutor, PromptDelivery};

use crate::bindings::executor_types as wit;
use crate::capabilities::scope::ExecScope;

/// The file, in the state directory, that records the CLI's last session
/// (JSON: [`SessionRecord`]).
const SESSION_RECORD: &str = ".wfhost-session";

/// An agent invocation with its preset applied.
pub(crate) struct Prepared {
    pub argv: Vec<String>,
    /// The preset's delivery, when its argv is used.
    pub delivery: Option<PromptDelivery>,
    /// The command's own variables: what the preset passes through, its
    /// settings, then the block's `env`.
    pub env: Vec<(String, String)>,
    pub result_format: Option<ResultFormat>,
    /// Where the session is recorded (workspace-relative).
    pub record: Option<String>,
    /// The model asked for.
    pub model: Option<String>,
    /// What the session already reported, for a CLI whose usage is the
    /// session's total.
    pub usage_before: Option<Usage>,
    /// That CLI reports the session's total.
    pub cumulative: bool,
    /// The endpoints its environment names (`*_BASE_URL`), relayed into
    /// a container.
    pub endpoints: Vec<wfhost_exec::forward::Forward>,
    /// Values of keys and tokens passed through from wfhost's
    /// environment: masked in what the CLI prints, like secrets.
    pub mask: Vec<String>,
}

/// The invocation with the block's preset applied (its state directory
/// made, its configuration files written); without a preset, the block's
/// argv and env as they are.
pub(crate) fn prepare(
    scope: &ExecScope,
    argv: Vec<String>,
    block_env: Vec<(String, String)>,
    executor: &AgentExecutor,
    json_protocol: bool,
) -> Result<Prepared, wit::ExecError> {
    let settings = scope.agent.clone().map_err(wit::ExecError::Invalid)?;
    let Some(preset) = settings.preset() else {
        return Ok(Prepared {
            argv,
            delivery: None,
            env: block_env,
            result_format: None,
            record: None,
            model: None,
            usage_before: None,
            cumulative: false,
            endpoints: Vec::new(),
            mask: Vec::new(),
        });
    };
    let home_rel = state_dir(scope)?;
    let container = matches!(executor, AgentExecutor::Container { .. });
    let workspace_seen = match container {
        false => scope.workspace.display().to_string(),
        true => wfhost_exec::container::CONTAINER_WORKSPACE.to_string(),
    };
    let home_seen = format!("{workspace_seen}/{home_rel}");
    wfhost_core::workspace::ensure_host_dir(&scope.workspace, &home_rel)
        .map_err(|e| wit::ExecError::Failed(format!("the agent's state directory: {e}")))?;
    let record = format!("{home_rel}/{SESSION_RECORD}");
    let previous = previous_session(scope, &record);
    let resume = previous
        .as_ref()
        .filter(|_| settings.resume)
        .map(|p| p.session.clone());
    // A CLI that reports the session's total: what it reported before.
    let usage_before = previous
        .filter(|_| settings.resume && preset.cumulative_usage)
        .map(|p| p.reported);
    let passed: Vec<(String, String)> = preset
        .passthrough
        .iter()
        .filter_map(|name| Some((name.to_string(), std::env::var(name).ok()?)))
        .collect();
    let mask = passed
        .iter()
        .filter(|(k, _)| k.ends_with("_KEY") || k.ends_with("_TOKEN"))
        .map(|(_, v)| v.clone())
        .collect();
    let var = |name: &str| {
        block_env
            .iter()
            .chain(&passed)
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let invocation = preset.invocation(&presets::Block {
        model: settings.model.as_deref(),
        restrictions: scope.restrictions.as_deref(),
        home: (settings.home == Home::Isolated).then_some(home_seen.as_str()),
        resume: resume.as_deref(),
        workspace: &workspace_seen,
        container,
        var: &var,
    });
    for (rel, contents) in &invocation.files {
        wfhost_core::workspace::write_file(
            &scope.workspace,
            &format!("{home_rel}/{rel}"),
            contents.as_bytes(),
            false,
        )
        .map_err(|e| wit::ExecError::Failed(format!("the agent's {rel}: {e}")))?;
    }
    let (argv, delivery) = if argv.is_empty() {
        if matches!(executor, AgentExecutor::Local) {
            installed(preset, &block_env)?;
        }
        let delivery = match invocation.delivery {
            Delivery::Stdin => PromptDelivery::Stdin,
            Delivery::Argument => PromptDelivery::Argument,
        };
        (invocation.argv, Some(delivery))
    } else {
        (argv, None)
    };
    let mut env = passed;
    env.extend(invocation.env);
    env.extend(block_env);
    let endpoints = env
        .iter()
        .filter(|(k, _)| k.ends_with("_BASE_URL"))
        .filter_map(|(_, url)| wfhost_exec::forward::Forward::of_url(url))
        .collect();
    Ok(Prepared {
        argv,
        delivery,
        env,
        result_format: (!json_protocol).then_some(preset.result),
        record: Some(record),
        model: settings.model.clone(),
        usage_before,
        cumulative: preset.cumulative_usage,
        endpoints,
        mask,
    })
}

/// The block's (or lane's) state directory, workspace-relative.
fn state_dir(scope: &ExecScope) -> Result<String, wit::ExecError> {
    let agent = SafeName::parse_as("agent id", &scope.agent_id)
        .map_err(|e| wit::ExecError::Invalid(e.to_string()))?;
    Ok(format!(".output/agent/{}/home/{agent}", scope.run_id))
}

/// What is recorded of the block's last invocation in the run: the CLI's
/// session, and the usage it reported for it (the session's total, for a
/// CLI that reports that).
struct SessionRecord {
    session: String,
    reported: Usage,
}

/// The block's previous invocation in the run, if it reported a session
/// that may be given back to a CLI.
fn previous_session(scope: &ExecScope, record: &str) -> Option<SessionRecord> {
    let bytes = wfhost_core::workspace::read_file(&scope.workspace, record, 16 << 10).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let session = presets::session_id(value["session"].as_str()?)?.to_string();
    let reported = serde_json::from_value(value["reported"].clone()).ok()?;
    Some(SessionRecord { session, reported })
}

/// Record the session the CLI reported and its usage (with `before`, what
/// the session had reported before, for a CLI that reports its total),
/// for a later `resume: true`.
pub(crate) fn remember_session(scope: &ExecScope, prepared: &Prepared, usage: Option<&Usage>) {
    let (Some(record), Some(usage)) = (&prepared.record, usage) else {
        return;
    };
    let Some(session) = usage.session_id.as_deref().and_then(presets::session_id) else {
        return;
    };
    let mut reported = usage.clone();
    if let Some(before) = prepared
        .usage_before
        .as_ref()
        .filter(|b| prepared.cumulative && b.session_id.as_deref() == Some(session))
    {
        reported.input_tokens = reported.input_tokens.saturating_add(before.input_tokens);
        reported.output_tokens = reported.output_tokens.saturating_add(before.output_tokens);
        reported.cache_read_tokens = reported
            .cache_read_tokens
            .saturating_add(before.cache_read_tokens);
        reported.cache_creation_tokens = reported
            .cache_creation_tokens
            .saturating_add(before.cache_creation_tokens);
    }
    let record_json =
        serde_json::to_vec(&serde_json::json!({"session": session, "reported": reported}))
            .unwrap_or_default();
    // Best effort, not synced: without the record (lost with the
    // machine), a resumed block starts afresh.
    let _ = wfhost_core::workspace::write_file(&scope.workspace, record, &record_json, false);
}

/// A preset's CLI on this host, or an error that says how to install it
/// (looked up on the `PATH` the command gets: the block's, else wfhost's).
fn installed(preset: &Preset, env: &[(String, String)]) -> Result<(), wit::ExecError> {
    let path = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var("PATH").ok())
        .unwrap_or_default();
    let found = std::env::split_paths(&path).any(|dir| {
        use std::os::unix::fs::PermissionsExt;
        dir.join(preset.program)
            .metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    });
    if found {
        return Ok(());
    }
    Err(wit::ExecError::Unavailable(format!(
        "the {} preset runs `{}`, which is not on PATH: install it with `npm install -g {}@{}` (the version wfhost is tested with), or give the block a `command`",
        preset.name, preset.program, preset.package, preset.tested_version
    )))
}
