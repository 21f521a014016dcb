//! The published JSON Schema of the manifest must match the Rust types.
//! Regenerate it with `WFHOST_BLESS=1 cargo test -p wfhost-core --test schema_sync`.

use std::path::Path;

#[test]
fn published_schema_matches_the_manifest_types() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema/workflow.schema.json");
    let generated =
        serde_json::to_string_pretty(&wfhost_core::manifest::json_schema()).unwrap() + "\n";
    if std::env::var_os("WFHOST_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let published = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        published == generated,
        "schema/workflow.schema.json is out of date with the manifest types; \
         regenerate it with `WFHOST_BLESS=1 cargo test -p wfhost-core --test schema_sync`"
    );
}

#[test]
fn every_example_satisfies_the_published_schema() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("schema/workflow.schema.json")).unwrap(),
    )
    .unwrap();
    let validator =
        jsonschema::validator_for(&schema).expect("the published schema is a valid JSON Schema");
    let mut seen = 0;
    for entry in walk(&root.join("examples")) {
        if entry.extension().is_some_and(|e| e == "json")
            && entry.file_name().is_some_and(|n| n == "workflow.json")
        {
            let doc: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&entry).unwrap()).unwrap();
            let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{}: {errors:?}", entry.display());
            seen += 1;
        }
    }
    assert!(seen > 0, "no example workflows found");
    // And a typo is caught by the schema, as it is by the parser.
    let typo = serde_json::json!({"id": "w", "start_node": "m", "nodes": {}, "start_nodes": 1});
    assert!(!validator.is_valid(&typo));
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
