//! Every example workflow validates without warnings and runs.

use super::*;

fn run_json(example: &str) -> serde_json::Value {
    run_example(example).0
}

/// Run an example in a fresh workspace; returns its report and the
/// workspace.
fn run_example(example: &str) -> (serde_json::Value, tempfile::TempDir) {
    run_example_with(example, &[])
}

/// The example's manifest as users run it. Its plugin paths assume the
/// default target directory; when the guests were built elsewhere
/// (`CARGO_TARGET_DIR`), a copy in `scratch` names where they are.
fn example_manifest(example: &str, scratch: &Path) -> PathBuf {
    let manifest = repo().join("examples").join(example).join("workflow.json");
    let mut wf: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    let built = Path::new(wfhost_guest_artifacts::EXAMPLE_WORD_COUNT_PATH);
    let Some(plugins) = wf["plugins"].as_object_mut() else {
        return manifest;
    };
    let mut moved = false;
    for plugin in plugins.values_mut() {
        let Some(path) = plugin["path"].as_str() else {
            continue;
        };
        let named = manifest.parent().unwrap().join(path);
        if !named.exists() && named.file_name() == built.file_name() {
            plugin["path"] = built.to_str().unwrap().into();
            moved = true;
        }
    }
    if !moved {
        return manifest;
    }
    let copy = scratch.join(format!("{example}.json"));
    std::fs::write(&copy, wf.to_string()).unwrap();
    copy
}

/// [`run_example`] with more `wfhost run` arguments (an example's inputs).
fn run_example_with(example: &str, extra: &[&str]) -> (serde_json::Value, tempfile::TempDir) {
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
    let manifest = example_manifest(example, cache.path());
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
    let mut args = vec![
        "run",
        manifest.to_str().unwrap(),
        "-w",
        ws.path().to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = wfhost(&args, cache.path());
    assert_eq!(out.status.code(), Some(0), "{example}: {}", stdout(&out));
    (serde_json::from_slice(&out.stdout).unwrap(), ws)
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
            "agent-parallel",
            "agent-pipeline",
            "agent-team", // walked through its gates in team.rs
            "durable",
            "exec-build",
            "exec-container",
            "exec-slurm",
            "hello",
            "inputs",
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
fn inputs_from_a_file_and_the_command_line_fill_the_templates() {
    // The command of examples/inputs/README.md.
    let file = repo().join("examples/inputs/inputs.json");
    let (report, _ws) = run_example_with(
        "inputs",
        &["--input", file.to_str().unwrap(), "--set", "version=1.2.0"],
    );
    assert_eq!(
        contents(&report),
        [
            "ECHO:releasing wfhost 1.2.0",
            "AI_RESPONSE:wfhost 1.2.0 for users: [\"run inputs\",\"cancel\"]",
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

#[test]
fn agent_pipeline_plans_implements_tests_and_reviews() {
    let (report, ws) = run_example("agent-pipeline");
    assert_eq!(report["steps"], 4);
    let read = |rel: &str| std::fs::read_to_string(ws.path().join(rel)).unwrap();
    assert!(read("PLAN.md").contains("T01"));
    assert!(read("docs/calc.py").contains("def subtract(a, b)"));
    assert!(ws.path().join("docs/test_subtract.py").is_file());
    let review = read("REVIEW.md");
    for block in ["plan.write", "dev.implement", "test.run"] {
        assert!(review.contains(&format!("{block}: completed")), "{review}");
    }
    let test: serde_json::Value =
        serde_json::from_str(&read(".output/block-test.run.json")).unwrap();
    assert!(
        test["summary"].as_str().unwrap().ends_with(": OK"),
        "{test}"
    );
    // The orchestrator's view of the session.
    let sessions: Vec<_> = std::fs::read_dir(ws.path().join(".agents-work"))
        .unwrap()
        .filter(|e| {
            !e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('.')
        })
        .collect();
    assert_eq!(sessions.len(), 1);
    let dir = sessions[0].as_ref().unwrap().path();
    let status: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("status.json")).unwrap()).unwrap();
    assert_eq!(status["current_state"], "DONE");
    let tasks = std::fs::read_to_string(dir.join("tasks.yaml")).unwrap();
    assert_eq!(tasks.matches("status: completed").count(), 4, "{tasks}");
}

#[test]
fn agent_parallel_merges_two_lanes_and_reports_their_conflict() {
    let (report, ws) = run_example("agent-parallel");
    assert_eq!(report["status"], "succeeded");
    let read = |rel: &str| std::fs::read_to_string(ws.path().join(rel)).unwrap();
    // The api lane finishes first and wins docs/shared.py.
    assert_eq!(read("docs/shared.py"), "VERSION = \"1.1-api\"\n");
    assert!(ws.path().join("docs/api.py").is_file());
    assert!(ws.path().join("docs/ui.py").is_file());
    let review = read("REVIEW.md");
    assert!(review.contains("dev.implement.api: completed"), "{review}");
    assert!(review.contains("dev.implement.ui: completed"), "{review}");
    let text: Vec<String> = contents(&report);
    assert!(
        text.iter()
            .any(|t| t.contains("conflict: docs/shared.py changed by api, ui; kept api")),
        "{text:?}"
    );
}

// review-gate waits for a human; its round trip is in `durable.rs`.
// exec-build, exec-container and exec-slurm need a project in the
// workspace (and Docker or Slurm): see `exec.rs`.
