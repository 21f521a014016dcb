//! Talking to OCI registries: push a package with its signatures, fetch
//! one by tag or digest with every byte checked against its digest.
//!
//! Registries on the loopback interface (`localhost`, `127.0.0.1`, `[::1]`)
//! are spoken to over plain HTTP, as Docker does; every other over HTTPS,
//! unless listed in `WFHOST_INSECURE_REGISTRIES` (comma-separated
//! `host:port`). Credentials come from the Docker config
//! (`$DOCKER_CONFIG/config.json` or `~/.docker/config.json`: `auths`,
//! `credsStore`, `credHelpers`), as `docker`, `oras` and `wkg` find them.

use std::sync::Once;

use bytes::Bytes;
use wfhost_core::manifest::plugin_ref::PluginRef;

use crate::digest::{Blob, hex_of};
use crate::layout::{Index, LayoutContents};
use crate::oci::{self, Access, Credentials};
use crate::package::{
    Descriptor, INDEX_MEDIA_TYPE, ImageManifest, MANIFEST_MEDIA_TYPE, MAX_COMPONENT_BYTES,
    MAX_MANIFEST_BYTES, PackageManifest,
};
use crate::signing::{self, EMPTY_CONTENT, SIGNATURE_ARTIFACT_TYPE, SignatureEntry};

/// A connection to one registry for one repository.
pub struct Registry {
    client: oci::Client,
    target: PluginRef,
}

/// A package fetched from a registry: every blob checked.
pub struct Fetched {
    pub package: PackageManifest,
    pub manifest: Blob,
    pub config: Blob,
    pub layer: Blob,
    /// Signatures whose payload names this package (not yet checked
    /// against keys: see [`crate::trust`]).
    pub signatures: Vec<SignatureEntry>,
}

