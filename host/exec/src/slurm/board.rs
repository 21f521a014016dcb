//! The status of a run's Slurm jobs, asked for all of them at once.
//!
//! Every job (or array task) a run waits for is on one [`JobBoard`]. Each
//! polling round is **one** query for all of them: `sacct -X` where the
//! cluster keeps accounting, else `squeue -r -t all` plus the marker file
//! each job script writes when it ends (`slurm/job.end`: its exit code).
//! Whoever waits first when a round is due runs it; the others are woken
//! by its result. Rounds back off while nothing changes (×1.5, up to
//! [`PollConfig::max_interval`]) and speed up again when something does.
//!
//! A job the controller has forgotten (`MinJobAge` passed) is resolved from
//! its marker, never left waiting: with accounting, `sacct` still has it;
//! without, a job that left the queue ended with the code its marker holds,
//! or, with no marker at all, `UNKNOWN`.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Where the final states come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusSource {
    /// `sacct -X --parsable2`: the cluster keeps accounting.
    Sacct,
    /// `squeue -r -t all` and the jobs' marker files.
    Squeue,
}

/// How often the board asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollConfig {
    /// The first interval, and the one after a round that saw a change.
    pub interval: Duration,
    /// The longest interval backing off reaches.
    pub max_interval: Duration,
    /// `None`: `sacct` when the cluster keeps accounting, else `squeue`.
    pub source: Option<StatusSource>,
}

impl Default for PollConfig {
    fn default() -> Self {
        PollConfig {
            interval: Duration::from_millis(250),
            max_interval: Duration::from_secs(2),
            source: None,
        }
    }
}

impl PollConfig {
    /// The defaults, overridden by `WFHOST_SLURM_POLL_MS`,
    /// `WFHOST_SLURM_POLL_MAX_MS` and `WFHOST_SLURM_STATUS`
    /// (`sacct`|`squeue`).
    pub fn from_env() -> Result<PollConfig, String> {
        let mut config = PollConfig::default();
        let ms = |name: &str| -> Result<Option<Duration>, String> {
            match std::env::var(name) {
                Err(_) => Ok(None),
                Ok(v) => v
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|n| (10..=600_000).contains(n))
                    .map(|n| Some(Duration::from_millis(n)))
                    .ok_or_else(|| {
                        format!("{name}=`{v}`: give milliseconds between 10 and 600000")
                    }),
            }
        };
        if let Some(d) = ms("WFHOST_SLURM_POLL_MS")? {
            config.interval = d;
            config.max_interval = config.max_interval.max(d);
        }
        if let Some(d) = ms("WFHOST_SLURM_POLL_MAX_MS")? {
            config.max_interval = d.max(config.interval);
        }
        config.source = match std::env::var("WFHOST_SLURM_STATUS").as_deref() {
            Err(_) | Ok("") | Ok("auto") => None,
            Ok("sacct") => Some(StatusSource::Sacct),
            Ok("squeue") => Some(StatusSource::Squeue),
            Ok(other) => {
                return Err(format!(
                    "WFHOST_SLURM_STATUS=`{other}`: use `sacct`, `squeue` or `auto`"
                ));
            }
        };
        Ok(config)
    }
}

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobEnd {
    /// Slurm's state (`COMPLETED`, `FAILED`, `TIMEOUT`, `CANCELLED`, …),
    /// or `UNKNOWN` when neither Slurm nor a marker can tell.
    pub state: String,
    /// Slurm's `exit:signal`.
    pub exit_code: Option<String>,
}

/// What a query says of one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub state: String,
    pub exit_code: Option<String>,
}

/// The cluster facts the board needs, from `scontrol show config`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterConfig {
    pub accounting: bool,
    pub min_job_age: Option<Duration>,
    pub max_array_size: Option<u32>,
}

