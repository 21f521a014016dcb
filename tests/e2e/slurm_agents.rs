//! `wfhost agents submit`: `wfhost agent`s as one Slurm job array, against
//! the real cluster (skipped without one, unless
//! `WFHOST_REQUIRE_SERVICES=1`), and, with a stand-in `sbatch`, what it
//! submits, prints and refuses.

use super::exec::{project_workspace, slurm_ready};
use super::leases::{history, jobs, leased_job, start};
use super::serve::{await_status, http_get, http_post, serve_with};
use super::*;
use serde_json::json;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// A submitted array job, cancelled on drop (should the test fail).
struct Array(String);

impl Drop for Array {
    fn drop(&mut self) {
        let _ = Command::new("scancel").arg(&self.0).status();
    }
}

/// The array job's tasks in the queue: `(task id, state)`, sorted.
fn queued(id: &str) -> Vec<(String, String)> {
    let out = Command::new("squeue")
        .args(["-h", "-r", "-j", id, "-o", "%i %T"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (task, state) = l.trim().split_once(' ')?;
            Some((task.to_string(), state.to_string()))
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Wait up to `limit` for `done`, saying `what` when it never is.
fn wait_for(limit: Duration, what: impl Fn() -> String, done: impl Fn() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{}", what());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One exec block that waits until its workspace holds `go`.
fn held() -> serde_json::Value {
    json!({"id": "held", "start_node": "main",
        "plugins": {"exec": {"grants": ["exec"]}},
        "nodes": {"main": {"entry_block": "wait", "blocks": {"wait": {
            "worker": "exec",
            "timeout": "300s",
            "config": {"commands": [{"argv": ["python3", "hold.py"]}]},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]}}}}})
}

#[test]
fn agents_submitted_as_a_slurm_job_array_run_a_servers_jobs_and_stop_on_scancel() {
    if !slurm_ready() {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let served = serve_with(scratch.path(), &["--local-agents", "0"]);
    // The logs go below the home, here one whose path sbatch must be given
    // quoted (a space and a quote).
    let home = scratch.path().join("agents' home");
    let out = command(scratch.path())
        .args(["agents", "submit", "--slurm", "2"])
        .args(["--server", &format!("http://{}", served.addr)])
        .args([
            "--partition",
            "debug",
            "--time",
            "10",
            "--name-prefix",
            "e2e",
        ])
        .arg("--home")
        .arg(&home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let said = stdout(&out);
    let id = said
        .split("scancel ")
        .nth(1)
        .map(|rest| rest.trim().to_string())
        .unwrap_or_else(|| panic!("no job id in {said}"));
    let _array = Array(id.clone());
    assert!(
        said.contains(&format!("e2e-{id}_0 and e2e-{id}_1")),
        "{said}"
    );
    let names = BTreeSet::from([format!("e2e-{id}_0"), format!("e2e-{id}_1")]);
    let log = |task: u32| home.join(format!("agent-jobs/{id}_{task}.log"));
    let read = |task: u32| std::fs::read_to_string(log(task)).unwrap_or_default();
    // Both agents start on the node (the cluster may be busy: a while).
    wait_for(
        Duration::from_secs(180),
        || {
            format!(
                "the agents did not start: {:?}\n{}\n{}",
                queued(&id),
                read(0),
                read(1)
            )
        },
        || (0..2).all(|t| read(t).contains("leasing jobs from")),
    );

    // One agent holds a job that waits; the other runs the example's.
    let hold_ws = scratch.path().join("hold");
    std::fs::create_dir_all(&hold_ws).unwrap();
    std::fs::write(
        hold_ws.join("hold.py"),
        "import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.05)\n",
    )
    .unwrap();
    let hold = start(&served, &held(), &hold_ws);
    let holder = leased_job(&served, &hold)["agent"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(names.contains(&holder), "{holder} is not one of {names:?}");
    let ws = project_workspace();
    let (status, started) = http_post(
        &served.addr,
        "/v1/runs",
        &json!({"workflow": repo().join("examples/exec-build/workflow.json"), "workspace": ws.path()}),
    );
    assert_eq!(status, 202, "{started}");
    let build = started["run_id"].as_str().unwrap().to_string();
    await_status(&served.addr, &build, "succeeded");
    let other = names.iter().find(|n| **n != holder).unwrap().clone();
    let build_jobs = jobs(&served, &build);
    assert_eq!(
        build_jobs
            .iter()
            .map(|j| j["block"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["build", "report"]
    );
    for job in &build_jobs {
        assert_eq!(
            history(&served, job["id"].as_i64().unwrap()),
            [
                "queued:".to_string(),
                format!("leased:{other}"),
                format!("succeeded:{other}")
            ],
            "{job}"
        );
    }
    // The exec block ran on the node, in the shared workspace.
    let bundle = ws
        .path()
        .join(format!(".output/exec/{build}/step-0-main.build"));
    let tests = std::fs::read_to_string(bundle.join("cmd-2.stderr")).unwrap();
    assert!(tests.contains("OK"), "{tests}");
    std::fs::write(hold_ws.join("go"), "").unwrap();
    await_status(&served.addr, &hold, "succeeded");
    let hold_jobs = jobs(&served, &hold);
    assert_eq!(
        history(&served, hold_jobs[0]["id"].as_i64().unwrap()),
        [
            "queued:".to_string(),
            format!("leased:{holder}"),
            format!("succeeded:{holder}")
        ]
    );

    // `wfhost gc` does not take the agents for a block's jobs left behind.
    let gc = wfhost(&["gc"], scratch.path());
    assert_eq!(gc.status.code(), Some(0), "{}", stderr(&gc));
    assert!(!stdout(&gc).contains(&id), "{}", stdout(&gc));
    assert_eq!(
        queued(&id),
        [
            (format!("{id}_0"), "RUNNING".to_string()),
            (format!("{id}_1"), "RUNNING".to_string())
        ]
    );

    // scancel: each agent stops cleanly and the array leaves the queue.
    let cancelled = Command::new("scancel").arg(&id).status().unwrap();
    assert!(cancelled.success());
    wait_for(
        Duration::from_secs(60),
        || format!("still queued: {:?}", queued(&id)),
        || queued(&id).is_empty(),
    );
    for task in 0..2 {
        assert!(log(task).is_file(), "{} is missing", log(task).display());
        let said = read(task);
        assert!(
            said.contains(&format!("wfhost agent e2e-{id}_{task}: stopped (SIGTERM)")),
            "{said}"
        );
    }
    // The server saw nothing go wrong.
    let (_, page) = http_get(&served.addr, &format!("/v1/runs/{build}"));
    assert_eq!(page["status"], "succeeded");
}

#[test]
fn sbatch_reads_the_quoted_options_as_given_and_the_script_print_shows() {
    if !slurm_ready() {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    // Held: nothing runs. A URL and a home sbatch must read through quotes.
    let url = r#"http://127.0.0.1:9/a b"c'd#e\f"#;
    let home = scratch.path().join(r#"it's "home" 5%"#);
    let args = |extra: &[&str]| -> Output {
        command(scratch.path())
            .args(["agents", "submit", "--slurm", "1", "--server", url])
            .args(["--sbatch-arg=--hold", "--home"])
            .arg(&home)
            .args(extra)
            .output()
            .unwrap()
    };
    let printed = args(&["--print"]);
    assert_eq!(printed.status.code(), Some(0), "{}", stderr(&printed));
    let out = args(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let id = stdout(&out)
        .split("scancel ")
        .nth(1)
        .unwrap()
        .trim()
        .to_string();
    let _array = Array(id.clone());
    let shown = Command::new("scontrol")
        .args(["show", "job", &id])
        .output()
        .unwrap();
    let shown = stdout(&shown);
    assert!(shown.contains("JobName=wfhost-agent"), "{shown}");
    assert!(
        shown.contains(&format!("Comment=wfhost-agent={url}")),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            "StdOut={}/agent-jobs/",
            home.display().to_string().replace('%', "%%")
        )),
        "{shown}"
    );
    let script = Command::new("scontrol")
        .args(["write", "batch_script", &id, "-"])
        .output()
        .unwrap();
    assert_eq!(stdout(&script), stdout(&printed));
}

/// A stand-in `sbatch` in `dir/bin` that records its arguments and the
/// script it reads, then prints `answer` (or fails with `refusal`).
fn fake_sbatch(dir: &Path, answer: &str, refusal: Option<&str>) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let body = match refusal {
        None => format!("echo '{answer}'"),
        Some(message) => format!("echo '{message}' >&2; exit 1"),
    };
    let script = format!(
        "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{d}/sbatch-args'\ncat > '{d}/sbatch-script'\n{body}\n",
        d = dir.display()
    );
    let sbatch = bin.join("sbatch");
    std::fs::write(&sbatch, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&sbatch, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn submit(scratch: &Path, path: &str, args: &[&str]) -> Output {
    command(scratch)
        .env("PATH", path)
        .env_remove("WFHOST_AGENT_TOKEN_FILE")
        .args(["agents", "submit"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn print_shows_the_script_and_submits_nothing() {
    let scratch = tempfile::tempdir().unwrap();
    let path = fake_sbatch(scratch.path(), "4242", None);
    let token = scratch.path().join("agent token");
    std::fs::write(&token, "t".repeat(40)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let args = [
        "--slurm",
        "3",
        "--server",
        "http://head:7464",
        "--token-file",
        token.to_str().unwrap(),
        "--sbatch-arg=--account=lab",
    ];
    let printed = submit(scratch.path(), &path, &[&args[..], &["--print"]].concat());
    assert_eq!(printed.status.code(), Some(0), "{}", stderr(&printed));
    let script = stdout(&printed);
    assert!(script.starts_with("#!/bin/sh\n"), "{script}");
    for line in [
        "#SBATCH --job-name=wfhost-agent",
        "#SBATCH --array=0-2",
        "#SBATCH --comment=wfhost-agent=http://head:7464",
        "#SBATCH --account=lab",
    ] {
        assert!(script.lines().any(|l| l == line), "{line}: {script}");
    }
    assert!(
        script.contains("agent --server http://head:7464 --name slurm\"-${SLURM_ARRAY_JOB_ID")
            && script.contains(&format!("--token-file '{}'", token.display())),
        "{script}"
    );
    // Nothing was submitted, nothing made.
    assert!(!scratch.path().join("sbatch-args").exists());
    assert!(!scratch.path().join("home/agent-jobs").exists());

    // Submitted: what sbatch reads is what --print showed.
    let out = submit(scratch.path(), &path, &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let said = stdout(&out);
    assert!(said.contains("Slurm job array 4242"), "{said}");
    assert!(said.contains("slurm-4242_0 … slurm-4242_2"), "{said}");
    assert!(said.contains("scancel 4242"), "{said}");
    assert_eq!(
        std::fs::read_to_string(scratch.path().join("sbatch-args")).unwrap(),
        "--parsable\n"
    );
    assert_eq!(
        std::fs::read_to_string(scratch.path().join("sbatch-script")).unwrap(),
        script
    );
    assert!(scratch.path().join("home/agent-jobs").is_dir());
}

#[test]
fn a_refused_submission_and_bad_requests_are_errors() {
    let scratch = tempfile::tempdir().unwrap();
    let server = ["--server", "http://head:7464"];
    // sbatch refuses: its reason, and a failure.
    let path = fake_sbatch(
        scratch.path(),
        "",
        Some("sbatch: error: invalid partition specified: nope"),
    );
    let out = submit(
        scratch.path(),
        &path,
        &[&server[..], &["--slurm", "2", "--partition", "nope"]].concat(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("sbatch refused the agents' job: sbatch: error: invalid partition"),
        "{}",
        stderr(&out)
    );
    // Refused before sbatch is asked.
    std::fs::remove_file(scratch.path().join("sbatch-args")).unwrap();
    let token = scratch.path().join("token");
    std::fs::write(&token, "t".repeat(40)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    for (args, says) in [
        (vec!["--slurm", "0"], "--slurm 0: give 1 to 1000 agents"),
        (
            vec!["--slurm", "1001"],
            "--slurm 1001: give 1 to 1000 agents",
        ),
        (
            vec!["--slurm", "2", "--token-file", token.to_str().unwrap()],
            "`chmod 600` it",
        ),
        (
            vec!["--slurm", "2", "--sbatch-arg=--array=0-9"],
            "--sbatch-arg: `--array=0-9` is sbatch's --array, which wfhost sets itself: it is --slurm N",
        ),
        // Every spelling sbatch reads as a reserved option.
        (
            vec!["--slurm", "2", "--sbatch-arg=--arr=0-2"],
            "`--arr=0-2` is sbatch's --array",
        ),
        (
            vec!["--slurm", "2", "--sbatch-arg=-a", "--sbatch-arg=0-2"],
            "`-a 0-2` is sbatch's --array",
        ),
        (
            vec!["--slurm", "2", "--sbatch-arg=-a0-2"],
            "`-a0-2` is sbatch's --array",
        ),
        (
            vec!["--slurm", "2", "--sbatch-arg=-Ha", "--sbatch-arg=0-2"],
            "`-Ha 0-2` holds -a, sbatch's --array",
        ),
        (
            vec!["--slurm", "2", "--sbatch-arg=--out=/tmp/x"],
            "`--out=/tmp/x` is sbatch's --output, which wfhost sets itself: use --log-dir",
        ),
        (
            vec!["--slurm", "2", "--sbatch-arg=--comm=x"],
            "`--comm=x` is sbatch's --comment",
        ),
        (
            vec!["--slurm", "2", "--sbatch-arg=--job-n=x"],
            "`--job-n=x` is sbatch's --job-name",
        ),
        (
            vec!["--slurm", "2", "--sbatch-arg=--co=x"],
            "`--co=x` is ambiguous",
        ),
        (
            vec!["--slurm", "2", "--name-prefix", "a b"],
            "--name-prefix",
        ),
        (
            vec!["--slurm", "2", "--capabilities", "gpu"],
            "unknown capability `gpu`",
        ),
    ] {
        let out = submit(scratch.path(), &path, &[&server[..], &args].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    let out = submit(
        scratch.path(),
        &path,
        &["--slurm", "2", "--server", "ftp://head:7464"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("http:// or https://"),
        "{}",
        stderr(&out)
    );
    assert!(!scratch.path().join("sbatch-args").exists());
}
