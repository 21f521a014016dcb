//! Schedules: a workflow started on a cron expression's ticks. What is
//! pure here — the expression and its time zone, the ticks it gives, what
//! a server that looks at time `now` does with the ticks that came due
//! (the catch-up after downtime, the overlap with a run still going) — so
//! that it is tested on any clock; the store keeps the schedules and the
//! ticks handled, the server looks.

use std::str::FromStr;

use chrono::{TimeZone, Utc};
use serde::{Deserialize, Serialize};

/// The most runs one look starts for a schedule's missed ticks.
pub const MAX_CATCH_UP: u32 = 100;

/// The most ticks a look counts as missed (a per-second schedule after a
/// long downtime stops counting there).
const MAX_COUNTED: usize = 100_000;

/// A cron expression in a time zone: standard five fields (minute hour
/// day-of-month month day-of-week), or six with seconds first; names of
/// months and days, lists, ranges, steps, `L`, `#`, `W`, and `@hourly`,
/// `@daily`, `@weekly`, `@monthly`, `@yearly`.
#[derive(Debug, Clone)]
pub struct Cron {
    expression: String,
    pattern: croner::Cron,
    tz: chrono_tz::Tz,
}

impl Cron {
    /// `expression` in the IANA time zone `tz` (`UTC`, `Europe/Berlin`).
    /// On error, which of the two is wrong (`cron` or `tz`) and why.
    pub fn parse(expression: &str, tz: &str) -> Result<Cron, (&'static str, String)> {
        let zone: chrono_tz::Tz = tz.trim().parse().map_err(|_| {
            (
                "tz",
                format!(
                    "`{tz}` is not a time zone: use an IANA name such as `UTC` or `Europe/Berlin`"
                ),
            )
        })?;
        let text = expression.trim();
        let fields = text.split_whitespace().count();
        if !text.starts_with('@') && !(5..=6).contains(&fields) {
            return Err((
                "cron",
                format!(
                    "`{expression}` has {fields} fields: a cron expression has 5 (minute hour day month weekday) or 6 (seconds first)"
                ),
            ));
        }
        let pattern = croner::Cron::from_str(text).map_err(|e| {
            (
                "cron",
                format!("`{expression}` is not a cron expression: {e}"),
            )
        })?;
        Ok(Cron {
            expression: text.to_string(),
            pattern,
            tz: zone,
        })
    }

    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The first tick strictly after `after_ms` (unix ms); None when the
    /// expression never matches again (`0 0 30 2 *`).
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        let at = self.at(after_ms)?;
        let next = self.pattern.find_next_occurrence(&at, false).ok()?;
        Some(next.timestamp_millis())
    }

    /// The last tick at or before `at_ms`.
    fn last_at_or_before(&self, at_ms: i64) -> Option<i64> {
        let at = self.at(at_ms)?;
        let previous = self.pattern.find_previous_occurrence(&at, true).ok()?;
        Some(previous.timestamp_millis())
    }

    /// `ms` in the schedule's zone, to the whole second below (ticks fall
    /// on whole seconds).
    fn at(&self, ms: i64) -> Option<chrono::DateTime<chrono_tz::Tz>> {
        let whole = ms.div_euclid(1000) * 1000;
        Some(
            Utc.timestamp_millis_opt(whole)
                .single()?
                .with_timezone(&self.tz),
        )
    }

    /// What a look at `now_ms` does with the ticks from `next_tick_ms` (the
    /// first not handled yet) to `now_ms`: the latest `catch_up` of them
    /// start runs, oldest first; the others are missed; the tick after
    /// `now_ms` is the next to wait for.
    pub fn due(&self, next_tick_ms: i64, now_ms: i64, catch_up: u32) -> Due {
        let mut due = Due {
            start: Vec::new(),
            missed: 0,
            next_tick_ms: self.next_after(now_ms),
        };
        if next_tick_ms > now_ms {
            due.next_tick_ms = Some(next_tick_ms);
            return due;
        }
        // The latest ticks, walking back from now (never through all of a
        // long downtime).
        let mut cursor = now_ms;
        while due.start.len() < catch_up.min(MAX_CATCH_UP) as usize {
            match self.last_at_or_before(cursor) {
                Some(tick) if tick >= next_tick_ms => {
                    due.start.push(tick);
                    cursor = tick - 1000;
                }
                _ => break,
            }
        }
        due.start.reverse();
        // The others between, counted up to a bound.
        let first_started = due.start.first().copied().unwrap_or(now_ms + 1);
        let mut tick = Some(next_tick_ms - 1);
        while let Some(t) = tick.and_then(|t| self.next_after(t)) {
            if t >= first_started || due.missed >= MAX_COUNTED as u64 {
                break;
            }
            due.missed += 1;
            tick = Some(t);
        }
        due
    }
}

