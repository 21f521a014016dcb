//! Agent blocks (seeds 000 and 001): run an agent CLI — any program, a
//! real coding agent or a scripted stand-in — and check what it did.
//!
//! Before the CLI runs, the workspace is snapshotted (kind, size and
//! modification time of every entry; copies of the files the block may not
//! change). The CLI runs through the local or container executor with the
//! env contract, its prompt by argument, stdin or file, and leaves a result
//! bundle like any exec block. Afterwards:
//!
//! - the files really modified, created and removed are detected;
//! - changes outside the block's file restrictions are undone
//!   ([`ViolationPolicy::Rollback`]) or left for inspection
//!   ([`ViolationPolicy::Fail`], the caller fails the block); either way
//!   they are reported, never silently kept;
//! - `.output/block-<id>.json` is read and validated. It does not count
//!   when it is missing (or byte-identical to the one an earlier attempt
//!   left), malformed, for another block, or when the CLI did not exit 0
//!   (timed out, killed, non-zero exit, could not start): a synthetic
//!   failed output takes its place (the rejected file is kept next to it as
//!   `block-<id>.rejected.json`), so later blocks and fan-in always find
//!   valid JSON;
//! - with the JSON protocol, stdout must be the universal output and
//!   nothing else; a BlockOutput is written from it;
//! - what the output claims changed is compared with what was detected.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use wfhost_core::agents::agent_protocol::{self, AgentOutput, AgentStatus};
use wfhost_core::agents::block_output::{
    self, BlockOutput, BlockOutputStatus, BlockType, ClaimMismatch, Deliverables, Usage,
};
use wfhost_core::agents::presets::{self, ResultFormat};
use wfhost_core::policy::exec::{ExecCommand, ExecSpec};
use wfhost_core::workspace::restrictions::RestrictionPlan;
use wfhost_core::workspace::{self, ChangeKind, EntryKind, Snapshot};

use crate::container::CONTAINER_WORKSPACE;
use crate::{BundleMeta, ContainerOptions, ContainerPool, ExecError, ExecOutcome, ExecRequest};

/// How the system prompt reaches the CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptDelivery {
    /// `{prompt}` in the argv is replaced by it; without one it is
    /// appended as the last argument.
    Argument,
    Stdin,
    /// Written to a file named by `{prompt-file}` in the argv and by
    /// `AGENT_PROMPT_FILE`.
    File,
}

/// What the CLI must produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Seed 000: `.output/block-<id>.json`.
    BlockOutput,
    /// Seed 001: the universal input on stdin, the universal output (only)
    /// on stdout.
    Json,
}

/// What happens to changes outside the block's file restrictions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViolationPolicy {
    Rollback,
    Fail,
}

/// Where the CLI runs.
pub enum AgentExecutor {
    Local,
    Container {
        pool: Arc<ContainerPool>,
        options: ContainerOptions,
    },
}

/// One agent invocation.
pub struct AgentRequest {
    /// The CLI and its arguments (`{prompt}` / `{prompt-file}`
    /// placeholders).
    pub argv: Vec<String>,
    pub prompt: String,
    pub delivery: PromptDelivery,
    pub protocol: Protocol,
    /// The universal input JSON (JSON protocol).
    pub input_json: Option<String>,
    /// The env contract (`NODE_ID`, `OUTPUT_DIR`, …), host paths.
    pub env: Vec<(String, String)>,
    /// The block's own variables, applied after the contract.
    pub extra_env: Vec<(String, String)>,
    /// The host path of the workspace: the CLI's working directory.
    pub workspace: PathBuf,
    /// `NODE_ID`: the output file is `.output/block-<agent_id>.json`.
    pub agent_id: String,
    pub block_type: BlockType,
    /// The block's file restrictions (none: unrestricted).
    pub restrictions: Option<Vec<String>>,
    pub on_violation: ViolationPolicy,
    pub executor: AgentExecutor,
    /// Where the result bundle goes (must not exist yet).
    pub bundle_dir: PathBuf,
    pub meta: BundleMeta,
    pub deadline: Option<Instant>,
    pub output_cap: u64,
    /// A preset's result adapter (block-output protocol only): the CLI's
    /// final result on stdout is read and the BlockOutput written from it;
    /// the agent need not write one.
    pub result_format: Option<ResultFormat>,
    /// Secret values to mask in what the CLI writes to stdout and stderr.
    pub mask: wfhost_core::policy::secrets::Masker,
    /// The model the CLI was asked for: the usage's when the CLI's output
    /// does not name one.
    pub model: Option<String>,
    /// What the CLI already reported for the session it continues, when
    /// its usage is the session's total (subtracted).
    pub usage_before: Option<Usage>,
    /// The contract agent the block plays (`Researcher`, `Security`, …;
    /// [`agent_protocol::agent_name`]): a JSON-protocol status reserved
    /// to other roles is a protocol error.
    pub role: Option<String>,
}

