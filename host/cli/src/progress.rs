//! The live status line under a run's output on a terminal: the block
//! running, how long it and the run have taken, a parallel block's lanes
//! done, a Slurm block's job and its state.
//!
//! [`Status`] is what is known, fed from the run's events (and the Slurm
//! executor's job updates); [`render`] turns it into the line, purely.
//! [`Live`] draws it with `indicatif`, redrawing a few times a second so the
//! clocks move between events, and prints the run's event lines above it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use wfhost_core::run::event::Event;
use wfhost_core::text::escape;

/// What the status line knows.
#[derive(Debug, Clone)]
pub struct Status {
    run_started: Instant,
    block: Option<Running>,
}

#[derive(Debug, Clone)]
struct Running {
    step: u64,
    name: String,
    started: Instant,
    /// Lanes done and in all, for a parallel block.
    lanes: Option<(usize, usize)>,
    /// Slurm job id and state, for a Slurm block.
    job: Option<(String, String)>,
}

impl Status {
    pub fn new(now: Instant) -> Status {
        Status {
            run_started: now,
            block: None,
        }
    }

    /// Take `event` into account, seen at `now`.
    pub fn observe(&mut self, event: &Event, now: Instant) {
        match event {
            Event::BlockStarted {
                step, node, block, ..
            } => {
                self.block = Some(Running {
                    step: *step,
                    name: format!("{node}.{block}"),
                    started: now,
                    lanes: None,
                    job: None,
                });
            }
            Event::LanesStarted { lanes, .. } => {
                if let Some(b) = &mut self.block {
                    b.lanes = Some((0, lanes.len()));
                }
            }
            Event::LaneCompleted { .. } => {
                if let Some((done, _)) = self.block.as_mut().and_then(|b| b.lanes.as_mut()) {
                    *done += 1;
                }
            }
            Event::BlockCompleted { .. } | Event::FanInWaiting { .. } => self.block = None,
            _ => {}
        }
    }

    /// The running block's Slurm job is `job_id`, in `state`.
    pub fn slurm_job(&mut self, job_id: &str, state: &str) {
        if let Some(b) = &mut self.block {
            b.job = Some((job_id.to_string(), state.to_string()));
        }
    }
}

/// `4.2s`, `3m 05s`, `1h 02m`.
pub fn elapsed(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0..60 => format!("{:.1}s", d.as_secs_f64()),
        60..3600 => format!("{}m {:02}s", secs / 60, secs % 60),
        _ => format!("{}h {:02}m", secs / 3600, secs % 3600 / 60),
    }
}

/// The status line for `status` at `now`.
pub fn render(status: &Status, now: Instant) -> String {
    let run = elapsed(now.saturating_duration_since(status.run_started));
    let Some(b) = &status.block else {
        return format!("run {run}");
    };
    let mut line = format!(
        "[{}] {} {}",
        b.step,
        escape(&b.name),
        elapsed(now.saturating_duration_since(b.started))
    );
    if let Some((done, all)) = b.lanes {
        line.push_str(&format!(" · lanes {done}/{all} done"));
    }
    if let Some((job, state)) = &b.job {
        line.push_str(&format!(" · Slurm job {} {}", escape(job), escape(state)));
    }
    line.push_str(&format!(" · run {run}"));
    line
}

/// The latest Slurm job update (job id, state) not yet on the line.
static SLURM_JOB: Mutex<Option<(String, String)>> = Mutex::new(None);

/// What the runtime tells of the Slurm jobs it polls: kept for the status
/// line to pick up at its next redraw.
pub fn slurm_watcher() -> wfhost_exec::slurm::JobWatcher {
    wfhost_exec::slurm::JobWatcher(Arc::new(|job: &str, state: &str| {
        *SLURM_JOB.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((job.to_string(), state.to_string()));
    }))
}

/// The status line on the terminal.
pub struct Live {
    bar: ProgressBar,
    status: Arc<Mutex<Status>>,
}

