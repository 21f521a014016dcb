//! The Node/Block execution loop (seed 004):
//! assemble context → execute block → look up transition → execute action.
//!
//! The loop knows nothing about how blocks run. It talks to a
//! [`WorkerHost`] (which executes a block with a named worker plugin) and an
//! [`ActionInterpreter`] (which turns an action string into an
//! [`EngineCommand`]); the wasmtime adapter implements both, tests use fakes.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use crate::command::{BlockRef, EngineCommand};
use crate::context::{AssembledContext, Metadata};
use crate::manifest::{Block, Node, Workflow};
use crate::payload::{BlockContext, ContextSegment, ExecutionPayload, Statistics, WorkerOutput};
use crate::transitions::{self, Resolution};
use crate::validation::OutputSchema;

/// A request to execute one block.
#[derive(Debug, Clone)]
pub struct BlockRequest {
    /// The worker plugin's name.
    pub worker: String,
    pub context: BlockContext,
    pub payload: ExecutionPayload,
    pub timeout: Option<Duration>,
}

/// Why a block produced no output: the worker trapped, returned an error,
/// timed out, hit a limit, or could not be started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockFailure {
    pub message: String,
}

/// The result of executing one block, with the lines it logged.
#[derive(Debug, Clone)]
pub struct BlockResult {
    pub outcome: Result<WorkerOutput, BlockFailure>,
    pub log: Vec<String>,
}

/// Executes blocks. Implemented by the wasm runtime adapter.
pub trait WorkerHost {
    fn run_block(&self, request: BlockRequest) -> impl Future<Output = BlockResult> + Send;
}

/// A read-only view of the run for action handlers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunView {
    pub workflow_id: String,
    pub execution_id: String,
    pub node_id: String,
    pub block_id: String,
    pub signal: String,
    pub step_index: u64,
    /// Return addresses, innermost last, as `node.block`.
    pub return_stack: Vec<String>,
}

/// Interprets transition actions. `handler` names the plugin to use.
pub trait ActionInterpreter {
    fn interpret(
        &self,
        handler: &str,
        action: &str,
        view: &RunView,
    ) -> impl Future<Output = Result<EngineCommand, String>> + Send;
}

/// Things that happen during a run, in order.
#[derive(Debug, Clone, Copy)]
pub enum RunEvent<'a> {
    BlockStarted {
        step: u64,
        node: &'a str,
        block: &'a str,
    },
    BlockFinished {
        step: u64,
        node: &'a str,
        block: &'a str,
        signal: &'a str,
        duration: Duration,
        statistics: Statistics,
        failure: Option<&'a str>,
        log: &'a [String],
    },
    ActionTaken {
        step: u64,
        action: &'a str,
        command: &'a EngineCommand,
    },
}

/// Receives [`RunEvent`]s.
pub trait RunObserver: Send {
    fn on_event(&mut self, event: RunEvent<'_>);
}

impl<F: FnMut(RunEvent<'_>) + Send> RunObserver for F {
    fn on_event(&mut self, event: RunEvent<'_>) {
        self(event)
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunStatus {
    Succeeded,
    Failed {
        reason: String,
    },
    /// Paused at a human gate.
    WaitingAtGate {
        node: String,
        block: String,
        prompt: String,
    },
}

/// What one block did over a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct BlockStatistics {
    /// How many times the block ran.
    pub attempts: u32,
    pub tokens_used: u64,
    pub lines_written: u64,
    /// Total wall-clock time of its executions, in milliseconds when
    /// serialized.
    #[serde(rename = "duration_ms", serialize_with = "as_millis")]
    pub duration: Duration,
    /// Executions whose worker failed.
    pub failures: u32,
}

fn as_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_secs_f64() * 1e6).round() / 1e3)
}

/// The outcome of a run.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub status: RunStatus,
    /// Blocks executed.
    pub steps: u64,
    pub statistics: Statistics,
    /// Per block, keyed `node.block`; bounded by the workflow's size, not
    /// by the number of steps.
    pub blocks: std::collections::BTreeMap<String, BlockStatistics>,
    pub payload: ExecutionPayload,
    pub duration: Duration,
}

/// Limits and identity of a run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub execution_id: String,
    /// A run that executes more blocks than this fails (JUMP cycles).
    pub max_steps: u64,
    /// Nested CALL depth limit.
    pub max_call_depth: usize,
}

impl RunOptions {
    pub fn new(execution_id: impl Into<String>) -> Self {
        RunOptions {
            execution_id: execution_id.into(),
            max_steps: 10_000,
            max_call_depth: 64,
        }
    }
}

