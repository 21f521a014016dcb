//! The orchestrator artifacts of seed 001, `.agents-work/<session>/`
//! `status.json` and `tasks.yaml`: their types, the decision record
//! validity rules, and their rendering. They are projections of a run: the
//! engine derives them from its state and writes them atomically; this
//! module only says what they contain and checks it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// Workflow positions `status.json` may report.
pub const STATES: &[&str] = &[
    "INTAKE",
    "INTAKE_LEAN",
    "DESIGN",
    "APPROVE_DESIGN",
    "PLAN",
    "REVIEW_STRATEGY",
    "IMPLEMENT_LOOP",
    "INTEGRATE",
    "RELEASE",
    "DONE",
    "ASK_USER",
    "FIX_REVIEW",
    "FIX_TESTS",
    "FIX_SECURITY",
    "FIX_BUILD",
    "BLOCKED",
];

/// The first line of a `tasks.yaml` the host projects from the run's log;
/// a file without it was written by an agent (a team's Planner), which
/// then owns it: the host stops projecting and checks the task lifecycle.
pub const HOST_TASKS_MARK: &str =
    "# Projected by wfhost from the run's log; an agent that writes this file takes it over.";

/// Decision ids that name a mandatory gate; each at most once a session.
pub const WELL_KNOWN_DECISIONS: &[&str] = &["UD-APPROVE-DESIGN", "UD-REVIEW-STRATEGY"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecisionStatus {
    Pending,
    Answered,
    Cancelled,
    Skipped,
}

/// One `user_decisions[]` record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserDecision {
    /// `UD-<N>` or a well-known id.
    pub decision_id: String,
    pub question: String,
    pub status: DecisionStatus,
    pub answer: Option<String>,
    pub asked_at: String,
    pub resolved_at: Option<String>,
    /// The workflow state the decision was asked in.
    pub state_context: String,
    pub resolution_reason: Option<String>,
}

impl UserDecision {
    /// Seed 001's decision record validity rules.
    pub fn validate(&self) -> Result<(), String> {
        let id = &self.decision_id;
        let sequential = id
            .strip_prefix("UD-")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !sequential && !WELL_KNOWN_DECISIONS.contains(&id.as_str()) {
            return Err(format!(
                "decision_id `{id}` is neither `UD-<N>` nor one of {}",
                WELL_KNOWN_DECISIONS.join(", ")
            ));
        }
        let filled = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.trim().is_empty());
        let problem = match self.status {
            DecisionStatus::Pending if self.answer.is_some() => {
                Some("a pending decision has no answer")
            }
            DecisionStatus::Pending if self.resolved_at.is_some() => {
                Some("a pending decision has no resolved_at")
            }
            DecisionStatus::Pending if self.resolution_reason.is_some() => {
                Some("a pending decision has no resolution_reason")
            }
            DecisionStatus::Answered if !filled(&self.answer) => {
                Some("an answered decision needs a non-empty answer")
            }
            DecisionStatus::Answered if self.resolved_at.is_none() => {
                Some("an answered decision needs resolved_at")
            }
            DecisionStatus::Cancelled | DecisionStatus::Skipped if self.resolved_at.is_none() => {
                Some("a cancelled or skipped decision needs resolved_at")
            }
            DecisionStatus::Cancelled | DecisionStatus::Skipped
                if !filled(&self.resolution_reason) =>
            {
                Some("a cancelled or skipped decision needs a non-empty resolution_reason")
            }
            _ => None,
        };
        match problem {
            Some(p) => Err(format!("decision {id}: {p}")),
            None => Ok(()),
        }
    }
}

/// `status.json`: session-level state (per-task status lives in
/// `tasks.yaml` only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionStatus {
    pub current_state: String,
    /// `YYYY-MM-DD_<short-slug>`.
    pub session: String,
    pub assumptions: Vec<String>,
    pub user_decisions: Vec<UserDecision>,
    /// Task id → fix loop (`FIX_REVIEW`, …) → retries.
    pub retry_counts: BTreeMap<String, BTreeMap<String, u32>>,
    pub known_issues: Vec<String>,
    /// `unknown`, `green` or `red`.
    pub last_ci_result: String,
    pub last_update: String,
    /// Orchestrator-managed; absent until first used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_tracking: Option<GateTracking>,
    /// Why the session is `BLOCKED` (`mandatory_user_decision_missing`,
    /// `status_json_persistence`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocker: Option<String>,
}

/// `gate_tracking`: the correction flow of `UD-APPROVE-DESIGN`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateTracking {
    #[serde(rename = "APPROVE_DESIGN", default)]
    pub approve_design: ApproveDesignTracking,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApproveDesignTracking {
    /// A missing or null value means `none`.
    #[serde(default)]
    pub correction_status: CorrectionStatus,
    #[serde(default)]
    pub last_correction_dispatch: CorrectionDispatch,
}

