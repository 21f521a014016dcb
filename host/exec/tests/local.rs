//! The local executor against real processes.

use std::path::Path;
use std::time::{Duration, Instant};

use wfhost_core::policy::exec::{ExecCommand, ExecSpec};
use wfhost_exec::{BundleMeta, ExecError, ExecRequest, run_local};

fn cmd(argv: &[&str]) -> ExecCommand {
    ExecCommand {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: None,
        env: vec![],
    }
}

fn request(dir: &Path, commands: Vec<ExecCommand>) -> ExecRequest {
    ExecRequest {
        spec: ExecSpec {
            commands,
            allow_shell: false,
        },
        workdir: dir.to_path_buf(),
        bundle_dir: dir.join(".output/exec/bundle"),
        env: vec![("RUN_ID".into(), "r-1".into())],
        meta: BundleMeta {
            agent_id: "test-host".into(),
            run_id: "run-20260101-000000-000e01".parse().unwrap(),
            stage_id: "main.build".into(),
            step: 3,
            attempt: 1,
        },
        deadline: None,
        output_cap: 1 << 20,
        stdin: None,
        mask: Default::default(),
    }
}

fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join(".output/exec/bundle/manifest.json")).unwrap())
        .unwrap()
}

#[tokio::test]
async fn a_block_writes_the_bundle_layout() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let mut second = cmd(&["printenv", "GREETING", "RUN_ID"]);
    second.cwd = Some("sub".into());
    second.env = vec![("GREETING".into(), "hello".into())];
    let outcome = run_local(&request(
        dir.path(),
        vec![
            cmd(&["echo", "built"]),
            second,
            cmd(&["ls", "/nonexistent-dir"]),
        ],
    ))
    .await
    .unwrap();
    assert!(!outcome.succeeded);
    assert_eq!(outcome.commands.len(), 3);
    let b = dir.path().join(".output/exec/bundle");
    assert_eq!(
        std::fs::read_to_string(b.join("cmd-1.stdout")).unwrap(),
        "built\n"
    );
    assert_eq!(
        std::fs::read_to_string(b.join("cmd-2.stdout")).unwrap(),
        "hello\nr-1\n"
    );
    assert!(
        !std::fs::read_to_string(b.join("cmd-3.stderr"))
            .unwrap()
            .is_empty()
    );
    let m = manifest(dir.path());
    assert_eq!(m["version"], 1);
    assert_eq!(m["executor"], "local");
    assert_eq!(m["succeeded"], false);
    assert_eq!(m["commands"][0]["exit_code"], 0);
    assert_eq!(m["commands"][1]["cwd"], "sub");
    assert_ne!(m["commands"][2]["exit_code"], 0);
    assert_eq!(m["commands"][0]["stdout"], "cmd-1.stdout");
    assert!(m["commands"][0]["ended_ms"].as_u64() >= m["commands"][0]["started_ms"].as_u64());
    assert_eq!(
        m["extra_files"],
        serde_json::json!(["meta/env.json", "meta/repo.txt"])
    );
    let env: serde_json::Value =
        serde_json::from_slice(&std::fs::read(b.join("meta/env.json")).unwrap()).unwrap();
    assert_eq!(env["run_id"], "run-20260101-000000-000e01");
    assert_eq!(env["stage_id"], "main.build");
    assert_eq!(env["executor"], "local");
    assert!(
        std::fs::read_to_string(b.join("meta/repo.txt"))
            .unwrap()
            .starts_with("vcs: none")
    );
    // The bundle is immutable.
    assert!(std::fs::write(b.join("manifest.json"), "x").is_err() || nix_root());
}

/// Root ignores file permissions; the read-only bits are still set.
fn nix_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

#[tokio::test]
async fn the_first_failure_stops_the_block() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = run_local(&request(
        dir.path(),
        vec![cmd(&["false"]), cmd(&["touch", "should-not-exist"])],
    ))
    .await
    .unwrap();
    assert_eq!(outcome.commands.len(), 1);
    assert_eq!(outcome.commands[0].exit_code, Some(1));
    assert!(!dir.path().join("should-not-exist").exists());
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    let mut req = request(
        dir.path(),
        vec![cmd(&[
            "sh",
            "-c",
            &format!("sleep 30 & echo $! > {}; wait", pidfile.display()),
        ])],
    );
    req.spec.allow_shell = true;
    req.deadline = Some(Instant::now() + Duration::from_millis(500));
    let t = Instant::now();
    let outcome = run_local(&req).await.unwrap();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(outcome.commands[0].timed_out);
    assert!(!outcome.succeeded);
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    // The grandchild is dead: gone, or a zombie waiting for init (its
    // parent, the shell, was killed with it).
    assert!(!running(pid), "grandchild {pid} survived the timeout");
}

