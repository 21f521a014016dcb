//! A parallel block end to end through `wfhost run`: 16 lanes of no-op
//! agents (the scripted agent writing only its BlockOutput) against one
//! lane, in a git repository (worktree lanes) and in a plain directory
//! (copied lanes), plus the same fan-out with the `echo` worker (no
//! process) to separate wfhost's own cost from the agents'.
//!
//! `cargo bench -p wfhost --bench fan_out` — figures are in the README.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const RUNS: usize = 5;
const FILES: usize = 200;

fn wfhost() -> Command {
    Command::new(env!("CARGO_BIN_EXE_wfhost"))
}

fn repo() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .output()
        .unwrap()
        .status
        .success();
    assert!(ok, "git {args:?}");
}

fn workspace(as_git: bool) -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    for i in 0..FILES {
        let dir = ws.path().join(format!("src/m{}", i / 20));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{i}.rs")), format!("fn f{i}() {{}}\n")).unwrap();
    }
    if as_git {
        git(ws.path(), &["init", "-q"]);
        git(ws.path(), &["add", "-A"]);
        git(ws.path(), &["commit", "-q", "-m", "base"]);
    }
    ws
}

fn manifest(dir: &Path, lanes: usize, worker: &str) -> std::path::PathBuf {
    let agent = repo().join("examples/agents/scripted_agent.py");
    let config = match worker {
        "agent" => serde_json::json!({"command": [agent, "--role", "dev"]}),
        _ => serde_json::json!({}),
    };
    let lanes: serde_json::Map<String, serde_json::Value> = (0..lanes)
        .map(|i| (format!("l{i:02}"), serde_json::json!({})))
        .collect();
    let wf = serde_json::json!({
        "id": "fan-out-bench",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "n",
        "nodes": {"n": {"entry_block": "b", "blocks": {"b": {
            "worker": worker,
            "config": config,
            "parallel": {"merge_strategy": "workspace", "lanes": lanes},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
        }}}}
    });
    let path = dir.join(format!(
        "{worker}-{}.json",
        wf["nodes"]["n"]["blocks"]["b"]["parallel"]["lanes"]
            .as_object()
            .unwrap()
            .len()
    ));
    std::fs::write(&path, wf.to_string()).unwrap();
    path
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// `lanes_dir`: the `WFHOST_LANES_DIR` the run makes its lanes in
/// (`None`: wfhost's default choice).
fn time_run(manifest: &Path, as_git: bool, home: &Path, lanes_dir: Option<&Path>) -> Duration {
    let mut samples = Vec::new();
    for _ in 0..RUNS {
        let ws = workspace(as_git);
        let t = Instant::now();
        let mut command = wfhost();
        match lanes_dir {
            Some(dir) => command.env("WFHOST_LANES_DIR", dir),
            None => command.env_remove("WFHOST_LANES_DIR"),
        };
        let out = command
            .args([
                "run",
                manifest.to_str().unwrap(),
                "-w",
                ws.path().to_str().unwrap(),
                "--json",
            ])
            .env("WFHOST_HOME", home)
            .env("WFHOST_CACHE_DIR", home.join("cache"))
            .output()
            .unwrap();
        samples.push(t.elapsed());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    median(samples)
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    // Warm the compiled-component cache.
    let warm = manifest(scratch.path(), 1, "echo");
    time_run(&warm, false, &home, None);
    // By default lanes of a small workspace are made in memory (/dev/shm);
    // measured beside lanes forced onto this machine's disk.
    let on_disk = tempfile::tempdir().unwrap();

    let python = {
        let mut v = Vec::new();
        for _ in 0..RUNS {
            let t = Instant::now();
            Command::new("python3")
                .arg("-c")
                .arg("pass")
                .output()
                .unwrap();
            v.push(t.elapsed());
        }
        median(v)
    };
    println!("python3 start-up (for reference): {}", ms(python));
    println!("| worker | workspace | 1 lane | 16 lanes | per extra lane |");
    println!("|---|---|---|---|---|");
    for worker in ["echo", "agent"] {
        let one = manifest(scratch.path(), 1, worker);
        let sixteen = manifest(scratch.path(), 16, worker);
        for (as_git, label) in [(true, "git worktrees"), (false, "temp copies")] {
            let places = [
                (None, "the default place".to_string()),
                (
                    Some(on_disk.path()),
                    format!("{}", std::env::temp_dir().display()),
                ),
            ];
            for (lanes_dir, place) in places {
                let a = time_run(&one, as_git, &home, lanes_dir);
                let b = time_run(&sixteen, as_git, &home, lanes_dir);
                println!(
                    "| {worker} | {label} ({FILES} files), lanes in {place} | {} | {} | {} |",
                    ms(a),
                    ms(b),
                    ms(b.saturating_sub(a) / 15)
                );
            }
        }
    }
}
