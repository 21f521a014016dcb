//! The architecture's dependency rules, read from the workspace's
//! `Cargo.lock` (every kind of dependency counted, dev ones too): the core
//! depends on no wasmtime, Docker client, SQLite or HTTP stack; the server
//! and the protocol it shares with the application layer on no wasmtime.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Package name → the names of its dependencies.
fn graph() -> BTreeMap<String, Vec<String>> {
    let lock = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.lock");
    let text = std::fs::read_to_string(lock).unwrap();
    let mut graph: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for block in text.split("[[package]]").skip(1) {
        let mut name = None;
        let mut deps = Vec::new();
        let mut in_deps = false;
        for line in block.lines() {
            let line = line.trim();
            if let Some(v) = line.strip_prefix("name = ") {
                name = Some(v.trim_matches('"').to_string());
            } else if line.starts_with("dependencies = [") {
                in_deps = !line.ends_with(']');
            } else if in_deps && line == "]" {
                in_deps = false;
            } else if in_deps {
                let dep = line.trim_end_matches(',').trim_matches('"');
                deps.push(dep.split(' ').next().unwrap_or(dep).to_string());
            }
        }
        if let Some(name) = name {
            graph.entry(name).or_default().extend(deps);
        }
    }
    graph
}

/// Every package `root` depends on, directly or not.
fn closure(graph: &BTreeMap<String, Vec<String>>, root: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![root.to_string()];
    while let Some(next) = todo.pop() {
        for dep in graph.get(&next).into_iter().flatten() {
            if seen.insert(dep.clone()) {
                todo.push(dep.clone());
            }
        }
    }
    seen
}

fn refuses(root: &str, forbidden: &[&str]) {
    let graph = graph();
    assert!(graph.contains_key(root), "{root} is in Cargo.lock");
    let found: Vec<String> = closure(&graph, root)
        .into_iter()
        .filter(|name| forbidden.contains(&name.as_str()))
        .collect();
    assert!(found.is_empty(), "{root} depends on {found:?}");
}

#[test]
fn the_core_depends_on_no_adapter() {
    refuses(
        "wfhost-core",
        &[
            "wasmtime",
            "wasmtime-wasi",
            "bollard",
            "rusqlite",
            "hyper",
            "axum",
            "reqwest",
            "wfhost-runtime",
            "wfhost-store",
            "wfhost-exec",
        ],
    );
}

#[test]
fn the_server_and_the_protocol_depend_on_no_wasmtime() {
    for root in ["wfhost-server", "wfhost-protocol"] {
        refuses(root, &["wasmtime", "wfhost-runtime", "wfhost-app"]);
    }
}

#[test]
fn the_reading_of_the_lock_sees_what_it_must() {
    // Were the lock misread, the rules above would pass on nothing.
    let graph = graph();
    assert!(closure(&graph, "wfhost-runtime").contains("wasmtime"));
    assert!(closure(&graph, "wfhost-store").contains("rusqlite"));
    assert!(closure(&graph, "wfhost-server").contains("axum"));
}
