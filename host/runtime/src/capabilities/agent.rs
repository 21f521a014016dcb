//! The host side of the `agent` capability: a thin adapter from the WIT
//! interface onto [`wfhost_exec::agent::run_agent`], which runs the CLI
//! and checks what it did.

use std::path::Path;

use wfhost_core::agents::agent_protocol::ChangedFile;
use wfhost_core::agents::agent_protocol::{self, Verdict};
use wfhost_core::agents::artifact_content::{Changer, MAX_ARTIFACT_BYTES, check_task_changes};
use wfhost_core::agents::block_output::{self, BlockType};
use wfhost_core::agents::session_artifacts::HOST_TASKS_MARK;
use wfhost_core::agents::session_changes;
use wfhost_exec::agent::{
    AgentExecutor, AgentOutcome, AgentRequest, PromptDelivery, Protocol, ViolationPolicy,
};

use wasmtime::component::{HasData, Linker};

use super::scope::{
    ExecScope, TelemetryTarget, calling_block, to_container_options, to_wit_error, to_wit_result,
};
use crate::bindings::{agent, executor_types as wit};

/// The capability's own state, per block: the model usage its agents
/// reported (`usage`), added to the block's statistics when it ends.
#[derive(Debug, Default)]
pub(crate) struct AgentState {
    /// The model tokens the block's agents consumed.
    pub tokens: u64,
    /// The same, broken down as the CLIs reported it.
    pub usage: wfhost_core::run::payload::ModelUsage,
}

/// The capability's view of the store, as `WasiCtxView` is WASI's: what it
/// knows of the calling block, and its own state.
pub(crate) struct AgentCtxView<'a> {
    pub scope: Option<&'a ExecScope>,
    pub state: &'a mut AgentState,
}

impl AgentCtxView<'_> {
    fn scope(&self) -> Result<ExecScope, wit::ExecError> {
        calling_block(self.scope)
    }
}

/// A store that serves `agent` (as `WasiView` is one that serves WASI).
pub(crate) trait AgentView: Send {
    fn agent(&mut self) -> AgentCtxView<'_>;
}

struct Agent;

impl HasData for Agent {
    type Data<'a> = AgentCtxView<'a>;
}

/// Link `wfhost:plugin/agent`.
pub(crate) fn link<T: AgentView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    agent::add_to_linker::<T, Agent>(linker, T::agent)
}

/// Resolve the CLI's program: a relative path with a `/` is the workflow's
/// (next to its manifest), like a plugin path; a bare name is left to
/// `PATH`.
fn resolve_program(argv: &mut [String], manifest_dir: Option<&Path>) {
    let (Some(program), Some(dir)) = (argv.first_mut(), manifest_dir) else {
        return;
    };
    if program.contains('/') && Path::new(program.as_str()).is_relative() {
        *program = dir.join(program.as_str()).display().to_string();
    }
}

/// The seed-000 env contract for an agent CLI: the block's (its
/// `NODE_ID` already names the block or lane the way
/// `.output/block-<NODE_ID>.json` and the next block's `PREVIOUS_BLOCK_ID`
/// do, for the guest too), with the agent's telemetry.
fn agent_env(scope: &ExecScope, telemetry_url: Option<String>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = scope
        .env
        .iter()
        .filter(|(k, _)| k != "TELEMETRY_ENABLED")
        .cloned()
        .collect();
    let (enabled, url) = match telemetry_url {
        Some(url) => ("1", url),
        None => ("0", String::new()),
    };
    env.push(("TELEMETRY_ENABLED".into(), enabled.into()));
    env.push(("TELEMETRY_URL".into(), url));
    env
}

/// The signal the contract maps an outcome to, and the gate question of a
/// `NEEDS_DECISION` (see `agent-report.signal` in `wit/plugin.wit`).
fn signal_of(outcome: &AgentOutcome) -> (String, Option<String>) {
    if !outcome.violations.is_empty() && !outcome.rolled_back {
        return ("SIGNAL:FAILED".into(), None);
    }
    match &outcome.protocol {
        None => (outcome.output.status.signal().to_string(), None),
        Some(Err(_)) => ("SIGNAL:PROTOCOL_ERROR".into(), None),
        // A well-formed answer from an agent that then exited non-zero,
        // was killed or timed out is not its answer: the block's output is
        // the synthetic failure that says why, and so is its signal.
        Some(Ok(_)) if outcome.defect.is_some() => {
            (outcome.output.status.signal().to_string(), None)
        }
        Some(Ok(output)) => match agent_protocol::verdict(output) {
            Verdict::Signal(signal) => (signal.to_string(), None),
            Verdict::Gate(question) => (
                wfhost_core::run::transitions::NEEDS_DECISION.to_string(),
                Some(question),
            ),
        },
    }
}

