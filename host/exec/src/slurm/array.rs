//! The lanes of a parallel block as one Slurm job array.
//!
//! Before a parallel block's lanes start, the host tells the batcher which
//! lanes to expect ([`ArrayBatcher::expect`]). Each lane's Slurm work is
//! checked and written out as usual (its own `slurm/job.sh` in its own
//! bundle), then held until every expected lane has either submitted or
//! finished without Slurm work ([`ArrayBatcher::lane_done`]); then all of
//! them go in **one** `sbatch --array=0-(N-1)[%limit]` whose task *i* runs
//! lane *i*'s script. Lanes with different Slurm options form one array
//! per set of options, and an array never exceeds the cluster's
//! `MaxArraySize`. The lanes expected are waited for while lanes keep
//! arriving; a lane that comes late (after no lane arrived for
//! [`GATHER`], or a retry) is submitted alone. A fan-out of more lanes
//! than the host runs at once is expected window by window: the lanes
//! that start as others finish go in further arrays. Slurm's log of task *i* (`%A_%a.log` in the array's
//! directory) is copied into lane *i*'s bundle as `slurm/job.log`.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::oneshot;

use super::{Prepared, SlurmExecutor, SlurmOptions, SubmittedJob, prepare, sbatch_args, sh_quote};
use crate::{ExecError, ExecRequest};

/// How long the first lane of an array waits for the others before what
/// has arrived is submitted.
pub const GATHER: Duration = Duration::from_secs(10);

/// `MaxArraySize` when the cluster does not say.
const DEFAULT_MAX_ARRAY_SIZE: u32 = 1001;

struct Pending {
    lane: String,
    request: ExecRequest,
    options: SlurmOptions,
    prepared: Prepared,
    reply: oneshot::Sender<Result<SubmittedJob, ExecError>>,
}

#[derive(Default)]
struct Group {
    expected: BTreeSet<String>,
    limit: Option<u32>,
    pending: Vec<Pending>,
    /// When a lane last arrived: the lanes still expected are waited for
    /// while others keep arriving.
    arrived: Option<std::time::Instant>,
}

/// Lanes waiting to be submitted as arrays, by parallel block.
#[derive(Default)]
pub struct ArrayBatcher {
    groups: Mutex<HashMap<String, Group>>,
    /// Arrays submitted, for cancelling what is left of them.
    arrays: Mutex<Vec<String>>,
    /// `sbatch` calls this batcher made (arrays and lanes alone).
    submissions: AtomicU64,
}

impl std::fmt::Debug for ArrayBatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArrayBatcher").finish_non_exhaustive()
    }
}

fn copy_err(e: &ExecError) -> ExecError {
    match e {
        ExecError::Refused(v) => ExecError::Invalid(v.to_string()),
        ExecError::Invalid(m) => ExecError::Invalid(m.clone()),
        ExecError::Unavailable(m) => ExecError::Unavailable(m.clone()),
        ExecError::Failed(m) => ExecError::Failed(m.clone()),
    }
}

impl ArrayBatcher {
    /// The lanes of parallel block `group` about to run; `limit`: at most
    /// that many of its array's tasks run at once.
    pub fn expect(&self, group: &str, lanes: &[String], limit: Option<u32>) {
        let mut groups = self.groups.lock().expect("batcher lock");
        let g = groups.entry(group.to_string()).or_default();
        g.expected.extend(lanes.iter().cloned());
        g.limit = limit;
    }

    /// `sbatch` calls made so far.
    pub fn submissions(&self) -> u64 {
        self.submissions.load(Ordering::Relaxed)
    }

    /// The arrays submitted so far.
    pub fn arrays(&self) -> Vec<String> {
        self.arrays.lock().expect("batcher lock").clone()
    }

    /// `lane` of `group` finished without (more) Slurm work: the others
    /// stop waiting for it.
    pub async fn lane_done(&self, slurm: &SlurmExecutor, group: &str, lane: &str) {
        let ready = {
            let mut groups = self.groups.lock().expect("batcher lock");
            let Some(g) = groups.get_mut(group) else {
                return;
            };
            g.expected.remove(lane);
            let ready = take_if_complete(g);
            if g.expected.is_empty() && g.pending.is_empty() {
                groups.remove(group);
            }
            ready
        };
        if let Some((pending, limit)) = ready {
            self.flush(slurm, pending, limit).await;
        }
    }

