//! `exec`: runs the block's exec block (seed 003) through the host's `exec`
//! capability, which the workflow must grant:
//! `"plugins": {"exec": {"grants": ["exec"]}}`.
//!
//! Config:
//! - `commands` (required): `[{"argv": [...], "cwd": "sub/dir", "env": {"K": "V"}}]`,
//!   run in order; the first failure stops the block. An `env` value may
//!   be `{"secret": "NAME"}`: resolved by the host when the command
//!   starts, masked in its output.
//! - `env_passthrough`: names of variables of wfhost's own environment
//!   every command gets (beyond the host's documented base).
//! - `allow_shell` (default false): allow `sh`, `bash`, … as programs.
//! - `executor`: `"local"`, `{"container": {"image": …}}` or
//!   `{"slurm": {"partition": …}}`; unset, the run's default executor
//!   (`wfhost run --executor`, else local).
//!
//! Signals: `SIGNAL:SUCCESS` when every command exits 0,
//! `SIGNAL:EXEC_TIMEOUT` when the block's timeout killed a command,
//! `SIGNAL:EXEC_FAILED` when one exited non-zero. A block the safety policy
//! refuses, or a command that cannot start (not found), fails the block with
//! the host's message. The payload gets an `EXEC_RESULT` segment; the
//! structured output is a JSON summary with the bundle's path.

use std::collections::BTreeMap;