/// The session folder, workspace-relative, when the run keeps one.
fn session_folder(scope: &ExecScope) -> Option<&str> {
    scope
        .env
        .iter()
        .find(|(k, _)| k == "SESSION_DIR")
        .map(|(_, v)| v.as_str())
}

/// The files the session changed so far, as the host detected them.
fn session_changes(scope: &ExecScope) -> Vec<ChangedFile> {
    let Some(folder) = session_folder(scope) else {
        return Vec::new();
    };
    let rel = format!("{folder}/{}", session_changes::FILE_NAME);
    wfhost_core::workspace::read_file(&scope.workspace, &rel, 16 << 20)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// A Reviewer's universal input with `task.session_changed_files` from the
/// host's detection (unless the workflow gave a list of its own).
fn with_session_changes(
    scope: &ExecScope,
    block_type: BlockType,
    input: Option<String>,
) -> Option<String> {
    let text = input?;
    if block_type != BlockType::Review {
        return Some(text);
    }
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Some(text);
    };
    let task = &mut value["task"];
    let given = task["session_changed_files"]
        .as_array()
        .is_some_and(|l| !l.is_empty());
    if !given && task.is_object() {
        task["session_changed_files"] = serde_json::json!(session_changes(scope));
    }
    Some(value.to_string())
}

/// A universal input with its `repo_state` read from the workspace's
/// repository where the workflow left the defaults (see
/// `wfhost_core::agents::repo_state`).
fn with_repo_state(scope: &ExecScope, input: &str) -> String {
    let state =
        wfhost_core::agents::repo_state::read(&scope.workspace, session_folder(scope), jj_bookmark);
    wfhost_core::agents::repo_state::fill(input, &state)
}

/// How long `jj` may take to name a bookmark before it is given up (and
/// killed): a repository's own configuration is not to hold a run up.
const JJ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The jj bookmark of the working copy at `workspace` (`@`, else its
/// parent); `None` when `jj` is not installed, fails, takes longer than
/// [`JJ_TIMEOUT`], or names none.
fn jj_bookmark(workspace: &Path) -> Option<String> {
    for rev in ["@", "@-"] {
        let text = jj_log(workspace, rev)?;
        if let Some(first) = text.split_whitespace().next() {
            // `main*` (moved), `main@origin` (remote): the local name.
            let name = first.trim_end_matches(['*', '?']);
            let name = name.split('@').next().unwrap_or(name);
            if !name.is_empty() {
                return Some(name.to_string());
            }
        }
    }
    None
}

/// `jj log -r REV -T bookmarks` in `workspace`, within [`JJ_TIMEOUT`].
fn jj_log(workspace: &Path, rev: &str) -> Option<String> {
    let mut command = std::process::Command::new("jj");
    command
        .args(["--no-pager", "--ignore-working-copy", "log", "--no-graph"])
        .args(["-r", rev, "-T", "bookmarks"])
        .current_dir(workspace);
    output_within(command, JJ_TIMEOUT)
}

/// A command's standard output (capped at 64 KiB) when it succeeds within
/// `timeout`; past it the command is killed and None returned.
fn output_within(
    mut command: std::process::Command,
    timeout: std::time::Duration,
) -> Option<String> {
    use std::io::Read;
    let mut child = command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = (&mut stdout).take(64 << 10).read_to_string(&mut text);
        text
    });
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    };
    let text = reader.join().ok()?;
    status.success().then_some(text)
}

/// Fold what this agent changed into the session's list.
fn record_session_changes(scope: &ExecScope, outcome: &AgentOutcome) {
    let Some(folder) = session_folder(scope) else {
        return;
    };
    let run = session_changes::RunChanges {
        modified: outcome.modified.clone(),
        created: outcome.created.clone(),
        removed: outcome.removed.clone(),
        renamed: outcome.renamed.clone(),
    };
    if run == session_changes::RunChanges::default() {
        return;
    }
    let merged = session_changes::merge(&session_changes(scope), &run);
    let rel = format!("{folder}/{}", session_changes::FILE_NAME);
    let json = serde_json::to_vec_pretty(&merged).unwrap_or_default();
    // A dashboard-like record: a failed write loses detail for a later
    // Reviewer, never the run.
    let _ = wfhost_core::workspace::write_file(&scope.workspace, &rel, &json, true);
}

