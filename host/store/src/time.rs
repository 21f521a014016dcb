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
    fn parses_ages() {
        assert_eq!(parse_age("30d").unwrap(), Duration::from_secs(30 * 86_400));
        assert_eq!(parse_age("2w").unwrap(), Duration::from_secs(14 * 86_400));
        for bad in ["", "d", "30", "30 d", "-1d", "1y", "99999999999999999999d"] {
            assert!(parse_age(bad).is_err(), "{bad}");
        }
    }
}
