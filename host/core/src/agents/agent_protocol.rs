//! The JSON agent protocol of seed 001: an agent gets the universal input
//! JSON on stdin and must answer with the universal output JSON on stdout,
//! and nothing else. Anything that is not exactly one such object is a
//! protocol error, never a guess.
//!
//! Pure types and checks; running the agent belongs to the executors.

use serde::{Deserialize, Serialize};

/// What kind of project the agent works on (checklists depend on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProjectType {
    Web,
    Api,
    Cli,
    Lib,
    Mixed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeType {
    Added,
    Modified,
    Deleted,
    Renamed,
}

/// A file the session changed, for reviewers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangedFile {
    pub path: String,
    pub change_type: ChangeType,
    /// Required when `change_type` is `renamed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
}

/// The task an agent is dispatched with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// `T-XXX` or `meta`.
    pub id: String,
    pub title: String,
    pub goal: String,
    #[serde(default)]
    pub non_goals: Vec<String>,
    #[serde(default)]
    pub context_files: Vec<String>,
    #[serde(default)]
    pub session_changed_files: Vec<ChangedFile>,
    #[serde(default)]
    pub constraints: Vec<String>,
    #[serde(default)]
    pub acceptance_checks: Vec<String>,
    #[serde(default)]
    pub risk_flags: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CiStatus {
    Unknown,
    Green,
    Red,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepoState {
    pub branch: String,
    pub ci_status: CiStatus,
    #[serde(default)]
    pub last_failed_step: Option<String>,
}

/// The universal input JSON, written to the agent's stdin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentInput {
    pub task: Task,
    pub project_type: ProjectType,
    pub repo_state: RepoState,
    pub tools_available: Vec<String>,
    #[serde(default)]
    pub artifact_list: Vec<String>,
}

