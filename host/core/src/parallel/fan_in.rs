//! Fan-in of a parallel group (seed 000): which lane's file changes reach
//! the main workspace, which files conflict, and when the user must choose.
//!
//! Pure planning: the lanes' changed paths in, a plan out. Making lane
//! workspaces, detecting what changed in them and copying files belong to
//! the adapters.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How a parallel group's lanes are merged back.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum MergeStrategy {
    /// Only the lanes' `.output/` files are collected; file changes are
    /// not merged (review and analysis lanes).
    Concatenate,
    /// File changes are applied in lane completion order; a file changed
    /// by several lanes takes the first finisher's version.
    #[default]
    Workspace,
    /// Any file changed by several lanes pauses the run at a gate until the
    /// user chooses a lane's version.
    FailOnConflict,
}

impl MergeStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            MergeStrategy::Concatenate => "concatenate",
            MergeStrategy::Workspace => "workspace",
            MergeStrategy::FailOnConflict => "fail-on-conflict",
        }
    }
}

/// What one lane changed, workspace-relative, `.output/` excluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneChanges {
    /// The lane's block (its `NODE_ID`).
    pub lane: String,
    pub changed: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Resolution {
    FirstCompleteWins,
    UserResolved,
}

/// The `lane:conflict-detected` event's fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LaneConflict {
    pub conflicting_file: String,
    /// The lanes that changed it, in completion order.
    pub lanes: Vec<String>,
    pub resolution: Resolution,
    /// The lane whose version is applied; none while the user has not
    /// chosen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied_from: Option<String>,
}

/// What fan-in does.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FanInPlan {
    /// Lane → the paths to copy from it into the main workspace, in lane
    /// completion order.
    pub apply: Vec<(String, Vec<String>)>,
    pub conflicts: Vec<LaneConflict>,
    /// File changes that are not merged (`concatenate`), by lane, so that
    /// dropping them is recorded, never silent.
    pub discarded: Vec<(String, Vec<String>)>,
    /// Set when the run must pause for the user to choose (`fail-on-conflict`
    /// with unresolved conflicts); nothing is applied then.
    pub gate: Option<String>,
}

/// Plan the fan-in of `lanes` (in completion order). `choices` maps a
/// conflicting file to the lane the user chose for it
/// (`fail-on-conflict`); other strategies ignore it.
pub fn plan(
    strategy: MergeStrategy,
    lanes: &[LaneChanges],
    choices: &BTreeMap<String, String>,
) -> FanInPlan {
    if strategy == MergeStrategy::Concatenate {
        return FanInPlan {
            discarded: lanes
                .iter()
                .filter(|l| !l.changed.is_empty())
                .map(|l| (l.lane.clone(), sorted(&l.changed)))
                .collect(),
            ..Default::default()
        };
    }
    // Path → the lanes that changed it, in completion order.
    let mut by_path: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for lane in lanes {
        for path in &lane.changed {
            let owners = by_path.entry(path.as_str()).or_default();
            if !owners.contains(&lane.lane.as_str()) {
                owners.push(&lane.lane);
            }
        }
    }
    let mut winner: BTreeMap<&str, &str> = BTreeMap::new();
    let mut conflicts = Vec::new();
    let mut unresolved = Vec::new();
    for (path, owners) in &by_path {
        if owners.len() == 1 {
            winner.insert(path, owners[0]);
            continue;
        }
        let lanes_of: Vec<String> = owners.iter().map(|l| l.to_string()).collect();
        let chosen = choices
            .get(*path)
            .filter(|c| owners.contains(&c.as_str()))
            .map(String::as_str);
        let (resolution, applied) = match (strategy, chosen) {
            (MergeStrategy::FailOnConflict, Some(c)) => (Resolution::UserResolved, Some(c)),
            (MergeStrategy::FailOnConflict, None) => {
                unresolved.push(format!("`{path}` (lanes {})", lanes_of.join(", ")));
                (Resolution::UserResolved, None)
            }
            _ => (Resolution::FirstCompleteWins, Some(owners[0])),
        };
        if let Some(lane) = applied {
            winner.insert(path, lane);
        }
        conflicts.push(LaneConflict {
            conflicting_file: path.to_string(),
            lanes: lanes_of,
            resolution,
            applied_from: applied.map(str::to_string),
        });
    }
    if !unresolved.is_empty() {
        return FanInPlan {
            conflicts,
            gate: Some(format!(
                "Parallel lanes changed the same files: {}. Choose which lane's version to keep for each.",
                unresolved.join("; ")
            )),
            ..Default::default()
        };
    }
    let apply = lanes
        .iter()
        .map(|lane| {
            let paths: Vec<String> = winner
                .iter()
                .filter(|(_, l)| **l == lane.lane)
                .map(|(p, _)| p.to_string())
                .collect();
            (lane.lane.clone(), paths)
        })
        .filter(|(_, paths)| !paths.is_empty())
        .collect();
    FanInPlan {
        apply,
        conflicts,
        ..Default::default()
    }
}

