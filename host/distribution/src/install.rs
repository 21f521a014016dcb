//! Installing a package: fetch it, check every byte and what its manifest
//! claims, check its signature against the keys the user trusts, and only
//! then store it. Consent and the lock are the caller's next steps.

use std::path::Path;

use wfhost_core::manifest::plugin_ref::PluginRef;

use crate::component::ComponentInfo;
use crate::home::{Installed, PluginHome, UNSIGNED};
use crate::registry::{Fetched, Registry};
use crate::signing;

/// A fetched package that passed every check but the user's consent.
pub struct Verified {
    pub reference: PluginRef,
    pub fetched: Fetched,
    pub component: ComponentInfo,
    /// The trusted key whose signature verified, or [`UNSIGNED`].
    pub signer: String,
}

/// How a package's signatures turned out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signed {
    By(String),
    /// Why no trusted signature was found.
    Not(String),
}

/// Fetch `reference` (at `pinned` when the lock pins a manifest digest)
/// and check it. `allow_unsigned` accepts a package without a trusted
/// signature (the choice is recorded as signer `unsigned`).
pub async fn fetch_verified(
    home: &PluginHome,
    reference: &PluginRef,
    pinned: Option<&str>,
    allow_unsigned: bool,
) -> Result<Verified, String> {
    let registry = Registry::new(reference)?;
    let digest = match (pinned, &reference.digest) {
        (Some(pin), Some(named)) if pin != named => {
            return Err(format!(
                "{reference} names {named}, but wfhost.lock pins {pin}"
            ));
        }
        (Some(pin), _) => pin.to_string(),
        (None, Some(named)) => named.clone(),
        (None, None) => registry.resolve().await?,
    };
    let fetched = registry.fetch(&digest).await?;
    let component = fetched
        .package
        .check_component(&fetched.layer.bytes)
        .map_err(|e| format!("{reference}: {e}"))?;
    let signer = match signature_status(&fetched, &home.trusted_keys()?) {
        Signed::By(key) => key,
        Signed::Not(_) if allow_unsigned => UNSIGNED.to_string(),
        Signed::Not(why) => {
            return Err(format!(
                "{reference}: {why}; trust the publisher's key (`wfhost plugin trust KEY`), or install it anyway with `--allow-unsigned`"
            ));
        }
    };
    Ok(Verified {
        reference: reference.clone(),
        fetched,
        component,
        signer,
    })
}

/// The first signature by a trusted key that verifies, or why there is none.
pub fn signature_status(fetched: &Fetched, trusted: &[String]) -> Signed {
    let package = &fetched.package;
    let payload = signing::payload(
        &package.digest,
        &package.plugin.name,
        &package.plugin.version,
    );
    if fetched.signatures.is_empty() {
        return Signed::Not("it is not signed".into());
    }
    let mut untrusted = Vec::new();
    let mut invalid = Vec::new();
    for entry in &fetched.signatures {
        match signing::verify(entry, &payload) {
            Ok(()) if trusted.contains(&entry.signer) => return Signed::By(entry.signer.clone()),
            Ok(()) => untrusted.push(entry.signer.clone()),
            Err(e) => invalid.push(e),
        }
    }
    let mut why = Vec::new();
    if !untrusted.is_empty() {
        why.push(format!(
            "it is signed only by keys you do not trust ({})",
            untrusted.join(", ")
        ));
    }
    if !invalid.is_empty() {
        why.push(invalid.join("; "));
    }
    Signed::Not(why.join("; "))
}

impl Verified {
    /// Store the package's blobs and record it as installed.
    pub fn commit(&self, home: &PluginHome) -> Result<Installed, String> {
        let fetched = &self.fetched;
        home.put_blob(&fetched.layer)?;
        home.put_blob(&fetched.config)?;
        home.put_blob(&fetched.manifest)?;
        let installed = Installed {
            reference: self.reference.to_string(),
            manifest: fetched.manifest.digest.clone(),
            layer: fetched.layer.digest.clone(),
            plugin: fetched.package.plugin.clone(),
            signer: self.signer.clone(),
        };
        home.record(&installed)?;
        Ok(installed)
    }
}

/// Whether the blobs of an installed package are all present.
pub fn is_complete(home: &PluginHome, installed: &Installed) -> bool {
    [&installed.manifest, &installed.layer].iter().all(|d| {
        home.blob_path(d)
            .map(|p| Path::new(&p).is_file())
            .unwrap_or(false)
    })
}