/// The session's `tasks.yaml` around an agent's run: an edit that breaks
/// the task lifecycle (a Coder setting `completed`, a task removed, …) or
/// the host's bounds on what it parses ([`wfhost_core::limits`]) is undone
/// and reported.
///
/// What the file was before the agent ran is also kept on disk, beside it
/// ([`BEFORE_FILE`]), until the agent's edit has been checked: when the
/// process dies in between (killed, or its machine lost), the next agent
/// run of the workspace — the same block executed again when the run is
/// resumed or its job requeued — starts from that record instead of the
/// file the unchecked agent left, so its edit is checked then.
struct TasksWatch {
    workspace: std::path::PathBuf,
    rel: String,
    record: String,
    changer: Changer,
    /// The file before the agent ran (`None`: there was none).
    before: Option<Vec<u8>>,
}

/// The record of `tasks.yaml` as it was before an agent whose edit is not
/// checked yet, in the session folder.
const BEFORE_FILE: &str = ".tasks.yaml.before";

impl TasksWatch {
    /// Nothing to watch when the run keeps no session folder.
    fn before(scope: &ExecScope, block_type: BlockType) -> Option<TasksWatch> {
        let folder = session_folder(scope)?;
        let rel = format!("{folder}/tasks.yaml");
        let record = format!("{folder}/{BEFORE_FILE}");
        let before = match read_record(&scope.workspace, &record) {
            // An earlier agent's edit was never checked: this run checks
            // it, from where it started.
            Some(unchecked) => unchecked,
            None => {
                let before = read_tasks(&scope.workspace, &rel).ok().flatten();
                // Best effort: without the record, a process that dies
                // mid-agent leaves the edit to the next check as before.
                let _ = write_record(&scope.workspace, &record, before.as_deref());
                before
            }
        };
        Some(TasksWatch {
            workspace: scope.workspace.clone(),
            rel,
            record,
            changer: match block_type {
                BlockType::Plan => Changer::Planner,
                t if t.is_coding() => Changer::Coder,
                _ => Changer::Other,
            },
            before,
        })
    }

    /// The refusal, when the agent's edit broke the lifecycle or the
    /// bounds (the file is then as it was). The record is gone after.
    fn after(self) -> Option<String> {
        let refused = self.check();
        let _ = wfhost_core::workspace::remove_file(&self.workspace, &self.record);
        refused
    }

    fn check(&self) -> Option<String> {
        let verdict = match read_tasks(&self.workspace, &self.rel) {
            Ok(after) if after == self.before => return None,
            Ok(Some(after)) => {
                let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                // The host's projection is not an agent's list of tasks.
                let before = self
                    .before
                    .as_deref()
                    .map(text)
                    .filter(|t| !t.starts_with(HOST_TASKS_MARK));
                check_task_changes(self.changer, before.as_deref(), &text(&after))
            }
            Ok(None) => Err("tasks.yaml was removed".to_string()),
            Err(e) => Err(format!("tasks.yaml: {e}")),
        };
        let verdict = verdict.err()?;
        let refusal = verdict.strip_prefix("tasks.yaml: ").unwrap_or(&verdict);
        let restored = match &self.before {
            Some(bytes) => {
                wfhost_core::workspace::write_file(&self.workspace, &self.rel, bytes, true)
            }
            None => wfhost_core::workspace::remove_file(&self.workspace, &self.rel),
        };
        Some(match restored {
            Ok(()) => format!("{}: {refusal} (undone)", self.rel),
            Err(e) => format!("{}: {refusal} (could not be undone: {e})", self.rel),
        })
    }
}

/// The session's `tasks.yaml`: `None` when there is none, an error when it
/// cannot be read (over [`MAX_ARTIFACT_BYTES`], not a regular file, …).
fn read_tasks(workspace: &Path, rel: &str) -> Result<Option<Vec<u8>>, String> {
    match wfhost_core::workspace::read_file(workspace, rel, MAX_ARTIFACT_BYTES as u64) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot be read: {e}")),
    }
}

const RECORD_ABSENT: &[u8] = b"wfhost: tasks.yaml absent\n";
const RECORD_PRESENT: &[u8] = b"wfhost: tasks.yaml follows\n";

