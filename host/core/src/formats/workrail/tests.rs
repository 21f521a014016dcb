use serde_json::{Value, json};

use super::*;
use crate::manifest::{self, Workflow};

/// A WorkRail workflow with a while loop whose body is a top-level step
/// named by id, and a conditional last step.
fn polling() -> Value {
    json!({
        "id": "polling-demo",
        "name": "Polling",
        "description": "Poll until done",
        "version": "0.1.0",
        "metaGuidance": ["Be terse."],
        "functionDefinitions": [{"name": "probe", "definition": "Ask the API once.",
            "parameters": [{"name": "url", "type": "string"}]}],
        "steps": [
            {"id": "setup", "title": "Setup", "prompt": "Set status for {{ service }}.",
             "agentRole": "You watch a service.", "guidance": ["start at 0"]},
            {"id": "poll", "type": "loop", "title": "Poll",
             "loop": {"type": "while", "maxIterations": 5, "iterationVar": "attempt",
                      "condition": {"var": "status", "not_equals": "done"}},
             "body": "check"},
            {"id": "check", "title": "Check", "promptBlocks": {
                "goal": "Check the status.",
                "procedure": ["Call probe()", [{"kind": "text", "text": "Update status"}]],
                "outputRequired": {"status": "pending or done"}}},
            {"id": "report", "title": "Report", "prompt": "Report {{result.summary}}.",
             "runCondition": {"var": "status", "equals": "done"},
             "requireConfirmation": {"var": "risky"}}
        ]
    })
}

fn compiled(value: &Value) -> Workflow {
    let manifest = compile(value).unwrap();
    let wf: Workflow = serde_json::from_value(manifest).unwrap();
    let errors = manifest::check(std::path::Path::new("w.json"), &wf, &["actions-core"]);
    assert!(errors.is_empty(), "{errors:?}");
    wf
}

fn action(wf: &Workflow, block: &str, signal: &str) -> String {
    let b = &wf.nodes["main"].blocks[block];
    b.transitions
        .iter()
        .find(|t| t.on_signal == signal)
        .unwrap_or_else(|| panic!("{block} has no {signal}"))
        .action
        .clone()
}

#[test]
fn steps_become_a_checked_chain_of_external_blocks_guards_and_loop_heads() {
    let wf = compiled(&polling());
    let main = &wf.nodes["main"];
    assert_eq!(main.entry_block, "setup");
    let ids: Vec<&str> = main.blocks.keys().map(String::as_str).collect();
    assert_eq!(ids, ["check", "poll", "report", "report_when", "setup"]);
    assert_eq!(action(&wf, "setup", "SIGNAL:SUCCESS"), "JUMP:poll");
    assert_eq!(action(&wf, "poll", "SIGNAL:ENTER"), "JUMP:check");
    assert_eq!(
        action(&wf, "check", "SIGNAL:SUCCESS"),
        "JUMP:poll",
        "the body leads back to the head"
    );
    assert_eq!(
        action(&wf, "poll", "SIGNAL:EXIT"),
        "JUMP:report_when",
        "the body step is not run again at top level"
    );
    assert_eq!(action(&wf, "report_when", "SIGNAL:TRUE"), "JUMP:report");
    assert_eq!(action(&wf, "report_when", "SIGNAL:FALSE"), "END");
    assert_eq!(action(&wf, "report", "SIGNAL:SUCCESS"), "END");
    let head = &main.blocks["poll"];
    assert_eq!(head.worker, crate::control::LOOP_WORKER);
    assert_eq!(head.config["iteration_var"], "attempt");
    assert_eq!(
        head.config["condition"],
        json!({"var": "status", "not_equals": "done"})
    );
    assert_eq!(
        main.blocks["report"].config["require_confirmation"],
        json!({"var": "risky"})
    );
    assert_eq!(main.blocks["setup"].config["title"], "Setup");
    assert_eq!(
        wf.rules.as_deref(),
        Some("## Workflow Guidance\n- Be terse.")
    );
    assert_eq!(
        wf.inputs,
        Some(json!({"type": "object", "additionalProperties": true}))
    );
}

#[test]
fn prompts_are_rendered_as_workrail_renders_them_with_placeholders_as_inputs() {
    let wf = compiled(&polling());
    let task = |b: &str| {
        wf.nodes["main"].blocks[b]
            .prompt
            .as_ref()
            .unwrap()
            .task
            .clone()
            .unwrap()
    };
    assert_eq!(
        task("setup"),
        "## Agent Role Instructions\nYou watch a service.\n\n## Step Guidance\n- start at 0\n\n\
         Set status for {{inputs.service}}.\n\n## Function Definitions\n- `probe(url: string)`: Ask the API once."
    );
    assert_eq!(
        task("check"),
        "## Goal\nCheck the status.\n\n## Procedure\n1. Call probe()\n2. Update status\n\n\
         ## Output Required\n- **status**: pending or done\n\n\
         ## Function Definitions\n- `probe(url: string)`: Ask the API once.\n\n\
         ## Loop Context\n- Loop: poll\n- Iteration: {{inputs.attempt}}"
    );
    assert!(task("report").contains("Report {{inputs.result.summary}}."));
    assert_eq!(
        prompt::templated("a {{wr.x}} {{ not a name! }} {{b}}"),
        "a {{{{wr.x}} {{{{ not a name! }} {{inputs.b}}"
    );
}