impl ClusterConfig {
    /// Parse `scontrol show config`.
    pub fn parse(text: &str) -> ClusterConfig {
        let value = |key: &str| {
            text.lines().find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == key).then(|| v.trim().to_string())
            })
        };
        ClusterConfig {
            accounting: value("AccountingStorageType")
                .is_some_and(|v| !v.is_empty() && v != "accounting_storage/none" && v != "(null)"),
            min_job_age: value("MinJobAge")
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
                .map(Duration::from_secs),
            max_array_size: value("MaxArraySize").and_then(|v| v.parse().ok()),
        }
    }

    /// A warning when `MinJobAge` is so short that the controller may
    /// forget a job between rounds.
    pub fn min_job_age_warning(&self, poll: &PollConfig) -> Option<String> {
        let age = self.min_job_age?;
        (age < poll.max_interval * 3).then(|| {
            format!(
                "Slurm's MinJobAge ({} s) is shorter than 3 × wfhost's status polling interval ({} ms): finished jobs may be forgotten between rounds; wfhost then reads them from {}",
                age.as_secs(),
                poll.max_interval.as_millis(),
                if self.accounting { "sacct" } else { "their marker files" }
            )
        })
    }
}

struct Entry {
    bundle: PathBuf,
    end: Option<JobEnd>,
    /// When a query last showed the job active (or it was added).
    seen_active: Instant,
    /// When the job's marker was first found while Slurm still showed it
    /// active or not at all.
    marker_since: Option<Instant>,
}

#[derive(Default)]
struct Rounds {
    last: Option<Instant>,
    interval: Option<Duration>,
}

/// The Slurm jobs one run waits for (see the module docs).
pub struct JobBoard {
    config: PollConfig,
    jobs: Mutex<HashMap<String, Entry>>,
    rounds: Mutex<Rounds>,
    polling: tokio::sync::Mutex<()>,
    changed: tokio::sync::Notify,
    cluster: tokio::sync::OnceCell<ClusterConfig>,
    /// Status queries issued (one per round).
    queries: AtomicU64,
    /// The oldest job's submission, for `sacct --starttime`.
    since: Mutex<Option<std::time::SystemTime>>,
}

impl std::fmt::Debug for JobBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobBoard")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Default for JobBoard {
    fn default() -> Self {
        JobBoard::new(PollConfig::default())
    }
}

/// How long a marker may disagree with `sacct` before it is believed.
const MARKER_GRACE: Duration = Duration::from_secs(20);
/// How long a job may be missing from every answer before it is given up
/// as `UNKNOWN`.
const MISSING_GRACE: Duration = Duration::from_secs(60);

impl JobBoard {
    pub fn new(config: PollConfig) -> JobBoard {
        JobBoard {
            config,
            jobs: Mutex::new(HashMap::new()),
            rounds: Mutex::new(Rounds::default()),
            polling: tokio::sync::Mutex::new(()),
            changed: tokio::sync::Notify::new(),
            cluster: tokio::sync::OnceCell::new(),
            queries: AtomicU64::new(0),
            since: Mutex::new(None),
        }
    }

    pub fn config(&self) -> &PollConfig {
        &self.config
    }

    /// Status queries issued so far (one per round, whatever the number of
    /// jobs).
    pub fn queries(&self) -> u64 {
        self.queries.load(Ordering::Relaxed)
    }

    /// The cluster's configuration, asked once.
    pub async fn cluster(&self, slurm: &super::SlurmExecutor) -> &ClusterConfig {
        self.cluster
            .get_or_init(|| async {
                let args = ["show".to_string(), "config".to_string()];
                let config = match slurm.slurm("scontrol", &args).await {
                    Ok(out) if out.ok => ClusterConfig::parse(&out.stdout),
                    _ => ClusterConfig::default(),
                };
                if let Some(warning) = config.min_job_age_warning(&self.config) {
                    tracing::warn!("warning: {warning}");
                }
                config
            })
            .await
    }

    /// Wait for `key` (a job id, or `<array>_<task>`) from now on.
    /// `bundle` holds its marker (`slurm/job.end`).
    pub fn track(&self, key: &str, bundle: PathBuf) {
        let mut since = self.since.lock().expect("board lock");
        if since.is_none() {
            *since = Some(std::time::SystemTime::now());
        }
        drop(since);
        self.jobs.lock().expect("board lock").insert(
            key.to_string(),
            Entry {
                bundle,
                end: None,
                seen_active: Instant::now(),
                marker_since: None,
            },
        );
        // A new job: the next round comes soon again.
        self.rounds.lock().expect("board lock").interval = None;
    }

    /// Forget `key` (its block has what it needs).
    pub fn forget(&self, key: &str) {
        self.jobs.lock().expect("board lock").remove(key);
    }

