//! `wfhost validate`: everything `run` checks before it starts, plus
//! warnings about things that are legal but probably wrong.

use std::path::PathBuf;

use clap::Args;
use wfhost_core::formats;
use wfhost_core::manifest::{self, analysis};

use crate::{builtin_names, exit, load_plugins, report_error, start_runtime};

#[derive(Args)]
pub struct ValidateArgs {
    /// The workflow manifest (JSON).
    manifest: PathBuf,
    /// Treat warnings as errors (exit code 1).
    #[arg(long)]
    strict: bool,
    #[command(flatten)]
    cache: crate::options::CacheOptions,
}

pub fn validate(args: ValidateArgs) -> u8 {
    let workflow = match formats::load(&args.manifest, &builtin_names()) {
        Ok(wf) => wf,
        Err(errors) => {
            report_error(errors);
            return exit::BAD_INPUT;
        }
    };
    if let Err(errors) = slurm_options(&workflow) {
        report_error(errors);
        return exit::BAD_INPUT;
    }
    if let Err(errors) = agent_presets(&workflow) {
        report_error(errors);
        return exit::BAD_INPUT;
    }
    // Loading the plugins checks that each is a component of the right
    // world importing only what it is granted. Nothing runs.
    let choice = args.cache.choice(None);
    let runtime = match start_runtime(&choice, wfhost_exec::Executor::Local, None) {
        Ok(rt) => rt,
        Err(e) => {
            report_error(e);
            return exit::BAD_INPUT;
        }
    };
    let plugins = match load_plugins(runtime, &workflow, workflow.base_dir(), None) {
        Ok(p) => p,
        Err(e) => {
            report_error(e);
            return exit::BAD_INPUT;
        }
    };
    let wf = &workflow.workflow;
    let mut warnings = analysis::warnings(wf);
    warnings.extend(signal_warnings(wf, &plugins));
    for w in &warnings {
        eprintln!(
            "warning: {}: {}: {}",
            workflow.file.display(),
            w.location,
            w.message
        );
    }
    let blocks: usize = wf.nodes.values().map(|n| n.blocks.len()).sum();
    let count = |n: usize, noun: &str| wfhost_core::text::count(n as u64, noun);
    let failed = args.strict && !warnings.is_empty();
    println!(
        "{}: {}: workflow `{}`{}: {}, {}, {}{}",
        workflow.file.display(),
        if failed { "failed (--strict)" } else { "ok" },
        wf.id,
        wf.version
            .as_deref()
            .map(|v| format!(" {v}"))
            .unwrap_or_default(),
        count(wf.nodes.len(), "node"),
        count(blocks, "block"),
        count(plugins.loads().len(), "plugin"),
        match warnings.len() {
            0 => String::new(),
            n => format!(", {}", count(n, "warning")),
        }
    );
    if failed {
        return exit::RUN_FAILED;
    }
    exit::SUCCESS
}

/// Transitions on signals their block's worker never emits, from the
/// signals each loaded plugin declares.
pub fn signal_warnings(
    wf: &wfhost_core::manifest::Workflow,
    plugins: &wfhost_runtime::PluginSet,
) -> Vec<analysis::Warning> {
    let declared = |worker: &str| {
        plugins
            .loads()
            .iter()
            .find(|l| l.name == worker)
            .and_then(|l| l.declared_signals.clone())
    };
    wfhost_core::manifest::signals::warnings(wf, &declared)
}

