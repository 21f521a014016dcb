//! The `exec` worker's block config (seed 003), one type read the same way
//! by everything that reads it: the engine core (the stage-graph form
//! writes it), the `exec` plugin (a wasm guest, which runs it) and the job
//! queue (which checks the exec safety policy before a job is created).
//!
//! Tiny on purpose: it is compiled into the `exec` wasm plugin, so it
//! depends on serde only and keeps compiling for `wasm32-wasip2`.
//!
//! The config, strict about unknown fields at every level:
//! - `commands` (required): `[{"argv": [...], "cwd": "sub/dir", "env": {"K": "V"}}]`,
//!   run in order; the first failure stops the block. An `env` value may
//!   be `{"secret": "NAME"}`: resolved by the host when the command
//!   starts, masked in its output.
//! - `env_passthrough`: names of variables of wfhost's own environment
//!   every command gets (beyond the host's documented base).
//! - `allow_shell` (default false): allow `sh`, `bash`, … as programs.
//! - `executor`: `"local"`, `{"container": {"image": …}}` or
//!   `{"slurm": {"partition": …}}`; unset, the run's default executor.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// An `exec` block's config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecConfig {
    pub commands: Vec<CommandConfig>,
    /// Allow shell entry points (`sh`, `bash`, …) as programs.
    #[serde(default)]
    pub allow_shell: bool,
    /// Variables of the host's environment every command gets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_passthrough: Vec<String>,
    /// Where the commands run; unset, the run's default executor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<Executor>,
}

/// One command of an exec block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandConfig {
    /// Program and arguments; never interpreted by a shell.
    pub argv: Vec<String>,
    /// Working directory relative to the block's working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Environment overrides.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, EnvValue>,
}

/// An `env` value: a string, or a reference to a secret of the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EnvValue {
    Plain(String),
    Secret {
        /// `[A-Za-z_][A-Za-z0-9_]*`.
        secret: String,
    },
}

/// Where an exec block's commands run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum Executor {
    Local,
    Container(ContainerOptions),
    Slurm(SlurmOptions),
}

/// Container options of an executor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContainerOptions {
    pub image: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
}

/// Slurm options of an executor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus_per_task: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_mb: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_args: Vec<String>,
}

/// Why a config was refused: where (a JSON pointer into the config, `""`
/// for the whole of it) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub pointer: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pointer.is_empty() {
            write!(f, "block config: {}", self.message)
        } else {
            write!(f, "block config at {}: {}", self.pointer, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

impl ExecConfig {
    /// Read a config from its JSON value.
    pub fn from_value(value: &serde_json::Value) -> Result<ExecConfig, ConfigError> {
        serde_path_to_error::deserialize(value).map_err(config_error)
    }

    /// Read a config from JSON text.
    pub fn from_json(text: &str) -> Result<ExecConfig, ConfigError> {
        let mut de = serde_json::Deserializer::from_str(text);
        let config = serde_path_to_error::deserialize(&mut de).map_err(config_error)?;
        de.end().map_err(|e| ConfigError {
            pointer: String::new(),
            message: e.to_string(),
        })?;
        Ok(config)
    }
}

impl Executor {
    /// Read an `executor` value on its own.
    pub fn from_value(value: &serde_json::Value) -> Result<Executor, ConfigError> {
        serde_path_to_error::deserialize(value).map_err(config_error)
    }

    /// The capability an agent needs to run it: `exec`, `container` or
    /// `slurm`.
    pub fn capability(&self) -> &'static str {
        match self {
            Executor::Local => "exec",
            Executor::Container(_) => "container",
            Executor::Slurm(_) => "slurm",
        }
    }
}

fn config_error<E: fmt::Display>(e: serde_path_to_error::Error<E>) -> ConfigError {
    use serde_path_to_error::Segment;
    let mut pointer = String::new();
    for segment in e.path().iter() {
        let part = match segment {
            Segment::Seq { index } => index.to_string(),
            Segment::Map { key } => key.clone(),
            Segment::Enum { variant } => variant.clone(),
            Segment::Unknown => continue,
        };
        pointer.push('/');
        pointer.push_str(&part.replace('~', "~0").replace('/', "~1"));
    }
    ConfigError {
        pointer,
        message: e.into_inner().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_config_reads_and_writes_back_as_it_was() {
        let value = json!({
            "commands": [{"argv": ["cargo", "test"], "cwd": "app",
                          "env": {"RUST_LOG": "info", "TOKEN": {"secret": "TOKEN"}}}],
            "allow_shell": false,
            "env_passthrough": ["HOME"],
            "executor": {"slurm": {"partition": "debug", "cpus_per_task": 2}}
        });
        let config = ExecConfig::from_value(&value).unwrap();
        assert_eq!(
            config.commands[0].env["TOKEN"],
            EnvValue::Secret {
                secret: "TOKEN".into()
            }
        );
        assert_eq!(serde_json::to_value(&config).unwrap(), value);
        assert_eq!(ExecConfig::from_json(&value.to_string()).unwrap(), config);
        let local = json!({"commands": [{"argv": ["true"]}], "executor": "local"});
        assert_eq!(
            ExecConfig::from_value(&local).unwrap().executor,
            Some(Executor::Local)
        );
    }

    #[test]
    fn a_refusal_says_where_and_what() {
        let refused = |value: serde_json::Value| ExecConfig::from_value(&value).unwrap_err();
        let e = refused(json!({"commands": [], "shell": true}));
        assert_eq!(e.pointer, "/shell");
        assert!(e.message.contains("unknown field `shell`"), "{e}");
        let e = refused(json!({"commands": [{"argv": ["x"]}, {"argv": "x"}]}));
        assert_eq!(e.pointer, "/commands/1/argv");
        assert!(
            e.to_string()
                .starts_with("block config at /commands/1/argv: ")
        );
        let e = refused(json!({"commands": [{"argv": ["x"]}],
                               "executor": {"container": {"image": "i", "gpus": 1}}}));
        assert_eq!(e.pointer, "/executor/container/gpus");
        let e = refused(json!({"allow_shell": true}));
        assert_eq!(
            (e.pointer.as_str(), e.message.contains("`commands`")),
            ("", true)
        );
        assert!(ExecConfig::from_json("{\"commands\": []} x").is_err());
    }
}
