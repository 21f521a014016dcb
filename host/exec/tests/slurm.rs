//! The Slurm executor against a real Slurm cluster.
//!
//! Needs `sbatch` and a running controller with a partition `debug`:
//! `scripts/services.sh slurm` (as root) sets up a one-node cluster. Without
//! it these tests skip with a message, unless `WFHOST_REQUIRE_SERVICES=1`
//! (set by CI), which makes a missing service a failure.

use std::path::Path;
use std::time::{Duration, Instant};

use wfhost_core::policy::exec::{ExecCommand, ExecSpec};
use wfhost_exec::slurm::board::{PollConfig, StatusSource};
use wfhost_exec::{BundleMeta, ExecError, ExecRequest, SlurmExecutor, SlurmOptions};

fn slurm_or_skip() -> Option<SlurmExecutor> {
    let required = std::env::var("WFHOST_REQUIRE_SERVICES").is_ok_and(|v| v == "1");
    let problem = match std::process::Command::new("sinfo")
        .args(["-h", "-o", "%T"])
        .output()
    {
        Ok(out) if out.status.success() && !out.stdout.is_empty() => {
            return Some(SlurmExecutor::new(PollConfig {
                interval: Duration::from_millis(100),
                ..PollConfig::default()
            }));
        }
        Ok(out) => format!(
            "Slurm does not answer: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => format!("Slurm is not installed (sinfo: {e})"),
    };
    if required {
        panic!("{problem} (WFHOST_REQUIRE_SERVICES=1)");
    }
    eprintln!(
        "skipping: {problem}; run `sudo scripts/services.sh slurm` to start a one-node cluster"
    );
    None
}

fn cmd(argv: &[&str]) -> ExecCommand {
    ExecCommand {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: None,
        env: vec![],
    }
}

fn request(dir: &Path, name: &str, commands: Vec<ExecCommand>) -> ExecRequest {
    ExecRequest {
        spec: ExecSpec {
            commands,
            allow_shell: false,
        },
        workdir: dir.to_path_buf(),
        bundle_dir: dir.join(format!(".output/exec/{name}")),
        env: vec![
            ("EXECUTION_ID".into(), "run-slurm".into()),
            ("NODE_ID".into(), "main".into()),
        ],
        meta: BundleMeta {
            agent_id: "test".into(),
            run_id: format!("run-20260101-000001-{:06x}", std::process::id() & 0xff_ffff)
                .parse()
                .unwrap(),
            stage_id: "main.x".into(),
            step: 0,
            attempt: 1,
        },
        deadline: Some(Instant::now() + Duration::from_secs(120)),
        output_cap: 1 << 20,
        stdin: None,
        mask: Default::default(),
    }
}

fn debug() -> SlurmOptions {
    SlurmOptions {
        partition: Some("debug".into()),
        ..Default::default()
    }
}

fn manifest(dir: &Path, name: &str) -> serde_json::Value {
    serde_json::from_slice(
        &std::fs::read(dir.join(format!(".output/exec/{name}/manifest.json"))).unwrap(),
    )
    .unwrap()
}

fn in_queue(job: &str) -> bool {
    let out = std::process::Command::new("squeue")
        .args(["-h", "-j", job, "-o", "%T"])
        .output()
        .unwrap();
    let states = String::from_utf8_lossy(&out.stdout);
    states.contains("RUNNING") || states.contains("PENDING") || states.contains("COMPLETING")
}

#[tokio::test]
async fn a_job_runs_the_commands_and_leaves_the_bundle() {
    let Some(slurm) = slurm_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/in.txt"), "it's here\n").unwrap();
    let mut cat = cmd(&["cat", "in.txt"]);
    cat.cwd = Some("sub".into());
    let mut env = cmd(&["env"]);
    env.env = vec![("QUOTED".into(), "a 'b' $c".into())];
    let outcome = slurm
        .run(
            &request(
                dir.path(),
                "ok",
                vec![cat, env, cmd(&["touch", "made-by-the-job"])],
            ),
            &debug(),
        )
        .await
        .unwrap();
    assert!(outcome.succeeded, "{outcome:?}");
    assert_eq!(outcome.executor, "slurm");
    let job = outcome.slurm_job_id.clone().unwrap();
    let b = dir.path().join(".output/exec/ok");
    assert_eq!(
        std::fs::read_to_string(b.join("cmd-1.stdout")).unwrap(),
        "it's here\n"
    );
    let env = std::fs::read_to_string(b.join("cmd-2.stdout")).unwrap();
    for var in ["EXECUTION_ID=run-slurm", "NODE_ID=main", "QUOTED=a 'b' $c"] {
        assert!(env.contains(var), "{var} in {env}");
    }
    assert!(dir.path().join("made-by-the-job").exists());
    let m = manifest(dir.path(), "ok");
    assert_eq!(m["executor"], "slurm");
    assert_eq!(m["slurm_job_id"], job.as_str());
    assert_eq!(m["slurm"]["state"], "COMPLETED");
    assert_eq!(m["succeeded"], true);
    assert_eq!(m["commands"].as_array().unwrap().len(), 3);
    for c in m["commands"].as_array().unwrap() {
        assert_eq!(c["exit_code"], 0);
        assert!(c["started_ms"].as_u64().unwrap() > 1_600_000_000_000, "{c}");
        assert!(c["ended_ms"].as_u64() >= c["started_ms"].as_u64());
    }
    for f in [
        "meta/env.json",
        "meta/repo.txt",
        "slurm/job.sh",
        "slurm/job.log",
    ] {
        assert!(b.join(f).is_file(), "{f}");
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(b.join("meta/env.json")).unwrap()).unwrap();
    assert_eq!(meta["executor"], "slurm");
    assert!(
        std::fs::metadata(b.join("manifest.json"))
            .unwrap()
            .permissions()
            .readonly()
    );
}

#[tokio::test]
async fn a_failing_command_stops_the_job_with_its_exit_code() {
    let Some(slurm) = slurm_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut req = request(
        dir.path(),
        "fail",
        vec![
            cmd(&["python3", "-c", "import sys; print('x'); sys.exit(3)"]),
            cmd(&["touch", "never"]),
        ],
    );
    req.spec.allow_shell = true; // inline code counts as a shell
    let outcome = slurm.run(&req, &debug()).await.unwrap();
    assert!(!outcome.succeeded);
    assert_eq!(outcome.commands.len(), 1, "the second command never ran");
    assert_eq!(outcome.commands[0].exit_code, Some(3));
    assert!(!dir.path().join("never").exists());
    let m = manifest(dir.path(), "fail");
    assert_eq!(m["slurm"]["state"], "FAILED");
    assert_eq!(m["slurm"]["exit_code"], "3:0");
}

#[tokio::test]
async fn a_watcher_sees_the_job_and_its_state_while_it_is_queued() {
    let Some(mut slurm) = slurm_or_skip() else {
        return;
    };
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, String)>::new()));
    let sink = seen.clone();
    slurm.watcher = Some(wfhost_exec::slurm::JobWatcher(std::sync::Arc::new(
        move |job: &str, state: &str| sink.lock().unwrap().push((job.into(), state.into())),
    )));
    let dir = tempfile::tempdir().unwrap();
    let req = request(dir.path(), "watched", vec![cmd(&["sleep", "1"])]);
    let outcome = slurm.run(&req, &debug()).await.unwrap();
    assert!(outcome.succeeded, "{outcome:?}");
    let job = outcome.slurm_job_id.unwrap();
    let seen = seen.lock().unwrap();
    assert!(!seen.is_empty(), "the watcher was never told");
    for (id, state) in seen.iter() {
        assert_eq!(*id, job);
        assert!(
            ["PENDING", "CONFIGURING", "RUNNING", "COMPLETING"].contains(&state.as_str()),
            "{state}"
        );
    }
}

