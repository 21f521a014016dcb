//! Errors as data: what a tool answers when it refuses a call.
//!
//! Every refusal is a tool result with `isError: true` whose structured
//! content (mirrored as JSON text) is `{code, message, retry, details?}`:
//! the code says what went wrong (the list is in `docs/guide/mcp.md`), the
//! message says it for a person, `retry` whether calling again can help.

use serde::Serialize;
use serde_json::{Value, json};

use crate::token::TokenError;

/// Whether and when a refused call may be repeated.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Retry {
    NotRetryable,
    RetryableImmediate,
    RetryableAfterMs {
        #[serde(rename = "afterMs")]
        after_ms: u64,
    },
}

/// A refused tool call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolError {
    pub code: &'static str,
    pub message: String,
    pub retry: Retry,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl ToolError {
    pub fn new(code: &'static str, message: impl Into<String>) -> ToolError {
        ToolError {
            code,
            message: message.into(),
            retry: Retry::NotRetryable,
            details: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> ToolError {
        self.details = Some(details);
        self
    }

    pub fn retry_after(mut self, ms: u64) -> ToolError {
        self.retry = Retry::RetryableAfterMs { after_ms: ms };
        self
    }

    /// Bad arguments: `path` is the JSON pointer of the offending value.
    pub fn invalid(path: &str, message: impl Into<String>) -> ToolError {
        let message = message.into();
        ToolError::new("VALIDATION_ERROR", format!("{path}: {message}")).with_details(json!({
            "validationErrors": [{"path": path, "message": message}]
        }))
    }

    /// The store or the host failed; the call changed nothing it reports.
    pub fn internal(message: impl Into<String>) -> ToolError {
        ToolError::new("INTERNAL_ERROR", message)
    }

    /// Another call is advancing the same run.
    pub fn busy(run_id: &str) -> ToolError {
        ToolError::new(
            "RUN_BUSY",
            format!("run {run_id} is being advanced by another call; try again"),
        )
        .retry_after(SESSION_LOCK_RETRY_MS)
    }

    /// The error as sent: WorkRail's code for wfhost's reason where
    /// WorkRail has one ([`workrail_code`]), wfhost's own code then in
    /// `details.reason`.
    pub fn to_value(&self) -> Value {
        let mut value = serde_json::to_value(self).expect("an error serializes");
        if let Some(code) = workrail_code(self.code) {
            value["code"] = code.into();
            match value.get_mut("details") {
                Some(Value::Object(details)) => {
                    details.entry("reason").or_insert_with(|| self.code.into());
                }
                _ => value["details"] = json!({"reason": self.code}),
            }
        }
        value
    }
}

/// How long a client waits before retrying a run another call is
/// advancing (WorkRail's session lock: 1 s).
pub const SESSION_LOCK_RETRY_MS: u64 = 1000;

/// WorkRail's error code for a wfhost reason that has a WorkRail
/// equivalent; None where the code is the same in both, or wfhost's own
/// (`ACK_ALREADY_USED`: WorkRail replays a repeat whatever its output;
/// wfhost refuses one with different output).
pub fn workrail_code(reason: &str) -> Option<&'static str> {
    Some(match reason {
        "RUN_BUSY" => "TOKEN_SESSION_LOCKED",
        "TOKEN_WRONG_KIND" => "TOKEN_SCOPE_MISMATCH",
        "TOKEN_KEY_RETIRED" => "TOKEN_BAD_SIGNATURE",
        "TOKEN_UNKNOWN_RUN" => "TOKEN_UNKNOWN_NODE",
        "WORKFLOW_NOT_FOUND" | "RUN_NOT_FOUND" | "SESSION_NOT_FOUND" => "NOT_FOUND",
        "RUN_NOT_WAITING" | "SNAPSHOT_NOT_CURRENT" | "TOO_MANY_ATTEMPTS" => "PRECONDITION_FAILED",
        "STORE_BUSY" => "INTERNAL_ERROR",
        _ => return None,
    })
}

impl From<TokenError> for ToolError {
    fn from(e: TokenError) -> ToolError {
        ToolError::new(e.code(), e.to_string())
    }
}

impl From<wfhost_store::StoreError> for ToolError {
    fn from(e: wfhost_store::StoreError) -> ToolError {
        match e {
            wfhost_store::StoreError::Busy { run_id, .. } => ToolError::busy(&run_id),
            wfhost_store::StoreError::Locked { .. } => {
                ToolError::new("STORE_BUSY", e.to_string()).retry_after(250)
            }
            other if other.is_usage() => ToolError::new("PRECONDITION_FAILED", other.to_string()),
            other => ToolError::internal(other.to_string()),
        }
    }
}

impl From<wfhost_core::run::event::SinkError> for ToolError {
    fn from(e: wfhost_core::run::event::SinkError) -> ToolError {
        ToolError::internal(format!("cannot record the run's events: {}", e.0))
    }
}
