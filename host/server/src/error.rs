//! Errors are data: every failure is a JSON body `{code, message,
//! details}` with the status that says what kind it is.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use wfhost_protocol::{AppError, ErrorKind};
use wfhost_store::StoreError;

/// An API error as it goes over the wire.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApiError {
    #[serde(skip)]
    pub status: StatusCode,
    /// Stable, machine-readable: `not_found`, `bad_request`, …
    pub code: &'static str,
    /// For people: what is wrong and where.
    pub message: String,
    /// Structured extras (a JSON pointer, candidates, limits), or null.
    pub details: serde_json::Value,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            details: serde_json::Value::Null,
        }
    }

    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = details;
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn unauthorized() -> Self {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid bearer token is required",
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match &e {
            StoreError::UnknownRun { id, .. } => {
                ApiError::not_found(format!("unknown run id `{id}`"))
            }
            StoreError::NoStore { .. } | StoreError::UnknownSession { .. } => {
                ApiError::not_found(e.to_string())
            }
            StoreError::Usage(_) => ApiError::bad_request(e.to_string()),
            StoreError::Busy { .. } => ApiError::new(StatusCode::CONFLICT, "busy", e.to_string()),
            StoreError::Locked { .. } => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_locked",
                e.to_string(),
            ),
            StoreError::Unavailable { .. } => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                e.to_string(),
            ),
            _ => ApiError::internal(e.to_string()),
        }
    }
}

/// An application-layer error as an API answer: its kind says the status
/// (bad input 400, not found 404, busy 409, the rest 500); where it lies
/// goes into `details.place`.
impl From<AppError> for ApiError {
    fn from(e: AppError) -> Self {
        let api = match e.kind {
            ErrorKind::BadInput => ApiError::bad_request(e.message),
            ErrorKind::NotFound => ApiError::not_found(e.message),
            ErrorKind::Busy => ApiError::new(StatusCode::CONFLICT, "busy", e.message),
            ErrorKind::Waiting => ApiError::new(StatusCode::CONFLICT, "waiting", e.message),
            ErrorKind::Unavailable => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                e.message,
            ),
            ErrorKind::Interrupted
            | ErrorKind::Cancelled
            | ErrorKind::Failed
            | ErrorKind::Internal => ApiError::internal(e.message),
        };
        match e.place {
            Some(place) => api.with_details(serde_json::json!({"place": place})),
            None => api,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(&self)).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_process_that_cannot_reach_the_store_is_a_503_too() {
        // As it crosses from the run process: serialized, read back.
        let e = AppError::new(
            ErrorKind::Unavailable,
            "run store postgres://db: is unavailable",
        );
        let e: AppError = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
        let api = ApiError::from(e);
        assert_eq!(api.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(api.code, "store_unavailable");
    }

    #[test]
    fn an_unreachable_database_is_a_503_that_can_be_retried() {
        let api = ApiError::from(StoreError::Unavailable {
            path: "postgres://wf:***@db/runs".into(),
            message: "cannot connect to PostgreSQL: Connection refused".into(),
        });
        assert_eq!(api.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(api.code, "store_unavailable");
        assert!(
            api.message.contains("postgres://wf:***@db/runs"),
            "{}",
            api.message
        );
    }
}