#[tokio::test]
async fn a_timeout_cancels_the_job() {
    let Some(slurm) = slurm_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut req = request(dir.path(), "slow", vec![cmd(&["sleep", "120"])]);
    req.deadline = Some(Instant::now() + Duration::from_secs(3));
    let t = Instant::now();
    let outcome = slurm.run(&req, &debug()).await.unwrap();
    assert!(t.elapsed() < Duration::from_secs(40), "{:?}", t.elapsed());
    assert!(!outcome.succeeded);
    assert!(outcome.commands[0].timed_out, "{outcome:?}");
    let job = outcome.slurm_job_id.unwrap();
    assert!(!in_queue(&job), "job {job} was cancelled");
    let m = manifest(dir.path(), "slow");
    assert_eq!(m["slurm"]["state"], "CANCELLED");
}

#[tokio::test]
async fn output_beyond_the_cap_is_truncated_and_recorded() {
    let Some(slurm) = slurm_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut req = request(
        dir.path(),
        "big",
        vec![cmd(&["python3", "-c", "print('y' * 100000)"])],
    );
    req.spec.allow_shell = true; // inline code counts as a shell
    req.output_cap = 1000;
    let outcome = slurm.run(&req, &debug()).await.unwrap();
    let c = &outcome.commands[0];
    assert!(c.stdout_truncated);
    assert_eq!(c.stdout_bytes, 100_001);
    let kept = std::fs::read(dir.path().join(".output/exec/big/cmd-1.stdout")).unwrap();
    assert_eq!(kept.len(), 1000);
}

