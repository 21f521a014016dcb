//! What a component must look like to be loaded.
//!
//! Checked before anything runs, so a bad plugin fails the whole run up
//! front: the file is a component (not a core module, not something else),
//! it targets the expected world, and it imports nothing the workflow did
//! not grant it.

use wasmtime::Engine;
use wasmtime::component::Component;
use wfhost_core::policy::capabilities::{self, Refusal};

use crate::bindings::{ACTION_HANDLER_INTERFACE, SERVED_VERSIONS, WORKER_INTERFACE};

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

    /// The interface the world exports, without its version.
    pub fn interface(self) -> &'static str {
        match self {
            World::Worker => WORKER_INTERFACE,
            World::ActionHandler => ACTION_HANDLER_INTERFACE,
        }
    }

    fn other(self) -> World {
        match self {
            World::Worker => World::ActionHandler,
            World::ActionHandler => World::Worker,
        }
    }
}

/// The versions of the `wfhost:plugin` package this host serves
/// (`wit/since_vX.Y.Z/`), oldest first.
pub fn served_versions() -> &'static [&'static str] {
    SERVED_VERSIONS
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

/// Check that the component exports the world's interface in a version
/// this host serves; returns that version (`0.1.0`), which selects the
/// bindings the component runs with.
pub fn check_world(engine: &Engine, component: &Component, world: World) -> Result<String, String> {
    let exports = export_names(engine, component);
    if let Some(version) = exported_version(&exports, world) {
        return served(world, &version);
    }
    if exported_version(&exports, world.other()).is_some() {
        return Err(format!(
            "is {} component, but it is used as {}",
            world.other().with_article(),
            world.with_article()
        ));
    }
    Err(format!(
        "is not a wfhost {} component: it does not export `{}@{}` (it exports: {})",
        world.name(),
        world.interface(),
        latest_version(),
        if exports.is_empty() {
            "nothing".to_string()
        } else {
            exports.join(", ")
        }
    ))
}

/// Which world a component targets and in which version of the package,
/// read from what it exports; refused like [`check_world`] when it is
/// neither world or targets a version this host does not serve.
pub fn targeted(engine: &Engine, component: &Component) -> Result<(World, String), String> {
    let exports = export_names(engine, component);
    for world in [World::Worker, World::ActionHandler] {
        if let Some(version) = exported_version(&exports, world) {
            return served(world, &version).map(|v| (world, v));
        }
    }
    check_world(engine, component, World::Worker).map(|v| (World::Worker, v))
}

fn export_names(engine: &Engine, component: &Component) -> Vec<String> {
    let ty = component.component_type();
    ty.exports(engine)
        .map(|(name, _)| name.to_string())
        .collect()
}

/// The version in `<interface>@<version>` of the world's export, if any
/// (`None` for an unversioned export too: it names no version).
fn exported_version(exports: &[String], world: World) -> Option<String> {
    exports.iter().find_map(|e| {
        let (name, version) = e.split_once('@')?;
        (name == world.interface()).then(|| version.to_string())
    })
}

fn served(world: World, version: &str) -> Result<String, String> {
    if SERVED_VERSIONS.contains(&version) {
        return Ok(version.to_string());
    }
    Err(format!(
        "targets wfhost:plugin@{version} (it exports `{}@{version}`), but this host serves \
         wfhost:plugin {}; rebuild it against one of those versions, or use a wfhost that \
         serves {version}",
        world.interface(),
        SERVED_VERSIONS.join(", "),
    ))
}

fn latest_version() -> &'static str {
    SERVED_VERSIONS.last().copied().unwrap_or("?")
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
            "{} (plugins open no sockets: HTTP requests go through the `http` grant)",
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
