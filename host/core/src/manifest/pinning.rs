//! Pinning: a run executes against a snapshot of its workflow definition,
//! identified by a hash (seed 002's `workflowHash`), not against whatever
//! the file on disk says later.
//!
//! The snapshot is the *normalized* definition: schema files inlined (the
//! loader does that), plugin paths made absolute, the editor-only `$schema`
//! dropped, and object keys sorted, serialized without whitespace. Two
//! manifests that mean the same workflow therefore pin to the same hash,
//! whatever their formatting.

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::manifest::{LoadedWorkflow, Workflow};

/// A normalized workflow definition and its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedDefinition {
    /// Canonical JSON.
    pub json: String,
    /// `sha256:<hex>` of `json`.
    pub hash: String,
}

impl PinnedDefinition {
    /// Pin a loaded workflow.
    pub fn of(loaded: &LoadedWorkflow) -> PinnedDefinition {
        let mut workflow = loaded.workflow.clone();
        workflow.schema = None;
        let base = absolute(loaded.base_dir());
        for plugin in workflow.plugins.values_mut() {
            if let Some(path) = &mut plugin.path
                && path.is_relative()
            {
                *path = base.join(&*path);
            }
        }
        let value = serde_json::to_value(&workflow).expect("a workflow serializes");
        let json = canonical_json(&value);
        let hash = hash_of(&json);
        PinnedDefinition { json, hash }
    }

    /// Read a stored definition back, checking that it still has its hash.
    pub fn parse(json: &str, expected_hash: &str) -> Result<Workflow, String> {
        let actual = hash_of(json);
        if actual != expected_hash {
            return Err(format!(
                "the pinned definition does not match its hash (expected {expected_hash}, found {actual})"
            ));
        }
        let workflow: Workflow = serde_json::from_str(json)
            .map_err(|e| format!("the pinned definition does not parse: {e}"))?;
        names_are_ids(&workflow)?;
        Ok(workflow)
    }
}

/// Node, block and lane names become directory names, environment values
/// and script text: a pinned definition (which may come from a bundle)
/// holds only names of the manifest's grammar, whoever wrote it.
fn names_are_ids(workflow: &Workflow) -> Result<(), String> {
    let bad = |what: &str, name: &str| {
        Err(format!(
            "the pinned definition has a {what} named `{}`, which is not a {what} name (letters, digits, `_` and `-`)",
            crate::text::escape(name)
        ))
    };
    for (node_id, node) in &workflow.nodes {
        if !super::is_valid_id(node_id) {
            return bad("node", node_id);
        }
        for (block_id, block) in &node.blocks {
            if !super::is_valid_id(block_id) {
                return bad("block", block_id);
            }
            for lane in block.parallel.iter().flat_map(|p| p.lanes.keys()) {
                if !super::is_valid_id(lane) {
                    return bad("lane", lane);
                }
            }
        }
    }
    Ok(())
}

/// `sha256:<hex>` of `text`.
pub fn hash_of(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// JSON with object keys sorted and no insignificant whitespace.
pub fn canonical_json(value: &serde_json::Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &serde_json::Value, out: &mut String) {
    match value {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn absolute(dir: &Path) -> std::path::PathBuf {
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(text: &str) -> LoadedWorkflow {
        let file = Path::new("/flows/w.json");
        LoadedWorkflow {
            workflow: crate::manifest::parse(file, text).unwrap(),
            file: file.to_path_buf(),
        }
    }

    const A: &str = r#"{"id": "w", "start_node": "n", "plugins": {"p": {"path": "p.wasm"}},
        "nodes": {"n": {"entry_block": "b", "blocks": {"b": {"worker": "p"}}}}}"#;

    #[test]
    fn a_pinned_definition_whose_names_are_not_ids_is_refused() {
        let pin = PinnedDefinition::of(&loaded(A));
        assert!(PinnedDefinition::parse(&pin.json, &pin.hash).is_ok());
        for (from, to) in [
            ("\"b\":{", "\"../../b\":{"),
            ("\"n\":{", "\"n\\ntouch x\":{"),
        ] {
            let json = pin.json.replacen(from, to, 1);
            assert_ne!(json, pin.json, "{from}");
            let err = PinnedDefinition::parse(&json, &hash_of(&json)).unwrap_err();
            assert!(err.contains("not a"), "{err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn formatting_and_key_order_do_not_change_the_hash() {
        let b = r#"{ "$schema": "../schema.json", "nodes": {"n": {"blocks": {"b": {"worker": "p"}}, "entry_block": "b"}},
                     "start_node": "n", "plugins": {"p": {"path": "p.wasm"}}, "id": "w" }"#;
        assert_eq!(
            PinnedDefinition::of(&loaded(A)),
            PinnedDefinition::of(&loaded(b))
        );
    }

    #[test]
    fn a_change_of_meaning_changes_the_hash() {
        let other = A.replace(
            "\"worker\": \"p\"",
            "\"worker\": \"p\", \"max_attempts\": 2",
        );
        assert_ne!(
            PinnedDefinition::of(&loaded(A)).hash,
            PinnedDefinition::of(&loaded(&other)).hash
        );
    }

    #[test]
    fn plugin_paths_are_pinned_absolute_and_the_pin_parses_back() {
        let pin = PinnedDefinition::of(&loaded(A));
        assert!(pin.json.contains("\"/flows/p.wasm\""), "{}", pin.json);
        let wf = PinnedDefinition::parse(&pin.json, &pin.hash).unwrap();
        assert_eq!(
            wf.plugins["p"].path.as_deref(),
            Some(Path::new("/flows/p.wasm"))
        );
        let tampered = pin.json.replace("/flows/", "/evil/");
        assert!(
            PinnedDefinition::parse(&tampered, &pin.hash)
                .unwrap_err()
                .contains("hash")
        );
    }
}
