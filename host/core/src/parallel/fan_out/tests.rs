//! Parallel blocks against an in-memory lane host: workspaces are maps of
//! file → content, lanes are copies of the main map.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use crate::command::EngineCommand;
use crate::manifest::{self, Workflow};
use crate::run::engine::{
    ActionInterpreter, BlockFailure, BlockRequest, BlockResult, BlockRunner, LaneKey, Lanes,
    RunOptions, RunStatus, RunView, SessionReads, TelemetrySource, drive, resume, run,
};
use crate::run::event::{Event, EventSink, MemoryLog, SinkError};
use crate::run::payload::{ContextSegment, Statistics, WorkerOutput};
use crate::run::state::RunState;

type Files = BTreeMap<String, String>;
/// (lane, step index, file restrictions) of one worker call.
type Seen = (Option<String>, u64, Option<Vec<String>>);

/// Lanes as in-memory copies of the main workspace. A lane's worker
/// writes the files its config names (`{"write": {"path": "content"}}`),
/// sleeps `delay_ms` first (to order completions), and signals `signal`.
#[derive(Default)]
struct MemoryLanes {
    main: Mutex<Files>,
    lanes: Mutex<HashMap<LaneKey, Files>>,
    /// Lane name → how many times its worker ran.
    runs: Mutex<BTreeMap<String, u32>>,
    /// Every context a worker saw.
    seen: Mutex<Vec<Seen>>,
    /// Lanes whose creation fails.
    broken: Vec<String>,
    /// What `lanes_starting` was told: lane names and the limit.
    starting: Mutex<Vec<(Vec<String>, Option<u32>)>>,
    /// The times `wait_until` was asked to wait for (a lane's retry).
    waits: Mutex<Vec<i64>>,
    /// Workers running now, and the most that ran at once.
    in_flight: Mutex<(usize, usize)>,
    /// What `lane_window` answers (absent: the trait's default).
    window: Option<usize>,
}

impl MemoryLanes {
    fn with_main(files: &[(&str, &str)]) -> Self {
        let lanes = MemoryLanes::default();
        *lanes.main.lock().unwrap() = files
            .iter()
            .map(|(p, c)| (p.to_string(), c.to_string()))
            .collect();
        lanes
    }

    fn main(&self) -> Files {
        self.main.lock().unwrap().clone()
    }

    fn runs(&self, lane: &str) -> u32 {
        self.runs.lock().unwrap().get(lane).copied().unwrap_or(0)
    }
}

