//! The engine loop against in-process fakes.

use std::collections::HashMap;
use std::sync::Mutex;

use super::*;
use crate::manifest;
use crate::run::event::{Decision, MemoryLog};

type Script = Box<
    dyn Fn(&BlockContext, &ExecutionPayload) -> Result<WorkerOutput, BlockFailure> + Send + Sync,
>;

/// Workers implemented as closures; records every context it was given.
#[derive(Default)]
struct FakeWorkers {
    scripts: HashMap<String, Script>,
    seen: Mutex<Vec<BlockContext>>,
    /// The session folder's files, when this host keeps one.
    session: Option<HashMap<String, String>>,
}

impl FakeWorkers {
    fn with(
        mut self,
        name: &str,
        f: impl Fn(&BlockContext, &ExecutionPayload) -> Result<WorkerOutput, BlockFailure>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.scripts.insert(name.to_string(), Box::new(f));
        self
    }

    fn visited(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|c| format!("{}.{}", c.node_id, c.block_id))
            .collect()
    }
}

impl BlockRunner for FakeWorkers {
    fn run_block(&self, request: BlockRequest) -> impl Future<Output = BlockResult> + Send {
        self.seen.lock().unwrap().push(request.context.clone());
        let outcome = (self.scripts[&request.worker])(&request.context, &request.payload);
        async move {
            BlockResult {
                outcome,
                log: Vec::new(),
            }
        }
    }
}

impl Lanes for FakeWorkers {}

impl SessionReads for FakeWorkers {
    fn session_artifact(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<String>, String>> + Send {
        let found = match &self.session {
            Some(files) => Ok(files.get(name).cloned()),
            None => Err("no session folder here".to_string()),
        };
        async move { found }
    }
}

impl TelemetrySource for FakeWorkers {}

/// The core grammar, interpreted in-process.
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

/// A worker that appends a segment naming its block and emits a signal taken
/// from the block's config (`{"signal": ...}`), `SIGNAL:SUCCESS` by default.
fn tagger(ctx: &BlockContext, payload: &ExecutionPayload) -> Result<WorkerOutput, BlockFailure> {
    let mut payload = payload.clone();
    payload.push(ContextSegment::new(
        format!("s{}", ctx.step_index),
        "TAG",
        format!("{}.{}", ctx.node_id, ctx.block_id),
    ));
    let signal = ctx
        .config
        .get("signal")
        .and_then(|s| s.as_str())
        .unwrap_or("SIGNAL:SUCCESS");
    Ok(WorkerOutput {
        payload,
        signal: signal.to_string(),
        structured_output: None,
        statistics: Statistics {
            tokens_used: 10,
            lines_written: 1,
            ..Default::default()
        },
        written: Vec::new(),
    })
}

fn workflow(json: serde_json::Value) -> Workflow {
    let wf = manifest::parse(std::path::Path::new("t.json"), &json.to_string()).unwrap();
    let errors = manifest::check(
        std::path::Path::new("t.json"),
        &wf,
        &["actions-core", "tag", "boom", "out", "planner"],
    );
    assert!(errors.is_empty(), "{errors:?}");
    wf
}

fn block(signal: &str, transitions: &[(&str, &str)]) -> serde_json::Value {
    serde_json::json!({
        "worker": "tag",
        "config": {"signal": signal},
        "transitions": transitions.iter().map(|(on, action)| serde_json::json!({"on_signal": on, "action": action})).collect::<Vec<_>>(),
    })
}

async fn execute(wf: &Workflow, workers: &FakeWorkers) -> RunReport {
    execute_with(wf, workers, &CoreActions, &RunOptions::new("exec-1")).await
}

/// Run with an in-memory log and check that folding the log gives exactly
/// the state the engine ended in (what resuming relies on).
async fn execute_with<A: ActionInterpreter>(
    wf: &Workflow,
    workers: &FakeWorkers,
    actions: &A,
    options: &RunOptions,
) -> RunReport {
    let mut log = MemoryLog::default();
    let report = run(wf, workers, actions, options, &mut log).await.unwrap();
    assert!(matches!(log.events[0], Event::RunStarted { .. }));
    assert_eq!(RunState::replay(&log.events).unwrap(), report.state);
    report
}

fn tags(report: &RunReport) -> Vec<&str> {
    report
        .payload()
        .iter()
        .map(|s| s.content.as_str())
        .collect()
}

#[tokio::test]
async fn linear_run_succeeds_and_aggregates_statistics() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "JUMP:b")]),
            "b": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "END")]),
        }}}
    }));
    let workers = FakeWorkers::default().with("tag", tagger);
    let report = execute(&wf, &workers).await;
    assert_eq!(report.status, RunStatus::Succeeded);
    assert_eq!(report.steps, 2);
    assert_eq!(
        report.statistics,
        Statistics {
            tokens_used: 20,
            lines_written: 2,
            ..Default::default()
        }
    );
    assert_eq!(report.blocks()["main.a"].attempts, 1);
    assert_eq!(report.blocks()["main.b"].tokens_used, 10);
    assert_eq!(tags(&report), ["main.a", "main.b"]);
    let seen = workers.seen.lock().unwrap();
    assert_eq!(seen[0].previous_block_id, None);
    assert_eq!(seen[1].previous_block_id.as_deref(), Some("main.a"));
    assert_eq!(seen[1].step_index, 1);
    assert_eq!(seen[1].execution_id, "exec-1");
}

#[tokio::test]
async fn unmatched_signal_falls_back_to_fail_default() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": block("SIGNAL:ODD", &[("SIGNAL:SUCCESS", "JUMP:b"), ("SIGNAL:FAIL_DEFAULT", "JUMP:c")]),
            "b": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "END")]),
            "c": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "END")]),
        }}}
    }));
    let workers = FakeWorkers::default().with("tag", tagger);
    let mut log = MemoryLog::default();
    let report = run(&wf, &workers, &CoreActions, &RunOptions::new("e"), &mut log)
        .await
        .unwrap();
    assert_eq!(report.status, RunStatus::Succeeded);
    assert_eq!(workers.visited(), ["main.a", "main.c"]);
    // The event says the fallback was taken, and for which signal; an
    // exact match says nothing.
    let fallbacks: Vec<_> = log
        .events
        .iter()
        .filter_map(|e| match e {
            Event::ActionTaken { fallback_for, .. } => Some(fallback_for.as_deref()),
            _ => None,
        })
        .collect();
    assert_eq!(fallbacks, [Some("SIGNAL:ODD"), None]);
    assert_eq!(
        log.events
            .iter()
            .find(|e| matches!(e, Event::ActionTaken { .. }))
            .unwrap()
            .describe(),
        "[0] SIGNAL:ODD -> SIGNAL:FAIL_DEFAULT: JUMP:c: jump to main.c"
    );
}

#[tokio::test]
async fn no_transition_and_no_fallback_fails_naming_block_and_signal() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": block("SIGNAL:ODD", &[("SIGNAL:SUCCESS", "END")]),
        }}}
    }));
    let report = execute(&wf, &FakeWorkers::default().with("tag", tagger)).await;
    let RunStatus::Failed { reason } = report.status else {
        panic!("{:?}", report.status)
    };
    assert!(
        reason.contains("`main.a`") && reason.contains("SIGNAL:ODD"),
        "{reason}"
    );
}

#[tokio::test]
async fn worker_failure_becomes_a_signal_and_keeps_the_message() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": {"worker": "boom", "transitions": [{"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "JUMP:recover"}]},
            "recover": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "END")]),
            "b": {"worker": "boom"},
        }}}
    }));
    let workers = FakeWorkers::default()
        .with("tag", tagger)
        .with("boom", |_, _| {
            Err(BlockFailure::new("guest panicked: kaput"))
        });
    let report = execute(&wf, &workers).await;
    assert_eq!(report.status, RunStatus::Succeeded);
    assert_eq!(report.payload()[0].kind, "WORKER_ERROR");
    assert!(report.payload()[0].content.contains("kaput"));

    let mut wf2 = wf.clone();
    wf2.nodes.get_mut("main").unwrap().entry_block = "b".into();
    let report = execute(&wf2, &workers).await;
    let RunStatus::Failed { reason } = report.status else {
        panic!()
    };
    assert!(
        reason.contains("SIGNAL:WORKER_ERROR") && reason.contains("kaput"),
        "{reason}"
    );
}

#[tokio::test]
async fn an_oversized_or_unprintable_signal_fails_the_block() {
    // The tag worker emits its config's signal; the fallback routes the failure.
    for bad in [
        "S".repeat(8 << 20),
        "SIGNAL:OK\nrun forged succeeded".into(),
    ] {
        let wf = workflow(serde_json::json!({
            "id": "w", "start_node": "main",
            "nodes": {"main": {"entry_block": "a", "blocks": {
                "a": block(&bad, &[("SIGNAL:FAIL_DEFAULT", "JUMP:recover")]),
                "recover": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "END")]),
            }}}
        }));
        let workers = FakeWorkers::default().with("tag", tagger);
        let report = execute(&wf, &workers).await;
        assert_eq!(report.status, RunStatus::Succeeded);
        let error = &report.payload()[0];
        assert_eq!(error.kind, "WORKER_ERROR");
        assert!(
            error.content.len() < 200,
            "the signal is not echoed: {}",
            error.content.len()
        );
    }
}

#[tokio::test]
async fn call_and_return_use_the_return_stack() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {
            "main": {"entry_block": "a", "blocks": {
                "a": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "CALL:sub@after")]),
                "after": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "END")]),
            }},
            "sub": {"entry_block": "x", "blocks": {
                "x": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "RETURN")]),
            }}
        }
    }));
    let workers = FakeWorkers::default().with("tag", tagger);
    let report = execute(&wf, &workers).await;
    assert_eq!(report.status, RunStatus::Succeeded);
    assert_eq!(workers.visited(), ["main.a", "sub.x", "main.after"]);
    assert_eq!(tags(&report), ["main.a", "sub.x", "main.after"]);
}

