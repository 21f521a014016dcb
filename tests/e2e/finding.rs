//! Finding runs and scripting against them: `wfhost runs` filters like
//! `GET /v1/runs`, its aliases and suggestions, and every run and gate is
//! one JSON object — the same in `--json` and the API, valid against the
//! API's published schema.

use super::serve::{http_get, serve};
use super::{repo, stderr, stdout, wfhost, workspace_in};

/// The schema the OpenAPI document publishes for `name`.
fn schema_of(name: &str) -> jsonschema::Validator {
    let spec = wfhost_server::openapi_spec();
    assert!(
        spec["components"]["schemas"][name].is_object(),
        "no schema {name}"
    );
    // Its references resolve within the document's components.
    let schema = serde_json::json!({
        "$ref": format!("#/components/schemas/{name}"),
        "components": spec["components"],
    });
    jsonschema::validator_for(&schema).unwrap()
}

fn assert_valid(validator: &jsonschema::Validator, what: &str, value: &serde_json::Value) {
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what}: {errors:?}\n{value:#}");
}

fn json(args: &[&str], s: &std::path::Path) -> serde_json::Value {
    let out = wfhost(args, s);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn runs_are_found_by_status_workflow_text_and_time_and_are_one_json_shape() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = workspace_in(s);
    let ws = ws.to_str().unwrap();
    let hello = repo().join("examples/hello/workflow.json");
    let gate = repo().join("examples/review-gate/workflow.json");
    for _ in 0..2 {
        let out = wfhost(&["run", hello.to_str().unwrap(), "-w", ws], s);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let waiting = wfhost(&["run", gate.to_str().unwrap(), "-w", ws], s);
    assert_eq!(waiting.status.code(), Some(3), "{}", stderr(&waiting));
    let gated = json(&["runs", "--workflow", "review-gate", "--json"], s)[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let summary = schema_of("RunSummary");
    let all = json(&["runs", "--json"], s);
    assert_eq!(all.as_array().unwrap().len(), 3, "{all:#}");
    for run in all.as_array().unwrap() {
        assert_valid(&summary, "runs --json", run);
    }
    // Gates: the CLI's objects are the API's.
    let gates = json(&["gates", "--json"], s);
    assert_eq!(gates[0]["run_id"], gated.as_str(), "{gates:#}");
    assert_valid(&schema_of("OpenGate"), "gates --json", &gates[0]);
    let cancel = wfhost(&["cancel", &gated, "--reason", "not this one"], s);
    assert_eq!(cancel.status.code(), Some(0), "{}", stderr(&cancel));

    let ids = |args: &[&str]| -> Vec<String> {
        let mut args = args.to_vec();
        args.extend(["--json"]);
        json(
            &["runs"].iter().chain(&args).copied().collect::<Vec<_>>(),
            s,
        )
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
    };
    assert_eq!(
        ids(&["--status", "cancelled"]),
        std::slice::from_ref(&gated)
    );
    assert_eq!(ids(&["--status", "succeeded"]).len(), 2);
    assert!(!ids(&["--status", "succeeded"]).contains(&gated));
    assert_eq!(ids(&["--workflow", "hello"]).len(), 2);
    assert_eq!(
        ids(&["--grep", &gated[gated.len() - 6..]]),
        std::slice::from_ref(&gated)
    );
    assert_eq!(ids(&["--since", "1h"]).len(), 3);
    assert!(ids(&["--since", "2999-01-01"]).is_empty());
    // Newest first, and a limit says there are more.
    let newest = ids(&["--limit", "1"]);
    assert_eq!(newest, std::slice::from_ref(&gated));
    let limited = wfhost(&["runs", "-n", "1"], s);
    assert!(
        stdout(&limited).contains("(the newest 1; `--limit N` shows more)"),
        "{}",
        stdout(&limited)
    );
    let none = wfhost(&["runs", "--status", "failed"], s);
    assert_eq!(stdout(&none).trim(), "no runs match");

    // The API lists the very same objects.
    let served = serve(s);
    let (code, page) = http_get(&served.addr, "/v1/runs?since=1h&limit=1000");
    assert_eq!(code, 200, "{page}");
    let all = json(&["runs", "--json"], s);
    assert_eq!(page["runs"], all, "the API and the CLI list runs alike");
    let (code, page) = http_get(
        &served.addr,
        "/v1/runs?workflow=review-gate&status=cancelled",
    );
    assert_eq!(code, 200, "{page}");
    assert_eq!(page["runs"][0]["id"], gated.as_str(), "{page}");
    let (code, err) = http_get(&served.addr, "/v1/runs?since=yesterday");
    assert_eq!(code, 400, "{err}");
    assert!(
        err["message"].as_str().unwrap().contains("neither an age"),
        "{err}"
    );
}

#[test]
fn runs_has_aliases_bad_filters_are_refused_and_typos_get_a_suggestion() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    for alias in ["status", "ps"] {
        let out = wfhost(&[alias], s);
        assert_eq!(out.status.code(), Some(0), "{alias}: {}", stderr(&out));
        assert_eq!(stdout(&out).trim(), "no runs yet", "{alias}");
    }
    for (args, says) in [
        (
            &["runs", "--status", "done"][..],
            "possible values: running",
        ),
        (
            &["runs", "--since", "yesterday"][..],
            "--since: `yesterday`",
        ),
        (&["runs", "--limit", "0"][..], "--limit must be at least 1"),
        (&["shwo"][..], "a similar subcommand exists: 'show'"),
    ] {
        let out = wfhost(args, s);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn a_served_run_with_no_agent_says_its_job_waits_for_one() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = workspace_in(s);
    let served = super::serve::serve_with(s, &["--local-agents", "0"]);
    let hello = repo().join("examples/hello/workflow.json");
    let (code, started) = super::serve::http_post(
        &served.addr,
        "/v1/runs",
        &serde_json::json!({"workflow": hello, "workspace": ws}),
    );
    assert_eq!(code, 202, "{started}");
    let id = started["run_id"].as_str().unwrap().to_string();
    let mut summary = serde_json::Value::Null;
    super::wait_until("the run's job is queued", || {
        summary = http_get(&served.addr, &format!("/v1/runs/{id}/summary")).1;
        summary["open_jobs"]
            .as_array()
            .is_some_and(|j| !j.is_empty())
    });
    assert_valid(
        &schema_of("RunSummary"),
        "a running run's summary",
        &summary,
    );
    let job = &summary["open_jobs"][0];
    assert_eq!(job["state"], "queued", "{summary:#}");
    assert_eq!(job["node"], "main", "{summary:#}");
    assert_eq!(job["attempt"], 1, "{summary:#}");
    let (_, shown) = http_get(&served.addr, &format!("/v1/runs/{id}"));
    assert_eq!(shown["open_jobs"], summary["open_jobs"], "{shown:#}");
    // The CLI says so in words, and in its JSON.
    let show = wfhost(&["show", &id], s);
    let text = stdout(&show);
    assert!(
        text.contains(&format!(
            "waiting     for an agent: job {} (main.",
            job["job"]
        )) && text.contains("attempt 1) queued since "),
        "{text}"
    );
    let shown: serde_json::Value =
        serde_json::from_slice(&wfhost(&["show", &id, "--json"], s).stdout).unwrap();
    assert_eq!(shown["open_jobs"], summary["open_jobs"]);
    // A finished run waits for nothing.
    let listed = json(&["runs", "--json"], s);
    assert_eq!(listed[0]["open_jobs"], summary["open_jobs"], "{listed:#}");
    // An agent comes: the time the job waited is reported apart from the
    // block's duration.
    std::thread::sleep(std::time::Duration::from_millis(600));
    let mut agent = super::command(s)
        .args(["agent", "--server", &format!("http://{}", served.addr)])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    super::wait_until("the run succeeds", || {
        http_get(&served.addr, &format!("/v1/runs/{id}/summary")).1["status"] == "succeeded"
    });
    let _ = agent.kill();
    let _ = agent.wait();
    let shown = super::shown_with_steps(&["show", &id, "--json"], s);
    let step = &shown["steps"][0];
    let queued = step["queued_ms"].as_f64().unwrap_or_default();
    assert!(queued >= 600.0, "{step:#}");
    assert!(step["duration_ms"].as_f64().unwrap() < queued, "{step:#}");
    let block = &shown["blocks"][step["block"].as_str().unwrap()];
    assert!(
        block["queued_ms"].as_f64().unwrap_or_default() >= 600.0,
        "{shown:#}"
    );
    let text = stdout(&wfhost(&["show", &id], s));
    assert!(text.contains("ms waiting for an agent)"), "{text}");
    let listed = json(&["runs", "--json"], s);
    assert_eq!(listed[0]["open_jobs"], serde_json::json!([]), "{listed:#}");
}
