//! The local executor: commands as host processes under tokio.
//!
//! Each command runs in a process group of its own. When it exits, when the
//! block's deadline passes, or when the caller gives up (the future is
//! dropped), the whole group is killed and reaped: nothing it started
//! outlives the block, and no zombie is left.

use std::path::{Path, PathBuf};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use wfhost_core::policy::exec::{self, ExecCommand};
use wfhost_core::policy::secrets::Masker;

use crate::bundle;
use crate::containment;
use crate::spawn;
use crate::{CommandResult, ExecError, ExecOutcome, ExecRequest, unix_ms};

/// Kills a process group when dropped.
struct GroupGuard(Option<i32>);

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            // SAFETY: signalling a process group we created; ESRCH (already
            // gone) is fine.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Wait for `child`, noting its descendants every few milliseconds so the
/// ones that leave its process group can be found afterwards.
async fn watch(
    child: &mut spawn::Spawned,
    mut tree: Option<&mut containment::Tree>,
) -> std::io::Result<std::process::ExitStatus> {
    // Short commands never pay for a walk of /proc; the sweep afterwards
    // finds what they left through the subreapers.
    let period = std::time::Duration::from_millis(50);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            status = child.wait() => return status,
            _ = tick.tick() => {
                if let Some(tree) = tree.as_deref_mut() {
                    tree.observe();
                }
            }
        }
    }
}

/// Copy `from` into `file` with `mask`'s values replaced by `***`,
/// keeping at most `cap` bytes (of masked text) and draining the rest.
/// Returns (bytes seen, truncated).
async fn capture(
    mut from: impl AsyncRead + Unpin,
    file: std::io::Result<std::fs::File>,
    cap: u64,
    mask: Masker,
) -> std::io::Result<(u64, bool)> {
    let mut file = tokio::fs::File::from_std(file?);
    let mut buf = vec![0u8; 64 * 1024];
    let mut masking = mask.stream();
    let (mut seen, mut kept, mut cut) = (0u64, 0u64, false);
    let mut keep = async |bytes: &[u8], kept: &mut u64, cut: &mut bool| {
        let room = cap.saturating_sub(*kept).min(bytes.len() as u64) as usize;
        *cut |= room < bytes.len();
        if room > 0 {
            file.write_all(&bytes[..room]).await?;
            *kept += room as u64;
        }
        std::io::Result::Ok(())
    };
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        seen += n as u64;
        let masked = masking.push(&buf[..n]);
        keep(&masked, &mut kept, &mut cut).await?;
    }
    let rest = masking.finish();
    keep(&rest, &mut kept, &mut cut).await?;
    file.flush().await?;
    Ok((seen, cut))
}

