//! The Slurm executor: an exec block as one Slurm batch job.
//!
//! The host writes a batch script into the bundle (`slurm/job.sh`) that
//! runs the block's commands in order, each in its cwd with the env
//! contract and its overrides, its stdout and stderr going straight to the
//! bundle's `cmd-N.stdout` / `cmd-N.stderr`, and records each command's
//! start, end and exit code under `slurm/`. The job is submitted with
//! `sbatch --parsable`. The run's jobs are watched together on a
//! [`board::JobBoard`]: one `sacct` (or, without accounting, `squeue` plus
//! the script's `slurm/job.end` marker) per polling round for all of them.
//! On the block's timeout, or when the caller gives up, the job is
//! `scancel`led. The lanes of a parallel block are submitted together as
//! one job array ([`array`]).
//!
//! The bundle directory must be visible to the compute nodes at the same
//! path (a shared filesystem, as with any Slurm workflow). The policy is
//! checked on the submitting host, right before submission, with the
//! executables resolved there.
//!
//! Jobs carry the name `wfhost:<stage>` and the comment
//! `wfhost-run=<run id>;pid=<host pid>;host=<host>` so that `wfhost gc` can cancel jobs left behind by
//! a crashed host ([`cancel_orphans`]).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::Serialize;
use wfhost_core::policy::exec;

use crate::bundle;
use crate::{CommandResult, ExecError, ExecOutcome, ExecRequest, Owner, unix_ms};

pub mod array;
pub mod board;
pub mod options;

use board::{JobBoard, JobEnd};

/// The prefix of the comment every wfhost job carries.
pub const COMMENT_PREFIX: &str = "wfhost-run=";

/// The prefix of the comment of `wfhost agent`s submitted as Slurm jobs
/// (`wfhost agents submit`): `wfhost-agent=<server URL>`. Not a block's
/// job: [`cancel_orphans`] leaves them alone, they are meant to outlive
/// the process that submitted them.
pub const AGENT_COMMENT_PREFIX: &str = "wfhost-agent=";

/// Options of the `sbatch` submission.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlurmOptions {
    pub partition: Option<String>,
    /// Slurm's time format, e.g. `00:10:00` or `5` (minutes).
    pub time_limit: Option<String>,
    pub cpus_per_task: Option<u32>,
    pub mem_mb: Option<u64>,
    /// More `sbatch` options, e.g. `--account=x`, read as sbatch reads
    /// them ([`options`]): the options wfhost sets itself ([`RESERVED`]:
    /// `--output`, `--array`, …) are refused in every spelling, as are
    /// words sbatch would not take for options.
    pub extra_args: Vec<String>,
}

/// How the host talks to Slurm.
#[derive(Debug, Clone)]
pub struct SlurmExecutor {
    /// How long `sbatch`, `squeue`, `scontrol` and `scancel` may take.
    pub command_timeout: Duration,
    /// Told the state of a job each time the queue is asked about it.
    pub watcher: Option<JobWatcher>,
    /// The jobs this executor waits for, asked about together.
    pub board: std::sync::Arc<JobBoard>,
    /// Lanes submitted together as job arrays.
    pub arrays: std::sync::Arc<array::ArrayBatcher>,
}

impl Default for SlurmExecutor {
    fn default() -> Self {
        SlurmExecutor::new(board::PollConfig::default())
    }
}

impl SlurmExecutor {
    /// An executor whose board polls as `config` says.
    pub fn new(config: board::PollConfig) -> SlurmExecutor {
        SlurmExecutor {
            command_timeout: Duration::from_secs(30),
            watcher: None,
            board: std::sync::Arc::new(JobBoard::new(config)),
            arrays: std::sync::Arc::default(),
        }
    }
}

/// Whoever wants to see jobs progress (a status line): called with a job's
/// id and its state (`PENDING`, `RUNNING`, …) each time the queue shows
/// the job. It must return at once.
#[derive(Clone)]
pub struct JobWatcher(pub std::sync::Arc<JobWatch>);

/// The function behind a [`JobWatcher`]: job id, state.
pub type JobWatch = dyn Fn(&str, &str) + Send + Sync;

impl std::fmt::Debug for JobWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobWatcher")
    }
}

/// The job's record in the bundle manifest.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct SlurmInfo {
    pub job_id: String,
    /// Slurm's final job state (`COMPLETED`, `FAILED`, `TIMEOUT`,
    /// `CANCELLED`, …), or `UNKNOWN` when Slurm no longer knows the job.
    pub state: String,
    /// Slurm's `exit:signal` of the batch script.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<String>,
    /// Where Slurm's own output of the batch script went (relative to the
    /// bundle root), for diagnostics.
    pub job_log: String,
}