    /// Submit `lane`'s work: with the rest of its group's lanes as an
    /// array when the group expects it, else alone.
    pub async fn submit(
        &self,
        slurm: &SlurmExecutor,
        group: &str,
        lane: &str,
        request: &ExecRequest,
        options: &SlurmOptions,
    ) -> Result<SubmittedJob, ExecError> {
        let prepared = prepare(request, options)?;
        let (tx, rx) = oneshot::channel();
        let joined = {
            let mut groups = self.groups.lock().expect("batcher lock");
            match groups.get_mut(group).filter(|g| g.expected.contains(lane)) {
                Some(g) => {
                    g.expected.remove(lane);
                    g.arrived = Some(std::time::Instant::now());
                    g.pending.push(Pending {
                        lane: lane.to_string(),
                        request: request.clone(),
                        options: options.clone(),
                        prepared,
                        reply: tx,
                    });
                    let ready = take_if_complete(g);
                    if g.expected.is_empty() && g.pending.is_empty() {
                        groups.remove(group);
                    }
                    Ok(ready)
                }
                None => Err(prepared),
            }
        };
        let ready = match joined {
            Ok(ready) => ready,
            Err(prepared) => return self.submit_alone(slurm, request, options, prepared).await,
        };
        if let Some((pending, limit)) = ready {
            self.flush(slurm, pending, limit).await;
        }
        let mut rx = rx;
        loop {
            if let Ok(reply) = tokio::time::timeout(GATHER, &mut rx).await {
                return reply.unwrap_or_else(|_| Err(gone()));
            }
            // Lanes that never came — none arrived for a while: submit
            // what is here. While lanes keep arriving (a thousand lanes'
            // workspaces take a while to make), wait on.
            let taken = {
                let mut groups = self.groups.lock().expect("batcher lock");
                match groups.get_mut(group) {
                    Some(g) if g.arrived.is_some_and(|t| t.elapsed() < GATHER) => continue,
                    Some(g) => {
                        g.expected.clear();
                        Some((std::mem::take(&mut g.pending), g.limit))
                    }
                    None => None,
                }
            };
            if let Some((pending, limit)) = taken
                && !pending.is_empty()
            {
                self.flush(slurm, pending, limit).await;
            }
            return rx.await.unwrap_or_else(|_| Err(gone()));
        }
    }

