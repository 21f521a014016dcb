//! Seed 001's artifact content gates: a session's artifacts are checked
//! for content, not only existence. Each check takes the file's text
//! (`None`: it does not exist) and says exactly what is missing; a block
//! whose gate fails is `BLOCKED` with that message.
//!
//! - `spec.md`: Goals, Acceptance Criteria and Definition of Done
//!   sections, each with content;
//! - `acceptance.json`: at least one criterion, each with a non-empty
//!   `id`, `description` and `verify`;
//! - `architecture.md`: Overview and Modules (or Components) sections with
//!   content; not checked in a lean session;
//! - `tasks.yaml`: at least one task, each with `id`, a valid `status`,
//!   `goal` and at least one `acceptance_checks` entry;
//! - `status.json`: parses, and satisfies the decision record rules.
//!
//! Also the task lifecycle: which `tasks.yaml` status changes an agent may
//! make ([`check_task_changes`]).

use saphyr::{LoadableYamlNode, Yaml};

use crate::agents::session_artifacts::TaskStatus;
use crate::limits;

/// The largest artifact read (a hostile agent may write anything): the
/// host's bound on any text it parses ([`limits::MAX_TEXT_BYTES`]).
pub const MAX_ARTIFACT_BYTES: usize = limits::MAX_TEXT_BYTES;

/// Whether the session writes an architecture (`full`) or not (`lean`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum SessionMode {
    Full,
    Lean,
}

/// An artifact a gate can check.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub enum Artifact {
    #[serde(rename = "spec.md")]
    Spec,
    #[serde(rename = "acceptance.json")]
    Acceptance,
    #[serde(rename = "architecture.md")]
    Architecture,
    #[serde(rename = "tasks.yaml")]
    Tasks,
    #[serde(rename = "status.json")]
    Status,
}

impl Artifact {
    pub const ALL: [Artifact; 5] = [
        Artifact::Spec,
        Artifact::Acceptance,
        Artifact::Architecture,
        Artifact::Tasks,
        Artifact::Status,
    ];

    pub fn file_name(self) -> &'static str {
        match self {
            Artifact::Spec => "spec.md",
            Artifact::Acceptance => "acceptance.json",
            Artifact::Architecture => "architecture.md",
            Artifact::Tasks => "tasks.yaml",
            Artifact::Status => "status.json",
        }
    }
}

/// Check one artifact's content; `Ok` when it passes (or is not checked
/// in this mode). The error names the file and what is wrong.
pub fn check(artifact: Artifact, text: Option<&str>, mode: SessionMode) -> Result<(), String> {
    if artifact == Artifact::Architecture && mode == SessionMode::Lean {
        return Ok(());
    }
    let name = artifact.file_name();
    let text = text.ok_or_else(|| format!("{name} is missing"))?;
    limits::size(text.len()).map_err(|e| format!("{name}: {e}"))?;
    limits::contained(name, || {
        check_text(artifact, text).map_err(|e| format!("{name}: {e}"))
    })
}

fn check_text(artifact: Artifact, text: &str) -> Result<(), String> {
    match artifact {
        Artifact::Spec => sections(
            text,
            &[
                &["goals", "goal"],
                &["acceptance criteria"],
                &["definition of done"],
            ],
        ),
        Artifact::Architecture => sections(
            text,
            &[
                &["overview"],
                &[
                    "modules",
                    "components",
                    "modules/components",
                    "modules and components",
                ],
            ],
        ),
        Artifact::Acceptance => acceptance(text),
        Artifact::Tasks => tasks(text).map(|_| ()),
        Artifact::Status => status(text),
    }
}

/// Markdown headings (ATX, `#`…`######`) and whether the section under
/// each has any text before the next heading.
fn headings(text: &str) -> Vec<(String, bool)> {
    let mut found: Vec<(String, bool)> = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
        }
        let level = trimmed.bytes().take_while(|b| *b == b'#').count();
        let is_heading =
            !fenced && (1..=6).contains(&level) && trimmed[level..].starts_with([' ', '\t']);
        if is_heading {
            let title = trimmed[level..].trim().trim_end_matches('#').trim();
            found.push((title.to_lowercase(), false));
        } else if !trimmed.trim().is_empty()
            && let Some(last) = found.last_mut()
        {
            last.1 = true;
        }
    }
    found
}

