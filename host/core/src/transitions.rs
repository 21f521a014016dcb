//! Transition resolution: exact signal, else `SIGNAL:FAIL_DEFAULT`, else none.

use crate::manifest::Transition;

/// The reserved fallback signal (seed 004, step E).
pub const FAIL_DEFAULT: &str = "SIGNAL:FAIL_DEFAULT";
/// The signal that replaces a worker's own when its output fails the
/// block's validation schema (seed 004, step C).
pub const VALIDATION_FAIL: &str = "SIGNAL:VALIDATION_FAIL";
/// The signal of a block whose worker failed (trap, error, timeout, limits).
pub const WORKER_ERROR: &str = "SIGNAL:WORKER_ERROR";
/// The signal a gating block sees when a human approved its gate.
pub const GATE_APPROVED: &str = "SIGNAL:GATE_APPROVED";
/// The signal a gating block sees when a human requested changes at its
/// gate; the requested changes are pushed onto the payload.
pub const GATE_CHANGES_REQUESTED: &str = "SIGNAL:GATE_CHANGES_REQUESTED";

/// The signal of an agent that needs a human decision (seed 001's
/// `NEEDS_DECISION`). A block without its own transition for it pauses
/// the run at a gate whose question is the payload's last
/// `DECISION_REQUEST` segment.
pub const NEEDS_DECISION: &str = "SIGNAL:NEEDS_DECISION";
/// The payload segment kind that carries a `NEEDS_DECISION` question.
pub const DECISION_REQUEST: &str = "DECISION_REQUEST";

/// How a transition was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution<'a> {
    Exact(&'a Transition),
    Fallback(&'a Transition),
}

impl<'a> Resolution<'a> {
    pub fn transition(self) -> &'a Transition {
        match self {
            Resolution::Exact(t) | Resolution::Fallback(t) => t,
        }
    }
}

/// Find the transition for `signal`: the first exact match, else the first
/// `SIGNAL:FAIL_DEFAULT` entry, else `None`.
pub fn resolve<'a>(transitions: &'a [Transition], signal: &str) -> Option<Resolution<'a>> {
    if let Some(t) = transitions.iter().find(|t| t.on_signal == signal) {
        return Some(Resolution::Exact(t));
    }
    transitions
        .iter()
        .find(|t| t.on_signal == FAIL_DEFAULT)
        .map(Resolution::Fallback)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(on: &str, action: &str) -> Transition {
        Transition {
            on_signal: on.into(),
            action: action.into(),
        }
    }

    #[test]
    fn exact_match_wins_over_fallback() {
        let ts = [t(FAIL_DEFAULT, "FAIL"), t("SIGNAL:OK", "END")];
        assert_eq!(resolve(&ts, "SIGNAL:OK"), Some(Resolution::Exact(&ts[1])));
    }

    #[test]
    fn falls_back_to_fail_default() {
        let ts = [t("SIGNAL:OK", "END"), t(FAIL_DEFAULT, "JUMP:fix")];
        assert_eq!(
            resolve(&ts, "SIGNAL:NOPE"),
            Some(Resolution::Fallback(&ts[1]))
        );
    }

    #[test]
    fn none_without_match_or_fallback() {
        let ts = [t("SIGNAL:OK", "END")];
        assert_eq!(resolve(&ts, "SIGNAL:NOPE"), None);
        assert_eq!(resolve(&[], "SIGNAL:OK"), None);
    }

    #[test]
    fn first_exact_match_is_used() {
        let ts = [t("SIGNAL:OK", "END"), t("SIGNAL:OK", "FAIL")];
        assert_eq!(
            resolve(&ts, "SIGNAL:OK").unwrap().transition().action,
            "END"
        );
    }
}