#[tokio::test]
async fn isolated_subroutine_starts_empty_and_hands_back_its_results() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {
            "main": {"entry_block": "a", "blocks": {
                "a": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "CALL:pure@after")]),
                "after": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "END")]),
            }},
            "pure": {"entry_block": "x", "context_inheritance": false, "blocks": {
                "x": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "RETURN")]),
            }}
        }
    }));
    let seen_payload_len = std::sync::Arc::new(Mutex::new(Vec::new()));
    let lens = seen_payload_len.clone();
    let workers = FakeWorkers::default().with("tag", move |ctx, payload| {
        lens.lock().unwrap().push(payload.len());
        tagger(ctx, payload)
    });
    let report = execute(&wf, &workers).await;
    assert_eq!(report.status, RunStatus::Succeeded);
    // main.a saw 0, pure.x saw an empty payload (isolated), main.after saw a + x.
    assert_eq!(*seen_payload_len.lock().unwrap(), [0, 0, 2]);
    assert_eq!(tags(&report), ["main.a", "pure.x", "main.after"]);
}

#[tokio::test]
async fn call_without_return_address_reruns_the_caller() {
    // The caller emits SIGNAL:SUCCESS until the subroutine's tag is present.
    let wf = workflow(
        serde_json::json!({
            "id": "w", "start_node": "main",
            "nodes": {
                "main": {"entry_block": "a", "blocks": {
                    "a": {"worker": "caller", "transitions": [
                        {"on_signal": "SIGNAL:NEED", "action": "CALL:sub"},
                        {"on_signal": "SIGNAL:DONE", "action": "END"}]},
                }},
                "sub": {"entry_block": "x", "blocks": {
                    "x": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "RETURN")]),
                }}
            }
        })
        .to_string()
        .replace("\"caller\"", "\"tag\"")
        .parse::<serde_json::Value>()
        .unwrap(),
    );
    let workers = FakeWorkers::default().with("tag", |ctx, payload| {
        if ctx.block_id == "a" {
            let signal = if payload.iter().any(|s| s.content == "sub.x") {
                "SIGNAL:DONE"
            } else {
                "SIGNAL:NEED"
            };
            return Ok(WorkerOutput {
                payload: payload.clone(),
                signal: signal.into(),
                ..Default::default()
            });
        }
        tagger(ctx, payload)
    });
    let report = execute(&wf, &workers).await;
    assert_eq!(report.status, RunStatus::Succeeded);
    assert_eq!(workers.visited(), ["main.a", "sub.x", "main.a"]);
}

#[tokio::test]
async fn return_with_empty_stack_fails() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "RETURN")]),
        }}}
    }));
    let report = execute(&wf, &FakeWorkers::default().with("tag", tagger)).await;
    let RunStatus::Failed { reason } = report.status else {
        panic!()
    };
    assert!(reason.contains("empty return stack"), "{reason}");
}

#[tokio::test]
async fn jump_cycles_hit_the_step_limit() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "JUMP:a")]),
        }}}
    }));
    let workers = FakeWorkers::default().with("tag", |ctx, _| tagger(ctx, &Vec::new()));
    let mut options = RunOptions::new("e");
    options.max_steps = 50;
    let report = execute_with(&wf, &workers, &CoreActions, &options).await;
    let RunStatus::Failed { reason } = report.status else {
        panic!()
    };
    assert!(reason.contains("step limit of 50"), "{reason}");
    assert_eq!(report.steps, 50);
}

#[tokio::test]
async fn recursive_calls_hit_the_depth_limit() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "CALL:main")]),
        }}}
    }));
    let workers = FakeWorkers::default().with("tag", |ctx, _| tagger(ctx, &Vec::new()));
    let report = execute(&wf, &workers).await;
    let RunStatus::Failed { reason } = report.status else {
        panic!()
    };
    assert!(reason.contains("call depth limit of 64"), "{reason}");
}

#[tokio::test]
async fn gate_pauses_the_run() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "GATE:ship it?")]),
        }}}
    }));
    let report = execute(&wf, &FakeWorkers::default().with("tag", tagger)).await;
    assert_eq!(
        report.status,
        RunStatus::WaitingAtGate {
            gate_id: "UD-1".into(),
            node: "main".into(),
            block: "a".into(),
            prompt: "ship it?".into()
        }
    );
}

#[tokio::test]
async fn a_plain_question_takes_a_free_answer() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "GATE:Use sqlite or postgres?")]),
        }}}
    }));
    let report = execute(&wf, &FakeWorkers::default().with("tag", tagger)).await;
    let mut state = report.state.clone();
    assert!(state.asks_plain_question(&wf, "UD-1"));
    assert!(state.parse_answer("UD-1", "postgres").is_err(), "strict");
    let decision = state.parse_answer_in(&wf, "UD-1", "postgres").unwrap();
    assert_eq!(
        decision,
        Decision::Text {
            text: "postgres".into()
        }
    );
    state
        .apply(&Event::GateAnswered {
            gate_id: "UD-1".into(),
            decision,
        })
        .unwrap();
    assert!(
        matches!(&state.phase, Phase::Deciding { signal, .. } if signal == "SIGNAL:GATE_APPROVED"),
        "{:?}",
        state.phase
    );
    let last = state.payload.last().unwrap();
    assert_eq!(
        (last.kind.as_str(), last.content.as_str()),
        ("GATE_DECISION", "postgres")
    );
    let hint = report.state.answer_forms("UD-1");
    assert!(hint.contains("the answer itself"), "{hint}");
    // A gate whose block routes requested changes asks for an approval:
    // only `approved` / `changes-requested:…` answer it.
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": block("SIGNAL:SUCCESS", &[
                ("SIGNAL:SUCCESS", "GATE:Approve the plan?"),
                ("SIGNAL:GATE_APPROVED", "END"),
                ("SIGNAL:GATE_CHANGES_REQUESTED", "JUMP:a")]),
        }}}
    }));
    let report = execute(&wf, &FakeWorkers::default().with("tag", tagger)).await;
    assert!(!report.state.asks_plain_question(&wf, "UD-1"));
    assert!(report.state.parse_answer_in(&wf, "UD-1", "yes").is_err());
    assert_eq!(
        report.state.parse_answer_in(&wf, "UD-1", "approved"),
        Ok(Decision::Approved)
    );
}

#[tokio::test]
async fn a_gate_prompt_shows_what_the_block_before_it_produced() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "GATE:ship it?")]),
        }}}
    }));
    let workers = FakeWorkers::default().with("tag", |_, _| {
        Ok(WorkerOutput {
            signal: "SIGNAL:SUCCESS".into(),
            structured_output: Some(
                r#"{"blockId":"main.a","summary":"  Added the subtract function.  "}"#.into(),
            ),
            ..Default::default()
        })
    });
    let report = execute(&wf, &workers).await;
    let RunStatus::WaitingAtGate { prompt, .. } = report.status else {
        panic!("{:?}", report.status)
    };
    assert_eq!(
        prompt,
        "ship it?\n\nBlock produced: Added the subtract function."
    );
    // A well-known gate's question gets it too.
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "GATE:APPROVE_DESIGN:Is the design right?")]),
        }}}
    }));
    let RunStatus::WaitingAtGate { prompt, .. } = execute(&wf, &workers).await.status else {
        panic!()
    };
    assert_eq!(
        prompt,
        "Is the design right?\n\nBlock produced: Added the subtract function."
    );
}

#[tokio::test]
async fn handler_errors_fail_the_run_naming_the_action() {
    struct Refuse;
    impl ActionInterpreter for Refuse {
        async fn interpret(&self, _: &str, _: &str, _: &RunView) -> Result<EngineCommand, String> {
            Err("no such verb".to_string())
        }
    }
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "END")]),
        }}}
    }));
    let workers = FakeWorkers::default().with("tag", tagger);
    let report = execute_with(&wf, &workers, &Refuse, &RunOptions::new("e")).await;
    let RunStatus::Failed { reason } = report.status else {
        panic!()
    };
    assert!(
        reason.contains("`END`") && reason.contains("no such verb"),
        "{reason}"
    );
}

#[tokio::test]
async fn commands_to_missing_targets_fail_naming_the_action() {
    // The manifest check cannot see targets chosen by a third-party handler;
    // the engine checks them when it executes the command.
    struct Wild;
    impl ActionInterpreter for Wild {
        async fn interpret(
            &self,
            _: &str,
            action: &str,
            _: &RunView,
        ) -> Result<EngineCommand, String> {
            Ok(match action {
                "A" => EngineCommand::Jump(BlockRef::parse("main.ghost")),
                _ => EngineCommand::Call {
                    node: "main".into(),
                    return_to: Some(BlockRef::parse("nowhere")),
                },
            })
        }
    }
    for (action, expected) in [
        ("A", "jumps to `main.ghost`"),
        ("B", "returns to `main.nowhere`"),
    ] {
        let wf = workflow(serde_json::json!({
            "id": "w", "start_node": "main", "action_handler": "tag",
            "nodes": {"main": {"entry_block": "a", "blocks": {
                "a": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", action)]),
            }}}
        }));
        let workers = FakeWorkers::default().with("tag", tagger);
        let report = execute_with(&wf, &workers, &Wild, &RunOptions::new("e")).await;
        let RunStatus::Failed { reason } = report.status else {
            panic!()
        };
        assert!(
            reason.contains(expected) && reason.contains(&format!("`{action}`")),
            "{reason}"
        );
    }
}

#[tokio::test]
async fn workers_get_the_assembled_system_prompt() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main", "rules": "Be careful.",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": {"worker": "tag", "file_restrictions": ["docs/**"],
                  "prompt": {"prefix": "You are a writer.", "task": "Write docs.", "output_checklist": ["docs/index.md"]},
                  "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:b"}]},
            "b": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "END")]),
        }}}
    }));
    let workers = FakeWorkers::default().with("tag", tagger);
    assert_eq!(execute(&wf, &workers).await.status, RunStatus::Succeeded);
    let seen = workers.seen.lock().unwrap();
    assert_eq!(
        seen[0].system_prompt,
        "Be careful.\n\nYou are a writer.\n\nWrite docs.\n\n\
         Only modify files matching: docs/**. Other files are read-only, except the .output/ directory, which is always writable.\n\n\
         You must produce the following outputs:\n1) docs/index.md"
    );
    assert_eq!(seen[1].system_prompt, "Be careful.");
}