/// `none` → `queued` (a `changes-requested` answer) → `dispatched` (the
/// block its transition leads to started) → `completed` (that block
/// completed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CorrectionStatus {
    #[default]
    None,
    Queued,
    Dispatched,
    Completed,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorrectionDispatch {
    /// The contract agent that does the correction (`Architect`; the
    /// block's `node.block` when it plays none).
    pub agent: Option<String>,
    pub task_id: Option<String>,
    pub at: Option<String>,
}

/// One line of `approve-design-history.jsonl`: a `changes-requested`
/// answer to `UD-APPROVE-DESIGN`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApproveDesignHistoryEntry {
    pub at: String,
    pub decision_id: String,
    pub answer: String,
    pub state_context: String,
}

/// The session file of the `UD-APPROVE-DESIGN` audit trail.
pub const APPROVE_DESIGN_HISTORY: &str = "approve-design-history.jsonl";

/// The blocker of a session whose `status.json` could not be written and
/// verified while decisions changed.
pub const PERSISTENCE_BLOCKER: &str = "status_json_persistence";

/// `approve-design-history.jsonl`: one JSON object a line.
pub fn render_history(entries: &[ApproveDesignHistoryEntry]) -> String {
    entries
        .iter()
        .map(|e| serde_json::to_string(e).expect("strings serialize") + "\n")
        .collect()
}

impl SessionStatus {
    pub fn validate(&self) -> Result<(), String> {
        if !STATES.contains(&self.current_state.as_str()) {
            return Err(format!(
                "current_state `{}` is not a workflow state",
                self.current_state
            ));
        }
        if !is_session_name(&self.session) {
            return Err(format!(
                "session `{}` is not `YYYY-MM-DD_<short-slug>`",
                self.session
            ));
        }
        if !["unknown", "green", "red"].contains(&self.last_ci_result.as_str()) {
            return Err(format!(
                "last_ci_result `{}` is not unknown, green or red",
                self.last_ci_result
            ));
        }
        let mut seen = BTreeSet::new();
        for d in &self.user_decisions {
            d.validate()?;
            if !seen.insert(d.decision_id.as_str()) {
                return Err(format!(
                    "decision_id `{}` appears more than once",
                    d.decision_id
                ));
            }
        }
        Ok(())
    }

    /// The id for the next ad-hoc decision: one past the highest `UD-<N>`.
    pub fn next_decision_id(&self) -> String {
        let highest = self
            .user_decisions
            .iter()
            .filter_map(|d| d.decision_id.strip_prefix("UD-")?.parse::<u64>().ok())
            .max()
            .unwrap_or(0);
        format!("UD-{}", highest + 1)
    }
}

/// `YYYY-MM-DD_<slug>` with a lowercase, dash-separated slug.
pub fn is_session_name(s: &str) -> bool {
    let Some((date, slug)) = s.split_once('_') else {
        return false;
    };
    let b = date.as_bytes();
    let date_ok = b.len() == 10
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        });
    date_ok
        && !slug.is_empty()
        && !slug.starts_with('-')
        && !slug.ends_with('-')
        && slug
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
}

/// A session name from a date (`YYYY-MM-DD`) and free text: the text
/// lowercased, runs of anything else turned into one dash, at most 40
/// characters.
pub fn session_name(date: &str, text: &str) -> String {
    let mut slug = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.ends_with('-') && !slug.is_empty() {
            slug.push('-');
        }
    }
    slug.truncate(40);
    let slug = slug.trim_matches('-');
    let slug = if slug.is_empty() { "session" } else { slug };
    format!("{date}_{slug}")
}

/// Per-task progress in `tasks.yaml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskStatus {
    NotStarted,
    InProgress,
    Implemented,
    Completed,
    Blocked,
}

impl TaskStatus {
    fn as_str(self) -> &'static str {
        match self {
            TaskStatus::NotStarted => "not-started",
            TaskStatus::InProgress => "in-progress",
            TaskStatus::Implemented => "implemented",
            TaskStatus::Completed => "completed",
            TaskStatus::Blocked => "blocked",
        }
    }
}

/// One task of `tasks.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskEntry {
    pub id: String,
    pub goal: String,
    pub status: TaskStatus,
    pub acceptance_checks: Vec<String>,
}

