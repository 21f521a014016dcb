//! `wfhost plugin build`: the plugin crate built for `wasm32-wasip2` with
//! cargo (the target installed with rustup if missing), the component
//! copied to `target/wfhost/`, where the crate's manifest and sample
//! workflow expect it whatever cargo's target directory is.

use std::ffi::OsString;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use wfhost_guest_artifacts::wasm_target::{self, TARGET};

use crate::exit;
use crate::report_error;

/// Build the plugin crate in DIR.
#[derive(clap::Args)]
pub struct BuildArgs {
    /// The plugin crate (default: the current directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// Build the optimized component to publish (cargo's release
    /// profile). Without it, the dev profile `cargo test` builds too: the
    /// component builds in seconds after the tests, larger and slower.
    #[arg(long)]
    pub release: bool,
    /// The dev profile (the default; kept for scripts that ask for it).
    #[arg(long, hide = true, conflicts_with = "release")]
    pub debug: bool,
}

/// Where the component is copied to, relative to the crate.
pub const OUTPUT_DIR: &str = "target/wfhost";

pub fn build(args: BuildArgs) -> u8 {
    let built =
        super::lang::Lang::detect(&args.dir).and_then(|lang| lang.build(&args.dir, args.release));
    match built {
        Ok(component) => {
            println!("{}", component.display());
            exit::SUCCESS
        }
        Err(message) => {
            report_error(message);
            exit::BAD_INPUT
        }
    }
}

/// Build the crate in `dir`; returns the path of its component.
pub fn build_crate(dir: &Path, release: bool) -> Result<PathBuf, String> {
    let manifest = dir.join("Cargo.toml");
    if !manifest.is_file() {
        return Err(format!(
            "{}: no Cargo.toml; run this in a plugin crate (`wfhost plugin new`) or pass --dir",
            dir.display()
        ));
    }
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    wasm_target::ensure(dir, &rustc, None, |note| eprintln!("note: {note}"))?;
    let built = cargo_build(dir, release)?;
    let copy = dir
        .join(OUTPUT_DIR)
        .join(built.file_name().unwrap_or_default());
    copy_atomically(&built, &copy)?;
    Ok(copy)
}

/// Run `cargo build` for the wasm target; its diagnostics reach the user
/// on stderr as cargo renders them, the artifacts are read from its JSON
/// messages. Returns the crate's `.wasm`.
fn cargo_build(dir: &Path, release: bool) -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut cmd = Command::new(cargo);
    cmd.current_dir(dir)
        .args([
            "build",
            "--target",
            TARGET,
            "--message-format=json-render-diagnostics",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if release {
        cmd.arg("--release");
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run cargo (is Rust installed through rustup?): {e}"))?;
    let manifest = std::path::absolute(dir.join("Cargo.toml"))
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut wasm = None;
    if let Some(out) = child.stdout.take() {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(found) = crate_component(&line, &manifest) {
                wasm = Some(found);
            }
        }
    }
    let status = child.wait().map_err(|e| format!("cargo: {e}"))?;
    if !status.success() {
        return Err(format!(
            "cargo build --target {TARGET} failed in {} ({status}); see its errors above",
            dir.display()
        ));
    }
    wasm.ok_or_else(|| {
        format!(
            "cargo built no component for {}: its [lib] needs crate-type \"cdylib\"",
            dir.display()
        )
    })
}

/// The `.wasm` of a `compiler-artifact` message of the crate at
/// `manifest`, if `line` is one.
fn crate_component(line: &str, manifest: &Path) -> Option<PathBuf> {
    let message: serde_json::Value = serde_json::from_str(line).ok()?;
    if message["reason"] != "compiler-artifact" {
        return None;
    }
    let same = |p: &str| {
        let p = Path::new(p);
        p == manifest
            || matches!((p.canonicalize(), manifest.canonicalize()), (Ok(a), Ok(b)) if a == b)
    };
    if !message["manifest_path"].as_str().is_some_and(same) {
        return None;
    }
    message["filenames"]
        .as_array()?
        .iter()
        .filter_map(|f| f.as_str())
        .find(|f| f.ends_with(".wasm"))
        .map(PathBuf::from)
}

fn copy_atomically(from: &Path, to: &Path) -> Result<(), String> {
    let dir = to.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let staged =
        tempfile::NamedTempFile::new_in(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::copy(from, staged.path()).map_err(|e| format!("{}: {e}", from.display()))?;
    staged
        .persist(to)
        .map_err(|e| format!("{}: {}", to.display(), e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_component_is_found_in_cargo_messages() {
        let manifest = Path::new("/p/demo/Cargo.toml");
        let line = r#"{"reason":"compiler-artifact","manifest_path":"/p/demo/Cargo.toml","filenames":["/t/wasm32-wasip2/release/libdemo.rlib","/t/wasm32-wasip2/release/demo.wasm"]}"#;
        assert_eq!(
            crate_component(line, manifest),
            Some(PathBuf::from("/t/wasm32-wasip2/release/demo.wasm"))
        );
        let dependency = line.replace("/p/demo/", "/p/vendor/wfhost-sdk/");
        assert_eq!(crate_component(&dependency, manifest), None);
        assert_eq!(
            crate_component(r#"{"reason":"build-finished"}"#, manifest),
            None
        );
        assert_eq!(crate_component("not json", manifest), None);
    }
}
