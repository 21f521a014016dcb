//! Executor costs: an exec block of 1,000 × `true` against 1,000 plain
//! spawns of the same command; container cold and warm starts; Slurm
//! submit-to-finish latency.
//!
//! `cargo bench -p wfhost-exec` — figures are in the README.

use std::time::{Duration, Instant};

use wfhost_core::policy::exec::{ExecCommand, ExecSpec};
use wfhost_exec::{BundleMeta, ExecRequest, run_local};

const COMMANDS: usize = 1000;

fn meta() -> BundleMeta {
    BundleMeta {
        agent_id: String::new(),
        run_id: "run-20260101-000000-00be0c".parse().expect("a run id"),
        stage_id: String::new(),
        step: 0,
        attempt: 0,
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A block of one `true` in `dir`, its bundle at `dir/name`.
fn one_true(dir: &std::path::Path, name: &str) -> ExecRequest {
    ExecRequest {
        spec: ExecSpec {
            commands: vec![ExecCommand {
                argv: vec!["true".into()],
                cwd: None,
                env: vec![],
            }],
            allow_shell: false,
        },
        workdir: dir.to_path_buf(),
        bundle_dir: dir.join(name),
        env: vec![],
        meta: meta(),
        deadline: None,
        output_cap: 1 << 20,
        stdin: None,
        mask: Default::default(),
    }
}

/// Cold start (create + start a container) against warm start (unpause a
/// dormant one), each for a block of one `true`.
fn containers(rt: &tokio::runtime::Runtime) {
    use wfhost_exec::{ContainerOptions, ContainerPool};
    let Ok(pool) = rt.block_on(ContainerPool::connect()) else {
        println!(
            "| container start | skipped: Docker not reachable (scripts/services.sh docker) |"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let options = ContainerOptions {
        image: "wfhost-test/busybox:1".into(),
        cpus: None,
        memory_mb: None,
        ..Default::default()
    };
    let mut n = 0;
    let mut block = |pool: &ContainerPool| {
        n += 1;
        let request = one_true(dir.path(), &format!("c-{n}"));
        let t = Instant::now();
        let outcome = rt.block_on(pool.run(&request, &options)).unwrap();
        assert!(outcome.succeeded);
        t.elapsed()
    };
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for _ in 0..5 {
        cold.push(block(&pool));
        warm.push(block(&pool));
        rt.block_on(pool.shutdown());
    }
    println!(
        "| container block of one `true`, cold (create + start) | median {:.0} ms |",
        median(cold).as_secs_f64() * 1e3
    );
    println!(
        "| container block of one `true`, warm (unpause the dormant container) | median {:.0} ms |",
        median(warm).as_secs_f64() * 1e3
    );
}

/// Submit-to-finished latency of a trivial Slurm job (`true`), at the
/// executor's default polling interval.
fn slurm(rt: &tokio::runtime::Runtime) {
    use wfhost_exec::{SlurmExecutor, SlurmOptions};
    let available = std::process::Command::new("sinfo")
        .arg("-h")
        .output()
        .is_ok_and(|o| o.status.success());
    if !available {
        println!("| Slurm job | skipped: Slurm not reachable (scripts/services.sh slurm) |");
        return;
    }
    let slurm = SlurmExecutor::default();
    let dir = tempfile::tempdir().unwrap();
    let mut times = Vec::new();
    for n in 0..5 {
        let request = one_true(dir.path(), &format!("s-{n}"));
        let t = Instant::now();
        let outcome = rt
            .block_on(slurm.run(&request, &SlurmOptions::default()))
            .unwrap();
        assert!(outcome.succeeded);
        times.push(t.elapsed());
    }
    println!(
        "| Slurm block of one `true`, sbatch to sealed bundle (status every {} ms at first) | median {:.0} ms |",
        slurm.board.config().interval.as_millis(),
        median(times).as_secs_f64() * 1e3
    );
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
                meta: meta(),
                deadline: None,
                output_cap: 1 << 20,
                stdin: None,
                mask: Default::default(),
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
    containers(&rt);
    slurm(&rt);
}