/// What the agent did, as the host saw it.
#[derive(Debug)]
pub struct AgentOutcome {
    /// The CLI's execution (one command) and its bundle.
    pub exec: ExecOutcome,
    /// What `.output/block-<id>.json` now holds: the agent's output, or a
    /// synthetic failure.
    pub output: BlockOutput,
    /// Why the agent's output was replaced.
    pub defect: Option<String>,
    /// JSON protocol only: the universal output, or why stdout is not one.
    pub protocol: Option<Result<AgentOutput, String>>,
    /// Detected after any rollback; `.output/`, `.git/` and
    /// `.agents-work/` excluded.
    pub modified: Vec<String>,
    pub created: Vec<String>,
    pub removed: Vec<String>,
    /// Files that moved, `(old path, new path)`: each is also in
    /// `removed` (old) and `created` (new).
    pub renamed: Vec<(String, String)>,
    /// The output's claims against what was detected (empty for a
    /// synthetic output, which claims nothing).
    pub mismatch: ClaimMismatch,
    /// Changed paths outside the restrictions.
    pub violations: Vec<String>,
    /// The violations were undone.
    pub rolled_back: bool,
}

/// Paths the change detection never looks at: the contract's outputs, the
/// host's session files, and the repository's own bookkeeping (objects,
/// refs, index: an agent may commit). What in `.git/` can make a later
/// host process run code — `.git/hooks/` and `.git/config` — is watched
/// like any other path.
fn not_watched(path: &str) -> bool {
    let under = |p: &str| path == p || path.strip_prefix(p).is_some_and(|r| r.starts_with('/'));
    if under(".output") || under(".agents-work") {
        return true;
    }
    match path.strip_prefix(".git/") {
        Some(inside) => !(inside == "config" || inside == "hooks" || inside.starts_with("hooks/")),
        None => false,
    }
}

fn now_iso() -> String {
    wfhost_core::time::iso_utc_millis(wfhost_core::time::now_ms())
}

/// A scratch directory for the snapshot's copies of `bytes`, outside the
/// workspace: in memory when there is room (removing a directory of many
/// files from a disk mounted with `discard` costs more than the copies),
/// else on disk, or in `WFHOST_SCRATCH_DIR`.
fn snapshot_dir(bytes: u64) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // In memory up to 1 GiB: it lives only while the agent runs.
    crate::scratch::dir_within(bytes, 1 << 30).join(format!(
        "{}{}",
        crate::scratch::prefix("wfhost-agent-snapshot-"),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Removes the snapshot's copies however the invocation ends.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn invalid(message: impl Into<String>) -> ExecError {
    ExecError::Invalid(message.into())
}

fn failed(what: &str) -> impl Fn(std::io::Error) -> ExecError + '_ {
    move |e| ExecError::Failed(format!("{what}: {e}"))
}

