//! Every `--json` command's output against its published schema (`wfhost
//! schema NAME`): the shapes `docs/guide/json-output.md` promises, each
//! exercised on a real run of every status.

use super::*;
use serde_json::Value;

/// `wfhost schema NAME`, compiled.
fn schema(name: &str, s: &Path) -> jsonschema::Validator {
    let out = wfhost(&["schema", name], s);
    assert_eq!(
        out.status.code(),
        Some(0),
        "schema {name}: {}",
        stderr(&out)
    );
    let schema: Value = serde_json::from_slice(&out.stdout).unwrap();
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("schema {name}: {e}"))
}

fn check(validator: &jsonschema::Validator, what: &str, value: &Value) {
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .take(5)
        .collect();
    assert!(errors.is_empty(), "{what}: {errors:?}\n{value:#}");
}

/// Runs `args` (exit code `code`) and checks what it printed: one object,
/// an array of them, or one a line.
fn printed(args: &[&str], code: i32, s: &Path) -> Vec<Value> {
    let out = wfhost(args, s);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
    let text = stdout(&out);
    if args.contains(&"events") {
        return text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    }
    let value: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {text}"));
    match value {
        Value::Array(items) if !args.contains(&"show") => items,
        one => vec![one],
    }
}

#[test]
fn every_json_command_prints_its_documented_shape() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = workspace_in(s);
    let ws = ws.to_str().unwrap();
    let example = |name: &str| repo().join("examples").join(name).join("workflow.json");
    let hello = example("hello");
    let gate = example("review-gate");
    let failing = s.join("failing.json");
    std::fs::write(
        &failing,
        serde_json::json!({"id": "failing", "start_node": "main",
            "plugins": {"exec": {"grants": ["exec"]}},
            "nodes": {"main": {"entry_block": "fail", "blocks": {"fail": {
                "worker": "exec", "config": {"commands": [{"argv": ["false"]}]},
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]}}}}})
        .to_string(),
    )
    .unwrap();

    let mut seen: Vec<(String, Vec<Value>)> = Vec::new();
    let mut take = |name: &str, args: &[&str], code: i32| {
        let values = printed(args, code, s);
        seen.push((name.to_string(), values.clone()));
        values
    };
    // Runs of every status, each report checked.
    let done = take(
        "RunReport",
        &[
            "run",
            hello.to_str().unwrap(),
            "-w",
            ws,
            "--json",
            "--session",
            "release-1",
        ],
        0,
    );
    let done = done[0]["run_id"].as_str().unwrap().to_string();
    let waiting = take(
        "RunReport",
        &["run", gate.to_str().unwrap(), "-w", ws, "--json"],
        3,
    );
    let waiting = waiting[0]["run_id"].as_str().unwrap().to_string();
    take(
        "RunReport",
        &["run", failing.to_str().unwrap(), "-w", ws, "--json"],
        1,
    );
    take("OpenGate", &["gates", "--json"], 0);
    take(
        "RunReport",
        &["gate", &waiting, "UD-1", "approved", "--json"],
        0,
    );
    take("RunReport", &["fork", &done, "--at", "2", "--json"], 0);
    take("RunReport", &["rerun", &done, "--from", "1", "--json"], 0);
    for run in [&done, &waiting] {
        take("Run", &["show", run, "--json"], 0);
        take("Steps", &["show", run, "--json", "--steps"], 0);
        take("StoredEvent", &["events", run, "--json"], 0);
    }
    take("RunSummary", &["runs", "--json"], 0);
    take("SessionSummary", &["session", "list", "--json"], 0);
    let hello_file = hello.to_str().unwrap();
    let out = wfhost(
        &[
            "schedule", "add", "nightly", "--cron", "@daily", "-w", ws, hello_file,
        ],
        s,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    wfhost(&["schedule", "trigger", "nightly"], s);
    take("Schedules", &["schedule", "ls", "--json"], 0);
    take(
        "ScheduleView",
        &["schedule", "show", "nightly", "--json"],
        0,
    );
    let out = wfhost(
        &[
            "hook", "add", "open", hello_file, "--format", "unsigned", "--map", "x=/x", "-w", ws,
        ],
        s,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    take("Hooks", &["hook", "ls", "--json"], 0);
    take("HookView", &["hook", "show", "open", "--json"], 0);
    let out = wfhost(
        &[
            "notify",
            "add",
            "ops",
            "http://127.0.0.1:9/in",
            "--on",
            "run.failed",
        ],
        s,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    take("NotifyTargets", &["notify", "ls", "--json"], 0);
    take(
        "Workflows",
        &["list", repo().join("examples").to_str().unwrap(), "--json"],
        0,
    );
    take(
        "ValidateReport",
        &["validate", hello.to_str().unwrap(), "--json"],
        0,
    );
    take(
        "ValidateReport",
        &[
            "validate",
            s.join("nothing.json").to_str().unwrap(),
            "--json",
        ],
        2,
    );
    take("ConfigSetting", &["config", "--json"], 0);
    take(
        "GcReport",
        &["gc", "--dry-run", "--older-than", "0d", "--json"],
        0,
    );

    for (name, values) in &seen {
        assert!(!values.is_empty(), "{name}: nothing printed");
        let validator = schema(name, s);
        for value in values {
            check(&validator, name, value);
        }
    }
    // Every status a report can have was seen, and a session.
    let statuses: Vec<&str> = seen
        .iter()
        .filter(|(n, _)| n == "RunReport")
        .map(|(_, v)| v[0]["status"].as_str().unwrap())
        .collect();
    for status in ["succeeded", "waiting", "failed"] {
        assert!(statuses.contains(&status), "{statuses:?}");
    }
    let sessions = &seen.iter().find(|(n, _)| n == "SessionSummary").unwrap().1;
    assert_eq!(sessions[0]["id"], "release-1", "{sessions:?}");

    // Every object `wfhost schema --list` says a command prints was seen.
    let list = stdout(&wfhost(&["schema", "--list"], s));
    for line in list.lines().filter(|l| l.contains("wfhost ")) {
        let name = line.split_whitespace().next().unwrap();
        assert!(
            seen.iter().any(|(n, _)| n == name),
            "{name} was not exercised: {line}"
        );
    }
}

#[test]
fn an_unknown_schema_name_is_refused_with_the_names_there_are() {
    let scratch = tempfile::tempdir().unwrap();
    let out = wfhost(&["schema", "Runs"], scratch.path());
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("no object \"Runs\"") && err.contains("RunSummary"),
        "{err}"
    );
    // Without a name: the manifest's schema, as before.
    let manifest: Value =
        serde_json::from_slice(&wfhost(&["schema"], scratch.path()).stdout).unwrap();
    assert!(manifest["properties"]["nodes"].is_object(), "{manifest:#}");
}
