//! End-to-end tests of the `wfhost` binary: the way a user runs it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod agents;
mod bad_input;
mod budgets;
mod cli;
mod cli_presets;
mod config;
mod dashboard;
mod deadlines;
mod distribution;
mod durable;
mod examples;
mod exec;
mod fan_out_over;
mod finding;
mod hooks;
mod hostile_registry;
mod http;
mod inputs;
mod inspect;
mod json_shapes;
mod leases;
mod llm;
mod mcp;
mod notify;
mod observe;
mod otlp;
mod parallel;
mod plugin;
mod plugin_javascript;
mod plugin_python;
mod presets;
mod rerun;
mod results;
mod retries;
mod run;
mod schedules;
mod secrets;
mod serve;
mod serve_abuse;
mod server_budget;
mod session_files;
mod slurm_agents;
mod slurm_arrays;
mod store_postgres;
mod takeover;
mod team;
mod timers;
mod tls;
mod tracing_logs;
mod trust;
mod validate;

/// A workflow `id` of `n` copies of `block` in a chain (`b0` → `b1` → …
/// → `END` on success), each clearing the payload (else it grows with
/// every step, and so does handing it on), with `plugins` as given.
fn block_chain(
    id: &str,
    n: usize,
    block: serde_json::Value,
    plugins: serde_json::Value,
) -> serde_json::Value {
    let blocks: serde_json::Map<String, serde_json::Value> = (0..n)
        .map(|i| {
            let action = if i + 1 == n {
                "END".to_string()
            } else {
                format!("JUMP:b{}", i + 1)
            };
            let mut block = block.clone();
            block["payload_merge_strategy"] = serde_json::json!(["clear"]);
            block["transitions"] =
                serde_json::json!([{"on_signal": "SIGNAL:SUCCESS", "action": action}]);
            (format!("b{i}"), block)
        })
        .collect();
    serde_json::json!({"id": id, "start_node": "main", "plugins": plugins,
        "nodes": {"main": {"entry_block": "b0", "blocks": blocks}}})
}

/// Wait up to 60 s for `ok`, looking every 20 ms; fail naming `what`.
fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !ok() {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The repository root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// `wfhost` with a private compiled-component cache and a private home
/// (run store) inside `scratch`.
fn command(scratch: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wfhost"));
    cmd.env("WFHOST_CACHE_DIR", scratch.join("cache"))
        .env("WFHOST_HOME", scratch.join("home"))
        .env_remove("WFHOST_DURABILITY")
        .env_remove("WFHOST_STORE")
        .env_remove("WFHOST_LOG")
        .env_remove("RUST_BACKTRACE");
    cmd
}

/// A workspace inside `scratch`, beside (not around) the home and cache
/// that [`command`] puts there: wfhost refuses a workspace that contains
/// them.
fn workspace_in(scratch: &Path) -> PathBuf {
    let ws = scratch.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    ws
}

/// `wfhost secret set NAME` with `value` on its standard input.
fn set_secret(s: &Path, name: &str, value: &str) {
    use std::io::Write;
    let mut child = command(s)
        .args(["secret", "set", name])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(value.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
}

/// Run `wfhost` with a private cache and home inside `scratch`.
fn wfhost(args: &[&str], scratch: &Path) -> Output {
    command(scratch).args(args).output().expect("wfhost runs")
}

/// `wfhost run MANIFEST --workspace WS`.
fn run_workflow(manifest: &Path, ws: &Path, cache: &Path) -> Output {
    wfhost(
        &[
            "run",
            manifest.to_str().unwrap(),
            "--workspace",
            ws.to_str().unwrap(),
        ],
        cache,
    )
}

/// `wfhost run MANIFEST -w WS --json`: its exit code and its report.
fn run_report(manifest: &Path, ws: &Path, scratch: &Path) -> (Option<i32>, serde_json::Value) {
    let out = wfhost(
        &[
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
            "--json",
        ],
        scratch,
    );
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not a JSON report ({e}): {}{}", stdout(&out), stderr(&out)));
    (out.status.code(), report)
}

/// A run's events (`wfhost events RUN --json`: one stored event a line).
fn run_events(scratch: &Path, run: &str) -> Vec<serde_json::Value> {
    let out = wfhost(&["events", run, "--json"], scratch);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    stdout(&out)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["event"].clone())
        .collect()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every file and directory below `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            out.push(p.strip_prefix(dir).unwrap().display().to_string());
            if p.is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

/// `wfhost ARGS` (a `show RUN … --json`) with the run's `steps` count
/// replaced by its step rows (`show … --json --steps`): what tests that
/// compare steps read.
fn shown_with_steps(args: &[&str], scratch: &Path) -> serde_json::Value {
    let read = |args: &[&str]| -> serde_json::Value {
        let out = wfhost(args, scratch);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {}", stdout(&out)))
    };
    let mut shown = read(args);
    let mut with_steps = args.to_vec();
    with_steps.push("--steps");
    shown["steps"] = read(&with_steps)["steps"].clone();
    shown
}
