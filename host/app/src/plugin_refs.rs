//! A workflow's `ref` plugins, resolved before the runtime loads them:
//! each becomes the installed component its project's `wfhost.lock`
//! pins, and after loading the component's digest is checked again.

use std::path::Path;

use wfhost_core::manifest::LoadedWorkflow;
use wfhost_distribution::home::PluginHome;
use wfhost_distribution::resolve::{Resolved, resolve};

/// A workflow whose `ref` plugins are paths now, and what each resolved to.
pub type ResolvedWorkflow = (LoadedWorkflow, Vec<(String, Resolved)>);

/// The workflow with its `ref` plugins turned into paths, and what each
/// resolved to; `None` when it has no `ref` plugin (home is not read).
pub fn resolve_refs(
    workflow: &LoadedWorkflow,
    home: Option<&Path>,
) -> Result<Option<ResolvedWorkflow>, String> {
    if workflow
        .workflow
        .plugins
        .values()
        .all(|p| p.reference.is_none())
    {
        return Ok(None);
    }
    let home = wfhost_store::resolve_home(home).map_err(|e| e.to_string())?;
    let home = PluginHome::new(&home);
    let mut resolved_workflow = workflow.clone();
    let mut resolved = Vec::new();
    let base = std::path::absolute(workflow.base_dir())
        .unwrap_or_else(|_| workflow.base_dir().to_path_buf());
    for (name, spec) in resolved_workflow.workflow.plugins.iter_mut() {
        let Some(reference) = spec.reference.take() else {
            continue;
        };
        let found = resolve(&home, &base, name, &reference, &spec.grants)
            .map_err(|e| format!("{}: {e}", workflow.file.display()))?;
        spec.path = Some(found.path.clone());
        resolved.push((name.clone(), found));
    }
    Ok(Some((resolved_workflow, resolved)))
}

/// Each resolved plugin was loaded with the digest the lock pins.
pub fn check_loaded(
    plugins: &wfhost_runtime::PluginSet,
    resolved: &[(String, Resolved)],
    file: &Path,
) -> Result<(), String> {
    for (name, want) in resolved {
        for load in plugins.loads().iter().filter(|l| l.name == *name) {
            let got = format!("sha256:{}", load.digest);
            if got != want.layer {
                return Err(format!(
                    "{}: plugin `{name}`: the installed component is {got}, not the {} wfhost.lock pins: it was altered; reinstall it with `wfhost plugin install`",
                    file.display(),
                    want.layer
                ));
            }
        }
    }
    Ok(())
}
