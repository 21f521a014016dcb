//! The warnings of the server's background loops (timers, schedules,
//! notifications, lease expiry), which look at the store several times a
//! second: a failure is said when it starts and when it changes, then at
//! most once a minute while it lasts (with how many were held back), and
//! its end is said once — a database that is down is a few lines in the
//! log, not four a second.

use std::time::{Duration, Instant};

/// How often the same failure is said again while it lasts.
const REPEAT_EVERY: Duration = Duration::from_secs(60);

/// One loop's warnings.
pub(crate) struct LoopWarnings {
    what: &'static str,
    /// The failure said last, when, and how many of it were held back.
    last: Option<(String, Instant, u64)>,
}

impl LoopWarnings {
    pub(crate) fn new(what: &'static str) -> LoopWarnings {
        LoopWarnings { what, last: None }
    }

    /// The loop's look failed with `message`.
    pub(crate) fn failed(&mut self, message: impl std::fmt::Display) {
        let message = message.to_string();
        match &mut self.last {
            Some((said, at, held)) if *said == message && at.elapsed() < REPEAT_EVERY => {
                *held += 1;
            }
            Some((said, at, held)) if *said == message => {
                tracing::warn!("{}: {message} (and {} times since)", self.what, *held);
                (*at, *held) = (Instant::now(), 0);
            }
            _ => {
                tracing::warn!("{}: {message}", self.what);
                self.last = Some((message, Instant::now(), 0));
            }
        }
    }

    /// The loop's look worked.
    pub(crate) fn worked(&mut self) {
        if self.last.take().is_some() {
            tracing::info!("{}: working again", self.what);
        }
    }

    /// Whether the last look failed (for tests).
    #[cfg(test)]
    fn failing(&self) -> bool {
        self.last.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lasting_failure_is_said_once_and_its_end_once() {
        let mut w = LoopWarnings::new("timers");
        w.failed("store unavailable");
        for _ in 0..100 {
            w.failed("store unavailable");
        }
        assert_eq!(w.last.as_ref().map(|l| l.2), Some(100), "held back");
        w.failed("another failure");
        assert_eq!(
            w.last.as_ref().map(|l| l.2),
            Some(0),
            "a new failure is said"
        );
        w.worked();
        assert!(!w.failing());
        w.worked();
    }
}
