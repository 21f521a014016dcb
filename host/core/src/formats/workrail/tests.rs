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
            {"id": "setup", "title": "Setup", "prompt": "Set status for {{service}} ({{ spaced }}).",
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
         Set status for {{inputs.service|[unset: service]}} ({{{{ spaced }}).\n\n## Function Definitions\n- `probe(url: string)`: Ask the API once."
    );
    assert_eq!(
        task("check"),
        "## Goal\nCheck the status.\n\n## Procedure\n1. Call probe()\n2. Update status\n\n\
         ## Output Required\n- **status**: pending or done\n\n\
         ## Function Definitions\n- `probe(url: string)`: Ask the API once.\n\n\
         ## Loop Context\n- Loop: poll\n- Iteration: {{inputs.attempt}}"
    );
    assert!(task("report").contains("Report {{inputs.result.summary|[unset: result.summary]}}."));
    assert_eq!(
        prompt::templated("a {{wr.x}} {{ not a name! }} {{b}} {{items.0}} {{x-y}}"),
        "a {{{{wr.x}} {{{{ not a name! }} {{inputs.b|[unset: b]}} {{{{items.0}} {{{{x-y}}"
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
fn what_wfhost_cannot_run_is_refused_by_pointer_never_skipped() {
    assert_refused(
        &refused(|v| v["features"] = json!(["wr.features.memory_context", "wr.features.nope"])),
        "/features/1",
        "unknown feature `wr.features.nope`",
    );
    assert_refused(
        &refused(|v| v["steps"][0]["templateCall"] = json!({"templateId": "t"})),
        "/steps/0/templateCall/templateId",
        "unknown template `t`",
    );
    assert_refused(
        &refused(|v| {
            v["steps"][0]["templateCall"] = json!({"templateId": "wr.templates.routine.none"})
        }),
        "/steps/0/templateCall/templateId",
        "no routine `none`",
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
        "wr.bindings.x",
    );
    assert_refused(
        &refused(|v| {
            v["steps"][2]["promptBlocks"]["goal"] = json!([{"kind": "ref", "refId": "r"}])
        }),
        "/steps/2/promptBlocks/goal/0/refId",
        "unknown ref `r`",
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
    assert_refused(
        &refused(|v| {
            v["assessments"] = json!([{"id": "a", "purpose": "p", "dimensions": [
                {"id": "d", "purpose": "p", "levels": ["x", "y"]}]}]);
            v["steps"][0]["assessmentRefs"] = json!(["b"]);
        }),
        "/steps/0/assessmentRefs/0",
        "unknown assessment `b`",
    );
    assert_refused(
        &refused(|v| {
            v["assessments"] = json!([{"id": "a", "purpose": "p", "dimensions": [
                {"id": "d", "purpose": "p", "levels": ["x", "y"]}]}]);
            v["steps"][0]["assessmentRefs"] = json!(["a"]);
            v["steps"][0]["assessmentConsequences"] = json!([{"when": {"anyEqualsLevel": "z"},
                "effect": {"kind": "require_followup", "guidance": "g"}}]);
        }),
        "/steps/0/assessmentConsequences/0/when/anyEqualsLevel",
        "not a level",
    );
}

#[test]
fn workrail_constructs_compile_to_what_the_client_sees() {
    let mut v = polling();
    v["features"] = json!(["wr.features.capabilities"]);
    v["references"] = json!([{"id": "spec", "title": "Spec", "source": "docs/spec.md",
                              "purpose": "what to build", "authoritative": true}]);
    v["extensionPoints"] =
        json!([{"slotId": "probe", "purpose": "p", "default": "wr.routine-probe"}]);
    v["steps"][0]["prompt"] = json!("Set status with {{wr.bindings.probe}}.");
    v["steps"][0]["promptFragments"] = json!([
        {"id": "always", "text": "Always."},
        {"id": "big", "when": {"var": "size", "equals": "big"}, "text": "Big {{size}}."}
    ]);
    v["steps"][0]["verification"] = json!({"command": "make check"});
    v["steps"][2]["promptBlocks"]["constraints"] =
        json!([[{"kind": "ref", "refId": "wr.refs.notes_first_durability"}]]);
    v["steps"][3]["requireConfirmation"] = json!({"kind": "human_approval"});
    v["steps"][3]["outputContract"] = json!({"contractRef": "wr.contracts.gate_verdict"});
    v["steps"].as_array_mut().unwrap().push(json!({
        "id": "fan", "type": "parallel", "title": "Fan out",
        "parallelDelegations": [
            {"workflowId": "wr.research", "goal": "dig", "contextMapping": {"topic": "subject"}},
            {"workflowId": "wr.review", "runCondition": {"var": "deep", "equals": true}}
        ]
    }));
    let wf = compiled(&v);
    let blocks = &wf.nodes["main"].blocks;
    let task = |b: &str| blocks[b].prompt.as_ref().unwrap().task.clone().unwrap();
    assert!(
        task("setup").contains("Set status with wr.routine-probe."),
        "{}",
        task("setup")
    );
    // Conditional fragments are chosen when the step is shown.
    assert_eq!(
        blocks["setup"].config["prompt_fragments"],
        json!([{"text": "Always."},
               {"when": {"var": "size", "equals": "big"}, "text": "Big {{inputs.size|[unset: size]}}."}])
    );
    assert_eq!(blocks["setup"].config["step_id"], "setup");
    assert_eq!(
        action(&wf, "setup", "SIGNAL:SUCCESS"),
        "JUMP:setup__verification"
    );
    assert!(task("setup__verification").contains("make check"));
    assert_eq!(
        action(&wf, "setup__verification", "SIGNAL:SUCCESS"),
        "JUMP:poll"
    );
    // Features add to prompt blocks; refs become their text.
    assert!(
        task("check").contains("Notes are the durable record:"),
        "{}",
        task("check")
    );
    assert!(
        task("check").contains("## Verify\n- No path that depends on a capability"),
        "{}",
        task("check")
    );
    // A confirmation kind is a confirmation; a contract a schema, no notes needed.
    assert_eq!(blocks["report"].config["require_confirmation"], json!(true));
    assert_eq!(blocks["report"].config["notes_required"], json!(false));
    assert!(blocks["report"].validation_schema.is_some());
    assert!(task("report").contains("wr.gate_verdict"));
    assert_eq!(
        blocks["report"].config["workflow_references"][0]["id"],
        "spec"
    );
    // A parallel step is one step whose prompt lists its delegations.
    let fan = &blocks["fan"];
    assert_eq!(fan.config["notes_required"], json!(true));
    let fragments = fan.config["prompt_fragments"].as_array().unwrap();
    assert_eq!(fragments.len(), 5);
    assert!(
        fragments[1]["text"]
            .as_str()
            .unwrap()
            .contains("`subject`: `{{inputs.topic|[unset: topic]}}`")
    );
    assert_eq!(fragments[2]["when"], json!({"var": "deep", "equals": true}));
    assert_eq!(action(&wf, "report", "SIGNAL:SUCCESS"), "JUMP:fan");
}

#[test]
fn assessments_compile_to_the_blocks_check() {
    let mut v = polling();
    v["assessments"] = json!([{"id": "risk", "purpose": "How risky", "dimensions": [
        {"id": "impact", "purpose": "blast radius", "levels": ["low", "high"]}]}]);
    v["steps"][0]["assessmentRefs"] = json!(["risk"]);
    v["steps"][0]["assessmentConsequences"] = json!([{"when": {"anyEqualsLevel": "high"},
        "effect": {"kind": "require_followup", "guidance": "Plan a rollback."}}]);
    let wf = compiled(&v);
    let setup = &wf.nodes["main"].blocks["setup"];
    let config = &setup.config["assessments"];
    assert_eq!(config["definitions"][0]["id"], "risk");
    let checked = super::check_assessments(
        config,
        &[json!({"kind": "wr.assessment", "dimensions": {"impact": "high"}})],
    );
    assert_eq!(checked.followups[0].1, "Plan a rollback.");
    assert!(
        setup
            .prompt
            .as_ref()
            .unwrap()
            .task
            .as_ref()
            .unwrap()
            .contains("`impact` (low | high)")
    );
}

#[test]
fn a_routine_call_becomes_the_routines_steps_with_dotted_ids() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("routines")).unwrap();
    std::fs::write(
        dir.path().join("routines/review.json"),
        json!({"id": "wr.routine-review", "name": "R", "description": "d", "version": "1.0.0",
               "steps": [{"id": "look", "title": "Look at {target}", "prompt": "Read {target}."},
                         {"id": "judge", "title": "Judge", "prompt": "Judge."}]})
        .to_string(),
    )
    .unwrap();
    let mut v = polling();
    v["steps"][0] = json!({"id": "setup", "title": "Setup",
        "templateCall": {"templateId": "wr.templates.routine.review", "args": {"target": "lib.rs"}}});
    let file = dir.path().join("flow.json");
    std::fs::write(&file, v.to_string()).unwrap();
    let loaded = crate::formats::load(&file, &["actions-core"]).unwrap();
    let blocks = &loaded.workflow.nodes["main"].blocks;
    assert_eq!(blocks["setup--look"].config["step_id"], "setup.look");
    assert_eq!(blocks["setup--look"].config["title"], "Look at lib.rs");
    assert_eq!(loaded.workflow.nodes["main"].entry_block, "setup--look");
    let next = &blocks["setup--look"].transitions[0].action;
    assert_eq!(next, "JUMP:setup--judge");
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
    bad["steps"][0]["auditing"] = json!({"rubric": ["x"]});
    std::fs::write(&file, bad.to_string()).unwrap();
    let err = crate::formats::load(&file, &["actions-core"])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("polling.json: /steps/0/auditing: WorkRail workflow:"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
