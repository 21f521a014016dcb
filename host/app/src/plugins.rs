//! A run's plugins: the runtime they load into, the workflow's plugins
//! loaded (its `ref` plugins resolved first), and — for a run that goes on —
//! the run's pinned definition loaded with exactly the plugins it started
//! with. Every surface loads plugins through here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use wfhost_core::manifest::pinning::PinnedDefinition;
use wfhost_core::manifest::{self, LoadedWorkflow};
use wfhost_protocol::AppError;
use wfhost_runtime::{PluginSet, RuntimeConfig, WasmRuntime};

use crate::plugin_refs;

/// How the runtime is set up: where compiled plugins are cached, and where
/// exec blocks that name no executor run.
#[derive(Debug, Clone, Default)]
pub struct RuntimeChoice {
    pub cache_dir: Option<PathBuf>,
    pub cache_disabled: bool,
    /// None: the one the run was started with.
    pub executor: Option<wfhost_exec::Executor>,
}

impl RuntimeChoice {
    /// The compiled-plugin cache directory in use, if any.
    pub fn cache_dir(&self) -> Option<PathBuf> {
        if self.cache_disabled {
            return None;
        }
        self.cache_dir
            .clone()
            .or_else(wfhost_runtime::config::default_cache_dir)
    }
}

/// The names of the plugins built into wfhost.
pub fn builtin_names() -> Vec<&'static str> {
    wfhost_guest_artifacts::BUILTIN_PLUGINS
        .iter()
        .map(|(name, _)| *name)
        .collect()
}

/// A runtime with the cache of `choice`, `default_executor` for exec
/// blocks that name none, the secrets of `home` (else the default home's),
/// and `slurm_watcher` told of each Slurm job's state.
pub fn start_runtime(
    choice: &RuntimeChoice,
    default_executor: wfhost_exec::Executor,
    home: Option<&Path>,
    slurm_watcher: Option<wfhost_exec::slurm::JobWatcher>,
) -> Result<Arc<WasmRuntime>, AppError> {
    let home = home
        .map(Path::to_path_buf)
        .or_else(|| wfhost_store::resolve_home(None).ok());
    let secrets = match home {
        Some(home) => {
            wfhost_core::policy::secrets::Secrets(Arc::new(wfhost_store::HomeSecrets::new(&home)))
        }
        None => wfhost_core::policy::secrets::Secrets::default(),
    };
    let config = RuntimeConfig {
        default_executor,
        slurm_watcher,
        secrets,
        http_allow: operator_http_allow()?,
        ..runtime_config(choice)
    };
    WasmRuntime::new(config)
        .map(Arc::new)
        .map_err(|e| AppError::internal(format!("cannot start the wasm runtime: {e:#}")))
}

/// The operator's allowlist for the `http` capability: `WFHOST_HTTP_ALLOW`
/// (comma-separated host patterns; set from `http_allow` in the user's
/// config), `None` when unset.
pub fn operator_http_allow() -> Result<Option<Vec<wfhost_core::policy::http::HostPattern>>, AppError>
{
    let Some(raw) = std::env::var_os("WFHOST_HTTP_ALLOW") else {
        return Ok(None);
    };
    let raw = raw
        .into_string()
        .map_err(|_| AppError::bad_input("WFHOST_HTTP_ALLOW is not UTF-8"))?;
    let hosts: Vec<String> = raw
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(str::to_string)
        .collect();
    wfhost_core::policy::http::operator_allowlist(&hosts)
        .map(Some)
        .map_err(|e| AppError::bad_input(format!("WFHOST_HTTP_ALLOW: {e}")))
}

/// The runtime settings of `choice` (its cache), the rest the defaults.
fn runtime_config(choice: &RuntimeChoice) -> RuntimeConfig {
    let mut config = RuntimeConfig::default();
    if choice.cache_disabled {
        config.cache_dir = None;
    } else if let Some(dir) = &choice.cache_dir {
        config.cache_dir = Some(dir.clone());
    }
    config
}

/// Make ahead of need the runtime [`start_runtime`] will make for `choice`,
/// with the built-in plugins loaded: for a process that waits before it
/// knows its run (a spare run process of `wfhost serve`). A warm-up that
/// fails costs nothing but the time: the runtime is then made when asked
/// for, and says why it cannot be.
pub fn prewarm(choice: &RuntimeChoice) {
    let builtins: Vec<&[u8]> = wfhost_guest_artifacts::BUILTIN_PLUGINS
        .iter()
        .map(|(_, bytes)| *bytes)
        .collect();
    if let Err(e) = WasmRuntime::prewarm(&runtime_config(choice), &builtins) {
        tracing::debug!(error = %e, "no runtime made ahead");
    }
}

