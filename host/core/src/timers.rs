//! Durable timers: the built-in `sleep` worker. A `sleep` block waits for
//! a duration (`{"for": "10m"}`) or until a time (`{"until":
//! "2026-12-01T09:00:00Z"}`); its start records the time it is due
//! (`timer_started`), and the run rests like a gate until then, whatever
//! happens to the process in between: the block completes with
//! `SIGNAL:SUCCESS` once the time has come, exactly once.

use std::time::Duration;

use serde_json::Value;

/// The worker of a block that waits.
pub const SLEEP_WORKER: &str = "sleep";

/// The longest a block may wait: a year.
pub const MAX_WAIT: Duration = Duration::from_secs(366 * 24 * 3600);

/// The units a duration may use, each with its length in milliseconds.
const UNITS: &[(&str, u64)] = &[
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

/// A duration as written in a manifest: one or more `<number><unit>`
/// parts, units `ms`, `s`, `m`, `h`, `d` (`90s`, `1h30m`, `2d`), at most
/// [`MAX_WAIT`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let hint = "a duration is one or more <number><unit> parts, units ms, s, m, h or d (`90s`, `1h30m`, `2d`)";
    let text = text.trim();
    if text.is_empty() {
        return Err(format!("an empty duration; {hint}"));
    }
    let mut total: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 || digits > 12 {
            return Err(format!("`{text}` is not a duration; {hint}"));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("`{text}` is not a duration; {hint}"))?;
        rest = &rest[digits..];
        let (unit, ms) = UNITS
            .iter()
            .filter(|(u, _)| rest.starts_with(u))
            .max_by_key(|(u, _)| u.len())
            .filter(|(u, _)| !rest[u.len()..].starts_with(|c: char| c.is_ascii_alphabetic()))
            .ok_or_else(|| format!("`{text}` is not a duration; {hint}"))?;
        rest = &rest[unit.len()..];
        total = number
            .checked_mul(*ms)
            .and_then(|part| total.checked_add(part))
            .ok_or_else(|| format!("`{text}` is longer than a year"))?;
    }
    let duration = Duration::from_millis(total);
    if duration > MAX_WAIT {
        return Err(format!("`{text}` is longer than a year"));
    }
    Ok(duration)
}

/// A UTC time as written in a manifest: `YYYY-MM-DDTHH:MM:SSZ` (seconds
/// and a fraction optional), as unix milliseconds.
pub fn parse_until(text: &str) -> Result<i64, String> {
    let hint = "a time is `YYYY-MM-DDTHH:MM[:SS[.fff]]Z`, in UTC (`2026-12-01T09:00:00Z`)";
    let bad = || format!("`{text}` is not a time; {hint}");
    let body = text.trim().strip_suffix('Z').ok_or_else(bad)?;
    let (date, time) = body.split_once('T').ok_or_else(bad)?;
    let num = |s: &str, len: usize| -> Result<i64, String> {
        if s.len() == len && s.bytes().all(|b| b.is_ascii_digit()) {
            s.parse().map_err(|_| bad())
        } else {
            Err(bad())
        }
    };
    let date: Vec<&str> = date.split('-').collect();
    let [y, mo, d] = date.as_slice() else {
        return Err(bad());
    };
    let (y, mo, d) = (num(y, 4)?, num(mo, 2)?, num(d, 2)?);
    let (clock, frac) = match time.split_once('.') {
        Some((clock, frac)) if !frac.is_empty() && frac.len() <= 3 => {
            let ms = num(frac, frac.len())? * 10_i64.pow(3 - frac.len() as u32);
            (clock, ms)
        }
        Some(_) => return Err(bad()),
        None => (time, 0),
    };
    let parts: Vec<&str> = clock.split(':').collect();
    let (h, mi, s) = match parts.as_slice() {
        [h, mi] => (num(h, 2)?, num(mi, 2)?, 0),
        [h, mi, s] => (num(h, 2)?, num(mi, 2)?, num(s, 2)?),
        _ => return Err(bad()),
    };
    let days_in_month = match mo {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        _ => return Err(bad()),
    };
    if !(1..=days_in_month).contains(&d) || h > 23 || mi > 59 || s > 59 {
        return Err(bad());
    }
    Ok((days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s) * 1000 + frac)
}

/// Days since 1970-01-01 of a date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Whether `text` holds a `{{…}}` template, which only a run can fill.
fn templated(text: &str) -> bool {
    text.contains("{{")
}