/// The `sbatch` options `extra_args` may not set, by sbatch's long name
/// (refused in every spelling sbatch reads: a prefix, the short form, a
/// bundle; see [`options`]), each with why the host owns it.
pub const RESERVED: &[(&str, &str)] = &[
    (
        "array",
        "a block is one job (a parallel block's lanes go as one job array by themselves)",
    ),
    ("chdir", "the job runs in the block's working directory"),
    (
        "cluster",
        "wfhost watches, cancels and cleans up its jobs on this cluster",
    ),
    (
        "clusters",
        "wfhost watches, cancels and cleans up its jobs on this cluster",
    ),
    ("comment", "it marks the job as the run's, for `wfhost gc`"),
    (
        "error",
        "Slurm's own output goes to the bundle's slurm/job.log",
    ),
    ("job-name", "the job is named wfhost:<stage>"),
    (
        "output",
        "Slurm's own output goes to the bundle's slurm/job.log",
    ),
    ("parsable", "wfhost reads the job id itself"),
    ("wait", "wfhost waits for the job itself"),
    ("wrap", "the batch script is wfhost's"),
];

/// A Slurm option of a block that wfhost refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidOption {
    /// The option's field: `extra_args`, `partition`, `time_limit`.
    pub field: &'static str,
    /// The word of `extra_args` it is about.
    pub index: Option<usize>,
    pub message: String,
}

impl std::fmt::Display for InvalidOption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "slurm {}: {}", self.field, self.message)
    }
}

impl SlurmOptions {
    /// Check the options as `sbatch` will read them: `extra_args` as
    /// sbatch's getopt_long reads them, none of them one of [`RESERVED`]
    /// however it is written; `partition` and `time_limit` values, not
    /// options.
    pub fn check(&self) -> Result<(), InvalidOption> {
        if let Some(index) = self.extra_args.iter().position(|a| a.contains('\0')) {
            return Err(InvalidOption {
                field: "extra_args",
                index: Some(index),
                message: "an argument contains a NUL byte".into(),
            });
        }
        options::check(&self.extra_args, RESERVED).map_err(|e| InvalidOption {
            field: "extra_args",
            index: Some(e.index),
            message: e.message,
        })?;
        for (field, value) in [
            ("partition", &self.partition),
            ("time_limit", &self.time_limit),
        ] {
            if let Some(v) = value
                && (v.is_empty() || v.contains(['\0', '\n']) || v.starts_with('-'))
            {
                return Err(InvalidOption {
                    field,
                    index: None,
                    message: format!("`{}` is not a valid value", v.escape_debug()),
                });
            }
        }
        Ok(())
    }
}

fn check_options(options: &SlurmOptions) -> Result<(), ExecError> {
    options
        .check()
        .map_err(|e| ExecError::Invalid(e.to_string()))
}

/// `'…'` for `sh`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The batch script's first command: unset every exported variable but the
/// documented base ([`crate::BASE_ENV`], `LC_*`) and the job's own
/// `SLURM_*`, so that a command gets nothing else of the submitter's
/// environment (which sbatch exports by default); the contract and the
/// block's variables come with each command.
fn env_cleanup() -> String {
    let keep: Vec<String> = crate::BASE_ENV
        .iter()
        .map(|v| v.to_string())
        .chain(["LC_*".into(), "SLURM_*".into()])
        .collect();
    format!(
        "for v in $(env | sed -n 's/^\\([A-Za-z_][A-Za-z0-9_]*\\)=.*/\\1/p'); do case \"$v\" in {}) ;; *) (unset \"$v\") 2>/dev/null && unset \"$v\" ;; esac; done\n",
        keep.join("|")
    )
}

