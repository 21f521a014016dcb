//! The text of execution replies: "text-first, JSON backbone".
//!
//! `workflow_start`, `workflow_advance`, `workflow_checkpoint` and their
//! WorkRail names answer with structured content (the JSON the tool's
//! output schema describes) and, as the text content, a rendering of it
//! for a reader: where the run is, the pending step's prompt, and the
//! call that goes on with its tokens — everything needed to continue for
//! a client that reads text only. The rendering is a pure function of the
//! JSON, so a repeated call (same reply) renders byte-identical text.
//! Discovery tools (`workflow_list`, `workflow_inspect`, …) mirror their
//! JSON as text instead.

use std::fmt::Write;

use serde_json::Value;

/// The tools whose replies are rendered as text.
pub const EXECUTION_TOOLS: &[&str] = &[
    "workflow_start",
    "start_workflow",
    "workflow_advance",
    "continue_workflow",
    "workflow_checkpoint",
    "checkpoint_workflow",
];

fn text<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// The text of a step reply (`StepReply` as JSON).
pub fn step_reply(reply: &Value) -> String {
    let mut out = String::new();
    let session = reply.get("session").cloned().unwrap_or(Value::Null);
    let status = text(reply, "status").unwrap_or("unknown");
    let _ = writeln!(
        out,
        "Run {} of workflow `{}`: {status}{}.",
        text(&session, "runId").unwrap_or("?"),
        text(&session, "workflowId").unwrap_or("?"),
        if reply.get("isComplete") == Some(&Value::Bool(true)) {
            " (complete)"
        } else {
            ""
        }
    );
    if reply.get("checkpointed") == Some(&Value::Bool(true)) {
        out.push_str("Notes recorded.\n");
    }
    if let Some(failure) = text(reply, "failure") {
        let _ = writeln!(out, "Failure: {failure}");
    }
    for warning in reply
        .get("warnings")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let _ = writeln!(
            out,
            "Warning {}: {}",
            text(warning, "code").unwrap_or("?"),
            text(warning, "message").unwrap_or("")
        );
    }
    if text(reply, "kind") == Some("blocked") {
        blocked(&mut out, reply);
    }
    if let Some(pending) = reply.get("pending").filter(|p| !p.is_null()) {
        pending_step(&mut out, pending);
    }
    references(&mut out, reply);
    if let Some(gate) = reply.get("gate").filter(|g| !g.is_null()) {
        let _ = write!(
            out,
            "\nWaiting for a person at gate {}: {}\nThey answer with: {}\n",
            text(gate, "id").unwrap_or("?"),
            text(gate, "prompt").unwrap_or(""),
            text(gate, "answerWith")
                .or_else(|| text(gate, "answer_with"))
                .unwrap_or("")
        );
    }
    next_call(&mut out, reply);
    out
}