#[tokio::test]
async fn bad_input_fails_clearly_and_leaves_nothing_behind() {
    let Some(slurm) = slurm_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let nosuch = SlurmOptions {
        partition: Some("nosuch".into()),
        ..Default::default()
    };
    match slurm
        .run(&request(dir.path(), "p", vec![cmd(&["true"])]), &nosuch)
        .await
    {
        Err(ExecError::Invalid(m)) => assert!(m.contains("partition"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(!dir.path().join(".output/exec/p").exists());

    match slurm
        .run(
            &request(dir.path(), "n", vec![cmd(&["no-such-program-xyz"])]),
            &debug(),
        )
        .await
    {
        Err(ExecError::Invalid(m)) => assert!(m.contains("not found"), "{m}"),
        other => panic!("{other:?}"),
    }
    let mut nul = cmd(&["true"]);
    nul.env = vec![("A".into(), "x\0y".into())];
    match slurm
        .run(&request(dir.path(), "z", vec![nul]), &debug())
        .await
    {
        Err(ExecError::Refused(v)) => assert_eq!(v.rule, "env"),
        other => panic!("{other:?}"),
    }
    match slurm
        .run(
            &request(
                dir.path(),
                "s",
                vec![cmd(&["/usr/bin/../bin/bash", "-c", "x"])],
            ),
            &debug(),
        )
        .await
    {
        Err(ExecError::Refused(v)) => assert_eq!(v.rule, "no-shell"),
        other => panic!("{other:?}"),
    }
    // Options wfhost sets itself, in every spelling sbatch reads: refused
    // before sbatch is asked (a job array would run the block 3 times).
    for (args, says) in [
        (&["--output=/tmp/elsewhere"][..], "is sbatch's --output"),
        (&["--arr=0-2"], "`--arr=0-2` is sbatch's --array"),
        (&["-a", "0-2"], "`-a 0-2` is sbatch's --array"),
        (&["-a0-2"], "`-a0-2` is sbatch's --array"),
        (&["-Ha", "0-2"], "`-Ha 0-2` holds -a, sbatch's --array"),
        (&["--out=x"], "`--out=x` is sbatch's --output"),
        (&["--comm=x"], "`--comm=x` is sbatch's --comment"),
        (&["--chd=/"], "`--chd=/` is sbatch's --chdir"),
        (&["--job-n=x"], "`--job-n=x` is sbatch's --job-name"),
    ] {
        let reserved = SlurmOptions {
            extra_args: args.iter().map(|a| a.to_string()).collect(),
            ..debug()
        };
        match slurm
            .run(&request(dir.path(), "r", vec![cmd(&["true"])]), &reserved)
            .await
        {
            Err(ExecError::Invalid(m)) => assert!(m.contains(says), "{args:?}: {m}"),
            other => panic!("{args:?}: {other:?}"),
        }
    }
    assert!(
        !dir.path().join(".output/exec").exists()
            || std::fs::read_dir(dir.path().join(".output/exec"))
                .unwrap()
                .next()
                .is_none(),
        "no bundle is left by a block that did not run"
    );
}

#[tokio::test]
async fn gc_cancels_only_jobs_whose_owner_is_gone() {
    let Some(slurm) = slurm_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut req = request(dir.path(), "orphan", vec![cmd(&["sleep", "120"])]);
    req.meta.run_id = format!("run-20260101-000003-{:06x}", std::process::id() & 0xff_ffff)
        .parse()
        .unwrap();
    req.deadline = None;
    // Submitted, then the host "dies": nobody waits for the job.
    let job = slurm.submit(&req, &debug()).await.unwrap();
    // Its owner is this live process: not an orphan.
    let none = wfhost_exec::slurm::cancel_orphans(|o| o.process_alive()).await;
    assert!(!none.contains(&job.job_id), "{none:?}");
    assert!(in_queue(&job.job_id));
    // Once its run is known to be over, it is.
    let run = req.meta.run_id.clone();
    let cancelled = wfhost_exec::slurm::cancel_orphans(|o| o.run_id != run).await;
    assert_eq!(cancelled, vec![job.job_id.clone()]);
    for _ in 0..100 {
        if !in_queue(&job.job_id) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!in_queue(&job.job_id));
}

/// Many jobs waited for at once cost one status query per polling round,
/// not one per job.
#[tokio::test]
async fn the_jobs_of_a_run_are_asked_about_in_one_query_per_round() {
    let Some(slurm) = slurm_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut jobs = Vec::new();
    for i in 0..12 {
        let r = request(dir.path(), &format!("many-{i}"), vec![cmd(&["sleep", "1"])]);
        jobs.push(slurm.submit(&r, &debug()).await.unwrap());
    }
    let started = Instant::now();
    let outcomes =
        futures_util::future::join_all(jobs.into_iter().map(|j| slurm.wait_and_finish(j, None)))
            .await;
    for o in outcomes {
        assert!(o.unwrap().succeeded);
    }
    let rounds_possible = started.elapsed().as_millis() / 100 + 1;
    let queries = slurm.board.queries() as u128;
    assert!(
        queries >= 1 && queries <= rounds_possible,
        "{queries} queries in {rounds_possible} rounds"
    );
    assert!(queries < 12 * rounds_possible / 4, "{queries}");
}

/// A job the controller has forgotten (MinJobAge passed) is still recorded
/// with its state and exit code: from sacct where there is accounting, from
/// the job's marker without.
#[tokio::test]
async fn a_job_purged_from_the_controller_is_still_recorded() {
    let Some(slurm) = slurm_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ok = slurm
        .submit(
            &request(dir.path(), "purged-ok", vec![cmd(&["true"])]),
            &debug(),
        )
        .await
        .unwrap();
    let mut exit3 = request(
        dir.path(),
        "purged-failed",
        vec![cmd(&["sh", "-c", "exit 3"])],
    );
    exit3.spec.allow_shell = true;
    let failed = slurm.submit(&exit3, &debug()).await.unwrap();
    // Wait until the controller no longer knows either (the test cluster's
    // MinJobAge is 10 s; Slurm purges at least every minute).
    let known = |id: &str| {
        std::process::Command::new("scontrol")
            .args(["show", "job", id])
            .output()
            .unwrap()
            .status
            .success()
    };
    let deadline = Instant::now() + Duration::from_secs(150);
    while (known(&ok.job_id) || known(&failed.job_id)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(!known(&ok.job_id) && !known(&failed.job_id), "never purged");
    for source in [StatusSource::Sacct, StatusSource::Squeue] {
        let fresh = SlurmExecutor::new(PollConfig {
            interval: Duration::from_millis(100),
            source: Some(source),
            ..PollConfig::default()
        });
        let a = fresh.wait_and_finish(ok.clone(), None).await.unwrap();
        assert!(a.succeeded, "{source:?}");
        let b = fresh.wait_and_finish(failed.clone(), None).await.unwrap();
        assert!(!b.succeeded, "{source:?}");
        assert_eq!(b.commands[0].exit_code, Some(3), "{source:?}");
        let m = manifest(dir.path(), "purged-failed");
        assert_eq!(m["slurm"]["state"], "FAILED", "{source:?}: {m}");
        assert_eq!(m["slurm"]["exit_code"], "3:0", "{source:?}: {m}");
    }
}
