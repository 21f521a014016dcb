//! The result bundle's files.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::{BundleMeta, CommandResult, ExecError, ExecOutcome, ExecRequest, repo, unix_ms};

/// The version of `manifest.json`'s layout.
pub const BUNDLE_VERSION: u32 = 1;

/// `manifest.json`.
#[derive(Debug, Clone, Serialize)]
pub struct BundleManifest<'a> {
    pub version: u32,
    pub executor: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slurm_job_id: Option<&'a str>,
    /// The container a container block ran in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerInfo>,
    /// The Slurm job a Slurm block ran as.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slurm: Option<crate::slurm::SlurmInfo>,
    pub started_ms: u64,
    pub ended_ms: u64,
    pub succeeded: bool,
    pub commands: &'a [CommandResult],
    /// Files the runner wrote besides the per-command logs.
    pub extra_files: Vec<&'static str>,
}

/// Which container ran a block, and whether it was a dormant one woken up.
#[derive(Debug, Clone, Serialize)]
pub struct ContainerInfo {
    pub image: String,
    pub id: String,
    pub warm: bool,
}

/// `meta/env.json`.
#[derive(Debug, Clone, Serialize)]
struct EnvMeta<'a> {
    #[serde(flatten)]
    meta: &'a BundleMeta,
    workdir: String,
    executor: &'a str,
}

/// A directory under `parent` named `name`, or `name-2`, `name-3`, … if
/// that exists: a bundle is never overwritten (a block re-run after a
/// crash gets a bundle of its own).
pub fn unique_bundle_dir(parent: &Path, name: &str) -> PathBuf {
    let mut candidate = parent.join(name);
    let mut n = 2;
    while candidate.exists() {
        candidate = parent.join(format!("{name}-{n}"));
        n += 1;
    }
    candidate
}

/// What an executor did, to be written as the bundle's manifest.
pub(crate) struct Finished {
    pub executor: &'static str,
    pub started_ms: u64,
    pub results: Vec<CommandResult>,
    pub container: Option<ContainerInfo>,
    pub slurm: Option<crate::slurm::SlurmInfo>,
    /// Besides `meta/env.json` and `meta/repo.txt`.
    pub extra_files: &'static [&'static str],
}

/// Write the manifest and metadata of the bundle at `dir`, seal it, and
/// report the outcome. The block succeeded when every command ran and
/// succeeded.
pub(crate) async fn close(
    request: &ExecRequest,
    dir: &Path,
    finished: Finished,
) -> Result<ExecOutcome, ExecError> {
    let results = finished.results;
    let succeeded = results.len() == request.spec.commands.len()
        && results.iter().all(CommandResult::succeeded);
    let slurm_job_id = finished.slurm.as_ref().map(|s| s.job_id.clone());
    let mut extra_files = vec!["meta/env.json", "meta/repo.txt"];
    extra_files.extend_from_slice(finished.extra_files);
    let manifest = BundleManifest {
        version: BUNDLE_VERSION,
        executor: finished.executor,
        slurm_job_id: slurm_job_id.as_deref(),
        container: finished.container,
        slurm: finished.slurm,
        started_ms: finished.started_ms,
        ended_ms: unix_ms(),
        succeeded,
        commands: &results,
        extra_files,
    };
    let repo = repo::snapshot(&request.workdir).await;
    seal(dir, &manifest, &request.meta, &request.workdir, &repo).map_err(|e| {
        ExecError::Failed(format!("cannot write the bundle {}: {e}", dir.display()))
    })?;
    Ok(ExecOutcome {
        bundle_dir: request.bundle_dir.clone(),
        executor: finished.executor,
        slurm_job_id,
        commands: results,
        succeeded,
    })
}

pub(crate) fn log_names(index: usize) -> (String, String) {
    (format!("cmd-{index}.stdout"), format!("cmd-{index}.stderr"))
}

/// Write the metadata files and make the whole bundle read-only.
pub(crate) fn seal(
    dir: &Path,
    manifest: &BundleManifest<'_>,
    meta: &BundleMeta,
    workdir: &Path,
    repo: &str,
) -> std::io::Result<()> {
    let env = EnvMeta {
        meta,
        workdir: workdir.display().to_string(),
        executor: manifest.executor,
    };
    std::fs::create_dir_all(dir.join("meta"))?;
    std::fs::write(
        dir.join("meta/env.json"),
        serde_json::to_vec_pretty(&env).expect("metadata serializes"),
    )?;
    std::fs::write(dir.join("meta/repo.txt"), repo)?;
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_vec_pretty(manifest).expect("manifests serialize"),
    )?;
    make_read_only(dir)
}

fn make_read_only(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            make_read_only(&entry.path())?;
        } else if kind.is_file() {
            std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o444))?;
        }
    }
    Ok(())
}