    fn end_of(&self, key: &str) -> Option<JobEnd> {
        self.jobs
            .lock()
            .expect("board lock")
            .get(key)
            .and_then(|e| e.end.clone())
    }

    /// Wait until `key` ended; `None` when `deadline` passed first.
    pub async fn wait(
        &self,
        slurm: &super::SlurmExecutor,
        key: &str,
        deadline: Option<Instant>,
    ) -> Option<JobEnd> {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(end) = self.end_of(key) {
                return Some(end);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return None;
            }
            let wait = self.until_due();
            if wait.is_zero()
                && let Ok(_turn) = self.polling.try_lock()
                && self.until_due().is_zero()
            {
                self.round(slurm).await;
                continue;
            }
            let mut sleep = wait.max(Duration::from_millis(5));
            if let Some(d) = deadline {
                sleep = sleep.min(d.saturating_duration_since(Instant::now()));
            }
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep(sleep) => {}
            }
        }
    }

    /// How long until the next round is due.
    fn until_due(&self) -> Duration {
        let rounds = self.rounds.lock().expect("board lock");
        let interval = rounds.interval.unwrap_or(self.config.interval);
        match rounds.last {
            None => Duration::ZERO,
            Some(last) => interval.saturating_sub(last.elapsed()),
        }
    }

    /// One round: one query for every job still running.
    async fn round(&self, slurm: &super::SlurmExecutor) {
        let keys: Vec<String> = self
            .jobs
            .lock()
            .expect("board lock")
            .iter()
            .filter(|(_, e)| e.end.is_none())
            .map(|(k, _)| k.clone())
            .collect();
        let mut changed = false;
        if !keys.is_empty() {
            let cluster = self.cluster(slurm).await.clone();
            let source = self.config.source.unwrap_or(if cluster.accounting {
                StatusSource::Sacct
            } else {
                StatusSource::Squeue
            });
            self.queries.fetch_add(1, Ordering::Relaxed);
            let mut answer = match source {
                StatusSource::Sacct => self.ask_sacct(slurm, &keys).await,
                StatusSource::Squeue => ask_squeue(slurm, &keys).await,
            };
            let mut source = source;
            if answer.is_none() && source == StatusSource::Sacct {
                // sacct failing (slurmdbd down): the queue and the markers.
                self.queries.fetch_add(1, Ordering::Relaxed);
                answer = ask_squeue(slurm, &keys).await;
                source = StatusSource::Squeue;
            }
            if let Some(seen) = answer {
                changed = self.settle(&keys, &seen, source);
                for key in &keys {
                    if let Some(s) = seen.get(key).filter(|s| super::is_active(&s.state)) {
                        slurm.tell(key, &s.state);
                    }
                }
            }
        }
        let mut rounds = self.rounds.lock().expect("board lock");
        rounds.last = Some(Instant::now());
        let current = rounds.interval.unwrap_or(self.config.interval);
        rounds.interval = Some(if changed {
            self.config.interval
        } else {
            current.mul_f64(1.5).min(self.config.max_interval)
        });
        drop(rounds);
        self.changed.notify_waiters();
    }

    /// Apply one answer; returns whether any job ended.
    fn settle(&self, keys: &[String], seen: &HashMap<String, Seen>, source: StatusSource) -> bool {
        let mut jobs = self.jobs.lock().expect("board lock");
        let mut changed = false;
        for key in keys {
            let Some(entry) = jobs.get_mut(key) else {
                continue;
            };
            let marker = read_marker(&entry.bundle);
            let now = Instant::now();
            let end = match seen.get(key) {
                Some(s) if !super::is_active(&s.state) => Some(JobEnd {
                    state: s.state.clone(),
                    exit_code: s.exit_code.clone().or_else(|| marker.clone()),
                }),
                Some(_) => {
                    entry.seen_active = now;
                    // sacct may lag behind the job; its marker does not.
                    self.believe_marker(entry, &marker, now, source)
                }
                None if source == StatusSource::Squeue => match &marker {
                    // Gone from the controller: the marker tells.
                    Some(code) => Some(from_marker(code)),
                    None if now.duration_since(entry.seen_active) > Duration::from_secs(2) => {
                        Some(JobEnd {
                            state: "UNKNOWN".into(),
                            exit_code: None,
                        })
                    }
                    None => None,
                },
                None => match self.believe_marker(entry, &marker, now, source) {
                    Some(end) => Some(end),
                    None if now.duration_since(entry.seen_active) > MISSING_GRACE => Some(JobEnd {
                        state: "UNKNOWN".into(),
                        exit_code: None,
                    }),
                    None => None,
                },
            };
            if let Some(end) = end {
                entry.end = Some(end);
                changed = true;
            }
        }
        changed
    }

    fn believe_marker(
        &self,
        entry: &mut Entry,
        marker: &Option<String>,
        now: Instant,
        source: StatusSource,
    ) -> Option<JobEnd> {
        let code = marker.as_ref()?;
        let since = *entry.marker_since.get_or_insert(now);
        let grace = match source {
            StatusSource::Sacct => MARKER_GRACE,
            StatusSource::Squeue => Duration::from_secs(5),
        };
        (now.duration_since(since) > grace).then(|| from_marker(code))
    }

    async fn ask_sacct(
        &self,
        slurm: &super::SlurmExecutor,
        keys: &[String],
    ) -> Option<HashMap<String, Seen>> {
        let since = self
            .since
            .lock()
            .expect("board lock")
            .unwrap_or_else(std::time::SystemTime::now);
        let start = since
            .checked_sub(Duration::from_secs(300))
            .unwrap_or(since)
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let ids: BTreeSet<&str> = keys.iter().map(|k| base_id(k)).collect();
        let args = vec![
            "-X".to_string(),
            "--parsable2".to_string(),
            "--noheader".to_string(),
            format!("--starttime={}", sacct_time(start)),
            "--format=JobID,JobIDRaw,State,ExitCode".to_string(),
            "-j".to_string(),
            ids.into_iter().collect::<Vec<_>>().join(","),
        ];
        let out = slurm.slurm("sacct", &args).await.ok().filter(|o| o.ok)?;
        Some(parse_sacct(&out.stdout))
    }
}