/// Check a `sleep` block's config when the manifest is loaded: exactly
/// one of `for` (a duration) and `until` (a UTC time), nothing else. A
/// templated value is checked when the block runs. On error: the JSON
/// pointer below `config` and why.
pub fn check_config(worker: &str, config: &Value) -> Result<(), (String, String)> {
    if worker != SLEEP_WORKER {
        return Ok(());
    }
    let shape =
        "a `sleep` block's config is {\"for\": \"<duration>\"} or {\"until\": \"<UTC time>\"}";
    let Value::Object(map) = config else {
        return Err((String::new(), shape.to_string()));
    };
    if let Some(key) = map.keys().find(|k| !matches!(k.as_str(), "for" | "until")) {
        return Err((format!("/{key}"), format!("unknown field `{key}`; {shape}")));
    }
    match (map.get("for"), map.get("until")) {
        (Some(Value::String(d)), None) if !templated(d) => {
            parse_duration(d).map(drop).map_err(|e| ("/for".into(), e))
        }
        (None, Some(Value::String(t))) if !templated(t) => {
            parse_until(t).map(drop).map_err(|e| ("/until".into(), e))
        }
        (Some(Value::String(_)), None) | (None, Some(Value::String(_))) => Ok(()),
        (Some(_), Some(_)) => Err((String::new(), format!("both `for` and `until`; {shape}"))),
        (Some(_), None) => Err(("/for".into(), "`for` is not a string".into())),
        (None, Some(_)) => Err(("/until".into(), "`until` is not a string".into())),
        (None, None) => Err((String::new(), shape.to_string())),
    }
}

/// When a `sleep` block started at `now_ms` with `config` (its templates
/// filled) is due, in unix milliseconds.
pub fn due_at(config: &Value, now_ms: i64) -> Result<i64, String> {
    check_config(SLEEP_WORKER, config).map_err(|(at, why)| match at.is_empty() {
        true => why,
        false => format!("config{at}: {why}"),
    })?;
    if let Some(Value::String(d)) = config.get("for") {
        let wait = parse_duration(d)?;
        return Ok(now_ms.saturating_add(i64::try_from(wait.as_millis()).unwrap_or(i64::MAX)));
    }
    match config.get("until") {
        Some(Value::String(t)) => parse_until(t),
        _ => Err("a `sleep` block needs `for` or `until`".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_parse_in_every_unit_and_combination() {
        let ms = |t: &str| parse_duration(t).map(|d| d.as_millis() as u64);
        assert_eq!(ms("250ms"), Ok(250));
        assert_eq!(ms("90s"), Ok(90_000));
        assert_eq!(ms("1h30m"), Ok(5_400_000));
        assert_eq!(ms("2d"), Ok(172_800_000));
        assert_eq!(ms(" 10m "), Ok(600_000));
        assert_eq!(ms("0s"), Ok(0));
        for bad in [
            "",
            "10",
            "m",
            "10 m",
            "1.5h",
            "-5s",
            "10x",
            "5mm",
            "3y",
            "367d",
            "99999999999999s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} passed");
        }
    }

    #[test]
    fn times_parse_as_utc_and_impossible_dates_are_refused() {
        assert_eq!(parse_until("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_until("2026-11-22T10:15:03Z"), Ok(1_795_342_503_000));
        assert_eq!(parse_until("2026-11-22T10:15Z"), Ok(1_795_342_500_000));
        assert_eq!(parse_until("2026-11-22T10:15:03.5Z"), Ok(1_795_342_503_500));
        assert_eq!(parse_until("2000-02-29T00:00:00Z"), Ok(951_782_400_000));
        for bad in [
            "2026-11-22 10:15:03Z",
            "2026-11-22T10:15:03",
            "2026-11-22T10:15:03+01:00",
            "2026-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-11-31T00:00:00Z",
            "2026-11-22T24:00:00Z",
            "26-11-22T10:15:03Z",
            "2026-11-22T10:15:03.1234Z",
        ] {
            assert!(parse_until(bad).is_err(), "{bad:?} passed");
        }
    }

    #[test]
    fn a_sleep_config_is_one_of_for_and_until() {
        let check = |c: Value| check_config(SLEEP_WORKER, &c);
        assert_eq!(check(json!({"for": "10m"})), Ok(()));
        assert_eq!(check(json!({"until": "2026-12-01T09:00:00Z"})), Ok(()));
        assert_eq!(check(json!({"for": "{{inputs.wait}}"})), Ok(()));
        assert_eq!(check(json!({"for": "10"})).unwrap_err().0, "/for");
        assert_eq!(check(json!({"until": "tomorrow"})).unwrap_err().0, "/until");
        assert_eq!(
            check(json!({"for": "1m", "until": "2026-12-01T09:00:00Z"}))
                .unwrap_err()
                .0,
            ""
        );
        assert_eq!(
            check(json!({"for": "1m", "every": "1h"})).unwrap_err().0,
            "/every"
        );
        assert_eq!(check(json!({"for": 60})).unwrap_err().0, "/for");
        assert!(check(json!(null)).is_err());
        assert_eq!(check_config("echo", &json!(null)), Ok(()));
    }

    #[test]
    fn a_block_is_due_its_duration_after_it_starts_or_at_its_time() {
        assert_eq!(due_at(&json!({"for": "1s"}), 5_000), Ok(6_000));
        assert_eq!(
            due_at(&json!({"until": "1970-01-01T00:00:10Z"}), 5_000),
            Ok(10_000)
        );
        assert!(due_at(&json!({"for": "{{inputs.x}}"}), 0).is_err());
    }
}
