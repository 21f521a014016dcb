//! Warnings the application layer has for a person (a session file that
//! could not be written, telemetry that could not be served): handed to the
//! sink the surface installed, which decides how to show them. Without
//! one, they are dropped.

use std::sync::OnceLock;

type Sink = Box<dyn Fn(&str) + Send + Sync>;

static SINK: OnceLock<Sink> = OnceLock::new();

/// Where warnings go from now on; the first call wins.
pub fn set_sink(sink: impl Fn(&str) + Send + Sync + 'static) {
    let _ = SINK.set(Box::new(sink));
}

/// Hand `message` to the installed sink.
pub fn warn(message: &str) {
    if let Some(sink) = SINK.get() {
        sink(message);
    }
}
