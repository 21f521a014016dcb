//! The plugin manifest: what a package says about its plugin. It travels
//! as canonical JSON in the package's OCI manifest (annotation
//! [`MANIFEST_ANNOTATION`]) and is checked against the component itself.
//!
//! Authors write it as `wfhost-plugin.toml` beside their crate
//! ([`ManifestSource`]); `wfhost plugin pack` reads the WIT version from the
//! component.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::component::ComponentInfo;

/// The annotation holding the plugin manifest.
pub const MANIFEST_ANNOTATION: &str = "dev.wfhost.plugin.manifest";

/// A package's plugin manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginManifest {
    /// Lowercase letters, digits and `-`, 1–64 characters.
    pub name: String,
    /// Semantic version.
    pub version: String,
    /// `worker` or `action-handler`.
    pub world: String,
    /// The `wfhost:plugin` WIT package version the component targets.
    pub wit: String,
    /// Capabilities the plugin requests (sorted): exactly those its imports need.
    pub capabilities: Vec<String>,
    /// Signals it emits (sorted).
    pub signals: Vec<String>,
    pub description: String,
    /// An SPDX license expression.
    pub license: String,
    /// The language it is written in (`rust`, `python`, `javascript`);
    /// absent in packages made before the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
}

/// `wfhost-plugin.toml`: the manifest as an author writes it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestSource {
    pub name: String,
    pub version: String,
    pub world: String,
    #[serde(default)]
    pub capabilities: Vec<String>,
    #[serde(default)]
    pub signals: Vec<String>,
    #[serde(default)]
    pub description: String,
    pub license: String,
    /// `rust` (the default), `python` or `javascript`.
    #[serde(default)]
    pub language: Option<String>,
    /// The built component, relative to the toml file.
    pub component: PathBuf,
}

/// The languages a plugin manifest may name.
pub const LANGUAGES: &[&str] = &["rust", "python", "javascript"];

/// The file name `wfhost plugin pack` looks for.
pub const SOURCE_FILE: &str = "wfhost-plugin.toml";

impl ManifestSource {
    /// Read and parse `path`; errors name the file and the field.
    pub fn read(path: &Path) -> Result<ManifestSource, String> {
        let text = crate::lock::read_toml(path).map_err(|e| format!("{}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The package manifest for a component targeting `wit`.
    pub fn manifest(&self, wit: &str) -> PluginManifest {
        let mut manifest = PluginManifest {
            name: self.name.clone(),
            version: self.version.clone(),
            world: self.world.clone(),
            wit: wit.to_string(),
            capabilities: self.capabilities.clone(),
            signals: self.signals.clone(),
            description: self.description.clone(),
            license: self.license.clone(),
            language: Some(self.language.clone().unwrap_or_else(|| "rust".into())),
        };
        manifest.capabilities.sort();
        manifest.signals.sort();
        manifest
    }
}

impl PluginManifest {
    /// Canonical JSON: keys sorted, no whitespace, the bytes signed over
    /// and annotated (`serde_json` maps here are sorted by key).
    pub fn canonical_json(&self) -> String {
        let value = serde_json::to_value(self).expect("a manifest serializes");
        serde_json::to_string(&value).expect("a value serializes")
    }

    /// Parse the annotation of a package; it must be canonical.
    pub fn from_annotation(text: &str) -> Result<PluginManifest, String> {
        let manifest: PluginManifest = serde_json::from_str(text)
            .map_err(|e| format!("its plugin manifest is not valid: {e}"))?;
        if manifest.canonical_json() != text {
            return Err("its plugin manifest is not canonical JSON".into());
        }
        manifest.check_fields()?;
        Ok(manifest)
    }

    /// Every field well-formed; the error names the field.
    pub fn check_fields(&self) -> Result<(), String> {
        check_name(&self.name)?;
        semver::Version::parse(&self.version).map_err(|e| {
            format!(
                "`version` \"{}\" is not a semantic version: {e}",
                self.version
            )
        })?;
        if !crate::component::WORLDS
            .iter()
            .any(|(w, _)| *w == self.world)
        {
            return Err(format!(
                "`world` \"{}\" is not a plugin world (worker, action-handler)",
                self.world
            ));
        }
        semver::Version::parse(&self.wit)
            .map_err(|e| format!("`wit` \"{}\" is not a version: {e}", self.wit))?;
        for cap in &self.capabilities {
            if wfhost_core::policy::capabilities::find(cap).is_none() {
                return Err(format!(
                    "`capabilities` names `{cap}`, which this host does not offer"
                ));
            }
        }
        if let Some(language) = &self.language
            && !LANGUAGES.contains(&language.as_str())
        {
            return Err(format!(
                "`language` \"{language}\" is not one of {}",
                LANGUAGES.join(", ")
            ));
        }
        check_text("description", &self.description, 1024, true)?;
        check_text("license", &self.license, 256, false)?;
        for signal in &self.signals {
            check_text("signals", signal, 256, false)?;
        }
        Ok(())
    }

    /// The manifest tells the truth about `component`: same world, WIT
    /// version, capabilities and (when it declares any) signals. The error
    /// names both sides.
    pub fn check_against(&self, component: &ComponentInfo) -> Result<(), String> {
        let mut lies = Vec::new();
        if self.world != component.world {
            lies.push(format!(
                "world: the manifest says `{}`, the component is a `{}`",
                self.world, component.world
            ));
        }
        if self.wit != component.wit_version {
            lies.push(format!(
                "WIT version: the manifest says {}, the component targets {}",
                self.wit, component.wit_version
            ));
        }
        if self.capabilities != component.capabilities {
            lies.push(format!(
                "capabilities: the manifest declares [{}], the component's imports need [{}]",
                self.capabilities.join(", "),
                component.capabilities.join(", ")
            ));
        }
        if !component.signals.is_empty() && self.signals != component.signals {
            lies.push(format!(
                "signals: the manifest lists [{}], the component declares [{}]",
                self.signals.join(", "),
                component.signals.join(", ")
            ));
        }
        if lies.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "the plugin manifest does not match its component: {}",
                lies.join("; ")
            ))
        }
    }
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`name` \"{name}\" must be 1–64 lowercase letters, digits and `-` (not at either end)"
        ))
    }
}

