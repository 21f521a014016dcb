//! `status.json` is shared: the host writes its projection of the run
//! ([`super::session_projection`]) after every event, and seed 001 tells
//! agents to keep the session-level state they change current in the same
//! file. This module merges the two, field by field, so that neither
//! side's fields are lost:
//!
//! - **The host's** ([`HOST_FIELDS`]): `current_state`, `session`,
//!   `user_decisions` (the orchestrator is their single writer),
//!   `retry_counts`, `gate_tracking` and `blocker`. The host's value is
//!   written. When the file held another value than the host last wrote,
//!   an agent changed it: that is a [`Conflict`], reported by the caller,
//!   never overwritten silently.
//! - **The agents'**: `assumptions` and `last_ci_result` (the agent's
//!   value is kept when it has the contract's type: a list of strings, one
//!   of `unknown` / `green` / `red`; otherwise the host's is written and
//!   that is a conflict too), and every field the host does not write
//!   (`runtime_flags`, an agent's own notes), kept as the agent wrote it.
//! - **Shared**: `known_issues` — the agent's list, minus the host's
//!   issues that were resolved since the host last wrote, plus the host's
//!   open issues not in it yet; `last_update` — the later of the two.
//!
//! Agents' files are hostile input: the file is read bounded by the
//! caller, its nesting checked ([`crate::limits::json`]); a file that is
//! no JSON object is replaced by the host's projection, and that is
//! reported.

use serde_json::{Map, Value};

use super::session_artifacts::SessionStatus;

/// The fields of `status.json` the host owns.
pub const HOST_FIELDS: &[&str] = &[
    "current_state",
    "session",
    "user_decisions",
    "retry_counts",
    "gate_tracking",
    "blocker",
];

/// The fields the contract gives agents, kept when they have its type.
const AGENT_FIELDS: &[&str] = &["assumptions", "last_ci_result"];

/// An agent changed a field the host owns (or wrote a field of the wrong
/// type, or a file that is no JSON object): the host's value was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The field (`""` for the whole file).
    pub field: String,
    /// What happened, for a warning.
    pub message: String,
}

/// The merged `status.json` and the conflicts found.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    pub status: Map<String, Value>,
    pub conflicts: Vec<Conflict>,
}

/// A short rendering of a JSON value for a message.
fn preview(value: Option<&Value>) -> String {
    let Some(value) = value else {
        return "nothing".into();
    };
    let text = value.to_string();
    if text.chars().count() > 80 {
        format!("{}…", text.chars().take(80).collect::<String>())
    } else {
        text
    }
}