    async fn submit_alone(
        &self,
        slurm: &SlurmExecutor,
        request: &ExecRequest,
        options: &SlurmOptions,
        prepared: Prepared,
    ) -> Result<SubmittedJob, ExecError> {
        let log = prepared.bundle_dir.join("slurm/job.log");
        let mut args = sbatch_args(request, &prepared.workdir, options, request.deadline);
        args.insert(0, format!("--output={}", no_patterns(&log)));
        args.push(prepared.script.display().to_string());
        self.submissions.fetch_add(1, Ordering::Relaxed);
        match slurm.sbatch(&args).await {
            Ok(job_id) => Ok(SubmittedJob {
                job_id,
                request: request.clone(),
                bundle_dir: prepared.bundle_dir,
                started_ms: prepared.started_ms,
                array_log: None,
            }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&prepared.bundle_dir);
                Err(e)
            }
        }
    }

    /// Submit `pending` as arrays: one per set of options, each within the
    /// cluster's `MaxArraySize`.
    async fn flush(&self, slurm: &SlurmExecutor, pending: Vec<Pending>, limit: Option<u32>) {
        let max = slurm
            .board
            .cluster(slurm)
            .await
            .max_array_size
            .unwrap_or(DEFAULT_MAX_ARRAY_SIZE)
            .max(1) as usize;
        let mut by_options: Vec<(SlurmOptions, Vec<Pending>)> = Vec::new();
        for p in pending {
            match by_options.iter_mut().find(|(o, _)| *o == p.options) {
                Some((_, v)) => v.push(p),
                None => by_options.push((p.options.clone(), vec![p])),
            }
        }
        for (options, mut lanes) in by_options {
            // Lanes over a list are numbered: task i is item i.
            lanes.sort_by(|a, b| {
                (a.lane.parse::<u64>().ok(), &a.lane).cmp(&(b.lane.parse::<u64>().ok(), &b.lane))
            });
            while !lanes.is_empty() {
                let rest = lanes.split_off(lanes.len().min(max));
                let chunk = std::mem::replace(&mut lanes, rest);
                self.submit_array(slurm, &options, chunk, limit).await;
            }
        }
    }

    async fn submit_array(
        &self,
        slurm: &SlurmExecutor,
        options: &SlurmOptions,
        lanes: Vec<Pending>,
        limit: Option<u32>,
    ) {
        let first = &lanes[0];
        let parent = first
            .prepared
            .bundle_dir
            .parent()
            .unwrap_or(&first.prepared.bundle_dir)
            .to_path_buf();
        let dir = crate::unique_bundle_dir(&parent, "slurm-array");
        let written = std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(dir.join("array.sh"), dispatcher(&lanes)));
        if let Err(e) = written {
            let e = ExecError::Failed(format!(
                "cannot write the job array's script in {}: {e}",
                dir.display()
            ));
            return fail(lanes, &e);
        }
        // The array ends by the latest lane's deadline.
        let deadline = lanes.iter().filter_map(|l| l.request.deadline).max();
        let mut args = sbatch_args(&first.request, &first.prepared.workdir, options, deadline);
        let range = match limit {
            Some(n) => format!("--array=0-{}%{n}", lanes.len() - 1),
            None => format!("--array=0-{}", lanes.len() - 1),
        };
        args.insert(0, range);
        let logs = dir.join("%A_%a.log");
        let logs_ok = !dir.display().to_string().contains('%');
        args.insert(
            0,
            format!(
                "--output={}",
                if logs_ok {
                    logs.display().to_string()
                } else {
                    "/dev/null".into()
                }
            ),
        );
        args.push(dir.join("array.sh").display().to_string());
        self.submissions.fetch_add(1, Ordering::Relaxed);
        match slurm.sbatch(&args).await {
            Ok(id) => {
                self.arrays.lock().expect("batcher lock").push(id.clone());
                for (i, lane) in lanes.into_iter().enumerate() {
                    let job = SubmittedJob {
                        job_id: format!("{id}_{i}"),
                        request: lane.request,
                        bundle_dir: lane.prepared.bundle_dir,
                        started_ms: lane.prepared.started_ms,
                        array_log: logs_ok.then(|| dir.join(format!("{id}_{i}.log"))),
                    };
                    let _ = lane.reply.send(Ok(job));
                }
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                fail(lanes, &e);
            }
        }
    }
}

/// Every expected lane has arrived (or left): what to submit.
fn take_if_complete(g: &mut Group) -> Option<(Vec<Pending>, Option<u32>)> {
    (g.expected.is_empty() && !g.pending.is_empty())
        .then(|| (std::mem::take(&mut g.pending), g.limit))
}

fn fail(lanes: Vec<Pending>, e: &ExecError) {
    for lane in lanes {
        let _ = std::fs::remove_dir_all(&lane.prepared.bundle_dir);
        let _ = lane.reply.send(Err(copy_err(e)));
    }
}

fn gone() -> ExecError {
    ExecError::Failed("the job array's submission was abandoned".into())
}

/// `path`, or `/dev/null` when sbatch would read `%` in it as a pattern.
fn no_patterns(path: &Path) -> String {
    let text = path.display().to_string();
    if text.contains('%') {
        "/dev/null".into()
    } else {
        text
    }
}

/// The array's script: task *i* runs lane *i*'s own script.
fn dispatcher(lanes: &[Pending]) -> String {
    let mut s = String::from(
        "#!/bin/sh\n# Written by wfhost: task i of this job array runs lane i's batch script.\ncase \"$SLURM_ARRAY_TASK_ID\" in\n",
    );
    for (i, lane) in lanes.iter().enumerate() {
        s.push_str(&format!(
            "{i}) exec /bin/sh {} ;; # lane {}\n",
            sh_quote(&lane.prepared.script.display().to_string()),
            lane.lane.replace('\n', " ")
        ));
    }
    s.push_str(
        "*) echo \"wfhost: no lane for array task $SLURM_ARRAY_TASK_ID\" >&2; exit 2 ;;\nesac\n",
    );
    s
}

/// The key of a parallel block's lanes in a run.
pub fn group_key(run_id: &str, step: u64, node: &str, block: &str) -> String {
    format!("{run_id}/{step}/{node}.{block}")
}
