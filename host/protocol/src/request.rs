//! What a surface asks of a run, and the answer it gets once the request
//! is durable (or refused). `wfhost serve` sends these to the process that
//! executes the run, as one JSON line on its standard input; the answer
//! comes back as one JSON line ([`Reply`]). Request data is only ever a
//! field's value: it never becomes a command-line argument.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::AppError;

/// A request to start or continue a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum RunRequest {
    /// Start a run of the workflow file `manifest` in `workspace` (both
    /// absolute paths) under the id `run_id`, chosen by the caller.
    Start {
        manifest: String,
        workspace: String,
        run_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inputs: Option<Map<String, Value>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_steps: Option<u64>,
        /// `local`, `container:IMAGE` or `slurm[:PARTITION]`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        executor: Option<String>,
    },
    /// Answer the gate `gate` of run `run_id` (the text `wfhost gate`
    /// takes: a decision, or a question gate's answers as JSON).
    Answer {
        run_id: String,
        gate: String,
        answer: String,
    },
    /// Continue an interrupted run (its last branch unless one is named).
    Resume {
        run_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        branch: Option<u32>,
    },
    /// A new branch of run `run_id` from the snapshot `at`.
    Fork { run_id: String, at: String },
    /// Bring what run `run_id` keeps outside the store up to date after
    /// its end was recorded elsewhere (a cancel through the API): its
    /// session files say so, no decision left pending.
    Settle { run_id: String },
}

impl RunRequest {
    /// The run the request is about.
    pub fn run_id(&self) -> &str {
        match self {
            RunRequest::Start { run_id, .. }
            | RunRequest::Answer { run_id, .. }
            | RunRequest::Resume { run_id, .. }
            | RunRequest::Fork { run_id, .. }
            | RunRequest::Settle { run_id } => run_id,
        }
    }
}

/// A request as a run process reads it: the request, and the trace
/// context of the span that sent it (when traces are exported), whose
/// child the run's spans become.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestLine {
    #[serde(flatten)]
    pub request: RunRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

/// What was made durable for an accepted request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accepted {
    /// The branch the run goes on in (a fork's new branch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<u32>,
}

/// The answer to a [`RunRequest`], sent once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// Recorded: the run goes on.
    Accepted(Accepted),
    /// Refused, with nothing recorded.
    Refused(AppError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_line_carries_its_trace_context_beside_the_request() {
        let request = RunRequest::Resume {
            run_id: "run-1".into(),
            branch: Some(2),
        };
        let traced = RequestLine {
            request: request.clone(),
            traceparent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()),
        };
        let line = serde_json::to_string(&traced).unwrap();
        assert_eq!(
            line,
            r#"{"op":"resume","run_id":"run-1","branch":2,"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}"#
        );
        assert_eq!(serde_json::from_str::<RequestLine>(&line).unwrap(), traced);
        // Without one, the line is the request's own.
        let plain = RequestLine {
            request: request.clone(),
            traceparent: None,
        };
        let line = serde_json::to_string(&plain).unwrap();
        assert_eq!(line, serde_json::to_string(&request).unwrap());
        assert_eq!(serde_json::from_str::<RequestLine>(&line).unwrap(), plain);
    }

    #[test]
    fn requests_and_replies_are_one_json_line_each() {
        let request = RunRequest::Answer {
            run_id: "run-1".into(),
            gate: "UD-1".into(),
            answer: "--help".into(),
        };
        let line = serde_json::to_string(&request).unwrap();
        assert_eq!(
            line,
            r#"{"op":"answer","run_id":"run-1","gate":"UD-1","answer":"--help"}"#
        );
        assert_eq!(serde_json::from_str::<RunRequest>(&line).unwrap(), request);
        let reply = Reply::Accepted(Accepted { branch: Some(2) });
        let line = serde_json::to_string(&reply).unwrap();
        assert_eq!(line, r#"{"accepted":{"branch":2}}"#);
        assert_eq!(serde_json::from_str::<Reply>(&line).unwrap(), reply);
        let refused: Reply =
            serde_json::from_str(r#"{"refused":{"kind":"busy","message":"m"}}"#).unwrap();
        assert_eq!(refused, Reply::Refused(AppError::busy("m")));
        assert!(serde_json::from_str::<RunRequest>(r#"{"op":"delete","run_id":"r"}"#).is_err());
    }
}