#[tokio::test]
async fn the_merge_strategy_shapes_what_the_worker_receives() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "static_memory": {"style": "terse"}, "blocks": {
            "a": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "JUMP:b")]),
            "b": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "JUMP:c")]),
            "c": {"worker": "tag", "payload_merge_strategy": ["keep_last:1", "append_static:style"],
                  "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]},
        }}}
    }));
    let received = std::sync::Arc::new(Mutex::new(Vec::new()));
    let r = received.clone();
    let workers = FakeWorkers::default().with("tag", move |ctx, payload| {
        r.lock().unwrap().push(
            payload
                .iter()
                .map(|s| s.content.clone())
                .collect::<Vec<_>>(),
        );
        tagger(ctx, payload)
    });
    let report = execute(&wf, &workers).await;
    assert_eq!(report.status, RunStatus::Succeeded);
    let received = received.lock().unwrap();
    assert_eq!(received[2], ["main.b", "terse"]);
    assert_eq!(tags(&report), ["main.b", "terse", "main.c"]);
}

#[tokio::test]
async fn max_attempts_ends_a_retry_cycle() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {"main": {"entry_block": "work", "blocks": {
            "work": {"worker": "tag", "config": {"signal": "SIGNAL:RETRY"}, "max_attempts": 3,
                     "transitions": [{"on_signal": "SIGNAL:RETRY", "action": "JUMP:work"}]},
        }}}
    }));
    let workers = FakeWorkers::default().with("tag", |ctx, _| tagger(ctx, &Vec::new()));
    let report = execute(&wf, &workers).await;
    let RunStatus::Failed { reason } = &report.status else {
        panic!()
    };
    assert_eq!(
        reason,
        "block `main.work` would run a 4th time, over its max_attempts of 3"
    );
    assert_eq!(report.steps, 3);
    assert_eq!(report.blocks()["main.work"].attempts, 3);
}

#[tokio::test]
async fn invalid_output_becomes_validation_fail_and_the_retry_sees_why() {
    // The worker answers badly first, then correctly once it sees the
    // VALIDATION_ERROR note in its payload.
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {"main": {"entry_block": "plan", "blocks": {
            "plan": {"worker": "tag", "max_attempts": 3,
                "validation_schema": {"type": "object", "required": ["tasks"],
                                      "properties": {"tasks": {"type": "array", "minItems": 1}}},
                "transitions": [
                    {"on_signal": "SIGNAL:SUCCESS", "action": "END"},
                    {"on_signal": "SIGNAL:VALIDATION_FAIL", "action": "JUMP:plan"}]},
        }}}
    }));
    let workers = FakeWorkers::default().with("tag", |_, payload| {
        let retried = payload.iter().any(|s| s.kind == "VALIDATION_ERROR");
        let answer = if retried {
            "Here:\n```json\n{\"tasks\": [\"t1\"]}\n```"
        } else {
            "{\"tasks\": []}"
        };
        let mut payload = payload.clone();
        payload.push(ContextSegment::new("answer", "AI_RESPONSE", answer));
        Ok(WorkerOutput {
            payload,
            signal: "SIGNAL:SUCCESS".into(),
            ..Default::default()
        })
    });
    let report = execute(&wf, &workers).await;
    assert_eq!(report.status, RunStatus::Succeeded);
    assert_eq!(report.steps, 2);
    let kinds: Vec<&str> = report.payload().iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "AI_RESPONSE",
            "VALIDATION_ERROR",
            "AI_RESPONSE",
            "VALIDATED_OUTPUT"
        ]
    );
    assert!(
        report.payload()[1].content.contains("at /tasks"),
        "{}",
        report.payload()[1].content
    );
    assert_eq!(report.payload()[3].content, "{\"tasks\":[\"t1\"]}");
}

#[tokio::test]
async fn structured_output_is_validated_in_preference_to_the_payload() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": {"worker": "tag", "validation_schema": {"type": "integer"},
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"},
                                {"on_signal": "SIGNAL:VALIDATION_FAIL", "action": "FAIL:invalid"}]},
        }}}
    }));
    let workers = FakeWorkers::default().with("tag", |_, _| {
        Ok(WorkerOutput {
            payload: vec![ContextSegment::new("x", "NOTE", "not a number")],
            signal: "SIGNAL:SUCCESS".into(),
            structured_output: Some("42".into()),
            ..Default::default()
        })
    });
    assert_eq!(execute(&wf, &workers).await.status, RunStatus::Succeeded);
}

#[tokio::test]
async fn actions_go_to_the_handler_registered_for_their_verb() {
    struct Routing;
    impl ActionInterpreter for Routing {
        async fn interpret(
            &self,
            handler: &str,
            action: &str,
            _: &RunView,
        ) -> Result<EngineCommand, String> {
            match handler {
                "escalate" => Ok(EngineCommand::Gate(format!("{handler} got {action}"))),
                "actions-core" => crate::actions::parse(action).map_err(|e| e.to_string()),
                other => Err(format!("unexpected handler {other}")),
            }
        }
    }
    let wf = manifest::parse(
        std::path::Path::new("t.json"),
        &serde_json::json!({
            "id": "w", "start_node": "main",
            "plugins": {"escalate": {"path": "x.wasm"}},
            "action_handlers": {"ESCALATE": "escalate"},
            "nodes": {"main": {"entry_block": "a", "blocks": {
                "a": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "JUMP:b")]),
                "b": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "ESCALATE:needs a human")]),
            }}}
        })
        .to_string(),
    )
    .unwrap();
    assert!(
        manifest::check(
            std::path::Path::new("t.json"),
            &wf,
            &["actions-core", "tag"]
        )
        .is_empty()
    );
    let workers = FakeWorkers::default().with("tag", tagger);
    let report = execute_with(&wf, &workers, &Routing, &RunOptions::new("e")).await;
    let RunStatus::WaitingAtGate { prompt, .. } = report.status else {
        panic!("{:?}", report.status)
    };
    assert_eq!(prompt, "escalate got ESCALATE:needs a human");
}

#[tokio::test]
async fn the_five_layers_follow_calls_and_isolation() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {
            "main": {"entry_block": "a", "static_memory": {"who": "main", "style": "long"}, "blocks": {
                "a": {"worker": "out", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "CALL:shared@b"}]},
                "b": {"worker": "out", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "CALL:pure@c"}]},
                "c": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "END")]),
            }},
            "shared": {"entry_block": "s", "static_memory": {"style": "short"}, "blocks": {
                "s": {"worker": "out", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "RETURN"}]},
            }},
            "pure": {"entry_block": "p", "context_inheritance": false, "static_memory": {"own": true}, "blocks": {
                "p": {"worker": "out", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "RETURN"}]},
            }}
        }
    }));
    let workers = FakeWorkers::default()
        .with("tag", tagger)
        .with("out", |ctx, payload| {
            Ok(WorkerOutput {
                payload: payload.clone(),
                signal: "SIGNAL:SUCCESS".into(),
                structured_output: Some(format!("{{\"from\":\"{}\"}}", ctx.block_id)),
                ..Default::default()
            })
        });
    assert_eq!(execute(&wf, &workers).await.status, RunStatus::Succeeded);
    let seen = workers.seen.lock().unwrap();
    let by_block = |b: &str| seen.iter().find(|c| c.block_id == b).unwrap().clone();

    // The inheriting callee sees the caller's memory under its own, and the
    // caller's artifacts.
    let s = by_block("s");
    assert_eq!(
        s.inherited_memory,
        serde_json::json!({"who": "main", "style": "short"})
    );
    assert_eq!(s.artifacts.keys().collect::<Vec<_>>(), ["main.a"]);
    // The isolated callee sees only its own memory and no artifacts.
    let p = by_block("p");
    assert_eq!(p.inherited_memory, serde_json::json!({"own": true}));
    assert!(p.artifacts.is_empty());
    // Back in the caller: its artifacts, not the isolated node's.
    let c = by_block("c");
    assert_eq!(
        c.artifacts.keys().collect::<Vec<_>>(),
        ["main.a", "main.b", "shared.s"]
    );
    assert_eq!(
        c.inherited_memory,
        serde_json::json!({"who": "main", "style": "long"})
    );
    assert_eq!(c.attempt, 1);
    let doc = &c.assembled_context;
    assert!(
        doc.contains("## Inherited context")
            && doc.contains("## Artifacts\n### main.a\n{\"from\":\"a\"}"),
        "{doc}"
    );
    assert!(doc.ends_with("previous block: pure.p"), "{doc}");
}

/// A workflow with everything resuming must get right: a CALL into an
/// isolated subroutine with a validation retry inside, a RETURN, a gate.
fn durable_workflow() -> Workflow {
    workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {
            "main": {"entry_block": "a", "blocks": {
                "a": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "CALL:plan@review")]),
                "review": block("SIGNAL:SUCCESS", &[
                    ("SIGNAL:SUCCESS", "GATE:ship it?"),
                    ("SIGNAL:GATE_APPROVED", "JUMP:ship"),
                    ("SIGNAL:GATE_CHANGES_REQUESTED", "CALL:plan@review")]),
                "ship": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "END")]),
            }},
            "plan": {"entry_block": "draft", "context_inheritance": false, "blocks": {
                "draft": {"worker": "planner", "max_attempts": 5,
                    "validation_schema": {"type": "object", "required": ["tasks"]},
                    "transitions": [
                        {"on_signal": "SIGNAL:SUCCESS", "action": "RETURN"},
                        {"on_signal": "SIGNAL:VALIDATION_FAIL", "action": "JUMP:draft"}]},
            }}
        }
    }))
}

/// Answers badly on its first attempt, then validly.
fn planner_workers() -> FakeWorkers {
    FakeWorkers::default()
        .with("tag", tagger)
        .with("planner", |ctx, payload| {
            let mut payload = payload.clone();
            let answer = if ctx.attempt == 1 {
                "no plan".to_string()
            } else {
                format!("{{\"tasks\": [\"step {}\"]}}", ctx.step_index)
            };
            payload.push(ContextSegment::new(
                format!("p{}", ctx.step_index),
                "AI_RESPONSE",
                answer,
            ));
            Ok(WorkerOutput {
                payload,
                signal: "SIGNAL:SUCCESS".into(),
                statistics: Statistics {
                    tokens_used: 100,
                    lines_written: 0,
                    ..Default::default()
                },
                ..Default::default()
            })
        })
}

/// The state without wall-clock durations, which differ between runs.
fn timeless(state: &RunState) -> RunState {
    let mut state = state.clone();
    for b in state.blocks.values_mut() {
        b.duration = Duration::ZERO;
    }
    state.events = 0;
    state
}

