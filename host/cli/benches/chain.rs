//! What a user runs: the whole `wfhost run` process on a chain of N no-op
//! `echo` blocks (each clears the payload and jumps to the next), with a
//! fresh run store and workspace per run and a warm plugin cache, at
//! `full` and `normal` durability. Reports the wall time per step and the
//! process's peak RSS; asserts nothing about time.
//!
//! `cargo bench -p wfhost --bench chain` runs 100, 1,000 and 10,000
//! blocks; `WFHOST_BENCH_LARGE=1` adds 100,000. `WFHOST_BENCH_SIZES=100,1000`
//! picks the sizes. Figures are in docs/guide/benchmarks.md.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const RUNS: usize = 3;

/// A manifest of `n` echo blocks in a chain.
pub fn chain_manifest(dir: &Path, n: usize) -> PathBuf {
    let mut blocks = serde_json::Map::new();
    for i in 0..n {
        let action = if i + 1 == n {
            "END".to_string()
        } else {
            format!("JUMP:b{}", i + 1)
        };
        blocks.insert(
            format!("b{i}"),
            serde_json::json!({
                "worker": "echo",
                "config": {"message": "step"},
                "payload_merge_strategy": ["clear"],
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": action}]
            }),
        );
    }
    let wf = serde_json::json!({
        "id": format!("chain-{n}"),
        "start_node": "main",
        "nodes": {"main": {"entry_block": "b0", "blocks": blocks}}
    });
    let path = dir.join(format!("chain-{n}.json"));
    std::fs::write(&path, serde_json::to_vec(&wf).unwrap()).unwrap();
    path
}

/// Wall time and peak RSS (KiB) of one `wfhost run`.
// The child is reaped by wait4, which also reports its peak RSS.
#[allow(clippy::zombie_processes)]
fn run_once(manifest: &Path, n: usize, durability: &str, cache: &Path) -> (f64, i64) {
    let scratch = tempfile::tempdir().unwrap();
    let ws = scratch.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let t = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_wfhost"))
        .args([
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
        ])
        .args([
            "--max-steps",
            &(n + 10).to_string(),
            "--durability",
            durability,
        ])
        .arg("--json")
        .env("WFHOST_HOME", scratch.path().join("home"))
        .env("WFHOST_CACHE_DIR", cache)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (status, rss) = wait_with_rusage(child.id() as i32);
    let wall = t.elapsed().as_secs_f64();
    assert_eq!(status, 0, "wfhost run of {n} blocks failed");
    (wall, rss)
}

/// waitpid with the child's resource usage: (exit code, max RSS in KiB).
fn wait_with_rusage(pid: i32) -> (i32, i64) {
    let mut status = 0;
    // SAFETY: a zeroed rusage is valid; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4");
    (libc::WEXITSTATUS(status), usage.ru_maxrss)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn sizes() -> Vec<usize> {
    if let Ok(list) = std::env::var("WFHOST_BENCH_SIZES") {
        return list
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect();
    }
    let mut sizes = vec![100, 1_000, 10_000];
    if std::env::var_os("WFHOST_BENCH_LARGE").is_some() {
        sizes.push(100_000);
    }
    sizes
}

fn main() {
    // `cargo bench` passes --bench; a plain `cargo test` of benches passes
    // nothing and should not run for minutes.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    // Warm the compiled-plugin cache.
    let warm = chain_manifest(dir.path(), 1);
    run_once(&warm, 1, "full", &cache);
    println!(
        "whole `wfhost run` of a chain of no-op echo blocks (median of {RUNS}; fresh store and workspace, warm cache)"
    );
    println!(
        "{:>8} {:>8} {:>10} {:>14} {:>12}",
        "blocks", "durab.", "wall s", "per step µs", "peak RSS MiB"
    );
    for n in sizes() {
        let manifest = chain_manifest(dir.path(), n);
        for durability in ["full", "normal"] {
            let runs = if n >= 100_000 { 1 } else { RUNS };
            let mut walls = Vec::new();
            let mut rss = 0;
            for _ in 0..runs {
                let (wall, r) = run_once(&manifest, n, durability, &cache);
                walls.push(wall);
                rss = rss.max(r);
            }
            let wall = median(walls);
            println!(
                "{n:>8} {durability:>8} {wall:>10.3} {:>14.1} {:>12.1}",
                wall * 1e6 / n as f64,
                rss as f64 / 1024.0
            );
        }
    }
}
