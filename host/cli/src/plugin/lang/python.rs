//! Plugins written in python. (Being built: `files`, `next_steps` and
//! `build` are filled in by the python work.)

use std::path::{Path, PathBuf};

use crate::plugin::new::WorldArg;

pub fn files(_name: &str, _world: WorldArg) -> Vec<(String, String)> {
    Vec::new()
}

pub fn next_steps(name: &str, _world: WorldArg, dir: &Path) -> String {
    format!("created python plugin `{name}` in {}", dir.display())
}

pub fn build(dir: &Path, _release: bool) -> Result<PathBuf, String> {
    Err(format!(
        "{}: python plugins cannot be built yet",
        dir.display()
    ))
}