/// The batch script: each command in a subshell with its cwd and env, its
/// output into the bundle, its start, end and exit code under `slurm/`.
/// The first command that fails ends the script with its exit code.
fn batch_script(request: &ExecRequest, bundle: &Path, workdir: &Path) -> String {
    let b = sh_quote(&bundle.display().to_string());
    let mut s = String::new();
    s.push_str("#!/bin/sh\n");
    // One comment line whatever the ids hold: escaped, never a second line.
    s.push_str(&format!(
        "# Written by wfhost for {} (run {}); do not edit: the bundle is immutable.\n",
        wfhost_core::text::escape(&request.meta.stage_id),
        request.meta.run_id
    ));
    s.push_str(&format!("B={b}\n"));
    s.push_str("now() { date +%s%3N; }\n");
    // How the script ended, for a host that finds the job gone from the
    // controller.
    s.push_str("trap 'echo \"$? $(now)\" > \"$B/slurm/job.end\"' EXIT\n");
    s.push_str(&env_cleanup());
    for (i, command) in request.spec.commands.iter().enumerate() {
        let n = i + 1;
        let (stdout, stderr) = bundle::log_names(n);
        let cwd = exec::resolve_cwd(workdir, command.cwd.as_deref());
        let path_override = command.path_override();
        let assignments: Vec<String> = request
            .env
            .iter()
            .chain(command.env.iter())
            .map(|(k, v)| sh_quote(&format!("{k}={v}")))
            .collect();
        let argv: Vec<String> = command.argv.iter().map(|a| sh_quote(a)).collect();
        s.push_str(&format!("\n# command {n}\n"));
        s.push_str(&format!("now > \"$B/slurm/cmd-{n}.start\"\n"));
        s.push_str(&format!(
            "if ! cd {} 2>/dev/null; then echo \"126 $(now) cwd\" > \"$B/slurm/cmd-{n}.end\"; : > \"$B/{stdout}\"; echo 'cwd is not a directory on the compute node' > \"$B/{stderr}\"; exit 126; fi\n",
            sh_quote(&cwd.display().to_string())
        ));
        let lookup_path = path_override
            .map(sh_quote)
            .unwrap_or_else(|| "\"$PATH\"".into());
        s.push_str(&format!(
            "if ! PATH={lookup_path} command -v {} >/dev/null 2>&1; then echo \"127 $(now) not-found\" > \"$B/slurm/cmd-{n}.end\"; : > \"$B/{stdout}\"; echo 'program not found on the compute node' > \"$B/{stderr}\"; exit 127; fi\n",
            argv[0]
        ));
        s.push_str(&format!(
            "env -- {} {} > \"$B/{stdout}\" 2> \"$B/{stderr}\" < /dev/null\n",
            assignments.join(" "),
            argv.join(" ")
        ));
        s.push_str(&format!(
            "rc=$?\necho \"$rc $(now)\" > \"$B/slurm/cmd-{n}.end\"\n[ \"$rc\" -eq 0 ] || exit \"$rc\"\n"
        ));
    }
    s
}

/// A block checked and written out as a batch script, not submitted yet.
pub(crate) struct Prepared {
    pub(crate) workdir: PathBuf,
    pub(crate) bundle_dir: PathBuf,
    pub(crate) script: PathBuf,
    pub(crate) started_ms: u64,
}

/// Check the block and write its batch script into its bundle directory.
/// Nothing is left behind when this fails.
pub(crate) fn prepare(
    request: &ExecRequest,
    options: &SlurmOptions,
) -> Result<Prepared, ExecError> {
    if request.stdin.is_some() {
        return Err(ExecError::Invalid(
            "a Slurm job has no stdin to feed; deliver the input as a file".into(),
        ));
    }
    exec::check(&request.spec)?;
    check_options(options)?;
    if !request.workdir.is_dir() {
        return Err(ExecError::Invalid(format!(
            "the working directory {} does not exist",
            request.workdir.display()
        )));
    }
    // The policy again, on the executables as they resolve here, right
    // before the job is submitted: past that point the host no longer
    // controls what runs.
    for (i, command) in request.spec.commands.iter().enumerate() {
        if let Err(message) = crate::local::preflight(request, i + 1, command) {
            return Err(ExecError::Invalid(message));
        }
        if command.argv[0].contains('=') {
            return Err(ExecError::Invalid(format!(
                "command {}: a program name with `=` cannot be run by the Slurm executor",
                i + 1
            )));
        }
    }
    let workdir = std::path::absolute(&request.workdir).unwrap_or(request.workdir.clone());
    let bundle_dir = std::path::absolute(&request.bundle_dir).unwrap_or(request.bundle_dir.clone());
    std::fs::create_dir_all(bundle_dir.join("slurm")).map_err(|e| {
        ExecError::Failed(format!(
            "cannot create the bundle {}: {e}",
            bundle_dir.display()
        ))
    })?;
    let script = bundle_dir.join("slurm/job.sh");
    if let Err(e) = std::fs::write(&script, batch_script(request, &bundle_dir, &workdir)) {
        let _ = std::fs::remove_dir_all(&bundle_dir);
        return Err(ExecError::Failed(format!(
            "cannot write the batch script {}: {e}",
            script.display()
        )));
    }
    Ok(Prepared {
        workdir,
        bundle_dir,
        script,
        started_ms: unix_ms(),
    })
}

