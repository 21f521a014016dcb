//! Packages on disk as an OCI image layout (`oci-layout`, `index.json`,
//! `blobs/sha256/…`), the directory `wfhost plugin pack` writes, `sign`
//! adds signatures to and `push` uploads. Other OCI tools (`oras`,
//! `skopeo`) read it too.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::digest::{Blob, hex_of};
use crate::package::{
    Descriptor, INDEX_MEDIA_TYPE, ImageManifest, MANIFEST_MEDIA_TYPE, Package, PackageManifest,
};
use crate::signing::{self, SIGNATURE_ARTIFACT_TYPE, SignatureEntry};

const REF_NAME: &str = "org.opencontainers.image.ref.name";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    pub schema_version: u32,
    #[serde(default)]
    pub media_type: Option<String>,
    pub manifests: Vec<Descriptor>,
}

impl Index {
    pub fn new(manifests: Vec<Descriptor>) -> Index {
        Index {
            schema_version: 2,
            media_type: Some(INDEX_MEDIA_TYPE.into()),
            manifests,
        }
    }

    pub fn to_blob(&self) -> Blob {
        let value = serde_json::to_value(self).expect("an index serializes");
        Blob::new(serde_json::to_vec(&value).expect("a value serializes"))
    }
}

/// An OCI image layout holding one plugin package and its signatures.
pub struct Layout {
    dir: PathBuf,
    index: Index,
}

/// What a layout holds.
pub struct LayoutContents {
    pub package: PackageManifest,
    pub manifest: Blob,
    /// The signature artifact's manifest, if the package is signed.
    pub signatures: Option<Blob>,
}

impl Layout {
    /// Write `package` as a new layout at `dir`, which must not exist (or
    /// be empty). Written beside it first, so a failure leaves nothing.
    pub fn create(dir: &Path, package: &Package) -> Result<Layout, String> {
        if let Ok(mut entries) = std::fs::read_dir(dir)
            && entries.next().is_some()
        {
            return Err(format!("{} exists and is not empty", dir.display()));
        }
        let parent = dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let staging = tempfile::Builder::new()
            .prefix(".wfhost-pack-")
            .tempdir_in(parent)
            .map_err(|e| format!("{}: {e}", parent.display()))?;
        let mut descriptor = Descriptor::of(&package.manifest, MANIFEST_MEDIA_TYPE);
        descriptor
            .annotations
            .insert(REF_NAME.into(), package.plugin.version.clone());
        let layout = Layout {
            dir: staging.path().to_path_buf(),
            index: Index::new(vec![descriptor]),
        };
        write(
            &layout.dir.join("oci-layout"),
            br#"{"imageLayoutVersion":"1.0.0"}"#,
        )?;
        for blob in [&package.config, &package.layer, &package.manifest] {
            layout.put_blob(blob)?;
        }
        layout.write_index()?;
        let _ = std::fs::remove_dir(dir);
        let staged = staging.keep();
        std::fs::rename(&staged, dir).map_err(|e| {
            let _ = std::fs::remove_dir_all(&staged);
            format!("{}: {e}", dir.display())
        })?;
        Layout::open(dir)
    }

    pub fn open(dir: &Path) -> Result<Layout, String> {
        let path = dir.join("index.json");
        let bytes = std::fs::read(&path)
            .map_err(|e| format!("{}: not a package directory: {e}", dir.display()))?;
        let index: Index =
            serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Layout {
            dir: dir.to_path_buf(),
            index,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A blob, checked against its digest.
    pub fn blob(&self, digest: &str, max: u64) -> Result<Blob, String> {
        let path = self.dir.join("blobs/sha256").join(hex_of(digest)?);
        let bytes = wfhost_core::workspace::regular_file::read_regular(&path, max)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let blob = Blob::new(bytes);
        if blob.digest != digest {
            return Err(format!(
                "{}: its content is {}, not {digest}: the package was altered",
                path.display(),
                blob.digest
            ));
        }
        Ok(blob)
    }

    /// The package, its manifest and signatures, all checked.
    pub fn contents(&self) -> Result<LayoutContents, String> {
        let packages: Vec<&Descriptor> = self
            .index
            .manifests
            .iter()
            .filter(|d| d.artifact_type.is_none())
            .collect();
        let [descriptor] = packages.as_slice() else {
            return Err(format!(
                "{}: holds {} packages, not one",
                self.dir.display(),
                packages.len()
            ));
        };
        let manifest = self.blob(&descriptor.digest, crate::package::MAX_MANIFEST_BYTES)?;
        let package = PackageManifest::parse(&manifest.bytes, &manifest.digest)
            .map_err(|e| format!("{}: the package {e}", self.dir.display()))?;
        let signatures = self
            .signature_descriptor()
            .map(|d| self.blob(&d.digest, crate::package::MAX_MANIFEST_BYTES))
            .transpose()?;
        Ok(LayoutContents {
            package,
            manifest,
            signatures,
        })
    }

    fn signature_descriptor(&self) -> Option<&Descriptor> {
        self.index
            .manifests
            .iter()
            .find(|d| d.artifact_type.as_deref() == Some(SIGNATURE_ARTIFACT_TYPE))
    }

    /// Add (or replace) `key`'s signature of the package.
    pub fn sign(&mut self, key: &ed25519_dalek::SigningKey) -> Result<SignatureEntry, String> {
        let contents = self.contents()?;
        let plugin = &contents.package.plugin;
        let payload = Blob::new(signing::payload(
            &contents.manifest.digest,
            &plugin.name,
            &plugin.version,
        ));
        let entry = signing::sign(key, &payload.bytes);
        let mut entries: Vec<SignatureEntry> = match &contents.signatures {
            Some(blob) => {
                let old = ImageManifest::parse(&blob.bytes)?;
                signing::entries_of(&old, &contents.manifest.digest)
                    .into_iter()
                    .map(|(_, e)| e)
                    .collect()
            }
            None => Vec::new(),
        };
        entries.retain(|e| e.signer != entry.signer);
        entries.push(entry.clone());
        entries.sort_by(|a, b| a.signer.cmp(&b.signer));
        let subject = Descriptor::of(&contents.manifest, MANIFEST_MEDIA_TYPE);
        let manifest = signing::signature_manifest(&subject, &payload, &entries).to_blob();
        self.put_blob(&payload)?;
        self.put_blob(&Blob::new(signing::EMPTY_CONTENT.to_vec()))?;
        self.put_blob(&manifest)?;
        let mut descriptor = Descriptor::of(&manifest, MANIFEST_MEDIA_TYPE);
        descriptor.artifact_type = Some(SIGNATURE_ARTIFACT_TYPE.into());
        self.index
            .manifests
            .retain(|d| d.artifact_type.as_deref() != Some(SIGNATURE_ARTIFACT_TYPE));
        self.index.manifests.push(descriptor);
        self.write_index()?;
        Ok(entry)
    }

    fn put_blob(&self, blob: &Blob) -> Result<(), String> {
        let dir = self.dir.join("blobs/sha256");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        write(&dir.join(hex_of(&blob.digest)?), &blob.bytes)
    }

    fn write_index(&self) -> Result<(), String> {
        write(&self.dir.join("index.json"), &self.index.to_blob().bytes)
    }
}

/// Write a file atomically (a temporary file beside it, then a rename).
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut file =
        tempfile::NamedTempFile::new_in(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    file.write_all(bytes)
        .and_then(|()| file.as_file().sync_all())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    file.persist(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
}