/// Why the output was not accepted, and what to do.
fn blocked(out: &mut String, reply: &Value) {
    let blockers = reply
        .pointer("/blockers/blockers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "\n## Blocked: the output was not accepted; the step is still pending"
    );
    for b in &blockers {
        let _ = write!(
            out,
            "\n{} ({})\nWhat to do: {}\n",
            text(b, "message").unwrap_or(""),
            text(b, "code").unwrap_or("?"),
            text(b, "suggestedFix").unwrap_or("")
        );
    }
    for (title, key) in [("Issues", "issues"), ("Suggestions", "suggestions")] {
        let items: Vec<&str> = reply
            .pointer(&format!("/validation/{key}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if !items.is_empty() {
            let _ = writeln!(out, "\n{title}:");
            for item in items {
                let _ = writeln!(out, "- {item}");
            }
        }
    }
    if let Some(f) = reply.get("assessmentFollowup").filter(|f| !f.is_null()) {
        let _ = writeln!(
            out,
            "\nFollow-up required before retrying this step:\n- {}\n- {}",
            text(f, "title").unwrap_or(""),
            text(f, "guidance").unwrap_or("")
        );
    }
}

/// The workflow's references, on a start or a rehydrate.
fn references(out: &mut String, reply: &Value) {
    let Some(refs) = reply.get("references").and_then(Value::as_array) else {
        return;
    };
    if refs.is_empty() {
        return;
    }
    out.push_str("\n## Workflow references\n");
    for r in refs {
        let _ = writeln!(
            out,
            "- **{}**{}{}\n  Path: {}\n  Purpose: {}",
            text(r, "title").unwrap_or(""),
            if r.get("authoritative") == Some(&Value::Bool(true)) {
                " (authoritative)"
            } else {
                ""
            },
            if text(r, "status") == Some("unresolved") {
                " [unresolved]"
            } else {
                ""
            },
            text(r, "resolvedPath")
                .or_else(|| text(r, "source"))
                .unwrap_or(""),
            text(r, "purpose").unwrap_or("")
        );
    }
}

fn pending_step(out: &mut String, pending: &Value) {
    let _ = write!(
        out,
        "\n## Pending step `{}`: {}\n\n{}\n",
        text(pending, "stepId").unwrap_or("?"),
        text(pending, "title").unwrap_or(""),
        text(pending, "prompt").unwrap_or("").trim_end()
    );
    if pending.get("requireConfirmation") == Some(&Value::Bool(true)) {
        out.push_str("\nAsk the user to confirm before you continue.\n");
    }
    let signals: Vec<&str> = pending
        .get("signals")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if signals.len() > 1 {
        let _ = writeln!(out, "\nSignals (output.signal): {}", signals.join(", "));
    }
    if let Some(schema) = pending.get("outputSchema").filter(|s| !s.is_null()) {
        let _ = write!(
            out,
            "\nThe output must satisfy this JSON Schema:\n```json\n{schema}\n```\n"
        );
    }
}

fn next_call(out: &mut String, reply: &Value) {
    let intent = text(reply, "nextIntent").unwrap_or("");
    match reply.get("nextCall").filter(|c| !c.is_null()) {
        Some(call) => {
            let params = call.get("params").cloned().unwrap_or(Value::Null);
            let _ = write!(
                out,
                "\nNext ({intent}): call `{}` with\n```json\n{params}\n```\n",
                text(call, "tool").unwrap_or("?")
            );
        }
        None if !intent.is_empty() => {
            let _ = writeln!(out, "\nNext: {intent}.");
        }
        None => {}
    }
    if let Some(token) = text(reply, "checkpointToken") {
        let _ = writeln!(out, "Checkpoint token: {token}");
    }
}

/// The text of a refusal (`ToolError` as JSON).
pub fn error(error: &Value) -> String {
    let mut out = format!(
        "Error {}: {}\n",
        text(error, "code").unwrap_or("?"),
        text(error, "message").unwrap_or("")
    );
    if let Some(retry) = error.get("retry") {
        let advice = match text(retry, "kind") {
            Some("retryable_after_ms") => format!(
                "retry after {} ms",
                retry.get("afterMs").and_then(Value::as_u64).unwrap_or(0)
            ),
            Some("retryable_immediate") => "retry now".to_string(),
            _ => "do not retry the same call".to_string(),
        };
        let _ = writeln!(out, "Retry: {advice}.");
    }
    if let Some(details) = error.get("details").filter(|d| !d.is_null()) {
        let _ = write!(out, "Details:\n```json\n{details}\n```\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn waiting() -> Value {
        json!({
            "stateToken": "st1", "ackToken": "ak1", "isComplete": false, "status": "waiting",
            "pending": {"stepId": "plan", "title": "Plan", "prompt": "Write the plan.\n",
                        "requireConfirmation": true, "signals": ["SIGNAL:SUCCESS", "SIGNAL:NO"],
                        "outputSchema": {"type": "object"}},
            "nextIntent": "perform_pending_then_continue",
            "nextCall": {"tool": "workflow_advance", "params": {"stateToken": "st1", "ackToken": "ak1"}},
            "session": {"runId": "run-1", "workflowId": "demo"}
        })
    }

    #[test]
    fn a_waiting_reply_reads_as_the_step_and_the_call_that_goes_on() {
        let shown = step_reply(&waiting());
        assert!(
            shown.starts_with("Run run-1 of workflow `demo`: waiting.\n"),
            "{shown}"
        );
        assert!(
            shown.contains("## Pending step `plan`: Plan\n\nWrite the plan.\n"),
            "{shown}"
        );
        assert!(shown.contains("confirm before you continue"), "{shown}");
        assert!(shown.contains("SIGNAL:SUCCESS, SIGNAL:NO"), "{shown}");
        assert!(shown.contains(r#"{"type":"object"}"#), "{shown}");
        // The tokens are in the text: a text-only client can go on.
        assert!(
            shown.contains(r#"call `workflow_advance` with"#)
                && shown.contains(r#"{"ackToken":"ak1","stateToken":"st1"}"#),
            "{shown}"
        );
        assert_eq!(shown, step_reply(&waiting()), "deterministic");
    }

    #[test]
    fn a_finished_or_gated_reply_says_so() {
        let done = json!({"isComplete": true, "status": "failed", "failure": "boom",
                          "nextIntent": "complete", "session": {"runId": "r", "workflowId": "w"},
                          "warnings": [{"code": "W", "message": "careful"}]});
        let shown = step_reply(&done);
        assert!(shown.contains("failed (complete)"), "{shown}");
        assert!(shown.contains("Failure: boom"), "{shown}");
        assert!(shown.contains("Warning W: careful"), "{shown}");
        assert!(shown.contains("Next: complete."), "{shown}");
        let gated = json!({"status": "waiting_at_gate", "session": {},
                           "gate": {"id": "UD-1", "prompt": "Ship?", "answer_with": "wfhost gate r UD-1 approved"}});
        assert!(step_reply(&gated).contains("gate UD-1: Ship?\nThey answer with: wfhost gate"));
    }

    #[test]
    fn a_blocked_reply_says_why_and_keeps_the_way_on() {
        let mut reply = waiting();
        reply["kind"] = json!("blocked");
        reply["blockers"] = json!({"blockers": [{"code": "MISSING_REQUIRED_NOTES",
            "pointer": {"kind": "workflow_step", "stepId": "plan"},
            "message": "Step plan needs notes.", "suggestedFix": "Add notes."}]});
        reply["validation"] = json!({"issues": ["no notes"], "suggestions": ["write some"]});
        let shown = step_reply(&reply);
        assert!(shown.contains("## Blocked"), "{shown}");
        assert!(
            shown.contains(
                "Step plan needs notes. (MISSING_REQUIRED_NOTES)\nWhat to do: Add notes."
            ),
            "{shown}"
        );
        assert!(shown.contains("Issues:\n- no notes"), "{shown}");
        assert!(shown.contains("call `workflow_advance`"), "{shown}");
    }

    #[test]
    fn an_error_reads_as_its_code_message_and_retry_advice() {
        let shown = error(&json!({"code": "RUN_BUSY", "message": "busy",
                                  "retry": {"kind": "retryable_after_ms", "afterMs": 1000},
                                  "details": {"runId": "r"}}));
        assert_eq!(
            shown,
            "Error RUN_BUSY: busy\nRetry: retry after 1000 ms.\nDetails:\n```json\n{\"runId\":\"r\"}\n```\n"
        );
    }
}