/// The Slurm options of the built-in `exec` worker's blocks and lanes
/// (`config.executor.slurm`), checked as the Slurm executor checks them
/// before `sbatch` ([`wfhost_exec::SlurmOptions::check`]), so that
/// `validate` refuses them and `run` does not start a run that would fail
/// there. A list with an input placeholder (`{{inputs.…}}`) is left to
/// the executor, which sees it expanded. A config the plugin cannot read
/// is left to the plugin, which says why.
pub fn slurm_options(workflow: &manifest::LoadedWorkflow) -> Result<(), manifest::ManifestErrors> {
    let wf = &workflow.workflow;
    let builtin_exec = wf
        .plugins
        .get("exec")
        .is_none_or(|p| p.path.is_none() && p.reference.is_none());
    if !builtin_exec {
        return Ok(());
    }
    let mut errors = Vec::new();
    for (node_id, node) in &wf.nodes {
        for (block_id, block) in &node.blocks {
            if block.worker != "exec" {
                continue;
            }
            let mut configs = vec![(vec![], &block.config)];
            if let Some(group) = &block.parallel {
                for (lane, spec) in &group.lanes {
                    configs.push((
                        vec!["parallel", "lanes", lane.as_str(), "config"],
                        &spec.config,
                    ));
                }
            }
            for (mut at, config) in configs {
                let Some(slurm) = config.pointer("/executor/slurm") else {
                    continue;
                };
                let Some(options) = slurm_config(slurm) else {
                    continue;
                };
                if wf.inputs.is_some() && options.extra_args.iter().any(|a| a.contains("{{")) {
                    continue;
                }
                if let Err(e) = options.check() {
                    if at.is_empty() {
                        at.push("config");
                    }
                    let index = e.index.map(|i| i.to_string());
                    let mut parts = vec!["nodes", node_id.as_str(), "blocks", block_id.as_str()];
                    parts.extend(at);
                    parts.extend(["executor", "slurm", e.field]);
                    parts.extend(index.as_deref());
                    errors.push(manifest::ManifestError {
                        file: workflow.file.clone(),
                        location: Some(pointer(&parts)),
                        message: e.message,
                    });
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(manifest::ManifestErrors(errors))
    }
}

/// The preset settings of the built-in `agent` worker's blocks and lanes
/// (`config.preset`, `model`, `resume`, `home`): a preset the host knows
/// ([`wfhost_core::agents::presets`]; the error lists those it does), and
/// settings of the right kind.
pub fn agent_presets(workflow: &manifest::LoadedWorkflow) -> Result<(), manifest::ManifestErrors> {
    let wf = &workflow.workflow;
    let builtin_agent = wf
        .plugins
        .get("agent")
        .is_none_or(|p| p.path.is_none() && p.reference.is_none());
    if !builtin_agent {
        return Ok(());
    }
    let mut errors = Vec::new();
    for (node_id, node) in &wf.nodes {
        for (block_id, block) in &node.blocks {
            if block.worker != "agent" {
                continue;
            }
            let mut configs = vec![(vec![], &block.config)];
            if let Some(group) = &block.parallel {
                for (lane, spec) in &group.lanes {
                    configs.push((vec!["parallel", "lanes", lane.as_str()], &spec.config));
                }
            }
            for (at, config) in configs {
                let refused = wfhost_core::agents::presets::Settings::from_config(config)
                    .err()
                    .map(|(field, message)| (vec![field], message))
                    .or_else(|| {
                        let forward = wfhost_exec::forward::from_config(config).err()?;
                        Some((vec!["executor", "container", "forward"], forward))
                    });
                let Some((field, message)) = refused else {
                    continue;
                };
                let mut parts = vec!["nodes", node_id.as_str(), "blocks", block_id.as_str()];
                parts.extend(at);
                parts.push("config");
                parts.extend(field);
                errors.push(manifest::ManifestError {
                    file: workflow.file.clone(),
                    location: Some(pointer(&parts)),
                    message,
                });
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(manifest::ManifestErrors(errors))
    }
}

/// The options of an `executor.slurm` object, or None when the plugin
/// would not read them.
fn slurm_config(value: &serde_json::Value) -> Option<wfhost_exec::SlurmOptions> {
    #[derive(serde::Deserialize)]
    struct Slurm {
        #[serde(default)]
        partition: Option<String>,
        #[serde(default)]
        time_limit: Option<String>,
        #[serde(default)]
        extra_args: Vec<String>,
    }
    let slurm: Slurm = serde::Deserialize::deserialize(value).ok()?;
    Some(wfhost_exec::SlurmOptions {
        partition: slurm.partition,
        time_limit: slurm.time_limit,
        extra_args: slurm.extra_args,
        ..Default::default()
    })
}

/// A JSON pointer of `parts`.
fn pointer(parts: &[&str]) -> String {
    parts
        .iter()
        .map(|p| format!("/{}", p.replace('~', "~0").replace('/', "~1")))
        .collect()
}
