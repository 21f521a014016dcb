//! At run time: a workflow's `ref` plugins become the components the
//! project's `wfhost.lock` pins, as installed in the user's home, with
//! grants limited to what the plugin declares and the user allowed.

use std::path::{Path, PathBuf};

use wfhost_core::manifest::plugin_ref::PluginRef;

use crate::home::{PluginHome, UNSIGNED};
use crate::lock;

/// A package reference resolved to a local component.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub path: PathBuf,
    /// `sha256:…` the component must have when loaded.
    pub layer: String,
    pub manifest: String,
    pub signer: String,
}

/// Resolve plugin `name`'s `reference`, granted `grants`, for a workflow in
/// `manifest_dir`. Errors say what is missing or refused and what to run.
pub fn resolve(
    home: &PluginHome,
    manifest_dir: &Path,
    name: &str,
    reference: &str,
    grants: &[String],
) -> Result<Resolved, String> {
    let parsed = PluginRef::parse(reference)?;
    let lock_path = lock::find(manifest_dir).ok_or_else(|| {
        format!(
            "plugin `{name}` is {reference}, but there is no {} in {} or above: run `wfhost plugin install {reference}` in the project",
            lock::FILE_NAME,
            manifest_dir.display()
        )
    })?;
    let lock = lock::read(&lock_path)?;
    let entry = lock.get(reference).ok_or_else(|| {
        format!(
            "plugin `{name}` is {reference}, which {} does not pin: run `wfhost plugin install {reference}`",
            lock_path.display()
        )
    })?;
    if let Some(digest) = &parsed.digest
        && *digest != entry.manifest
    {
        return Err(format!(
            "plugin `{name}`: the workflow names {digest}, but {} pins {}: the digests must match (`wfhost plugin update {reference}` moves the lock)",
            lock_path.display(),
            entry.manifest
        ));
    }
    let installed = home.installed(&entry.manifest)?.ok_or_else(|| {
        format!(
            "plugin `{name}` ({reference}, {}) is pinned by {} but not installed here: run `wfhost plugin install` in the project",
            entry.manifest,
            lock_path.display()
        )
    })?;
    if installed.layer != entry.layer || installed.signer != entry.signer {
        return Err(format!(
            "plugin `{name}`: {} pins component {} signed by {}, but the installed package has {} signed by {}",
            lock_path.display(),
            entry.layer,
            entry.signer,
            installed.layer,
            installed.signer
        ));
    }
    if entry.signer != UNSIGNED && !home.trusted_keys()?.contains(&entry.signer) {
        return Err(format!(
            "plugin `{name}` ({reference}) is signed by {}, which you no longer trust (`wfhost plugin trust` it again to use it)",
            entry.signer
        ));
    }
    check_grants(
        home,
        name,
        &installed.plugin.name,
        &installed.plugin.capabilities,
        &entry.signer,
        grants,
    )?;
    Ok(Resolved {
        path: home.blob_path(&entry.layer)?,
        layer: entry.layer.clone(),
        manifest: entry.manifest.clone(),
        signer: entry.signer.clone(),
    })
}

/// A workflow may grant only what the plugin declares and the user allowed.
fn check_grants(
    home: &PluginHome,
    name: &str,
    package: &str,
    declared: &[String],
    signer: &str,
    grants: &[String],
) -> Result<(), String> {
    let allowed = home.allowed(package, signer)?.unwrap_or_default();
    let refused: Vec<&String> = grants
        .iter()
        .filter(|g| !declared.contains(g) || !allowed.contains(g))
        .collect();
    if refused.is_empty() {
        return Ok(());
    }
    let list = |caps: &[String]| {
        if caps.is_empty() {
            "none".to_string()
        } else {
            caps.join(", ")
        }
    };
    Err(format!(
        "plugin `{name}` is granted {} by the workflow, but the package `{package}` declares [{}] and you allowed [{}] at install (`wfhost plugin install --allow CAPS` changes what you allow)",
        refused
            .iter()
            .map(|g| format!("`{g}`"))
            .collect::<Vec<_>>()
            .join(", "),
        list(declared),
        list(&allowed)
    ))
}
