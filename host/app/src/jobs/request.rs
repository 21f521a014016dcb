//! What a job carries to an agent and what comes back: a block execution
//! (the engine's [`BlockRequest`]) with everything an agent needs to load
//! the run's pinned workflow and plugins, and the block's result.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use wfhost_core::policy::exec::config::{ExecConfig, Executor};
use wfhost_core::run::engine::{BlockFailure, BlockRequest, BlockResult, LaneKey, Telemetry};
use wfhost_core::run::payload::{BlockContext, ExecutionPayload, WorkerOutput};

/// The version of [`JobRequest`] this wfhost writes and reads (2: the
/// run's definition is no longer in every job; agents fetch it by hash).
pub const JOB_FORMAT: u32 = 2;

/// Where a workspace keeps its identity: agents compare it with the one
/// the job names, so a job never runs in another directory that happens
/// to have the same path.
pub const WORKSPACE_ID_FILE: &str = ".output/workspace-id";

/// A block execution handed to an agent.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobRequest {
    pub format: u32,
    pub run_id: String,
    pub branch: u32,
    /// The run's pinned definition, by hash: the agent fetches it once
    /// (`GET /v1/definitions/{hash}`) and checks it against the hash.
    pub workflow_hash: String,
    /// The manifest file the run was started from (plugin paths are
    /// relative to it).
    pub manifest: String,
    pub workspace: String,
    /// The content of the workspace's identity file.
    pub workspace_id: String,
    /// The run's default executor (`local`, `container:IMAGE`,
    /// `slurm[:PARTITION]`).
    pub executor: String,
    /// Plugin name → `sha256:<hex>` the run started with.
    pub plugins: BTreeMap<String, String>,
    pub worker: String,
    pub context: BlockContext,
    pub payload: ExecutionPayload,
    pub timeout_ms: Option<u64>,
    pub lane: Option<LaneKey>,
    /// The run's session folder (`.agents-work/<session>`), when it keeps
    /// one: the block's agents get it as `SESSION_DIR`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_folder: Option<String>,
    /// The W3C trace context of the block's span, when the run exports
    /// traces: the agent's `job` span goes under it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

impl JobRequest {
    /// The step and lane telemetry of this job is attributed to (a lane's
    /// is its parallel block's step), as the run's own hub would.
    pub fn telemetry_step_and_lane(&self) -> (u64, Option<&str>) {
        match &self.lane {
            Some(k) => (k.step, Some(k.lane.as_str())),
            None => (self.context.step_index, None),
        }
    }

    /// The engine's request this job stands for.
    pub fn block_request(&self) -> BlockRequest {
        BlockRequest {
            worker: self.worker.clone(),
            context: self.context.clone(),
            payload: self.payload.clone(),
            timeout: self.timeout_ms.map(Duration::from_millis),
            lane: self.lane.clone(),
        }
    }
}

/// A job's result: the worker's output or why the block failed, and the
/// lines it logged.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<WorkerOutput>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The failure is one no retry mends (the worker's `bad-config`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failure_permanent: bool,
    #[serde(default)]
    pub log: Vec<String>,
    /// What the block's agents sent their `TELEMETRY_URL`, oldest first
    /// (bodies only: the run attributes them to the job's block).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub telemetry: Vec<serde_json::Value>,
    /// Telemetry events left out to keep the result under
    /// [`MAX_JOB_TELEMETRY_BYTES`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub telemetry_dropped: usize,
}

/// The most bytes of telemetry one job's result carries.
pub const MAX_JOB_TELEMETRY_BYTES: usize = 256 << 10;

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl JobResult {
    pub fn of(result: BlockResult) -> JobResult {
        let (output, failure, failure_permanent) = match result.outcome {
            Ok(output) => (Some(output), None, false),
            Err(failure) => (None, Some(failure.message), failure.permanent),
        };
        JobResult {
            output,
            failure,
            failure_permanent,
            log: result.log,
            telemetry: Vec::new(),
            telemetry_dropped: 0,
        }
    }

    pub fn failed(message: impl Into<String>) -> JobResult {
        JobResult::of(BlockResult {
            outcome: Err(BlockFailure::new(message.into())),
            log: Vec::new(),
        })
    }

    /// Carry `bodies`, oldest first, as many as fit in
    /// [`MAX_JOB_TELEMETRY_BYTES`]; the rest are counted as dropped.
    pub fn with_telemetry(mut self, bodies: Vec<serde_json::Value>) -> JobResult {
        let mut room = MAX_JOB_TELEMETRY_BYTES;
        for body in bodies {
            let size = body.to_string().len();
            if size <= room && self.telemetry_dropped == 0 {
                room -= size;
                self.telemetry.push(body);
            } else {
                self.telemetry_dropped += 1;
            }
        }
        self
    }

    /// The telemetry to record for the block `request` stands for,
    /// attributed by the job (never by what the agent says): objects only,
    /// at most as many as one block may send.
    pub fn telemetry_of(&self, request: &JobRequest) -> Vec<Telemetry> {
        let (step, lane) = request.telemetry_step_and_lane();
        self.telemetry
            .iter()
            .filter(|body| body.is_object())
            .take(wfhost_runtime::telemetry::MAX_EVENTS_PER_BLOCK)
            .map(|body| Telemetry {
                step,
                node: request.context.node_id.clone(),
                block: request.context.block_id.clone(),
                lane: lane.map(str::to_string),
                body: body.clone(),
            })
            .collect()
    }

    pub fn into_block_result(self) -> BlockResult {
        let outcome = match (self.output, self.failure) {
            (Some(output), None) => Ok(output),
            (_, Some(message)) => Err(BlockFailure {
                message,
                permanent: self.failure_permanent,
            }),
            (None, None) => Err(BlockFailure::new(
                "the agent reported neither an output nor a failure",
            )),
        };
        BlockResult {
            outcome,
            log: self.log,
        }
        .checked()
    }
}