#[tokio::test]
async fn a_run_resumed_from_any_prefix_of_its_log_ends_exactly_like_the_uninterrupted_run() {
    let wf = durable_workflow();
    let mut reference = MemoryLog::default();
    let report = run(
        &wf,
        &planner_workers(),
        &CoreActions,
        &RunOptions::new("r"),
        &mut reference,
    )
    .await
    .unwrap();
    let RunStatus::WaitingAtGate { gate_id, .. } = &report.status else {
        panic!("{:?}", report.status)
    };
    let answer = Event::GateAnswered {
        gate_id: gate_id.clone(),
        decision: Decision::Approved,
    };
    reference.events.push(answer.clone());
    let mut state = RunState::replay(&reference.events).unwrap();
    let done = drive(
        &wf,
        &planner_workers(),
        &CoreActions,
        state.clone(),
        &mut reference,
    )
    .await
    .unwrap();
    assert_eq!(done.status, RunStatus::Succeeded);
    state = done.state;
    assert_eq!(state.blocks["plan.draft"].attempts, 2);
    assert_eq!(state.steps, 5);

    // Crash after every event: the log is a prefix; resume must reach the
    // same state, re-running only the block that was in flight.
    for cut in 1..reference.events.len() {
        let mut log = MemoryLog {
            events: reference.events[..cut].to_vec(),
        };
        let workers = planner_workers();
        let mut resumed = RunState::replay(&log.events).unwrap();
        loop {
            let report = resume(&wf, &workers, &CoreActions, resumed, &mut log)
                .await
                .unwrap();
            match report.status {
                RunStatus::WaitingAtGate { gate_id, .. } => {
                    log.events.push(Event::GateAnswered {
                        gate_id,
                        decision: Decision::Approved,
                    });
                    resumed = RunState::replay(&log.events).unwrap();
                }
                _ => {
                    assert_eq!(timeless(&report.state), timeless(&state), "cut at {cut}");
                    break;
                }
            }
        }
        // Every step completed exactly once in the log.
        let completed: Vec<u64> = log
            .events
            .iter()
            .filter_map(|e| match e {
                Event::BlockCompleted { step, .. } => Some(*step),
                _ => None,
            })
            .collect();
        assert_eq!(completed, (0..5).collect::<Vec<_>>(), "cut at {cut}");
        // A block interrupted mid-way was run again, nothing else.
        let interrupted = matches!(reference.events[cut - 1], Event::BlockStarted { .. });
        let rerun = workers.seen.lock().unwrap().len();
        let already_done = reference.events[..cut]
            .iter()
            .filter(|e| matches!(e, Event::BlockCompleted { .. }))
            .count();
        assert_eq!(rerun, 5 - already_done, "cut at {cut}");
        if interrupted {
            assert!(log.events.iter().any(|e| matches!(
                e,
                Event::Resumed {
                    interrupted: Some(_)
                }
            )));
        }
    }
}

#[tokio::test]
async fn a_gate_answer_resumes_with_a_signal_and_the_requested_changes() {
    let wf = durable_workflow();
    let mut log = MemoryLog::default();
    let workers = planner_workers();
    let report = run(&wf, &workers, &CoreActions, &RunOptions::new("r"), &mut log)
        .await
        .unwrap();
    assert!(matches!(report.status, RunStatus::WaitingAtGate { .. }));
    assert_eq!(report.state.gates["UD-1"].decision, None);
    log.events.push(Event::GateAnswered {
        gate_id: "UD-1".into(),
        decision: "changes-requested: smaller tasks".parse().unwrap(),
    });
    let state = RunState::replay(&log.events).unwrap();
    let report = drive(&wf, &workers, &CoreActions, state, &mut log)
        .await
        .unwrap();
    // Changes requested: the plan runs again and the gate opens anew.
    let RunStatus::WaitingAtGate { gate_id, .. } = &report.status else {
        panic!("{:?}", report.status)
    };
    assert_eq!(gate_id, "UD-2");
    let decision = report
        .payload()
        .iter()
        .find(|s| s.kind == "GATE_DECISION")
        .expect("the decision is in the payload");
    assert_eq!(decision.content, "changes-requested:smaller tasks");
    assert_eq!(report.state.blocks["plan.draft"].attempts, 3);

    // Answering a gate that is not open does not fold.
    let mut state = report.state.clone();
    let stale = Event::GateAnswered {
        gate_id: "UD-1".into(),
        decision: Decision::Approved,
    };
    let before = state.clone();
    assert!(
        state
            .apply(&stale)
            .unwrap_err()
            .to_string()
            .contains("UD-1")
    );
    assert_eq!(state, before, "a refused event changes nothing");
}

#[tokio::test]
async fn a_log_out_of_order_is_refused_not_folded() {
    let wf = durable_workflow();
    let mut log = MemoryLog::default();
    run(
        &wf,
        &planner_workers(),
        &CoreActions,
        &RunOptions::new("r"),
        &mut log,
    )
    .await
    .unwrap();
    // Drop one completed block: the next events no longer fit.
    let at = log
        .events
        .iter()
        .position(|e| matches!(e, Event::BlockCompleted { step: 1, .. }))
        .unwrap();
    let mut damaged = log.events.clone();
    damaged.remove(at);
    let err = RunState::replay(&damaged).unwrap_err();
    assert_eq!(err.index as usize, at, "{err}");
    // A second start is refused too.
    let mut twice = log.events.clone();
    twice.push(log.events[0].clone());
    assert!(RunState::replay(&twice).is_err());
}

#[tokio::test]
async fn needs_decision_opens_a_gate_with_the_agents_question_unless_routed() {
    let ask = |_: &BlockContext, payload: &ExecutionPayload| {
        let mut payload = payload.clone();
        payload.push(ContextSegment::new(
            "q",
            crate::run::transitions::DECISION_REQUEST,
            "Use Postgres or SQLite?",
        ));
        Ok(WorkerOutput {
            payload,
            signal: crate::run::transitions::NEEDS_DECISION.into(),
            structured_output: None,
            statistics: Statistics::default(),
            written: Vec::new(),
        })
    };
    let wf = workflow(serde_json::json!({
        "id": "ask", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": {"worker": "planner", "transitions": [
                {"on_signal": "SIGNAL:GATE_APPROVED", "action": "END"}
            ]}
        }}}
    }));
    let workers = FakeWorkers::default().with("planner", ask);
    let mut log = MemoryLog::default();
    let report = run(&wf, &workers, &CoreActions, &RunOptions::new("r"), &mut log)
        .await
        .unwrap();
    let RunStatus::WaitingAtGate {
        prompt, gate_id, ..
    } = &report.status
    else {
        panic!("{:?}", report.status)
    };
    assert_eq!(prompt, "Use Postgres or SQLite?");
    // Lane choices answer only fan-in gates.
    for answer in ["resolved", "use-lane:a"] {
        let mut probe = RunState::replay(&log.events).unwrap();
        let err = probe
            .apply(&Event::GateAnswered {
                gate_id: gate_id.clone(),
                decision: answer.parse().unwrap(),
            })
            .unwrap_err();
        assert!(err.to_string().contains("not a fan-in gate"), "{err}");
    }
    log.events.push(Event::GateAnswered {
        gate_id: gate_id.clone(),
        decision: Decision::Approved,
    });
    let state = RunState::replay(&log.events).unwrap();
    let report = drive(&wf, &workers, &CoreActions, state, &mut log)
        .await
        .unwrap();
    assert_eq!(report.status, RunStatus::Succeeded);

    // A block that routes the signal itself keeps control.
    let wf = workflow(serde_json::json!({
        "id": "ask", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": {"worker": "planner", "transitions": [
                {"on_signal": "SIGNAL:NEEDS_DECISION", "action": "FAIL:no humans here"}
            ]}
        }}}
    }));
    let report = execute(&wf, &workers).await;
    assert!(
        matches!(report.status, RunStatus::Failed { ref reason } if reason.contains("no humans"))
    );
}