/// What a look does with a schedule's due ticks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// Ticks that start runs, oldest first (unix ms).
    pub start: Vec<i64>,
    /// Ticks passed over (downtime beyond the catch-up).
    pub missed: u64,
    /// The next tick to wait for; None when there is none.
    pub next_tick_ms: Option<i64>,
}

/// What a tick does while a run the schedule started is still going.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// The tick starts nothing (the default).
    #[default]
    Skip,
    /// The tick waits for the run to end, then starts; one at most waits,
    /// a later tick meanwhile is skipped.
    Queue,
    /// The tick starts its run anyway.
    Allow,
}

impl Overlap {
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::Queue => "queue",
            Overlap::Allow => "allow",
        }
    }

    pub fn parse(text: &str) -> Result<Overlap, String> {
        match text {
            "skip" => Ok(Overlap::Skip),
            "queue" => Ok(Overlap::Queue),
            "allow" => Ok(Overlap::Allow),
            other => Err(format!(
                "`{other}` is not an overlap policy: skip, queue or allow"
            )),
        }
    }

    /// What a tick does given whether a run of the schedule is going
    /// (`running`) and whether a tick already waits (`queued`).
    pub fn decide(self, running: bool, queued: bool) -> TickAction {
        match (self, running) {
            (_, false) if !queued => TickAction::Start,
            (Overlap::Allow, _) => TickAction::Start,
            (Overlap::Queue, _) if !queued => TickAction::Queue,
            (Overlap::Queue, _) => TickAction::Skip("a tick already waits for the run going"),
            (Overlap::Skip, _) => TickAction::Skip("a run of the schedule is still going"),
        }
    }
}

/// What one tick does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TickAction {
    Start,
    Queue,
    Skip(&'static str),
}

/// What is wrong with a schedule's definition: the field (`name`, `cron`,
/// `tz`, `workflow`, `inputs`, `catch_up`), the JSON pointer of an input,
/// and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub field: &'static str,
    pub pointer: Option<String>,
    pub message: String,
}

impl Problem {
    fn of(field: &'static str, message: String) -> Problem {
        Problem {
            field,
            pointer: None,
            message,
        }
    }
}

/// Check a schedule before it is stored: its name, expression and zone,
/// its catch-up, and that its workflow (a file) reads and takes `inputs`
/// (the inputs it requires given, each valid). The parsed expression.
pub fn check(
    name: &str,
    (cron, tz): (&str, &str),
    workflow: &std::path::Path,
    inputs: &serde_json::Map<String, serde_json::Value>,
    catch_up: u32,
) -> Result<Cron, Problem> {
    check_name(name).map_err(|m| Problem::of("name", m))?;
    let parsed = Cron::parse(cron, tz).map_err(|(field, m)| Problem::of(field, m))?;
    if catch_up > MAX_CATCH_UP {
        return Err(Problem::of(
            "catch_up",
            format!("a catch-up of {catch_up} is over the limit of {MAX_CATCH_UP} runs"),
        ));
    }
    let definition = crate::manifest::read(workflow)
        .and_then(|text| crate::formats::parse_any(workflow, &text))
        .map_err(|e| Problem::of("workflow", e.to_string()))?;
    let problems = crate::run::inputs::problems_of(definition.inputs.as_ref(), inputs);
    if let Some(first) = problems.first() {
        let pointer = match first.name.as_str() {
            "" => "/inputs".to_string(),
            name => format!("/inputs/{}", crate::json_pointer::escape(name)),
        };
        let all: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
        return Err(Problem {
            field: "inputs",
            pointer: Some(pointer),
            message: all.join("; "),
        });
    }
    Ok(parsed)
}