impl AgentInput {
    /// Check what serde cannot: a rename names its old path.
    pub fn validate(&self) -> Result<(), String> {
        for (i, f) in self.task.session_changed_files.iter().enumerate() {
            match (f.change_type, &f.old_path) {
                (ChangeType::Renamed, None) => {
                    return Err(format!(
                        "task.session_changed_files[{i}] (`{}`) is renamed but has no old_path",
                        f.path
                    ));
                }
                (ChangeType::Renamed, Some(_)) | (_, None) => {}
                (_, Some(_)) => {
                    return Err(format!(
                        "task.session_changed_files[{i}] (`{}`) has an old_path but is not renamed",
                        f.path
                    ));
                }
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AgentStatus {
    Ok,
    Blocked,
    NeedsInfo,
    NeedsDecision,
    Fail,
}

/// What an agent produced besides its status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Artifacts {
    #[serde(default)]
    pub files_to_create_or_update: Vec<String>,
    #[serde(default)]
    pub files_changed: Vec<String>,
    #[serde(default)]
    pub tests_added_or_updated: Vec<String>,
    #[serde(default)]
    pub commands_to_run: Vec<String>,
    #[serde(default)]
    pub manual_steps: Vec<String>,
    #[serde(default)]
    pub review_comments: Vec<String>,
    #[serde(default)]
    pub findings: Vec<String>,
    #[serde(default)]
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gates {
    pub meets_definition_of_done: bool,
    pub needs_review: bool,
    pub needs_tests: bool,
    #[serde(default)]
    pub security_concerns: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Next {
    pub recommended_agent: String,
    pub recommended_task_id: String,
    pub reason: String,
}

/// The universal output JSON, read from the agent's stdout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentOutput {
    pub status: AgentStatus,
    pub summary: String,
    pub artifacts: Artifacts,
    pub gates: Gates,
    #[serde(default)]
    pub next: Option<Next>,
}

/// The canonical agent names a `recommended_agent` must be one of.
pub const AGENTS: &[&str] = &[
    "SpecAgent",
    "Architect",
    "Planner",
    "Designer",
    "Researcher",
    "Coder",
    "Reviewer",
    "QA",
    "Security",
    "Integrator",
    "Docs",
    "Orchestrator",
];

/// The contract agent a block plays: the first of [`AGENTS`] its prompt
/// prefix names as a word (`You are the Architect.`), else the one its
/// block id is (any case); `None` when neither names one.
pub fn agent_name(block_id: &str, prompt_prefix: Option<&str>) -> Option<&'static str> {
    let words: Vec<&str> = prompt_prefix
        .unwrap_or_default()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    words
        .iter()
        .find_map(|w| AGENTS.iter().find(|a| *a == w))
        .or_else(|| AGENTS.iter().find(|a| a.eq_ignore_ascii_case(block_id)))
        .copied()
}

/// Why an agent's stdout does not follow the protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("protocol error: {0}")]
pub struct ProtocolError(pub String);

/// Parse an agent's whole stdout: exactly one output object, surrounded by
/// nothing but whitespace.
pub fn parse_output(stdout: &[u8]) -> Result<AgentOutput, ProtocolError> {
    let text = std::str::from_utf8(stdout)
        .map_err(|e| ProtocolError(format!("stdout is not UTF-8 ({e})")))?;
    if text.trim().is_empty() {
        return Err(ProtocolError("the agent printed nothing".into()));
    }
    if !text.trim_start().starts_with('{') {
        return Err(ProtocolError(format!(
            "stdout must be JSON only, but it starts with `{}`",
            preview(text.trim_start())
        )));
    }
    crate::limits::json_depth(stdout)
        .map_err(|e| ProtocolError(format!("the output JSON is {e}")))?;
    let mut de = serde_json::Deserializer::from_str(text);
    let output: AgentOutput = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| ProtocolError(format!("the output JSON does not fit the contract: {e}")))?;
    de.end().map_err(|_| {
        let consumed = text.trim_end();
        ProtocolError(format!(
            "stdout must be JSON only, but text follows the object (…`{}`)",
            preview_end(consumed)
        ))
    })?;
    if let Some(next) = &output.next
        && !AGENTS.contains(&next.recommended_agent.as_str())
    {
        return Err(ProtocolError(format!(
            "next.recommended_agent `{}` is not one of {}",
            next.recommended_agent,
            AGENTS.join(", ")
        )));
    }
    Ok(output)
}

/// The statuses seed 001 reserves to some roles, with the roles allowed
/// each: `NEEDS_INFO` is the Researcher's, `NEEDS_DECISION` the
/// Security agent's. `OK`, `BLOCKED` and `FAIL` are every agent's.
pub const RESERVED_STATUSES: &[(AgentStatus, &[&str])] = &[
    (AgentStatus::NeedsInfo, &["Researcher"]),
    (AgentStatus::NeedsDecision, &["Security"]),
];

/// Check that the agent playing `role` (a name of [`AGENTS`], from
/// [`agent_name`]) may answer with its output's status: a status the
/// contract reserves to other roles is a protocol error that says which.
/// A block that plays no contract role (`None`) is outside the team
/// contract's roles and may use any status.
pub fn check_status_for_role(
    output: &AgentOutput,
    role: Option<&str>,
) -> Result<(), ProtocolError> {
    let Some(role) = role else {
        return Ok(());
    };
    let Some((_, allowed)) = RESERVED_STATUSES.iter().find(|(s, _)| *s == output.status) else {
        return Ok(());
    };
    if allowed.contains(&role) {
        return Ok(());
    }
    let status = serde_json::to_value(output.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    Err(ProtocolError(format!(
        "status `{status}` is used by {} only, and this block plays the {role}; answer OK, BLOCKED or FAIL",
        allowed.join(", ")
    )))
}

fn preview(s: &str) -> String {
    s.chars()
        .take(40)
        .collect::<String>()
        .escape_debug()
        .to_string()
}

fn preview_end(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let start = chars.len().saturating_sub(40);
    chars[start..]
        .iter()
        .collect::<String>()
        .escape_debug()
        .to_string()
}

/// What the engine does with an agent's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Select the block's transition with this signal.
    Signal(&'static str),
    /// Pause the run at a gate with this prompt (`NEEDS_DECISION`).
    Gate(String),
}

/// The status → signal mapping; `NEEDS_DECISION` opens a gate whose prompt
/// is the agent's summary.
pub fn verdict(output: &AgentOutput) -> Verdict {
    match output.status {
        AgentStatus::Ok => Verdict::Signal("SIGNAL:SUCCESS"),
        AgentStatus::Blocked => Verdict::Signal("SIGNAL:BLOCKED"),
        AgentStatus::NeedsInfo => Verdict::Signal("SIGNAL:NEEDS_INFO"),
        AgentStatus::Fail => Verdict::Signal("SIGNAL:FAIL"),
        AgentStatus::NeedsDecision => Verdict::Gate(output.summary.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocks_agent_is_named_by_its_prompt_prefix_or_its_id() {
        assert_eq!(
            agent_name("design", Some("You are the Architect.")),
            Some("Architect")
        );
        assert_eq!(agent_name("qa", Some("You check things.")), Some("QA"));
        assert_eq!(
            agent_name("x", Some("You are QAish, a Coder.")),
            Some("Coder")
        );
        assert_eq!(agent_name("draft", None), None);
    }

    fn output() -> serde_json::Value {
        serde_json::json!({
            "status": "OK",
            "summary": "Implemented T-001.",
            "artifacts": {"files_changed": ["src/app.rs"], "notes": ["none"]},
            "gates": {"meets_definition_of_done": true, "needs_review": true, "needs_tests": false, "security_concerns": []},
            "next": {"recommended_agent": "Reviewer", "recommended_task_id": "T-001", "reason": "review"}
        })
    }

    #[test]
    fn a_clean_answer_parses_and_every_status_has_its_verdict() {
        let text = format!("\n  {}\n", output());
        let out = parse_output(text.as_bytes()).unwrap();
        assert_eq!(out.artifacts.files_changed, ["src/app.rs"]);
        assert_eq!(verdict(&out), Verdict::Signal("SIGNAL:SUCCESS"));
        for (status, expected) in [
            ("BLOCKED", Verdict::Signal("SIGNAL:BLOCKED")),
            ("NEEDS_INFO", Verdict::Signal("SIGNAL:NEEDS_INFO")),
            ("FAIL", Verdict::Signal("SIGNAL:FAIL")),
            ("NEEDS_DECISION", Verdict::Gate("Implemented T-001.".into())),
        ] {
            let mut v = output();
            v["status"] = status.into();
            let out = parse_output(v.to_string().as_bytes()).unwrap();
            assert_eq!(verdict(&out), expected, "{status}");
        }
    }

    #[test]
    fn reserved_statuses_come_only_from_their_roles() {
        let with = |status: &str| {
            let mut v = output();
            v["status"] = status.into();
            parse_output(v.to_string().as_bytes()).unwrap()
        };
        for (status, allowed) in [("NEEDS_INFO", "Researcher"), ("NEEDS_DECISION", "Security")] {
            let out = with(status);
            assert_eq!(check_status_for_role(&out, Some(allowed)), Ok(()));
            assert_eq!(check_status_for_role(&out, None), Ok(()), "no role");
            for role in AGENTS.iter().filter(|a| **a != allowed) {
                let e = check_status_for_role(&out, Some(role)).unwrap_err();
                assert!(
                    e.to_string().contains(&format!(
                        "status `{status}` is used by {allowed} only, and this block plays the {role}"
                    )),
                    "{e}"
                );
            }
        }
        for status in ["OK", "BLOCKED", "FAIL"] {
            for role in AGENTS {
                assert_eq!(check_status_for_role(&with(status), Some(role)), Ok(()));
            }
        }
    }

    #[test]
    fn anything_but_json_only_is_a_protocol_error() {
        let json = output().to_string();
        for (stdout, expected) in [
            (String::new(), "printed nothing"),
            ("   \n".to_string(), "printed nothing"),
            (
                format!("Here is my answer:\n{json}"),
                "starts with `Here is",
            ),
            (format!("```json\n{json}\n```"), "starts with ````json"),
            (format!("{json}\nDone!"), "text follows the object"),
            (format!("{json}{json}"), "text follows the object"),
            ("[1, 2]".to_string(), "starts with `[1"),
        ] {
            let err = parse_output(stdout.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(expected), "{stdout:?}: {err}");
        }
        let bad_utf8 = parse_output(b"{\xff}").unwrap_err().to_string();
        assert!(bad_utf8.contains("UTF-8"), "{bad_utf8}");
    }

    #[test]
    fn a_deeply_nested_answer_is_a_protocol_error() {
        crate::limits::tests::on_small_stack(|| {
            let deep = format!(
                r#"{{"status": "OK", "x": {}{}}}"#,
                "[".repeat(100_000),
                "]".repeat(100_000)
            );
            let e = parse_output(deep.as_bytes()).unwrap_err();
            assert!(e.0.contains("nested more than 64 levels deep"), "{e}");
        });
    }

    #[test]
    fn the_output_must_fit_the_contract() {
        let cases: Vec<(&str, serde_json::Value, &str)> = vec![
            ("status", "DONE".into(), "status"),
            ("summary", serde_json::Value::Null, "summary"),
            ("gates", serde_json::json!({"needs_review": true}), "gates"),
            ("surprise", true.into(), "unknown field"),
            (
                "next",
                serde_json::json!({"recommended_agent": "Intern", "recommended_task_id": "T-1", "reason": "x"}),
                "not one of",
            ),
        ];
        for (field, value, expected) in cases {
            let mut v = output();
            v[field] = value;
            let err = parse_output(v.to_string().as_bytes())
                .unwrap_err()
                .to_string();
            assert!(err.contains(expected), "{field}: {err}");
        }
        let mut no_next = output();
        no_next.as_object_mut().unwrap().remove("next");
        assert!(parse_output(no_next.to_string().as_bytes()).is_ok());
    }

    #[test]
    fn input_round_trips_and_renames_need_their_old_path() {
        let input: AgentInput = serde_json::from_value(serde_json::json!({
            "task": {
                "id": "T-001", "title": "Add a flag", "goal": "A --verbose flag",
                "session_changed_files": [
                    {"path": "src/new.rs", "old_path": "src/prev.rs", "change_type": "renamed"},
                    {"path": "src/app.rs", "change_type": "modified"}
                ]
            },
            "project_type": "cli",
            "repo_state": {"branch": "main", "ci_status": "unknown", "last_failed_step": null},
            "tools_available": ["run_cmd"]
        }))
        .unwrap();
        input.validate().unwrap();
        let back: AgentInput =
            serde_json::from_str(&serde_json::to_string(&input).unwrap()).unwrap();
        assert_eq!(back, input);

        let mut bad = input.clone();
        bad.task.session_changed_files[0].old_path = None;
        assert!(bad.validate().unwrap_err().contains("no old_path"));
        let mut bad = input;
        bad.task.session_changed_files[1].old_path = Some("x".into());
        assert!(bad.validate().unwrap_err().contains("not renamed"));
    }
}