fn strings(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// Merge the host's `status.json` (`ours`) with the file on disk
/// (`on_disk`, its bytes, `None` when there is none), given what the host
/// may have written last (`bases`: what this process wrote last, or — for
/// a process that just loaded the run — the projections after each of the
/// log's last events, since another process may have recorded a few
/// events without writing the files; empty when unknown, and then no
/// conflict can be told). A host field on disk that equals none of them
/// was changed by an agent. See the module docs for the rules.
pub fn merge(ours: &SessionStatus, bases: &[SessionStatus], on_disk: Option<&[u8]>) -> Merged {
    let ours_value = serde_json::to_value(ours).expect("a status serializes");
    let Value::Object(mut merged) = ours_value else {
        unreachable!("a status is an object")
    };
    let mut conflicts = Vec::new();
    let Some(bytes) = on_disk else {
        return Merged {
            status: merged,
            conflicts,
        };
    };
    let theirs = crate::limits::json(bytes)
        .map_err(|e| e.to_string())
        .and_then(|()| serde_json::from_slice::<Value>(bytes).map_err(|e| e.to_string()));
    let theirs = match theirs {
        Ok(Value::Object(map)) => map,
        Ok(_) => {
            conflicts.push(Conflict {
                field: String::new(),
                message: "status.json held no JSON object; the host's projection replaced it"
                    .into(),
            });
            return Merged {
                status: merged,
                conflicts,
            };
        }
        Err(e) => {
            conflicts.push(Conflict {
                field: String::new(),
                message: format!(
                    "status.json was not valid JSON ({e}); the host's projection replaced it"
                ),
            });
            return Merged {
                status: merged,
                conflicts,
            };
        }
    };
    let base_values: Vec<Value> = bases
        .iter()
        .map(|b| serde_json::to_value(b).expect("a status serializes"))
        .collect();
    for field in HOST_FIELDS {
        // What the host wrote is there: no agent touched it.
        let written = base_values
            .iter()
            .any(|b| theirs.get(*field) == b.get(*field));
        if !base_values.is_empty() && !written {
            conflicts.push(Conflict {
                field: field.to_string(),
                message: format!(
                    "an agent changed `{field}` of status.json, which the host owns, to {}; the host's value {} was written",
                    preview(theirs.get(*field)),
                    preview(merged.get(*field)),
                ),
            });
        }
    }
    for field in AGENT_FIELDS {
        let Some(value) = theirs.get(*field) else {
            continue;
        };
        let fits = match *field {
            "assumptions" => strings(value).is_some(),
            _ => value
                .as_str()
                .is_some_and(|v| ["unknown", "green", "red"].contains(&v)),
        };
        if fits {
            merged.insert(field.to_string(), value.clone());
        } else {
            conflicts.push(Conflict {
                field: field.to_string(),
                message: format!(
                    "`{field}` of status.json is {}, not what the contract says; the host's value {} was written",
                    preview(Some(value)),
                    preview(merged.get(*field)),
                ),
            });
        }
    }
    merged.insert(
        "known_issues".into(),
        Value::from(merge_issues(
            ours,
            bases,
            theirs.get("known_issues"),
            &mut conflicts,
        )),
    );
    if let Some(later) = theirs
        .get("last_update")
        .and_then(Value::as_str)
        .filter(|t| super::block_output::is_iso8601(t) && **t > *ours.last_update)
    {
        merged.insert("last_update".into(), later.into());
    }
    for (key, value) in theirs {
        if !merged.contains_key(&key) && !HOST_FIELDS.contains(&key.as_str()) {
            merged.insert(key, value);
        }
    }
    Merged {
        status: merged,
        conflicts,
    }
}

/// `known_issues`: the agent's list without the host's issues resolved
/// since `bases`, with the host's open ones appended.
fn merge_issues(
    ours: &SessionStatus,
    bases: &[SessionStatus],
    theirs: Option<&Value>,
    conflicts: &mut Vec<Conflict>,
) -> Vec<String> {
    let theirs = match theirs.map(|v| (v, strings(v))) {
        None => Vec::new(),
        Some((_, Some(list))) => list,
        Some((value, None)) => {
            conflicts.push(Conflict {
                field: "known_issues".into(),
                message: format!(
                    "`known_issues` of status.json is {}, not a list of strings; the host's issues were written",
                    preview(Some(value))
                ),
            });
            Vec::new()
        }
    };
    let resolved: Vec<&String> = bases
        .iter()
        .flat_map(|b| &b.known_issues)
        .filter(|i| !ours.known_issues.contains(i))
        .collect();
    let mut issues: Vec<String> = theirs
        .into_iter()
        .filter(|i| !resolved.contains(&i))
        .collect();
    for issue in &ours.known_issues {
        if !issues.contains(issue) {
            issues.push(issue.clone());
        }
    }
    issues
}

/// The host's view of a merged `status.json` (an object): its fields as a
/// [`SessionStatus`], the agents' own fields left out, validated.
pub fn host_view(status: &Map<String, Value>) -> Result<SessionStatus, String> {
    let known = [HOST_FIELDS, AGENT_FIELDS, &["known_issues", "last_update"]].concat();
    let view: Map<String, Value> = status
        .iter()
        .filter(|(k, _)| known.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let parsed: SessionStatus =
        serde_json::from_value(Value::Object(view)).map_err(|e| e.to_string())?;
    parsed.validate()?;
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::session_artifacts::{DecisionStatus, UserDecision};

    fn ours() -> SessionStatus {
        SessionStatus {
            current_state: "ASK_USER".into(),
            session: "2026-11-26_s".into(),
            assumptions: Vec::new(),
            user_decisions: vec![UserDecision {
                decision_id: "UD-1".into(),
                question: "Use sqlite or postgres?".into(),
                status: DecisionStatus::Pending,
                answer: None,
                asked_at: "2026-11-26T10:00:00Z".into(),
                resolved_at: None,
                state_context: "IMPLEMENT_LOOP".into(),
                resolution_reason: None,
            }],
            retry_counts: Default::default(),
            known_issues: vec!["main.a (step 0): timeout".into()],
            last_ci_result: "unknown".into(),
            last_update: "2026-11-26T10:00:00Z".into(),
            gate_tracking: None,
            blocker: None,
        }
    }

    fn disk(value: &Value) -> Vec<u8> {
        serde_json::to_vec(value).unwrap()
    }

    #[test]
    fn an_agents_own_fields_are_kept_and_issues_merged() {
        let base = ours();
        let mut theirs = serde_json::to_value(&base).unwrap();
        theirs["assumptions"] = serde_json::json!(["the API is internal"]);
        theirs["known_issues"] =
            serde_json::json!(["main.a (step 0): timeout", "flaky test in ci"]);
        theirs["last_ci_result"] = "red".into();
        theirs["runtime_flags"] = serde_json::json!({"copilot_instructions_exists": true});
        theirs["last_update"] = "2026-11-26T10:05:00Z".into();
        // The host moves on: the timeout is resolved, a new issue opens.
        let mut now = ours();
        now.current_state = "IMPLEMENT_LOOP".into();
        now.known_issues = vec!["main.b (step 1): exit 2".into()];
        now.last_update = "2026-11-26T10:03:00Z".into();
        let m = merge(&now, std::slice::from_ref(&base), Some(&disk(&theirs)));
        assert_eq!(m.conflicts, []);
        let s = &m.status;
        assert_eq!(s["current_state"], "IMPLEMENT_LOOP");
        assert_eq!(s["assumptions"], serde_json::json!(["the API is internal"]));
        assert_eq!(
            s["known_issues"],
            serde_json::json!(["flaky test in ci", "main.b (step 1): exit 2"])
        );
        assert_eq!(s["last_ci_result"], "red");
        assert_eq!(s["runtime_flags"]["copilot_instructions_exists"], true);
        assert_eq!(s["last_update"], "2026-11-26T10:05:00Z", "the later");
        let view = host_view(s).unwrap();
        assert_eq!(view.last_ci_result, "red");
        assert_eq!(view.user_decisions, now.user_decisions);
    }

    #[test]
    fn a_host_field_an_agent_changed_is_a_conflict_and_the_hosts_value_wins() {
        let base = ours();
        let mut theirs = serde_json::to_value(&base).unwrap();
        theirs["current_state"] = "DONE".into();
        theirs["user_decisions"][0]["status"] = "answered".into();
        theirs["user_decisions"][0]["answer"] = "sqlite".into();
        theirs["blocker"] = "mine".into();
        let m = merge(&base, std::slice::from_ref(&base), Some(&disk(&theirs)));
        let fields: Vec<&str> = m.conflicts.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["current_state", "user_decisions", "blocker"]);
        assert!(
            m.conflicts[0]
                .message
                .contains("changed `current_state` of status.json, which the host owns, to \"DONE\"; the host's value \"ASK_USER\" was written"),
            "{}",
            m.conflicts[0].message
        );
        assert_eq!(m.status["current_state"], "ASK_USER");
        assert!(m.status.get("blocker").is_none());
        assert_eq!(m.status["user_decisions"][0]["status"], "pending");
        // A file another process wrote after an earlier event is no
        // conflict: any of the recent projections may be on disk.
        let mut later = base.clone();
        later.current_state = "BLOCKED".into();
        let m2 = merge(
            &later,
            &[base.clone(), later.clone()],
            Some(&disk(&serde_json::to_value(&base).unwrap())),
        );
        assert_eq!(m2.conflicts, []);
        assert_eq!(m2.status["current_state"], "BLOCKED");
        // Written back, the next merge finds no conflict.
        let again = merge(
            &base,
            std::slice::from_ref(&base),
            Some(&disk(&Value::Object(m.status))),
        );
        assert_eq!(again.conflicts, []);
    }

    #[test]
    fn hostile_or_mistyped_files_are_replaced_and_reported() {
        let base = ours();
        for bytes in [
            b"not json".to_vec(),
            b"[1, 2]".to_vec(),
            format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)).into_bytes(),
        ] {
            let m = merge(&base, std::slice::from_ref(&base), Some(&bytes));
            assert_eq!(m.conflicts.len(), 1, "{:?}", m.conflicts);
            assert_eq!(host_view(&m.status).unwrap(), base);
        }
        let mut theirs = serde_json::to_value(&base).unwrap();
        theirs["assumptions"] = "just one".into();
        theirs["last_ci_result"] = "purple".into();
        theirs["known_issues"] = serde_json::json!([1]);
        let m = merge(&base, std::slice::from_ref(&base), Some(&disk(&theirs)));
        let fields: Vec<&str> = m.conflicts.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["assumptions", "last_ci_result", "known_issues"]);
        assert_eq!(host_view(&m.status).unwrap(), base);
        // No file, no base: the host's projection as it is.
        let m = merge(&base, &[], None);
        assert_eq!(host_view(&m.status).unwrap(), base);
    }
}
