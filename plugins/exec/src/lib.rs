//! `exec`: runs the block's exec block (seed 003) through the host's `exec`
//! capability, which the workflow must grant:
//! `"plugins": {"exec": {"grants": ["exec"]}}`.
//!
//! Config ([`wfhost_exec_config::ExecConfig`], shared with the core and
//! the job queue):
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

use wfhost_exec_config::{EnvValue, ExecConfig, Executor};
use wfhost_sdk::exec;
use wfhost_sdk::prelude::*;

/// The WIT `env` of a config env value (a secret travels as a reference
/// the host resolves).
fn to_sdk(value: &EnvValue) -> wfhost_sdk::env::EnvValue {
    match value {
        EnvValue::Plain(v) => wfhost_sdk::env::EnvValue::Plain(v.clone()),
        EnvValue::Secret { secret } => wfhost_sdk::env::EnvValue::Secret {
            secret: secret.clone(),
        },
    }
}

fn to_block(config: ExecConfig) -> exec::ExecBlock {
    exec::ExecBlock {
        commands: config
            .commands
            .iter()
            .map(|c| {
                let env: Vec<(String, wfhost_sdk::env::EnvValue)> =
                    c.env.iter().map(|(k, v)| (k.clone(), to_sdk(v))).collect();
                exec::Command {
                    argv: c.argv.clone(),
                    cwd: c.cwd.clone(),
                    env: wfhost_sdk::env::to_wire(
                        &config.env_passthrough,
                        env.iter().map(|(k, v)| (k, v)),
                    ),
                }
            })
            .collect(),
        allow_shell: config.allow_shell,
        executor: config.executor.map(|executor| match executor {
            Executor::Local => exec::Executor::Local,
            Executor::Container(o) => exec::Executor::Container(exec::ContainerOptions {
                image: o.image,
                cpus: o.cpus,
                memory_mb: o.memory_mb,
            }),
            Executor::Slurm(o) => exec::Executor::Slurm(exec::SlurmOptions {
                partition: o.partition,
                time_limit: o.time_limit,
                cpus_per_task: o.cpus_per_task,
                mem_mb: o.mem_mb,
                extra_args: o.extra_args,
            }),
        }),
    }
}

/// The block's config, refused with where and what is wrong.
fn config_of(ctx: &BlockContext) -> Result<ExecConfig, PluginError> {
    let value: serde_json::Value = ctx.config()?;
    ExecConfig::from_value(&value).map_err(|e| PluginError::new("bad-config", e.to_string()))
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
        let config = config_of(&ctx)?;
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
        let config = ExecConfig::from_value(&serde_json::json!({
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
        let refs = ExecConfig::from_value(&serde_json::json!({
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
        let unset =
            ExecConfig::from_value(&serde_json::json!({"commands": [{"argv": ["true"]}]})).unwrap();
        assert!(
            to_block(unset).executor.is_none(),
            "unset leaves the choice to the run"
        );
        let bad = Exec::run(
            BlockContext::for_test("b", serde_json::json!({"commands": [], "shell": true})),
            Payload::default(),
        )
        .unwrap_err();
        assert_eq!(bad.code, "bad-config");
        assert_eq!(
            bad.message,
            "block config at /shell: unknown field `shell`, expected one of `commands`, `allow_shell`, `env_passthrough`, `executor`"
        );
    }
}