#[test]
fn an_artifact_loop_is_decided_by_its_body_and_the_contract_becomes_a_schema() {
    let wf = compiled(&json!({
        "id": "art", "name": "A", "description": "d", "version": "1.0.0",
        "steps": [{"id": "it", "type": "loop", "title": "It",
            "loop": {"type": "while", "maxIterations": 3,
                     "conditionSource": {"kind": "artifact_contract", "contractRef": "wr.contracts.loop_control", "loopId": "work"}},
            "body": [
                {"id": "work", "title": "W", "prompt": "work"},
                {"id": "decide", "title": "D", "prompt": "decide",
                 "outputContract": {"contractRef": "wr.contracts.loop_control"}}
            ]}]
    }));
    let head = &wf.nodes["main"].blocks["it"];
    assert_eq!(
        head.config["artifact"],
        json!({"blocks": ["main.decide"], "loop_id": "work"})
    );
    let schema = wf.nodes["main"].blocks["decide"]
        .validation_schema
        .clone()
        .unwrap();
    let check = crate::run::validation::OutputSchema::compile(&schema).unwrap();
    assert!(
        check
            .check(r#"{"artifacts":[{"kind":"wr.loop_control","decision":"stop"}]}"#)
            .is_ok()
    );
    assert!(
        check
            .check(r#"{"artifacts":[{"kind":"wr.loop_control","decision":"maybe"}]}"#)
            .is_err()
    );
    assert!(check.check(r#"{}"#).is_err());
}

fn refused(edit: impl FnOnce(&mut Value)) -> Vec<(String, String)> {
    let mut v = polling();
    edit(&mut v);
    compile(&v).unwrap_err()
}

fn assert_refused(errors: &[(String, String)], at: &str, says: &str) {
    assert!(
        errors.iter().any(|(p, m)| p == at && m.contains(says)),
        "expected {at}: …{says}… in {errors:#?}"
    );
}

#[test]
fn constructs_wfhost_cannot_run_are_refused_by_pointer_never_skipped() {
    assert_refused(
        &refused(|v| v["features"] = json!(["wr.features.memory_context"])),
        "/features",
        "compiler features",
    );
    assert_refused(
        &refused(|v| {
            v["steps"][3] =
                json!({"id": "fan", "type": "parallel", "title": "F", "parallelDelegations": []})
        }),
        "/steps/3/type",
        "parallel steps",
    );
    assert_refused(
        &refused(|v| v["steps"][0]["templateCall"] = json!({"templateId": "t"})),
        "/steps/0/templateCall",
        "template calls",
    );
    assert_refused(
        &refused(|v| v["steps"][0]["audit"] = json!({})),
        "/steps/0/audit",
        "audits",
    );
    assert_refused(
        &refused(|v| v["steps"][0]["nonsense"] = json!(1)),
        "/steps/0/nonsense",
        "unknown field `nonsense`",
    );
    assert_refused(
        &refused(|v| v["bogus"] = json!(1)),
        "/bogus",
        "unknown field `bogus`",
    );
    assert_refused(
        &refused(|v| {
            v["steps"][0]["promptFragments"] =
                json!([{"id": "f", "when": {"var": "x"}, "text": "t"}])
        }),
        "/steps/0/promptFragments/0/when",
        "conditional prompt fragments",
    );
    assert_refused(
        &refused(|v| v["steps"][3]["requireConfirmation"] = json!({"kind": "human_approval"})),
        "/steps/3/requireConfirmation/kind",
        "not supported",
    );
    assert_refused(
        &refused(|v| {
            v["steps"][3]["outputContract"] = json!({"contractRef": "wr.contracts.other"})
        }),
        "/steps/3/outputContract/contractRef",
        "unknown output contract",
    );
    assert_refused(
        &refused(|v| v["steps"][1]["loop"]["condition"] = json!({"var": "s", "like": 1})),
        "/steps/1/loop/condition/like",
        "unknown condition operator",
    );
    assert_refused(
        &refused(|v| v["steps"][1]["body"] = json!("nowhere")),
        "/steps/1/body",
        "does not exist",
    );
    assert_refused(
        &refused(|v| v["steps"][3]["id"] = json!("setup")),
        "/steps/3/id",
        "used twice",
    );
    assert_refused(
        &refused(|v| v["steps"][0]["prompt"] = json!("see {{wr.bindings.x}}")),
        "/steps/0",
        "extension point",
    );
    assert_refused(
        &refused(|v| {
            v["steps"][2]["promptBlocks"]["goal"] = json!([{"kind": "ref", "refId": "r"}])
        }),
        "/steps/2/promptBlocks/goal/0",
        "`ref`",
    );
    assert_refused(
        &refused(|v| {
            v["steps"][2]["validationCriteria"] =
                json!([{"type": "regex", "pattern": "(", "message": "m"}])
        }),
        "/steps/2/validationCriteria/0/pattern",
        "invalid regular expression",
    );
    assert_refused(
        &refused(|v| v["steps"][1]["loop"]["maxIterations"] = json!(0)),
        "/steps/1/loop/maxIterations",
        "1 to 1000",
    );
}

#[test]
fn a_workrail_file_loads_as_a_manifest_and_errors_name_the_file_and_pointer() {
    let dir = std::env::temp_dir().join(format!("wfhost-workrail-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("polling.json");
    std::fs::write(&file, serde_json::to_string_pretty(&polling()).unwrap()).unwrap();
    let loaded = crate::formats::load(&file, &["actions-core"]).unwrap();
    assert_eq!(loaded.workflow.id, "polling-demo");
    let mut bad = polling();
    bad["steps"][0]["verification"] = json!({"command": "make"});
    std::fs::write(&file, bad.to_string()).unwrap();
    let err = crate::formats::load(&file, &["actions-core"])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("polling.json: /steps/0/verification: WorkRail workflow:"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
