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
/// What a mandatory gate's cancelled decision leads to. Never looked up in
/// a block's transitions: the run ends BLOCKED
/// ([`crate::run::event::MANDATORY_DECISION_MISSING`]).
pub const GATE_CANCELLED: &str = "SIGNAL:GATE_CANCELLED";

/// The signal of an agent that needs a human decision (seed 001's
/// `NEEDS_DECISION`). A block without its own transition for it pauses
/// the run at a gate whose question is the payload's last
/// `DECISION_REQUEST` segment.
pub const NEEDS_DECISION: &str = "SIGNAL:NEEDS_DECISION";
/// A block could not start its work: an artifact gate failed, or (from an
/// agent) the agent reported `BLOCKED`.
pub const BLOCKED: &str = "SIGNAL:BLOCKED";

/// The signal of a block that did what it was for.
pub const SUCCESS: &str = "SIGNAL:SUCCESS";
/// The payload segment kind that carries a `NEEDS_DECISION` question.
pub const DECISION_REQUEST: &str = "DECISION_REQUEST";
/// The payload segment kind of one question of a `NEEDS_DECISION`, pushed
/// after its `DECISION_REQUEST`: the gate then asks each question under its
/// own decision id ([`crate::run::questions`]).
pub const DECISION_QUESTION: &str = "DECISION_QUESTION";
/// Like [`DECISION_QUESTION`], for a question raised as a security concern:
/// it is never cancelled for want of an answer, only answered or
/// explicitly deferred.
pub const SECURITY_QUESTION: &str = "SECURITY_QUESTION";

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

/// The longest signal a worker may emit, in bytes. A longer one fails the
/// block: signals are names, stored with every step and shown to people.
pub const MAX_SIGNAL_BYTES: usize = 256;

/// Whether `signal` is one a worker may emit: non-empty, at most
/// [`MAX_SIGNAL_BYTES`], no control characters (they could rewrite a
/// terminal or forge report lines).
pub fn check_signal(signal: &str) -> Result<(), String> {
    if signal.is_empty() {
        return Err("the worker returned an empty signal".into());
    }
    if signal.len() > MAX_SIGNAL_BYTES {
        return Err(format!(
            "the worker returned a signal of {} bytes; the maximum is {MAX_SIGNAL_BYTES}",
            signal.len()
        ));
    }
    if let Some(c) = signal.chars().find(|c| c.is_control()) {
        return Err(format!(
            "the worker returned a signal containing the control character {:?}",
            c
        ));
    }
    Ok(())
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

#[cfg(test)]
mod signal_tests {
    use super::*;

    #[test]
    fn signals_are_short_printable_names() {
        assert!(check_signal("SIGNAL:SUCCESS").is_ok());
        assert!(check_signal(&"S".repeat(MAX_SIGNAL_BYTES)).is_ok());
        let long = check_signal(&"S".repeat(MAX_SIGNAL_BYTES + 1)).unwrap_err();
        assert!(long.contains("maximum is 256"), "{long}");
        assert!(check_signal("").is_err());
        assert!(check_signal("SIGNAL:OK\nrun x succeeded").is_err());
        assert!(check_signal("\u{1b}[2J").is_err());
        assert!(check_signal("SIGNAL:\u{9b}X").is_err());
    }
}
