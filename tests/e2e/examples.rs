//! Every example workflow validates without warnings and runs.

use super::*;

fn run_json(example: &str) -> serde_json::Value {
    let ws = tempfile::tempdir().unwrap();
    // Examples that come with input files run on a copy of their directory.
    let inputs = repo().join("examples").join(example).join("docs");
    if inputs.is_dir() {
        std::fs::create_dir(ws.path().join("docs")).unwrap();
        for f in std::fs::read_dir(&inputs).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, ws.path().join("docs").join(f.file_name().unwrap())).unwrap();
        }
    }
    let cache = tempfile::tempdir().unwrap();
    let manifest = repo().join("examples").join(example).join("workflow.json");
    let check = wfhost(
        &["validate", manifest.to_str().unwrap(), "--strict"],
        cache.path(),
    );
    assert_eq!(
        check.status.code(),
        Some(0),
        "{example}: {}",
        stderr(&check)
    );
    let out = wfhost(
        &[
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.path().to_str().unwrap(),
            "--json",
        ],
        cache.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{example}: {}", stdout(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn contents(report: &serde_json::Value) -> Vec<String> {
    report["payload"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{}:{}",
                s["type"].as_str().unwrap(),
                s["content"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn every_example_is_covered_here() {
    let mut examples: Vec<String> = std::fs::read_dir(repo().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("workflow.json").is_file())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    examples.sort();
    assert_eq!(
        examples,
        [
            "durable",
            "exec-build",
            "exec-container",
            "exec-slurm",
            "hello",
            "review-gate",
            "subroutines",
            "validation-retry",
            "word-count"
        ],
        "add a test for the new example"
    );
}

#[test]
fn subroutines_call_return_and_isolate_context() {
    let report = run_json("subroutines");
    assert_eq!(report["steps"], 5);
    assert_eq!(
        contents(&report),
        [
            "ECHO:draft written",
            "ECHO:lint: no issues",
            "ECHO:lint finished",
            // The isolated node saw only its static memory, and handed back
            // only what it produced.
            "STATIC_MEMORY:style: one short paragraph",
            "ECHO:summary: the draft is lint-clean",
            "ECHO:done",
        ]
    );
}

#[test]
fn validation_retry_recovers_on_the_second_attempt() {
    let report = run_json("validation-retry");
    assert_eq!(report["blocks"]["main.draft_plan"]["attempts"], 2);
    assert_eq!(report["blocks"]["main.announce"]["attempts"], 1);
    assert_eq!(report["statistics"]["tokens_used"], 240);
    // announce keeps only the validated output, then adds its own note.
    assert_eq!(
        contents(&report),
        [
            "VALIDATED_OUTPUT:{\"tasks\":[\"T01: write the pool\",\"T02: test it\"],\"title\":\"Pool\"}",
            "ECHO:plan accepted",
        ]
    );
}

#[test]
fn word_count_runs_a_user_plugin_from_a_path() {
    let report = run_json("word-count");
    assert_eq!(report["status"], "succeeded");
    let last = contents(&report).pop().unwrap();
    assert_eq!(
        last,
        "VALIDATED_OUTPUT:{\"files\":{\"docs/notes.md\":6,\"docs/todo.txt\":4},\"total\":10}"
    );
}

#[test]
fn durable_calls_a_planning_subroutine_that_retries() {
    let report = run_json("durable");
    assert_eq!(report["steps"], 5);
    assert_eq!(report["blocks"]["plan.draft"]["attempts"], 2);
    assert_eq!(report["statistics"]["tokens_used"], 40 + 240 + 25);
}

// review-gate waits for a human; its round trip is in `durable.rs`.
// exec-build, exec-container and exec-slurm need a project in the
// workspace (and Docker or Slurm): see `exec.rs`.
