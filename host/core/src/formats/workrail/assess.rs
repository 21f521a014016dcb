//! WorkRail assessments: a workflow declares them (`assessments`: ids,
//! dimensions, the levels of each), a step asks for some
//! (`assessmentRefs`) and may name consequences (`assessmentConsequences`:
//! when a dimension of a recorded assessment is at a level, a follow-up is
//! required before the step can go on).
//!
//! Compiled, an assessed step's block carries `config.assessments`:
//! `{"definitions": [the referenced assessments], "consequences": [...]}`;
//! the MCP server checks each submitted `wr.assessment` artifact against it
//! ([`check`]) and blocks the advance, retryably, on a matched consequence.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::WorkRailError;
use super::flow::Step;

/// A declared assessment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assessment {
    pub id: String,
    pub purpose: String,
    pub dimensions: Vec<Dimension>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dimension {
    pub id: String,
    pub purpose: String,
    pub levels: Vec<String>,
    #[serde(default = "yes")]
    pub required: bool,
}

fn yes() -> bool {
    true
}

/// "When a dimension is at this level, require a follow-up."
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Consequence {
    pub when: Trigger,
    pub effect: Effect,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Trigger {
    pub any_equals_level: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_assessment: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Effect {
    /// `require_followup`, the one kind there is.
    pub kind: String,
    pub guidance: String,
}

/// An assessed step: its block config and the prompt section.
pub(super) struct Assessed {
    pub config: Value,
    pub prompt: String,
}

/// The step's assessments, checked against the declared ones (errors at
/// the step's pointer); None for a step that asks for none.
pub(super) fn for_step(
    at: &str,
    step: &Step,
    declared: &[Assessment],
    errors: &mut Vec<WorkRailError>,
) -> Option<Assessed> {
    if step.assessment_refs.is_empty() {
        if !step.assessment_consequences.is_empty() {
            errors.push((
                format!("{at}/assessmentConsequences"),
                "consequences need the step's `assessmentRefs`".into(),
            ));
        }
        return None;
    }
    let mut used = Vec::new();
    for (i, id) in step.assessment_refs.iter().enumerate() {
        match declared.iter().find(|a| &a.id == id) {
            Some(a) => used.push(a.clone()),
            None => errors.push((
                format!("{at}/assessmentRefs/{i}"),
                format!(
                    "unknown assessment `{id}` (declared: {})",
                    declared
                        .iter()
                        .map(|a| a.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }
    check_consequences(at, step, &used, errors);
    let prompt = prompt_section(&used);
    Some(Assessed {
        config: json!({"definitions": used, "consequences": step.assessment_consequences}),
        prompt,
    })
}

fn check_consequences(at: &str, step: &Step, used: &[Assessment], errors: &mut Vec<WorkRailError>) {
    let mut seen = Vec::new();
    for (i, c) in step.assessment_consequences.iter().enumerate() {
        let here = format!("{at}/assessmentConsequences/{i}");
        if c.effect.kind != "require_followup" {
            errors.push((
                format!("{here}/effect/kind"),
                format!(
                    "unknown effect `{}` (the one kind is require_followup)",
                    c.effect.kind
                ),
            ));
        }
        let scope: Vec<&Assessment> = match &c.when.for_assessment {
            Some(id) => {
                let found: Vec<&Assessment> = used.iter().filter(|a| &a.id == id).collect();
                if found.is_empty() {
                    errors.push((
                        format!("{here}/when/forAssessment"),
                        format!("`{id}` is not one of the step's assessmentRefs"),
                    ));
                }
                found
            }
            None => used.iter().collect(),
        };
        let level = &c.when.any_equals_level;
        let known = scope
            .iter()
            .flat_map(|a| &a.dimensions)
            .any(|d| d.levels.contains(level));
        if !scope.is_empty() && !known {
            errors.push((
                format!("{here}/when/anyEqualsLevel"),
                format!("`{level}` is not a level of the assessment(s) it is about"),
            ));
        }
        let key = (level.clone(), c.when.for_assessment.clone());
        if seen.contains(&key) {
            errors.push((
                format!("{here}/when"),
                "two consequences have the same trigger".into(),
            ));
        }
        seen.push(key);
    }
}

/// What the prompt asks for: one `wr.assessment` artifact per assessment.
fn prompt_section(used: &[Assessment]) -> String {
    let mut lines = vec!["## Assessment".to_string()];
    for a in used {
        lines.push(format!(
            "- Send an artifact with `\"kind\": \"wr.assessment\"`{} in `output.artifacts`, assessing: {}",
            if used.len() > 1 {
                format!(" and `\"assessmentId\": \"{}\"`", a.id)
            } else {
                String::new()
            },
            a.purpose
        ));
        for d in &a.dimensions {
            lines.push(format!(
                "  - `{}` ({}){}: {}",
                d.id,
                d.levels.join(" | "),
                if d.required { "" } else { ", optional" },
                d.purpose
            ));
        }
        let first = a.dimensions.first();
        let example = json!({"artifacts": [{
            "kind": "wr.assessment",
            "assessmentId": a.id,
            "dimensions": {first.map_or("dimension", |d| d.id.as_str()):
                first.and_then(|d| d.levels.first()).map_or("level", String::as_str)},
        }]});
        lines.push(format!("  - For example: `{example}`"));
    }
    lines.push(
        "- Use only the levels listed; if the artifact is refused, correct the levels rather than inventing new ones."
            .into(),
    );
    lines.join("\n")
}

/// The workflow's `assessments`, checked: unique ids, dimensions with at
/// least two distinct levels.
pub(super) fn check_declared(declared: &[Assessment], errors: &mut Vec<WorkRailError>) {
    let mut ids = Vec::new();
    for (i, a) in declared.iter().enumerate() {
        if ids.contains(&&a.id) {
            errors.push((
                format!("/assessments/{i}/id"),
                format!("assessment `{}` is declared twice", a.id),
            ));
        }
        ids.push(&a.id);
        let mut dims = Vec::new();
        for (j, d) in a.dimensions.iter().enumerate() {
            let here = format!("/assessments/{i}/dimensions/{j}");
            if dims.contains(&&d.id) {
                errors.push((
                    format!("{here}/id"),
                    format!("dimension `{}` is declared twice", d.id),
                ));
            }
            dims.push(&d.id);
            let mut levels = d.levels.clone();
            levels.sort();
            levels.dedup();
            if levels.len() < 2 || levels.len() != d.levels.len() {
                errors.push((
                    format!("{here}/levels"),
                    "a dimension has at least two levels, each once".into(),
                ));
            }
        }
    }
}

/// A submitted assessment, as recorded: its id and each dimension's
/// (canonical) level.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Recorded {
    pub assessment_id: String,
    pub dimensions: Vec<(String, String)>,
    /// Levels given in another case or with spaces, and what they became.
    pub normalized: Vec<String>,
}

/// What a submission came to: the recorded assessments, the problems
/// (each a sentence), and the follow-ups its consequences require
/// (title, guidance).
#[derive(Debug, Default, PartialEq)]
pub struct Checked {
    pub recorded: Vec<Recorded>,
    pub issues: Vec<String>,
    pub followups: Vec<(String, String)>,
}

/// Check the `artifacts` of a submission against a block's
/// `config.assessments`.
pub fn check(config: &Value, artifacts: &[Value]) -> Checked {
    let definitions: Vec<Assessment> = config
        .get("definitions")
        .cloned()
        .and_then(|d| serde_json::from_value(d).ok())
        .unwrap_or_default();
    let consequences: Vec<Consequence> = config
        .get("consequences")
        .cloned()
        .and_then(|c| serde_json::from_value(c).ok())
        .unwrap_or_default();
    let submitted: Vec<&Value> = artifacts
        .iter()
        .filter(|a| a.get("kind").and_then(Value::as_str) == Some("wr.assessment"))
        .collect();
    let mut out = Checked::default();
    for a in &definitions {
        let artifact = if definitions.len() == 1 {
            submitted.first().copied()
        } else {
            submitted
                .iter()
                .copied()
                .find(|s| s.get("assessmentId").and_then(Value::as_str) == Some(a.id.as_str()))
        };
        let Some(artifact) = artifact else {
            out.issues.push(format!(
                "this step needs an artifact of kind \"wr.assessment\"{} with the dimensions {}",
                if definitions.len() > 1 {
                    format!(" and assessmentId \"{}\"", a.id)
                } else {
                    String::new()
                },
                a.dimensions
                    .iter()
                    .map(|d| format!("{} ({})", d.id, d.levels.join(" | ")))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            continue;
        };
        if let Some(recorded) = check_one(a, artifact, &mut out.issues) {
            out.recorded.push(recorded);
        }
    }
    if out.issues.is_empty() {
        out.followups = followups(&consequences, &out.recorded);
    } else {
        out.recorded.clear();
    }
    out
}

fn check_one(a: &Assessment, artifact: &Value, issues: &mut Vec<String>) -> Option<Recorded> {
    let before = issues.len();
    if let Some(id) = artifact.get("assessmentId").and_then(Value::as_str)
        && id != a.id
    {
        issues.push(format!(
            "the assessment artifact is for \"{id}\"; this step expects \"{}\"",
            a.id
        ));
        return None;
    }
    let Some(given) = artifact.get("dimensions").and_then(Value::as_object) else {
        issues.push(format!(
            "the assessment \"{}\" has no `dimensions` object",
            a.id
        ));
        return None;
    };
    for name in given.keys() {
        if !a.dimensions.iter().any(|d| &d.id == name) {
            issues.push(format!(
                "\"{name}\" is not a dimension of assessment \"{}\"",
                a.id
            ));
        }
    }
    let mut recorded = Recorded {
        assessment_id: a.id.clone(),
        dimensions: Vec::new(),
        normalized: Vec::new(),
    };
    for d in &a.dimensions {
        let level = match given.get(&d.id) {
            Some(Value::String(l)) => l.as_str(),
            Some(Value::Object(o)) => match o.get("level").and_then(Value::as_str) {
                Some(l) => l,
                None => {
                    issues.push(format!("dimension \"{}\" needs a `level`", d.id));
                    continue;
                }
            },
            Some(_) => {
                issues.push(format!(
                    "dimension \"{}\" is a level or {{\"level\": …}}",
                    d.id
                ));
                continue;
            }
            None if d.required => {
                issues.push(format!("dimension \"{}\" is missing", d.id));
                continue;
            }
            None => continue,
        };
        match canonical(&d.levels, level) {
            Ok(canon) => {
                if canon != level {
                    recorded
                        .normalized
                        .push(format!("\"{level}\" read as \"{canon}\""));
                }
                recorded.dimensions.push((d.id.clone(), canon.to_string()));
            }
            Err(why) => issues.push(format!("dimension \"{}\": {why}", d.id)),
        }
    }
    (issues.len() == before).then_some(recorded)
}

/// The declared level `given` stands for: itself, or the one level it
/// equals ignoring case and surrounding spaces.
fn canonical<'l>(levels: &'l [String], given: &str) -> Result<&'l str, String> {
    if let Some(l) = levels.iter().find(|l| *l == given) {
        return Ok(l);
    }
    let wanted = given.trim().to_lowercase();
    let close: Vec<&String> = levels
        .iter()
        .filter(|l| l.to_lowercase() == wanted)
        .collect();
    match close.as_slice() {
        [one] => Ok(one),
        [] => Err(format!(
            "level \"{given}\" is not one of {}",
            levels.join(", ")
        )),
        _ => Err(format!(
            "level \"{given}\" is ambiguous among {}",
            levels.join(", ")
        )),
    }
}

/// The follow-ups the consequences require of the recorded assessments.
fn followups(consequences: &[Consequence], recorded: &[Recorded]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for c in consequences {
        let hit = recorded
            .iter()
            .filter(|r| {
                c.when
                    .for_assessment
                    .as_ref()
                    .is_none_or(|id| id == &r.assessment_id)
            })
            .find_map(|r| {
                r.dimensions
                    .iter()
                    .find(|(_, level)| level == &c.when.any_equals_level)
                    .map(|(dim, level)| (r, dim, level))
            });
        if let Some((r, dim, level)) = hit {
            out.push((
                format!(
                    "{}.{dim} is \"{level}\": follow-up required",
                    r.assessment_id
                ),
                c.effect.guidance.clone(),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Value {
        json!({
            "definitions": [{"id": "risk", "purpose": "How risky", "dimensions": [
                {"id": "impact", "purpose": "blast radius", "levels": ["low", "high"]},
                {"id": "notes", "purpose": "extra", "levels": ["none", "some"], "required": false}
            ]}],
            "consequences": [{"when": {"anyEqualsLevel": "high"},
                              "effect": {"kind": "require_followup", "guidance": "Add a rollback plan."}}]
        })
    }

    #[test]
    fn a_valid_assessment_is_recorded_with_canonical_levels() {
        let got = check(
            &config(),
            &[json!({"kind": "wr.assessment", "dimensions": {"impact": " LOW "}})],
        );
        assert!(got.issues.is_empty(), "{got:?}");
        assert_eq!(
            got.recorded[0].dimensions,
            [("impact".to_string(), "low".to_string())]
        );
        assert_eq!(got.recorded[0].normalized.len(), 1);
        assert!(got.followups.is_empty());
    }

    #[test]
    fn a_matched_consequence_requires_a_follow_up() {
        let got = check(
            &config(),
            &[
                json!({"kind": "wr.assessment", "dimensions": {"impact": {"level": "high", "rationale": "db"}}}),
            ],
        );
        assert_eq!(got.followups.len(), 1, "{got:?}");
        assert!(got.followups[0].0.contains("risk.impact"));
        assert_eq!(got.followups[0].1, "Add a rollback plan.");
    }

    #[test]
    fn problems_are_all_reported() {
        let none = check(&config(), &[]);
        assert!(none.issues[0].contains("impact (low | high)"), "{none:?}");
        let bad = check(
            &config(),
            &[json!({"kind": "wr.assessment", "dimensions": {"impact": "medium", "extra": "x"}})],
        );
        assert_eq!(bad.issues.len(), 2, "{bad:?}");
        assert!(bad.recorded.is_empty());
        let wrong = check(
            &config(),
            &[
                json!({"kind": "wr.assessment", "assessmentId": "other", "dimensions": {"impact": "low"}}),
            ],
        );
        assert!(wrong.issues[0].contains("expects \"risk\""));
    }
}
