//! Durations in manifests (`"30s"`, `"250ms"`), bounded so that every
//! deadline computed from one fits.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// The longest duration a manifest may give (a block's `timeout`): 7 days.
/// Longer values are refused, so every deadline computed from one fits.
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Parse `"250ms"`, `"30s"`, `"2m"`, `"1h"`; positive, at most
/// [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration like \"30s\" or \"500ms\""))?;
    let seconds = match unit.trim() {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "unknown duration unit `{other}` in `{text}` (use ms, s, m or h)"
            ));
        }
    };
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(format!("duration `{text}` must be positive"));
    }
    if seconds > MAX_DURATION.as_secs_f64() {
        return Err(format!(
            "duration `{text}` is longer than the maximum of 7 days (168h)"
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

pub(super) fn deserialize_duration<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(d)?;
    parse_duration(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

pub(super) fn serialize_duration<S: serde::Serializer>(
    d: &Option<Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_str(&format!("{}ms", d.as_millis())),
        None => s.serialize_none(),
    }
}
