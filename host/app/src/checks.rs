//! The checks a workflow passes before a run of it is recorded, beyond
//! the manifest's own: the Slurm options and agent presets of the built-in
//! workers, the secrets its commands reference, and the signals its
//! transitions wait for that no worker emits (warnings).

use wfhost_core::json_pointer;
use wfhost_core::manifest::{self, analysis};
use wfhost_protocol::AppError;
use wfhost_store::HomeSecrets;

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
    if !builtin(wf, "exec") {
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
                        location: Some(json_pointer::pointer(&parts)),
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

/// The exec safety policy ([`wfhost_core::policy::exec::check`], the
/// executors' own check before each command) over the commands of the
/// built-in `exec` worker's blocks and lanes, so that `validate` refuses a
/// shell the block would refuse at its first command, naming the command
/// by its JSON pointer. A command with an input placeholder is left to the
/// executor, which sees it expanded; a config the plugin cannot read is
/// left to the plugin, which says why.
pub fn exec_policy(workflow: &manifest::LoadedWorkflow) -> Result<(), manifest::ManifestErrors> {
    use wfhost_core::policy::exec::{ExecSpec, check, config::ExecConfig};
    let wf = &workflow.workflow;
    if !builtin(wf, "exec") {
        return Ok(());
    }
    let mut errors = Vec::new();
    for (node_id, node) in &wf.nodes {
        for (block_id, block) in &node.blocks {
            if block.worker != "exec" {
                continue;
            }
            for (at, config) in exec_configs(block) {
                let Ok(config) = ExecConfig::from_value(&config) else {
                    continue;
                };
                let Err(refused) = check(&ExecSpec::of_config(&config)) else {
                    continue;
                };
                if refused.shown.contains("{{") {
                    continue;
                }
                let index = refused.index.checked_sub(1).map(|i| i.to_string());
                let mut parts = vec!["nodes", node_id.as_str(), "blocks", block_id.as_str()];
                parts.extend(at);
                parts.push("commands");
                parts.extend(index.as_deref());
                let location = Some(json_pointer::pointer(&parts));
                // Lanes that share the block's commands: said once.
                if errors
                    .iter()
                    .any(|e: &manifest::ManifestError| e.location == location)
                {
                    continue;
                }
                errors.push(manifest::ManifestError {
                    file: workflow.file.clone(),
                    location,
                    message: format!("the exec safety policy refuses it: {refused}"),
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

/// The configs an exec block's commands run with, each with where its
/// commands were written: a parallel block runs its lanes only, each with
/// the block's config under its own (a block over a list, the block's
/// config for every item).
fn exec_configs(block: &manifest::Block) -> Vec<(Vec<&str>, serde_json::Value)> {
    let Some(group) = block.parallel.as_ref().filter(|g| g.over.is_none()) else {
        return vec![(vec!["config"], block.config.clone())];
    };
    group
        .lanes
        .iter()
        .map(|(lane, spec)| {
            let at = match spec.config.get("commands") {
                Some(_) => vec!["parallel", "lanes", lane.as_str(), "config"],
                None => vec!["config"],
            };
            (at, block.for_lane(spec).config)
        })
        .collect()
}

/// Whether `worker` is the built-in plugin of that name (the workflow
/// does not declare its own under the name).
fn builtin(wf: &manifest::Workflow, worker: &str) -> bool {
    wf.plugins
        .get(worker)
        .is_none_or(|p| p.path.is_none() && p.reference.is_none())
}

/// The preset settings of the built-in `agent` worker's blocks and lanes
/// (`config.preset`, `model`, `resume`, `home`): a preset the host knows
/// ([`wfhost_core::agents::presets`]; the error lists those it does), and
/// settings of the right kind.
pub fn agent_presets(workflow: &manifest::LoadedWorkflow) -> Result<(), manifest::ManifestErrors> {
    let wf = &workflow.workflow;
    if !builtin(wf, "agent") {
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
                    location: Some(json_pointer::pointer(&parts)),
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

/// The `{"secret": NAME}` references of `workflow` that are set nowhere
/// (neither in the home nor in wfhost's environment): each reported with
/// its JSON pointer. `Err` with the exit code when one is missing or
/// malformed.
pub fn check_references(
    workflow: &wfhost_core::manifest::LoadedWorkflow,
    home: Option<&std::path::Path>,
) -> Result<(), AppError> {
    use wfhost_core::policy::secrets::SecretSource;
    let file = workflow.file.display();
    let refs =
        wfhost_core::policy::secrets::references(&workflow.workflow).map_err(|(pointer, e)| {
            AppError::bad_input(format!("{file}: {pointer}: {e}")).at(pointer)
        })?;
    let source: Box<dyn SecretSource> = match home {
        Some(home) => Box::new(HomeSecrets::new(home)),
        None => Box::new(wfhost_core::policy::secrets::EnvSecrets),
    };
    let missing: Vec<String> = refs
        .iter()
        .filter(|r| source.get(&r.name).is_none())
        .map(|r| {
            format!(
                "{file}: {}: secret `{}` is not set: `wfhost secret set {}` (value on stdin), or set {} in wfhost's environment",
                r.pointer, r.name, r.name, r.name
            )
        })
        .collect();
    match missing.is_empty() {
        true => Ok(()),
        false => Err(AppError::bad_input(missing.join("\n"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn loaded(block: serde_json::Value) -> manifest::LoadedWorkflow {
        let wf = json!({
            "id": "t", "start_node": "main",
            "plugins": {"exec": {"grants": ["exec"]}},
            "nodes": {"main": {"entry_block": "x", "blocks": {"x": block}}}
        });
        let file = std::path::Path::new("wf.json");
        let parsed = manifest::parse(file, &wf.to_string()).unwrap();
        manifest::finish(file, parsed, &crate::plugins::builtin_names()).unwrap()
    }

    fn refusals(block: serde_json::Value) -> Vec<(String, String)> {
        match exec_policy(&loaded(block)) {
            Ok(()) => vec![],
            Err(errors) => errors
                .0
                .into_iter()
                .map(|e| (e.location.unwrap_or_default(), e.message))
                .collect(),
        }
    }

    #[test]
    fn the_exec_policy_names_the_refused_command() {
        let shell = json!({"worker": "exec", "config": {"commands": [
            {"argv": ["make"]}, {"argv": ["sh", "-c", "make"]}]}});
        let refused = refusals(shell);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0].0, "/nodes/main/blocks/x/config/commands/1");
        assert!(
            refused[0]
                .1
                .contains("set `\"allow_shell\": true` in the block's `config`"),
            "{refused:?}"
        );
        let allowed = json!({"worker": "exec", "config": {"allow_shell": true, "commands": [
            {"argv": ["sh", "-c", "make"]}]}});
        assert_eq!(refusals(allowed), vec![]);
        // Other workers' configs are not exec blocks.
        let echo = json!({"worker": "echo", "config": {"message": "sh -c x"}});
        assert_eq!(refusals(echo), vec![]);
    }

    #[test]
    fn a_parallel_exec_block_is_checked_lane_by_lane() {
        // The block's own config has no commands: its lanes do.
        let lanes = json!({"worker": "exec", "config": {"allow_shell": false},
        "parallel": {"lanes": {
            "a": {"config": {"commands": [{"argv": ["make"]}]}},
            "b": {"config": {"commands": [{"argv": ["bash", "-c", "make"]}]}}
        }}});
        let refused = refusals(lanes);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(
            refused[0].0,
            "/nodes/main/blocks/x/parallel/lanes/b/config/commands/0"
        );
        // Commands shared from the block are refused once, at the block.
        let shared = json!({"worker": "exec", "config": {"commands": [{"argv": ["bash"]}]},
            "parallel": {"lanes": {"a": {"config": {}}, "b": {"config": {}}}}});
        let refused = refusals(shared);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0].0, "/nodes/main/blocks/x/config/commands/0");
    }
}
