//! What a component must look like to be loaded.
//!
//! Checked before anything runs, so a bad plugin fails the whole run up
//! front: the file is a component (not a core module, not something else),
//! it targets the expected world, and it imports nothing the workflow did
//! not grant it.

use wasmtime::Engine;
use wasmtime::component::Component;
use wfhost_core::capabilities::{self, Refusal};

use crate::bindings::{ACTION_HANDLER_EXPORT, WORKER_EXPORT};

/// The two plugin worlds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum World {
    Worker,
    ActionHandler,
}

impl World {
    pub fn name(self) -> &'static str {
        match self {
            World::Worker => "worker",
            World::ActionHandler => "action-handler",
        }
    }

    /// The world's name with its indefinite article, for messages.
    pub fn with_article(self) -> &'static str {
        match self {
            World::Worker => "a worker",
            World::ActionHandler => "an action-handler",
        }
    }

    pub fn export(self) -> &'static str {
        match self {
            World::Worker => WORKER_EXPORT,
            World::ActionHandler => ACTION_HANDLER_EXPORT,
        }
    }
}

/// Tell components, core modules and non-wasm files apart by their header.
pub fn check_header(bytes: &[u8]) -> Result<(), String> {
    const MAGIC: &[u8] = b"\0asm";
    if bytes.len() < 8 || &bytes[..4] != MAGIC {
        return Err("not a WebAssembly file (no `\\0asm` header)".into());
    }
    match bytes[4..8] {
        [0x0d, 0x00, 0x01, 0x00] => Ok(()),
        [0x01, 0x00, 0x00, 0x00] => Err(
            "a core WebAssembly module, not a component; build the plugin for \
             `wasm32-wasip2` (or wrap it with `wasm-tools component new`)"
                .into(),
        ),
        _ => Err("a WebAssembly binary of an unsupported version or layer".into()),
    }
}

/// Check that the component exports the world's interface.
pub fn check_world(engine: &Engine, component: &Component, world: World) -> Result<(), String> {
    let ty = component.component_type();
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    if exports.iter().any(|e| e == world.export()) {
        return Ok(());
    }
    let other = match world {
        World::Worker => World::ActionHandler,
        World::ActionHandler => World::Worker,
    };
    if exports.iter().any(|e| e == other.export()) {
        return Err(format!(
            "is {} component, but it is used as {}",
            other.with_article(),
            world.with_article()
        ));
    }
    let wanted = capabilities::unversioned(world.export());
    if let Some(found) = exports
        .iter()
        .find(|e| capabilities::unversioned(e) == wanted)
    {
        return Err(format!(
            "exports `{found}`, but this host speaks `{}`; rebuild it against wfhost-sdk {}",
            world.export(),
            env!("CARGO_PKG_VERSION")
        ));
    }
    Err(format!(
        "is not a wfhost {} component: it does not export `{}` (it exports: {})",
        world.name(),
        world.export(),
        if exports.is_empty() {
            "nothing".to_string()
        } else {
            exports.join(", ")
        }
    ))
}

/// Check every import against the base sandbox and the granted capabilities.
pub fn check_imports(
    engine: &Engine,
    component: &Component,
    grants: &[String],
) -> Result<(), String> {
    let ty = component.component_type();
    let mut network = Vec::new();
    let mut ungranted: Vec<(String, &str)> = Vec::new();
    let mut unknown = Vec::new();
    for (name, _) in ty.imports(engine) {
        match capabilities::check_import(name, grants) {
            Ok(()) => {}
            Err(Refusal::Network) => network.push(format!("`{name}`")),
            Err(Refusal::NotGranted(cap)) => ungranted.push((format!("`{name}`"), cap)),
            Err(Refusal::Unknown) => unknown.push(format!("`{name}`")),
        }
    }
    let mut reasons = Vec::new();
    if !network.is_empty() {
        reasons.push(format!(
            "{} (plugins have no network access)",
            network.join(", ")
        ));
    }
    for (name, cap) in &ungranted {
        reasons.push(format!("{name} (add \"{cap}\" to the plugin's `grants`)"));
    }
    if !unknown.is_empty() {
        reasons.push(format!("{} (not offered by this host)", unknown.join(", ")));
    }
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "imports interfaces the workflow does not grant it: {}",
            reasons.join("; ")
        ))
    }
}

/// The custom section in which a plugin declares the signals it emits
/// (written by the SDK's `declare_signals!`).
pub const SIGNALS_SECTION: &str = "wfhost:signals";

/// The signals a component declares, one entry per line of its
/// [`SIGNALS_SECTION`] (in the component or a core module inside it);
/// `None` when it declares none. Nothing is run.
pub fn declared_signals(bytes: &[u8]) -> Option<Vec<String>> {
    let mut found: Option<Vec<String>> = None;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        let Ok(wasmparser::Payload::CustomSection(section)) = payload else {
            continue;
        };
        if section.name() != SIGNALS_SECTION {
            continue;
        }
        let text = String::from_utf8_lossy(section.data());
        found.get_or_insert_with(Vec::new).extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(String::from),
        );
    }
    found
}