/// The argv with the prompt placed, and what goes on stdin.
fn place_prompt(
    request: &AgentRequest,
    prompt_file: Option<&str>,
) -> Result<(Vec<String>, Option<Vec<u8>>), ExecError> {
    let mut argv = request.argv.clone();
    let mut stdin = match request.protocol {
        Protocol::Json => Some(
            request
                .input_json
                .clone()
                .ok_or_else(|| invalid("the json protocol needs the universal input JSON"))?
                .into_bytes(),
        ),
        Protocol::BlockOutput => None,
    };
    match request.delivery {
        PromptDelivery::Argument => {
            if argv.iter().skip(1).any(|a| a.contains("{prompt}")) {
                for arg in argv.iter_mut().skip(1) {
                    *arg = arg.replace("{prompt}", &request.prompt);
                }
            } else {
                argv.push(request.prompt.clone());
            }
        }
        PromptDelivery::Stdin => {
            if stdin.is_some() {
                return Err(invalid(
                    "the json protocol sends its input on stdin; deliver the prompt as an argument or a file",
                ));
            }
            stdin = Some(request.prompt.clone().into_bytes());
        }
        PromptDelivery::File => {
            let file = prompt_file.expect("a file delivery has a prompt file");
            for arg in argv.iter_mut().skip(1) {
                *arg = arg.replace("{prompt-file}", file);
            }
        }
    }
    Ok((argv, stdin))
}

/// Run the agent and check what it did. An `Err` means nothing ran (the
/// request is malformed, refused by the safety policy, or the executor is
/// unavailable); everything that happens once the CLI started is in the
/// outcome.
pub async fn run_agent(request: AgentRequest) -> Result<AgentOutcome, ExecError> {
    if request.argv.first().is_none_or(|p| p.trim().is_empty()) {
        return Err(invalid("the agent command is empty"));
    }
    let plan = RestrictionPlan::new(request.restrictions.as_deref())
        .map_err(|e| invalid(e.to_string()))?;
    let workspace = request.workspace.clone();
    workspace::ensure_host_dir(&workspace, ".output").map_err(failed("the workspace's .output"))?;
    let output_path = OutputFile {
        workspace: &workspace,
        rel: format!(".output/{}", block_output::file_name(&request.agent_id)),
    };
    let earlier = read_output_file(&output_path).ok();
    let exec_request = exec_request(&request)?;
    let snapshot = take_snapshot(&request).await?;
    let scratch = Scratch(snapshot.store().to_path_buf());
    let exec = match &request.executor {
        AgentExecutor::Local => crate::run_local(&exec_request).await?,
        AgentExecutor::Container { pool, options } => pool.run(&exec_request, options).await?,
    };
    let detected = detect(&request, &plan, &snapshot)?;
    let ran_badly = ran_badly(&exec.commands[0]);
    let mut protocol = None;
    // What a preset's adapter read of the CLI's usage: kept on a failure
    // too (the tokens were spent).
    let mut adapted_usage: Option<Usage> = None;
    let (own, defect) = match (request.protocol, request.result_format) {
        (Protocol::BlockOutput, Some(format)) => {
            let (answer, usage) = adapted_answer(
                &request,
                format,
                &exec,
                ran_badly,
                &detected.modified,
                &detected.created,
            );
            adapted_usage = usage;
            answer
        }
        (Protocol::BlockOutput, None) => {
            written_answer(&request, &output_path, earlier.as_ref(), ran_badly)
        }
        (Protocol::Json, _) => {
            let parsed = protocol_output(&request, &exec);
            let answer = protocol_answer(&request, &parsed, ran_badly, &detected);
            protocol = Some(parsed);
            answer
        }
    };
    let (output, mismatch) = match own {
        Some(output) => {
            let mismatch =
                block_output::compare_claims(&output, &detected.modified, &detected.created);
            if request.protocol == Protocol::Json || request.result_format.is_some() {
                write_output(&output_path, &output)?;
            }
            (output, mismatch)
        }
        None => {
            let reason = defect.clone().unwrap_or_default();
            let failure = synthetic(
                &request,
                &output_path,
                earlier.as_ref(),
                &reason,
                adapted_usage,
            )?;
            (failure, ClaimMismatch::default())
        }
    };
    drop(scratch);
    Ok(AgentOutcome {
        exec,
        output,
        defect,
        protocol,
        modified: detected.modified,
        created: detected.created,
        removed: detected.removed,
        renamed: detected.renamed,
        mismatch,
        violations: detected.violations,
        rolled_back: detected.rolled_back,
    })
}