fn sorted(paths: &[String]) -> Vec<String> {
    let mut v = paths.to_vec();
    v.sort();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lanes() -> Vec<LaneChanges> {
        vec![
            LaneChanges {
                lane: "dev-b".into(),
                changed: vec!["src/b.rs".into(), "src/shared.rs".into()],
            },
            LaneChanges {
                lane: "dev-a".into(),
                changed: vec!["src/a.rs".into(), "src/shared.rs".into()],
            },
        ]
    }

    #[test]
    fn workspace_applies_in_completion_order_and_reports_conflicts() {
        let p = plan(MergeStrategy::Workspace, &lanes(), &BTreeMap::new());
        assert_eq!(
            p.apply,
            vec![
                (
                    "dev-b".to_string(),
                    vec!["src/b.rs".to_string(), "src/shared.rs".to_string()]
                ),
                ("dev-a".to_string(), vec!["src/a.rs".to_string()]),
            ]
        );
        assert_eq!(
            p.conflicts,
            vec![LaneConflict {
                conflicting_file: "src/shared.rs".into(),
                lanes: vec!["dev-b".into(), "dev-a".into()],
                resolution: Resolution::FirstCompleteWins,
                applied_from: Some("dev-b".into()),
            }]
        );
        assert_eq!(
            serde_json::to_value(&p.conflicts[0]).unwrap(),
            serde_json::json!({"conflictingFile": "src/shared.rs", "lanes": ["dev-b", "dev-a"],
                               "resolution": "first-complete-wins", "appliedFrom": "dev-b"})
        );
        assert!(p.gate.is_none() && p.discarded.is_empty());
    }

    #[test]
    fn without_conflicts_every_lane_applies_everything() {
        let mut l = lanes();
        l[1].changed.pop();
        for strategy in [MergeStrategy::Workspace, MergeStrategy::FailOnConflict] {
            let p = plan(strategy, &l, &BTreeMap::new());
            assert!(p.conflicts.is_empty() && p.gate.is_none());
            let all: usize = p.apply.iter().map(|(_, v)| v.len()).sum();
            assert_eq!(all, 3);
        }
    }

    #[test]
    fn fail_on_conflict_gates_until_the_user_chooses() {
        let p = plan(MergeStrategy::FailOnConflict, &lanes(), &BTreeMap::new());
        assert!(p.apply.is_empty(), "nothing applied before the choice");
        let gate = p.gate.unwrap();
        assert!(
            gate.contains("src/shared.rs") && gate.contains("dev-b, dev-a"),
            "{gate}"
        );
        assert_eq!(p.conflicts[0].applied_from, None);

        // A choice of a lane that did not change the file is no choice.
        let bogus = BTreeMap::from([("src/shared.rs".to_string(), "dev-z".to_string())]);
        assert!(
            plan(MergeStrategy::FailOnConflict, &lanes(), &bogus)
                .gate
                .is_some()
        );

        let choice = BTreeMap::from([("src/shared.rs".to_string(), "dev-a".to_string())]);
        let p = plan(MergeStrategy::FailOnConflict, &lanes(), &choice);
        assert!(p.gate.is_none());
        assert_eq!(p.conflicts[0].resolution, Resolution::UserResolved);
        assert_eq!(p.conflicts[0].applied_from.as_deref(), Some("dev-a"));
        assert_eq!(
            p.apply,
            vec![
                ("dev-b".to_string(), vec!["src/b.rs".to_string()]),
                (
                    "dev-a".to_string(),
                    vec!["src/a.rs".to_string(), "src/shared.rs".to_string()]
                ),
            ]
        );
    }

    #[test]
    fn concatenate_merges_no_files_but_says_what_it_dropped() {
        let p = plan(MergeStrategy::Concatenate, &lanes(), &BTreeMap::new());
        assert!(p.apply.is_empty() && p.conflicts.is_empty() && p.gate.is_none());
        assert_eq!(p.discarded.len(), 2);
        assert_eq!(p.discarded[0].0, "dev-b");
    }

    #[test]
    fn strategies_have_their_seed_names() {
        for (s, name) in [
            (MergeStrategy::Concatenate, "concatenate"),
            (MergeStrategy::Workspace, "workspace"),
            (MergeStrategy::FailOnConflict, "fail-on-conflict"),
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), name);
        }
    }
}