#[tokio::test]
async fn a_decision_with_questions_asks_each_and_keeps_security_ones_open() {
    use crate::agents::session_artifacts::DecisionStatus;
    use crate::agents::session_projection::SessionProjection;
    use crate::run::transitions::{DECISION_QUESTION, DECISION_REQUEST, SECURITY_QUESTION};
    let ask = |_: &BlockContext, payload: &ExecutionPayload| {
        let mut payload = payload.clone();
        payload.push(ContextSegment::new(
            "q",
            DECISION_REQUEST,
            "Findings need you.",
        ));
        payload.push(ContextSegment::new(
            "q1",
            SECURITY_QUESTION,
            "Log the raw token?",
        ));
        payload.push(ContextSegment::new(
            "q2",
            DECISION_QUESTION,
            "Cookie for 30 days?",
        ));
        payload.push(ContextSegment::new("q3", DECISION_QUESTION, "Drop IE11?"));
        Ok(WorkerOutput {
            payload,
            signal: crate::run::transitions::NEEDS_DECISION.into(),
            structured_output: None,
            statistics: Statistics::default(),
            written: Vec::new(),
        })
    };
    let wf = workflow(serde_json::json!({
        "id": "ask", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": {"worker": "planner", "transitions": [
                {"on_signal": "SIGNAL:GATE_APPROVED", "action": "JUMP:b"}
            ]},
            "b": {"worker": "tag", "transitions": [
                {"on_signal": "SIGNAL:SUCCESS", "action": "GATE:Ship it?"},
                {"on_signal": "SIGNAL:GATE_APPROVED", "action": "END"}
            ]}
        }}}
    }));
    let workers = FakeWorkers::default().with("planner", ask).with(
        "tag",
        |_: &BlockContext, p: &ExecutionPayload| {
            Ok(WorkerOutput {
                payload: p.clone(),
                signal: "SIGNAL:SUCCESS".into(),
                structured_output: None,
                statistics: Statistics::default(),
                written: Vec::new(),
            })
        },
    );
    let mut log = MemoryLog::default();
    let report = run(&wf, &workers, &CoreActions, &RunOptions::new("r"), &mut log)
        .await
        .unwrap();
    let RunStatus::WaitingAtGate {
        prompt, gate_id, ..
    } = &report.status
    else {
        panic!("{:?}", report.status)
    };
    assert_eq!(gate_id, "UD-1");
    for line in [
        "Findings need you.",
        "1. UD-1 [security]: Log the raw token?",
        "2. UD-2: Cookie for 30 days?",
        "3. UD-3: Drop IE11?",
    ] {
        assert!(prompt.contains(line), "{line}\n{prompt}");
    }
    let state = RunState::replay(&log.events).unwrap();
    // The hint shows how such a gate is answered: never `approved`.
    let hint = state.answer_forms("UD-1");
    assert!(
        hint.starts_with(r#"'{"UD-1":"<answer>","UD-2":"<answer>","UD-3":"defer: <reason>"}'"#)
            && !hint.contains("approved"),
        "{hint}"
    );
    // A plain answer does not say which question it answers; an answer to
    // a question of another gate is refused.
    assert!(state.parse_answer("UD-1", "yes").is_err());
    assert!(state.parse_answer("UD-1", r#"{"UD-7": "yes"}"#).is_err());
    // Partial: UD-3 answered, UD-2 cancelled for want of a response, the
    // security question UD-1 asked again.
    let partial = state
        .parse_answer("UD-1", r#"{"3": "yes, drop it"}"#)
        .unwrap();
    log.events.push(Event::GateAnswered {
        gate_id: "UD-1".into(),
        decision: partial,
    });
    let state = RunState::replay(&log.events).unwrap();
    let Phase::Waiting { prompt, .. } = &state.phase else {
        panic!("{:?}", state.phase)
    };
    assert!(prompt.contains("1. UD-1 [security]"), "{prompt}");
    assert!(!prompt.contains("Drop IE11"), "{prompt}");
    // Nothing but an answer or a deferral ends a security question.
    let none = state.parse_answer("UD-1", "{}").unwrap();
    let mut probe = state.clone();
    probe
        .apply(&Event::GateAnswered {
            gate_id: "UD-1".into(),
            decision: none,
        })
        .unwrap();
    assert!(matches!(probe.phase, Phase::Waiting { .. }));
    let deferral = state.parse_answer("UD-1", "defer: next sprint").unwrap();
    log.events.push(Event::GateAnswered {
        gate_id: "UD-1".into(),
        decision: deferral,
    });
    let state = RunState::replay(&log.events).unwrap();
    let outcome = &state
        .payload
        .iter()
        .rev()
        .find(|s| s.kind == "GATE_DECISION")
        .unwrap()
        .content;
    assert!(
        outcome.contains("UD-1 (Log the raw token?): cancelled (user deferred: next sprint)"),
        "{outcome}"
    );
    assert!(
        outcome.contains("UD-2 (Cookie for 30 days?): cancelled (no response provided)"),
        "{outcome}"
    );
    assert!(
        outcome.contains("UD-3 (Drop IE11?): answered: yes, drop it"),
        "{outcome}"
    );
    let report = drive(&wf, &workers, &CoreActions, state, &mut log)
        .await
        .unwrap();
    // The next gate's number comes after the questions'.
    let RunStatus::WaitingAtGate { gate_id, .. } = &report.status else {
        panic!("{:?}", report.status)
    };
    assert_eq!(gate_id, "UD-4");
    assert_eq!(crate::run::event::count_gates(&log.events), 4);
    // status.json: a record per question, each valid.
    let mut projection = SessionProjection::new(&wf, "2026-11-24_ask");
    for (i, e) in log.events.iter().enumerate() {
        projection.apply(e, &format!("2026-11-24T10:00:{i:02}Z"));
    }
    let status = projection.status();
    status.validate().unwrap();
    let decisions: Vec<(&str, DecisionStatus, Option<&str>)> = status
        .user_decisions
        .iter()
        .map(|d| {
            (
                d.decision_id.as_str(),
                d.status,
                d.resolution_reason.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        [
            (
                "UD-1",
                DecisionStatus::Cancelled,
                Some("user deferred: next sprint")
            ),
            (
                "UD-2",
                DecisionStatus::Cancelled,
                Some("no response provided")
            ),
            ("UD-3", DecisionStatus::Answered, None),
            ("UD-4", DecisionStatus::Pending, None),
        ]
    );
    assert_eq!(
        status.user_decisions[2].answer.as_deref(),
        Some("yes, drop it")
    );
}

/// Counts appends, to check that a step costs one durable write.
#[derive(Default)]
struct CountingLog {
    log: MemoryLog,
    appends: usize,
}

impl EventSink for CountingLog {
    fn append(&mut self, events: &[Event]) -> Result<(), crate::run::event::SinkError> {
        self.appends += 1;
        self.log.append(events)
    }

    fn new_gate_id(&mut self) -> Result<String, crate::run::event::SinkError> {
        self.log.new_gate_id()
    }
}

#[tokio::test]
async fn each_step_is_one_append_whatever_the_length_of_the_run() {
    for length in [10usize, 100] {
        let mut blocks = serde_json::Map::new();
        for i in 0..length {
            let next = if i + 1 == length {
                "END".to_string()
            } else {
                format!("JUMP:b{}", i + 1)
            };
            blocks.insert(
                format!("b{i}"),
                block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", next.as_str())]),
            );
        }
        let wf = workflow(serde_json::json!({
            "id": "w", "start_node": "main",
            "nodes": {"main": {"entry_block": "b0", "blocks": blocks}}
        }));
        let workers = FakeWorkers::default().with("tag", tagger);
        let mut sink = CountingLog::default();
        let report = run(
            &wf,
            &workers,
            &CoreActions,
            &RunOptions::new("r"),
            &mut sink,
        )
        .await
        .unwrap();
        assert_eq!(report.status, RunStatus::Succeeded);
        // run_started, then one append per block start (carrying the
        // previous block's completion and action), then the last block's
        // completion, action and the run's end.
        assert_eq!(sink.appends, length + 2, "{length} blocks");
        assert_eq!(RunState::replay(&sink.log.events).unwrap(), report.state);
    }
}

/// A host that runs blocks as jobs: every block it is asked about gets one.
struct JobWorkers(FakeWorkers);

impl BlockRunner for JobWorkers {
    fn run_block(&self, request: BlockRequest) -> impl Future<Output = BlockResult> + Send {
        self.0.run_block(request)
    }

    fn job_for(&self, request: &BlockRequest) -> Option<QueuedJob> {
        let ctx = &request.context;
        Some(QueuedJob {
            step: ctx.step_index,
            node: ctx.node_id.clone(),
            block: ctx.block_id.clone(),
            requires: vec!["wasm".into()],
            request: request.worker.clone(),
        })
    }
}

impl Lanes for JobWorkers {}

impl SessionReads for JobWorkers {}

impl TelemetrySource for JobWorkers {}

/// Keeps each append's events and the job queued with them.
#[derive(Default)]
struct JobLog {
    log: MemoryLog,
    appends: Vec<(Vec<Event>, Option<QueuedJob>)>,
}

impl EventSink for JobLog {
    fn append(&mut self, events: &[Event]) -> Result<(), crate::run::event::SinkError> {
        self.appends.push((events.to_vec(), None));
        self.log.append(events)
    }

    fn append_with_job(
        &mut self,
        events: &[Event],
        job: &QueuedJob,
    ) -> Result<(), crate::run::event::SinkError> {
        self.appends.push((events.to_vec(), Some(job.clone())));
        self.log.append(events)
    }

    fn new_gate_id(&mut self) -> Result<String, crate::run::event::SinkError> {
        self.log.new_gate_id()
    }
}

#[tokio::test]
async fn a_blocks_job_is_queued_with_its_start_and_the_previous_blocks_result() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {"main": {"entry_block": "b0", "blocks": {
            "b0": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "JUMP:b1")]),
            "b1": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "JUMP:b2")]),
            "b2": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "END")]),
        }}}
    }));
    let workers = JobWorkers(FakeWorkers::default().with("tag", tagger));
    let mut sink = JobLog::default();
    let report = run(
        &wf,
        &workers,
        &CoreActions,
        &RunOptions::new("r"),
        &mut sink,
    )
    .await
    .unwrap();
    assert_eq!(report.status, RunStatus::Succeeded);
    let with_jobs: Vec<_> = sink
        .appends
        .iter()
        .filter_map(|(events, job)| Some((events, job.as_ref()?)))
        .collect();
    assert_eq!(with_jobs.len(), 3, "one job per block");
    for (i, (events, job)) in with_jobs.iter().enumerate() {
        // The append ends with the block's start, which names the job's block.
        let Some(Event::BlockStarted { step, block, .. }) = events.last() else {
            panic!("job {i} queued without a block start: {events:?}");
        };
        assert_eq!(
            (job.step, &job.block, job.node.as_str()),
            (*step, block, "main")
        );
        assert_eq!(job.block, format!("b{i}"));
        // After the first, the same commit records the previous block's
        // result and the action taken on it.
        if i > 0 {
            assert!(
                matches!(&events[0], Event::BlockCompleted { block, .. } if *block == format!("b{}", i - 1)),
                "{events:?}"
            );
            assert!(matches!(events[1], Event::ActionTaken { .. }), "{events:?}");
        }
    }
    // Every start is queued with its job; no other append queues one.
    let starts = sink
        .appends
        .iter()
        .filter(|(events, _)| {
            events
                .iter()
                .any(|e| matches!(e, Event::BlockStarted { .. }))
        })
        .count();
    assert_eq!(starts, 3);
    assert_eq!(RunState::replay(&sink.log.events).unwrap(), report.state);
}

#[tokio::test]
async fn inputs_reach_the_worker_its_prompt_and_config_and_are_recorded() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "rules": "Audience: {{inputs.audience}}.",
        "inputs": {"properties": {"topic": {"type": "string"}, "audience": {"type": "string"}}},
        "nodes": {"main": {"entry_block": "a", "blocks": {"a": {
            "worker": "tag",
            "config": {"about": "{{inputs.topic}}"},
            "prompt": {"task": "Write about {{inputs.topic}}."},
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
        }}}}
    }));
    let workers = FakeWorkers::default().with("tag", tagger);
    let mut options = RunOptions::new("exec-1");
    options.inputs = serde_json::json!({"topic": "rust", "audience": "users"})
        .as_object()
        .unwrap()
        .clone();
    let report = execute_with(&wf, &workers, &CoreActions, &options).await;
    assert_eq!(report.state.inputs, options.inputs);
    let seen = workers.seen.lock().unwrap();
    let ctx = &seen[0];
    assert_eq!(ctx.config, serde_json::json!({"about": "rust"}));
    assert_eq!(ctx.system_prompt, "Audience: users.\n\nWrite about rust.");
    assert_eq!(
        ctx.inputs,
        serde_json::json!({"topic": "rust", "audience": "users"})
    );
    assert!(
        ctx.assembled_context
            .contains("## Inputs\n{\n  \"audience\": \"users\""),
        "{}",
        ctx.assembled_context
    );
}