/// The CLI's one command, its prompt placed (a prompt file written).
fn exec_request(request: &AgentRequest) -> Result<ExecRequest, ExecError> {
    let prompt_file = write_prompt_file(request, &request.workspace)?;
    let (argv, stdin) = place_prompt(request, prompt_file.as_deref())?;
    let mut command_env = request.extra_env.clone();
    if let Some(file) = &prompt_file {
        command_env.push(("AGENT_PROMPT_FILE".into(), file.clone()));
    }
    Ok(ExecRequest {
        spec: ExecSpec {
            commands: vec![ExecCommand {
                argv,
                cwd: None,
                env: command_env,
            }],
            allow_shell: false,
        },
        workdir: request.workspace.clone(),
        bundle_dir: request.bundle_dir.clone(),
        env: request.env.clone(),
        meta: request.meta.clone(),
        deadline: request.deadline,
        output_cap: request.output_cap,
        stdin,
        mask: request.mask.clone(),
    })
}

/// The workspace before the CLI runs, with copies of what a rollback
/// may restore.
async fn take_snapshot(request: &AgentRequest) -> Result<Snapshot, ExecError> {
    let root = request.workspace.clone();
    // Copies are for undoing: a block that fails on a violation leaves it
    // in place, and needs none.
    let restricted = request
        .restrictions
        .clone()
        .filter(|_| request.on_violation == ViolationPolicy::Rollback);
    tokio::task::spawn_blocking(move || {
        let plan = RestrictionPlan::new(restricted.as_deref()).ok();
        let keep = |p: &str| match (&restricted, &plan) {
            (Some(_), Some(plan)) => !plan.permits(p),
            _ => false,
        };
        Snapshot::take(&root, not_watched, &keep, &snapshot_dir)
    })
    .await
    .map_err(|e| ExecError::Failed(format!("snapshot task: {e}")))?
    .map_err(failed("snapshotting the workspace"))
}

/// What the CLI changed, after any rollback of what it may not have.
struct Detected {
    modified: Vec<String>,
    created: Vec<String>,
    removed: Vec<String>,
    renamed: Vec<(String, String)>,
    violations: Vec<String>,
    rolled_back: bool,
}

fn detect(
    request: &AgentRequest,
    plan: &RestrictionPlan,
    snapshot: &Snapshot,
) -> Result<Detected, ExecError> {
    let changes = snapshot
        .changes()
        .map_err(failed("comparing the workspace with its snapshot"))?;
    let violations: Vec<String> = workspace::violations(&changes, plan)
        .into_iter()
        .map(|c| c.path.clone())
        .collect();
    let mut rolled_back = false;
    if !violations.is_empty() && request.on_violation == ViolationPolicy::Rollback {
        workspace::revert(&changes, plan, snapshot.store(), &request.workspace)
            .map_err(failed("rolling back changes outside the file restrictions"))?;
        rolled_back = true;
    }
    let kept = |c: &&workspace::Change| !rolled_back || plan.permits(&c.path);
    let files = |kind: ChangeKind| -> Vec<String> {
        changes
            .iter()
            .filter(kept)
            .filter(|c| c.kind == kind && c.entry != EntryKind::Dir)
            .map(|c| c.path.clone())
            .collect()
    };
    let (modified, created, removed) = (
        files(ChangeKind::Modified),
        files(ChangeKind::Added),
        files(ChangeKind::Removed),
    );
    let renamed: Vec<(String, String)> = snapshot
        .renames(&changes)
        .map_err(failed("finding the files that moved"))?
        .into_iter()
        .filter(|(old, new)| removed.contains(old) && created.contains(new))
        .collect();
    Ok(Detected {
        modified,
        created,
        removed,
        renamed,
        violations,
        rolled_back,
    })
}

/// The BlockOutput the agent wrote itself, or why it does not count.
fn written_answer(
    request: &AgentRequest,
    output_path: &OutputFile,
    earlier: Option<&Vec<u8>>,
    ran_badly: Option<String>,
) -> (Option<BlockOutput>, Option<String>) {
    let read = match read_output_file(output_path) {
        Ok(written) => Ok(Some(written).filter(|w| Some(w) != earlier)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!(
            ".output/{}: {e}",
            block_output::file_name(&request.agent_id)
        )),
    };
    let checked = read.and_then(|fresh| {
        block_output::read(fresh.as_deref(), &request.agent_id, request.block_type)
            .map_err(|defect| defect.to_string())
    });
    match (checked, ran_badly) {
        (Ok(output), None) => (Some(output), None),
        (Ok(_), Some(why)) => (None, Some(why)),
        (Err(defect), None) => (None, Some(defect)),
        (Err(defect), Some(bad)) => (None, Some(format!("{bad}; {defect}"))),
    }
}