/// Each group of accepted titles names a section that must exist with
/// content (a title may carry a suffix: "Goals and non-goals").
fn sections(text: &str, required: &[&[&str]]) -> Result<(), String> {
    let found = headings(text);
    let mut problems = Vec::new();
    for titles in required {
        let matching: Vec<&(String, bool)> = found
            .iter()
            .filter(|(title, _)| {
                titles
                    .iter()
                    .any(|t| title == t || title.starts_with(&format!("{t} ")))
            })
            .collect();
        let label = titles[0];
        match matching.as_slice() {
            [] => problems.push(format!("no `{label}` section (a `#` heading)")),
            m if m.iter().all(|(_, content)| !content) => {
                problems.push(format!("the `{label}` section is empty"))
            }
            _ => {}
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

fn acceptance(text: &str) -> Result<(), String> {
    limits::json(text.as_bytes()).map_err(|e| e.to_string())?;
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let criteria = match &value {
        serde_json::Value::Array(items) => items,
        serde_json::Value::Object(map) => ["acceptance_criteria", "criteria"]
            .iter()
            .find_map(|k| map.get(*k)?.as_array())
            .ok_or("no criteria: expected an array, or an object with `acceptance_criteria` (or `criteria`)")?,
        _ => return Err("no criteria: expected an array of criteria".into()),
    };
    if criteria.is_empty() {
        return Err("has no acceptance criterion".into());
    }
    for (i, c) in criteria.iter().enumerate() {
        let field = |name: &str| match c.get(name) {
            Some(serde_json::Value::String(s)) => !s.trim().is_empty(),
            Some(serde_json::Value::Array(a)) => !a.is_empty(),
            _ => false,
        };
        let missing: Vec<&str> = ["id", "description", "verify"]
            .into_iter()
            .filter(|f| !field(f))
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "criterion {} has no (or an empty) {}",
                i + 1,
                missing.join(", ")
            ));
        }
    }
    Ok(())
}

/// A task as `tasks.yaml` holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRecord {
    pub id: String,
    pub status: TaskStatus,
}

/// Parse `tasks.yaml`: every task complete; at least one. The text is
/// measured against the host's bounds before it is loaded
/// ([`limits::yaml`]: size, nesting depth, nodes with aliases expanded),
/// so a hostile one is refused with the bound it breaks, never loaded.
pub fn tasks(text: &str) -> Result<Vec<TaskRecord>, String> {
    limits::yaml(text).map_err(|e| e.to_string())?;
    let docs = Yaml::load_from_str(text).map_err(|e| format!("not valid YAML: {e}"))?;
    let [doc] = docs.as_slice() else {
        return Err(format!("holds {} YAML documents, not one", docs.len()));
    };
    let list = doc
        .as_mapping_get("tasks")
        .unwrap_or(doc)
        .as_vec()
        .ok_or("no task list: expected `tasks:` with a list of tasks")?;
    if list.is_empty() {
        return Err("has no task".into());
    }
    let mut records = Vec::new();
    for (i, task) in list.iter().enumerate() {
        let at = |m: &str| format!("task {}: {m}", i + 1);
        let text_of = |key: &str| {
            task.as_mapping_get(key)
                .and_then(scalar_text)
                .filter(|s| !s.trim().is_empty())
        };
        let id = text_of("id").ok_or_else(|| at("no `id`"))?;
        let at = |m: &str| format!("task {} (`{id}`): {m}", i + 1);
        text_of("goal").ok_or_else(|| at("no `goal`"))?;
        let status_text = text_of("status").ok_or_else(|| at("no `status`"))?;
        let status: TaskStatus = serde_json::from_value(serde_json::Value::String(status_text.clone()))
            .map_err(|_| at(&format!("status `{status_text}` is not not-started, in-progress, implemented, completed or blocked")))?;
        let checks = task
            .as_mapping_get("acceptance_checks")
            .and_then(Yaml::as_vec);
        if !checks.is_some_and(|c| {
            !c.is_empty()
                && c.iter()
                    .all(|e| scalar_text(e).is_some_and(|s| !s.trim().is_empty()))
        }) {
            return Err(at("no `acceptance_checks` (a list of at least one check)"));
        }
        if records.iter().any(|r: &TaskRecord| r.id == id) {
            return Err(at("its id is used twice"));
        }
        records.push(TaskRecord { id, status });
    }
    Ok(records)
}

fn scalar_text(node: &Yaml) -> Option<String> {
    match node {
        Yaml::Value(saphyr::Scalar::String(s)) => Some(s.to_string()),
        Yaml::Value(saphyr::Scalar::Integer(n)) => Some(n.to_string()),
        Yaml::Value(saphyr::Scalar::FloatingPoint(f)) => Some(f.to_string()),
        Yaml::Value(saphyr::Scalar::Boolean(b)) => Some(b.to_string()),
        _ => None,
    }
}