/// The workflow's plugins for runs in `workspace`, its `ref` plugins
/// resolved through `home` and checked against their lock after loading.
pub fn load_plugins(
    runtime: Arc<WasmRuntime>,
    workflow: &LoadedWorkflow,
    workspace: &Path,
    home: Option<&Path>,
) -> Result<PluginSet, AppError> {
    let place = || workflow.file.display().to_string();
    let refs = plugin_refs::resolve_refs(workflow, home)
        .map_err(|e| AppError::bad_input(e).at(place()))?;
    let to_load = refs.as_ref().map_or(workflow, |(resolved, _)| resolved);
    let set = PluginSet::for_workflow(
        runtime,
        to_load,
        wfhost_guest_artifacts::BUILTIN_PLUGINS,
        workspace,
    )
    .map_err(|e| AppError::bad_input(format!("{}: {e}", workflow.file.display())).at(place()))?;
    if let Some((_, resolved)) = &refs {
        plugin_refs::check_loaded(&set, resolved, &workflow.file)
            .map_err(|e| AppError::bad_input(e).at(place()))?;
    }
    Ok(set)
}

/// A run's pinned definition (never the file on disk, which may have
/// changed), parsed and checked again: `json` as the store keeps it under
/// `hash`, `file` the manifest the run was started from.
pub fn pinned_workflow(
    run_id: &str,
    json: &str,
    hash: &str,
    file: &Path,
) -> Result<LoadedWorkflow, AppError> {
    let workflow = PinnedDefinition::parse(json, hash)
        .map_err(|e| AppError::bad_input(format!("run {run_id}: {e}")).at(run_id))?;
    let errors = manifest::check(file, &workflow, &builtin_names());
    if !errors.is_empty() {
        return Err(AppError::bad_input(format!(
            "run {run_id}: its pinned definition no longer checks: {}",
            manifest::ManifestErrors(errors)
        ))
        .at(run_id));
    }
    Ok(LoadedWorkflow {
        workflow,
        file: file.to_path_buf(),
    })
}

/// A run continues only with the plugins it started with: each plugin it
/// pinned (name → digest) must be loaded now with the same digest.
pub fn check_pinned_plugins(
    run_id: &str,
    pinned: &BTreeMap<String, String>,
    now: &BTreeMap<String, String>,
) -> Result<(), AppError> {
    for (name, pinned) in pinned {
        match now.get(name) {
            Some(digest) if digest == pinned => {}
            Some(digest) => {
                return Err(AppError::bad_input(format!(
                    "run {run_id}: plugin `{name}` changed since the run started (it was {pinned}, it is now {digest}); a run continues only with the plugins it started with"
                ))
                .at(run_id));
            }
            None => {
                return Err(AppError::bad_input(format!(
                    "run {run_id}: plugin `{name}` is missing"
                ))
                .at(run_id));
            }
        }
    }
    Ok(())
}

/// Plugin name → `sha256:<hex>`.
pub fn plugin_digests(plugins: &PluginSet) -> BTreeMap<String, String> {
    plugins
        .loads()
        .iter()
        .map(|l| (l.name.clone(), format!("sha256:{}", l.digest)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/guide/builtin-workers.md` has a section, with an example, for
    /// every built-in plugin and every worker the engine performs itself.
    #[test]
    fn the_guide_describes_every_builtin_worker() {
        let page =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide/builtin-workers.md");
        let text = std::fs::read_to_string(&page).unwrap();
        let mut names = builtin_names();
        names.extend(wfhost_core::manifest::ENGINE_WORKERS);
        for name in names {
            let heading = format!("\n## `{name}`\n");
            let Some((_, section)) = text.split_once(&heading) else {
                panic!("{} has no section `{heading}`", page.display());
            };
            let section = section.split("\n## ").next().unwrap_or_default();
            assert!(
                section.contains("```json"),
                "the section of `{name}` has no example"
            );
        }
    }

    #[test]
    fn a_run_goes_on_only_with_the_plugins_it_pinned() {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let pinned = map(&[("count", "sha256:aa")]);
        assert!(
            check_pinned_plugins(
                "r",
                &pinned,
                &map(&[("count", "sha256:aa"), ("x", "sha256:cc")])
            )
            .is_ok()
        );
        let changed =
            check_pinned_plugins("r", &pinned, &map(&[("count", "sha256:bb")])).unwrap_err();
        assert!(changed.message.contains("plugin `count` changed since the run started (it was sha256:aa, it is now sha256:bb)"), "{changed}");
        let missing = check_pinned_plugins("r", &pinned, &map(&[])).unwrap_err();
        assert_eq!(missing.message, "run r: plugin `count` is missing");
        assert_eq!(missing.place.as_deref(), Some("r"));
    }
}