async fn ask_squeue(
    slurm: &super::SlurmExecutor,
    keys: &[String],
) -> Option<HashMap<String, Seen>> {
    let ids: BTreeSet<&str> = keys.iter().map(|k| base_id(k)).collect();
    let args = vec![
        "-h".to_string(),
        "-r".to_string(),
        "-t".to_string(),
        "all".to_string(),
        "-o".to_string(),
        "%i|%T".to_string(),
        "-j".to_string(),
        ids.into_iter().collect::<Vec<_>>().join(","),
    ];
    let out = slurm.slurm("squeue", &args).await.ok()?;
    if !out.ok {
        // Asked about jobs the controller has all forgotten, squeue fails
        // (`Invalid job id specified`): none of them is queued.
        return out.stderr.contains("Invalid job id").then(HashMap::new);
    }
    Some(parse_squeue(&out.stdout))
}

/// The job id of `key` (`<array>_<task>` → `<array>`).
fn base_id(key: &str) -> &str {
    key.split('_').next().unwrap_or(key)
}

/// Seconds since the epoch as `sacct --starttime` takes them
/// (`YYYY-MM-DDTHH:MM:SS`, UTC).
fn sacct_time(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Howard Hinnant's days → civil date.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `sacct -X --parsable2 --format=JobID,JobIDRaw,State,ExitCode` lines.
///
/// sacct (before 23.02 it has no `--array`) folds the tasks of an array
/// that have not started yet into one record, `12_[3-9]` (or
/// `12_[3,5-9%4]` with a limit): those tasks are expanded and take that
/// record's state (`PENDING`, or `CANCELLED` when the array was cancelled
/// before they started), unless a task has a record of its own (the folded
/// range lags behind the tasks that started). Left out, a task pending for
/// longer than a minute (`MISSING_GRACE`) would be given up as `UNKNOWN` while it
/// still waits for its turn: every array larger than what the cluster runs
/// in a minute.
pub fn parse_sacct(text: &str) -> HashMap<String, Seen> {
    let mut seen = HashMap::new();
    let mut folded = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.trim().split('|').collect();
        let [id, _raw, state, exit, ..] = fields.as_slice() else {
            continue;
        };
        if id.is_empty() {
            continue;
        }
        // `CANCELLED by 0`.
        let state = state.split_whitespace().next().unwrap_or(state);
        let record = Seen {
            state: state.to_string(),
            exit_code: (!exit.is_empty()).then(|| exit.to_string()),
        };
        if id.contains('[') {
            folded.push((id.to_string(), record));
        } else {
            seen.insert(id.to_string(), record);
        }
    }
    for (id, record) in folded {
        for task in folded_tasks(&id) {
            seen.entry(task).or_insert_with(|| Seen {
                state: record.state.clone(),
                // Tasks that never ran have no exit code of their own.
                exit_code: None,
            });
        }
    }
    seen
}

