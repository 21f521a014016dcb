//! A plugin package: one OCI artifact in the CNCF wasm layout. Its config
//! is `application/vnd.wasm.config.v0+json`, it has exactly one
//! `application/wasm` layer (the component), and its manifest carries the
//! plugin manifest as canonical JSON in an annotation, so `wkg` and `wash`
//! pull it like any wasm component while wfhost reads what it needs.
//!
//! Reproducible: every byte is a function of the component and the plugin
//! manifest (no timestamps; the config's required `created` is the epoch).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::component::{self, ComponentInfo};
use crate::digest::{Blob, sha256};
use crate::manifest::{MANIFEST_ANNOTATION, PluginManifest};

pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";

/// Largest component a package may hold (the host's plugin limit).
pub const MAX_COMPONENT_BYTES: u64 = wfhost_core::workspace::regular_file::MAX_PLUGIN_BYTES;
/// Largest manifest or config read from a registry.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;

/// An OCI content descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Descriptor {
    pub fn of(blob: &Blob, media_type: &str) -> Descriptor {
        Descriptor {
            media_type: media_type.to_string(),
            digest: blob.digest.clone(),
            size: blob.bytes.len() as u64,
            artifact_type: None,
            annotations: BTreeMap::new(),
        }
    }
}

/// An OCI image manifest (the fields wfhost writes and reads).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageManifest {
    pub schema_version: u32,
    #[serde(default)]
    pub media_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Descriptor>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl ImageManifest {
    /// The manifest's bytes: keys sorted, no whitespace.
    pub fn to_blob(&self) -> Blob {
        let value = serde_json::to_value(self).expect("a manifest serializes");
        Blob::new(serde_json::to_vec(&value).expect("a value serializes"))
    }

    pub fn parse(bytes: &[u8]) -> Result<ImageManifest, String> {
        let manifest: ImageManifest = serde_json::from_slice(bytes)
            .map_err(|e| format!("is not an OCI image manifest: {e}"))?;
        if manifest.schema_version != 2 {
            return Err(format!(
                "has schemaVersion {}, not 2",
                manifest.schema_version
            ));
        }
        Ok(manifest)
    }
}

/// A built package: its three blobs.
#[derive(Debug, Clone)]
pub struct Package {
    pub manifest: Blob,
    pub config: Blob,
    pub layer: Blob,
    pub plugin: PluginManifest,
}

impl Package {
    /// Build the package of `component` described by `plugin`, after
    /// checking that the description is true.
    pub fn build(component_bytes: Vec<u8>, plugin: &PluginManifest) -> Result<Package, String> {
        if component_bytes.len() as u64 > MAX_COMPONENT_BYTES {
            return Err(format!(
                "the component is larger than {MAX_COMPONENT_BYTES} bytes"
            ));
        }
        plugin.check_fields()?;
        let info =
            component::inspect(&component_bytes).map_err(|e| format!("the component {e}"))?;
        plugin.check_against(&info)?;
        let layer = Blob::new(component_bytes);
        let config = Blob::new(config_json(&info, &layer.digest));
        let mut layer_descriptor = Descriptor::of(&layer, WASM_LAYER_MEDIA_TYPE);
        layer_descriptor.annotations.insert(
            "org.opencontainers.image.title".into(),
            format!("{}.wasm", plugin.name),
        );
        let mut annotations = BTreeMap::new();
        annotations.insert(MANIFEST_ANNOTATION.to_string(), plugin.canonical_json());
        annotations.insert("org.opencontainers.image.title".into(), plugin.name.clone());
        annotations.insert(
            "org.opencontainers.image.version".into(),
            plugin.version.clone(),
        );
        annotations.insert(
            "org.opencontainers.image.licenses".into(),
            plugin.license.clone(),
        );
        if !plugin.description.is_empty() {
            annotations.insert(
                "org.opencontainers.image.description".into(),
                plugin.description.clone(),
            );
        }
        let manifest = ImageManifest {
            schema_version: 2,
            media_type: Some(MANIFEST_MEDIA_TYPE.into()),
            artifact_type: None,
            config: Descriptor::of(&config, WASM_CONFIG_MEDIA_TYPE),
            layers: vec![layer_descriptor],
            subject: None,
            annotations,
        };
        Ok(Package {
            manifest: manifest.to_blob(),
            config,
            layer,
            plugin: plugin.clone(),
        })
    }
}

