//! Local executor overhead: an exec block of 1,000 × `true` against 1,000
//! plain spawns of the same command.
//!
//! `cargo bench -p wfhost-exec` — figures are in the README.

use std::time::{Duration, Instant};

use wfhost_core::exec::{ExecCommand, ExecSpec};
use wfhost_exec::{BundleMeta, ExecRequest, run_local};

const COMMANDS: usize = 1000;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let raw: Vec<Duration> = (0..3)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..COMMANDS {
                let status = std::process::Command::new("true").status().unwrap();
                assert!(status.success());
            }
            t.elapsed() / COMMANDS as u32
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let exec: Vec<Duration> = (0..3)
        .map(|round| {
            let request = ExecRequest {
                spec: ExecSpec {
                    commands: vec![
                        ExecCommand {
                            argv: vec!["true".into()],
                            cwd: None,
                            env: vec![],
                        };
                        COMMANDS
                    ],
                    allow_shell: false,
                },
                workdir: dir.path().to_path_buf(),
                bundle_dir: dir.path().join(format!("bundle-{round}")),
                env: vec![],
                meta: BundleMeta::default(),
                deadline: None,
                output_cap: 1 << 20,
            };
            let t = Instant::now();
            let outcome = rt.block_on(run_local(&request)).unwrap();
            assert!(outcome.succeeded);
            t.elapsed() / COMMANDS as u32
        })
        .collect();
    let (raw, exec) = (median(raw), median(exec));
    println!(
        "| plain spawn + wait of `true` | {:.0} µs per command |",
        raw.as_secs_f64() * 1e6
    );
    println!(
        "| exec block of {COMMANDS} × `true` (policy checks, PATH lookup, process group, captured stdout/stderr files, manifest) | {:.0} µs per command, {:.0} µs over the plain spawn (target ≤ 2 ms) |",
        exec.as_secs_f64() * 1e6,
        (exec.as_secs_f64() - raw.as_secs_f64()) * 1e6
    );
}