/// A return address on the ReturnStack.
#[derive(Debug, Clone)]
struct Frame {
    node: String,
    block: String,
    /// The caller's payload, kept aside while an isolated node runs.
    saved_payload: Option<ExecutionPayload>,
    /// The caller's artifacts, likewise.
    saved_artifacts: Option<BTreeMap<String, String>>,
}

struct Cursor {
    node: String,
    block: String,
}

fn fail(reason: String) -> RunStatus {
    RunStatus::Failed { reason }
}

/// Execute `workflow` from its start node until it ends, fails or waits.
pub async fn run<W: WorkerHost, A: ActionInterpreter>(
    workflow: &Workflow,
    workers: &W,
    actions: &A,
    options: &RunOptions,
    observer: &mut dyn RunObserver,
) -> RunReport {
    let started = Instant::now();
    let mut statistics = Statistics::default();
    let mut blocks: std::collections::BTreeMap<String, BlockStatistics> = Default::default();
    let mut payload: ExecutionPayload = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut previous: Option<String> = None;
    let mut steps = 0u64;
    let mut attempts: std::collections::HashMap<(String, String), u32> =
        std::collections::HashMap::new();
    let mut schemas: std::collections::HashMap<(String, String), OutputSchema> =
        std::collections::HashMap::new();
    let mut artifacts: BTreeMap<String, String> = BTreeMap::new();

    let Some(start) = workflow.nodes.get(&workflow.start_node) else {
        return RunReport {
            status: fail(format!(
                "start node `{}` does not exist",
                workflow.start_node
            )),
            steps,
            statistics,
            blocks,
            payload,
            duration: started.elapsed(),
        };
    };
    let mut at = Cursor {
        node: workflow.start_node.clone(),
        block: start.entry_block.clone(),
    };

    let status = loop {
        let Some((node, block)) = lookup(workflow, &at.node, &at.block) else {
            break fail(format!("block `{}.{}` does not exist", at.node, at.block));
        };
        if steps >= options.max_steps {
            break fail(format!(
                "step limit of {} reached at block `{}.{}`: the workflow probably loops",
                options.max_steps, at.node, at.block
            ));
        }
        let attempt = attempts
            .entry((at.node.clone(), at.block.clone()))
            .or_insert(0);
        *attempt += 1;
        if let Some(max) = block.max_attempts
            && *attempt > max
        {
            break fail(format!(
                "block `{}.{}` would run a {} time, over its max_attempts of {max}",
                at.node,
                at.block,
                ordinal(*attempt)
            ));
        }
        let step = steps;
        steps += 1;

        // Step A: assemble the block's context (the five layers).
        let strategy = match crate::merge::parse_all(&block.payload_merge_strategy) {
            Ok(s) => s,
            Err((_, e)) => break fail(format!("block `{}.{}`: {e}", at.node, at.block)),
        };
        let block_payload = crate::merge::apply(
            &strategy,
            &payload,
            &node.static_memory,
            &block.config,
            step,
        );
        let assembled = AssembledContext {
            payload: block_payload,
            system_prompt: system_prompt(workflow, block),
            config: block.config.clone(),
            inherited: inherited_memory(workflow, &at.node, &stack),
            artifacts: artifacts.clone(),
            metadata: Metadata {
                workflow_id: workflow.id.clone(),
                execution_id: options.execution_id.clone(),
                node_id: at.node.clone(),
                block_id: at.block.clone(),
                step_index: step,
                attempt: *attempts
                    .get(&(at.node.clone(), at.block.clone()))
                    .unwrap_or(&1),
                previous_block_id: previous.clone(),
            },
        };
        let assembled_context = assembled.render();
        let context = BlockContext {
            workflow_id: workflow.id.clone(),
            execution_id: options.execution_id.clone(),
            node_id: at.node.clone(),
            block_id: at.block.clone(),
            step_index: step,
            attempt: assembled.metadata.attempt,
            previous_block_id: previous.clone(),
            static_memory: serde_json::Value::Object(node.static_memory.clone()),
            inherited_memory: serde_json::Value::Object(assembled.inherited),
            artifacts: assembled.artifacts,
            config: assembled.config,
            file_restrictions: block.file_restrictions.clone(),
            system_prompt: assembled.system_prompt,
            assembled_context,
        };
        let block_payload = assembled.payload;

        // Step B: execute the block.
        observer.on_event(RunEvent::BlockStarted {
            step,
            node: &at.node,
            block: &at.block,
        });
        let block_started = Instant::now();
        let result = workers
            .run_block(BlockRequest {
                worker: block.worker.clone(),
                context,
                payload: block_payload,
                timeout: block.timeout,
            })
            .await;
        let duration = block_started.elapsed();
        let (signal, failure, block_stats) = match result.outcome {
            Ok(output) => {
                let mut signal = output.signal;
                let raw_structured = output.structured_output.clone();
                let raw = output
                    .structured_output
                    .or_else(|| output.payload.last().map(|s| s.content.clone()));
                payload = output.payload;
                // Step C: validate and clean the output.
                if let Some(schema) = &block.validation_schema {
                    let key = (at.node.clone(), at.block.clone());
                    if !schemas.contains_key(&key) {
                        match OutputSchema::compile(schema) {
                            Ok(compiled) => {
                                schemas.insert(key.clone(), compiled);
                            }
                            Err(e) => {
                                break fail(format!("block `{}.{}`: {e}", at.node, at.block));
                            }
                        }
                    }
                    let checked = match raw.as_deref() {
                        None => Err("the worker returned no output to validate".to_string()),
                        Some(text) => schemas[&key].check(text).map_err(|e| e.to_string()),
                    };
                    match checked {
                        Ok(clean) => {
                            artifacts
                                .insert(format!("{}.{}", at.node, at.block), clean.to_string());
                            payload.push(ContextSegment::new(
                                format!("validated-{step}"),
                                "VALIDATED_OUTPUT",
                                clean.to_string(),
                            ))
                        }
                        Err(reason) => {
                            signal = transitions::VALIDATION_FAIL.to_string();
                            payload.push(ContextSegment::new(
                                format!("validation-error-{step}"),
                                "VALIDATION_ERROR",
                                format!(
                                    "output of `{}.{}` failed validation: {reason}",
                                    at.node, at.block
                                ),
                            ));
                        }
                    }
                } else if let Some(raw) = raw_structured {
                    artifacts.insert(format!("{}.{}", at.node, at.block), raw);
                }
                (signal, None, output.statistics)
            }
            Err(failure) => {
                payload.push(ContextSegment::new(
                    format!("worker-error-{step}"),
                    "WORKER_ERROR",
                    failure.message.clone(),
                ));
                (
                    transitions::WORKER_ERROR.to_string(),
                    Some(failure.message),
                    Statistics::default(),
                )
            }
        };
        statistics.add(block_stats);
        let per_block = blocks
            .entry(format!("{}.{}", at.node, at.block))
            .or_default();
        per_block.attempts += 1;
        per_block.tokens_used += block_stats.tokens_used;
        per_block.lines_written += block_stats.lines_written;
        per_block.duration += duration;
        per_block.failures += u32::from(failure.is_some());
        observer.on_event(RunEvent::BlockFinished {
            step,
            node: &at.node,
            block: &at.block,
            signal: &signal,
            duration,
            statistics: block_stats,
            failure: failure.as_deref(),
            log: &result.log,
        });
        previous = Some(format!("{}.{}", at.node, at.block));

        // Steps D and E: find the transition.
        let Some(resolution) = transitions::resolve(&block.transitions, &signal) else {
            let mut reason = format!(
                "block `{}.{}` emitted `{signal}` and has no transition for it nor for `{}`",
                at.node,
                at.block,
                transitions::FAIL_DEFAULT
            );
            if let Some(message) = failure {
                reason.push_str(&format!("; the worker failed: {message}"));
            }
            break fail(reason);
        };
        let action = match resolution {
            Resolution::Exact(t) | Resolution::Fallback(t) => t.action.as_str(),
        };

        // Step F: the ActionHandler decides, the engine executes.
        let view = RunView {
            workflow_id: workflow.id.clone(),
            execution_id: options.execution_id.clone(),
            node_id: at.node.clone(),
            block_id: at.block.clone(),
            signal: signal.clone(),
            step_index: step,
            return_stack: stack
                .iter()
                .map(|f| format!("{}.{}", f.node, f.block))
                .collect(),
        };
        let command = match actions
            .interpret(workflow.handler_for(action), action, &view)
            .await
        {
            Ok(command) => command,
            Err(message) => {
                break fail(format!(
                    "action `{action}` of block `{}.{}` could not be interpreted: {message}",
                    at.node, at.block
                ));
            }
        };
        observer.on_event(RunEvent::ActionTaken {
            step,
            action,
            command: &command,
        });

        match command {
            EngineCommand::Jump(target) => {
                let next = resolve_ref(&target, &at.node);
                if lookup(workflow, &next.node, &next.block).is_none() {
                    break fail(format!(
                        "action `{action}` of block `{}.{}` jumps to `{}.{}`, which does not exist",
                        at.node, at.block, next.node, next.block
                    ));
                }
                at = next;
            }
            EngineCommand::Call {
                node: callee,
                return_to,
            } => {
                let Some(callee_node) = workflow.nodes.get(&callee) else {
                    break fail(format!(
                        "block `{}.{}` calls node `{callee}`, which does not exist",
                        at.node, at.block
                    ));
                };
                if stack.len() >= options.max_call_depth {
                    break fail(format!(
                        "call depth limit of {} exceeded calling `{callee}` from `{}.{}`",
                        options.max_call_depth, at.node, at.block
                    ));
                }
                let back = return_to
                    .map(|r| resolve_ref(&r, &at.node))
                    .unwrap_or(Cursor {
                        node: at.node.clone(),
                        block: at.block.clone(),
                    });
                if lookup(workflow, &back.node, &back.block).is_none() {
                    break fail(format!(
                        "action `{action}` of block `{}.{}` returns to `{}.{}`, which does not exist",
                        at.node, at.block, back.node, back.block
                    ));
                }
                let (saved_payload, saved_artifacts) = if callee_node.context_inheritance {
                    (None, None)
                } else {
                    (
                        Some(std::mem::take(&mut payload)),
                        Some(std::mem::take(&mut artifacts)),
                    )
                };
                stack.push(Frame {
                    node: back.node,
                    block: back.block,
                    saved_payload,
                    saved_artifacts,
                });
                at = Cursor {
                    node: callee,
                    block: callee_node.entry_block.clone(),
                };
            }
            EngineCommand::Return => {
                let Some(frame) = stack.pop() else {
                    break fail(format!(
                        "block `{}.{}` returned with an empty return stack",
                        at.node, at.block
                    ));
                };
                if let Some(mut saved) = frame.saved_payload {
                    // An isolated subroutine hands back only what it produced.
                    saved.append(&mut payload);
                    payload = saved;
                }
                if let Some(saved) = frame.saved_artifacts {
                    artifacts = saved;
                }
                at = Cursor {
                    node: frame.node,
                    block: frame.block,
                };
            }
            EngineCommand::End => break RunStatus::Succeeded,
            EngineCommand::Fail(reason) => {
                break fail(format!("block `{}.{}`: {reason}", at.node, at.block));
            }
            EngineCommand::Gate(prompt) => {
                break RunStatus::WaitingAtGate {
                    node: at.node.clone(),
                    block: at.block.clone(),
                    prompt,
                };
            }
        }
    };

    RunReport {
        status,
        steps,
        statistics,
        blocks,
        payload,
        duration: started.elapsed(),
    }
}