/// The `sbatch` options of a block (all but `--output`, `--parsable` and
/// the script).
pub(crate) fn sbatch_args(
    request: &ExecRequest,
    workdir: &Path,
    options: &SlurmOptions,
    deadline: Option<Instant>,
) -> Vec<String> {
    let mut args = vec![
        format!(
            "--job-name=wfhost:{}",
            wfhost_core::text::escape(&request.meta.stage_id)
        ),
        format!(
            "--comment={COMMENT_PREFIX}{};pid={};host={}",
            request.meta.run_id,
            std::process::id(),
            crate::hostname()
        ),
        format!("--chdir={}", workdir.display()),
    ];
    if let Some(p) = &options.partition {
        args.push(format!("--partition={p}"));
    }
    match (&options.time_limit, deadline) {
        (Some(t), _) => args.push(format!("--time={t}")),
        // Slurm's own limit as a backstop, should the host die: the
        // block's timeout rounded up to minutes, plus one.
        (None, Some(deadline)) => {
            let left = deadline.saturating_duration_since(Instant::now());
            args.push(format!("--time={}", left.as_secs().div_ceil(60) + 1));
        }
        (None, None) => {}
    }
    if let Some(c) = options.cpus_per_task {
        args.push(format!("--cpus-per-task={c}"));
    }
    if let Some(m) = options.mem_mb {
        args.push(format!("--mem={m}M"));
    }
    args.extend(options.extra_args.iter().cloned());
    args
}

/// A job submitted by [`SlurmExecutor::submit`], to be finished with
/// [`SlurmExecutor::finish`] once it left the queue.
#[derive(Debug, Clone)]
pub struct SubmittedJob {
    /// `<id>`, or `<array id>_<task>` for a task of a job array.
    pub job_id: String,
    request: ExecRequest,
    bundle_dir: PathBuf,
    started_ms: u64,
    /// An array task's Slurm log (`%A_%a.log` of its array).
    array_log: Option<PathBuf>,
}

/// Output of a Slurm client command.
pub(crate) struct Output {
    pub(crate) ok: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl SlurmExecutor {
    pub(crate) async fn slurm(&self, program: &str, args: &[String]) -> Result<Output, ExecError> {
        let child = tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output();
        match tokio::time::timeout(self.command_timeout, child).await {
            Err(_) => Err(ExecError::Unavailable(format!(
                "Slurm is not reachable: `{program}` did not answer within {:?}",
                self.command_timeout
            ))),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(ExecError::Unavailable(format!(
                    "Slurm is not available on this host: `{program}` not found; install and start it (scripts/services.sh slurm)"
                )))
            }
            Ok(Err(e)) => Err(ExecError::Failed(format!("cannot run `{program}`: {e}"))),
            Ok(Ok(out)) => Ok(Output {
                ok: out.status.success(),
                stdout: String::from_utf8_lossy(&out.stdout).trim().to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            }),
        }
    }

    /// Run an exec block as a Slurm job and write its bundle.
    pub async fn run(
        &self,
        request: &ExecRequest,
        options: &SlurmOptions,
    ) -> Result<ExecOutcome, ExecError> {
        let job = self.submit(request, options).await?;
        self.wait_and_finish(job, request.deadline).await
    }

    /// Wait for a submitted job (cancelling it at `deadline`) and seal its
    /// bundle.
    pub async fn wait_and_finish(
        &self,
        job: SubmittedJob,
        deadline: Option<Instant>,
    ) -> Result<ExecOutcome, ExecError> {
        let mut guard = CancelOnDrop(Some(job.job_id.clone()));
        self.board.track(&job.job_id, job.bundle_dir.clone());
        // Submitted is queued: the watcher hears of the job at once, even
        // when it ends before a status round shows it running.
        self.tell(&job.job_id, "PENDING");
        let mut end = self.board.wait(self, &job.job_id, deadline).await;
        let timed_out = end.is_none();
        if timed_out {
            let _ = self.cancel(&job.job_id).await;
            // Let the cancellation land so the final state says so.
            let settle = Instant::now() + self.command_timeout;
            end = self.board.wait(self, &job.job_id, Some(settle)).await;
        }
        guard.0 = None;
        self.board.forget(&job.job_id);
        self.finish_with(&job, timed_out, end).await
    }

