//! What went wrong, of which kind, and where.

use serde::{Deserialize, Serialize};

/// The kinds of failure a surface tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The request is wrong (a manifest, an argument, an input, a path):
    /// nothing was recorded.
    BadInput,
    /// Something else holds what was asked for (a run's lock, a workspace,
    /// the store): try again later.
    Busy,
    /// What was named does not exist (a run, a gate, a session).
    NotFound,
    /// The run waits at a gate for an answer.
    Waiting,
    /// A signal stopped the run; it can be resumed.
    Interrupted,
    /// Someone stopped the run for good (`wfhost cancel`, the HTTP API);
    /// it is not continued.
    Cancelled,
    /// The run failed (a block failed, or the engine stopped).
    Failed,
    /// The run store cannot be reached (its database is down or refuses
    /// the connection): nothing was recorded; try again later.
    Unavailable,
    /// The host itself could not do its part (a file it could not write,
    /// a process it could not start).
    Internal,
}

impl ErrorKind {
    /// The word used in messages and on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::BadInput => "bad_input",
            ErrorKind::Busy => "busy",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Waiting => "waiting",
            ErrorKind::Interrupted => "interrupted",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Failed => "failed",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Internal => "internal",
        }
    }
}

/// An error of the application layer: its kind, a message for people, and
/// where it lies (a file, a JSON pointer, a run id), when known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppError {
    pub kind: ErrorKind,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place: Option<String>,
}

impl AppError {
    pub fn new(kind: ErrorKind, message: impl std::fmt::Display) -> Self {
        AppError {
            kind,
            message: message.to_string(),
            place: None,
        }
    }

    /// The same error, located at `place`.
    pub fn at(mut self, place: impl Into<String>) -> Self {
        self.place = Some(place.into());
        self
    }

    pub fn bad_input(message: impl std::fmt::Display) -> Self {
        AppError::new(ErrorKind::BadInput, message)
    }

    pub fn busy(message: impl std::fmt::Display) -> Self {
        AppError::new(ErrorKind::Busy, message)
    }

    pub fn not_found(message: impl std::fmt::Display) -> Self {
        AppError::new(ErrorKind::NotFound, message)
    }

    pub fn failed(message: impl std::fmt::Display) -> Self {
        AppError::new(ErrorKind::Failed, message)
    }

    pub fn internal(message: impl std::fmt::Display) -> Self {
        AppError::new(ErrorKind::Internal, message)
    }
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for AppError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_crosses_a_process_boundary_whole() {
        let e = AppError::busy("run r is executing (pid 7)").at("run-1");
        let text = serde_json::to_string(&e).unwrap();
        assert_eq!(
            text,
            r#"{"kind":"busy","message":"run r is executing (pid 7)","place":"run-1"}"#
        );
        assert_eq!(serde_json::from_str::<AppError>(&text).unwrap(), e);
        let bare: AppError = serde_json::from_str(r#"{"kind":"bad_input","message":"m"}"#).unwrap();
        assert_eq!(bare, AppError::bad_input("m"));
        assert!(serde_json::from_str::<AppError>(r#"{"kind":"odd","message":"m"}"#).is_err());
    }
}