/// Layer 3: the node's static memory over its callers', up to the nearest
/// isolated node.
fn inherited_memory(
    workflow: &Workflow,
    node_id: &str,
    stack: &[Frame],
) -> serde_json::Map<String, serde_json::Value> {
    let mut chain = vec![node_id];
    if workflow
        .nodes
        .get(node_id)
        .is_some_and(|n| n.context_inheritance)
    {
        for frame in stack.iter().rev() {
            // The node entered by this frame's call is isolated: stop.
            if frame.saved_payload.is_some() {
                break;
            }
            chain.push(&frame.node);
        }
    }
    crate::context::inherit(
        chain
            .iter()
            .rev()
            .filter_map(|n| workflow.nodes.get(*n).map(|n| &n.static_memory)),
    )
}

fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

fn system_prompt(workflow: &Workflow, block: &Block) -> String {
    let prompt = block.prompt.clone().unwrap_or_default();
    crate::prompt::assemble(crate::prompt::PromptParts {
        rules: workflow.rules.as_deref(),
        prefix: prompt.prefix.as_deref(),
        task: prompt.task.as_deref(),
        file_restrictions: block.file_restrictions.as_deref(),
        output_checklist: &prompt.output_checklist,
    })
}

fn lookup<'w>(workflow: &'w Workflow, node: &str, block: &str) -> Option<(&'w Node, &'w Block)> {
    let n = workflow.nodes.get(node)?;
    Some((n, n.blocks.get(block)?))
}

fn resolve_ref(target: &BlockRef, current_node: &str) -> Cursor {
    Cursor {
        node: target
            .node
            .clone()
            .unwrap_or_else(|| current_node.to_string()),
        block: target.block.clone(),
    }
}

#[cfg(test)]
mod tests;
