//! The result bundle's files.

use std::io;
use std::path::{Path, PathBuf};

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptions};
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
    dir: &BundleDir,
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
        ExecError::Failed(format!(
            "cannot write the bundle {}: {e}",
            dir.path().display()
        ))
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

/// A result bundle's directory, held open from when it is made to when it
/// is sealed. Every file of the bundle is created through this handle by
/// name, never following a link, and sealing never leaves it: the bundle
/// lies in the workspace, which a container shares, and a link put in
/// place of the bundle directory or of one of its files (pointing to a
/// path of the host's user) must not make the host write, truncate or
/// chmod anything there.
#[derive(Debug)]
pub(crate) struct BundleDir {
    path: PathBuf,
    dir: Dir,
}

impl BundleDir {
    /// Make the directory at `path` (and its parents) and hold it.
    pub(crate) fn create(path: &Path) -> io::Result<BundleDir> {
        std::fs::create_dir_all(path)?;
        BundleDir::open(path)
    }

    /// Hold the existing directory at `path` (not a link).
    pub(crate) fn open(path: &Path) -> io::Result<BundleDir> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(path)?;
        Ok(BundleDir {
            path: path.to_path_buf(),
            dir: Dir::from_std_file(file),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The directory `rel` of the bundle (`""` for the bundle itself),
    /// made if missing, never through a link.
    fn subdir(&self, rel: &str) -> io::Result<Dir> {
        let mut dir = self.dir.try_clone()?;
        for part in rel.split('/').filter(|p| !p.is_empty()) {
            match dir.create_dir(part) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
            dir = dir.open_dir_nofollow(part)?;
        }
        Ok(dir)
    }

    /// Create (or empty) the file `rel` of the bundle for writing.
    pub(crate) fn create_file(&self, rel: &str) -> io::Result<std::fs::File> {
        let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        use wfhost_core::workspace::regular_file::{Existing, create_in};
        create_in(&self.subdir(parent)?, name, Existing::Truncate, 0o666)
    }

    /// Write the whole file `rel` of the bundle.
    pub(crate) fn write(&self, rel: &str, bytes: &[u8]) -> io::Result<()> {
        use std::io::Write;
        self.create_file(rel)?.write_all(bytes)
    }

    /// Read the regular file `rel` of the bundle, at most `max` bytes.
    pub(crate) fn read(&self, rel: &str, max: u64) -> io::Result<Vec<u8>> {
        use cap_std::fs::OpenOptionsExt;
        use std::io::Read;
        let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        let dir = match parent {
            "" => self.dir.try_clone()?,
            p => self.dir.open_dir_nofollow(p)?,
        };
        let mut options = OpenOptions::new();
        options
            .read(true)
            .follow(FollowSymlinks::No)
            .custom_flags(libc::O_NONBLOCK);
        let file = dir.open_with(name, &options)?.into_std();
        if !file.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{rel} is not a regular file"),
            ));
        }
        let mut bytes = Vec::new();
        file.take(max).read_to_end(&mut bytes)?;
        Ok(bytes)
    }
}

/// Write the metadata files and make the whole bundle read-only.
pub(crate) fn seal(
    dir: &BundleDir,
    manifest: &BundleManifest<'_>,
    meta: &BundleMeta,
    workdir: &Path,
    repo: &str,
) -> io::Result<()> {
    let env = EnvMeta {
        meta,
        workdir: workdir.display().to_string(),
        executor: manifest.executor,
    };
    dir.write(
        "meta/env.json",
        &serde_json::to_vec_pretty(&env).expect("metadata serializes"),
    )?;
    dir.write("meta/repo.txt", repo.as_bytes())?;
    dir.write(
        "manifest.json",
        &serde_json::to_vec_pretty(manifest).expect("manifests serialize"),
    )?;
    make_read_only(&dir.dir)
}

/// Every regular file under `dir` made read-only, through handles: links
/// are neither followed nor changed.
fn make_read_only(dir: &Dir) -> io::Result<()> {
    use cap_std::fs::PermissionsExt;
    for entry in dir.entries()? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let name = entry.file_name();
        if kind.is_dir() {
            make_read_only(&dir.open_dir_nofollow(&name)?)?;
        } else if kind.is_file() {
            let mut options = OpenOptions::new();
            options.read(true).follow(FollowSymlinks::No);
            let file = dir.open_with(&name, &options)?;
            file.set_permissions(cap_std::fs::Permissions::from_mode(0o444))?;
        }
    }
    Ok(())
}