/// A host whose blocks send telemetry while they run (the way an agent
/// posts to its `TELEMETRY_URL`): each block sends two events, the second
/// just before it returns, plus one naming a block that is not running.
struct Telemetering {
    inner: FakeWorkers,
    tx: tokio::sync::mpsc::UnboundedSender<Telemetry>,
    rx: tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<Telemetry>>,
}

impl Telemetering {
    fn new(inner: FakeWorkers) -> Self {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        Telemetering {
            inner,
            tx,
            rx: tokio::sync::Mutex::new(rx),
        }
    }
}

impl BlockRunner for Telemetering {
    fn run_block(&self, request: BlockRequest) -> impl Future<Output = BlockResult> + Send {
        let ctx = request.context.clone();
        let send = |n: u64, step: u64| {
            self.tx
                .send(Telemetry {
                    step,
                    node: ctx.node_id.clone(),
                    block: ctx.block_id.clone(),
                    lane: None,
                    body: serde_json::json!({"type": "tick", "n": n}),
                })
                .unwrap()
        };
        send(1, ctx.step_index);
        send(99, ctx.step_index + 1000);
        let result = self.inner.run_block(request);
        let tx = self.tx.clone();
        async move {
            // Give the engine the chance to record the first while running.
            tokio::task::yield_now().await;
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            let _ = tx.send(Telemetry {
                step: ctx.step_index,
                node: ctx.node_id,
                block: ctx.block_id,
                lane: None,
                body: serde_json::json!({"type": "tick", "n": 2}),
            });
            result.await
        }
    }
}

impl Lanes for Telemetering {}

impl SessionReads for Telemetering {}

impl TelemetrySource for Telemetering {
    async fn telemetry(&self) -> Vec<Telemetry> {
        let mut rx = self.rx.lock().await;
        let first = rx.recv().await.into_iter();
        let mut all: Vec<Telemetry> = first.collect();
        while let Ok(t) = rx.try_recv() {
            all.push(t);
        }
        all
    }

    fn telemetry_now(&self) -> Vec<Telemetry> {
        let Ok(mut rx) = self.rx.try_lock() else {
            return Vec::new();
        };
        std::iter::from_fn(|| rx.try_recv().ok()).collect()
    }
}

#[tokio::test]
async fn telemetry_is_recorded_within_the_block_that_sent_it() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "JUMP:b")]),
            "b": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "END")]),
        }}}
    }));
    let workers = Telemetering::new(FakeWorkers::default().with("tag", tagger));
    let mut log = MemoryLog::default();
    let report = run(
        &wf,
        &workers,
        &CoreActions,
        &RunOptions::new("exec-1"),
        &mut log,
    )
    .await
    .unwrap();
    assert_eq!(report.status, RunStatus::Succeeded);
    // Each block's two events, between its start and its completion; the
    // one naming a block that was not running is dropped.
    let shape: Vec<String> = log
        .events
        .iter()
        .filter_map(|e| match e {
            Event::BlockStarted { block, .. } => Some(format!("start {block}")),
            Event::BlockCompleted { block, .. } => Some(format!("done {block}")),
            Event::Telemetry {
                block, body, step, ..
            } => Some(format!("{block}@{step}:{}", body["n"])),
            _ => None,
        })
        .collect();
    assert_eq!(
        shape,
        [
            "start a", "a@0:1", "a@0:2", "done a", "start b", "b@1:1", "b@1:2", "done b"
        ]
    );
    // The log folds to the state the engine ended in.
    assert_eq!(RunState::replay(&log.events).unwrap(), report.state);
}

/// `tag` → external `ask` (prompted with the run's input `topic`, its
/// output checked by a schema) → `tag` on `SIGNAL:SUCCESS`, end on
/// `SIGNAL:STOP`.
fn external_workflow() -> Workflow {
    workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "inputs": {"type": "object", "properties": {"topic": {"type": "string"}}},
        "rules": "be brief",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "JUMP:ask")]),
            "ask": {
                "worker": "external",
                "prompt": {"task": "write about {{inputs.topic}}"},
                "validation_schema": {"type": "object", "required": ["verdict"]},
                "transitions": [
                    {"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:b"},
                    {"on_signal": "SIGNAL:STOP", "action": "END"}
                ]
            },
            "b": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "END")]),
        }}}
    }))
}

fn answer(signal: &str) -> ExternalAnswer {
    ExternalAnswer {
        signal: signal.into(),
        notes: Some("did it".into()),
        structured_output: Some(r#"{"verdict":"ok"}"#.into()),
        inputs: serde_json::Map::new(),
    }
}

#[tokio::test]
async fn an_external_block_rests_the_run_until_its_answer_and_runs_nothing() {
    let wf = external_workflow();
    let workers = FakeWorkers::default().with("tag", tagger);
    let mut options = RunOptions::new("x");
    options.inputs.insert("topic".into(), "owls".into());
    let mut log = MemoryLog::default();
    let report = run(&wf, &workers, &CoreActions, &options, &mut log)
        .await
        .unwrap();
    let RunStatus::AwaitingExternal {
        step,
        node,
        block,
        prompt,
    } = &report.status
    else {
        panic!("{:?}", report.status)
    };
    assert_eq!((*step, node.as_str(), block.as_str()), (1, "main", "ask"));
    assert!(
        prompt.contains("be brief") && prompt.contains("write about owls"),
        "{prompt}"
    );
    assert_eq!(
        workers.visited(),
        ["main.a"],
        "the external block ran nothing"
    );
    let last = log.events.last().unwrap();
    assert!(matches!(last, Event::ExternalAwaited { .. }) && last.is_snapshot());
    assert!(
        !log.events
            .iter()
            .any(|e| matches!(e, Event::BlockStarted { step: 1, .. }))
    );
    assert_eq!(RunState::replay(&log.events).unwrap(), report.state);
    assert_eq!(report.state.phase.status(), "waiting");
    assert!(!report.state.can_continue());
}

#[tokio::test]
async fn complete_external_records_the_answer_with_what_follows_in_one_append() {
    let wf = external_workflow();
    let workers = FakeWorkers::default().with("tag", tagger);
    let mut log = MemoryLog::default();
    let rested = run(&wf, &workers, &CoreActions, &RunOptions::new("x"), &mut log)
        .await
        .unwrap();
    let before = log.events.len();
    let mut given = answer("SIGNAL:SUCCESS");
    given.inputs.insert("topic".into(), "bats".into());
    let mut appends = Appends::default();
    let report = complete_external(
        &wf,
        &workers,
        &CoreActions,
        rested.state,
        &mut appends,
        given,
    )
    .await
    .unwrap();
    assert_eq!(report.status, RunStatus::Succeeded);
    assert_eq!(workers.visited(), ["main.a", "main.b"]);
    // The answer and what the run does up to the worker block after it are
    // one append, written before the worker runs.
    let kinds: Vec<&str> = appends.batches[0].iter().map(Event::kind).collect();
    assert_eq!(
        kinds,
        [
            "inputs_merged",
            "block_started",
            "block_completed",
            "action_taken",
            "block_started"
        ]
    );
    let Event::BlockCompleted { artifact, .. } = &appends.batches[0][2] else {
        panic!()
    };
    assert_eq!(artifact.as_deref(), Some(r#"{"verdict":"ok"}"#));
    assert!(
        report
            .payload()
            .iter()
            .any(|s| s.kind == NOTES_SEGMENT && s.content == "did it")
    );
    assert_eq!(report.state.inputs["topic"], "bats");
    log.events.extend(appends.batches.concat());
    assert!(log.events.len() > before);
    assert_eq!(RunState::replay(&log.events).unwrap(), report.state);
}

#[tokio::test]
async fn an_external_answer_s_signal_picks_the_transition() {
    let wf = external_workflow();
    let workers = FakeWorkers::default().with("tag", tagger);
    let mut log = MemoryLog::default();
    let rested = run(&wf, &workers, &CoreActions, &RunOptions::new("x"), &mut log)
        .await
        .unwrap();
    let report = complete_external(
        &wf,
        &workers,
        &CoreActions,
        rested.state,
        &mut log,
        answer("SIGNAL:STOP"),
    )
    .await
    .unwrap();
    assert_eq!(report.status, RunStatus::Succeeded);
    assert_eq!(workers.visited(), ["main.a"], "b never ran");
}

#[tokio::test]
async fn complete_external_refuses_a_run_that_awaits_nothing() {
    let wf = external_workflow();
    let workers = FakeWorkers::default().with("tag", tagger);
    let mut log = MemoryLog::default();
    let rested = run(&wf, &workers, &CoreActions, &RunOptions::new("x"), &mut log)
        .await
        .unwrap();
    let done = complete_external(
        &wf,
        &workers,
        &CoreActions,
        rested.state,
        &mut log,
        answer("SIGNAL:STOP"),
    )
    .await
    .unwrap();
    let events = log.events.len();
    let again = complete_external(
        &wf,
        &workers,
        &CoreActions,
        done.state,
        &mut log,
        answer("SIGNAL:STOP"),
    )
    .await;
    assert!(matches!(again, Err(EngineError::NotAwaiting("succeeded"))));
    assert_eq!(log.events.len(), events, "nothing recorded");
}

#[test]
fn events_of_an_external_block_fold_strictly() {
    let started = Event::RunStarted {
        run_id: "r".into(),
        workflow_id: "w".into(),
        workflow_hash: String::new(),
        plugins: BTreeMap::new(),
        start_node: "main".into(),
        start_block: "ask".into(),
        max_steps: 10,
        max_call_depth: 4,
        default_executor: String::new(),
        inputs: serde_json::Map::new(),
        rerun_of: None,
    };
    let mut state = RunState::start(&started).unwrap();
    let merged = Event::InputsMerged {
        inputs: serde_json::Map::new(),
    };
    assert!(
        state.apply(&merged).is_err(),
        "no merge before the block is awaited"
    );
    let checkpoint = Event::Checkpointed {
        notes_markdown: "so far".into(),
    };
    assert!(state.apply(&checkpoint).is_err());
    let wrong = Event::ExternalAwaited {
        step: 0,
        node: "main".into(),
        block: "other".into(),
        attempt: 1,
        prompt: String::new(),
    };
    assert!(state.apply(&wrong).is_err(), "only the block that is due");
    let awaited = Event::ExternalAwaited {
        step: 0,
        node: "main".into(),
        block: "ask".into(),
        attempt: 1,
        prompt: "p".into(),
    };
    state.apply(&awaited).unwrap();
    state.apply(&checkpoint).unwrap();
    state.apply(&merged).unwrap();
    assert!(state.apply(&awaited).is_err(), "awaited once");
    let started_other = Event::BlockStarted {
        step: 0,
        node: "main".into(),
        block: "other".into(),
        attempt: 1,
    };
    assert!(state.apply(&started_other).is_err());
}

/// A sink that keeps each append apart.
#[derive(Default)]
struct Appends {
    batches: Vec<Vec<Event>>,
}

impl EventSink for Appends {
    fn append(&mut self, events: &[Event]) -> Result<(), SinkError> {
        self.batches.push(events.to_vec());
        Ok(())
    }

    fn new_gate_id(&mut self) -> Result<String, SinkError> {
        Ok(format!("UD-{}", self.batches.len()))
    }
}

/// A `forEach` loop over the input `xs` whose body is a `wr.when` guard
/// (only items other than "skip") before a `tag` block prompted with the
/// current item, then `done`.
fn looping_workflow() -> Workflow {
    workflow(serde_json::json!({
        "id": "w", "start_node": "main",
        "inputs": {"type": "object", "additionalProperties": true},
        "nodes": {"main": {"entry_block": "each", "blocks": {
            "each": {
                "worker": "wr.loop",
                "config": {"loop_id": "each", "kind": "forEach", "max_iterations": 5,
                    "items": "xs", "iteration_var": "n", "item_var": "x"},
                "transitions": [
                    {"on_signal": "SIGNAL:ENTER", "action": "JUMP:guard"},
                    {"on_signal": "SIGNAL:EXIT", "action": "JUMP:done"}
                ]
            },
            "guard": {
                "worker": "wr.when",
                "config": {"condition": {"var": "x", "not_equals": "skip"}},
                "transitions": [
                    {"on_signal": "SIGNAL:TRUE", "action": "JUMP:body"},
                    {"on_signal": "SIGNAL:FALSE", "action": "JUMP:each"}
                ]
            },
            "body": {
                "worker": "tag",
                "prompt": {"task": "item {{inputs.n}}: {{inputs.x}}"},
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:each"}]
            },
            "done": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "END")]),
        }}}
    }))
}

