//! Retry policies: a block's `retry` says which of its failures run it
//! again, how often, and how long the run waits in between. The wait is a
//! durable timer (`retry_scheduled` records when the next attempt is
//! due; the run rests like a `sleep` block until then), so a retry
//! survives whatever happens to the process in between.
//!
//! The waits grow exponentially: the `n`-th retry waits
//! `initial × multiplier^(n-1)`, at most `max_interval`, less a random
//! part of up to `jitter` of it (so that many runs failing together do
//! not retry together). The wait drawn is recorded, so a replay never
//! draws again.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::run::transitions;

/// The most attempts a policy may allow (the run's step limit bounds
/// them too).
pub const MAX_ATTEMPTS: u32 = 1000;

/// A block's retry policy (its `retry` field).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryPolicy {
    /// How many times the block runs in all, the first attempt included
    /// (default 3). The block's own `max_attempts`, when lower, wins.
    #[serde(default = "default_max_attempts")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_attempts: u32,
    /// The wait before the first retry, e.g. `"1s"`, `"500ms"`, `"1m30s"`
    /// (default `"1s"`).
    #[serde(
        default = "default_initial",
        deserialize_with = "duration",
        serialize_with = "as_text"
    )]
    #[schemars(with = "String", regex(pattern = r"^([0-9]+(ms|s|m|h|d))+$"))]
    pub initial: Duration,
    /// Each wait is the one before times this (at least 1; default 2).
    #[serde(default = "default_multiplier")]
    #[schemars(range(min = 1.0, max = 100.0))]
    pub multiplier: f64,
    /// The longest wait between two attempts (default: 10 minutes, or
    /// `initial` when that is longer).
    #[serde(
        default,
        deserialize_with = "some_duration",
        serialize_with = "as_some_text",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>", regex(pattern = r"^([0-9]+(ms|s|m|h|d))+$"))]
    pub max_interval: Option<Duration>,
    /// The share of each wait that is random, from 0 (none) to 1: a wait
    /// `w` becomes one between `w × (1 - jitter)` and `w` (default 0.1).
    #[serde(default = "default_jitter")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub jitter: f64,
    /// The signals that are retried. Absent: the failure signals —
    /// `SIGNAL:WORKER_ERROR` (the worker crashed, timed out or its job was
    /// lost), `SIGNAL:FAIL`, `SIGNAL:FAILED`, `SIGNAL:TIMEOUT` and any
    /// signal ending in `_FAIL`, `_FAILED`, `_ERROR` or `_TIMEOUT` (such
    /// as `SIGNAL:EXEC_FAILED`), except `SIGNAL:VALIDATION_FAIL`: an
    /// output that fails the block's schema is permanent unless listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on: Option<Vec<String>>,
    /// Signals never retried, whatever `on` says: permanent failures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub never: Vec<String>,
}

fn default_max_attempts() -> u32 {
    3
}
fn default_initial() -> Duration {
    Duration::from_secs(1)
}
fn default_multiplier() -> f64 {
    2.0
}
/// The longest wait when the policy gives none (or `initial`, if longer).
pub const DEFAULT_MAX_INTERVAL: Duration = Duration::from_secs(600);
fn default_jitter() -> f64 {
    0.1
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    crate::timers::parse_duration(&text).map_err(serde::de::Error::custom)
}

fn some_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    duration(d).map(Some)
}

fn as_some_text<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => as_text(d, s),
        None => s.serialize_none(),
    }
}

fn as_text<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    let ms = d.as_millis();
    let text = match ms {
        0 => "0s".to_string(),
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{}s", ms / 1000),
        ms => format!("{ms}ms"),
    };
    s.serialize_str(&text)
}

/// Why a signal is or is not retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Retried: the policy's `on` (or the default failure signals) names it.
    Retry,
    /// Not a signal the policy retries.
    NotListed,
    /// Named in `never`: a permanent failure.
    Permanent,
}

impl RetryPolicy {
    /// Whether a block that ended with `signal` is retried (attempts
    /// allowing).
    pub fn verdict(&self, signal: &str) -> Verdict {
        if self.never.iter().any(|s| s == signal) {
            return Verdict::Permanent;
        }
        let listed = match &self.on {
            Some(on) => on.iter().any(|s| s == signal),
            None => is_failure(signal),
        };
        if listed {
            Verdict::Retry
        } else {
            Verdict::NotListed
        }
    }

    /// The longest wait: `max_interval`, else the default (or `initial`,
    /// if longer).
    pub fn longest_wait(&self) -> Duration {
        self.max_interval
            .unwrap_or(DEFAULT_MAX_INTERVAL.max(self.initial))
    }