fn write_record(workspace: &Path, rel: &str, before: Option<&[u8]>) -> std::io::Result<()> {
    let bytes = match before {
        None => RECORD_ABSENT.to_vec(),
        Some(b) => [RECORD_PRESENT, b].concat(),
    };
    wfhost_core::workspace::write_file(workspace, rel, &bytes, true)
}

/// An earlier agent's record: `Some(before)` when there is one.
fn read_record(workspace: &Path, rel: &str) -> Option<Option<Vec<u8>>> {
    let max = (MAX_ARTIFACT_BYTES + RECORD_PRESENT.len()) as u64;
    let bytes = wfhost_core::workspace::read_file(workspace, rel, max).ok()?;
    if bytes == RECORD_ABSENT {
        Some(None)
    } else {
        bytes.strip_prefix(RECORD_PRESENT).map(|b| Some(b.to_vec()))
    }
}

/// The universal input must be one before anything runs.
fn check_input(input: Option<&str>) -> Result<(), wit::ExecError> {
    let Some(text) = input else {
        return Ok(());
    };
    wfhost_core::limits::json(text.as_bytes())
        .map_err(|e| wit::ExecError::Invalid(format!("the universal input JSON is {e}")))?;
    let parsed: agent_protocol::AgentInput = serde_json::from_str(text)
        .map_err(|e| wit::ExecError::Invalid(format!("the universal input JSON: {e}")))?;
    parsed
        .validate()
        .map_err(|e| wit::ExecError::Invalid(format!("the universal input JSON: {e}")))
}

fn mismatch_text(outcome: &AgentOutcome) -> Option<String> {
    let m = &outcome.mismatch;
    if m.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    for (what, paths) in [
        ("modified but not claimed", &m.unreported_modified),
        ("created but not claimed", &m.unreported_created),
        ("claimed modified but unchanged", &m.claimed_not_modified),
        ("claimed created but absent", &m.claimed_not_created),
    ] {
        if !paths.is_empty() {
            parts.push(format!("{what}: {}", paths.join(", ")));
        }
    }
    Some(parts.join("; "))
}

impl agent::Host for AgentCtxView<'_> {
    #[tracing::instrument(
        name = "host_call",
        skip_all,
        fields(interface = "wfhost:plugin/agent", function = "run")
    )]
    async fn run(
        &mut self,
        invocation: agent::AgentInvocation,
    ) -> Result<agent::AgentReport, wit::ExecError> {
        let scope = self.scope()?;
        let block_type = block_type_of(&invocation.block_type)?;
        check_input(invocation.input_json.as_deref())?;
        let mut secrets = Vec::new();
        let extra_env = scope.resolve_env(invocation.env.clone(), &mut secrets)?;
        let mut executor = executor_of(&scope, invocation.executor.clone()).await?;
        // A preset supplies the argv (unless the block's `command` gives
        // one), its environment (under the block's own `env`) and the
        // adapter that reads the CLI's final result.
        let json_protocol = matches!(invocation.protocol, agent::Protocol::Json);
        let mut prepared = crate::agent_preset::prepare(
            &scope,
            invocation.argv.clone(),
            extra_env,
            &executor,
            json_protocol,
        )?;
        forward_endpoints(&scope, &prepared, &mut executor)?;
        // The telemetry ticket keeps the agent's address valid while it
        // runs.
        let (request, _telemetry) = agent_request(
            &scope,
            invocation,
            block_type,
            executor,
            &mut prepared,
            &secrets,
        )?;
        let tasks = TasksWatch::before(&scope, block_type);
        let past = session_folder(&scope).and_then(|current| {
            crate::past_sessions::PastSessions::remember(&scope.workspace, current)
        });
        let outcome = match wfhost_exec::agent::run_agent(request).await {
            Ok(outcome) => outcome,
            // The agent may have edited tasks.yaml before it failed: that
            // edit is checked (and undone) too.
            Err(e) => return Err(with_tasks_refusal(to_wit_error(e), tasks)),
        };
        self.state.count(outcome.output.usage.as_ref());
        crate::agent_preset::remember_session(&scope, &prepared, outcome.output.usage.as_ref());
        let claim_mismatch = mismatch_text(&outcome);
        let (mut signal, decision_prompt) = signal_of(&outcome);
        let mut violations = outcome.violations.clone();
        let mut rolled_back = outcome.rolled_back;
        record_session_changes(&scope, &outcome);
        let current = session_folder(&scope).unwrap_or_default().to_string();
        let refusals = [
            past.and_then(|p| p.restore(&current)),
            tasks.and_then(TasksWatch::after),
        ];
        for refused in refusals.into_iter().flatten() {
            violations.push(refused);
            rolled_back = true;
            signal = wfhost_core::run::transitions::BLOCKED.to_string();
        }
        let (protocol_output, protocol_error) = match &outcome.protocol {
            None => (None, None),
            Some(Ok(output)) => (serde_json::to_string(output).ok(), None),
            Some(Err(e)) => (None, Some(e.to_string())),
        };
        Ok(agent::AgentReport {
            signal,
            decision_prompt,
            block_output: serde_json::to_string(&outcome.output)
                .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}")),
            defect: outcome.defect.clone(),
            protocol_output,
            protocol_error,
            files_modified: outcome.modified.clone(),
            files_created: outcome.created.clone(),
            files_removed: outcome.removed.clone(),
            claim_mismatch,
            violations,
            rolled_back,
            result: to_wit_result(&scope.workspace, outcome.exec),
        })
    }
}