#[tokio::test]
async fn control_blocks_loop_and_branch_over_the_inputs_and_resume_from_any_prefix() {
    let wf = looping_workflow();
    let workers = FakeWorkers::default().with("tag", tagger);
    let mut options = RunOptions::new("loop");
    options
        .inputs
        .insert("xs".into(), serde_json::json!(["a", "skip", "c"]));
    let mut log = Appends::default();
    let report = run(&wf, &workers, &CoreActions, &options, &mut log)
        .await
        .unwrap();
    assert_eq!(report.status, RunStatus::Succeeded);
    assert_eq!(
        workers.visited(),
        ["main.body", "main.body", "main.done"],
        "control blocks ran no worker; the guard skipped the second item"
    );
    let prompts: Vec<String> = workers.seen.lock().unwrap()[..2]
        .iter()
        .map(|c| c.system_prompt.clone())
        .collect();
    assert_eq!(
        prompts,
        ["item 1: a", "item 3: c"],
        "prompts see the loop variables as they are at the block"
    );
    assert_eq!(
        report.state.inputs["wr.loop.each"],
        serde_json::Value::Null,
        "leaving clears the counter"
    );
    // What a control block merges is recorded with its completion, in
    // one append, so a run resumed after any append goes the same way.
    let merged_with_completion = log.batches.iter().filter(|b| {
        b.windows(2).any(|w| {
            matches!(
                w,
                [Event::InputsMerged { .. }, Event::BlockCompleted { .. }]
            )
        })
    });
    assert_eq!(merged_with_completion.count(), 4, "3 entries and the exit");
    let all: Vec<Event> = log.batches.concat();
    let ends = log.batches.iter().scan(0, |n, b| {
        *n += b.len();
        Some(*n)
    });
    for cut in ends {
        let events = &all[..cut];
        let Ok(state) = RunState::replay(events) else {
            continue;
        };
        if !state.can_continue() {
            continue;
        }
        let workers = FakeWorkers::default().with("tag", tagger);
        let mut rest = MemoryLog {
            events: events.to_vec(),
        };
        let resumed = resume(&wf, &workers, &CoreActions, state, &mut rest)
            .await
            .unwrap();
        assert_eq!(resumed.status, RunStatus::Succeeded, "cut at {cut}");
        assert_eq!(
            timeless(&resumed.state).inputs,
            timeless(&report.state).inputs,
            "cut at {cut}"
        );
        assert_eq!(tags(&resumed), tags(&report), "cut at {cut}");
    }
}

#[tokio::test]
async fn a_control_block_that_cannot_decide_fails_with_the_reason() {
    let wf = looping_workflow();
    let workers = FakeWorkers::default().with("tag", tagger);
    let mut options = RunOptions::new("loop");
    options.inputs.insert("xs".into(), "not a list".into());
    let report = execute_with(&wf, &workers, &CoreActions, &options).await;
    let RunStatus::Failed { reason } = &report.status else {
        panic!("{:?}", report.status)
    };
    assert!(reason.contains("`xs`, which is not a list"), "{reason}");
    assert!(workers.visited().is_empty());
}

#[test]
fn control_block_configs_are_checked_with_their_pointer() {
    let mut json = serde_json::to_value(looping_workflow()).unwrap();
    json["nodes"]["main"]["blocks"]["guard"]["config"]["condition"] =
        serde_json::json!({"var": "x", "like": "a"});
    json["nodes"]["main"]["blocks"]["each"]["config"]["kind"] = serde_json::json!("for");
    let wf = manifest::parse(std::path::Path::new("t.json"), &json.to_string()).unwrap();
    let errors = manifest::check(
        std::path::Path::new("t.json"),
        &wf,
        &["actions-core", "tag"],
    );
    let at: Vec<_> = errors.iter().filter_map(|e| e.location.clone()).collect();
    assert_eq!(
        at,
        [
            "/nodes/main/blocks/each/config/count",
            "/nodes/main/blocks/guard/config/condition/like"
        ],
        "{errors:?}"
    );
}