/// Whether `pid` is a live (not zombie) process.
fn running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .chars()
                .next();
            state != Some('Z') && state != Some('X')
        }
    }
}

#[tokio::test]
async fn output_is_capped_and_truncation_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let mut req = request(
        dir.path(),
        vec![cmd(&["head", "-c", "100000", "/dev/zero"])],
    );
    req.output_cap = 1000;
    let outcome = run_local(&req).await.unwrap();
    let c = &outcome.commands[0];
    assert_eq!((c.stdout_bytes, c.stdout_truncated), (100_000, true));
    assert_eq!(
        std::fs::metadata(dir.path().join(".output/exec/bundle/cmd-1.stdout"))
            .unwrap()
            .len(),
        1000
    );
}

#[tokio::test]
async fn policy_refusals_and_missing_programs_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let refused = run_local(&request(dir.path(), vec![cmd(&["env", "bash", "-c", "x"])])).await;
    match refused {
        Err(ExecError::Refused(v)) => assert_eq!(v.rule, "no-shell"),
        other => panic!("{other:?}"),
    }
    assert!(
        !dir.path().join(".output").exists(),
        "a refused block writes nothing"
    );

    // A symlink to a shell is still a shell, caught right before it runs.
    std::os::unix::fs::symlink("/bin/sh", dir.path().join("innocent")).unwrap();
    let outcome = run_local(&request(
        dir.path(),
        vec![cmd(&["./innocent", "-c", "echo hi"])],
    ))
    .await
    .unwrap();
    let error = outcome.commands[0].error.as_deref().unwrap();
    assert!(
        error.contains("no-shell") && error.contains("resolves to"),
        "{error}"
    );

    let outcome = run_local(&request(dir.path(), vec![cmd(&["no-such-program-xyz"])]))
        .await
        .unwrap();
    assert!(!outcome.succeeded);
    assert!(
        outcome.commands[0]
            .error
            .as_deref()
            .unwrap()
            .contains("`no-such-program-xyz` not found")
    );
}

#[tokio::test]
async fn a_background_process_does_not_outlive_its_command() {
    let dir = tempfile::tempdir().unwrap();
    let mut req = request(
        dir.path(),
        vec![cmd(&["sh", "-c", "sleep 30 & echo started"])],
    );
    req.spec.allow_shell = true;
    let t = Instant::now();
    let outcome = run_local(&req).await.unwrap();
    // The sleep held stdout open; killing the group let the block finish.
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(outcome.succeeded);
    assert_eq!(
        std::fs::read_to_string(dir.path().join(".output/exec/bundle/cmd-1.stdout")).unwrap(),
        "started\n"
    );
}

/// Run a shell script (allowed) and return the pid it wrote to `pid`.
async fn daemon_pid_after(script: &str, deadline: Option<Duration>) -> (i32, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("daemon.pid");
    let script = script.replace("PIDFILE", &pidfile.display().to_string());
    let mut req = request(dir.path(), vec![cmd(&["sh", "-c", &script])]);
    req.spec.allow_shell = true;
    req.deadline = deadline.map(|d| Instant::now() + d);
    run_local(&req).await.unwrap();
    let pid = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (pid, dir)
}

#[tokio::test]
async fn a_daemon_that_left_the_session_does_not_outlive_its_command() {
    // setsid puts the sleeper in a new session and process group, out of
    // reach of the group kill; the command itself exits at once.
    let (pid, _dir) = daemon_pid_after(
        "setsid sh -c 'echo $$ > PIDFILE; exec sleep 30' </dev/null >/dev/null 2>&1 & sleep 0.3",
        None,
    )
    .await;
    assert!(!running(pid), "daemon {pid} outlived its command");
}

#[tokio::test]
async fn a_double_forked_daemon_is_found_after_its_parent_exits() {
    // The intermediate shell exits at once; the sleeper is an orphan in its
    // own session before the command ends.
    let (pid, _dir) = daemon_pid_after(
        "(setsid sh -c 'echo $$ > PIDFILE; exec sleep 30' </dev/null >/dev/null 2>&1 &) ; sleep 0.3",
        None,
    )
    .await;
    assert!(!running(pid), "daemon {pid} outlived its command");
}

#[tokio::test]
async fn a_timeout_also_takes_the_daemons() {
    let (pid, _dir) = daemon_pid_after(
        "setsid sh -c 'echo $$ > PIDFILE; exec sleep 30' </dev/null >/dev/null 2>&1 & sleep 30",
        Some(Duration::from_millis(700)),
    )
    .await;
    assert!(!running(pid), "daemon {pid} survived the timeout");
}