/// A JSON-protocol agent's stdout as the universal output, or why not.
fn protocol_output(request: &AgentRequest, exec: &ExecOutcome) -> Result<AgentOutput, String> {
    let command = &exec.commands[0];
    if command.stdout_truncated {
        return Err(format!(
            "protocol error: stdout exceeded {} bytes; the universal output must be one JSON object",
            request.output_cap
        ));
    }
    // Never through a link put in the bundle's place.
    let read = crate::bundle::BundleDir::open(&exec.bundle_dir)
        .and_then(|b| b.read(&command.stdout, request.output_cap));
    match read {
        Ok(bytes) => agent_protocol::parse_output(&bytes)
            .and_then(|output| {
                agent_protocol::check_status_for_role(&output, request.role.as_deref())?;
                Ok(output)
            })
            .map_err(|e| e.to_string()),
        Err(e) => Err(format!(
            "protocol error: cannot read the agent's stdout: {e}"
        )),
    }
}

/// A JSON-protocol agent's answer as its BlockOutput, or why it does not
/// count.
fn protocol_answer(
    request: &AgentRequest,
    parsed: &Result<AgentOutput, String>,
    ran_badly: Option<String>,
    detected: &Detected,
) -> (Option<BlockOutput>, Option<String>) {
    match (parsed, ran_badly) {
        (Ok(answer), None) => (
            Some(from_protocol(
                request,
                answer,
                &detected.modified,
                &detected.created,
            )),
            None,
        ),
        (Ok(_), Some(why)) => (None, Some(why)),
        (Err(e), None) => (None, Some(e.clone())),
        (Err(e), Some(why)) => (None, Some(format!("{why}; {e}"))),
    }
}

/// Write the synthetic failure in place of the agent's output (what the
/// agent wrote, if anything, is kept beside it for inspection).
fn synthetic(
    request: &AgentRequest,
    output_path: &OutputFile,
    earlier: Option<&Vec<u8>>,
    reason: &str,
    usage: Option<Usage>,
) -> Result<BlockOutput, ExecError> {
    let mut failure =
        block_output::synthetic_failure(&request.agent_id, request.block_type, reason, now_iso());
    failure.usage = usage;
    if let Ok(bytes) = read_output_file(output_path)
        && Some(&bytes) != earlier
        && request.protocol == Protocol::BlockOutput
        && request.result_format.is_none()
    {
        let rejected = format!(".output/block-{}.rejected.json", request.agent_id);
        // Replaces whatever is there (a planted link included).
        let _ = workspace::write_file(&request.workspace, &rejected, &bytes, false);
    }
    write_output(output_path, &failure)?;
    Ok(failure)
}

/// The prompt file of an agent given its prompt by file: next to the
/// bundle, where a container sees it too; the path as the agent sees it.
fn write_prompt_file(
    request: &AgentRequest,
    workspace: &Path,
) -> Result<Option<String>, ExecError> {
    match request.delivery {
        PromptDelivery::File => {
            let mut name = request
                .bundle_dir
                .file_name()
                .unwrap_or_default()
                .to_os_string();
            name.push(".prompt.md");
            let host = request.bundle_dir.with_file_name(name);
            if let Some(parent) = host.parent() {
                std::fs::create_dir_all(parent).map_err(failed("the prompt file"))?;
            }
            std::fs::write(&host, &request.prompt).map_err(failed("the prompt file"))?;
            let seen = match &request.executor {
                AgentExecutor::Local => host.display().to_string(),
                AgentExecutor::Container { .. } => match host.strip_prefix(workspace) {
                    Ok(rel) => format!("{CONTAINER_WORKSPACE}/{}", rel.display()),
                    Err(_) => host.display().to_string(),
                },
            };
            Ok(Some(seen))
        }
        _ => Ok(None),
    }
}