#[tokio::test]
async fn artifact_gates_block_a_block_whose_session_artifacts_fall_short() {
    let wf = workflow(serde_json::json!({
        "id": "w", "start_node": "n", "session_mode": "lean",
        "nodes": {"n": {"entry_block": "code", "blocks": {
            "code": {
                "worker": "tag",
                "artifact_gates": ["spec.md", "acceptance.json", "architecture.md"],
                "transitions": [
                    {"on_signal": "SIGNAL:SUCCESS", "action": "END"},
                    {"on_signal": "SIGNAL:BLOCKED", "action": "FAIL:blocked"}
                ]
            }
        }}}
    }));
    let spec = "# Goals\nA.\n# Acceptance Criteria\nB.\n# Definition of Done\nC.\n";
    let files = |acceptance: &str| {
        HashMap::from([
            ("spec.md".to_string(), spec.to_string()),
            ("acceptance.json".to_string(), acceptance.to_string()),
        ])
    };
    // Failing: the worker never runs; the block ends BLOCKED, saying why.
    let mut workers = FakeWorkers::default().with("tag", tagger);
    workers.session = Some(files(r#"[{"id": "AC-1", "description": "d"}]"#));
    let report = execute(&wf, &workers).await;
    assert!(workers.visited().is_empty(), "the worker ran");
    let gate = report.payload().last().unwrap();
    assert_eq!(gate.kind, "ARTIFACT_GATE");
    assert!(
        gate.content
            .contains("acceptance.json: criterion 1 has no (or an empty) verify"),
        "{}",
        gate.content
    );
    assert!(
        !gate.content.contains("architecture.md"),
        "lean: not checked"
    );
    assert!(matches!(report.status, RunStatus::Failed { .. }));

    // Passing: the worker runs.
    let mut workers = FakeWorkers::default().with("tag", tagger);
    workers.session = Some(files(
        r#"[{"id": "AC-1", "description": "d", "verify": "v"}]"#,
    ));
    let report = execute(&wf, &workers).await;
    assert_eq!(workers.visited(), ["n.code"]);
    assert_eq!(report.status, RunStatus::Succeeded);

    // A host without a session folder cannot pass a gate.
    let workers = FakeWorkers::default().with("tag", tagger);
    let report = execute(&wf, &workers).await;
    assert!(workers.visited().is_empty());
    assert!(
        report
            .payload()
            .last()
            .unwrap()
            .content
            .contains("cannot be read")
    );
}

fn design_workflow() -> Workflow {
    workflow(serde_json::json!({
        "id": "team", "start_node": "main",
        "nodes": {"main": {"entry_block": "design", "blocks": {
            "design": block("SIGNAL:SUCCESS", &[
                ("SIGNAL:SUCCESS", "GATE:APPROVE_DESIGN:Is the design right?"),
                ("SIGNAL:GATE_APPROVED", "JUMP:plan"),
                ("SIGNAL:GATE_CHANGES_REQUESTED", "JUMP:design")]),
            "plan": block("SIGNAL:SUCCESS", &[
                ("SIGNAL:SUCCESS", "GATE:REVIEW_STRATEGY"),
                ("SIGNAL:GATE_APPROVED", "JUMP:ask")]),
            "ask": block("SIGNAL:SUCCESS", &[
                ("SIGNAL:SUCCESS", "GATE:anything else?"),
                ("SIGNAL:GATE_APPROVED", "END")]),
        }}}
    }))
}

/// Answer the gate the run waits at with `answer` (parsed for that gate)
/// and drive on.
async fn answer_gate(
    wf: &Workflow,
    workers: &FakeWorkers,
    log: &mut MemoryLog,
    answer: &str,
) -> RunReport {
    let state = RunState::replay(&log.events).unwrap();
    let Phase::Waiting { gate_id, .. } = &state.phase else {
        panic!("not waiting: {:?}", state.phase)
    };
    let decision = crate::run::event::parse_answer(gate_id, answer).unwrap();
    log.events.push(Event::GateAnswered {
        gate_id: gate_id.clone(),
        decision,
    });
    let state = RunState::replay(&log.events).unwrap();
    let report = drive(wf, workers, &CoreActions, state, log).await.unwrap();
    assert_eq!(RunState::replay(&log.events).unwrap(), report.state);
    report
}

fn waiting_at(report: &RunReport) -> &str {
    match &report.status {
        RunStatus::WaitingAtGate { gate_id, .. } => gate_id,
        other => panic!("not at a gate: {other:?}"),
    }
}

#[tokio::test]
async fn well_known_gates_keep_their_id_and_ad_hoc_ones_are_numbered() {
    let wf = design_workflow();
    let workers = FakeWorkers::default().with("tag", tagger);
    let mut log = MemoryLog::default();
    let report = run(&wf, &workers, &CoreActions, &RunOptions::new("r"), &mut log)
        .await
        .unwrap();
    assert_eq!(waiting_at(&report), "UD-APPROVE-DESIGN");
    let RunStatus::WaitingAtGate { prompt, .. } = &report.status else {
        unreachable!()
    };
    assert_eq!(prompt, "Is the design right?");
    // Changes requested: the design runs again and the same gate reopens.
    let report = answer_gate(&wf, &workers, &mut log, "changes-requested: fewer modules").await;
    assert_eq!(waiting_at(&report), "UD-APPROVE-DESIGN");
    assert_eq!(report.state.blocks["main.design"].attempts, 2);
    assert_eq!(report.state.gates["UD-APPROVE-DESIGN"].decision, None);
    let report = answer_gate(&wf, &workers, &mut log, "approved: good").await;
    assert_eq!(waiting_at(&report), "UD-REVIEW-STRATEGY");
    let report = answer_gate(&wf, &workers, &mut log, "Each batch").await;
    // The canonical value is what the run (and its log) keeps.
    assert!(
        report
            .payload()
            .iter()
            .any(|s| s.kind == "GATE_DECISION" && s.content == "per-batch")
    );
    assert!(log.events.iter().any(|e| matches!(
        e,
        Event::GateAnswered {
            decision: Decision::Strategy {
                strategy: crate::run::event::ReviewStrategy::PerBatch
            },
            ..
        }
    )));
    // The first ad-hoc gate is UD-1: well-known gates take no number.
    assert_eq!(waiting_at(&report), "UD-1");
    let report = answer_gate(&wf, &workers, &mut log, "approved").await;
    assert_eq!(report.status, RunStatus::Succeeded);
    // A well-known gate's answer must fit it.
    let mut state = RunState::replay(&log.events[..3]).unwrap();
    for wrong in [
        Decision::Strategy {
            strategy: crate::run::event::ReviewStrategy::SingleFinal,
        },
        Decision::Resolved,
    ] {
        assert!(
            state
                .apply(&Event::GateAnswered {
                    gate_id: "UD-APPROVE-DESIGN".into(),
                    decision: wrong,
                })
                .is_err()
        );
    }
}

#[tokio::test]
async fn invalid_answers_are_reasked_three_times_then_the_run_ends_blocked() {
    let wf = design_workflow();
    let workers = FakeWorkers::default().with("tag", tagger);
    let mut log = MemoryLog::default();
    run(&wf, &workers, &CoreActions, &RunOptions::new("r"), &mut log)
        .await
        .unwrap();
    let reask = |answer: &str| Event::GateReasked {
        gate_id: "UD-APPROVE-DESIGN".into(),
        answer: answer.into(),
        reason: crate::run::event::parse_answer("UD-APPROVE-DESIGN", answer).unwrap_err(),
    };
    let mut state = RunState::replay(&log.events).unwrap();
    for (i, bad) in ["yes", "ok", "lgtm"].into_iter().enumerate() {
        state.apply(&reask(bad)).unwrap();
        log.events.push(reask(bad));
        assert_eq!(state.gates["UD-APPROVE-DESIGN"].reasks, i as u32 + 1);
        assert!(
            matches!(state.phase, Phase::Waiting { .. }),
            "the gate stays open"
        );
    }
    // A fourth re-ask does not fold: the decision must be cancelled.
    assert!(state.apply(&reask("sure")).is_err());
    // An ad-hoc gate's invalid answers are refused, never recorded.
    let mut adhoc = state.clone();
    adhoc.phase = Phase::Waiting {
        gate_id: "UD-1".into(),
        node: "main".into(),
        block: "ask".into(),
        prompt: "?".into(),
    };
    assert!(
        adhoc
            .apply(&Event::GateReasked {
                gate_id: "UD-1".into(),
                answer: "x".into(),
                reason: "no".into()
            })
            .is_err()
    );
    log.events.push(Event::GateAnswered {
        gate_id: "UD-APPROVE-DESIGN".into(),
        decision: Decision::Cancelled {
            reason: "no valid answer after 3 re-asks".into(),
        },
    });
    let state = RunState::replay(&log.events).unwrap();
    let report = drive(&wf, &workers, &CoreActions, state, &mut log)
        .await
        .unwrap();
    let RunStatus::Failed { reason } = &report.status else {
        panic!("{:?}", report.status)
    };
    assert_eq!(
        crate::run::event::blocker_of(reason),
        Some(crate::run::event::MANDATORY_DECISION_MISSING),
        "{reason}"
    );
    assert!(reason.contains("UD-APPROVE-DESIGN"), "{reason}");
    assert!(reason.contains("no valid answer"), "{reason}");
    assert_eq!(RunState::replay(&log.events).unwrap(), report.state);
}

/// `a` (a tagger) → `nap` (a `sleep` block, `config` as given) → `b`.
fn sleepy_workflow(config: serde_json::Value) -> Workflow {
    workflow(serde_json::json!({
        "id": "sleepy", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": {"worker": "tag", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:nap"}]},
            "nap": {"worker": "sleep", "config": config,
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:b"},
                                {"on_signal": "SIGNAL:WORKER_ERROR", "action": "FAIL:the nap failed"}]},
            "b": {"worker": "tag", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]}
        }}}
    }))
}

#[tokio::test]
async fn a_sleep_block_rests_the_run_until_it_is_due_then_completes_once() {
    crate::time::set_test_clock(Some(1_000_000));
    let wf = sleepy_workflow(serde_json::json!({"for": "10m"}));
    let workers = FakeWorkers::default().with("tag", tagger);
    let mut log = MemoryLog::default();
    let rested = run(&wf, &workers, &CoreActions, &RunOptions::new("x"), &mut log)
        .await
        .unwrap();
    let due = 1_000_000 + 600_000;
    assert!(
        matches!(&rested.status, RunStatus::Sleeping { step: 1, node, block, due_at_ms, retry: None }
            if node == "main" && block == "nap" && *due_at_ms == due),
        "{:?}",
        rested.status
    );
    let last = log.events.last().unwrap();
    assert!(matches!(last, Event::TimerStarted { .. }) && last.is_snapshot());
    assert_eq!(rested.state.phase.status(), "sleeping");
    assert_eq!(
        rested.state.in_flight, None,
        "a resumption does not restart it"
    );
    assert_eq!(RunState::replay(&log.events).unwrap(), rested.state);

    // Driven again before it is due (a resume, a restarted server): it
    // rests again, recording nothing.
    crate::time::set_test_clock(Some(due - 1));
    let written = log.events.len();
    let again = resume(&wf, &workers, &CoreActions, rested.state.clone(), &mut log)
        .await
        .unwrap();
    assert!(matches!(again.status, RunStatus::Sleeping { .. }));
    assert_eq!(log.events.len(), written, "{:?}", &log.events[written..]);

    // Once due: the block completes with success, then the run goes on.
    crate::time::set_test_clock(Some(due + 250));
    let woke = resume(&wf, &workers, &CoreActions, again.state, &mut log)
        .await
        .unwrap();
    crate::time::set_test_clock(None);
    assert!(
        matches!(woke.status, RunStatus::Succeeded),
        "{:?}",
        woke.status
    );
    assert_eq!(
        workers.visited(),
        ["main.a", "main.b"],
        "the sleep ran no worker"
    );
    let completions: Vec<&Event> = log
        .events
        .iter()
        .filter(|e| matches!(e, Event::BlockCompleted { block, .. } if block == "nap"))
        .collect();
    assert_eq!(completions.len(), 1);
    let Event::BlockCompleted {
        signal, log: lines, ..
    } = completions[0]
    else {
        unreachable!()
    };
    assert_eq!(signal, "SIGNAL:SUCCESS");
    assert!(lines[0].contains("woke 250 ms after"), "{lines:?}");
    assert_eq!(RunState::replay(&log.events).unwrap(), woke.state);
}

#[tokio::test]
async fn a_sleep_until_a_time_that_does_not_parse_at_run_time_fails_the_block() {
    let wf = workflow(serde_json::json!({
        "id": "sleepy", "start_node": "main",
        "inputs": {"type": "object", "properties": {"when": {"type": "string"}}},
        "nodes": {"main": {"entry_block": "nap", "blocks": {
            "nap": {"worker": "sleep", "config": {"until": "{{inputs.when}}"},
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"},
                                {"on_signal": "SIGNAL:WORKER_ERROR", "action": "FAIL:the nap failed"}]}
        }}}
    }));
    let workers = FakeWorkers::default();
    let mut options = RunOptions::new("x");
    options.inputs.insert("when".into(), "next tuesday".into());
    let mut log = MemoryLog::default();
    let report = run(&wf, &workers, &CoreActions, &options, &mut log)
        .await
        .unwrap();
    assert!(
        matches!(&report.status, RunStatus::Failed { reason } if reason.contains("the nap failed")),
        "{:?}",
        report.status
    );
    let failure = log.events.iter().find_map(|e| match e {
        Event::BlockCompleted { failure, .. } => failure.clone(),
        _ => None,
    });
    assert!(failure.unwrap().contains("`next tuesday` is not a time"));
}

mod retries;
