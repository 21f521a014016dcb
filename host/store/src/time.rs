//! Wall-clock helpers: unix milliseconds, UTC rendering, retention ages.

use std::time::Duration;

pub use wfhost_core::time::now_ms;

/// `2026-11-22 10:15:03Z`.
pub fn format_utc(ms: i64) -> String {
    let (y, mo, d, h, mi, s) = civil(ms);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}Z")
}

/// `("20261122", "101503")`.
pub(crate) fn compact_utc(ms: i64) -> (String, String) {
    let (y, mo, d, h, mi, s) = civil(ms);
    (
        format!("{y:04}{mo:02}{d:02}"),
        format!("{h:02}{mi:02}{s:02}"),
    )
}

use wfhost_core::time::civil;

/// A retention age: a number and a unit, `s`, `m`, `h`, `d` or `w`
/// (`30d`, `12h`, `2w`).
pub fn parse_age(text: &str) -> Result<Duration, String> {
    let bad = || format!("`{text}` is not an age: write a number and a unit, e.g. 30d, 12h, 2w");
    let unit_at = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = text.split_at(unit_at);
    let n: u64 = number.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(bad()),
    };
    n.checked_mul(secs).map(Duration::from_secs).ok_or_else(bad)
}

/// The start of a "since" window, in unix ms: an age before `now_ms`
/// (`2h`, `7d`, as [`parse_age`] reads it), or a UTC date or time
/// (`2026-11-20`, `2026-11-20T08:30:00Z`, `2026-11-20 08:30:00Z`, as
/// listings print it).
pub fn parse_since(text: &str, now_ms: i64) -> Result<i64, String> {
    let text = text.trim();
    if let Ok(age) = parse_age(text) {
        let age = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
        return Ok(now_ms.saturating_sub(age));
    }
    parse_utc(text).ok_or_else(|| {
        format!(
            "`{text}` is neither an age (30m, 12h, 7d) nor a UTC date or time (2026-11-20, 2026-11-20T08:30:00Z)"
        )
    })
}

/// `YYYY-MM-DD`, optionally followed by `T` or a space and `HH:MM[:SS]`
/// and an optional `Z`: unix ms.
fn parse_utc(text: &str) -> Option<i64> {
    let (date, time) = match text.split_once(['T', ' ']) {
        Some((d, t)) => (d, Some(t.strip_suffix('Z').unwrap_or(t))),
        None => (text.strip_suffix('Z').unwrap_or(text), None),
    };
    let mut parts = date.split('-');
    let (y, mo, d) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || y.len() != 4 || mo.len() != 2 || d.len() != 2 {
        return None;
    }
    let (y, mo, d): (i64, u32, u32) = (y.parse().ok()?, mo.parse().ok()?, d.parse().ok()?);
    if !(1..=12).contains(&mo) || d == 0 || d > days_in_month(y, mo) {
        return None;
    }
    let seconds = match time {
        None => 0,
        Some(t) => {
            let fields: Vec<&str> = t.split(':').collect();
            if !(2..=3).contains(&fields.len()) || fields.iter().any(|f| f.len() != 2) {
                return None;
            }
            let n: Vec<i64> = fields
                .iter()
                .map(|f| f.parse().ok())
                .collect::<Option<_>>()?;
            let (h, mi, s) = (n[0], n[1], n.get(2).copied().unwrap_or(0));
            if h > 23 || mi > 59 || s > 59 {
                return None;
            }
            h * 3600 + mi * 60 + s
        }
    };
    Some((days_from_civil(y, mo, d) * 86_400 + seconds) * 1000)
}

fn days_in_month(y: i64, mo: u32) -> u32 {
    match mo {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the inverse of
/// `civil`'s date part).
fn days_from_civil(y: i64, mo: u32, d: u32) -> i64 {
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((mo + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_utc() {
        assert_eq!(format_utc(0), "1970-01-01 00:00:00Z");
        assert_eq!(format_utc(1_795_350_903_000), "2026-11-22 12:35:03Z");
        assert_eq!(format_utc(951_782_400_000), "2000-02-29 00:00:00Z");
    }

    #[test]
    fn parses_since_as_an_age_or_a_utc_time() {
        let now = 1_795_350_903_000;
        assert_eq!(parse_since("2h", now).unwrap(), now - 7_200_000);
        for (text, at) in [
            ("2026-11-22", "2026-11-22 00:00:00Z"),
            ("2026-11-22T12:35:03Z", "2026-11-22 12:35:03Z"),
            ("2026-11-22 12:35:03Z", "2026-11-22 12:35:03Z"),
            ("2026-11-22T12:35", "2026-11-22 12:35:00Z"),
            ("2000-02-29", "2000-02-29 00:00:00Z"),
            ("1970-01-01", "1970-01-01 00:00:00Z"),
        ] {
            assert_eq!(format_utc(parse_since(text, now).unwrap()), at, "{text}");
        }
        for bad in [
            "",
            "yesterday",
            "2026-13-01",
            "2026-02-30",
            "2025-02-29",
            "2026-1-01",
            "2026-11-22T25:00",
            "2026-11-22T12",
            "2026-11-22T12:35:03:00",
            "2026-11-22-01",
        ] {
            let e = parse_since(bad, now).unwrap_err();
            assert!(e.contains("neither an age"), "{bad}: {e}");
        }
    }

    #[test]
    fn parses_ages() {
        assert_eq!(parse_age("30d").unwrap(), Duration::from_secs(30 * 86_400));
        assert_eq!(parse_age("2w").unwrap(), Duration::from_secs(14 * 86_400));
        for bad in ["", "d", "30", "30 d", "-1d", "1y", "99999999999999999999d"] {
            assert!(parse_age(bad).is_err(), "{bad}");
        }
    }
}