fn check_text(field: &str, text: &str, max: usize, may_be_empty: bool) -> Result<(), String> {
    if text.is_empty() && !may_be_empty {
        return Err(format!("`{field}` must not be empty"));
    }
    if text.len() > max {
        return Err(format!("`{field}` is longer than {max} bytes"));
    }
    if text.chars().any(char::is_control) {
        return Err(format!("`{field}` contains a control character"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> PluginManifest {
        PluginManifest {
            name: "word-count".into(),
            version: "1.2.0".into(),
            world: "worker".into(),
            wit: "0.1.0".into(),
            capabilities: vec!["exec".into()],
            signals: vec!["SIGNAL:SUCCESS".into()],
            description: "Counts \"words\"".into(),
            license: "Apache-2.0".into(),
            language: Some("rust".into()),
        }
    }

    #[test]
    fn canonical_json_has_sorted_keys_and_round_trips() {
        let json = sample().canonical_json();
        assert!(
            json.starts_with(
                r#"{"capabilities":["exec"],"description":"Counts \"words\"","language":"rust","license""#
            ),
            "{json}"
        );
        // A package made before `language` existed reads as it was signed.
        let old = PluginManifest {
            language: None,
            ..sample()
        };
        let old_json = old.canonical_json();
        assert!(!old_json.contains("language"), "{old_json}");
        assert_eq!(PluginManifest::from_annotation(&old_json).unwrap(), old);
        let odd = json.replace(r#""language":"rust""#, r#""language":"cobol""#);
        assert!(
            PluginManifest::from_annotation(&odd)
                .unwrap_err()
                .contains("`language` \"cobol\"")
        );
        assert_eq!(PluginManifest::from_annotation(&json).unwrap(), sample());
        let spaced = json.replace(',', ", ");
        assert!(
            PluginManifest::from_annotation(&spaced)
                .unwrap_err()
                .contains("not canonical")
        );
    }

    #[test]
    fn fields_are_checked_and_named() {
        for (edit, says) in [
            (
                Box::new(|m: &mut PluginManifest| m.name = "Word".into())
                    as Box<dyn Fn(&mut PluginManifest)>,
                "`name`",
            ),
            (Box::new(|m| m.version = "1.2".into()), "`version`"),
            (Box::new(|m| m.world = "daemon".into()), "`world`"),
            (
                Box::new(|m| m.capabilities = vec!["network".into()]),
                "`network`",
            ),
            (
                Box::new(|m| m.description = "a\nb".into()),
                "control character",
            ),
            (Box::new(|m| m.license = String::new()), "`license`"),
        ] {
            let mut m = sample();
            edit(&mut m);
            let error = m.check_fields().unwrap_err();
            assert!(error.contains(says), "{error}");
        }
    }

    #[test]
    fn a_manifest_that_lies_about_its_component_is_refused_naming_both_sides() {
        let component = ComponentInfo {
            world: "worker".into(),
            wit_version: "0.1.0".into(),
            capabilities: vec!["container".into(), "exec".into()],
            ..Default::default()
        };
        let error = sample().check_against(&component).unwrap_err();
        assert!(
            error.contains("declares [exec]") && error.contains("need [container, exec]"),
            "{error}"
        );
        let honest = PluginManifest {
            capabilities: component.capabilities.clone(),
            ..sample()
        };
        honest.check_against(&component).unwrap();
    }
}