/// A schedule name: 1 to 64 letters, digits, `-` and `_`, starting with a
/// letter or digit (it names URLs and ticks).
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not a schedule name: 1 to 64 letters, digits, `-` and `_`, starting with a letter or digit"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> i64 {
        crate::timers::parse_until(text).unwrap()
    }

    #[test]
    fn five_and_six_field_expressions_give_their_ticks_in_their_time_zone() {
        let daily = Cron::parse("0 9 * * 1-5", "Europe/Berlin").unwrap();
        // Friday 2026-11-27 10:00 Berlin is 09:00 UTC: the next is Monday.
        let next = daily.next_after(ms("2026-11-27T09:00:00Z")).unwrap();
        assert_eq!(next, ms("2026-11-30T08:00:00Z"));
        let utc = Cron::parse("@hourly", "UTC").unwrap();
        assert_eq!(
            utc.next_after(ms("2026-11-27T09:00:00Z")),
            Some(ms("2026-11-27T10:00:00Z")),
            "strictly after"
        );
        let seconds = Cron::parse("*/2 * * * * *", "UTC").unwrap();
        assert_eq!(
            seconds.next_after(ms("2026-11-27T09:00:01Z")),
            Some(ms("2026-11-27T09:00:02Z"))
        );
    }

    #[test]
    fn daylight_saving_skips_and_repeats_as_the_wall_clock_does() {
        // 02:30 does not exist in Berlin on 2026-03-29.
        let c = Cron::parse("30 2 * * *", "Europe/Berlin").unwrap();
        let after = c.next_after(ms("2026-03-28T12:00:00Z")).unwrap();
        assert!(after > ms("2026-03-29T00:00:00Z"), "{after}");
        // Every tick is later than the one before, across both changes.
        let hourly = Cron::parse("0 * * * *", "Europe/Berlin").unwrap();
        let mut t = ms("2026-10-24T20:00:00Z");
        for _ in 0..30 {
            let n = hourly.next_after(t).unwrap();
            assert!(n > t);
            t = n;
        }
    }

    #[test]
    fn bad_expressions_and_zones_say_which_and_why() {
        for (expr, tz, field, says) in [
            ("61 * * * *", "UTC", "cron", "is not a cron expression"),
            ("* * *", "UTC", "cron", "has 3 fields"),
            ("* * * * * * *", "UTC", "cron", "has 7 fields"),
            ("0 9 * * *", "Mars/Olympus", "tz", "is not a time zone"),
            ("0 9 * * MON-XYZ", "UTC", "cron", "is not a cron expression"),
        ] {
            let (f, why) = Cron::parse(expr, tz).unwrap_err();
            assert_eq!(f, field, "{expr}");
            assert!(why.contains(says), "{expr}: {why}");
        }
    }

    #[test]
    fn a_look_after_downtime_starts_the_latest_ticks_and_counts_the_rest() {
        let c = Cron::parse("* * * * *", "UTC").unwrap();
        let first = ms("2026-11-27T09:00:00Z");
        // Not due yet.
        let d = c.due(first, first - 1, 1);
        assert_eq!(
            (d.start, d.missed, d.next_tick_ms),
            (vec![], 0, Some(first))
        );
        // Due exactly now.
        let d = c.due(first, first, 1);
        assert_eq!(d.start, [first]);
        assert_eq!(d.missed, 0);
        assert_eq!(d.next_tick_ms, Some(first + 60_000));
        // Down for ten minutes and a half: one run, for the latest tick.
        let now = first + 10 * 60_000 + 30_000;
        let d = c.due(first, now, 1);
        assert_eq!(d.start, [first + 600_000]);
        assert_eq!(d.missed, 10);
        assert_eq!(d.next_tick_ms, Some(first + 660_000));
        // A catch-up of 3: the latest three, oldest first.
        let d = c.due(first, now, 3);
        assert_eq!(d.start, [first + 480_000, first + 540_000, first + 600_000]);
        assert_eq!(d.missed, 8);
        // None: every missed tick passed over.
        let d = c.due(first, now, 0);
        assert_eq!((d.start.len(), d.missed), (0, 11));
        // A per-second schedule down for two days stops counting at the bound.
        let s = Cron::parse("* * * * * *", "UTC").unwrap();
        let d = s.due(first, first + 2 * 86_400_000, 1);
        assert_eq!(d.start, [first + 2 * 86_400_000]);
        assert_eq!(d.missed, MAX_COUNTED as u64);
    }

    #[test]
    fn overlap_policies_decide_what_a_tick_does_while_a_run_goes_on() {
        use TickAction::*;
        for policy in [Overlap::Skip, Overlap::Queue, Overlap::Allow] {
            assert_eq!(policy.decide(false, false), Start, "{policy:?}");
        }
        assert!(matches!(Overlap::Skip.decide(true, false), Skip(_)));
        assert_eq!(Overlap::Queue.decide(true, false), Queue);
        assert!(matches!(Overlap::Queue.decide(true, true), Skip(_)));
        assert_eq!(Overlap::Allow.decide(true, true), Start);
        assert_eq!(Overlap::parse("queue"), Ok(Overlap::Queue));
        assert!(Overlap::parse("sometimes").is_err());
    }

    #[test]
    fn schedule_names_are_short_plain_words() {
        assert!(check_name("nightly-build_2").is_ok());
        for bad in ["", "-x", "a b", "a/b", "..", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