    /// Check the block and submit it as a batch job (its bundle directory
    /// holding the script). Nothing is left behind when this fails.
    pub async fn submit(
        &self,
        request: &ExecRequest,
        options: &SlurmOptions,
    ) -> Result<SubmittedJob, ExecError> {
        let prepared = prepare(request, options)?;
        let log_path = prepared
            .bundle_dir
            .join("slurm/job.log")
            .display()
            .to_string();
        // sbatch expands `%` patterns in file names; a bundle path with one
        // gets no job log rather than a wrong one.
        let log_path = if log_path.contains('%') {
            "/dev/null".to_string()
        } else {
            log_path
        };
        let mut args = sbatch_args(request, &prepared.workdir, options, request.deadline);
        args.insert(0, format!("--output={log_path}"));
        args.push(prepared.script.display().to_string());
        let submitted = self.sbatch(&args).await;
        let job_id = match submitted {
            Ok(id) => id,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&prepared.bundle_dir);
                return Err(e);
            }
        };
        Ok(SubmittedJob {
            job_id,
            request: request.clone(),
            bundle_dir: prepared.bundle_dir,
            started_ms: prepared.started_ms,
            array_log: None,
        })
    }

    /// Run `sbatch --parsable ARGS`; the job id it printed.
    pub(crate) async fn sbatch(&self, args: &[String]) -> Result<String, ExecError> {
        let mut all = vec!["--parsable".to_string()];
        all.extend(args.iter().cloned());
        let out = self.slurm("sbatch", &all).await?;
        if !out.ok {
            let message = if out.stderr.is_empty() {
                "sbatch failed without a message".to_string()
            } else {
                out.stderr
            };
            return Err(if is_unreachable(&message) {
                ExecError::Unavailable(format!("Slurm is not reachable: {message}"))
            } else {
                ExecError::Invalid(format!("sbatch refused the job: {message}"))
            });
        }
        // `--parsable` prints `id` or `id;cluster`.
        let job_id = out
            .stdout
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        if job_id.is_empty() || !job_id.chars().all(|c| c.is_ascii_digit()) {
            return Err(ExecError::Failed(format!(
                "sbatch did not print a job id (it printed `{}`)",
                out.stdout
            )));
        }
        Ok(job_id)
    }

    /// `scancel` a job.
    pub async fn cancel(&self, job_id: &str) -> Result<(), ExecError> {
        let out = self.slurm("scancel", &[job_id.to_string()]).await?;
        if out.ok {
            Ok(())
        } else {
            Err(ExecError::Failed(format!(
                "scancel {job_id} failed: {}",
                out.stderr
            )))
        }
    }

    /// Whether the job is still queued or running, and its state.
    pub async fn poll(&self, job_id: &str) -> Result<(bool, String), ExecError> {
        let out = self.slurm("squeue", &squeue_args(job_id)).await?;
        if out.ok && is_active(&out.stdout) {
            let state = queue_state(&out.stdout);
            self.tell(job_id, state);
            return Ok((true, state.to_string()));
        }
        Ok((false, self.final_state(job_id, None).await.0))
    }

    /// Read what a job that left the queue did and seal its bundle.
    /// `timed_out`: the host gave up on it at the block's deadline.
    pub async fn finish(
        &self,
        job: &SubmittedJob,
        timed_out: bool,
    ) -> Result<ExecOutcome, ExecError> {
        self.finish_with(job, timed_out, None).await
    }

    /// [`Self::finish`], with how the job ended when the board knows.
    async fn finish_with(
        &self,
        job: &SubmittedJob,
        timed_out: bool,
        end: Option<JobEnd>,
    ) -> Result<ExecOutcome, ExecError> {
        let request = &job.request;
        let bundle_dir = &job.bundle_dir;
        let job_id = job.job_id.clone();
        let started_ms = job.started_ms;
        let job_log = "slurm/job.log";
        if let Some(log) = &job.array_log {
            // An array task's Slurm log is the array's; the bundle keeps a
            // copy of its own.
            let _ = std::fs::copy(log, bundle_dir.join(job_log));
        }
        let (state, exit_code) = match end {
            Some(end) if end.state != "UNKNOWN" => (end.state, end.exit_code),
            _ => self.final_state(&job_id, Some(bundle_dir)).await,
        };
        let slurm_timed_out = timed_out || state == "TIMEOUT";

        let results = collect_results(request, bundle_dir, &state, slurm_timed_out);
        // The job itself runs with the user's authority and writes where it
        // likes; the host's own last writes go through the handle.
        let bundle = bundle::BundleDir::open(bundle_dir).map_err(|e| {
            ExecError::Failed(format!(
                "cannot open the bundle {}: {e}",
                bundle_dir.display()
            ))
        })?;
        bundle::close(
            request,
            &bundle,
            bundle::Finished {
                executor: "slurm",
                started_ms,
                results,
                container: None,
                slurm: Some(SlurmInfo {
                    job_id,
                    state,
                    exit_code,
                    job_log: job_log.to_string(),
                }),
                extra_files: &["slurm/job.sh", "slurm/job.log", "slurm/job.end"],
            },
        )
        .await
    }

    pub(crate) fn tell(&self, job_id: &str, state: &str) {
        if let Some(watcher) = &self.watcher {
            (watcher.0)(job_id, state);
        }
    }

    /// The job's final state and `exit:signal`: from `scontrol show job`
    /// while the controller remembers it, else from `sacct`, else from the
    /// marker the job script left in `bundle`.
    async fn final_state(&self, job_id: &str, bundle: Option<&Path>) -> (String, Option<String>) {
        let args = [
            "show".to_string(),
            "job".to_string(),
            "-o".to_string(),
            job_id.to_string(),
        ];
        if let Ok(out) = self.slurm("scontrol", &args).await
            && out.ok
        {
            let field = |name: &str| {
                out.stdout
                    .split_whitespace()
                    .find_map(|kv| kv.strip_prefix(name))
                    .map(str::to_string)
            };
            if let Some(state) = field("JobState=") {
                return (state, field("ExitCode="));
            }
        }
        let args = [
            "-n".to_string(),
            "-P".to_string(),
            "-X".to_string(),
            "-j".to_string(),
            job_id.to_string(),
            "-o".to_string(),
            "State,ExitCode".to_string(),
        ];
        if let Ok(out) = self.slurm("sacct", &args).await
            && out.ok
            && let Some(line) = out.stdout.lines().next()
            && let Some((state, code)) = line.split_once('|')
        {
            // sacct writes `CANCELLED by 0`.
            let state = state.split_whitespace().next().unwrap_or(state);
            return (state.to_string(), Some(code.to_string()));
        }
        if let Some(code) =
            bundle.and_then(|b| std::fs::read_to_string(b.join("slurm/job.end")).ok())
            && let Some(code) = code
                .split_whitespace()
                .next()
                .and_then(|c| c.parse::<i32>().ok())
        {
            let state = if code == 0 { "COMPLETED" } else { "FAILED" };
            return (state.to_string(), Some(format!("{code}:0")));
        }
        ("UNKNOWN".to_string(), None)
    }
}