/// What an agent must be able to do to run `worker` with `config`: every
/// job needs `wasm`; the `exec` worker needs the capability of its
/// executor, the `agent` worker host processes.
pub fn requirements(
    worker: &str,
    config: &serde_json::Value,
    default_executor: &str,
) -> Vec<String> {
    let mut needs = vec!["wasm".to_string()];
    let capability = match worker {
        // The block's executor as the plugin reads it, else the run's
        // default (`local`, `container:IMAGE`, `slurm[:PARTITION]`).
        "exec" => match config.get("executor").map(Executor::from_value) {
            Some(Ok(executor)) => executor.capability(),
            _ => match default_executor.split(':').next().unwrap_or("local") {
                "container" => "container",
                "slurm" => "slurm",
                _ => "exec",
            },
        },
        "agent" => "exec",
        _ => return needs,
    };
    needs.push(capability.to_string());
    needs
}

/// The exec safety policy for an `exec` block, checked before its job is
/// created (the agent's runtime checks it again before each command). The
/// config is read as the plugin reads it ([`ExecConfig`]); one the plugin
/// cannot read fails in the plugin, with its message.
pub fn exec_policy(worker: &str, config: &serde_json::Value) -> Result<(), String> {
    if worker != "exec" {
        return Ok(());
    }
    let Ok(config) = ExecConfig::from_value(config) else {
        return Ok(());
    };
    let spec = wfhost_core::policy::exec::ExecSpec::of_config(&config);
    wfhost_core::policy::exec::check(&spec).map_err(|v| {
        format!("the exec safety policy refused the block before a job was created: {v}")
    })
}

/// The workspace's identity, made on first use.
pub fn ensure_workspace_id(workspace: &Path) -> Result<String, String> {
    if let Some(id) = read_workspace_id(workspace)? {
        return Ok(id);
    }
    let id = wfhost_core::random::token()
        .map_err(|e| format!("cannot make a workspace identity: {e}"))?;
    wfhost_core::workspace::write_file(workspace, WORKSPACE_ID_FILE, id.as_bytes(), true).map_err(
        |e| {
            format!(
                "cannot write the workspace identity {}/{WORKSPACE_ID_FILE}: {e}",
                workspace.display()
            )
        },
    )?;
    Ok(id)
}

/// The workspace's identity, if it has one.
pub fn read_workspace_id(workspace: &Path) -> Result<Option<String>, String> {
    match wfhost_core::workspace::read_file(workspace, WORKSPACE_ID_FILE, 256) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).trim().to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!(
            "cannot read the workspace identity {}/{WORKSPACE_ID_FILE}: {e}",
            workspace.display()
        )),
    }
}