    /// The wait before retry `retry` (1 for the first), with `random` in
    /// `[0, 1)` drawing its jitter.
    pub fn wait(&self, retry: u32, random: f64) -> Duration {
        let exponent = i32::try_from(retry.saturating_sub(1)).unwrap_or(i32::MAX);
        let grown = self.initial.as_secs_f64() * self.multiplier.powi(exponent);
        let capped = grown.min(self.longest_wait().as_secs_f64());
        let jittered = capped * (1.0 - self.jitter.clamp(0.0, 1.0) * random.clamp(0.0, 1.0));
        Duration::from_secs_f64(jittered.max(0.0))
    }

    /// What is wrong with the policy's numbers and signals, each with the
    /// JSON pointer below `retry` (the durations were checked as they
    /// were read).
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if !(1..=MAX_ATTEMPTS).contains(&self.max_attempts) {
            out.push((
                "/max_attempts".into(),
                format!("must be from 1 to {MAX_ATTEMPTS}"),
            ));
        }
        if !(self.multiplier.is_finite() && (1.0..=100.0).contains(&self.multiplier)) {
            out.push(("/multiplier".into(), "must be from 1 to 100".into()));
        }
        if !(self.jitter.is_finite() && (0.0..=1.0).contains(&self.jitter)) {
            out.push(("/jitter".into(), "must be from 0 to 1".into()));
        }
        if self.max_interval.is_some_and(|max| max < self.initial) {
            out.push((
                "/max_interval".into(),
                "is shorter than `initial`, the first wait".into(),
            ));
        }
        let lists = [
            ("on", self.on.as_deref().unwrap_or(&[])),
            ("never", &self.never),
        ];
        for (field, signals) in lists {
            for (i, signal) in signals.iter().enumerate() {
                if signal.is_empty()
                    || signal.len() > transitions::MAX_SIGNAL_BYTES
                    || signal.chars().any(|c| c.is_control() || c.is_whitespace())
                {
                    out.push((
                        format!("/{field}/{i}"),
                        "is not a signal name such as `SIGNAL:EXEC_FAILED`".into(),
                    ));
                } else if signal == transitions::FAIL_DEFAULT {
                    out.push((
                        format!("/{field}/{i}"),
                        "`SIGNAL:FAIL_DEFAULT` is a transition's fallback, never a block's signal"
                            .into(),
                    ));
                }
            }
        }
        if let Some(on) = &self.on
            && let Some(i) = on.iter().position(|s| self.never.contains(s))
        {
            out.push((
                format!("/on/{i}"),
                format!("`{}` is in `never` as well", on[i]),
            ));
        }
        out
    }
}

/// The retry a block that just ended with `signal` gets, if any: a
/// `retry_scheduled` for the block deciding in `state`, due `now_ms` plus
/// the wait the policy draws with `random`. None when the block has no
/// policy, the signal is not retried, or the attempts are used up (the
/// policy's in a row, the block's `max_attempts` over the run, or the
/// run's step limit): its transition is taken instead. A parallel
/// block's lanes are retried one by one as they fail, never the block.
pub(crate) fn schedule(
    block: &crate::manifest::Block,
    state: &crate::run::state::RunState,
    (signal, failure): (&str, Option<&str>),
    now_ms: i64,
    random: f64,
) -> Option<crate::run::event::Event> {
    let policy = block.retry.as_ref()?;
    let crate::run::state::Phase::Deciding {
        node,
        block: id,
        permanent,
        ..
    } = &state.phase
    else {
        return None;
    };
    let decided_by_people =
        signal.starts_with("SIGNAL:GATE_") || signal == transitions::NEEDS_DECISION;
    if block.parallel.is_some()
        || decided_by_people
        || *permanent
        || policy.verdict(signal) != Verdict::Retry
    {
        return None;
    }
    let attempt = state.attempts(node, id);
    let retry = state.retries + 1;
    if retry >= policy.max_attempts
        || block.max_attempts.is_some_and(|max| attempt >= max)
        || state.blocks_run >= state.max_steps
    {
        tracing::debug!(%signal, attempt, "retry policy gives up");
        return None;
    }
    let wait = policy.wait(retry, random);
    let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
    Some(crate::run::event::Event::RetryScheduled {
        step: state.last_step,
        node: node.clone(),
        block: id.clone(),
        attempt,
        retry,
        signal: signal.to_string(),
        failure: failure.map(str::to_string),
        wait_ms,
        due_at_ms: now_ms.saturating_add(i64::try_from(wait_ms).unwrap_or(i64::MAX)),
    })
}

/// Whether `signal` is one of the failure signals retried by default.
pub fn is_failure(signal: &str) -> bool {
    if signal == transitions::VALIDATION_FAIL {
        return false;
    }
    let Some(name) = signal.strip_prefix("SIGNAL:") else {
        return false;
    };
    matches!(name, "FAIL" | "FAILED" | "TIMEOUT" | "WORKER_ERROR")
        || ["_FAIL", "_FAILED", "_ERROR", "_TIMEOUT"]
            .iter()
            .any(|suffix| name.ends_with(suffix))
}