/// Why the agent's run does not count, whatever it printed: it could not
/// start, timed out, was killed or exited non-zero.
fn ran_badly(command: &crate::CommandResult) -> Option<String> {
    if let Some(error) = &command.error {
        Some(format!("the agent could not run: {error}"))
    } else if command.timed_out {
        Some("the agent timed out and was killed".to_string())
    } else {
        match (command.exit_code, command.signal) {
            (Some(0), _) => None,
            (Some(code), _) => Some(format!("the agent exited with code {code}")),
            (None, Some(signal)) => Some(format!("the agent was killed by signal {signal}")),
            (None, None) => Some("the agent did not exit normally".to_string()),
        }
    }
}

/// A preset's answer: the CLI's final result read by its adapter, as the
/// block's output (or why there is none), and the usage it reported.
fn adapted_answer(
    request: &AgentRequest,
    format: ResultFormat,
    exec: &ExecOutcome,
    ran_badly: Option<String>,
    modified: &[String],
    created: &[String],
) -> ((Option<BlockOutput>, Option<String>), Option<Usage>) {
    let command = &exec.commands[0];
    let read = crate::bundle::BundleDir::open(&exec.bundle_dir)
        .and_then(|b| b.read(&command.stdout, request.output_cap))
        .map_err(|e| presets::ResultError {
            why: format!("cannot read the agent's output: {e}"),
            usage: None,
        })
        .and_then(|bytes| presets::parse_result(format, &bytes))
        .map(|mut result| {
            own_usage(request, &mut result.usage);
            result
        })
        .map_err(|mut e| {
            if let Some(usage) = &mut e.usage {
                own_usage(request, usage);
            }
            e
        });
    // Over the cap, the final result is lost; what was streamed before
    // still counts.
    let read = match read {
        Ok(_) | Err(_) if command.stdout_truncated => Err(presets::ResultError {
            why: format!(
                "the agent's output exceeded {} bytes; its final result was lost",
                request.output_cap
            ),
            usage: match read {
                Ok(result) => Some(result.usage),
                Err(e) => e.usage,
            },
        }),
        read => read,
    };
    let with_bad = |why: String| match &ran_badly {
        Some(bad) => format!("{bad}; {why}"),
        None => why,
    };
    match read {
        Ok(result) => {
            let usage = Some(result.usage.clone());
            if result.is_error {
                let said = if result.summary.is_empty() {
                    "(no message)"
                } else {
                    &result.summary
                };
                let why = with_bad(format!("the agent reported an error: {said}"));
                return ((None, Some(why)), usage);
            }
            match &ran_badly {
                None => (
                    (Some(from_result(request, &result, modified, created)), None),
                    usage,
                ),
                Some(bad) => ((None, Some(bad.clone())), usage),
            }
        }
        Err(e) => ((None, Some(with_bad(e.why))), e.usage),
    }
}

/// The usage this invocation is answerable for: without what the session
/// had reported before it, with the model it was asked for when the CLI
/// named none.
fn own_usage(request: &AgentRequest, usage: &mut Usage) {
    if let Some(before) = &request.usage_before
        && before.session_id == usage.session_id
    {
        usage.input_tokens = usage.input_tokens.saturating_sub(before.input_tokens);
        usage.output_tokens = usage.output_tokens.saturating_sub(before.output_tokens);
        usage.cache_read_tokens = usage
            .cache_read_tokens
            .saturating_sub(before.cache_read_tokens);
        usage.cache_creation_tokens = usage
            .cache_creation_tokens
            .saturating_sub(before.cache_creation_tokens);
    }
    if usage.model.is_none() {
        usage.model.clone_from(&request.model);
    }
}

/// The most of a block output file that is read: a BlockOutput is a small
/// JSON document (the host's bound, [`wfhost_core::limits`]).
pub const MAX_OUTPUT_FILE_BYTES: u64 = wfhost_core::limits::MAX_BLOCK_OUTPUT_BYTES;

/// Read a file the agent wrote, as a regular file only: a symlink (never
/// followed), a FIFO, a device or a file over [`MAX_OUTPUT_FILE_BYTES`] is
/// refused with the reason, without blocking.
fn read_output_file(file: &OutputFile) -> std::io::Result<Vec<u8>> {
    workspace::read_file(file.workspace, &file.rel, MAX_OUTPUT_FILE_BYTES)
}