impl BlockRunner for MemoryLanes {
    fn run_block(&self, request: BlockRequest) -> impl Future<Output = BlockResult> + Send {
        let lane = request.lane.clone();
        self.seen.lock().unwrap().push((
            lane.as_ref().map(|k| k.lane.clone()),
            request.context.step_index,
            request.context.file_restrictions.clone(),
        ));
        let config = request.context.config.clone();
        // A number, or a number in a string (an item's, through a
        // placeholder).
        let delay = config
            .get("delay_ms")
            .and_then(|v| v.as_u64().or_else(|| v.as_str()?.parse().ok()))
            .unwrap_or(0);
        async move {
            {
                let mut n = self.in_flight.lock().unwrap();
                n.0 += 1;
                n.1 = n.1.max(n.0);
            }
            tokio::time::sleep(Duration::from_millis(delay)).await;
            self.in_flight.lock().unwrap().0 -= 1;
            if let Some(key) = &lane {
                *self
                    .runs
                    .lock()
                    .unwrap()
                    .entry(key.lane.clone())
                    .or_default() += 1;
                // `write: {path: content}`, and `writes: [[path, content]]`
                // (paths made of placeholders: keys are not rendered).
                let mut writes: Vec<(String, String)> = Vec::new();
                if let Some(serde_json::Value::Object(w)) = config.get("write") {
                    for (path, content) in w {
                        writes.push((path.clone(), content.as_str().unwrap().to_string()));
                    }
                }
                if let Some(serde_json::Value::Array(w)) = config.get("writes") {
                    for pair in w {
                        let text = |i: usize| pair[i].as_str().unwrap().to_string();
                        writes.push((text(0), text(1)));
                    }
                }
                if !writes.is_empty() {
                    let mut lanes = self.lanes.lock().unwrap();
                    let files = lanes.get_mut(key).expect("lane created before it runs");
                    files.extend(writes);
                }
            }
            if config.get("fail").is_some() {
                return BlockResult {
                    outcome: Err(BlockFailure::new("the worker crashed")),
                    log: Vec::new(),
                };
            }
            // `fail_runs: n`: the lane's first n runs fail.
            let failing = match (&lane, config.get("fail_runs").and_then(|v| v.as_u64())) {
                (Some(key), Some(n)) => u64::from(self.runs(&key.lane)) <= n,
                _ => false,
            };
            let mut payload = request.payload.clone();
            // `push: {kind, content}`: a segment for a later block to read.
            if let Some(push) = config.get("push") {
                payload.push(ContextSegment::new(
                    "pushed",
                    push["kind"].as_str().unwrap(),
                    push["content"].as_str().unwrap(),
                ));
            }
            let name = lane.as_ref().map_or("main".to_string(), |k| k.lane.clone());
            payload.push(ContextSegment::new(
                format!("out-{name}"),
                "LANE_OUTPUT",
                format!("{name} done"),
            ));
            let signal = if failing {
                "SIGNAL:FAILED".to_string()
            } else {
                config
                    .get("signal")
                    .and_then(|s| s.as_str())
                    .unwrap_or("SIGNAL:SUCCESS")
                    .to_string()
            };
            BlockResult {
                outcome: Ok(WorkerOutput {
                    payload,
                    signal,
                    structured_output: Some(format!(r#"{{"summary": "{name} summary"}}"#)),
                    statistics: Statistics {
                        tokens_used: 5,
                        lines_written: 2,
                        ..Default::default()
                    },
                    written: Vec::new(),
                }),
                log: Vec::new(),
            }
        }
    }
}

impl Lanes for MemoryLanes {
    fn lane_window(&self, block: &manifest::Block, max_concurrent: Option<u32>) -> usize {
        match self.window {
            Some(n) => n,
            None => {
                let _ = block;
                max_concurrent.map_or(crate::run::engine::DEFAULT_LANE_WINDOW, |n| n as usize)
            }
        }
    }

    fn wait_until(&self, due_at_ms: i64) -> impl Future<Output = ()> + Send {
        self.waits.lock().unwrap().push(due_at_ms);
        async {}
    }

    fn lanes_starting(&self, lanes: &[LaneKey], max_concurrent: Option<u32>) {
        let names = lanes.iter().map(|l| l.lane.clone()).collect();
        self.starting.lock().unwrap().push((names, max_concurrent));
    }

    fn create_lane(&self, lane: &LaneKey) -> impl Future<Output = Result<(), String>> + Send {
        let result = if self.broken.contains(&lane.lane) {
            Err("disk full".to_string())
        } else {
            let main = self.main();
            self.lanes.lock().unwrap().insert(lane.clone(), main);
            Ok(())
        };
        async move { result }
    }

    fn lane_exists(&self, lane: &LaneKey) -> bool {
        self.lanes.lock().unwrap().contains_key(lane)
    }

    fn lane_changes(
        &self,
        lane: &LaneKey,
    ) -> impl Future<Output = Result<Vec<String>, String>> + Send {
        let main = self.main();
        let lanes = self.lanes.lock().unwrap();
        let result = match lanes.get(lane) {
            None => Err("no such lane".to_string()),
            Some(files) => Ok(files
                .iter()
                .filter(|(p, c)| main.get(*p) != Some(c))
                .map(|(p, _)| p.clone())
                .collect()),
        };
        async move { result }
    }

    fn merge_lane(
        &self,
        lane: &LaneKey,
        files: &[String],
    ) -> impl Future<Output = Result<Vec<String>, String>> + Send {
        let lanes = self.lanes.lock().unwrap();
        let source = lanes[lane].clone();
        let mut main = self.main.lock().unwrap();
        for f in files {
            match source.get(f) {
                Some(c) => main.insert(f.clone(), c.clone()),
                None => main.remove(f),
            };
        }
        let output = format!("block-{}.json", lane.agent_id());
        async move { Ok(vec![output]) }
    }

    fn remove_lanes(&self, run_id: &str, step: u64) -> impl Future<Output = ()> + Send {
        self.lanes
            .lock()
            .unwrap()
            .retain(|k, _| !(k.run_id == run_id && k.step == step));
        async {}
    }
}

impl SessionReads for MemoryLanes {}

impl TelemetrySource for MemoryLanes {}

struct CoreActions;

impl ActionInterpreter for CoreActions {
    fn interpret(
        &self,
        _handler: &str,
        action: &str,
        _view: &RunView,
    ) -> impl Future<Output = Result<EngineCommand, String>> + Send {
        let result = crate::actions::parse(action).map_err(|e| e.to_string());
        async move { result }
    }
}

fn workflow(strategy: &str, lanes: serde_json::Value) -> Workflow {
    let json = serde_json::json!({
        "id": "fan",
        "start_node": "dev",
        "nodes": {"dev": {"entry_block": "implement", "blocks": {
            "implement": {
                "worker": "lane",
                "file_restrictions": ["src/**"],
                "parallel": {"merge_strategy": strategy, "lanes": lanes},
                "transitions": [
                    {"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:after"},
                    {"on_signal": "SIGNAL:PARTIAL", "action": "JUMP:after"},
                    {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL:lanes failed"}
                ]
            },
            "after": {"worker": "lane", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]}
        }}}
    });
    checked(&json)
}

/// A manifest that parses and passes the checks.
fn checked(json: &serde_json::Value) -> Workflow {
    let wf = manifest::parse(std::path::Path::new("t.json"), &json.to_string()).unwrap();
    let errors = manifest::check(
        std::path::Path::new("t.json"),
        &wf,
        &["actions-core", "lane"],
    );
    assert!(errors.is_empty(), "{errors:?}");
    wf
}

fn two_lanes_sharing_a_file() -> serde_json::Value {
    serde_json::json!({
        "api": {"config": {"delay_ms": 10, "write": {"src/shared.rs": "from api", "src/api.rs": "api"}}},
        "ui": {"config": {"delay_ms": 80, "write": {"src/shared.rs": "from ui", "src/ui.rs": "ui"}},
               "file_restrictions": ["src/ui/**", "src/*.rs"]}
    })
}

async fn start(
    wf: &Workflow,
    host: &MemoryLanes,
    log: &mut MemoryLog,
) -> crate::run::engine::RunReport {
    let report = run(wf, host, &CoreActions, &RunOptions::new("r1"), log)
        .await
        .unwrap();
    assert_eq!(RunState::replay(&log.events).unwrap(), report.state);
    report
}

fn kinds(log: &MemoryLog) -> Vec<&'static str> {
    log.events.iter().map(Event::kind).collect()
}

fn conflicts(log: &MemoryLog) -> Vec<serde_json::Value> {
    log.events
        .iter()
        .filter(|e| matches!(e, Event::LaneConflictDetected { .. }))
        .map(|e| serde_json::to_value(e).unwrap())
        .collect()
}

#[tokio::test]
async fn workspace_strategy_merges_in_completion_order_and_reports_the_conflict() {
    let wf = workflow("workspace", two_lanes_sharing_a_file());
    let host = MemoryLanes::with_main(&[("src/shared.rs", "base"), ("README", "r")]);
    let mut log = MemoryLog::default();
    let report = start(&wf, &host, &mut log).await;
    assert_eq!(report.status, RunStatus::Succeeded);
    let main = host.main();
    // api finished first: its version of the shared file wins.
    assert_eq!(main["src/shared.rs"], "from api");
    assert_eq!(main["src/api.rs"], "api");
    assert_eq!(main["src/ui.rs"], "ui");
    assert_eq!(main["README"], "r");
    let c = conflicts(&log);
    assert_eq!(c.len(), 1);
    assert_eq!(
        c[0],
        serde_json::json!({
            "type": "lane:conflict-detected",
            "step": 0,
            "conflictingFile": "src/shared.rs",
            "lanes": ["api", "ui"],
            "resolution": "first-complete-wins",
            "appliedFrom": "api",
            "laneNodeIds": ["dev.implement.api", "dev.implement.ui"],
            "appliedFromNodeId": "dev.implement.api"
        })
    );
    // Lanes have their own step index and restrictions; the next block
    // comes after both.
    let seen = host.seen.lock().unwrap().clone();
    assert!(seen.contains(&(Some("api".into()), 0, Some(vec!["src/**".into()]))));
    assert!(seen.contains(&(
        Some("ui".into()),
        1,
        Some(vec!["src/ui/**".into(), "src/*.rs".into()])
    )));
    assert!(seen.contains(&(None, 2, None)));
    assert_eq!(report.steps, 3);
    // Every lane's segments reach the payload, then the fan-in summary.
    let contents: Vec<&str> = report
        .payload()
        .iter()
        .map(|s| s.content.as_str())
        .collect();
    assert_eq!(&contents[..2], &["api done", "ui done"]);
    assert!(contents[2].contains("conflict: src/shared.rs changed by api, ui; kept api"));
    assert_eq!(report.statistics.tokens_used, 15);
    // The lanes are gone.
    assert!(host.lanes.lock().unwrap().is_empty());
    assert_eq!(
        &kinds(&log)[..7],
        &[
            "run_started",
            "block_started",
            "lanes_started",
            "lane_completed",
            "lane_completed",
            "lane:conflict-detected",
            "fan_in_completed"
        ]
    );
}

#[tokio::test]
async fn concatenate_collects_outputs_and_records_dropped_changes() {
    let wf = workflow("concatenate", two_lanes_sharing_a_file());
    let host = MemoryLanes::with_main(&[("src/shared.rs", "base")]);
    let mut log = MemoryLog::default();
    let report = start(&wf, &host, &mut log).await;
    assert_eq!(report.status, RunStatus::Succeeded);
    assert_eq!(host.main()["src/shared.rs"], "base");
    assert!(!host.main().contains_key("src/api.rs"));
    assert!(conflicts(&log).is_empty());
    let fan_in = log
        .events
        .iter()
        .find_map(|e| match e {
            Event::FanInCompleted {
                applied,
                discarded,
                outputs,
                ..
            } => Some((applied.clone(), discarded.clone(), outputs.clone())),
            _ => None,
        })
        .unwrap();
    assert!(fan_in.0.is_empty());
    assert_eq!(fan_in.1.len(), 2);
    assert_eq!(
        fan_in.2,
        [
            "block-dev.implement.api.json",
            "block-dev.implement.ui.json"
        ]
    );
}

#[tokio::test]
async fn workspace_strategy_without_conflicts_applies_everything() {
    let wf = workflow(
        "workspace",
        serde_json::json!({
            "a": {"config": {"write": {"src/a.rs": "a"}}},
            "b": {"config": {"write": {"src/b.rs": "b"}}}
        }),
    );
    let host = MemoryLanes::with_main(&[]);
    let mut log = MemoryLog::default();
    let report = start(&wf, &host, &mut log).await;
    assert_eq!(report.status, RunStatus::Succeeded);
    assert_eq!(host.main().len(), 2);
    assert!(conflicts(&log).is_empty());
}

#[tokio::test]
async fn fail_on_conflict_waits_for_a_lane_choice_then_applies_it() {
    let wf = workflow("fail-on-conflict", two_lanes_sharing_a_file());
    let host = MemoryLanes::with_main(&[("src/shared.rs", "base")]);
    let mut log = MemoryLog::default();
    let report = start(&wf, &host, &mut log).await;
    let RunStatus::WaitingAtGate {
        gate_id, prompt, ..
    } = &report.status
    else {
        panic!("{:?}", report.status)
    };
    assert!(
        prompt.contains("src/shared.rs") && prompt.contains("use-lane:"),
        "{prompt}"
    );
    // Nothing was applied; the lanes wait with their work.
    assert_eq!(host.main()["src/shared.rs"], "base");
    assert_eq!(host.lanes.lock().unwrap().len(), 2);
    let c = conflicts(&log);
    assert_eq!(c[0]["resolution"], "user-resolved");
    assert!(c[0].get("appliedFrom").is_none());

    // Answers that do not choose, or choose wrongly, do not fit.
    let state = RunState::replay(&log.events).unwrap();
    for (answer, expected) in [
        ("approved", "use-lane"),
        ("use-lane:nobody", "not a lane"),
        ("use-lane:README=api", "not a conflicting file"),
    ] {
        let mut probe = state.clone();
        let err = probe
            .apply(&Event::GateAnswered {
                gate_id: gate_id.clone(),
                decision: answer.parse().unwrap(),
            })
            .unwrap_err();
        assert!(err.to_string().contains(expected), "{answer}: {err}");
    }

    log.events.push(Event::GateAnswered {
        gate_id: gate_id.clone(),
        decision: "use-lane:src/shared.rs=ui".parse().unwrap(),
    });
    let state = RunState::replay(&log.events).unwrap();
    let report = drive(&wf, &host, &CoreActions, state, &mut log)
        .await
        .unwrap();
    assert_eq!(report.status, RunStatus::Succeeded);
    assert_eq!(RunState::replay(&log.events).unwrap(), report.state);
    assert_eq!(host.main()["src/shared.rs"], "from ui");
    assert_eq!(host.main()["src/api.rs"], "api");
    // The lanes ran once; the resolution is recorded.
    assert_eq!((host.runs("api"), host.runs("ui")), (1, 1));
    let c = conflicts(&log);
    assert_eq!(c.last().unwrap()["appliedFrom"], "ui");
    assert_eq!(c.last().unwrap()["appliedFromNodeId"], "dev.implement.ui");
    assert_eq!(
        c.last().unwrap()["laneNodeIds"],
        serde_json::json!(["dev.implement.api", "dev.implement.ui"])
    );
    assert!(host.lanes.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_fan_in_gate_answered_resolved_keeps_the_workspace_version() {
    let wf = workflow("fail-on-conflict", two_lanes_sharing_a_file());
    let host = MemoryLanes::with_main(&[("src/shared.rs", "base")]);
    let mut log = MemoryLog::default();
    let report = start(&wf, &host, &mut log).await;
    let RunStatus::WaitingAtGate { gate_id, .. } = &report.status else {
        panic!("{:?}", report.status)
    };
    // The user merges the two versions by hand, then says so.
    host.main
        .lock()
        .unwrap()
        .insert("src/shared.rs".into(), "merged by hand".into());
    log.events.push(Event::GateAnswered {
        gate_id: gate_id.clone(),
        decision: "resolved".parse().unwrap(),
    });
    let state = RunState::replay(&log.events).unwrap();
    let report = drive(&wf, &host, &CoreActions, state, &mut log)
        .await
        .unwrap();
    assert_eq!(report.status, RunStatus::Succeeded);
    let main = host.main();
    assert_eq!(main["src/shared.rs"], "merged by hand");
    // Everything that did not conflict still arrived.
    assert_eq!(main["src/api.rs"], "api");
    assert_eq!(main["src/ui.rs"], "ui");
    let c = conflicts(&log);
    assert_eq!(c.last().unwrap()["appliedFrom"], super::RESOLVED_BY_HAND);
    assert!(c.last().unwrap().get("appliedFromNodeId").is_none());
    assert_eq!(
        c.last().unwrap()["laneNodeIds"],
        serde_json::json!(["dev.implement.api", "dev.implement.ui"])
    );
    assert_eq!(RunState::replay(&log.events).unwrap(), report.state);
    // `resolved` is no answer to an ordinary gate.
    assert!("resolved".parse::<crate::run::event::Decision>().is_ok());
}

#[tokio::test]
async fn a_failed_lane_is_not_merged_and_the_block_is_partial() {
    let wf = workflow(
        "workspace",
        serde_json::json!({
            "good": {"config": {"write": {"src/good.rs": "g"}}},
            "bad": {"config": {"write": {"src/bad.rs": "b"}, "signal": "SIGNAL:FAILED"}},
            "crash": {"config": {"write": {"src/crash.rs": "c"}, "fail": true}}
        }),
    );
    let host = MemoryLanes::with_main(&[]);
    let mut log = MemoryLog::default();
    let report = start(&wf, &host, &mut log).await;
    assert_eq!(report.status, RunStatus::Succeeded);
    assert_eq!(host.main().keys().collect::<Vec<_>>(), ["src/good.rs"]);
    let signal = log
        .events
        .iter()
        .find_map(|e| match e {
            Event::BlockCompleted { signal, .. } => Some(signal.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(signal, "SIGNAL:PARTIAL");
    let discarded = log
        .events
        .iter()
        .find_map(|e| match e {
            Event::FanInCompleted { discarded, .. } => Some(discarded.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(discarded.len(), 2);
}

/// A failed lane runs again alone, in a fresh workspace, while its
/// attempts allow; the host learns which lanes start and their limit.
#[tokio::test]
async fn a_failed_lane_runs_again_alone_up_to_its_max_attempts() {
    let json = serde_json::json!({
        "id": "fan", "start_node": "dev",
        "nodes": {"dev": {"entry_block": "implement", "blocks": {"implement": {
            "worker": "lane",
            "parallel": {"merge_strategy": "workspace", "max_attempts": 2, "max_concurrent": 2, "lanes": {
                "flaky": {"config": {"write": {"src/flaky.rs": "f"}, "fail_runs": 1}},
                "steady": {"config": {"write": {"src/steady.rs": "s"}}},
                "broken": {"config": {"fail_runs": 9}, "max_attempts": 3}
            }},
            "transitions": [
                {"on_signal": "SIGNAL:PARTIAL", "action": "END"},
                {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL:lanes failed"}
            ]
        }}}}
    });
    let wf = manifest::parse(std::path::Path::new("t.json"), &json.to_string()).unwrap();
    assert!(
        manifest::check(
            std::path::Path::new("t.json"),
            &wf,
            &["actions-core", "lane"]
        )
        .is_empty()
    );
    let host = MemoryLanes::with_main(&[]);
    let mut log = MemoryLog::default();
    let report = start(&wf, &host, &mut log).await;
    assert_eq!(report.status, RunStatus::Succeeded);
    assert_eq!(
        (host.runs("flaky"), host.runs("steady"), host.runs("broken")),
        (2, 1, 3)
    );
    let retried: Vec<(String, u32)> = log
        .events
        .iter()
        .filter_map(|e| match e {
            Event::LaneRetried { lane, attempt, .. } => Some((lane.clone(), *attempt)),
            _ => None,
        })
        .collect();
    assert_eq!(retried.len(), 3, "{retried:?}");
    assert!(retried.contains(&("flaky".into(), 1)));
    assert!(retried.contains(&("broken".into(), 1)) && retried.contains(&("broken".into(), 2)));
    // The retried lane's work is merged; the broken one's is not.
    assert_eq!(
        host.main().keys().collect::<Vec<_>>(),
        ["src/flaky.rs", "src/steady.rs"]
    );
    // Two lanes at once (a retried lane keeps its slot); the third
    // starts when one of them is done.
    assert_eq!(
        *host.starting.lock().unwrap(),
        [
            (vec!["broken".to_string(), "flaky".into()], Some(2)),
            (vec!["steady".to_string()], Some(2))
        ]
    );
    assert!(host.in_flight.lock().unwrap().1 <= 2);
    // A replayed log folds to the same retries.
    let state = RunState::replay(&log.events).unwrap();
    assert_eq!(state, report.state);
}

/// Under the block's retry policy, a lane failing with a signal it
/// retries runs again after the policy's wait (recorded, and waited for by
/// the host), up to the policy's attempts; a signal the policy does not
/// retry stands at once.
#[tokio::test]
async fn a_lane_follows_the_blocks_retry_policy_and_waits_between_attempts() {
    crate::time::set_test_clock(Some(10_000));
    let json = serde_json::json!({
        "id": "fan", "start_node": "dev",
        "nodes": {"dev": {"entry_block": "implement", "blocks": {"implement": {
            "worker": "lane",
            "retry": {"max_attempts": 3, "initial": "2s", "multiplier": 2, "jitter": 0,
                      "never": ["SIGNAL:NOPE"]},
            "parallel": {"merge_strategy": "workspace", "lanes": {
                "flaky": {"config": {"write": {"src/flaky.rs": "f"}, "fail_runs": 2}},
                "refused": {"config": {"signal": "SIGNAL:NOPE"}},
                "hopeless": {"config": {"fail_runs": 9}, "max_attempts": 2}
            }},
            "transitions": [
                {"on_signal": "SIGNAL:PARTIAL", "action": "END"},
                {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL:lanes failed"}
            ]
        }}}}
    });
    let wf = manifest::parse(std::path::Path::new("t.json"), &json.to_string()).unwrap();
    let problems = manifest::check(
        std::path::Path::new("t.json"),
        &wf,
        &["actions-core", "lane"],
    );
    assert!(problems.is_empty(), "{problems:?}");
    let host = MemoryLanes::with_main(&[]);
    let mut log = MemoryLog::default();
    let report = start(&wf, &host, &mut log).await;
    crate::time::set_test_clock(None);
    assert_eq!(report.status, RunStatus::Succeeded);
    assert_eq!(
        (
            host.runs("flaky"),
            host.runs("refused"),
            host.runs("hopeless")
        ),
        (3, 1, 2),
        "the policy's 3 attempts, none for a signal in `never`, the lane's own max_attempts"
    );
    let mut retried: Vec<(String, u32, Option<u64>, Option<i64>)> = log
        .events
        .iter()
        .filter_map(|e| match e {
            Event::LaneRetried {
                lane,
                attempt,
                wait_ms,
                due_at_ms,
                ..
            } => Some((lane.clone(), *attempt, *wait_ms, *due_at_ms)),
            _ => None,
        })
        .collect();
    retried.sort();
    assert_eq!(
        retried,
        [
            ("flaky".into(), 1, Some(2000), Some(12_000)),
            ("flaky".into(), 2, Some(4000), Some(14_000)),
            ("hopeless".into(), 1, Some(2000), Some(12_000)),
        ]
    );
    let mut waits = host.waits.lock().unwrap().clone();
    waits.sort();
    assert_eq!(waits, [12_000, 12_000, 14_000]);
    let state = RunState::replay(&log.events).unwrap();
    assert_eq!(state, report.state);
}

#[tokio::test]
async fn lanes_that_all_fail_give_signal_failed() {
    let wf = workflow(
        "workspace",
        serde_json::json!({"a": {"config": {"fail": true}}, "b": {}}),
    );
    let mut host = MemoryLanes::with_main(&[]);
    host.broken = vec!["b".into()];
    let mut log = MemoryLog::default();
    let report = start(&wf, &host, &mut log).await;
    let RunStatus::Failed { reason } = &report.status else {
        panic!("{:?}", report.status)
    };
    assert!(reason.contains("lanes failed"), "{reason}");
    let failures: Vec<String> = log
        .events
        .iter()
        .filter_map(|e| match e {
            Event::LaneCompleted { failure, .. } => failure.clone(),
            _ => None,
        })
        .collect();
    assert!(
        failures.iter().any(|f| f.contains("disk full")),
        "{failures:?}"
    );
    assert!(
        failures.iter().any(|f| f.contains("crashed")),
        "{failures:?}"
    );
}

#[tokio::test]
async fn a_host_without_lanes_fails_the_lanes_with_a_reason() {
    struct Plain;
    impl BlockRunner for Plain {
        async fn run_block(&self, _r: BlockRequest) -> BlockResult {
            unreachable!("no lane can start")
        }
    }

    impl Lanes for Plain {}

    impl SessionReads for Plain {}

    impl TelemetrySource for Plain {}
    let wf = workflow("workspace", serde_json::json!({"a": {}}));
    let mut log = MemoryLog::default();
    let report = run(&wf, &Plain, &CoreActions, &RunOptions::new("r"), &mut log)
        .await
        .unwrap();
    assert!(matches!(report.status, RunStatus::Failed { .. }));
    let failure = log
        .events
        .iter()
        .find_map(|e| match e {
            Event::LaneCompleted { failure, .. } => failure.clone(),
            _ => None,
        })
        .unwrap();
    assert!(failure.contains("cannot run parallel groups"), "{failure}");
}

/// A log that stops accepting events after `limit` (the host dies).
struct CrashingLog {
    inner: MemoryLog,
    limit: usize,
}

impl EventSink for CrashingLog {
    fn append(&mut self, events: &[Event]) -> Result<(), SinkError> {
        if self.inner.events.len() + events.len() > self.limit {
            return Err(SinkError("host died".into()));
        }
        self.inner.append(events)
    }

    fn new_gate_id(&mut self) -> Result<String, SinkError> {
        self.inner.new_gate_id()
    }
}

#[tokio::test]
async fn a_crashed_fan_out_resumes_only_its_unfinished_lanes() {
    let wf = workflow(
        "workspace",
        serde_json::json!({
            "fast": {"config": {"delay_ms": 1, "write": {"src/fast.rs": "f"}}},
            "slow": {"config": {"delay_ms": 60, "write": {"src/slow.rs": "s"}}}
        }),
    );
    let host = MemoryLanes::with_main(&[]);
    // run_started, block_started, lanes_started, lane_completed(fast): then the host dies.
    let mut log = CrashingLog {
        inner: MemoryLog::default(),
        limit: 4,
    };
    let crashed = run(&wf, &host, &CoreActions, &RunOptions::new("r1"), &mut log).await;
    assert!(crashed.is_err());
    assert_eq!(
        kinds(&log.inner),
        [
            "run_started",
            "block_started",
            "lanes_started",
            "lane_completed"
        ]
    );
    assert_eq!((host.runs("fast"), host.runs("slow")), (1, 1));

    let mut log = log.inner;
    let state = RunState::replay(&log.events).unwrap();
    let report = resume(&wf, &host, &CoreActions, state, &mut log)
        .await
        .unwrap();
    assert_eq!(report.status, RunStatus::Succeeded);
    // Only the unfinished lane ran again.
    assert_eq!((host.runs("fast"), host.runs("slow")), (1, 2));
    assert_eq!(host.main().len(), 2);
    assert_eq!(RunState::replay(&log.events).unwrap(), report.state);
}

#[tokio::test]
async fn a_finished_lane_whose_workspace_vanished_fails_the_block_loudly() {
    let wf = workflow(
        "workspace",
        serde_json::json!({
            "fast": {"config": {"delay_ms": 1, "write": {"src/fast.rs": "f"}}},
            "slow": {"config": {"delay_ms": 40, "write": {"src/slow.rs": "s"}}}
        }),
    );
    let host = MemoryLanes::with_main(&[]);
    let mut log = CrashingLog {
        inner: MemoryLog::default(),
        limit: 4,
    };
    let _ = run(&wf, &host, &CoreActions, &RunOptions::new("r1"), &mut log).await;
    host.lanes.lock().unwrap().clear();
    let mut log = log.inner;
    let state = RunState::replay(&log.events).unwrap();
    let report = resume(&wf, &host, &CoreActions, state, &mut log)
        .await
        .unwrap();
    assert!(matches!(report.status, RunStatus::Failed { .. }));
    let (signal, failure) = log
        .events
        .iter()
        .find_map(|e| match e {
            Event::BlockCompleted {
                signal, failure, ..
            } => Some((signal.clone(), failure.clone().unwrap_or_default())),
            _ => None,
        })
        .unwrap();
    assert_eq!(signal, "SIGNAL:WORKER_ERROR");
    assert!(
        failure.contains("fast") && failure.contains("gone"),
        "{failure}"
    );
    assert!(!host.main().contains_key("src/fast.rs"));
}

#[test]
fn manifest_checks_parallel_groups() {
    let json = serde_json::json!({
        "id": "x", "start_node": "n",
        "nodes": {"n": {"entry_block": "b", "blocks": {"b": {
            "worker": "lane",
            "validation_schema": {"type": "object"},
            "parallel": {"lanes": {"bad name": {"config": [1]}, "ok": {"file_restrictions": ["../x"]}}}
        }}}}
    });
    let wf = manifest::parse(std::path::Path::new("t.json"), &json.to_string()).unwrap();
    let errors: Vec<String> = manifest::check(
        std::path::Path::new("t.json"),
        &wf,
        &["actions-core", "lane"],
    )
    .iter()
    .map(|e| e.to_string())
    .collect();
    let all = errors.join("\n");
    for expected in [
        "/parallel/lanes/bad name: lane name",
        "/parallel/lanes/bad name/config: a lane's config must be an object",
        "/parallel/lanes/ok/file_restrictions",
        "/validation_schema: a parallel block",
    ] {
        assert!(all.contains(expected), "{expected} not in:\n{all}");
    }
    let empty = serde_json::json!({
        "id": "x", "start_node": "n",
        "nodes": {"n": {"entry_block": "b", "blocks": {"b": {"worker": "lane", "parallel": {"lanes": {}}}}}}
    });
    let wf = manifest::parse(std::path::Path::new("t.json"), &empty.to_string()).unwrap();
    let errors = manifest::check(
        std::path::Path::new("t.json"),
        &wf,
        &["actions-core", "lane"],
    );
    assert!(errors[0].to_string().contains("at least one lane"));
}

#[test]
fn aggregate_signals() {
    use super::aggregate_signal;
    assert_eq!(
        aggregate_signal(["SIGNAL:SUCCESS", "SIGNAL:SUCCESS"]),
        "SIGNAL:SUCCESS"
    );
    assert_eq!(
        aggregate_signal(["SIGNAL:SUCCESS", "SIGNAL:FAILED"]),
        "SIGNAL:PARTIAL"
    );
    assert_eq!(aggregate_signal(["SIGNAL:PARTIAL"]), "SIGNAL:PARTIAL");
    assert_eq!(
        aggregate_signal(["SIGNAL:WORKER_ERROR", "SIGNAL:FAILED"]),
        "SIGNAL:FAILED"
    );
}

mod over;
