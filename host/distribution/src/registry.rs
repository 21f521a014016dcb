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

use futures_util::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use wfhost_core::manifest::plugin_ref::PluginRef;

use crate::digest::{Blob, hex_of};
use crate::layout::LayoutContents;
use crate::package::{
    Descriptor, INDEX_MEDIA_TYPE, ImageManifest, MANIFEST_MEDIA_TYPE, MAX_COMPONENT_BYTES,
    MAX_MANIFEST_BYTES, PackageManifest,
};
use crate::signing::{self, EMPTY_CONTENT, SIGNATURE_ARTIFACT_TYPE, SignatureEntry};

/// A connection to one registry for one repository.
pub struct Registry {
    client: Client,
    auth: RegistryAuth,
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

impl Registry {
    pub fn new(target: &PluginRef) -> Result<Registry, String> {
        static TLS: Once = Once::new();
        TLS.call_once(|| {
            let _ = rustls::crypto::ring::default_provider().install_default();
        });
        let plain_http =
            is_loopback(&target.registry) || insecure_registries().contains(&target.registry);
        let config = ClientConfig {
            protocol: if plain_http {
                ClientProtocol::HttpsExcept(vec![target.registry.clone()])
            } else {
                ClientProtocol::Https
            },
            connect_timeout: Some(std::time::Duration::from_secs(10)),
            read_timeout: Some(std::time::Duration::from_secs(60)),
            ..ClientConfig::default()
        };
        let client =
            Client::try_from(config).map_err(|e| format!("cannot start an HTTP client: {e}"))?;
        Ok(Registry {
            client,
            auth: credentials(&target.registry)?,
            target: target.clone(),
        })
    }

    fn reference(&self, tag: Option<&str>, digest: Option<&str>) -> Reference {
        let (registry, repository) = (self.target.registry.clone(), self.target.repository.clone());
        match (tag, digest) {
            (_, Some(digest)) => Reference::with_digest(registry, repository, digest.to_string()),
            (Some(tag), None) => Reference::with_tag(registry, repository, tag.to_string()),
            (None, None) => unreachable!("a package reference has a tag or a digest"),
        }
    }

    fn fail(&self, doing: &str, e: OciDistributionError) -> String {
        let mut message = format!("{doing} {}: {e}", self.target);
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            message.push_str(&format!(": {s}"));
            source = s.source();
        }
        if matches!(
            e,
            OciDistributionError::UnauthorizedError { .. }
                | OciDistributionError::AuthenticationFailure(_)
                | OciDistributionError::ServerError {
                    code: 401 | 403,
                    ..
                }
        ) {
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
        let tagged = self.reference(self.target.tag.as_deref(), None);
        self.client
            .auth(&tagged, &self.auth, RegistryOperation::Push)
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
        let at = self.reference(self.target.tag.as_deref(), self.target.digest.as_deref());
        self.push_manifest(&at, &contents.manifest, MANIFEST_MEDIA_TYPE)
            .await?;
        if let Some(signatures) = &contents.signatures {
            self.push_signatures(&contents.manifest, signatures).await?;
        }
        Ok(contents.manifest.digest.clone())
    }

    async fn push_blob(&self, blob: &Blob) -> Result<(), String> {
        let at = self.reference(None, Some(&blob.digest));
        if self
            .client
            .blob_exists(&at, &blob.digest)
            .await
            .unwrap_or(false)
        {
            return Ok(());
        }
        self.client
            .push_blob(&at, blob.bytes.clone(), &blob.digest)
            .await
            .map(|_| ())
            .map_err(|e| self.fail("cannot upload a blob to", e))
    }

    async fn push_manifest(
        &self,
        at: &Reference,
        blob: &Blob,
        media_type: &str,
    ) -> Result<(), String> {
        let content_type = media_type.parse().expect("a media type is a header value");
        self.client
            .push_manifest_raw(at, blob.bytes.clone(), content_type)
            .await
            .map(|_| ())
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
        self.push_manifest(
            &self.reference(None, Some(&signatures.digest)),
            signatures,
            MANIFEST_MEDIA_TYPE,
        )
        .await?;
        let hex = hex_of(&package.digest)?;
        let sig_tag = self.reference(Some(&format!("sha256-{hex}.sig")), None);
        self.push_manifest(&sig_tag, signatures, MANIFEST_MEDIA_TYPE)
            .await?;
        self.update_referrers_index(hex, signatures).await
    }

    fn package_name(&self, package: &Blob) -> Result<(String, String), String> {
        let parsed = PackageManifest::parse(&package.bytes, &package.digest)?;
        Ok((parsed.plugin.name, parsed.plugin.version))
    }