impl AgentState {
    /// Add an agent's usage to the block's statistics.
    fn count(&mut self, usage: Option<&block_output::Usage>) {
        let Some(usage) = usage else {
            return;
        };
        self.tokens = self.tokens.saturating_add(usage.tokens());
        self.usage.add(wfhost_core::run::payload::ModelUsage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cache_read_tokens: usage.cache_read_tokens,
            cache_creation_tokens: usage.cache_creation_tokens,
            cost_micro_usd: usage
                .cost_usd
                .map(wfhost_core::run::payload::ModelUsage::micro_usd)
                .unwrap_or(0),
        });
    }
}

fn block_type_of(name: &str) -> Result<BlockType, wit::ExecError> {
    serde_json::from_value(serde_json::Value::String(name.to_string())).map_err(|_| {
        wit::ExecError::Invalid(format!(
            "`{name}` is not a block type (plan, dev, test, review, devops)"
        ))
    })
}

/// Where the CLI runs: the invocation's executor, else the run's default
/// when that is a container, else here.
async fn executor_of(
    scope: &ExecScope,
    executor: Option<agent::AgentExecutor>,
) -> Result<AgentExecutor, wit::ExecError> {
    Ok(match executor {
        Some(agent::AgentExecutor::Container(o)) => AgentExecutor::Container {
            pool: scope.resources.containers().await.map_err(to_wit_error)?,
            options: to_container_options(o),
        },
        Some(agent::AgentExecutor::Local) => AgentExecutor::Local,
        None => match &scope.default_executor {
            wfhost_exec::Executor::Container(o) => AgentExecutor::Container {
                pool: scope.resources.containers().await.map_err(to_wit_error)?,
                options: o.clone(),
            },
            _ => AgentExecutor::Local,
        },
    })
}

/// A container has no network: it reaches the endpoints the block lists
/// and those its preset's environment names, relayed.
fn forward_endpoints(
    scope: &ExecScope,
    prepared: &crate::agent_preset::Prepared,
    executor: &mut AgentExecutor,
) -> Result<(), wit::ExecError> {
    let AgentExecutor::Container { options, .. } = executor else {
        return Ok(());
    };
    let listed = scope
        .container_forward
        .clone()
        .map_err(wit::ExecError::Invalid)?;
    for forward in listed.into_iter().chain(prepared.endpoints.clone()) {
        if !options.forward.contains(&forward) {
            options.forward.push(forward);
        }
    }
    wfhost_exec::forward::check_ports(&options.forward).map_err(wit::ExecError::Invalid)
}