fn status(text: &str) -> Result<(), String> {
    limits::json(text.as_bytes()).map_err(|e| e.to_string())?;
    // An agent's own fields (`runtime_flags`, …) are its business: the
    // fields the contract defines are checked.
    let object: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(text).map_err(|e| format!("not a valid status.json: {e}"))?;
    crate::agents::status_merge::host_view(&object)
        .map(|_| ())
        .map_err(|e| format!("not a valid status.json: {e}"))
}

/// Who changes `tasks.yaml`: an agent by its block type, or the host (the
/// orchestrator, the only one that promotes a task to `completed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Changer {
    /// A `plan` agent: creates tasks (`not-started`).
    Planner,
    /// A `dev` agent: `in-progress`, `implemented`.
    Coder,
    /// Any other agent (review, test, devops): may only mark `blocked`.
    Other,
}

/// Check an agent's edit of `tasks.yaml` (`before`: the file before it ran,
/// `None` if there was none) against the lifecycle: a Planner adds tasks as
/// `not-started`; a Coder moves its tasks to `in-progress` and
/// `implemented`, never `completed`; anyone may mark a task `blocked`; no
/// agent removes a task or sets `completed`. Every illegal change is
/// reported. A hostile file (beyond [`limits`]) is refused like a
/// malformed one, and a check that panics is an error too.
pub fn check_task_changes(
    changer: Changer,
    before: Option<&str>,
    after: &str,
) -> Result<(), String> {
    limits::contained("tasks.yaml", || task_changes(changer, before, after))
}

fn task_changes(changer: Changer, before: Option<&str>, after: &str) -> Result<(), String> {
    use TaskStatus::*;
    let old = match before {
        Some(text) => tasks(text).unwrap_or_default(),
        None => Vec::new(),
    };
    let new = tasks(after).map_err(|e| format!("tasks.yaml: {e}"))?;
    let mut illegal = Vec::new();
    for task in &new {
        let from = old.iter().find(|t| t.id == task.id).map(|t| t.status);
        let allowed = match (changer, from, task.status) {
            (_, Some(a), b) if a == b => true,
            (_, _, Blocked) => true,
            (_, _, Completed) => false,
            (Changer::Planner, None, NotStarted) => true,
            // One dispatch may take a task from its start to implemented.
            (Changer::Coder, Some(NotStarted | Blocked | Implemented), InProgress) => true,
            (Changer::Coder, Some(NotStarted | Blocked | InProgress), Implemented) => true,
            _ => false,
        };
        if !allowed {
            let from = from.map_or("(new)".to_string(), |s| format!("`{}`", status_name(s)));
            illegal.push(format!(
                "task `{}`: {from} → `{}`",
                task.id,
                status_name(task.status)
            ));
        }
    }
    for task in &old {
        if !new.iter().any(|t| t.id == task.id) {
            illegal.push(format!("task `{}` was removed", task.id));
        }
    }
    if illegal.is_empty() {
        return Ok(());
    }
    let who = match changer {
        Changer::Planner => "a Planner may add tasks as `not-started`",
        Changer::Coder => "a Coder may set `in-progress` or `implemented`, never `completed`",
        Changer::Other => "this agent may only mark tasks `blocked`",
    };
    Err(format!(
        "tasks.yaml: illegal status changes ({who}; only the host sets `completed`, once the task's gates passed): {}",
        illegal.join("; ")
    ))
}

