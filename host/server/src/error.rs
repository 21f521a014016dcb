//! Errors are data: every failure is a JSON body `{code, message,
//! details}` with the status that says what kind it is.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
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
            _ => ApiError::internal(e.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(&self)).into_response()
    }
}