#[tokio::test]
async fn an_abandoned_command_takes_its_daemons() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("daemon.pid");
    let script = format!(
        "setsid sh -c 'echo $$ > {}; exec sleep 30' </dev/null >/dev/null 2>&1 & sleep 30",
        pidfile.display()
    );
    let mut req = request(dir.path(), vec![cmd(&["sh", "-c", &script])]);
    req.spec.allow_shell = true;
    // The caller gives up (a cancelled run): the future is dropped.
    let abandoned = tokio::time::timeout(Duration::from_millis(700), run_local(&req)).await;
    assert!(abandoned.is_err());
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert!(!running(pid), "daemon {pid} outlived the abandoned command");
}

#[tokio::test]
async fn a_missing_working_directory_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = cmd(&["ls"]);
    command.cwd = Some("project".into());
    let outcome = run_local(&request(dir.path(), vec![command]))
        .await
        .unwrap();
    let error = outcome.commands[0].error.clone().unwrap_or_default();
    assert!(
        error.contains("working directory `project` does not exist in the workspace"),
        "{error}"
    );
}

/// A command that puts a link in place of its own bundle directory (as a
/// container sharing the workspace could) gets nothing of the bundle
/// written through it: the host keeps writing into the directory it made.
#[tokio::test]
async fn the_bundle_is_never_written_through_a_link_put_in_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let bundle = dir.path().join(".output/exec/bundle");
    let moved = dir.path().join(".output/exec/moved");
    let swap = cmd(&[
        "python3",
        "-c",
        &format!(
            "import os; os.rename({b:?}, {m:?}); os.symlink({o:?}, {b:?})",
            b = bundle.display().to_string(),
            m = moved.display().to_string(),
            o = outside.path().display().to_string(),
        ),
    ]);
    let mut request = request(
        dir.path(),
        vec![swap, cmd(&["echo", "second"]), cmd(&["false"])],
    );
    request.spec.allow_shell = true;
    let outcome = run_local(&request).await.unwrap();
    assert_eq!(outcome.commands.len(), 3);
    let leaked: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(leaked.is_empty(), "written outside: {leaked:?}");
    // Everything landed in the directory the host made (now `moved`).
    assert_eq!(
        std::fs::read_to_string(moved.join("cmd-2.stdout")).unwrap(),
        "second\n"
    );
    assert!(moved.join("manifest.json").is_file());
    assert!(moved.join("meta/env.json").is_file());
}

/// A command's `PWD` is its own directory, whatever wfhost's was or the
/// block says: tools that take `$PWD` as their project write where the
/// command runs, never where wfhost was started.
#[tokio::test]
async fn every_command_sees_its_own_directory_as_pwd() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let mut in_sub = cmd(&["printenv", "PWD"]);
    in_sub.cwd = Some("sub".into());
    in_sub.env = vec![("PWD".into(), "/elsewhere".into())];
    let mut req = request(
        dir.path(),
        vec![cmd(&["printenv", "PWD"]), in_sub, cmd(&["env"])],
    );
    req.env.push(("OLDPWD".into(), "/before".into()));
    assert!(run_local(&req).await.unwrap().succeeded);
    let b = dir.path().join(".output/exec/bundle");
    let out = |n: u32| std::fs::read_to_string(b.join(format!("cmd-{n}.stdout"))).unwrap();
    let real = |p: &Path| std::path::absolute(p).unwrap().display().to_string();
    assert_eq!(out(1).trim(), real(dir.path()));
    assert_eq!(out(2).trim(), real(&dir.path().join("sub")));
    assert!(
        !out(3).lines().any(|l| l.starts_with("OLDPWD=")),
        "{}",
        out(3)
    );
}

#[tokio::test]
async fn an_orphan_in_a_group_of_its_own_does_not_outlive_its_command() {
    // Not a new session, only a new process group, orphaned at once, and
    // the command ends as soon as it is there (before the command's tree is
    // first looked at): the host adopts it, and it is neither in the
    // command's group nor in another session.
    let (pid, _dir) = daemon_pid_after(
        "(perl -e 'setpgrp(0, 0); open(my $f, \">\", \"PIDFILE\"); print $f $$; close $f; sleep 30' </dev/null >/dev/null 2>&1 &) ; while [ ! -s PIDFILE ]; do sleep 0.005; done",
        None,
    )
    .await;
    assert!(
        !running(pid),
        "process {pid} in its own group outlived its command"
    );
}

#[tokio::test]
async fn a_script_without_a_shebang_line_runs_with_sh() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("plain-script");
    std::fs::write(&script, "echo \"from a plain script: $1\"\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let outcome = run_local(&request(dir.path(), vec![cmd(&["./plain-script", "hi"])]))
        .await
        .unwrap();
    assert!(outcome.succeeded, "{outcome:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join(".output/exec/bundle/cmd-1.stdout")).unwrap(),
        "from a plain script: hi\n"
    );
}
