//! A parallel block over a list (`parallel.over`) end to end through
//! `wfhost run`, as whole processes: 1, 1,000 and 10,000 items (100× and
//! 1,000× the lanes a test names), with the `echo` worker (no process:
//! wfhost's own cost per lane — its workspace, its plugin call, its
//! events, fan-in) and the `exec` worker running `true` (plus a process
//! per lane), in a plain directory of 20 files (copied lanes). Prints the
//! wall time, the host overhead per lane ((wall(N) − wall(1)) / N) and
//! the peak RSS of the run.
//!
//! `cargo bench -p wfhost --bench fan_out_over` (`FANOUT_SIZES=1000` to
//! run fewer sizes) — figures are in docs/dev/benchmarks.md. Snakemake
//! on the same tasks, locally and on Slurm: `bench/fanout/run.sh`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const FILES: usize = 20;

fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("out")).unwrap();
    for i in 0..FILES {
        std::fs::write(ws.path().join(format!("f{i}.txt")), format!("{i}\n")).unwrap();
    }
    ws
}

fn manifest(dir: &Path, worker: &str) -> PathBuf {
    let config = match worker {
        "exec" => serde_json::json!({"commands": [{"argv": ["true", "{{item}}"]}]}),
        _ => serde_json::json!({"message": "item {{item}}"}),
    };
    let wf = serde_json::json!({
        "id": "fan-out-over-bench",
        "plugins": {"exec": {"grants": ["exec"]}},
        "inputs": {"type": "object", "properties": {"items": {"type": "array"}}},
        "start_node": "n",
        "nodes": {"n": {"entry_block": "b", "blocks": {"b": {
            "worker": worker,
            "timeout": "3600s",
            "config": config,
            "parallel": {"over": "inputs.items", "merge_strategy": "workspace"},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
        }}}}
    });
    let path = dir.join(format!("{worker}.json"));
    std::fs::write(&path, wf.to_string()).unwrap();
    path
}

fn inputs(dir: &Path, n: usize) -> PathBuf {
    let items: Vec<String> = (0..n).map(|i| format!("i{i}")).collect();
    let path = dir.join(format!("items-{n}.json"));
    std::fs::write(&path, serde_json::json!({"items": items}).to_string()).unwrap();
    path
}

/// One run: its wall time and peak RSS (KiB, from GNU time when it is
/// there).
fn time_run(manifest: &Path, inputs: &Path, home: &Path) -> (Duration, Option<u64>) {
    let ws = workspace();
    let rss_file = home.join("rss");
    let time = Path::new("/usr/bin/time");
    let mut command = if time.exists() {
        let mut c = Command::new(time);
        c.args(["-f", "%M", "-o"])
            .arg(&rss_file)
            .arg(env!("CARGO_BIN_EXE_wfhost"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_wfhost"))
    };
    let t = Instant::now();
    let out = command
        .args(["run", manifest.to_str().unwrap(), "-w"])
        .arg(ws.path())
        .arg("--input")
        .arg(inputs)
        .arg("--json")
        .env("WFHOST_HOME", home)
        .env("WFHOST_CACHE_DIR", home.join("cache"))
        .output()
        .unwrap();
    let wall = t.elapsed();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let rss = std::fs::read_to_string(&rss_file)
        .ok()
        .and_then(|t| t.trim().lines().last()?.trim().parse().ok());
    (wall, rss)
}

fn main() {
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    let sizes: Vec<usize> = std::env::var("FANOUT_SIZES")
        .unwrap_or_else(|_| "1000,10000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    println!("| worker | items | wall | per lane (host overhead) | peak RSS |");
    println!("|---|---|---|---|---|");
    for worker in ["echo", "exec"] {
        let wf = manifest(scratch.path(), worker);
        // Warm the compiled-component cache, then the one-item baseline.
        time_run(&wf, &inputs(scratch.path(), 1), &home);
        let (one, rss) = time_run(&wf, &inputs(scratch.path(), 1), &home);
        let show_rss = |rss: Option<u64>| rss.map_or("-".into(), |k| format!("{} MiB", k / 1024));
        println!(
            "| {worker} | 1 | {:.2} s | - | {} |",
            one.as_secs_f64(),
            show_rss(rss)
        );
        for &n in &sizes {
            let (wall, rss) = time_run(&wf, &inputs(scratch.path(), n), &home);
            let per = wall.saturating_sub(one).as_secs_f64() * 1000.0 / n as f64;
            println!(
                "| {worker} | {n} | {:.2} s | {per:.2} ms | {} |",
                wall.as_secs_f64(),
                show_rss(rss)
            );
        }
    }
}