fn squeue_args(job_id: &str) -> [String; 5] {
    [
        "-h".to_string(),
        "-j".to_string(),
        job_id.to_string(),
        "-o".to_string(),
        "%T".to_string(),
    ]
}

/// The state `squeue` shows for an active job.
fn queue_state(stdout: &str) -> &str {
    stdout.lines().next().unwrap_or("RUNNING").trim()
}

pub(crate) fn is_active(states: &str) -> bool {
    states.lines().any(|s| {
        matches!(
            s.trim(),
            "PENDING"
                | "CONFIGURING"
                | "RUNNING"
                | "COMPLETING"
                | "SUSPENDED"
                | "REQUEUED"
                | "REQUEUE_HOLD"
                | "REQUEUE_FED"
                | "RESIZING"
                | "SIGNALING"
                | "STAGE_OUT"
                | "STOPPED"
        )
    })
}

fn is_unreachable(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("unable to contact slurm controller")
        || m.contains("connection refused")
        || m.contains("could not establish a configuration source")
        || m.contains("munge")
}

/// Read what the batch script recorded, truncate logs to the cap.
fn collect_results(
    request: &ExecRequest,
    bundle_dir: &Path,
    job_state: &str,
    timed_out: bool,
) -> Vec<CommandResult> {
    let read = |name: String| std::fs::read_to_string(bundle_dir.join("slurm").join(name)).ok();
    let mut results = Vec::new();
    for (i, command) in request.spec.commands.iter().enumerate() {
        let n = i + 1;
        let mut result = CommandResult::starting(n, command);
        let Some(start) = read(format!("cmd-{n}.start")) else {
            if i == 0 {
                // The job never got to run anything: say why on command 1.
                let message = if timed_out {
                    "the job did not start before the block's timeout".to_string()
                } else {
                    format!("the job ended ({job_state}) before its first command ran")
                };
                let _ = std::fs::write(bundle_dir.join(&result.stdout), b"");
                let _ = std::fs::write(bundle_dir.join(&result.stderr), message.as_bytes());
                result.ended_ms = unix_ms();
                result.stderr_bytes = message.len() as u64;
                result.timed_out = timed_out;
                result.error = (!timed_out).then_some(message);
                results.push(result);
            }
            break;
        };
        result.started_ms = start.trim().parse().unwrap_or(0);
        let end = read(format!("cmd-{n}.end"));
        let mut parts = end.as_deref().unwrap_or_default().split_whitespace();
        let exit_code: Option<i32> = parts.next().and_then(|c| c.parse().ok());
        result.ended_ms = parts
            .next()
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(unix_ms);
        let marker = parts.next();
        for name in [&result.stdout, &result.stderr] {
            // A command that was killed before its redirections opened.
            let path = bundle_dir.join(name);
            if !path.exists() {
                let _ = std::fs::write(&path, b"");
            }
        }
        (result.stdout_bytes, result.stdout_truncated) =
            cap_file(&bundle_dir.join(&result.stdout), request.output_cap);
        (result.stderr_bytes, result.stderr_truncated) =
            cap_file(&bundle_dir.join(&result.stderr), request.output_cap);
        let finished = end.is_some();
        result.error = match marker {
            Some("not-found") => Some(format!(
                "command {n}: program `{}` not found on the compute node",
                command.argv[0]
            )),
            Some("cwd") => Some(format!(
                "command {n}: cwd `{}` is not a directory on the compute node",
                command.cwd.as_deref().unwrap_or(".")
            )),
            _ if !finished && !timed_out => Some(format!(
                "command {n}: the job ended ({job_state}) while it ran"
            )),
            _ => None,
        };
        result.exit_code = if finished { exit_code } else { None };
        result.timed_out = !finished && timed_out;
        let ok = result.succeeded();
        results.push(result);
        if !ok {
            break;
        }
    }
    results
}

