//! The lanes of a parallel block on the real one-node Slurm cluster: one
//! job array for all of them (sbatch calls counted through a shim on
//! `PATH`), each lane's bundle sealed with its own task and exit code, a
//! failing lane retried alone, a cancelled run leaving nothing queued, and
//! a job purged from the controller still recorded.

use std::process::Stdio;
use std::time::{Duration, Instant};

use super::exec::slurm_ready;
use super::*;

/// A directory with an `sbatch` that logs its arguments (one call a line)
/// to `calls`, then runs the real one.
pub(super) fn sbatch_shim(dir: &Path) -> (PathBuf, PathBuf) {
    let bin = dir.join("shim");
    std::fs::create_dir_all(&bin).unwrap();
    let calls = dir.join("sbatch-calls.log");
    let real = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v sbatch"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string();
    let script = format!(
        "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{real}' \"$@\"\n",
        calls.display()
    );
    let shim = bin.join("sbatch");
    std::fs::write(&shim, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    (bin, calls)
}

/// Fails (exit 3) the first time, when the marker given as its argument
/// does not exist yet; succeeds after.
const FLAKY: &str = "import os, sys\np = sys.argv[1]\nok = os.path.exists(p)\nopen(p, 'w').close()\nsys.exit(0 if ok else 3)\n";

pub(super) fn with_shim(scratch: &Path, bin: &Path) -> std::process::Command {
    let mut cmd = command(scratch);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    cmd.env("PATH", path);
    cmd
}

/// `n` lanes of an exec block on Slurm; lane `l03`'s first attempt fails
/// (its marker file is absent), its second succeeds. The workspace needs
/// [`FLAKY`] as `flaky.py`.
fn lanes_workflow(n: usize, flaky_marker: &Path, command: &[&str]) -> serde_json::Value {
    let mut lanes = serde_json::Map::new();
    for i in 0..n {
        let name = format!("l{i:02}");
        let commands = if i == 3 {
            serde_json::json!([{"argv": ["python3", "flaky.py", flaky_marker.display().to_string()]}])
        } else {
            serde_json::json!([{"argv": command.iter().map(|a| a.replace("{lane}", &name)).collect::<Vec<_>>()}])
        };
        lanes.insert(name, serde_json::json!({"config": {"commands": commands}}));
    }
    serde_json::json!({
        "id": "slurm-lanes",
        "plugins": {"exec": {"grants": ["exec"]}},
        "start_node": "main",
        "nodes": {"main": {"entry_block": "fan", "blocks": {"fan": {
            "worker": "exec",
            "timeout": "300s",
            "config": {"commands": [], "executor": {"slurm": {"partition": "debug"}}},
            "parallel": {"merge_strategy": "workspace", "lanes": lanes,
                         "max_concurrent": 16, "max_attempts": 2},
            "transitions": [
                {"on_signal": "SIGNAL:SUCCESS", "action": "END"},
                {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL:lanes failed"}
            ]
        }}}}
    })
}

#[test]
fn sixty_four_lanes_are_one_job_array_and_a_failing_lane_is_retried_alone() {
    if !slurm_ready() {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let ws = workspace_in(scratch.path());
    let (bin, calls) = sbatch_shim(scratch.path());
    std::fs::write(ws.join("flaky.py"), FLAKY).unwrap();
    let wf = lanes_workflow(
        64,
        &scratch.path().join("flaky-ran"),
        &["touch", "{lane}.txt"],
    );
    let manifest = scratch.path().join("wf.json");
    std::fs::write(&manifest, wf.to_string()).unwrap();
    let out = with_shim(scratch.path(), &bin)
        .args([
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = report["run_id"].as_str().unwrap();
    // One array for the 64 lanes, at most 16 at once; the retry alone.
    let calls = std::fs::read_to_string(&calls).unwrap();
    let lines: Vec<&str> = calls.lines().collect();
    assert_eq!(lines.len(), 2, "{calls}");
    assert!(lines[0].contains("--array=0-63%16"), "{calls}");
    assert!(!lines[1].contains("--array"), "{calls}");
    // Every lane completed; l03 after one retry.
    let events = run_events(scratch.path(), run);
    let retried: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "lane_retried")
        .collect();
    assert_eq!(retried.len(), 1, "{retried:?}");
    assert_eq!(retried[0]["lane"], "l03");
    assert_eq!(retried[0]["signal"], "SIGNAL:EXEC_FAILED");
    let completed = events
        .iter()
        .filter(|e| e["type"] == "lane_completed")
        .count();
    assert_eq!(completed, 64);
    for i in 0..64 {
        if i != 3 {
            assert!(ws.join(format!("l{i:02}.txt")).exists(), "lane {i}'s file");
        }
    }
    // Each lane's bundle is sealed with its own array task, exit code and
    // Slurm log.
    let bundles = ws.join(format!(".output/exec/{run}"));
    let mut tasks = std::collections::BTreeSet::new();
    let mut codes = Vec::new();
    for entry in std::fs::read_dir(&bundles).unwrap() {
        let dir = entry.unwrap().path();
        let Ok(text) = std::fs::read(dir.join("manifest.json")) else {
            continue;
        };
        let m: serde_json::Value = serde_json::from_slice(&text).unwrap();
        let job = m["slurm"]["job_id"].as_str().unwrap().to_string();
        codes.push((
            job.clone(),
            m["slurm"]["state"].clone(),
            m["commands"][0]["exit_code"].clone(),
        ));
        if job.contains('_') {
            tasks.insert(job.split('_').nth(1).unwrap().parse::<u32>().unwrap());
            assert!(dir.join("slurm/job.log").exists(), "{}", dir.display());
        }
    }
    // 63 array tasks (lane l03's first attempt went with its fresh
    // workspace; the event above keeps why it failed) and the retry alone.
    assert_eq!(codes.len(), 64, "{codes:?}");
    let expected: std::collections::BTreeSet<u32> = (0..64).filter(|i| *i != 3).collect();
    assert_eq!(tasks, expected, "{codes:?}");
    let alone: Vec<_> = codes.iter().filter(|c| !c.0.contains('_')).collect();
    assert_eq!(alone.len(), 1, "{codes:?}");
    assert_eq!(
        (alone[0].1.as_str(), alone[0].2.as_i64()),
        (Some("COMPLETED"), Some(0)),
        "{codes:?}"
    );
    assert!(
        codes.iter().all(|c| c.1 == "COMPLETED" && c.2 == 0),
        "{codes:?}"
    );
}

#[test]
fn a_cancelled_run_leaves_no_task_in_the_queue() {
    if !slurm_ready() {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let ws = workspace_in(scratch.path());
    let wf = lanes_workflow(8, &scratch.path().join("flaky-ran"), &["sleep", "300"]);
    let manifest = scratch.path().join("wf.json");
    std::fs::write(&manifest, wf.to_string()).unwrap();
    let mut child = command(scratch.path())
        .args([
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait for the array to be queued.
    let pid = child.id();
    let queued = || {
        let out = std::process::Command::new("squeue")
            .args(["-h", "-r", "-n", "wfhost:main.fan", "-o", "%i %k"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains(&format!("pid={pid};")))
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while queued() < 7 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(queued() >= 7, "the lanes' array never showed in the queue");
    let runs = wfhost(&["runs", "--json"], scratch.path());
    let run = serde_json::from_slice::<serde_json::Value>(&runs.stdout).unwrap()[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let cancel = wfhost(&["cancel", &run, "--wait", "60"], scratch.path());
    assert_eq!(cancel.status.code(), Some(0), "{}", stderr(&cancel));
    let _ = child.wait();
    let deadline = Instant::now() + Duration::from_secs(30);
    while queued() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        queued(),
        0,
        "tasks left in the queue after the run was cancelled"
    );
}
