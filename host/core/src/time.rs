//! UTC calendar arithmetic for timestamps the engine writes (event times,
//! the orchestrator artifacts, block outputs), without a date library.

/// Unix milliseconds as (year, month, day, hour, minute, second), UTC.
pub fn civil(ms: i64) -> (i64, u32, u32, u32, u32, u32) {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        y,
        m,
        d,
        (rem / 3600) as u32,
        (rem % 3600 / 60) as u32,
        (rem % 60) as u32,
    )
}

/// `2026-11-22T10:15:03Z`.
pub fn iso_utc(ms: i64) -> String {
    let (y, mo, d, h, mi, s) = civil(ms);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// `2026-11-22T10:15:03.123Z`.
pub fn iso_utc_millis(ms: i64) -> String {
    let (y, mo, d, h, mi, s) = civil(ms);
    format!(
        "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:03}Z",
        ms.rem_euclid(1000)
    )
}

thread_local! {
    /// A clock a test sets on its thread ([`set_test_clock`]).
    static TEST_CLOCK: std::cell::Cell<Option<i64>> = const { std::cell::Cell::new(None) };
}

/// Make [`now_ms`] answer `ms` on this thread (None: the real clock
/// again): what tests of time-dependent logic (timers) run on.
pub fn set_test_clock(ms: Option<i64>) {
    TEST_CLOCK.with(|c| c.set(ms));
}

/// Now, in unix milliseconds.
pub fn now_ms() -> i64 {
    if let Some(ms) = TEST_CLOCK.with(std::cell::Cell::get) {
        return ms;
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_utc() {
        assert_eq!(iso_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso_utc(1_795_342_503_999), "2026-11-22T10:15:03Z");
        assert_eq!(iso_utc(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(
            iso_utc_millis(1_795_305_600_123),
            "2026-11-22T00:00:00.123Z"
        );
        assert_eq!(iso_utc_millis(-1), "1969-12-31T23:59:59.999Z");
    }
}