/// The CNCF wasm config: what `wkg`/`oci-wasm` read.
fn config_json(info: &ComponentInfo, layer_digest: &str) -> Vec<u8> {
    let value: Value = json!({
        "architecture": "wasm",
        "os": "wasip2",
        "created": "1970-01-01T00:00:00Z",
        "layerDigests": [layer_digest],
        "component": {"exports": info.exports, "imports": info.imports},
    });
    serde_json::to_vec(&value).expect("a value serializes")
}

/// A package manifest as read back: the descriptors to fetch and the plugin
/// manifest, all checked for shape (not yet against the component).
#[derive(Debug, Clone)]
pub struct PackageManifest {
    pub digest: String,
    pub config: Descriptor,
    pub layer: Descriptor,
    pub plugin: PluginManifest,
}

impl PackageManifest {
    /// Parse `bytes`, fetched for `expected_digest` (checked here).
    pub fn parse(bytes: &[u8], expected_digest: &str) -> Result<PackageManifest, String> {
        let digest = sha256(bytes);
        if digest != expected_digest {
            return Err(format!(
                "the manifest's content is {digest}, not the {expected_digest} it was fetched as"
            ));
        }
        let manifest = ImageManifest::parse(bytes)?;
        if manifest.media_type.as_deref() != Some(MANIFEST_MEDIA_TYPE) {
            return Err(format!(
                "is not an OCI image manifest (mediaType {:?})",
                manifest.media_type
            ));
        }
        if manifest.config.media_type != WASM_CONFIG_MEDIA_TYPE {
            return Err(format!(
                "is not a wasm plugin package: its config is `{}`, not `{WASM_CONFIG_MEDIA_TYPE}`",
                manifest.config.media_type
            ));
        }
        let [layer] = manifest.layers.as_slice() else {
            return Err(format!(
                "has {} layers; a plugin package has exactly one",
                manifest.layers.len()
            ));
        };
        if layer.media_type != WASM_LAYER_MEDIA_TYPE {
            return Err(format!(
                "its layer is `{}`, not `{WASM_LAYER_MEDIA_TYPE}`",
                layer.media_type
            ));
        }
        if layer.size > MAX_COMPONENT_BYTES {
            return Err(format!(
                "its component is {} bytes, more than {MAX_COMPONENT_BYTES}",
                layer.size
            ));
        }
        let text = manifest.annotations.get(MANIFEST_ANNOTATION).ok_or_else(|| {
            format!("has no `{MANIFEST_ANNOTATION}` annotation: it is a wasm component, not a wfhost plugin package")
        })?;
        let plugin = PluginManifest::from_annotation(text)?;
        Ok(PackageManifest {
            digest,
            config: manifest.config.clone(),
            layer: layer.clone(),
            plugin,
        })
    }

    /// Check the fetched component against the manifest: its digest and
    /// size, and that the plugin manifest tells the truth about it.
    pub fn check_component(&self, bytes: &[u8]) -> Result<ComponentInfo, String> {
        let digest = sha256(bytes);
        if digest != self.layer.digest || bytes.len() as u64 != self.layer.size {
            return Err(format!(
                "the component's content is {digest} ({} bytes), not the {} ({} bytes) its manifest names: the layer was altered",
                bytes.len(),
                self.layer.digest,
                self.layer.size
            ));
        }
        let info = component::inspect(bytes).map_err(|e| format!("the component {e}"))?;
        self.plugin.check_against(&info)?;
        Ok(info)
    }
}
