//! What the application layer has to tell a person — warnings (a session
//! file that could not be written, telemetry that could not be served) and
//! notes (a job runner's account of its leases) — handed to the sink the
//! surface installed, which decides how to show them. Without one, they
//! are dropped.

use std::sync::OnceLock;

/// Which kind of message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Something went wrong that did not stop the work.
    Warning,
    /// An account of what happened (a daemon's log line).
    Note,
}

type Sink = Box<dyn Fn(Level, &str) + Send + Sync>;

static SINK: OnceLock<Sink> = OnceLock::new();

/// Where messages go from now on; the first call wins.
pub fn set_sink(sink: impl Fn(Level, &str) + Send + Sync + 'static) {
    let _ = SINK.set(Box::new(sink));
}

/// Hand a warning to the installed sink.
pub fn warn(message: &str) {
    if let Some(sink) = SINK.get() {
        sink(Level::Warning, message);
    }
}

/// Hand a note to the installed sink.
pub fn note(message: &str) {
    if let Some(sink) = SINK.get() {
        sink(Level::Note, message);
    }
}