/// `tasks.yaml`. Every string is written as a double-quoted scalar (JSON
/// string syntax, which YAML reads the same), so no text can break the
/// document.
pub fn render_tasks_yaml(tasks: &[TaskEntry]) -> String {
    let q = |s: &str| serde_json::to_string(s).expect("strings serialize");
    let mut out = String::from("tasks:\n");
    if tasks.is_empty() {
        return "tasks: []\n".into();
    }
    for t in tasks {
        out.push_str(&format!("  - id: {}\n", q(&t.id)));
        out.push_str(&format!("    goal: {}\n", q(&t.goal)));
        out.push_str(&format!("    status: {}\n", t.status.as_str()));
        if t.acceptance_checks.is_empty() {
            out.push_str("    acceptance_checks: []\n");
        } else {
            out.push_str("    acceptance_checks:\n");
            for c in &t.acceptance_checks {
                out.push_str(&format!("      - {}\n", q(c)));
            }
        }
    }
    out
}

/// `tasks` (a `tasks.yaml` an agent keeps) with `status: implemented` made
/// `completed` for the tasks whose `id` is in `ids` (every task when
/// `None`): the orchestrator's promotion. `None` when there is none to
/// promote. Edited line by line, so the agent's file keeps its comments,
/// order and quoting: a task is a list item at the indentation of the
/// first item under `tasks:`; its `id` and `status` may come in any order.
pub fn promote_tasks(tasks: &str, ids: Option<&BTreeSet<String>>) -> Option<String> {
    let scalar = |v: &str| v.trim().trim_matches(['"', '\'']).to_string();
    let mut lines: Vec<String> = tasks.lines().map(str::to_string).collect();
    let mut item_indent: Option<usize> = None;
    let mut in_tasks = false;
    // The current item: its id and its `status: implemented` lines.
    let mut id: Option<String> = None;
    let mut implemented: Vec<usize> = Vec::new();
    let mut promote: Vec<usize> = Vec::new();
    let mut close = |id: &Option<String>, implemented: &mut Vec<usize>| {
        let chosen = ids.is_none_or(|ids| id.as_ref().is_some_and(|i| ids.contains(i)));
        if chosen {
            promote.append(implemented);
        }
        implemented.clear();
    };
    for (i, line) in lines.iter().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim_start();
        if indent == 0 && !trimmed.starts_with('-') && !trimmed.is_empty() {
            close(&id, &mut implemented);
            id = None;
            in_tasks = trimmed.starts_with("tasks:");
            continue;
        }
        if !in_tasks {
            continue;
        }
        let mut field = trimmed;
        if let Some(rest) = trimmed.strip_prefix("- ") {
            let start = *item_indent.get_or_insert(indent);
            if indent == start {
                close(&id, &mut implemented);
                id = None;
                field = rest.trim_start();
            }
        }
        if let Some(v) = field.strip_prefix("id:") {
            id = Some(scalar(v));
        } else if let Some(v) = field.strip_prefix("status:")
            && scalar(v) == "implemented"
        {
            implemented.push(i);
        }
    }
    close(&id, &mut implemented);
    if promote.is_empty() {
        return None;
    }
    for i in promote {
        lines[i] = lines[i].replacen("implemented", "completed", 1);
    }
    Some(lines.join("\n") + "\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn promotion_edits_only_the_chosen_tasks_in_any_field_order() {
        use super::promote_tasks;
        let planned = "# by the Planner\ntasks:\n  - id: T-001\n    goal: g\n    status: implemented\n    acceptance_checks:\n      - \"cmd: true\"\n  - goal: h\n    acceptance_checks: [x]\n    status: 'implemented'\n    id: \"T-002\"\n  - id: T-003\n    status: \"blocked\"\nnotes:\n  status: implemented\n";
        let ids = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
        let only_two = promote_tasks(planned, Some(&ids(&["T-002"]))).unwrap();
        assert_eq!(
            only_two,
            planned.replace("status: 'implemented'", "status: 'completed'"),
            "{only_two}"
        );
        let all = promote_tasks(planned, None).unwrap();
        assert!(
            all.contains("    status: completed\n    acceptance"),
            "{all}"
        );
        assert!(all.contains("status: 'completed'"), "{all}");
        assert!(all.contains("status: \"blocked\""), "{all}");
        assert!(
            all.ends_with("notes:\n  status: implemented\n"),
            "only tasks are promoted: {all}"
        );
        assert_eq!(promote_tasks(planned, Some(&ids(&["T-003", "T-9"]))), None);
    }

    use super::*;

    fn decision(status: DecisionStatus) -> UserDecision {
        UserDecision {
            decision_id: "UD-1".into(),
            question: "Ship it?".into(),
            status,
            answer: None,
            asked_at: "2026-11-22T12:00:00Z".into(),
            resolved_at: None,
            state_context: "IMPLEMENT_LOOP".into(),
            resolution_reason: None,
        }
    }

    #[test]
    fn decision_records_follow_the_validity_rules() {
        assert!(decision(DecisionStatus::Pending).validate().is_ok());
        let mut d = decision(DecisionStatus::Pending);
        d.answer = Some("approved".into());
        assert!(d.validate().unwrap_err().contains("pending"));

        let mut d = decision(DecisionStatus::Answered);
        assert!(d.validate().unwrap_err().contains("non-empty answer"));
        d.answer = Some("approved".into());
        assert!(d.validate().unwrap_err().contains("resolved_at"));
        d.resolved_at = Some("2026-11-22T12:01:00Z".into());
        assert!(d.validate().is_ok());

        for status in [DecisionStatus::Cancelled, DecisionStatus::Skipped] {
            let mut d = decision(status);
            d.resolved_at = Some("2026-11-22T12:01:00Z".into());
            assert!(d.validate().unwrap_err().contains("resolution_reason"));
            d.resolution_reason = Some(" ".into());
            assert!(d.validate().is_err(), "blank is not a reason");
            d.resolution_reason = Some("no response provided".into());
            assert!(d.validate().is_ok());
        }

        for id in ["UD-APPROVE-DESIGN", "UD-REVIEW-STRATEGY", "UD-42"] {
            let mut d = decision(DecisionStatus::Pending);
            d.decision_id = id.into();
            assert!(d.validate().is_ok(), "{id}");
        }
        for id in ["UD-", "UD-x", "ud-1", "UD-DESIGN"] {
            let mut d = decision(DecisionStatus::Pending);
            d.decision_id = id.into();
            assert!(d.validate().is_err(), "{id}");
        }
    }

    fn status() -> SessionStatus {
        SessionStatus {
            current_state: "IMPLEMENT_LOOP".into(),
            session: "2026-11-22_add-verbose-flag".into(),
            assumptions: vec![],
            user_decisions: vec![decision(DecisionStatus::Pending)],
            retry_counts: BTreeMap::new(),
            known_issues: vec![],
            last_ci_result: "unknown".into(),
            last_update: "2026-11-22T12:00:00Z".into(),
            gate_tracking: None,
            blocker: None,
        }
    }

    #[test]
    fn session_status_is_checked_whole() {
        assert!(status().validate().is_ok());
        let mut s = status();
        s.current_state = "SHIPPING".into();
        assert!(s.validate().unwrap_err().contains("SHIPPING"));
        let mut s = status();
        s.session = "add-verbose-flag".into();
        assert!(s.validate().is_err());
        let mut s = status();
        s.user_decisions.push(decision(DecisionStatus::Pending));
        assert!(s.validate().unwrap_err().contains("more than once"));
        let mut s = status();
        s.last_ci_result = "yellow".into();
        assert!(s.validate().is_err());

        let mut s = status();
        let mut approve = decision(DecisionStatus::Pending);
        approve.decision_id = "UD-APPROVE-DESIGN".into();
        s.user_decisions.push(approve);
        let mut seven = decision(DecisionStatus::Pending);
        seven.decision_id = "UD-7".into();
        s.user_decisions.push(seven);
        assert_eq!(s.next_decision_id(), "UD-8");
        // It round-trips as the JSON the contract names.
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["user_decisions"][0]["answer"], serde_json::Value::Null);
        let back: SessionStatus = serde_json::from_value(json).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn session_names() {
        assert_eq!(
            session_name("2026-11-22", "Add a --verbose flag!"),
            "2026-11-22_add-a-verbose-flag"
        );
        assert_eq!(session_name("2026-11-22", "!!!"), "2026-11-22_session");
        assert!(is_session_name(&session_name(
            "2026-11-22",
            &"x y ".repeat(30)
        )));
        for bad in [
            "2026-11-22_",
            "2026-11-22_Caps",
            "2026-1-22_x",
            "x_y",
            "2026-11-22_-x",
        ] {
            assert!(!is_session_name(bad), "{bad}");
        }
    }

    #[test]
    fn tasks_yaml_quotes_every_string() {
        let yaml = render_tasks_yaml(&[
            TaskEntry {
                id: "T-001".into(),
                goal: "Fix: \"quotes\", colons and\nnewlines # not a comment".into(),
                status: TaskStatus::InProgress,
                acceptance_checks: vec!["cmd: cargo test".into()],
            },
            TaskEntry {
                id: "T-002".into(),
                goal: "Docs".into(),
                status: TaskStatus::NotStarted,
                acceptance_checks: vec![],
            },
        ]);
        assert_eq!(
            yaml,
            "tasks:\n  - id: \"T-001\"\n    goal: \"Fix: \\\"quotes\\\", colons and\\nnewlines # not a comment\"\n    status: in-progress\n    acceptance_checks:\n      - \"cmd: cargo test\"\n  - id: \"T-002\"\n    goal: \"Docs\"\n    status: not-started\n    acceptance_checks: []\n"
        );
        assert_eq!(render_tasks_yaml(&[]), "tasks: []\n");
    }
}
