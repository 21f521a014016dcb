//! Parallel blocks over a list (`parallel.over`): one lane per item, the
//! item in the lane's config, a bounded window of lanes, fan-in in item
//! order, and the list's problems as the block's failure.

use serde_json::{Value, json};

use super::{CoreActions, CrashingLog, MemoryLanes, checked, kinds};
use crate::manifest::{self, Workflow};
use crate::run::engine::{RunOptions, RunStatus, resume, run};
use crate::run::event::{Event, MemoryLog};
use crate::run::state::RunState;

/// A workflow whose block `each` runs over `over` with `config` (and
/// `parallel` extras), after a block `first` with `first_config`.
fn over_workflow(over: &str, config: Value, extra: Value, first_config: Value) -> Workflow {
    let mut parallel = json!({"over": over, "merge_strategy": "workspace"});
    for (k, v) in extra.as_object().unwrap() {
        parallel[k] = v.clone();
    }
    let json = json!({
        "id": "over",
        "inputs": {"type": "object", "properties": {
            "items": {"type": "array"}, "n": {"type": "number"}
        }},
        "start_node": "dev",
        "nodes": {"dev": {"entry_block": "first", "blocks": {
            "first": {"worker": "lane", "config": first_config,
                      "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:each"}]},
            "each": {
                "worker": "lane",
                "config": config,
                "parallel": parallel,
                "transitions": [
                    {"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:after"},
                    {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL:the lanes failed"}
                ]
            },
            "after": {"worker": "lane", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]}
        }}}
    });
    checked(&json)
}

fn options(inputs: Value) -> RunOptions {
    let mut options = RunOptions::new("r1");
    options.inputs = inputs.as_object().unwrap().clone();
    options
}

async fn start_with(
    wf: &Workflow,
    host: &MemoryLanes,
    inputs: Value,
    log: &mut MemoryLog,
) -> crate::run::engine::RunReport {
    let report = run(wf, host, &CoreActions, &options(inputs), log)
        .await
        .unwrap();
    assert_eq!(RunState::replay(&log.events).unwrap(), report.state);
    report
}

