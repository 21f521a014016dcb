//! Engine-core benchmarks: `cargo bench -p wfhost-core`.
//!
//! The engine's own overhead per block — merge strategy, context and system
//! prompt assembly, transition lookup, output validation against a small
//! schema, action interpretation, statistics — with an in-process no-op
//! worker and the core grammar in-process, so nothing but the engine is
//! measured. Also the peak RSS of long runs, to show memory stays bounded.

use std::future::Future;
use std::time::{Duration, Instant};

use serde_json::json;
use wfhost_core::command::EngineCommand;
use wfhost_core::manifest;
use wfhost_core::run::engine::{
    self, ActionInterpreter, BlockRequest, BlockResult, BlockRunner, Lanes, RunOptions, RunStatus,
    RunView, SessionReads, TelemetrySource,
};
use wfhost_core::run::payload::WorkerOutput;

/// Returns the payload unchanged; `SIGNAL:AGAIN` until the last step.
struct Noop {
    steps: u64,
}

impl BlockRunner for Noop {
    fn run_block(&self, request: BlockRequest) -> impl Future<Output = BlockResult> + Send {
        let last = request.context.step_index + 1 >= self.steps;
        let output = WorkerOutput {
            payload: request.payload,
            signal: if last { "SIGNAL:DONE" } else { "SIGNAL:AGAIN" }.into(),
            structured_output: Some("{\"ok\": true, \"notes\": [\"fine\"]}".into()),
            statistics: Default::default(),
            written: Vec::new(),
        };
        async move {
            BlockResult {
                outcome: Ok(output),
                log: Vec::new(),
            }
        }
    }
}

impl Lanes for Noop {}

impl SessionReads for Noop {}

impl TelemetrySource for Noop {}

struct Core;

impl ActionInterpreter for Core {
    fn interpret(
        &self,
        _: &str,
        action: &str,
        _: &RunView,
    ) -> impl Future<Output = Result<EngineCommand, String>> + Send {
        let r = wfhost_core::actions::parse(action).map_err(|e| e.to_string());
        async move { r }
    }
}

fn workflow() -> manifest::Workflow {
    let text = json!({
        "id": "bench", "start_node": "main", "rules": "Be brief.",
        "nodes": {"main": {"entry_block": "a", "static_memory": {"style": "terse"}, "blocks": {
            "a": {"worker": "noop", "file_restrictions": ["src/**"],
                  "prompt": {"prefix": "You are fast.", "task": "Do nothing.", "output_checklist": ["nothing"]},
                  "payload_merge_strategy": ["keep_last:4", "drop_type:NOISE"],
                  "validation_schema": {"type": "object", "required": ["ok"],
                                        "properties": {"ok": {"type": "boolean"}, "notes": {"type": "array"}}},
                  "transitions": [
                      {"on_signal": "SIGNAL:AGAIN", "action": "JUMP:b"},
                      {"on_signal": "SIGNAL:DONE", "action": "END"}]},
            "b": {"worker": "noop", "payload_merge_strategy": ["keep_last:4"],
                  "transitions": [
                      {"on_signal": "SIGNAL:AGAIN", "action": "JUMP:a"},
                      {"on_signal": "SIGNAL:DONE", "action": "END"}]}
        }}}
    })
    .to_string();
    let path = std::path::Path::new("bench.json");
    let wf = manifest::parse(path, &text).unwrap();
    assert!(manifest::check(path, &wf, &["noop", "actions-core"]).is_empty());
    wf
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

fn run(tokio: &tokio::runtime::Runtime, wf: &manifest::Workflow, steps: u64) -> Duration {
    let mut options = RunOptions::new("bench");
    options.max_steps = steps + 1;
    let t = Instant::now();
    let report = tokio
        .block_on(engine::run(
            wf,
            &Noop { steps },
            &Core,
            &options,
            &mut wfhost_core::run::event::DiscardLog::default(),
        ))
        .expect("the discarding log never fails");
    let elapsed = t.elapsed();
    assert_eq!(report.status, RunStatus::Succeeded);
    assert_eq!(report.steps, steps);
    elapsed
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("run with `cargo bench -p wfhost-core` to measure");
        return;
    }
    let tokio = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let wf = workflow();
    run(&tokio, &wf, 1_000); // warm up
    let mut per_block: Vec<Duration> = (0..7).map(|_| run(&tokio, &wf, 10_000) / 10_000).collect();
    per_block.sort();
    println!("| benchmark | result |");
    println!("|---|---|");
    println!(
        "| engine overhead per block (merge, five-layer context and prompt, validation of a small schema, transition, action; in-process no-op worker) | median {:.1} µs |",
        per_block[per_block.len() / 2].as_secs_f64() * 1e6
    );
    for steps in [10_000u64, 100_000] {
        let d = run(&tokio, &wf, steps);
        println!(
            "| {steps}-step run | {:.0} ms, peak RSS {} MiB |",
            d.as_secs_f64() * 1000.0,
            peak_rss_kib() / 1024
        );
    }
}