/// The tasks of a folded array record: `12_[3,5-7%4]` → `12_3`, `12_5`,
/// `12_6`, `12_7`. Nothing for what it cannot read.
fn folded_tasks(id: &str) -> Vec<String> {
    let Some((base, rest)) = id.split_once("_[") else {
        return Vec::new();
    };
    let Some(ranges) = rest.strip_suffix(']') else {
        return Vec::new();
    };
    // The array's limit of tasks at once.
    let ranges = ranges.split('%').next().unwrap_or(ranges);
    let mut tasks = Vec::new();
    for part in ranges.split(',') {
        let (range, step) = match part.split_once(':') {
            Some((r, s)) => (r, s.parse::<usize>().ok().filter(|s| *s > 0)),
            None => (part, Some(1)),
        };
        let Some(step) = step else {
            continue;
        };
        let (first, last) = match range.split_once('-') {
            Some((a, b)) => (a.parse::<u64>(), b.parse::<u64>()),
            None => (range.parse::<u64>(), range.parse::<u64>()),
        };
        let (Ok(first), Ok(last)) = (first, last) else {
            continue;
        };
        // MaxArraySize is at most 4,000,001.
        if last < first || last - first > 4_000_000 {
            continue;
        }
        tasks.extend((first..=last).step_by(step).map(|t| format!("{base}_{t}")));
    }
    tasks
}

/// `squeue -h -r -t all -o %i|%T` lines.
pub fn parse_squeue(text: &str) -> HashMap<String, Seen> {
    text.lines()
        .filter_map(|l| l.trim().split_once('|'))
        .filter(|(id, _)| !id.contains('['))
        .map(|(id, state)| {
            (
                id.to_string(),
                Seen {
                    state: state.trim().to_string(),
                    exit_code: None,
                },
            )
        })
        .collect()
}

/// The job script's own record of how it ended: `slurm/job.end` holds
/// `<exit code> <ms>`.
fn read_marker(bundle: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(bundle.join("slurm/job.end")).ok()?;
    let code: i32 = text.split_whitespace().next()?.parse().ok()?;
    Some(format!("{code}:0"))
}