/// Keep at most `cap` bytes of a log the job wrote; returns (bytes the
/// command wrote, truncated).
fn cap_file(path: &PathBuf, cap: u64) -> (u64, bool) {
    let Ok(meta) = std::fs::metadata(path) else {
        return (0, false);
    };
    let len = meta.len();
    if len > cap
        && let Ok(f) = std::fs::OpenOptions::new().write(true).open(path)
        && f.set_len(cap).is_ok()
    {
        return (len, true);
    }
    (len, false)
}

/// Cancels a submitted job when the block is abandoned (its future dropped)
/// before the job finished.
struct CancelOnDrop(Option<String>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(id) = self.0.take() {
            // Drop cannot await; a thread reaps scancel so no zombie stays.
            std::thread::spawn(move || {
                let _ = std::process::Command::new("scancel")
                    .arg(&id)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            });
        }
    }
}

/// wfhost jobs in the queue whose owner `is_live` says is gone: left
/// behind by a crashed host. Cancels them and returns their ids. Without
/// Slurm there is nothing to cancel. Only blocks' jobs (`wfhost-run=`)
/// are considered, never agents submitted as jobs (`wfhost-agent=`).
pub async fn cancel_orphans(is_live: impl Fn(&Owner) -> bool) -> Vec<String> {
    let slurm = SlurmExecutor::default();
    let args = ["-h".to_string(), "-o".to_string(), "%i|%k".to_string()];
    let Ok(out) = slurm.slurm("squeue", &args).await else {
        return Vec::new();
    };
    if !out.ok {
        return Vec::new();
    }
    let mut cancelled = Vec::new();
    for line in out.stdout.lines() {
        let Some((id, comment)) = line.trim().split_once('|') else {
            continue;
        };
        let Some(owner) = parse_comment(comment) else {
            continue;
        };
        if is_live(&owner) {
            continue;
        }
        if let Ok(o) = slurm.slurm("scancel", &[id.to_string()]).await
            && o.ok
        {
            cancelled.push(id.to_string());
        }
    }
    cancelled
}