    async fn update_referrers_index(&self, hex: &str, signatures: &Blob) -> Result<(), String> {
        let at = self.reference(Some(&format!("sha256-{hex}")), None);
        let mut index = match self
            .client
            .pull_manifest_raw(&at, &self.auth, &[INDEX_MEDIA_TYPE])
            .await
        {
            Ok((bytes, _)) => serde_json::from_slice::<crate::layout::Index>(&bytes)
                .unwrap_or_else(|_| crate::layout::Index::new(Vec::new())),
            Err(_) => crate::layout::Index::new(Vec::new()),
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
        self.push_manifest(&at, &index.to_blob(), INDEX_MEDIA_TYPE)
            .await
    }

    /// The manifest digest the target's tag (or digest) names now.
    pub async fn resolve(&self) -> Result<String, String> {
        let at = self.reference(self.target.tag.as_deref(), self.target.digest.as_deref());
        let (bytes, digest) = self
            .client
            .pull_manifest_raw(&at, &self.auth, &[MANIFEST_MEDIA_TYPE])
            .await
            .map_err(|e| self.fail("cannot fetch", e))?;
        let actual = crate::digest::sha256(&bytes);
        if actual != digest {
            return Err(format!(
                "{} served a manifest whose content is {actual}, not {digest}",
                self.target
            ));
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

    async fn manifest(&self, digest: &str) -> Result<Blob, String> {
        let at = self.reference(None, Some(digest));
        let (bytes, _) = self
            .client
            .pull_manifest_raw(&at, &self.auth, &[MANIFEST_MEDIA_TYPE])
            .await
            .map_err(|e| self.fail("cannot fetch", e))?;
        if bytes.len() as u64 > MAX_MANIFEST_BYTES {
            return Err(format!(
                "{}: a manifest larger than {MAX_MANIFEST_BYTES} bytes",
                self.target
            ));
        }
        let blob = Blob::new(bytes.to_vec());
        if blob.digest != digest {
            return Err(format!(
                "{}: the registry served {} for {digest}",
                self.target, blob.digest
            ));
        }
        Ok(blob)
    }

    /// A blob, read up to its declared size and checked against its digest.
    async fn blob(&self, descriptor: &Descriptor, max: u64) -> Result<Blob, String> {
        if descriptor.size > max {
            return Err(format!(
                "{}: blob {} is {} bytes, more than {max}",
                self.target, descriptor.digest, descriptor.size
            ));
        }
        let at = self.reference(None, Some(&descriptor.digest));
        let mut stream = self
            .client
            .pull_blob_stream(&at, descriptor.digest.as_str())
            .await
            .map_err(|e| self.fail("cannot fetch a blob of", e))?;
        let mut bytes = Vec::with_capacity(descriptor.size as usize);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                format!(
                    "{}: blob {} did not arrive intact ({e}): the package was altered, or the transfer broke",
                    self.target, descriptor.digest
                )
            })?;
            if (bytes.len() + chunk.len()) as u64 > descriptor.size {
                return Err(format!(
                    "{}: blob {} is longer than the {} bytes its manifest declares: the package was altered",
                    self.target, descriptor.digest, descriptor.size
                ));
            }
            bytes.extend_from_slice(&chunk);
        }
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
    async fn signatures(&self, package: &PackageManifest) -> Result<Vec<SignatureEntry>, String> {
        let hex = hex_of(&package.digest)?;
        let mut candidates: Vec<String> = Vec::new();
        let subject = self.reference(None, Some(&package.digest));
        if let Ok(index) = self
            .client
            .pull_referrers(&subject, Some(SIGNATURE_ARTIFACT_TYPE))
            .await
        {
            candidates.extend(
                index
                    .manifests
                    .into_iter()
                    .filter(|e| e.artifact_type.as_deref() == Some(SIGNATURE_ARTIFACT_TYPE))
                    .map(|e| e.digest),
            );
        }
        let sig_tag = self.reference(Some(&format!("sha256-{hex}.sig")), None);
        if let Ok((_, digest)) = self
            .client
            .pull_manifest_raw(&sig_tag, &self.auth, &[MANIFEST_MEDIA_TYPE])
            .await
        {
            candidates.push(digest);
        }
        candidates.sort();
        candidates.dedup();
        let expected = Blob::new(signing::payload(
            &package.digest,
            &package.plugin.name,
            &package.plugin.version,
        ));
        let mut found = Vec::new();
        for digest in candidates.iter().take(16) {
            let Ok(blob) = self.manifest(digest).await else {
                continue;
            };
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
fn credentials(registry: &str) -> Result<RegistryAuth, String> {
    use docker_credential::{CredentialRetrievalError as E, DockerCredential};
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".docker")));
    let Some(path) = dir.map(|d| d.join("config.json")).filter(|p| p.exists()) else {
        return Ok(RegistryAuth::Anonymous);
    };
    let file = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    match docker_credential::get_credential_from_reader(std::io::BufReader::new(file), registry) {
        Ok(DockerCredential::UsernamePassword(user, password)) => {
            Ok(RegistryAuth::Basic(user, password))
        }
        Ok(DockerCredential::IdentityToken(_)) => Err(format!(
            "{}: holds an identity token for {registry}, which wfhost cannot use: log in with a username and password (`docker login {registry}`)",
            path.display()
        )),
        Err(E::NoCredentialConfigured) => Ok(RegistryAuth::Anonymous),
        Err(E::ConfigReadError) => Err(format!("{}: not a valid Docker config", path.display())),
        Err(e) => Err(format!(
            "{}: cannot get the credentials for {registry}: {e}",
            path.display()
        )),
    }
}
