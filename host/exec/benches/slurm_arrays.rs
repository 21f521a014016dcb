//! Slurm: N trivial lanes as one job array against one `sbatch` per lane
//! (wall time, `sbatch` calls, every Slurm client command spawned, status
//! queries), and the status load of a run with N live tasks (status
//! queries per minute and per polling round).
//!
//! Against the real cluster; skipped when `sinfo` does not answer. Every
//! Slurm client command the executor spawns is counted by a shim put first
//! on `PATH` (it appends the command's name to a log, then execs the real
//! one).
//!
//! `cargo bench -p wfhost-exec --bench slurm_arrays` — `SLURM_BENCH_LANES`
//! (default 1000; a comma-separated list runs each size),
//! `SLURM_BENCH_WINDOW_SECS` (default 30) and `SLURM_BENCH_SLEEP_SECS`
//! (default 60) for the live tasks; `SLURM_BENCH_PARTS` (default
//! `array,sbatch,live`) picks parts; `WFHOST_SLURM_POLL_MS` and
//! `WFHOST_SLURM_POLL_MAX_MS` as for a run. Figures are in
//! docs/guide/benchmarks.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use wfhost_core::policy::exec::{ExecCommand, ExecSpec};
use wfhost_exec::slurm::board::PollConfig;
use wfhost_exec::{BundleMeta, ExecRequest, SlurmExecutor, SlurmOptions};

/// The client commands the executor may spawn.
const CLIENTS: [&str; 5] = ["sbatch", "squeue", "sacct", "scontrol", "scancel"];

/// Far enough for 1,000 trivial jobs two at a time; Slurm's own limit
/// (`--time`) follows from it, should the bench die.
const LANE_DEADLINE: Duration = Duration::from_secs(3600);

/// The shims: every client command spawned appends its name to `log`.
struct Shims {
    _dir: tempfile::TempDir,
    log: PathBuf,
}

impl Shims {
    /// Write the shims and put their directory first on this process's
    /// `PATH`. `None` when a client command is not installed.
    fn install() -> Option<Shims> {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("calls.log");
        std::fs::write(&log, "").unwrap();
        let path = std::env::var_os("PATH").unwrap_or_default();
        for name in CLIENTS {
            let real = std::env::split_paths(&path)
                .map(|d| d.join(name))
                .find(|p| p.is_file())?;
            let shim = dir.path().join(name);
            std::fs::write(
                &shim,
                format!(
                    "#!/bin/sh\necho {name} >> '{}'\nexec '{}' \"$@\"\n",
                    log.display(),
                    real.display()
                ),
            )
            .unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let mut dirs = vec![dir.path().to_path_buf()];
        dirs.extend(std::env::split_paths(&path));
        let joined = std::env::join_paths(dirs).unwrap();
        // SAFETY: called at the start of `main`, before the runtime or any
        // other thread exists.
        unsafe { std::env::set_var("PATH", joined) };
        Some(Shims { _dir: dir, log })
    }

    /// Commands spawned so far, by name.
    fn counts(&self) -> BTreeMap<String, u64> {
        let mut counts: BTreeMap<String, u64> =
            CLIENTS.iter().map(|c| (c.to_string(), 0)).collect();
        for line in std::fs::read_to_string(&self.log).unwrap().lines() {
            *counts.entry(line.trim().to_string()).or_default() += 1;
        }
        counts
    }
}

fn since(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .collect()
}

fn total(counts: &BTreeMap<String, u64>) -> u64 {
    counts.values().sum()
}

fn breakdown(counts: &BTreeMap<String, u64>) -> String {
    counts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{n} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A block of one command in `dir`, its bundle at `dir/name`.
fn block(dir: &Path, name: &str, argv: &[&str], run_id: &str) -> ExecRequest {
    ExecRequest {
        spec: ExecSpec {
            commands: vec![ExecCommand {
                argv: argv.iter().map(|a| a.to_string()).collect(),
                cwd: None,
                env: vec![],
            }],
            allow_shell: false,
        },
        workdir: dir.to_path_buf(),
        bundle_dir: dir.join(name),
        env: vec![],
        meta: BundleMeta {
            agent_id: String::new(),
            run_id: run_id.parse().expect("a run id"),
            stage_id: format!("{run_id}.lane"),
            step: 0,
            attempt: 0,
        },
        deadline: None,
        output_cap: 1 << 20,
        stdin: None,
        mask: Default::default(),
    }
}

fn options() -> SlurmOptions {
    SlurmOptions {
        partition: Some("debug".into()),
        ..Default::default()
    }
}

/// CPU time in seconds: this process, its reaped children (the Slurm
/// client commands), and the controller's side (`slurmctld`, `slurmdbd`
/// and its database).
#[derive(Debug, Clone, Copy, Default)]
struct Cpu {
    own: f64,
    commands: f64,
    controller: f64,
}

impl Cpu {
    fn now() -> Cpu {
        let usage = |who| {
            // SAFETY: getrusage writes into the struct it is given.
            let mut u: libc::rusage = unsafe { std::mem::zeroed() };
            unsafe { libc::getrusage(who, &mut u) };
            let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            tv(u.ru_utime) + tv(u.ru_stime)
        };
        // SAFETY: sysconf has no preconditions.
        let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let mut controller = 0.0;
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                continue;
            };
            if !matches!(
                &stat[open + 1..close],
                "slurmctld" | "slurmdbd" | "mariadbd" | "mysqld"
            ) {
                continue;
            }
            // Fields after the name: state is the 3rd field, utime the
            // 14th and stime the 15th.
            let fields: Vec<&str> = stat[close + 2..].split_whitespace().collect();
            let ticks = |i: usize| fields.get(i - 3).and_then(|f| f.parse::<f64>().ok());
            controller += ticks(14).unwrap_or(0.0) + ticks(15).unwrap_or(0.0);
        }
        Cpu {
            own: usage(libc::RUSAGE_SELF),
            commands: usage(libc::RUSAGE_CHILDREN),
            controller: controller / tick,
        }
    }