/// Make rustls's ring provider the process's (once): the HTTP clients of
/// this process (reqwest, built without a provider of its own) use it.
pub fn install_tls_provider() {
    static TLS: Once = Once::new();
    TLS.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

impl Registry {
    pub fn new(target: &PluginRef) -> Result<Registry, String> {
        install_tls_provider();
        let plain_http =
            is_loopback(&target.registry) || insecure_registries().contains(&target.registry);
        let client = oci::Client::new(
            &target.registry,
            &target.repository,
            plain_http,
            credentials(&target.registry)?,
        )?;
        Ok(Registry {
            client,
            target: target.clone(),
        })
    }

    fn fail(&self, doing: &str, e: oci::Error) -> String {
        let mut message = format!("{doing} {}: {e}", self.target);
        if matches!(e, oci::Error::Denied(_)) {
            message.push_str(&format!(
                " (the registry refused the credentials wfhost found in the Docker config, or their absence: `docker login {}` stores them)",
                self.target.registry
            ));
        }
        message
    }

    /// Push a package (and its signatures) to the target's tag or digest.
    /// Returns the package's manifest digest.
    pub async fn push(&self, contents: &LayoutContents, blobs: &[Blob]) -> Result<String, String> {
        self.client
            .login(Access::Push)
            .await
            .map_err(|e| self.fail("cannot log in to push", e))?;
        if let Some(digest) = &self.target.digest
            && *digest != contents.manifest.digest
        {
            return Err(format!(
                "{} names {digest}, but the package is {}",
                self.target, contents.manifest.digest
            ));
        }
        for blob in blobs {
            self.push_blob(blob).await?;
        }
        let at = self
            .target
            .tag
            .as_deref()
            .or(self.target.digest.as_deref())
            .expect("a package reference has a tag or a digest");
        self.push_manifest(at, &contents.manifest, MANIFEST_MEDIA_TYPE)
            .await?;
        if let Some(signatures) = &contents.signatures {
            self.push_signatures(&contents.manifest, signatures).await?;
        }
        Ok(contents.manifest.digest.clone())
    }

    async fn push_blob(&self, blob: &Blob) -> Result<(), String> {
        if self.client.blob_exists(&blob.digest).await.unwrap_or(false) {
            return Ok(());
        }
        self.client
            .push_blob(&blob.digest, Bytes::from(blob.bytes.clone()))
            .await
            .map_err(|e| self.fail("cannot upload a blob to", e))
    }

    async fn push_manifest(&self, at: &str, blob: &Blob, media_type: &str) -> Result<(), String> {
        self.client
            .push_manifest(at, Bytes::from(blob.bytes.clone()), media_type)
            .await
            .map_err(|e| self.fail("cannot upload a manifest to", e))
    }

    /// The signature artifact as a referrer of the package (pushed by
    /// digest with its `subject`), under the cosign-style tag
    /// `sha256-<hex>.sig`, and in the referrers tag schema's index at
    /// `sha256-<hex>` for registries without the referrers API.
    async fn push_signatures(&self, package: &Blob, signatures: &Blob) -> Result<(), String> {
        let manifest = ImageManifest::parse(&signatures.bytes)?;
        self.push_blob(&Blob::new(EMPTY_CONTENT.to_vec())).await?;
        let (name, version) = self.package_name(package)?;
        let payload = Blob::new(signing::payload(&package.digest, &name, &version));
        if manifest
            .layers
            .iter()
            .any(|layer| layer.digest != payload.digest)
        {
            return Err(
                "the package's signature artifact holds a payload of another package".into(),
            );
        }
        self.push_blob(&payload).await?;
        self.push_manifest(&signatures.digest, signatures, MANIFEST_MEDIA_TYPE)
            .await?;
        let hex = hex_of(&package.digest)?;
        self.push_manifest(
            &format!("sha256-{hex}.sig"),
            signatures,
            MANIFEST_MEDIA_TYPE,
        )
        .await?;
        self.update_referrers_index(hex, signatures).await
    }

    fn package_name(&self, package: &Blob) -> Result<(String, String), String> {
        let parsed = PackageManifest::parse(&package.bytes, &package.digest)?;
        Ok((parsed.plugin.name, parsed.plugin.version))
    }

    async fn update_referrers_index(&self, hex: &str, signatures: &Blob) -> Result<(), String> {
        let tag = format!("sha256-{hex}");
        let mut index = match self.client.pull_manifest(&tag, &[INDEX_MEDIA_TYPE]).await {
            Ok((bytes, _)) => {
                serde_json::from_slice::<Index>(&bytes).unwrap_or_else(|_| Index::new(Vec::new()))
            }
            Err(e @ oci::Error::TooLarge(_)) => {
                return Err(self.fail("cannot read the referrers index of", e));
            }
            Err(_) => Index::new(Vec::new()),
        };
        if index
            .manifests
            .iter()
            .any(|d| d.digest == signatures.digest)
        {
            return Ok(());
        }
        let mut entry = Descriptor::of(signatures, MANIFEST_MEDIA_TYPE);
        entry.artifact_type = Some(SIGNATURE_ARTIFACT_TYPE.into());
        index.manifests.push(entry);
        self.push_manifest(&tag, &index.to_blob(), INDEX_MEDIA_TYPE)
            .await
    }

    /// The manifest digest the target's tag (or digest) names now.
    pub async fn resolve(&self) -> Result<String, String> {
        let at = self
            .target
            .digest
            .as_deref()
            .or(self.target.tag.as_deref())
            .expect("a package reference has a tag or a digest");
        let (bytes, said) = self
            .client
            .pull_manifest(at, &[MANIFEST_MEDIA_TYPE])
            .await
            .map_err(|e| self.fail("cannot fetch", e))?;
        let actual = crate::digest::sha256(&bytes);
        // The registry's `Docker-Content-Digest`, when it is a sha256 one,
        // and the digest the reference names must both be the content's.
        let said = said.filter(|d| d.starts_with("sha256:"));
        for claimed in [said.as_deref(), self.target.digest.as_deref()]
            .into_iter()
            .flatten()
        {
            if claimed != actual {
                return Err(format!(
                    "{} served a manifest whose content is {actual}, not {claimed}",
                    self.target
                ));
            }
        }
        Ok(actual)
    }

    /// Fetch the package whose manifest is `digest`, its blobs and its
    /// signatures, checking every byte.
    pub async fn fetch(&self, digest: &str) -> Result<Fetched, String> {
        let manifest = self.manifest(digest).await?;
        let package = PackageManifest::parse(&manifest.bytes, digest)
            .map_err(|e| format!("{}: the package {e}", self.target))?;
        let config = self.blob(&package.config, MAX_MANIFEST_BYTES).await?;
        let layer = self.blob(&package.layer, MAX_COMPONENT_BYTES).await?;
        let signatures = self.signatures(&package).await?;
        Ok(Fetched {
            package,
            manifest,
            config,
            layer,
            signatures,
        })
    }

    /// The manifest `digest`, read up to [`MAX_MANIFEST_BYTES`] and
    /// checked against its digest.
    async fn manifest(&self, digest: &str) -> Result<Blob, String> {
        let (bytes, _) = self
            .client
            .pull_manifest(digest, &[MANIFEST_MEDIA_TYPE])
            .await
            .map_err(|e| self.fail("cannot fetch", e))?;
        let blob = Blob::new(bytes);
        if blob.digest != digest {
            return Err(format!(
                "{}: the registry served {} for {digest}",
                self.target, blob.digest
            ));
        }
        Ok(blob)
    }

    /// A blob, read up to its declared size (at most `max`) and checked
    /// against its digest.
    async fn blob(&self, descriptor: &Descriptor, max: u64) -> Result<Blob, String> {
        if descriptor.size > max {
            return Err(format!(
                "{}: blob {} is {} bytes, more than {max}",
                self.target, descriptor.digest, descriptor.size
            ));
        }
        let bytes = self
            .client
            .pull_blob(&descriptor.digest, descriptor.size)
            .await
            .map_err(|e| match e {
                oci::Error::TooLarge(message) => format!(
                    "{}: {message}, the size its manifest declares: the package was altered",
                    self.target
                ),
                oci::Error::Transport(message) => format!(
                    "{}: blob {} did not arrive intact ({message}): the package was altered, or the transfer broke",
                    self.target, descriptor.digest
                ),
                e => self.fail("cannot fetch a blob of", e),
            })?;
        let blob = Blob::new(bytes);
        if blob.digest != descriptor.digest || blob.bytes.len() as u64 != descriptor.size {
            return Err(format!(
                "{}: blob {} arrived with content {} ({} bytes): the package was altered",
                self.target,
                descriptor.digest,
                blob.digest,
                blob.bytes.len()
            ));
        }
        Ok(blob)
    }

    /// Signatures of `package`: its referrers (the referrers API, or the
    /// tag schema's index at `sha256-<hex>`) and the `sha256-<hex>.sig` tag.
    /// A registry that has none of them has no signatures for it; one
    /// that answers any of them over its limit is refused.
    async fn signatures(&self, package: &PackageManifest) -> Result<Vec<SignatureEntry>, String> {
        let hex = hex_of(&package.digest)?;
        let over_limit = |e: oci::Error| match e {
            oci::Error::TooLarge(_) => Err(self.fail("cannot read the signatures of", e)),
            _ => Ok(None),
        };
        let referrers = match self
            .client
            .pull_referrers(&package.digest, SIGNATURE_ARTIFACT_TYPE)
            .await
        {
            Ok(Some(bytes)) => Some(bytes),
            // No referrers API: the referrers tag schema's index.
            Ok(None) => match self
                .client
                .pull_manifest(&format!("sha256-{hex}"), &[INDEX_MEDIA_TYPE])
                .await
            {
                Ok((bytes, _)) => Some(bytes),
                Err(e) => over_limit(e)?,
            },
            Err(e) => over_limit(e)?,
        };
        let mut candidates: Vec<String> = referrers
            .and_then(|bytes| serde_json::from_slice::<Index>(&bytes).ok())
            .map(|index| {
                index
                    .manifests
                    .into_iter()
                    .filter(|e| e.artifact_type.as_deref() == Some(SIGNATURE_ARTIFACT_TYPE))
                    .map(|e| e.digest)
                    .collect()
            })
            .unwrap_or_default();
        let mut manifests = Vec::new();
        match self
            .client
            .pull_manifest(&format!("sha256-{hex}.sig"), &[MANIFEST_MEDIA_TYPE])
            .await
        {
            Ok((bytes, _)) => {
                let blob = Blob::new(bytes);
                candidates.retain(|d| *d != blob.digest);
                manifests.push(blob);
            }
            Err(e) => {
                over_limit(e)?;
            }
        }
        candidates.sort();
        candidates.dedup();
        for digest in candidates.iter().take(16) {
            match self
                .client
                .pull_manifest(digest, &[MANIFEST_MEDIA_TYPE])
                .await
            {
                Ok((bytes, _)) => manifests.push(Blob::new(bytes)),
                Err(e) => {
                    over_limit(e)?;
                }
            }
        }
        let expected = Blob::new(signing::payload(
            &package.digest,
            &package.plugin.name,
            &package.plugin.version,
        ));
        let mut found = Vec::new();
        for blob in manifests {
            let Ok(manifest) = ImageManifest::parse(&blob.bytes) else {
                continue;
            };
            for (payload_digest, entry) in signing::entries_of(&manifest, &package.digest) {
                if payload_digest == expected.digest && !found.contains(&entry) {
                    found.push(entry);
                }
            }
        }
        Ok(found)
    }
}

fn is_loopback(registry: &str) -> bool {
    let host = registry
        .rsplit_once(':')
        .filter(|(h, _)| !h.ends_with(':'))
        .map_or(registry, |(h, _)| h);
    matches!(host, "localhost" | "127.0.0.1" | "[::1]") || host.starts_with("127.")
}

fn insecure_registries() -> Vec<String> {
    std::env::var("WFHOST_INSECURE_REGISTRIES")
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Credentials for `registry` from the Docker config; anonymous when
/// there is no config or it has none for the registry.
fn credentials(registry: &str) -> Result<Credentials, String> {
    use docker_credential::{CredentialRetrievalError as E, DockerCredential};
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".docker")));
    let Some(path) = dir.map(|d| d.join("config.json")).filter(|p| p.exists()) else {
        return Ok(Credentials::Anonymous);
    };
    let file = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    match docker_credential::get_credential_from_reader(std::io::BufReader::new(file), registry) {
        Ok(DockerCredential::UsernamePassword(user, password)) => {
            Ok(Credentials::Basic { user, password })
        }
        Ok(DockerCredential::IdentityToken(_)) => Err(format!(
            "{}: holds an identity token for {registry}, which wfhost cannot use: log in with a username and password (`docker login {registry}`)",
            path.display()
        )),
        Err(E::NoCredentialConfigured) => Ok(Credentials::Anonymous),
        Err(E::ConfigReadError) => Err(format!("{}: not a valid Docker config", path.display())),
        Err(e) => Err(format!(
            "{}: cannot get the credentials for {registry}: {e}",
            path.display()
        )),
    }
}