/// `wfhost-run=<run>;pid=<pid>;host=<host>` → its owner.
fn parse_comment(comment: &str) -> Option<Owner> {
    let rest = comment.strip_prefix(COMMENT_PREFIX)?;
    let mut parts = rest.split(';');
    let run_id = parts.next()?.to_string();
    let mut owner = Owner {
        run_id,
        pid: None,
        host: String::new(),
    };
    for part in parts {
        match part.split_once('=') {
            Some(("pid", pid)) => owner.pid = pid.parse().ok(),
            Some(("host", host)) => owner.host = host.to_string(),
            _ => {}
        }
    }
    Some(owner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_comments_name_their_owner() {
        assert_eq!(
            parse_comment("wfhost-run=r1;pid=42;host=n1"),
            Some(Owner {
                run_id: "r1".into(),
                pid: Some(42),
                host: "n1".into()
            })
        );
        assert_eq!(parse_comment("someone else's job"), None);
        // Agents submitted as jobs are nobody's orphans.
        assert_eq!(
            parse_comment(&format!("{AGENT_COMMENT_PREFIX}http://h:7464")),
            None
        );
    }

    #[test]
    fn the_batch_script_drops_the_submitters_environment() {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{}env", env_cleanup()))
            .env("MY_SECRET", "s3cr3t")
            .env("SLURM_JOB_ID", "7")
            .env("LC_ALL", "C")
            .output()
            .unwrap();
        let env = String::from_utf8_lossy(&out.stdout);
        assert!(!env.contains("MY_SECRET"), "{env}");
        assert!(env.contains("SLURM_JOB_ID=7\n"), "{env}");
        assert!(env.contains("LC_ALL=C\n"), "{env}");
        assert!(env.lines().any(|l| l.starts_with("PATH=")), "{env}");
    }

    #[test]
    fn a_batch_script_comment_is_one_line_whatever_the_ids_hold() {
        let request = ExecRequest {
            spec: wfhost_core::policy::exec::ExecSpec {
                commands: vec![wfhost_core::policy::exec::ExecCommand {
                    argv: vec!["true".into()],
                    cwd: None,
                    env: vec![],
                }],
                allow_shell: false,
            },
            workdir: "/w".into(),
            bundle_dir: "/w/b".into(),
            env: vec![],
            meta: crate::BundleMeta {
                agent_id: "h".into(),
                run_id: "run-20260101-000000-000001".parse().unwrap(),
                stage_id: "main.x\ntouch /tmp/wfhost-pwned".into(),
                step: 0,
                attempt: 1,
            },
            deadline: None,
            output_cap: 1,
            stdin: None,
            mask: Default::default(),
        };
        let script = batch_script(&request, &request.bundle_dir, &request.workdir);
        let lines: Vec<&str> = script.lines().take(3).collect();
        assert!(
            lines[1].starts_with("# ") && lines[1].contains(r"main.x\ntouch"),
            "{script}"
        );
        assert!(lines[2].starts_with("B="), "{script}");
        let args = sbatch_args(&request, &request.workdir, &SlurmOptions::default(), None);
        assert!(args.iter().all(|a| !a.contains('\n')), "{args:?}");
    }

    #[test]
    fn quoting_survives_quotes_and_spaces() {
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
        assert_eq!(sh_quote("$HOME `x`"), "'$HOME `x`'");
    }

    #[test]
    fn reserved_options_are_refused_in_every_spelling() {
        for (arg, says) in [
            (
                "--output=x",
                "`--output=x` is sbatch's --output, which wfhost sets itself",
            ),
            ("--out=x", "`--out=x` is sbatch's --output"),
            ("-o", "`-o` needs a value"),
            ("-ox", "`-ox` is sbatch's --output"),
            ("--wrap=true", "is sbatch's --wrap"),
            ("--wr=true", "is sbatch's --wrap"),
            ("--chdir=/", "is sbatch's --chdir"),
            ("--chd=/", "`--chd=/` is sbatch's --chdir"),
            ("-D/", "is sbatch's --chdir"),
            ("-Jx", "is sbatch's --job-name"),
            ("--job-n=x", "`--job-n=x` is sbatch's --job-name"),
            ("--comment=x", "is sbatch's --comment"),
            (
                "--comm=x",
                "`--comm=x` is sbatch's --comment, which wfhost sets itself: it marks the job as the run's",
            ),
            ("--arr=0-2", "`--arr=0-2` is sbatch's --array"),
            ("-a0-2", "`-a0-2` is sbatch's --array"),
            ("-Ha0-2", "`-Ha0-2` holds -a, sbatch's --array"),
            ("-W", "`-W` is sbatch's --wait"),
            ("--pars", "is sbatch's --parsable"),
            ("-Mother", "is sbatch's --clusters"),
            ("--cluster=other", "is sbatch's --cluster"),
            ("--err=x", "is sbatch's --error"),
            ("--co=x", "ambiguous"),
            ("--no-such-option", "not an option of sbatch"),
            ("job.sh", "would end its options there"),
            ("--", "ends sbatch's options"),
        ] {
            let o = SlurmOptions {
                extra_args: vec![arg.into()],
                ..Default::default()
            };
            match check_options(&o) {
                Err(ExecError::Invalid(m)) => {
                    assert!(m.starts_with("slurm extra_args: "), "{arg}: {m}");
                    assert!(m.contains(says), "{arg}: {m}");
                }
                other => panic!("{arg}: {other:?}"),
            }
        }
        for args in [
            &["-a", "0-2"][..],
            &["-Ha", "0-2"],
            &["--mem=1G", "--arr", "0-2"],
            &["--time", "5", "-o", "/tmp/x"],
        ] {
            let o = SlurmOptions {
                extra_args: args.iter().map(|a| a.to_string()).collect(),
                ..Default::default()
            };
            let e = o.check().unwrap_err();
            assert_eq!(e.index, Some(args.len() - 2), "{args:?}: {e}");
            assert!(
                e.message.contains("which wfhost sets itself"),
                "{args:?}: {e}"
            );
        }
        let ok = SlurmOptions {
            extra_args: [
                "--nice=10",
                "--export=ALL",
                "--mem=1G",
                "--time",
                "5",
                "-c",
                "2",
                "--partition",
                "debug",
                "--account",
                "--comment=x",
            ]
            .map(String::from)
            .to_vec(),
            partition: Some("debug".into()),
            ..Default::default()
        };
        assert!(check_options(&ok).is_ok());
        let bad = SlurmOptions {
            partition: Some("--wrap".into()),
            ..Default::default()
        };
        assert!(check_options(&bad).is_err());
        let nul = SlurmOptions {
            extra_args: vec!["--mem=1G".into(), "--account=a\0b".into()],
            ..Default::default()
        };
        assert_eq!(nul.check().unwrap_err().index, Some(1));
    }

    #[test]
    fn every_reserved_option_is_one_of_sbatch() {
        for (name, _) in RESERVED {
            assert!(options::long_option(name).is_some(), "{name}");
        }
    }

    #[test]
    fn active_states() {
        assert!(is_active("RUNNING"));
        assert!(is_active("PENDING\n"));
        assert!(!is_active(""));
        assert!(!is_active("COMPLETED"));
        assert!(!is_active("TIMEOUT"));
    }
}