    fn since(self, before: Cpu) -> Cpu {
        Cpu {
            own: self.own - before.own,
            commands: self.commands - before.commands,
            controller: self.controller - before.controller,
        }
    }
}

/// Jobs of others that were queued or running during the last `elapsed`
/// (the cluster may be shared): they slow the bench's jobs down.
fn foreign_jobs(run_id: &str, elapsed: Duration) -> usize {
    let Ok(out) = std::process::Command::new("sacct")
        .args([
            "-X",
            "-a",
            "-n",
            "-P",
            "--format=JobID,JobName%200",
            &format!("--starttime=now-{}seconds", elapsed.as_secs() + 1),
            "--endtime=now",
        ])
        .output()
    else {
        return 0;
    };
    let ours = format!("wfhost:{run_id}.");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            l.split_once('|')
                .is_some_and(|(_, name)| !name.starts_with(&ours))
        })
        .count()
}

/// Wait (up to 10 minutes) until the queue is empty, others' jobs
/// included: each part starts on an idle cluster when it can.
fn wait_idle() -> Duration {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(600) {
        let busy = std::process::Command::new("squeue")
            .args(["-h", "-o", "%i"])
            .output()
            .is_ok_and(|o| !o.stdout.is_empty());
        if !busy {
            break;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    t.elapsed()
}

/// What one approach cost.
struct Row {
    approach: String,
    lanes: usize,
    wall: Duration,
    commands: BTreeMap<String, u64>,
    /// Rounds of the board (`board.queries()`).
    queries: u64,
    tally: Tally,
    cpu: Cpu,
    /// Others' jobs on the cluster meanwhile.
    foreign: usize,
}

fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 60.0 {
        format!("{s:.0} s ({}m {:02}s)", d.as_secs() / 60, d.as_secs() % 60)
    } else if s >= 10.0 {
        format!("{s:.1} s")
    } else {
        format!("{s:.2} s")
    }
}

/// Submitted after, the outcome, and when its bundle was sealed (ms since
/// the epoch).
type LaneResult = Result<(Duration, wfhost_exec::ExecOutcome, u64), wfhost_exec::ExecError>;

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// What the lanes of one approach came to.
struct Tally {
    submitting: Duration,
    succeeded: usize,
    failures: BTreeMap<String, usize>,
    /// From the lane's command's end (its own record) to its sealed
    /// bundle: median and max.
    lag: Option<(Duration, Duration)>,
}

fn tally(results: Vec<LaneResult>) -> Tally {
    let mut submitting = Duration::ZERO;
    let mut succeeded = 0;
    let mut failures = BTreeMap::new();
    let mut lags = Vec::new();
    for r in results {
        match r {
            Ok((submitted, outcome, sealed)) => {
                submitting = submitting.max(submitted);
                if outcome.succeeded {
                    succeeded += 1;
                    if let Some(c) = outcome.commands.last() {
                        lags.push(Duration::from_millis(sealed.saturating_sub(c.ended_ms)));
                    }
                } else {
                    let manifest =
                        std::fs::read_to_string(outcome.bundle_dir.join("manifest.json"))
                            .unwrap_or_default();
                    let state = serde_json::from_str::<serde_json::Value>(&manifest)
                        .ok()
                        .and_then(|m| m["slurm"]["state"].as_str().map(str::to_string))
                        .unwrap_or_else(|| "no state".into());
                    *failures.entry(state).or_default() += 1;
                }
            }
            Err(e) => *failures.entry(format!("error: {e}")).or_default() += 1,
        }
    }
    lags.sort();
    Tally {
        submitting,
        succeeded,
        failures,
        lag: (!lags.is_empty()).then(|| (lags[lags.len() / 2], lags[lags.len() - 1])),
    }
}

/// N lanes through the batcher: one `sbatch --array`.
async fn as_array(n: usize, shims: &Shims, poll: PollConfig, run_id: &str) -> Row {
    let dir = tempfile::tempdir().unwrap();
    let slurm = SlurmExecutor::new(poll);
    let group = format!("{run_id}/array");
    let lanes: Vec<String> = (0..n).map(|i| format!("lane-{i:05}")).collect();
    let deadline = Some(Instant::now() + LANE_DEADLINE);
    let requests: Vec<ExecRequest> = lanes
        .iter()
        .map(|l| ExecRequest {
            deadline,
            ..block(dir.path(), l, &["true"], run_id)
        })
        .collect();
    let options = options();
    slurm.arrays.expect(&group, &lanes, None);
    let before = shims.counts();
    let cpu = Cpu::now();
    let t0 = Instant::now();
    let results = join_all(lanes.iter().zip(&requests).map(|(lane, request)| {
        let (slurm, group, options) = (&slurm, &group, &options);
        async move {
            let job = slurm
                .arrays
                .submit(slurm, group, lane, request, options)
                .await?;
            let submitted = t0.elapsed();
            let outcome = slurm.wait_and_finish(job, deadline).await?;
            Ok((submitted, outcome, unix_ms()))
        }
    }))
    .await;
    let wall = t0.elapsed();
    let commands = since(&before, &shims.counts());
    let cpu = Cpu::now().since(cpu);
    assert_eq!(
        slurm.arrays.submissions(),
        commands["sbatch"],
        "the batcher's count and the shim's"
    );
    let tally = tally(results);
    Row {
        approach: "one job array (`sbatch --array`)".into(),
        lanes: n,
        wall,
        commands,
        queries: slurm.board.queries(),
        tally,
        cpu,
        foreign: foreign_jobs(run_id, wall),
    }
}

/// N lanes each submitted alone, as wfhost did before arrays.
async fn one_by_one(n: usize, shims: &Shims, poll: PollConfig, run_id: &str) -> Row {
    let dir = tempfile::tempdir().unwrap();
    let slurm = SlurmExecutor::new(poll);
    let deadline = Some(Instant::now() + LANE_DEADLINE);
    let requests: Vec<ExecRequest> = (0..n)
        .map(|i| ExecRequest {
            deadline,
            ..block(dir.path(), &format!("lane-{i:05}"), &["true"], run_id)
        })
        .collect();
    let options = options();
    let before = shims.counts();
    let cpu = Cpu::now();
    let t0 = Instant::now();
    let results = join_all(requests.iter().map(|request| {
        let (slurm, options) = (&slurm, &options);
        async move {
            let job = slurm.submit(request, options).await?;
            let submitted = t0.elapsed();
            let outcome = slurm.wait_and_finish(job, deadline).await?;
            Ok((submitted, outcome, unix_ms()))
        }
    }))
    .await;
    let wall = t0.elapsed();
    let commands = since(&before, &shims.counts());
    let cpu = Cpu::now().since(cpu);
    let tally = tally(results);
    Row {
        approach: "one `sbatch` per lane".into(),
        lanes: n,
        wall,
        commands,
        queries: slurm.board.queries(),
        tally,
        cpu,
        foreign: foreign_jobs(run_id, wall),
    }
}

/// What waiting on N live tasks for a window costs.
struct Live {
    lanes: usize,
    window: Duration,
    sleep: u64,
    /// Commands spawned during the window.
    commands: BTreeMap<String, u64>,
    /// Board rounds during the window.
    rounds: u64,
    /// Tasks that ended during the window (none expected).
    ended: usize,
    /// Tasks running / pending when the window closed, per `squeue`.
    running: usize,
    pending: usize,
    submit_commands: BTreeMap<String, u64>,
    cancel_commands: BTreeMap<String, u64>,
    /// CPU during the window.
    cpu: Cpu,
    foreign: usize,
}

/// States of an array's tasks, by `squeue -r` (not counted: the window is
/// over).
fn task_states(array: &str) -> BTreeMap<String, usize> {
    let out = std::process::Command::new("squeue")
        .args(["-h", "-r", "-o", "%T", "-j", array])
        .output()
        .unwrap();
    let mut states = BTreeMap::new();
    for s in String::from_utf8_lossy(&out.stdout).lines() {
        *states.entry(s.trim().to_string()).or_default() += 1;
    }
    states
}

async fn live_tasks(
    n: usize,
    shims: &Shims,
    poll: PollConfig,
    run_id: &str,
    window: Duration,
    sleep: u64,
) -> Live {
    let dir = tempfile::tempdir().unwrap();
    let slurm = SlurmExecutor::new(poll);
    let group = format!("{run_id}/live");
    let lanes: Vec<String> = (0..n).map(|i| format!("live-{i:05}")).collect();
    let sleep_arg = sleep.to_string();
    let requests: Vec<ExecRequest> = lanes
        .iter()
        .map(|l| block(dir.path(), l, &["sleep", &sleep_arg], run_id))
        .collect();
    // Slurm's backstop, should the bench die before its scancel.
    let options = SlurmOptions {
        time_limit: Some(format!("{}", sleep.div_ceil(60) + 2)),
        ..options()
    };
    slurm.arrays.expect(&group, &lanes, None);
    let before = shims.counts();
    let jobs = join_all(lanes.iter().zip(&requests).map(|(lane, request)| {
        let (slurm, group, options) = (&slurm, &group, &options);
        async move {
            slurm
                .arrays
                .submit(slurm, group, lane, request, options)
                .await
        }
    }))
    .await;
    let keys: Vec<String> = jobs
        .into_iter()
        .map(|j| j.expect("the live array was submitted").job_id)
        .collect();
    for (key, request) in keys.iter().zip(&requests) {
        slurm
            .board
            .track(key, std::path::absolute(&request.bundle_dir).unwrap());
    }
    let submitted = shims.counts();
    let rounds_before = slurm.board.queries();
    let cpu = Cpu::now();
    let opened = Instant::now();
    let deadline = opened + window;
    let ends = join_all(
        keys.iter()
            .map(|key| slurm.board.wait(&slurm, key, Some(deadline))),
    )
    .await;
    let after = shims.counts();
    let cpu = Cpu::now().since(cpu);
    let rounds = slurm.board.queries() - rounds_before;
    let foreign = foreign_jobs(run_id, opened.elapsed());
    let arrays = slurm.arrays.arrays();
    let states = task_states(&arrays.join(","));
    let before_cancel = shims.counts();
    for id in &arrays {
        slurm.cancel(id).await.expect("scancel of the live array");
    }
    Live {
        lanes: n,
        window,
        sleep,
        commands: since(&submitted, &after),
        rounds,
        ended: ends.iter().filter(|e| e.is_some()).count(),
        running: states.get("RUNNING").copied().unwrap_or(0),
        pending: states.get("PENDING").copied().unwrap_or(0),
        submit_commands: since(&before, &submitted),
        cancel_commands: since(&before_cancel, &shims.counts()),
        cpu,
        foreign,
    }
}

/// This bench's jobs still in the queue.
fn ours_in_queue(run_id: &str) -> Vec<String> {
    let Ok(out) = std::process::Command::new("squeue")
        .args(["-h", "-o", "%i|%k"])
        .output()
    else {
        return Vec::new();
    };
    let tag = format!("wfhost-run={run_id};");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('|'))
        .filter(|(_, comment)| comment.starts_with(&tag))
        .map(|(id, _)| id.trim().to_string())
        .collect()
}

