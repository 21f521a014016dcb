//! What a step costs, counted rather than timed, through the run report's
//! `host_costs`: store transactions and statements per step, processes
//! started and `/proc` files read per exec block, and (where `strace` is
//! installed) the syncs of the whole process. Each is checked at two
//! sizes, so that a cost growing with the run's length shows as well as
//! one above its budget.

use std::path::Path;

use super::{command, stderr, stdout, workspace_in};

/// A chain of `n` blocks of `worker`, each with `config`, each clearing
/// the payload (the cost of a growing payload is the workflow's doing,
/// not the host's).
fn chain(path: &Path, n: usize, worker: &str, config: serde_json::Value) {
    let manifest = super::block_chain(
        "budget-chain",
        n,
        serde_json::json!({"worker": worker, "config": config}),
        serde_json::json!({"exec": {"grants": ["exec"]}}),
    );
    std::fs::write(path, serde_json::to_vec(&manifest).unwrap()).unwrap();
}

/// Run the chain (a fresh home and workspace); its `host_costs` and, under
/// `strace` when `count_syncs`, the syncs the whole process made.
fn costs(
    scratch: &Path,
    n: usize,
    worker: &str,
    config: serde_json::Value,
    count_syncs: bool,
) -> (serde_json::Value, Option<u64>) {
    let dir = scratch.join(format!("{worker}-{n}-{count_syncs}"));
    let ws = workspace_in(&dir);
    let manifest = dir.join("chain.json");
    chain(&manifest, n, worker, config);
    let mut cmd = command(&dir);
    // Syncs are counted at the default durability, `full`; the rest at
    // `normal`, where the same statements and commits cost no wait on the
    // disk.
    if !count_syncs {
        cmd.env("WFHOST_DURABILITY", "normal");
    }
    let trace = dir.join("syscalls.txt");
    if count_syncs {
        let wfhost = cmd.get_program().to_owned();
        let mut traced = std::process::Command::new("strace");
        traced
            // Only the syncs stop the process (a seccomp filter lets
            // every other call through untraced).
            .args([
                "-f",
                "--seccomp-bpf",
                "-c",
                "-U",
                "name,calls",
                "-e",
                "trace=fsync,fdatasync,sync_file_range",
                "-o",
            ])
            .arg(&trace)
            .arg(wfhost);
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => traced.env(k, v),
                None => traced.env_remove(k),
            };
        }
        cmd = traced;
    }
    let max_steps = (n + 10).to_string();
    let out = cmd
        .args([
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
            "--json",
            "--max-steps",
            &max_steps,
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
    assert_eq!(report["steps"], n as u64, "{report}");
    let syncs = count_syncs.then(|| {
        std::fs::read_to_string(&trace)
            .unwrap()
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let name = f.next()?;
                let calls: u64 = f.next()?.parse().ok()?;
                matches!(name, "fsync" | "fdatasync" | "sync_file_range").then_some(calls)
            })
            .sum()
    });
    (report["host_costs"].clone(), syncs)
}

fn field(costs: &serde_json::Value, name: &str) -> u64 {
    costs[name]
        .as_u64()
        .unwrap_or_else(|| panic!("no {name} in {costs}"))
}

fn strace_available() -> bool {
    let found = std::process::Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found && std::env::var_os("WFHOST_REQUIRE_SERVICES").is_some() {
        panic!("strace is not installed (scripts/services.sh installs it)");
    }
    found
}

/// The statements of a step: begin, one insert per event (the block's
/// end, the transition taken, the next block's start), commit.
const STATEMENTS_PER_STEP: f64 = 5.0;

/// Per step, over the steps between a short and a long run (so the
/// process's start does not count): one commit (the step's own events) and
/// a bounded number of statements, at 100 and 10,000 steps; and at `full`,
/// no more syncs than commits (one sync of the log each, and the
/// checkpoints now and then).
#[test]
fn a_durable_step_costs_one_commit_one_sync_and_a_bounded_number_of_statements() {
    let scratch = tempfile::tempdir().unwrap();
    let echo = serde_json::json!({"message": "hi"});
    let (short, _) = costs(scratch.path(), 100, "echo", echo.clone(), false);
    let (long, _) = costs(scratch.path(), 10_000, "echo", echo.clone(), false);
    let per = |name: &str| (field(&long, name) - field(&short, name)) as f64 / 9_900.0;
    eprintln!(
        "per echo step: {} commits, {} statements",
        per("store_commits"),
        per("store_statements")
    );
    assert!(
        per("store_commits") <= 1.0,
        "commits per step: {}",
        per("store_commits")
    );
    assert!(
        per("store_statements") <= STATEMENTS_PER_STEP,
        "statements per step: {}",
        per("store_statements")
    );
    assert_eq!(field(&long, "processes_started"), 0);
    if strace_available() {
        let (_, Some(short)) = costs(scratch.path(), 100, "echo", echo.clone(), true) else {
            unreachable!()
        };
        let (_, Some(long)) = costs(scratch.path(), 1_000, "echo", echo, true) else {
            unreachable!()
        };
        let syncs = (long - short) as f64 / 900.0;
        eprintln!("syncs per echo step at full: {syncs} ({short} at 100 steps, {long} at 1,000)");
        assert!(
            syncs <= 1.05,
            "syncs per step: {syncs} ({short} at 100 steps, {long} at 1,000)"
        );
    }
}

/// An exec block running one command: one process started, `/proc` reads
/// bounded per block, and one commit, the same at 20 blocks as at 200.
#[test]
fn an_exec_block_costs_one_process_and_bounded_proc_reads() {
    let scratch = tempfile::tempdir().unwrap();
    let config = serde_json::json!({"commands": [{"argv": ["true"]}]});
    let (short, _) = costs(scratch.path(), 20, "exec", config.clone(), false);
    let (long, _) = costs(scratch.path(), 200, "exec", config, false);
    assert_eq!(field(&short, "processes_started"), 20, "{short}");
    assert_eq!(field(&long, "processes_started"), 200, "{long}");
    eprintln!("exec chains: {short} at 20 blocks, {long} at 200");
    let reads = (field(&long, "proc_reads") - field(&short, "proc_reads")) as f64 / 180.0;
    // The first process's start time, the host's threads' children lists
    // (a handful of threads) and the check that nothing is left.
    assert!(reads <= 10.0, "/proc reads per exec block: {reads}");
    let commits = (field(&long, "store_commits") - field(&short, "store_commits")) as f64 / 180.0;
    assert!(commits <= 1.0, "commits per exec block: {commits}");
}