/// Find the executable `program` names: a path (relative to `cwd`) or a
/// name looked up in `PATH`.
fn resolve(program: &str, cwd: &Path, path_var: Option<&str>) -> Option<PathBuf> {
    if program.contains('/') {
        let p = cwd.join(program);
        return p.is_file().then_some(p);
    }
    let path_var = path_var
        .map(str::to_string)
        .or_else(|| std::env::var("PATH").ok())
        .unwrap_or_default();
    std::env::split_paths(&path_var)
        .map(|dir| dir.join(program))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Run an exec block on this host and write its bundle.
pub async fn run_local(request: &ExecRequest) -> Result<ExecOutcome, ExecError> {
    exec::check(&request.spec)?;
    if !request.workdir.is_dir() {
        return Err(ExecError::Invalid(format!(
            "the working directory {} does not exist",
            request.workdir.display()
        )));
    }
    let bundle = bundle::BundleDir::create(&request.bundle_dir).map_err(|e| {
        ExecError::Failed(format!(
            "cannot create the bundle {}: {e}",
            request.bundle_dir.display()
        ))
    })?;
    let started_ms = unix_ms();
    let mut results = Vec::new();
    for (i, command) in request.spec.commands.iter().enumerate() {
        let result = run_command(request, &bundle, i + 1, command).await;
        let ok = result.succeeded();
        results.push(result);
        if !ok {
            break;
        }
    }
    bundle::close(
        request,
        &bundle,
        bundle::Finished {
            executor: "local",
            started_ms,
            results,
            container: None,
            slurm: None,
            extra_files: &[],
        },
    )
    .await
}

/// The checks right before a command runs, on this host: the policy again,
/// the cwd, and the executable that would really run (a symlink to a shell
/// is still a shell). Returns that executable, or why the command cannot
/// run.
pub(crate) fn preflight(
    request: &ExecRequest,
    index: usize,
    command: &ExecCommand,
) -> Result<PathBuf, String> {
    exec::check_command(index, command, request.spec.allow_shell).map_err(|v| v.to_string())?;
    let cwd = crate::working_dir(&request.workdir, index, command)?;
    let path_override = command.path_override();
    let Some(executable) = resolve(&command.argv[0], &cwd, path_override) else {
        return Err(format!(
            "command {index}: program `{}` not found",
            command.argv[0]
        ));
    };
    if let Ok(real) = executable.canonicalize() {
        let name = real
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        exec::check_program(&name, &command.argv[1..], request.spec.allow_shell).map_err(
            |(rule, reason)| {
                format!(
                    "command {index} (`{}`) refused by rule `{rule}`: {} resolves to {}: {reason}",
                    command.argv.join(" "),
                    command.argv[0],
                    real.display()
                )
            },
        )?;
    }
    Ok(executable)
}

/// A command's whole environment: nothing of wfhost's own but the
/// documented base, then the block's variables and the command's. `PWD` is
/// the command's own directory, set last so nothing overrides it (tools
/// such as Bun and Node CLIs take `$PWD` as their project directory); the
/// previous directory is nobody's business.
fn command_env(
    request: &ExecRequest,
    command: &ExecCommand,
    workdir: &Path,
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let mut env: std::collections::BTreeMap<std::ffi::OsString, std::ffi::OsString> =
        std::collections::BTreeMap::new();
    let pairs = crate::base_env()
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .chain(request.env.iter().map(|(k, v)| (k.into(), v.into())))
        .chain(command.env.iter().map(|(k, v)| (k.into(), v.into())));
    for (k, v) in pairs {
        env.insert(k, v);
    }
    env.insert("PWD".into(), workdir.as_os_str().to_owned());
    env.remove(std::ffi::OsStr::new("OLDPWD"));
    env.into_iter().collect()
}

async fn run_command(
    request: &ExecRequest,
    bundle: &bundle::BundleDir,
    index: usize,
    command: &ExecCommand,
) -> CommandResult {
    let input = if index == 1 {
        request.stdin.clone()
    } else {
        None
    };
    let cwd = exec::resolve_cwd(&request.workdir, command.cwd.as_deref());
    let mut result = CommandResult::starting(index, command);
    let fail = |mut result: CommandResult, message: String| {
        // The log files exist even for a command that never ran, so that
        // every path in the manifest resolves.
        let _ = bundle.write(&result.stdout, b"");
        let _ = bundle.write(&result.stderr, message.as_bytes());
        result.error = Some(message);
        result.ended_ms = unix_ms();
        result
    };

    let executable = match preflight(request, index, command) {
        Ok(executable) => executable,
        Err(message) => return fail(result, message),
    };

    let workdir = std::path::absolute(&cwd).unwrap_or_else(|_| cwd.clone());
    let env = command_env(request, command, &workdir);
    let spec = spawn::SpawnSpec {
        program: &executable,
        argv: &command.argv,
        env: env
            .iter()
            .map(|(k, v)| (k.as_os_str(), v.as_os_str()))
            .collect(),
        cwd: &cwd,
        piped_stdin: input.is_some(),
    };
    let mut child = match spawn::spawn(&spec) {
        Ok(c) => c,
        Err(e) => {
            return fail(
                result,
                format!("command {index}: cannot start `{}`: {e}", command.argv[0]),
            );
        }
    };
    let mut group = GroupGuard(Some(child.id() as i32));
    // Declared after the group guard so it is dropped first: whatever left
    // the group is found and killed too, however this future ends.
    let mut tree = Some(containment::Tree::new(child.id()));
    // Fed from its own task: a child that never reads its stdin must not
    // block us, and one that exits early (a broken pipe) is not an error.
    if let (Some(bytes), Some(mut pipe)) = (input, child.stdin.take()) {
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let _ = pipe.write_all(&bytes).await;
            let _ = pipe.shutdown().await;
        });
    }
    let out = tokio::spawn(capture(
        child.stdout.take().expect("stdout is piped"),
        bundle.create_file(&result.stdout),
        request.output_cap,
        request.mask.clone(),
    ));
    let err = tokio::spawn(capture(
        child.stderr.take().expect("stderr is piped"),
        bundle.create_file(&result.stderr),
        request.output_cap,
        request.mask.clone(),
    ));
    let waited = watch(&mut child, tree.as_mut());
    let status = match request.deadline {
        Some(deadline) => tokio::time::timeout_at(tokio::time::Instant::from_std(deadline), waited)
            .await
            .ok(),
        None => Some(waited.await),
    };
    // Whatever the command left running, in its group or out of it, goes
    // with it; this also closes the pipes the readers are waiting on.
    group.kill();
    if let Some(tree) = tree.as_mut() {
        tree.sweep();
    }
    match status {
        Some(Ok(status)) => {
            use std::os::unix::process::ExitStatusExt;
            result.exit_code = status.code();
            result.signal = status.signal();
        }
        Some(Err(e)) => result.error = Some(format!("command {index}: cannot wait for it: {e}")),
        None => {
            result.timed_out = true;
            let _ = child.wait().await; // reap after the kill
        }
    }
    for (task, bytes, truncated) in [
        (out, &mut result.stdout_bytes, &mut result.stdout_truncated),
        (err, &mut result.stderr_bytes, &mut result.stderr_truncated),
    ] {
        match task.await {
            Ok(Ok((seen, cut))) => {
                *bytes = seen;
                *truncated = cut;
            }
            Ok(Err(e)) => {
                result
                    .error
                    .get_or_insert(format!("command {index}: cannot keep its output: {e}"));
            }
            Err(e) => {
                result
                    .error
                    .get_or_insert(format!("command {index}: output capture failed: {e}"));
            }
        }
    }
    result.ended_ms = unix_ms();
    result
}
