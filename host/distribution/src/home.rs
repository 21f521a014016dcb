//! What the user installed and decided, under `<home>/plugins/`:
//!
//! - `blobs/sha256/<hex>`: package manifests and components, by digest;
//! - `packages/<hex>.json`: one record per installed package manifest;
//! - `consent.json`: the capabilities the user allowed, per plugin and
//!   publisher;
//! - `trusted-keys.json`: the publisher keys the user trusts.
//!
//! Every file is replaced atomically; read-modify-write cycles hold an
//! exclusive lock on `plugins/.lock`.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::digest::{Blob, hex_of};
use crate::layout::write;
use crate::manifest::PluginManifest;

/// The signer recorded for a package installed without a trusted signature.
pub const UNSIGNED: &str = "unsigned";

/// An installed package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Installed {
    /// The reference it was installed from.
    pub reference: String,
    pub manifest: String,
    pub layer: String,
    pub plugin: PluginManifest,
    /// The trusted key whose signature was verified, or [`UNSIGNED`] when
    /// the user chose `--allow-unsigned`.
    pub signer: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Consent {
    version: u32,
    /// `<name> <signer>` → the capabilities the user allowed.
    plugins: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TrustedKeys {
    version: u32,
    keys: Vec<String>,
}

/// `<home>/plugins`.
pub struct PluginHome {
    dir: PathBuf,
}

impl PluginHome {
    pub fn new(home: &Path) -> PluginHome {
        PluginHome {
            dir: home.join("plugins"),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn ensure(&self, sub: &str) -> Result<PathBuf, String> {
        let dir = self.dir.join(sub);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(dir)
    }

    /// Hold the home's lock for a read-modify-write.
    fn lock(&self) -> Result<File, String> {
        self.ensure("")?;
        let path = self.dir.join(".lock");
        let file = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        file.lock()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(file)
    }

    pub fn blob_path(&self, digest: &str) -> Result<PathBuf, String> {
        Ok(self.dir.join("blobs/sha256").join(hex_of(digest)?))
    }

    pub fn put_blob(&self, blob: &Blob) -> Result<PathBuf, String> {
        self.ensure("blobs/sha256")?;
        let path = self.blob_path(&blob.digest)?;
        write(&path, &blob.bytes)?;
        Ok(path)
    }

    /// Record an installed package (its blobs must be stored first).
    pub fn record(&self, installed: &Installed) -> Result<(), String> {
        let dir = self.ensure("packages")?;
        let path = dir.join(format!("{}.json", hex_of(&installed.manifest)?));
        let json = serde_json::to_vec_pretty(installed).expect("a record serializes");
        write(&path, &json)
    }

    /// The record of the package whose manifest is `digest`.
    pub fn installed(&self, digest: &str) -> Result<Option<Installed>, String> {
        let path = self
            .dir
            .join("packages")
            .join(format!("{}.json", hex_of(digest)?));
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// Every installed package, by name and version.
    pub fn list(&self) -> Result<Vec<Installed>, String> {
        let dir = self.dir.join("packages");
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("{}: {e}", dir.display())),
        };
        let mut all = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(hex) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            if let Some(installed) = self.installed(&format!("sha256:{hex}"))? {
                all.push(installed);
            }
        }
        all.sort_by(|a, b| {
            (&a.plugin.name, &a.plugin.version, &a.manifest).cmp(&(
                &b.plugin.name,
                &b.plugin.version,
                &b.manifest,
            ))
        });
        Ok(all)
    }

    fn consent_key(name: &str, signer: &str) -> String {
        format!("{name} {signer}")
    }

    /// The capabilities the user allowed for plugin `name` from `signer`.
    pub fn allowed(&self, name: &str, signer: &str) -> Result<Option<Vec<String>>, String> {
        let consent: Consent = self.read_json("consent.json")?;
        Ok(consent
            .plugins
            .get(&Self::consent_key(name, signer))
            .cloned())
    }

    pub fn set_allowed(
        &self,
        name: &str,
        signer: &str,
        capabilities: &[String],
    ) -> Result<(), String> {
        let _lock = self.lock()?;
        let mut consent: Consent = self.read_json("consent.json")?;
        consent.version = 1;
        let mut caps = capabilities.to_vec();
        caps.sort();
        caps.dedup();
        consent
            .plugins
            .insert(Self::consent_key(name, signer), caps);
        self.write_json("consent.json", &consent)
    }

    /// The trusted publisher keys (`ed25519:…`).
    pub fn trusted_keys(&self) -> Result<Vec<String>, String> {
        Ok(self.read_json::<TrustedKeys>("trusted-keys.json")?.keys)
    }

    /// Trust `key`; false when it was trusted already.
    pub fn trust(&self, key: &str) -> Result<bool, String> {
        let _lock = self.lock()?;
        let mut trusted: TrustedKeys = self.read_json("trusted-keys.json")?;
        trusted.version = 1;
        if trusted.keys.iter().any(|k| k == key) {
            return Ok(false);
        }
        trusted.keys.push(key.to_string());
        trusted.keys.sort();
        self.write_json("trusted-keys.json", &trusted)?;
        Ok(true)
    }

    /// Stop trusting `key`; false when it was not trusted.
    pub fn untrust(&self, key: &str) -> Result<bool, String> {
        let _lock = self.lock()?;
        let mut trusted: TrustedKeys = self.read_json("trusted-keys.json")?;
        let before = trusted.keys.len();
        trusted.keys.retain(|k| k != key);
        if trusted.keys.len() == before {
            return Ok(false);
        }
        self.write_json("trusted-keys.json", &trusted)?;
        Ok(true)
    }

    fn read_json<T: for<'de> Deserialize<'de> + Default>(&self, name: &str) -> Result<T, String> {
        let path = self.dir.join(name);
        match std::fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    fn write_json<T: Serialize>(&self, name: &str, value: &T) -> Result<(), String> {
        self.ensure("")?;
        write(
            &self.dir.join(name),
            &serde_json::to_vec_pretty(value).expect("serializes"),
        )
    }
}