/// Cancels whatever this bench left in the queue, even on a panic.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let left = ours_in_queue(&self.0);
        if !left.is_empty() {
            let _ = std::process::Command::new("scancel").args(&left).status();
        }
    }
}

/// Wait until none of this bench's jobs is in the queue any more.
fn drain(run_id: &str) {
    let until = Instant::now() + Duration::from_secs(120);
    while !ours_in_queue(run_id).is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn main() {
    let available = std::process::Command::new("sinfo")
        .arg("-h")
        .output()
        .is_ok_and(|o| o.status.success());
    if !available {
        println!("slurm_arrays: skipped: Slurm not reachable (scripts/services.sh slurm)");
        return;
    }
    let Some(shims) = Shims::install() else {
        println!("slurm_arrays: skipped: a Slurm client command is not installed");
        return;
    };
    let sizes: Vec<usize> = std::env::var("SLURM_BENCH_LANES")
        .unwrap_or_else(|_| "1000".into())
        .split(',')
        .map(|s| s.trim().parse().expect("SLURM_BENCH_LANES: numbers"))
        .collect();
    let secs = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .map_or(default, |v| v.trim().parse().expect("seconds"))
    };
    let window = Duration::from_secs(secs("SLURM_BENCH_WINDOW_SECS", 30));
    let sleep = secs("SLURM_BENCH_SLEEP_SECS", 60);
    let parts = std::env::var("SLURM_BENCH_PARTS").unwrap_or_else(|_| "array,sbatch,live".into());
    let part = |name: &str| parts.split(',').any(|p| p.trim() == name);
    let poll = PollConfig::from_env().expect("polling configuration");
    let run_id = format!("run-20260101-000002-{:06x}", std::process::id() & 0xff_ffff);
    let _cleanup = Cleanup(run_id.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    println!(
        "polling: every {} ms at first, backing off x1.5 to {} ms, status from {}",
        poll.interval.as_millis(),
        poll.max_interval.as_millis(),
        match poll.source {
            None => "sacct with accounting, else squeue (auto)",
            Some(wfhost_exec::slurm::board::StatusSource::Sacct) => "sacct",
            Some(wfhost_exec::slurm::board::StatusSource::Squeue) => "squeue",
        }
    );
    let started = Instant::now();
    let mut rows = Vec::new();
    let mut lives = Vec::new();
    let progress = |row: &Row| {
        eprintln!(
            "{} × {}: {} in {}; {} succeeded",
            row.approach,
            row.lanes,
            breakdown(&row.commands),
            fmt_duration(row.wall),
            row.tally.succeeded
        )
    };
    let mut waited = Duration::ZERO;
    for &n in &sizes {
        // Each part starts on an empty queue (the bench's jobs gone, and
        // others' when they go within 10 minutes).
        if part("array") {
            waited += wait_idle();
            rows.push(rt.block_on(as_array(n, &shims, poll, &run_id)));
            progress(rows.last().unwrap());
            drain(&run_id);
        }
        if part("sbatch") {
            waited += wait_idle();
            rows.push(rt.block_on(one_by_one(n, &shims, poll, &run_id)));
            progress(rows.last().unwrap());
            drain(&run_id);
        }
        if part("live") {
            waited += wait_idle();
            lives.push(rt.block_on(live_tasks(n, &shims, poll, &run_id, window, sleep)));
            drain(&run_id);
        }
    }

    println!();
    println!(
        "| approach | lanes | wall time | sbatch calls | all Slurm commands | status queries |"
    );
    println!("|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} ({}) | {} |",
            r.approach,
            r.lanes,
            fmt_duration(r.wall),
            r.commands["sbatch"],
            total(&r.commands),
            breakdown(&r.commands),
            r.queries
        );
    }
    for l in &lives {
        let status = l.commands["sacct"] + l.commands["squeue"];
        let minutes = l.window.as_secs_f64() / 60.0;
        println!(
            "| {} live tasks (`sleep {}`), waited on for {} s | {} | {} | {} before the window | {} in the window ({}) | {} in the window: {:.1} per minute |",
            l.lanes,
            l.sleep,
            l.window.as_secs(),
            l.lanes,
            fmt_duration(l.window),
            l.submit_commands["sbatch"],
            total(&l.commands),
            breakdown(&l.commands),
            status,
            status as f64 / minutes
        );
    }
    println!();
    for r in &rows {
        let status = r.commands["sacct"] + r.commands["squeue"];
        println!(
            "- {} × {}: all submitted after {}; {} of {} lanes succeeded{}; a lane's end to its sealed bundle: {}; {:.2} status commands per board round; {:.1} status queries per minute; CPU: bench {:.2} s, Slurm commands {:.2} s, slurmctld + slurmdbd + database {:.2} s; others' jobs meanwhile: {}",
            r.approach,
            r.lanes,
            fmt_duration(r.tally.submitting),
            r.tally.succeeded,
            r.lanes,
            if r.tally.failures.is_empty() {
                String::new()
            } else {
                format!(
                    " (not: {})",
                    r.tally
                        .failures
                        .iter()
                        .map(|(k, v)| format!("{v} {k}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            r.tally.lag.map_or("-".into(), |(median, max)| format!(
                "median {}, max {}",
                fmt_duration(median),
                fmt_duration(max)
            )),
            status as f64 / r.queries.max(1) as f64,
            status as f64 / (r.wall.as_secs_f64() / 60.0),
            r.cpu.own,
            r.cpu.commands,
            r.cpu.controller,
            r.foreign
        );
    }
    for l in &lives {
        let status = l.commands["sacct"] + l.commands["squeue"];
        println!(
            "- {} live tasks: {} board rounds in {} s, {} status commands spawned: {:.2} per round, {:.1} per minute; {} ended in the window; at its end {} running, {} pending; submitted with {}, cancelled with {}; CPU in the window: bench {:.2} s, Slurm commands {:.2} s, slurmctld + slurmdbd + database {:.2} s; others' jobs meanwhile: {}",
            l.lanes,
            l.rounds,
            l.window.as_secs(),
            status,
            status as f64 / l.rounds.max(1) as f64,
            status as f64 / (l.window.as_secs_f64() / 60.0),
            l.ended,
            l.running,
            l.pending,
            breakdown(&l.submit_commands),
            breakdown(&l.cancel_commands),
            l.cpu.own,
            l.cpu.commands,
            l.cpu.controller,
            l.foreign
        );
    }
    let left = ours_in_queue(&run_id);
    println!(
        "- total {} (of which {} waiting for others' jobs to leave the queue); left in the queue: {}",
        fmt_duration(started.elapsed()),
        fmt_duration(waited),
        if left.is_empty() {
            "none".to_string()
        } else {
            left.join(" ")
        }
    );
}