impl Live {
    /// Start drawing on standard error.
    pub fn start() -> Live {
        let status = Arc::new(Mutex::new(Status::new(Instant::now())));
        let shown = Arc::clone(&status);
        let style = ProgressStyle::with_template("{spinner} {status}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner())
            .with_key(
                "status",
                move |_: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let mut status = shown.lock().unwrap_or_else(PoisonError::into_inner);
                    let job = SLURM_JOB
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .take();
                    if let Some((id, state)) = job {
                        status.slurm_job(&id, &state);
                    }
                    let _ = w.write_str(&render(&status, Instant::now()));
                },
            );
        let bar =
            ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()).with_style(style);
        bar.enable_steady_tick(Duration::from_millis(200));
        Live { bar, status }
    }

    pub fn observe(&self, event: &Event) {
        if matches!(event, Event::BlockStarted { .. }) {
            // An update left over from the block before is not this one's.
            SLURM_JOB
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
        }
        self.status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .observe(event, Instant::now());
        self.bar.tick();
    }

    /// A printer of lines above the status line, for another thread.
    pub fn printer(&self) -> crate::live_output::Print {
        let bar = self.bar.clone();
        std::sync::Arc::new(move |lines: &[String]| {
            if lines.is_empty() {
                return;
            }
            bar.suspend(|| {
                for line in lines {
                    println!("{line}");
                }
            });
        })
    }

    /// Print `lines` on standard output above the status line.
    pub fn print(&self, lines: &[String]) {
        if lines.is_empty() {
            return;
        }
        self.bar.suspend(|| {
            for line in lines {
                println!("{line}");
            }
        });
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started(step: u64, block: &str) -> Event {
        Event::BlockStarted {
            step,
            node: "main".into(),
            block: block.into(),
            attempt: 1,
        }
    }

    #[test]
    fn renders_block_lanes_job_and_clocks() {
        let t0 = Instant::now();
        let mut status = Status::new(t0);
        assert_eq!(render(&status, t0 + Duration::from_millis(300)), "run 0.3s");
        status.observe(&started(4, "dev"), t0 + Duration::from_secs(2));
        status.observe(
            &Event::LanesStarted {
                step: 4,
                lanes: vec!["a".into(), "b".into(), "c".into()],
                merge_strategy: Default::default(),
                over: None,
            },
            t0 + Duration::from_secs(2),
        );
        let lane = Event::LaneCompleted {
            step: 4,
            lane: "b".into(),
            signal: "SIGNAL:SUCCESS".into(),
            changed: vec![],
            failure: None,
            summary: None,
            payload: vec![],
            statistics: Default::default(),
            duration_us: 1,
            log: vec![],
        };
        status.observe(&lane, t0 + Duration::from_secs(3));
        assert_eq!(
            render(&status, t0 + Duration::from_secs(65)),
            "[4] main.dev 1m 03s · lanes 1/3 done · run 1m 05s"
        );
        status.observe(&started(7, "hpc"), t0 + Duration::from_secs(70));
        status.slurm_job("1234", "PENDING");
        assert_eq!(
            render(&status, t0 + Duration::from_millis(71_500)),
            "[7] main.hpc 1.5s · Slurm job 1234 PENDING · run 1m 11s"
        );
    }

    #[test]
    fn clocks_read_at_a_glance() {
        assert_eq!(elapsed(Duration::from_millis(4_240)), "4.2s");
        assert_eq!(elapsed(Duration::from_secs(185)), "3m 05s");
        assert_eq!(elapsed(Duration::from_secs(3_720)), "1h 02m");
    }

    #[test]
    fn a_job_state_from_outside_is_escaped() {
        let t0 = Instant::now();
        let mut status = Status::new(t0);
        status.observe(&started(0, "x"), t0);
        status.slurm_job("9", "RUN\x1b[2J");
        assert!(render(&status, t0).contains("RUN\\e[2J"));
    }
}