#[tokio::test]
async fn one_lane_per_item_sees_its_item_and_fans_in_in_item_order() {
    // Item 0 is the slowest: completion order is the reverse of item order.
    let wf = over_workflow(
        "inputs.items",
        json!({
            "delay_ms": "{{item.delay}}",
            "writes": [["src/{{item.name}}.rs", "lane {{item_index}} of {{item}}"],
                       ["src/shared.rs", "{{item.name}}"]]
        }),
        json!({}),
        json!({}),
    );
    let items = json!([
        {"name": "a", "delay": 60}, {"name": "b", "delay": 30}, {"name": "c", "delay": 1}
    ]);
    let host = MemoryLanes::with_main(&[]);
    let mut log = MemoryLog::default();
    let report = start_with(&wf, &host, json!({"items": items}), &mut log).await;
    assert_eq!(report.status, RunStatus::Succeeded);

    let started = log
        .events
        .iter()
        .find(|e| matches!(e, Event::LanesStarted { .. }))
        .unwrap();
    let started = serde_json::to_value(started).unwrap();
    assert_eq!(started["lanes"], json!(["0", "1", "2"]));
    assert_eq!(started["over"], "inputs.items");

    let main = host.main();
    assert_eq!(main["src/a.rs"], r#"lane 0 of {"delay":60,"name":"a"}"#);
    assert_eq!(main["src/c.rs"], r#"lane 2 of {"delay":1,"name":"c"}"#);
    // The first item wins the shared file, though it finished last.
    assert_eq!(main["src/shared.rs"], "a");
    let completed: Vec<&str> = log
        .events
        .iter()
        .filter_map(|e| match e {
            Event::LaneCompleted { lane, .. } => Some(lane.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(completed, ["2", "1", "0"]);
    // The lanes' segments reach the payload in item order.
    let contents: Vec<&str> = report
        .payload()
        .iter()
        .map(|s| s.content.as_str())
        .filter(|c| c.ends_with(" done") && !c.starts_with("main"))
        .collect();
    assert_eq!(contents, ["0 done", "1 done", "2 done"]);
    // A parallel block counts once against the step limit.
    assert_eq!(report.state.blocks_run, 3);
    assert_eq!(report.steps, 5);
}

#[tokio::test]
async fn no_more_lanes_run_at_once_than_the_window() {
    let wf = over_workflow(
        "inputs.items",
        json!({"delay_ms": 2}),
        json!({"max_concurrent": 7, "merge_strategy": "concatenate"}),
        json!({}),
    );
    let items: Vec<Value> = (0..200).map(Value::from).collect();
    let host = MemoryLanes::with_main(&[]);
    let mut log = MemoryLog::default();
    let report = start_with(&wf, &host, json!({"items": items}), &mut log).await;
    assert_eq!(report.status, RunStatus::Succeeded);
    let (_, most) = *host.in_flight.lock().unwrap();
    assert!(most <= 7, "{most} lanes ran at once");
    // The host heard of every lane, the first window at once, the others
    // as slots freed.
    let starting = host.starting.lock().unwrap().clone();
    assert_eq!(starting[0].0.len(), 7);
    assert_eq!(starting[0].1, Some(7));
    let told: usize = starting.iter().map(|(names, _)| names.len()).sum();
    assert_eq!(told, 200);
    assert_eq!(starting.last().unwrap().0.last().unwrap(), "199");
}

#[tokio::test]
async fn ten_thousand_lanes_fan_out_and_in() {
    let wf = over_workflow(
        "inputs.items",
        json!({"writes": [["src/{{item}}.txt", "{{item_index}}"]]}),
        json!({"merge_strategy": "workspace"}),
        json!({}),
    );
    let items: Vec<Value> = (0..10_000).map(|i| Value::from(format!("f{i}"))).collect();
    let host = MemoryLanes::with_main(&[]);
    let mut log = MemoryLog::default();
    let report = start_with(&wf, &host, json!({"items": items}), &mut log).await;
    assert_eq!(report.status, RunStatus::Succeeded);
    let main = host.main();
    assert_eq!(main.len(), 10_000);
    assert_eq!(main["src/f9999.txt"], "9999");
    let (_, most) = *host.in_flight.lock().unwrap();
    assert!(most <= crate::run::engine::DEFAULT_LANE_WINDOW, "{most}");
    // The run goes on after the block: 10,000 lanes are one block.
    assert_eq!(report.state.blocks_run, 3);
}

#[tokio::test]
async fn a_list_in_the_payload_is_read_as_json() {
    let wf = over_workflow(
        "payload.FILES.names",
        json!({"writes": [["src/{{item}}", "x"]]}),
        json!({}),
        json!({"push": {"kind": "FILES", "content": r#"{"names": ["x.rs", "y.rs"]}"#}}),
    );
    let host = MemoryLanes::with_main(&[]);
    let mut log = MemoryLog::default();
    let report = start_with(&wf, &host, json!({}), &mut log).await;
    assert_eq!(report.status, RunStatus::Succeeded);
    let main = host.main();
    assert!(main.contains_key("src/x.rs") && main.contains_key("src/y.rs"));
}

#[tokio::test]
async fn something_that_is_not_a_list_fails_the_block_with_the_reason() {
    let wf = over_workflow("inputs.n", json!({}), json!({}), json!({}));
    let host = MemoryLanes::with_main(&[]);
    let mut log = MemoryLog::default();
    let report = start_with(&wf, &host, json!({"n": 3}), &mut log).await;
    assert!(
        matches!(report.status, RunStatus::Failed { .. }),
        "{:?}",
        report.status
    );
    let completed = log
        .events
        .iter()
        .find_map(|e| match e {
            Event::BlockCompleted {
                block,
                signal,
                failure,
                permanent,
                ..
            } if block == "each" => Some((signal.clone(), failure.clone(), *permanent)),
            _ => None,
        })
        .unwrap();
    assert_eq!(completed.0, "SIGNAL:WORKER_ERROR");
    assert_eq!(
        completed.1.as_deref(),
        Some("`inputs.n` is not a list: it is a number (3)")
    );
    assert!(
        completed.2,
        "a list that is not one does not become one on retry"
    );
    assert!(!kinds(&log).contains(&"lanes_started"));
    assert!(
        host.seen
            .lock()
            .unwrap()
            .iter()
            .all(|(lane, _, _)| lane.is_none())
    );
}

#[tokio::test]
async fn an_empty_list_succeeds_without_lanes() {
    let wf = over_workflow("inputs.items", json!({}), json!({}), json!({}));
    let host = MemoryLanes::with_main(&[]);
    let mut log = MemoryLog::default();
    let report = start_with(&wf, &host, json!({"items": []}), &mut log).await;
    assert_eq!(report.status, RunStatus::Succeeded);
    assert!(!kinds(&log).contains(&"lanes_started"));
    assert!(
        report
            .payload()
            .iter()
            .any(|s| s.content == "inputs.items has no items: no lanes ran")
    );
}

#[tokio::test]
async fn a_crashed_fan_out_over_a_list_runs_only_its_unfinished_items_again() {
    let wf = over_workflow(
        "inputs.items",
        json!({"delay_ms": "{{item}}", "writes": [["src/{{item_index}}.rs", "{{item}}"]]}),
        json!({}),
        json!({}),
    );
    let inputs = json!({"items": [1, 80, 2]});
    let host = MemoryLanes::with_main(&[]);
    // run_started, block_started + completed (first), action_taken,
    // block_started, lanes_started, two lane_completed: then the host dies.
    let mut log = CrashingLog {
        inner: MemoryLog::default(),
        limit: 8,
    };
    let crashed = run(&wf, &host, &CoreActions, &options(inputs.clone()), &mut log).await;
    assert!(crashed.is_err());
    assert_eq!(kinds(&log.inner).last(), Some(&"lane_completed"));
    let mut log = log.inner;
    let state = RunState::replay(&log.events).unwrap();
    let report = resume(&wf, &host, &CoreActions, state, &mut log)
        .await
        .unwrap();
    assert_eq!(report.status, RunStatus::Succeeded);
    // Items 0 and 2 finished before the crash; item 1 ran again.
    assert_eq!((host.runs("0"), host.runs("1"), host.runs("2")), (1, 2, 1));
    assert_eq!(host.main()["src/1.rs"], "80");
    assert_eq!(RunState::replay(&log.events).unwrap(), report.state);
}

#[test]
fn manifest_checks_over() {
    let check = |parallel: Value, inputs: Option<Value>| -> String {
        let mut json = json!({
            "id": "x", "start_node": "n",
            "nodes": {"n": {"entry_block": "b", "blocks": {"b": {"worker": "lane", "parallel": parallel}}}}
        });
        if let Some(inputs) = inputs {
            json["inputs"] = inputs;
        }
        let wf = manifest::parse(std::path::Path::new("t.json"), &json.to_string()).unwrap();
        manifest::check(
            std::path::Path::new("t.json"),
            &wf,
            &["actions-core", "lane"],
        )
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("\n")
    };
    let declared = json!({"type": "object", "properties": {"files": {"type": "array"}}});
    assert_eq!(
        check(json!({"over": "inputs.files"}), Some(declared.clone())),
        ""
    );
    assert_eq!(check(json!({"over": "payload.FILES.names"}), None), "");
    let both = check(
        json!({"over": "inputs.files", "lanes": {"a": {}}}),
        Some(declared.clone()),
    );
    assert!(
        both.contains("/parallel/over: a parallel group has either `over`"),
        "{both}"
    );
    let bad = check(json!({"over": "files"}), None);
    assert!(
        bad.contains("/parallel/over: `files` names no list"),
        "{bad}"
    );
    let undeclared = check(json!({"over": "inputs.other"}), Some(declared));
    assert!(
        undeclared.contains(
            "/parallel/over: `inputs.other`: the inputs schema declares no input `other`"
        ),
        "{undeclared}"
    );
    let no_inputs = check(json!({"over": "inputs.files"}), None);
    assert!(no_inputs.contains("declares no `inputs`"), "{no_inputs}");
}
