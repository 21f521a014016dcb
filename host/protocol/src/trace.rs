//! Carrying a trace across processes: the W3C `traceparent` of the span a
//! piece of work belongs to, written where the work goes (a run request
//! line, a job, an HTTP header) and adopted as the parent of the span that
//! takes the work up on the other side.
//!
//! The library crates only ask this module; the `wfhost` binary installs
//! the [`Propagation`] that knows the exporter (OpenTelemetry) when traces
//! are exported. Until then every call is a no-op that costs one atomic
//! load: no trace context is made, written or read.

use std::sync::OnceLock;

/// The W3C Trace Context header (and field) name.
pub const TRACEPARENT: &str = "traceparent";

/// The environment variable a `wfhost` command takes its parent from
/// (the convention of CI systems and other tracing-aware tools).
pub const TRACEPARENT_ENV: &str = "TRACEPARENT";

/// What knows the trace context of spans: installed once per process.
pub trait Propagation: Send + Sync {
    /// The `traceparent` of `span` (None when it is not sampled or not
    /// traced).
    fn traceparent(&self, span: &tracing::Span) -> Option<String>;
    /// Make the remote span `traceparent` names the parent of `span`.
    /// A malformed value is ignored (it came from outside).
    fn adopt(&self, span: &tracing::Span, traceparent: &str);
}

static PROPAGATION: OnceLock<Box<dyn Propagation>> = OnceLock::new();
static INBOUND: OnceLock<String> = OnceLock::new();

/// Install the process's propagation; a second call is ignored.
pub fn install(propagation: Box<dyn Propagation>) {
    let _ = PROPAGATION.set(propagation);
}

/// Whether traces are exported from this process.
pub fn enabled() -> bool {
    PROPAGATION.get().is_some()
}

/// The `traceparent` of the current span, when traces are exported.
pub fn current() -> Option<String> {
    let propagation = PROPAGATION.get()?;
    propagation.traceparent(&tracing::Span::current())
}

/// Make `traceparent` (when there is one) the parent of `span`.
pub fn adopt(span: &tracing::Span, traceparent: Option<&str>) {
    if let (Some(propagation), Some(parent)) = (PROPAGATION.get(), traceparent) {
        propagation.adopt(span, parent);
    }
}

/// Set the parent this process's work was handed with (a run request's
/// `traceparent`, the `TRACEPARENT` variable); the first one set stays.
pub fn set_inbound(traceparent: &str) {
    if enabled() && is_well_formed(traceparent) {
        let _ = INBOUND.set(traceparent.to_owned());
    }
}

/// The parent this process's work was handed with, if any.
pub fn inbound() -> Option<&'static str> {
    INBOUND.get().map(String::as_str)
}

/// Whether `value` has the form of a version-00 `traceparent`
/// (`00-<32 hex>-<16 hex>-<2 hex>`, ids not all zero): what is written
/// into requests and jobs is checked before it travels.
pub fn is_well_formed(value: &str) -> bool {
    let parts: Vec<&str> = value.split('-').collect();
    let hex = |s: &str, len: usize| {
        s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    let nonzero = |s: &str| s.bytes().any(|b| b != b'0');
    matches!(parts.as_slice(), [version, trace, span, flags]
        if *version == "00"
            && hex(trace, 32) && nonzero(trace)
            && hex(span, 16) && nonzero(span)
            && hex(flags, 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_version_00_traceparent_with_real_ids_is_well_formed() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert!(is_well_formed(good));
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-4bf92f3577b34da6a3ce929d0e0e47\u{e9}-00f067aa0ba902b7-01",
        ] {
            assert!(!is_well_formed(bad), "{bad:?} passed");
        }
    }

    #[test]
    fn without_a_propagation_nothing_is_made_or_adopted() {
        assert!(!enabled());
        assert_eq!(current(), None);
        set_inbound("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        assert_eq!(inbound(), None);
        adopt(&tracing::Span::none(), Some("anything"));
    }
}