fn from_marker(code: &str) -> JobEnd {
    JobEnd {
        state: if code == "0:0" { "COMPLETED" } else { "FAILED" }.to_string(),
        exit_code: Some(code.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_config_is_read_from_scontrol() {
        let text = "AccountingStorageType   = accounting_storage/slurmdbd\nMaxArraySize            = 1001\nMinJobAge               = 10 sec\n";
        let c = ClusterConfig::parse(text);
        assert_eq!(
            c,
            ClusterConfig {
                accounting: true,
                min_job_age: Some(Duration::from_secs(10)),
                max_array_size: Some(1001)
            }
        );
        let none = ClusterConfig::parse("AccountingStorageType   = accounting_storage/none\n");
        assert!(!none.accounting);
        // 10 s against 3 × 2 s: fine; against 3 × 5 s: a warning.
        let mut poll = PollConfig::default();
        assert_eq!(c.min_job_age_warning(&poll), None);
        poll.max_interval = Duration::from_secs(5);
        let warning = c.min_job_age_warning(&poll).unwrap();
        assert!(warning.contains("MinJobAge (10 s)"), "{warning}");
    }

    #[test]
    fn answers_are_parsed_by_job_and_task() {
        let sacct = "73|73|COMPLETED|0:0\n74_0|75|FAILED|3:0\n74_1|76|CANCELLED by 0|0:15\n74_[2-63]|74|PENDING|0:0\n";
        let seen = parse_sacct(sacct);
        assert_eq!(seen.len(), 3 + 62);
        assert_eq!(seen["74_0"].exit_code.as_deref(), Some("3:0"));
        assert_eq!(seen["74_1"].state, "CANCELLED");
        // Tasks not started yet are folded into one record: still pending,
        // not missing.
        assert_eq!(seen["74_2"].state, "PENDING");
        assert_eq!(seen["74_63"].state, "PENDING");
        assert!(!seen.contains_key("74_64"));
        let squeue = parse_squeue("74_2|RUNNING\n74_[3-9]|PENDING\n80|COMPLETED\n");
        assert_eq!(squeue.len(), 2);
        assert_eq!(squeue["74_2"].state, "RUNNING");
        assert_eq!(base_id("74_2"), "74");
        assert_eq!(base_id("80"), "80");
    }

    #[test]
    fn folded_array_records_stand_for_their_tasks() {
        assert_eq!(
            folded_tasks("12_[3,5-7%4]"),
            ["12_3", "12_5", "12_6", "12_7"]
        );
        assert_eq!(folded_tasks("12_[0-6:3]"), ["12_0", "12_3", "12_6"]);
        assert!(folded_tasks("12_[x]").is_empty());
        assert!(folded_tasks("12").is_empty());
        // The folded range lags behind the tasks that started: a task's
        // own record wins, whatever the order of the lines.
        let seen = parse_sacct("402_[0-9]|402|PENDING|0:0\n402_0|403|RUNNING|0:0\n");
        assert_eq!(seen.len(), 10);
        assert_eq!(seen["402_0"].state, "RUNNING");
        assert_eq!(seen["402_9"].state, "PENDING");
        // An array cancelled before all its tasks started.
        let seen =
            parse_sacct("447_0|448|CANCELLED by 0|0:15\n447_[2-19]|447|CANCELLED by 0|0:0\n");
        assert_eq!(seen["447_5"].state, "CANCELLED");
        assert_eq!(seen["447_5"].exit_code, None);
    }

    #[test]
    fn a_pending_array_task_is_not_given_up() {
        let dir = tempfile::tempdir().unwrap();
        let board = JobBoard::default();
        board.track("74_900", dir.path().to_path_buf());
        board
            .jobs
            .lock()
            .unwrap()
            .get_mut("74_900")
            .unwrap()
            .seen_active = Instant::now() - MISSING_GRACE * 2;
        let keys = vec!["74_900".to_string()];
        let seen = parse_sacct("74_0|75|RUNNING|0:0\n74_[1-999]|74|PENDING|0:0\n");
        assert!(!board.settle(&keys, &seen, StatusSource::Sacct));
        assert_eq!(board.end_of("74_900"), None);
    }

    #[test]
    fn sacct_times_are_utc_dates() {
        assert_eq!(sacct_time(0), "1970-01-01T00:00:00");
        assert_eq!(sacct_time(1_795_996_800 + 3_661), "2026-11-30T01:01:01");
    }

    #[test]
    fn jobs_gone_from_the_queue_are_resolved_from_their_markers() {
        let dir = tempfile::tempdir().unwrap();
        let (done, failed, lost) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
        );
        for (b, code) in [(&done, Some("0")), (&failed, Some("3")), (&lost, None)] {
            std::fs::create_dir_all(b.join("slurm")).unwrap();
            if let Some(code) = code {
                std::fs::write(b.join("slurm/job.end"), format!("{code} 1\n")).unwrap();
            }
        }
        let board = JobBoard::default();
        board.track("1", done);
        board.track("2", failed);
        board.track("3", lost);
        let keys: Vec<String> = ["1", "2", "3"].map(String::from).into();
        // Nothing in the queue any more (purged after MinJobAge).
        assert!(board.settle(&keys, &HashMap::new(), StatusSource::Squeue));
        assert_eq!(board.end_of("1").unwrap().state, "COMPLETED");
        assert_eq!(
            board.end_of("2").unwrap(),
            JobEnd {
                state: "FAILED".into(),
                exit_code: Some("3:0".into())
            }
        );
        // No marker yet: given a moment, then UNKNOWN, never waited for
        // forever.
        assert_eq!(board.end_of("3"), None);
        board.jobs.lock().unwrap().get_mut("3").unwrap().seen_active =
            Instant::now() - Duration::from_secs(3);
        board.settle(&keys, &HashMap::new(), StatusSource::Squeue);
        assert_eq!(board.end_of("3").unwrap().state, "UNKNOWN");
    }
}
