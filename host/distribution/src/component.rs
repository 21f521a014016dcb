//! What a component really is, read from its binary without compiling it:
//! the world it exports, the WIT package version it targets, the host
//! capabilities its imports need and the signals it declares.
//!
//! A package's manifest is checked against this at pack and at install, so
//! a manifest cannot claim less (or more) than the component does.

use std::collections::BTreeSet;

use wasmparser::{Parser, Payload};
use wfhost_core::policy::capabilities::{self, Refusal};

/// The WIT package every plugin world belongs to.
pub const WIT_PACKAGE: &str = "wfhost:plugin";

/// The custom section the SDK's `declare_signals!` writes.
pub const SIGNALS_SECTION: &str = "wfhost:signals";

/// The two plugin worlds, by the interface they export.
pub const WORLDS: &[(&str, &str)] = &[
    ("worker", "wfhost:plugin/block-worker"),
    ("action-handler", "wfhost:plugin/action-interpreter"),
];

/// What a component imports and exports (its top level, not the modules
/// and components nested inside it).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ComponentInfo {
    pub imports: Vec<String>,
    pub exports: Vec<String>,
    /// `worker` or `action-handler`.
    pub world: String,
    /// The `wfhost:plugin` version it was built against, e.g. `0.1.0`.
    pub wit_version: String,
    /// Capability names its imports need, sorted.
    pub capabilities: Vec<String>,
    /// Declared signals, sorted; empty when it declares none.
    pub signals: Vec<String>,
}

/// Read `bytes` as a component; the error says why it is not a plugin.
pub fn inspect(bytes: &[u8]) -> Result<ComponentInfo, String> {
    let mut info = ComponentInfo::default();
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(|e| format!("is not a valid WebAssembly component: {e}"))?;
        match payload {
            Payload::Version { encoding, .. }
                if depth == 0 && encoding != wasmparser::Encoding::Component =>
            {
                return Err(
                    "is a core WebAssembly module, not a component: build it for `wasm32-wasip2`"
                        .into(),
                );
            }
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 0 => {
                for import in reader {
                    let import = import.map_err(|e| format!("has an unreadable import: {e}"))?;
                    info.imports.push(import.name.name.to_string());
                }
            }
            Payload::ComponentExportSection(reader) if depth == 0 => {
                for export in reader {
                    let export = export.map_err(|e| format!("has an unreadable export: {e}"))?;
                    info.exports.push(export.name.name.to_string());
                }
            }
            Payload::CustomSection(section) if section.name() == SIGNALS_SECTION => {
                let text = String::from_utf8_lossy(section.data());
                info.signals.extend(
                    text.lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .map(String::from),
                );
            }
            _ => {}
        }
    }
    info.imports.sort();
    info.exports.sort();
    info.signals.sort();
    info.signals.dedup();
    (info.world, info.wit_version) = world_of(&info.exports)?;
    info.capabilities = capabilities_of(&info.imports)?;
    Ok(info)
}

/// The world and WIT version named by the exported plugin interface.
fn world_of(exports: &[String]) -> Result<(String, String), String> {
    let found: Vec<(String, String)> = exports
        .iter()
        .filter_map(|export| {
            let (name, version) = export.split_once('@')?;
            let (world, _) = WORLDS.iter().find(|(_, interface)| *interface == name)?;
            Some((world.to_string(), version.to_string()))
        })
        .collect();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(format!(
            "exports no plugin interface (`{}` or `{}`); it exports: {}",
            WORLDS[0].1,
            WORLDS[1].1,
            if exports.is_empty() {
                "nothing".to_string()
            } else {
                exports.join(", ")
            }
        )),
        _ => Err("exports more than one plugin interface".into()),
    }
}

/// The capabilities `imports` need; an import no capability offers (the
/// network, or something this host does not know) is an error.
fn capabilities_of(imports: &[String]) -> Result<Vec<String>, String> {
    let all: Vec<String> = capabilities::CAPABILITIES
        .iter()
        .map(|c| c.name.to_string())
        .collect();
    let mut needed = BTreeSet::new();
    for import in imports {
        if capabilities::check_import(import, &[]).is_ok() {
            continue;
        }
        match capabilities::check_import(import, &all) {
            Ok(()) => {
                let cap = capabilities::CAPABILITIES
                    .iter()
                    .find(|c| capabilities::check_import(import, &[c.name.to_string()]).is_ok())
                    .expect("an import allowed by all capabilities is allowed by one");
                needed.insert(cap.name.to_string());
            }
            Err(Refusal::Network) => {
                return Err(format!(
                    "imports `{import}`: plugins open no sockets (HTTP requests go through the `http` capability)"
                ));
            }
            Err(_) => {
                return Err(format!(
                    "imports `{import}`, which this host does not offer"
                ));
            }
        }
    }
    Ok(needed.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use wfhost_guest_artifacts as guests;

    #[test]
    fn reads_world_version_capabilities_and_signals_from_the_binary() {
        let wc = inspect(guests::EXAMPLE_WORD_COUNT).unwrap();
        assert_eq!(
            (wc.world.as_str(), wc.wit_version.as_str()),
            ("worker", "0.1.0")
        );
        assert!(wc.capabilities.is_empty(), "{wc:?}");
        assert_eq!(wc.signals, ["SIGNAL:SUCCESS"]);
        assert!(
            wc.exports
                .iter()
                .any(|e| e == "wfhost:plugin/block-worker@0.1.0"),
            "{wc:?}"
        );
        let exec = inspect(guests::EXEC).unwrap();
        assert_eq!(exec.capabilities, ["exec"]);
        let probe = inspect(guests::TEST_CAPABILITY_PROBE).unwrap();
        assert_eq!(probe.capabilities, ["container", "slurm"]);
        let handler = inspect(guests::ACTIONS_CORE).unwrap();
        assert_eq!(handler.world, "action-handler");
        // wasi:http is the `http` capability: declared, and consented to
        // at install, like the others.
        assert_eq!(inspect(guests::LLM).unwrap().capabilities, ["http"]);
        assert_eq!(
            inspect(guests::TEST_HTTP_PROBE).unwrap().capabilities,
            ["http"]
        );
    }

    #[test]
    fn refuses_what_is_not_a_plugin_saying_why() {
        let net = inspect(guests::TEST_NET_PROBE).unwrap_err();
        assert!(net.contains("plugins open no sockets"), "{net}");
        let garbage = inspect(b"not wasm at all").unwrap_err();
        assert!(
            garbage.contains("not a valid WebAssembly component"),
            "{garbage}"
        );
        let module = inspect(b"\0asm\x01\0\0\0").unwrap_err();
        assert!(module.contains("core WebAssembly module"), "{module}");
    }
}
