//! Workflow tags: what a workflow directory's tags file
//! ([`crate::catalog::TAGS_FILE`]) says of each workflow, and the
//! filtering and summary `list_workflows` gives with them (WorkRail's
//! `tags` and `tagSummary`). A workflow the file does not name, with a
//! namespaced id (`ns.name`), is tagged `ns`.

use serde_json::Value;

use crate::reply::{TagSummary, WorkflowSummary};

/// The tags of workflow `id`, and whether the file hides it.
fn tags_of(file: &Value, id: &str) -> (Vec<String>, bool) {
    match file.get("workflows").and_then(|w| w.get(id)) {
        Some(entry) => (
            entry
                .get("tags")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            entry.get("hidden").and_then(Value::as_bool) == Some(true),
        ),
        None => (
            id.split_once('.')
                .map(|(ns, _)| vec![ns.to_string()])
                .unwrap_or_default(),
            false,
        ),
    }
}

/// Tag the workflows; with `wanted`, keep those with any of those tags
/// (hidden ones never); without, the summary of the tags (None without a
/// tags file).
pub fn apply(
    workflows: &mut Vec<WorkflowSummary>,
    file: Option<&Value>,
    wanted: Option<&[String]>,
) -> Option<Vec<TagSummary>> {
    let mut hidden = Vec::new();
    for w in workflows.iter_mut() {
        let (tags, hide) = match file {
            Some(file) => tags_of(file, &w.workflow_id),
            None => tags_of(&Value::Null, &w.workflow_id),
        };
        w.tags = tags;
        if hide {
            hidden.push(w.workflow_id.clone());
        }
    }
    if let Some(wanted) = wanted {
        workflows.retain(|w| {
            !hidden.contains(&w.workflow_id) && w.tags.iter().any(|t| wanted.contains(t))
        });
        return None;
    }
    let file = file?;
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    let list = |v: &Value, key: &str| -> Vec<String> {
        v.get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    };
    let summary = file
        .get("tags")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|tag| {
            let id = text(tag, "id");
            TagSummary {
                count: workflows
                    .iter()
                    .filter(|w| !hidden.contains(&w.workflow_id) && w.tags.contains(&id))
                    .count(),
                display_name: text(tag, "displayName"),
                when: list(tag, "when"),
                examples: list(tag, "examples"),
                id,
            }
        })
        .collect();
    Some(summary)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn summary(id: &str) -> WorkflowSummary {
        WorkflowSummary {
            workflow_id: id.into(),
            description: None,
            file: String::new(),
            workflow_hash: String::new(),
            blocks: 1,
            external_blocks: 1,
            tags: Vec::new(),
        }
    }

    #[test]
    fn tags_filter_and_summarize() {
        let file = json!({"version": 1,
            "tags": [{"id": "coding", "displayName": "Coding", "when": ["code"], "examples": ["fix"]},
                     {"id": "review", "displayName": "Review"}],
            "workflows": {"fix": {"tags": ["coding"]}, "old": {"tags": ["coding"], "hidden": true},
                          "rev": {"tags": ["review", "coding"]}}});
        let all = || {
            vec![
                summary("fix"),
                summary("old"),
                summary("rev"),
                summary("team.plan"),
            ]
        };
        let mut listed = all();
        let tags = apply(&mut listed, Some(&file), None).unwrap();
        assert_eq!((tags[0].id.as_str(), tags[0].count), ("coding", 2));
        assert_eq!(listed[3].tags, ["team"]);
        let mut coding = all();
        assert!(apply(&mut coding, Some(&file), Some(&["coding".into()])).is_none());
        let ids: Vec<&str> = coding.iter().map(|w| w.workflow_id.as_str()).collect();
        assert_eq!(ids, ["fix", "rev"]);
        let mut team = all();
        apply(&mut team, None, Some(&["team".into()]));
        assert_eq!(team.len(), 1);
    }
}