/// The block output file in a workspace. It is read and written from the
/// workspace's handle, never through a link: a container agent could plant
/// one (at `.output/` or at a temporary file's name) to make the host write
/// outside the workspace.
struct OutputFile<'a> {
    workspace: &'a Path,
    rel: String,
}

/// Replace the block output file (through a new file and a rename, so a
/// reader never sees half of it).
fn write_output(file: &OutputFile, output: &BlockOutput) -> Result<(), ExecError> {
    let json = serde_json::to_vec_pretty(output)
        .map_err(|e| ExecError::Failed(format!("serializing the block output: {e}")))?;
    workspace::write_file(file.workspace, &file.rel, &json, false)
        .map_err(failed("writing the block output"))
}

/// The BlockOutput of a JSON-protocol agent: its status and summary, the
/// files the host detected.
fn from_protocol(
    request: &AgentRequest,
    answer: &AgentOutput,
    modified: &[String],
    created: &[String],
) -> BlockOutput {
    let status = match answer.status {
        AgentStatus::Ok => BlockOutputStatus::Completed,
        AgentStatus::NeedsDecision => BlockOutputStatus::Partial,
        _ => BlockOutputStatus::Failed,
    };
    host_output(
        request,
        status,
        &answer.summary,
        &answer.artifacts.files_to_create_or_update,
        modified,
        created,
    )
}

/// A BlockOutput the host writes for the agent: the deliverables its block
/// type needs, from a summary and the files the host detected.
fn host_output(
    request: &AgentRequest,
    status: BlockOutputStatus,
    summary: &str,
    task_list: &[String],
    modified: &[String],
    created: &[String],
) -> BlockOutput {
    let mut changed: Vec<String> = modified.iter().chain(created).cloned().collect();
    changed.sort();
    let deliverables = match request.block_type {
        BlockType::Plan => Deliverables::Plan {
            markdown_document: summary.to_string(),
            task_list: task_list.to_vec(),
        },
        t if t.is_coding() => Deliverables::Code {
            files_changed: changed,
            diff_summary: summary.to_string(),
        },
        _ => Deliverables::Generic {
            summary: summary.to_string(),
        },
    };
    BlockOutput {
        block_id: request.agent_id.clone(),
        block_type: request.block_type,
        status,
        deliverables,
        summary: summary.to_string(),
        files_modified: modified.to_vec(),
        files_created: created.to_vec(),
        timestamp: now_iso(),
        usage: None,
    }
}

/// The BlockOutput a preset's adapter writes for a CLI that finished
/// without error: its final message as the summary (with what the CLI's
/// own permissions refused), the files the host detected, its usage.
fn from_result(
    request: &AgentRequest,
    result: &presets::CliResult,
    modified: &[String],
    created: &[String],
) -> BlockOutput {
    let mut summary = result.summary.clone();
    if !result.denied.is_empty() {
        let workspace = format!("{}/", request.workspace.display());
        let denied: Vec<String> = result
            .denied
            .iter()
            .map(|d| d.replacen(&workspace, "", 1))
            .collect();
        summary = format!(
            "{}\n(the CLI's permissions refused: {})",
            summary.trim_end(),
            denied.join("; ")
        )
        .trim_start()
        .to_string();
    }
    let mut output = host_output(
        request,
        BlockOutputStatus::Completed,
        &summary,
        &[],
        modified,
        created,
    );
    output.usage = Some(result.usage.clone());
    output
}

/// The agent's output file, as a regular file of bounded size: a FIFO, a
/// device or a symlink the agent put there is not read (nor waited on).
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwatched_paths() {
        for p in [
            ".output",
            ".output/block-a.json",
            ".git/HEAD",
            ".git/objects/ab/cdef",
            ".git/hooksx",
            ".agents-work/s/status.json",
        ] {
            assert!(not_watched(p), "{p}");
        }
        for p in [
            ".outputs",
            "src/.git",
            "git/x",
            ".github/workflows/ci.yml",
            ".git",
            ".git/hooks",
            ".git/hooks/pre-commit",
            ".git/config",
        ] {
            assert!(!not_watched(p), "{p}");
        }
    }
}