/// A job of an `agent` block (in `lane` if given), for tests.
#[cfg(test)]
pub(crate) fn job_in_lane(lane: Option<&str>) -> JobRequest {
    use serde_json::json;
    let context = json!({
        "workflow_id": "w", "execution_id": "r", "node_id": "dev", "block_id": "impl",
        "step_index": 7, "attempt": 1, "previous_block_id": null,
        "static_memory": {}, "inherited_memory": {}, "artifacts": {}, "config": {},
        "inputs": {}, "file_restrictions": null, "system_prompt": "", "assembled_context": ""
    });
    let lane =
        lane.map(|l| json!({"run_id": "r", "step": 5, "node": "dev", "block": "impl", "lane": l}));
    serde_json::from_value(json!({
        "format": JOB_FORMAT, "run_id": "r", "branch": 1, "workflow_hash": "h",
        "manifest": "/m.json", "workspace": "/ws", "workspace_id": "id",
        "executor": "", "plugins": {}, "worker": "agent", "context": context,
        "payload": [], "timeout_ms": null, "lane": lane
    }))
    .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn telemetry_travels_within_its_budget_and_is_attributed_by_the_job() {
        let big = json!({"pad": "x".repeat(100 << 10)});
        let result = JobResult::failed("f").with_telemetry(vec![
            json!({"n": 1}),
            big.clone(),
            big.clone(),
            big,
            json!({"n": 5}),
        ]);
        // Oldest first, and nothing after the first one left out (the
        // log's order is kept).
        assert_eq!(result.telemetry.len(), 3);
        assert_eq!(result.telemetry_dropped, 2);
        let size: usize = result.telemetry.iter().map(|t| t.to_string().len()).sum();
        assert!(size <= MAX_JOB_TELEMETRY_BYTES);

        // What a hostile agent puts in a result: only objects are
        // recorded, at most a block's worth, named after the job.
        let mut sent = vec![json!(1), json!("s"), json!({"node": "forged"})];
        sent.extend(std::iter::repeat_n(json!({}), 2_000));
        let result = JobResult {
            telemetry: sent,
            ..JobResult::failed("f")
        };
        let recorded = result.telemetry_of(&job_in_lane(None));
        assert_eq!(
            recorded.len(),
            wfhost_runtime::telemetry::MAX_EVENTS_PER_BLOCK
        );
        assert_eq!(
            (
                recorded[0].step,
                recorded[0].node.as_str(),
                recorded[0].block.as_str()
            ),
            (7, "dev", "impl")
        );
        assert_eq!(recorded[0].body["node"], "forged");
        let in_lane = result.telemetry_of(&job_in_lane(Some("b")));
        assert_eq!(
            (in_lane[0].step, in_lane[0].lane.as_deref()),
            (5, Some("b"))
        );
    }

    #[test]
    fn requirements_follow_the_worker_and_its_executor() {
        let none = json!({});
        assert_eq!(requirements("echo", &none, ""), ["wasm"]);
        assert_eq!(requirements("exec", &none, ""), ["wasm", "exec"]);
        assert_eq!(
            requirements("exec", &none, "slurm:debug"),
            ["wasm", "slurm"]
        );
        let docker = json!({"executor": {"container": {"image": "x"}}});
        assert_eq!(
            requirements("exec", &docker, "slurm"),
            ["wasm", "container"]
        );
        assert_eq!(requirements("agent", &none, "slurm"), ["wasm", "exec"]);
    }

    #[test]
    fn the_policy_refuses_a_shell_before_a_job_exists() {
        let shell = json!({"commands": [{"argv": ["sh", "-c", "true"]}]});
        assert!(
            exec_policy("exec", &shell)
                .unwrap_err()
                .contains("before a job was created")
        );
        let allowed = json!({"commands": [{"argv": ["sh", "-c", "true"]}], "allow_shell": true});
        assert!(exec_policy("exec", &allowed).is_ok());
        assert!(exec_policy("echo", &shell).is_ok());
        // A secret in the env no longer hides the block from the policy.
        let secret_shell = json!({"commands": [{"argv": ["sh", "-c", "true"],
                                                "env": {"TOKEN": {"secret": "TOKEN"}}}]});
        assert!(exec_policy("exec", &secret_shell).is_err());
    }

    /// The job queue, the plugin and the core read one config type: what
    /// the stage-graph form writes is what the queue checks, and a config
    /// the plugin refuses (with where) is left to the plugin here.
    #[test]
    fn the_queue_reads_exec_configs_as_the_plugin_does() {
        let accepted = json!({"commands": [{"argv": ["make"], "env": {"K": {"secret": "K"}}}],
                              "executor": {"container": {"image": "x"}}});
        let config = ExecConfig::from_value(&accepted).unwrap();
        assert_eq!(
            serde_json::to_value(&config).unwrap()["executor"],
            accepted["executor"]
        );
        assert!(exec_policy("exec", &accepted).is_ok());
        assert_eq!(
            requirements("exec", &accepted, "slurm"),
            ["wasm", "container"]
        );
        let refused = json!({"commands": [{"argv": ["make"], "shell": true}]});
        let e = ExecConfig::from_value(&refused).unwrap_err();
        assert_eq!(e.pointer, "/commands/0/shell");
        assert!(
            exec_policy("exec", &refused).is_ok(),
            "the plugin refuses it, with {e}"
        );
        // An executor the plugin cannot read needs the run's default.
        let bad_executor = json!({"executor": "container:x"});
        assert_eq!(
            requirements("exec", &bad_executor, "slurm"),
            ["wasm", "slurm"]
        );
    }

    #[test]
    fn a_result_goes_back_to_the_engine_as_it_was() {
        let ok = JobResult::of(BlockResult {
            outcome: Ok(WorkerOutput {
                signal: "SIGNAL:SUCCESS".into(),
                ..Default::default()
            }),
            log: vec!["hi".into()],
        });
        let text = serde_json::to_string(&ok).unwrap();
        let back: JobResult = serde_json::from_str(&text).unwrap();
        let result = back.into_block_result();
        assert_eq!(result.outcome.unwrap().signal, "SIGNAL:SUCCESS");
        assert_eq!(result.log, ["hi"]);
        // A signal no worker may send is refused here too.
        let bad = JobResult {
            output: Some(WorkerOutput {
                signal: "x\u{7}".into(),
                ..Default::default()
            }),
            failure: None,
            failure_permanent: false,
            log: vec![],
            telemetry: vec![],
            telemetry_dropped: 0,
        };
        assert!(bad.into_block_result().outcome.is_err());
    }
}
