//! The languages a plugin can be written in: what `plugin new --lang`
//! writes and how `plugin build` builds it. Rust is `new.rs`/`build.rs`
//! themselves; every other language is one module here with the same three
//! functions (`files`, `next_steps`, `build`).

use std::path::{Path, PathBuf};

use super::new::WorldArg;

pub mod javascript;
pub mod python;

/// A plugin's language, as `--lang` takes it and `wfhost-plugin.toml`'s
/// `language` records it.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Lang {
    #[default]
    Rust,
    Python,
    Javascript,
}

impl Lang {
    pub fn name(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Javascript => "javascript",
        }
    }

    pub fn parse(text: &str) -> Option<Lang> {
        [Lang::Rust, Lang::Python, Lang::Javascript]
            .into_iter()
            .find(|l| l.name() == text)
    }

    /// The language of the plugin project in `dir`: its
    /// `wfhost-plugin.toml`'s `language`, else Rust when it has a
    /// `Cargo.toml`.
    pub fn detect(dir: &Path) -> Result<Lang, String> {
        let toml = dir.join(wfhost_distribution::manifest::SOURCE_FILE);
        if toml.is_file() {
            let source = wfhost_distribution::manifest::ManifestSource::read(&toml)?;
            if let Some(lang) = source.language.as_deref() {
                return Lang::parse(lang).ok_or_else(|| {
                    format!(
                        "{}: `language` \"{lang}\" is not one of rust, python, javascript",
                        toml.display()
                    )
                });
            }
        }
        if dir.join("Cargo.toml").is_file() {
            return Ok(Lang::Rust);
        }
        Err(format!(
            "{}: no plugin project here (no wfhost-plugin.toml with a `language`, no \
             Cargo.toml); run this in a plugin project (`wfhost plugin new`) or pass --dir",
            dir.display()
        ))
    }

    /// The project's files for a new plugin (relative path → content).
    pub fn files(self, name: &str, world: WorldArg) -> Vec<(String, String)> {
        match self {
            Lang::Rust => super::new::rust_files(name, world),
            Lang::Python => python::files(name, world),
            Lang::Javascript => javascript::files(name, world),
        }
    }

    /// What to type next, shown after `plugin new`.
    pub fn next_steps(self, name: &str, world: WorldArg, dir: &Path) -> String {
        match self {
            Lang::Rust => super::new::rust_next_steps(name, world, dir),
            Lang::Python => python::next_steps(name, world, dir),
            Lang::Javascript => javascript::next_steps(name, world, dir),
        }
    }

    /// Build the project in `dir`; returns the path of its component.
    pub fn build(self, dir: &Path, release: bool) -> Result<PathBuf, String> {
        match self {
            Lang::Rust => super::build::build_crate(dir, release),
            Lang::Python => python::build(dir, release),
            Lang::Javascript => javascript::build(dir, release),
        }
    }
}

/// For the tests that hold each SDK's folder to the files `plugin new`
/// vendors: `sdk/<dir>`'s files (relative, sorted), without the paths
/// `skip` names; and the vendored list, sorted.
#[cfg(test)]
pub(crate) fn sdk_files_and_vendored(
    dir: &str,
    skip: impl Fn(&Path) -> bool,
    vendored: &[(&str, &str)],
) -> (Vec<String>, Vec<String>) {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../sdk")
        .join(dir);
    let mut found = Vec::new();
    let mut stack = vec![sdk.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if skip(&path) {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else {
                found.push(path.strip_prefix(&sdk).unwrap().display().to_string());
            }
        }
    }
    found.sort();
    let mut listed: Vec<String> = vendored.iter().map(|(p, _)| p.to_string()).collect();
    listed.sort();
    (found, listed)
}