/// A number in `[0, 1)` from the kernel's random bits (0 when they
/// cannot be read: the wait is then the longest the policy allows).
pub fn random_unit() -> f64 {
    use std::io::Read;
    let mut bytes = [0u8; 8];
    match std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)) {
        Ok(()) => (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64,
        Err(_) => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(json: serde_json::Value) -> RetryPolicy {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn defaults_are_three_attempts_doubling_from_a_second() {
        let p = policy(serde_json::json!({}));
        assert_eq!(p.max_attempts, 3);
        assert_eq!(p.initial, Duration::from_secs(1));
        assert_eq!(p.longest_wait(), Duration::from_secs(600));
        let long = policy(serde_json::json!({"initial": "1h"}));
        assert_eq!(
            long.wait(3, 0.0),
            Duration::from_secs(3600),
            "no shorter than initial"
        );
        assert_eq!((p.multiplier, p.jitter), (2.0, 0.1));
        assert!(p.problems().is_empty());
    }

    #[test]
    fn waits_grow_by_the_multiplier_up_to_the_cap() {
        let p = policy(serde_json::json!({
            "initial": "100ms", "multiplier": 3, "max_interval": "1s", "jitter": 0
        }));
        let ms: Vec<u128> = (1..=5).map(|n| p.wait(n, 0.7).as_millis()).collect();
        assert_eq!(ms, [100, 300, 900, 1000, 1000]);
        // A huge retry number saturates at the cap instead of overflowing.
        assert_eq!(p.wait(u32::MAX, 0.0).as_millis(), 1000);
    }

    #[test]
    fn jitter_shortens_a_wait_by_at_most_its_share() {
        let p = policy(serde_json::json!({"initial": "10s", "jitter": 0.25}));
        assert_eq!(p.wait(1, 0.0), Duration::from_secs(10));
        assert_eq!(p.wait(1, 0.5).as_millis(), 8750);
        for r in [0.0, 0.1, 0.5, 0.999_999] {
            let w = p.wait(1, r).as_secs_f64();
            assert!((7.5..=10.0).contains(&w), "{w}");
        }
        let r = random_unit();
        assert!((0.0..1.0).contains(&r));
    }

    #[test]
    fn failures_are_retried_by_default_and_validation_is_permanent() {
        let p = policy(serde_json::json!({}));
        for s in [
            "SIGNAL:WORKER_ERROR",
            "SIGNAL:EXEC_FAILED",
            "SIGNAL:EXEC_TIMEOUT",
            "SIGNAL:FAILED",
            "SIGNAL:FAIL",
            "SIGNAL:PROTOCOL_ERROR",
        ] {
            assert_eq!(p.verdict(s), Verdict::Retry, "{s}");
        }
        for s in [
            "SIGNAL:SUCCESS",
            "SIGNAL:VALIDATION_FAIL",
            "SIGNAL:BLOCKED",
            "SIGNAL:PARTIAL",
            "SIGNAL:NEEDS_DECISION",
            "SIGNAL:ERRORLESS",
        ] {
            assert_eq!(p.verdict(s), Verdict::NotListed, "{s}");
        }
    }

    #[test]
    fn on_replaces_the_default_and_never_wins() {
        let p = policy(serde_json::json!({
            "on": ["SIGNAL:VALIDATION_FAIL", "SIGNAL:FLAKY"],
            "never": ["SIGNAL:EXEC_FAILED"]
        }));
        assert_eq!(p.verdict("SIGNAL:VALIDATION_FAIL"), Verdict::Retry);
        assert_eq!(p.verdict("SIGNAL:FLAKY"), Verdict::Retry);
        assert_eq!(p.verdict("SIGNAL:WORKER_ERROR"), Verdict::NotListed);
        assert_eq!(p.verdict("SIGNAL:EXEC_FAILED"), Verdict::Permanent);
        let q = policy(serde_json::json!({"never": ["SIGNAL:EXEC_FAILED"]}));
        assert_eq!(q.verdict("SIGNAL:EXEC_FAILED"), Verdict::Permanent);
        assert_eq!(q.verdict("SIGNAL:EXEC_TIMEOUT"), Verdict::Retry);
    }

    #[test]
    fn bad_policies_name_the_field() {
        let p = policy(serde_json::json!({
            "max_attempts": 0, "multiplier": 0.5, "jitter": 2,
            "initial": "1m", "max_interval": "1s",
            "on": ["SIGNAL:A", "no pe"], "never": ["SIGNAL:A", "SIGNAL:FAIL_DEFAULT"]
        }));
        let at: Vec<String> = p.problems().into_iter().map(|(at, _)| at).collect();
        assert_eq!(
            at,
            [
                "/max_attempts",
                "/multiplier",
                "/jitter",
                "/max_interval",
                "/on/1",
                "/never/1",
                "/on/0"
            ]
        );
        for bad in [
            serde_json::json!({"initial": "soon"}),
            serde_json::json!({"max_interval": "5"}),
            serde_json::json!({"tries": 3}),
            serde_json::json!({"max_attempts": -1}),
        ] {
            assert!(
                serde_json::from_value::<RetryPolicy>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }
}