/// The executor's request for the invocation, its preset applied, and the
/// ticket of its telemetry address (valid while it is held).
fn agent_request(
    scope: &ExecScope,
    invocation: agent::AgentInvocation,
    block_type: BlockType,
    executor: AgentExecutor,
    prepared: &mut crate::agent_preset::Prepared,
    secrets: &[String],
) -> Result<(AgentRequest, Option<crate::telemetry::Ticket>), wit::ExecError> {
    let result_format = prepared.result_format;
    let mut argv = std::mem::take(&mut prepared.argv);
    if matches!(executor, AgentExecutor::Local) {
        resolve_program(&mut argv, scope.manifest_dir.as_deref());
    }
    let spec = wfhost_core::policy::exec::ExecSpec {
        commands: Vec::new(),
        allow_shell: false,
    };
    let template = scope.request_under(spec, ".output/agent");
    // The host's endpoint listens on this machine's loopback, which a
    // container does not share.
    let (telemetry_url, ticket) = match (&executor, &scope.telemetry) {
        (AgentExecutor::Container { .. }, TelemetryTarget::Recorded { .. }) => (None, None),
        _ => scope.telemetry_address().map_err(wit::ExecError::Failed)?,
    };
    // An agent that must write its BlockOutput file is told where and how
    // at the end of its prompt. (A preset's adapter writes it instead.)
    let prompt = match invocation.protocol {
        agent::Protocol::BlockOutput if result_format.is_some() => invocation.prompt,
        agent::Protocol::BlockOutput => format!(
            "{}\n\n{}",
            invocation.prompt.trim_end(),
            block_output::prompt_contract(&scope.agent_id, block_type)
        ),
        agent::Protocol::Json => invocation.prompt,
    };
    let request = AgentRequest {
        argv,
        prompt,
        delivery: prepared
            .delivery
            .unwrap_or(match invocation.prompt_delivery {
                agent::PromptDelivery::Argument => PromptDelivery::Argument,
                agent::PromptDelivery::Stdin => PromptDelivery::Stdin,
                agent::PromptDelivery::File => PromptDelivery::File,
            }),
        protocol: match invocation.protocol {
            agent::Protocol::BlockOutput => Protocol::BlockOutput,
            agent::Protocol::Json => Protocol::Json,
        },
        input_json: with_session_changes(scope, block_type, invocation.input_json)
            .map(|text| with_repo_state(scope, &text)),
        env: agent_env(scope, telemetry_url),
        extra_env: std::mem::take(&mut prepared.env),
        workspace: scope.workspace.clone(),
        agent_id: scope.agent_id.clone(),
        block_type,
        restrictions: scope.restrictions.clone(),
        on_violation: match invocation.on_violation {
            agent::OnViolation::Rollback => ViolationPolicy::Rollback,
            agent::OnViolation::Fail => ViolationPolicy::Fail,
        },
        executor,
        bundle_dir: template.bundle_dir,
        meta: template.meta,
        deadline: template.deadline,
        output_cap: template.output_cap,
        result_format,
        mask: wfhost_core::policy::secrets::Masker::new(secrets.iter().chain(&prepared.mask)),
        model: prepared.model.clone(),
        usage_before: prepared.usage_before.clone(),
        role: scope.role.clone(),
    };
    Ok((request, ticket))
}

/// An error of an agent that could not run, with the refusal of the
/// `tasks.yaml` edit it made first, if it made one.
fn with_tasks_refusal(e: wit::ExecError, tasks: Option<TasksWatch>) -> wit::ExecError {
    let Some(refused) = tasks.and_then(TasksWatch::after) else {
        return e;
    };
    let with = |m: String| format!("{m}; {refused}");
    match e {
        wit::ExecError::Refused(m) => wit::ExecError::Refused(with(m)),
        wit::ExecError::Invalid(m) => wit::ExecError::Invalid(with(m)),
        wit::ExecError::Unavailable(m) => wit::ExecError::Unavailable(with(m)),
        wit::ExecError::Failed(m) => wit::ExecError::Failed(with(m)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repository_tool_that_hangs_is_given_up_in_time() {
        let timeout = std::time::Duration::from_millis(300);
        let began = std::time::Instant::now();
        let mut sleeper = std::process::Command::new("sleep");
        sleeper.arg("30");
        assert_eq!(output_within(sleeper, timeout), None);
        assert!(began.elapsed() < std::time::Duration::from_secs(5));
        let mut echo = std::process::Command::new("echo");
        echo.arg("main");
        assert_eq!(output_within(echo, timeout).as_deref(), Some("main\n"));
        let failing = std::process::Command::new("false");
        assert_eq!(output_within(failing, timeout), None);
    }

    #[test]
    fn relative_programs_with_a_slash_are_the_workflows() {
        let mut argv = vec!["../agents/a.py".to_string(), "x/y".to_string()];
        resolve_program(&mut argv, Some(Path::new("/wf/examples/p")));
        assert_eq!(argv, ["/wf/examples/p/../agents/a.py", "x/y"]);
        let mut argv = vec!["python3".to_string()];
        resolve_program(&mut argv, Some(Path::new("/wf")));
        assert_eq!(argv, ["python3"]);
        let mut argv = vec!["/usr/bin/agent".to_string()];
        resolve_program(&mut argv, Some(Path::new("/wf")));
        assert_eq!(argv, ["/usr/bin/agent"]);
    }
}