fn status_name(status: TaskStatus) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = "# Spec\n\n## Goals\nA CLI.\n\n## Acceptance Criteria\n- AC-1\n\n## Definition of Done\nTests pass.\n";

    #[test]
    fn spec_needs_its_three_sections_with_content() {
        check(Artifact::Spec, Some(SPEC), SessionMode::Full).unwrap();
        let no_dod = SPEC.replace("## Definition of Done\nTests pass.\n", "");
        let e = check(Artifact::Spec, Some(&no_dod), SessionMode::Full).unwrap_err();
        assert!(
            e.contains("spec.md") && e.contains("`definition of done`"),
            "{e}"
        );
        let empty_goals = SPEC.replace("A CLI.\n", "");
        let e = check(Artifact::Spec, Some(&empty_goals), SessionMode::Full).unwrap_err();
        assert!(e.contains("`goals` section is empty"), "{e}");
        let fenced = "```\n# Goals\nx\n```\n";
        assert!(check(Artifact::Spec, Some(fenced), SessionMode::Full).is_err());
        let e = check(Artifact::Spec, None, SessionMode::Full).unwrap_err();
        assert_eq!(e, "spec.md is missing");
    }

    #[test]
    fn architecture_is_checked_only_in_full_mode() {
        let good = "# Overview\nTwo parts.\n# Modules\n- cli\n";
        check(Artifact::Architecture, Some(good), SessionMode::Full).unwrap();
        let components = "# Overview\nx\n## Components\n- y\n";
        check(Artifact::Architecture, Some(components), SessionMode::Full).unwrap();
        let e = check(
            Artifact::Architecture,
            Some("# Overview\nx\n"),
            SessionMode::Full,
        )
        .unwrap_err();
        assert!(e.contains("no `modules` section"), "{e}");
        check(Artifact::Architecture, None, SessionMode::Lean).unwrap();
    }

    #[test]
    fn acceptance_needs_complete_criteria() {
        let ok = r#"{"acceptance_criteria": [{"id": "AC-1", "description": "d", "verify": "cmd: make test"}]}"#;
        check(Artifact::Acceptance, Some(ok), SessionMode::Full).unwrap();
        check(
            Artifact::Acceptance,
            Some(r#"[{"id": "AC-1", "description": "d", "verify": ["cmd: x"]}]"#),
            SessionMode::Full,
        )
        .unwrap();
        for (text, says) in [
            ("{", "not valid JSON"),
            (r#"{"acceptance_criteria": []}"#, "no acceptance criterion"),
            (
                r#"[{"id": "AC-1", "description": "d"}]"#,
                "criterion 1 has no (or an empty) verify",
            ),
            (
                r#"[{"id": " ", "description": "d", "verify": "v"}]"#,
                "no (or an empty) id",
            ),
            (r#""text""#, "no criteria"),
        ] {
            let e = check(Artifact::Acceptance, Some(text), SessionMode::Full).unwrap_err();
            assert!(
                e.starts_with("acceptance.json: ") && e.contains(says),
                "{text}: {e}"
            );
        }
    }

    const TASKS: &str = "tasks:\n  - id: T-001\n    goal: parse args\n    status: not-started\n    acceptance_checks:\n      - \"cmd: cargo test\"\n";

    #[test]
    fn tasks_need_id_status_goal_and_checks() {
        check(Artifact::Tasks, Some(TASKS), SessionMode::Full).unwrap();
        assert_eq!(
            tasks(TASKS).unwrap(),
            [TaskRecord {
                id: "T-001".into(),
                status: TaskStatus::NotStarted
            }]
        );
        for (text, says) in [
            ("tasks: []\n", "has no task"),
            ("tasks: [\n", "not valid YAML"),
            ("other: 1\n", "no task list"),
            (
                &TASKS.replace("    goal: parse args\n", ""),
                "task 1 (`T-001`): no `goal`",
            ),
            (&TASKS.replace("not-started", "done"), "status `done`"),
            (
                &TASKS.replace(
                    "    acceptance_checks:\n      - \"cmd: cargo test\"\n",
                    "    acceptance_checks: []\n",
                ),
                "no `acceptance_checks`",
            ),
        ] {
            let e = check(Artifact::Tasks, Some(text), SessionMode::Full).unwrap_err();
            assert!(
                e.starts_with("tasks.yaml: ") && e.contains(says),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn a_hostile_yaml_is_refused_without_blowing_up() {
        // On a stack smaller than the fiber an agent's check runs on: what
        // is refused never recursed, what passes fits.
        crate::limits::tests::on_small_stack(|| {
            let refused = |text: &str, says: &str| {
                let started = std::time::Instant::now();
                let e = check(Artifact::Tasks, Some(text), SessionMode::Full).unwrap_err();
                assert!(
                    e.starts_with("tasks.yaml: ") && e.contains(says),
                    "{}…: {e}",
                    &text[..text.len().min(40)]
                );
                let e = check_task_changes(Changer::Planner, None, text).unwrap_err();
                assert!(e.starts_with("tasks.yaml: ") && e.contains(says), "{e}");
                assert!(
                    started.elapsed() < std::time::Duration::from_secs(5),
                    "too slow: {:?}",
                    started.elapsed()
                );
            };
            let deep = "nested more than 64 levels deep (the host's limit)";
            // Block nesting, 2 KB: the file that took the host down.
            let block = |levels: usize| format!("tasks:\n  {}x\n", "- ".repeat(levels));
            refused(&block(1_000), deep);
            refused(&block(1_000_000), "larger than 1048576 bytes");
            // One level a line, indented.
            let indented: String = (0..200).map(|i| format!("{}-\n", " ".repeat(i))).collect();
            refused(&format!("tasks:\n{indented}"), deep);
            // Flow nesting.
            refused(
                &format!("tasks: {}{}", "[".repeat(1_000), "]".repeat(1_000)),
                deep,
            );
            refused(
                &format!("tasks: {}{}", "[".repeat(100_000), "]".repeat(100_000)),
                deep,
            );
            refused(&format!("tasks: {}x", "{a: ".repeat(100)), deep);
            // A billion laughs: 10^30 nodes once its aliases are expanded.
            let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
            for i in 1..30 {
                let p = i - 1;
                bomb.push_str(&format!("a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"));
            }
            bomb.push_str("tasks: *a29\n");
            refused(&bomb, "more than 100000 YAML nodes");
            let big = "#".repeat(MAX_ARTIFACT_BYTES + 1);
            refused(&big, "larger than");
            // Within the bounds, a real task list still parses here.
            let nested_goal = format!("{TASKS}    notes: {}x{}\n", "[".repeat(50), "]".repeat(50));
            assert_eq!(tasks(&nested_goal).unwrap().len(), 1);
        });
    }

    #[test]
    fn hostile_json_artifacts_are_refused_on_a_small_stack() {
        crate::limits::tests::on_small_stack(|| {
            let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
            for artifact in [Artifact::Acceptance, Artifact::Status] {
                let e = check(artifact, Some(&deep), SessionMode::Full).unwrap_err();
                assert!(e.contains("nested more than 64 levels deep"), "{e}");
            }
        });
    }

    #[test]
    fn status_must_parse_and_keep_the_decision_rules() {
        let ok = r#"{"current_state": "PLAN", "session": "2026-11-23_cli", "assumptions": [], "user_decisions": [], "retry_counts": {}, "known_issues": [], "last_ci_result": "unknown", "last_update": "2026-11-23T10:00:00Z"}"#;
        check(Artifact::Status, Some(ok), SessionMode::Full).unwrap();
        let pending_with_answer = ok.replace(
            r#""user_decisions": []"#,
            r#""user_decisions": [{"decision_id": "UD-1", "question": "q", "status": "pending", "answer": "yes", "asked_at": "2026-11-23T10:00:00Z", "resolved_at": null, "state_context": "PLAN", "resolution_reason": null}]"#,
        );
        let e = check(
            Artifact::Status,
            Some(&pending_with_answer),
            SessionMode::Full,
        )
        .unwrap_err();
        assert!(e.starts_with("status.json: ") && e.contains("UD-1"), "{e}");
        assert!(check(Artifact::Status, Some("{"), SessionMode::Full).is_err());
    }

    #[test]
    fn the_task_lifecycle_refuses_what_an_agent_may_not_do() {
        let with = |status: &str| TASKS.replace("not-started", status);
        check_task_changes(Changer::Planner, None, TASKS).unwrap();
        check_task_changes(Changer::Coder, Some(TASKS), &with("in-progress")).unwrap();
        check_task_changes(
            Changer::Coder,
            Some(&with("in-progress")),
            &with("implemented"),
        )
        .unwrap();
        check_task_changes(Changer::Other, Some(TASKS), &with("blocked")).unwrap();
        let e = check_task_changes(
            Changer::Coder,
            Some(&with("implemented")),
            &with("completed"),
        )
        .unwrap_err();
        assert!(
            e.contains("task `T-001`: `implemented` → `completed`")
                && e.contains("never `completed`"),
            "{e}"
        );
        check_task_changes(Changer::Coder, Some(TASKS), &with("implemented")).unwrap();
        let e =
            check_task_changes(Changer::Planner, Some(TASKS), &with("implemented")).unwrap_err();
        assert!(
            e.contains("`not-started` → `implemented`") && e.contains("a Planner may add"),
            "{e}"
        );
        let e = check_task_changes(Changer::Planner, None, &with("completed")).unwrap_err();
        assert!(e.contains("(new) → `completed`"), "{e}");
        let two = format!(
            "{TASKS}  - id: T-002\n    goal: g\n    status: not-started\n    acceptance_checks: [\"x\"]\n"
        );
        let e = check_task_changes(Changer::Planner, Some(&two), TASKS).unwrap_err();
        assert!(e.contains("task `T-002` was removed"), "{e}");
        let e = check_task_changes(Changer::Other, Some(TASKS), &with("in-progress")).unwrap_err();
        assert!(e.contains("may only mark tasks `blocked`"), "{e}");
    }
}