use serde::Deserialize;
use wfhost_sdk::env::EnvValue;
use wfhost_sdk::exec;
use wfhost_sdk::prelude::*;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Command {
    argv: Vec<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, EnvValue>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum Executor {
    Local,
    Container {
        image: String,
        #[serde(default)]
        cpus: Option<f64>,
        #[serde(default)]
        memory_mb: Option<u64>,
    },
    Slurm {
        #[serde(default)]
        partition: Option<String>,
        #[serde(default)]
        time_limit: Option<String>,
        #[serde(default)]
        cpus_per_task: Option<u32>,
        #[serde(default)]
        mem_mb: Option<u64>,
        #[serde(default)]
        extra_args: Vec<String>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    commands: Vec<Command>,
    #[serde(default)]
    allow_shell: bool,
    #[serde(default)]
    env_passthrough: Vec<String>,
    #[serde(default)]
    executor: Option<Executor>,
}

fn to_block(config: Config) -> exec::ExecBlock {
    exec::ExecBlock {
        commands: config
            .commands
            .iter()
            .map(|c| exec::Command {
                argv: c.argv.clone(),
                cwd: c.cwd.clone(),
                env: wfhost_sdk::env::to_wire(&config.env_passthrough, &c.env),
            })
            .collect(),
        allow_shell: config.allow_shell,
        executor: config.executor.map(|executor| match executor {
            Executor::Local => exec::Executor::Local,
            Executor::Container {
                image,
                cpus,
                memory_mb,
            } => exec::Executor::Container(exec::ContainerOptions {
                image,
                cpus,
                memory_mb,
            }),
            Executor::Slurm {
                partition,
                time_limit,
                cpus_per_task,
                mem_mb,
                extra_args,
            } => exec::Executor::Slurm(exec::SlurmOptions {
                partition,
                time_limit,
                cpus_per_task,
                mem_mb,
                extra_args,
            }),
        }),
    }
}

/// The signal for a finished exec block.
fn signal_of(result: &exec::ExecResult) -> &'static str {
    if result.succeeded {
        "SIGNAL:SUCCESS"
    } else if result.commands.iter().any(|c| c.timed_out) {
        "SIGNAL:EXEC_TIMEOUT"
    } else {
        "SIGNAL:EXEC_FAILED"
    }
}

fn summary(result: &exec::ExecResult) -> String {
    let commands: Vec<serde_json::Value> = result
        .commands
        .iter()
        .map(|c| {
            serde_json::json!({
                "argv": c.argv,
                "exit_code": c.exit_code,
                "timed_out": c.timed_out,
                "stdout": format!("{}/{}", result.bundle_dir, c.stdout_path),
                "stderr": format!("{}/{}", result.bundle_dir, c.stderr_path),
            })
        })
        .collect();
    serde_json::json!({
        "bundle": result.bundle_dir,
        "executor": result.executor,
        "succeeded": result.succeeded,
        "commands": commands,
    })
    .to_string()
}

pub struct Exec;

impl Worker for Exec {
    fn run(ctx: BlockContext, mut payload: Payload) -> Result<WorkerOutput, PluginError> {
        let config: Config = ctx.config()?;
        let result = exec::run(&to_block(config)).map_err(|e| match e {
            exec::ExecError::Refused(m) => PluginError::new("refused", m),
            exec::ExecError::Invalid(m) => PluginError::new("invalid", m),
            exec::ExecError::Unavailable(m) => PluginError::new("unavailable", m),
            exec::ExecError::Failed(m) => PluginError::new("failed", m),
        })?;
        if let Some(error) = result.commands.iter().find_map(|c| c.error.clone()) {
            return Err(PluginError::new(
                "command-failed",
                format!("{error} (bundle {})", result.bundle_dir),
            ));
        }
        let ran = match result.commands.len() {
            1 => "1 command".to_string(),
            n => format!("{n} commands"),
        };
        log::info(format!("{ran}, bundle {}", result.bundle_dir));
        let text = match result.commands.iter().find(|c| c.exit_code != Some(0)) {
            None => format!("exec: {ran} succeeded; bundle {}", result.bundle_dir),
            Some(c) if c.timed_out => format!(
                "exec: `{}` timed out; bundle {}",
                c.argv.join(" "),
                result.bundle_dir
            ),
            Some(c) => format!(
                "exec: `{}` exited with {}; see {}/{}",
                c.argv.join(" "),
                c.exit_code
                    .map_or("a signal".to_string(), |code| code.to_string()),
                result.bundle_dir,
                c.stderr_path
            ),
        };
        payload.push(segment("EXEC_RESULT", text));
        Ok(WorkerOutput::new(payload, signal_of(&result)).with_structured_output(summary(&result)))
    }
}

export_worker!(Exec);
wfhost_sdk::declare_signals![
    "SIGNAL:SUCCESS",
    "SIGNAL:EXEC_FAILED",
    "SIGNAL:EXEC_TIMEOUT"
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_maps_to_the_wit_block() {
        let config: Config = serde_json::from_value(serde_json::json!({
            "commands": [{"argv": ["cargo", "test"], "cwd": "app", "env": {"RUST_LOG": "info"}}],
            "executor": {"slurm": {"partition": "debug", "cpus_per_task": 2}}
        }))
        .unwrap();
        let block = to_block(config);
        assert_eq!(block.commands[0].argv, ["cargo", "test"]);
        assert_eq!(
            block.commands[0].env,
            [("RUST_LOG".to_string(), "info".to_string())]
        );
        let refs: Config = serde_json::from_value(serde_json::json!({
            "commands": [{"argv": ["env"], "env": {"TOKEN": {"secret": "TOKEN"}}}],
            "env_passthrough": ["MY_VAR"]
        }))
        .unwrap();
        assert_eq!(
            to_block(refs).commands[0].env,
            [
                ("MY_VAR".to_string(), "\0env:MY_VAR".to_string()),
                ("TOKEN".to_string(), "\0secret:TOKEN".to_string())
            ]
        );
        assert!(
            matches!(block.executor, Some(exec::Executor::Slurm(ref o)) if o.partition.as_deref() == Some("debug"))
        );
        let unset: Config =
            serde_json::from_value(serde_json::json!({"commands": [{"argv": ["true"]}]})).unwrap();
        assert!(
            to_block(unset).executor.is_none(),
            "unset leaves the choice to the run"
        );
        let bad =
            serde_json::from_value::<Config>(serde_json::json!({"commands": [], "shell": true}));
        assert!(bad.is_err());
    }
}
