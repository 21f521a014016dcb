//! The forms a workflow file can take, and how each becomes a manifest:
//! a manifest itself, the stage-graph form of a workflow
//! ([`stage_graph`]) and WorkRail workflow files ([`workrail`]). The
//! foreign formats depend on the manifest, never the reverse.

use std::path::Path;

use crate::manifest::{self, LoadedWorkflow, ManifestErrors, Workflow};

pub mod discover;
pub mod stage_graph;
pub mod workrail;

/// Read, parse and check a workflow file: a manifest, or a WorkRail
/// workflow translated to one. `builtin_plugins` are the plugin names
/// available without a `plugins` entry.
pub fn load(file: &Path, builtin_plugins: &[&str]) -> Result<LoadedWorkflow, ManifestErrors> {
    let text = manifest::read(file)?;
    let workflow = parse_any(file, &text)?;
    manifest::finish(file, workflow, builtin_plugins)
}

/// Parse a manifest, or translate a WorkRail workflow file.
pub fn parse_any(file: &Path, text: &str) -> Result<Workflow, ManifestErrors> {
    match workrail::from_text(file, text)? {
        Some(workflow) => Ok(workflow),
        None => manifest::parse(file, text),
    }
}
