//! The `wasm32-wasip2` standard library, installed with rustup when it is
//! missing. Shared by this crate's build script (which includes this file)
//! and `wfhost plugin build`: rustup installs the targets a
//! `rust-toolchain.toml` lists only when it installs the toolchain itself,
//! so a toolchain that was already there lacks it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The target wfhost's plugins are built for.
pub const TARGET: &str = "wasm32-wasip2";

/// Make sure `rustc` (run in `dir`, so that rustup picks the toolchain
/// that applies there; `toolchain` names it explicitly) has the standard
/// library for [`TARGET`], installing it with `rustup target add` when
/// missing. `announce` is told before an install starts.
pub fn ensure(
    dir: &Path,
    rustc: &OsStr,
    toolchain: Option<&str>,
    announce: impl FnOnce(&str),
) -> Result<(), String> {
    if std_installed(dir, rustc) {
        return Ok(());
    }
    let mut rustup = Command::new("rustup");
    rustup.current_dir(dir).args(["target", "add", TARGET]);
    if let Some(toolchain) = toolchain {
        rustup.args(["--toolchain", toolchain]);
    }
    announce(&format!(
        "the {TARGET} target (the standard library for wfhost's plugins) is missing; \
         installing it with `rustup target add {TARGET}`"
    ));
    let installed = rustup.status().map(|s| s.success()).unwrap_or(false);
    if installed && std_installed(dir, rustc) {
        return Ok(());
    }
    Err(format!(
        "the {TARGET} target is not installed and could not be installed here; \
         wfhost's plugins are built for it. Install it with \
         `rustup target add {TARGET}{}` and build again.",
        toolchain
            .map(|t| format!(" --toolchain {t}"))
            .unwrap_or_default()
    ))
}

/// Whether `rustc`, run in `dir`, has the standard library for [`TARGET`].
pub fn std_installed(dir: &Path, rustc: &OsStr) -> bool {
    let Ok(out) = Command::new(rustc)
        .current_dir(dir)
        .args(["--print", "target-libdir", "--target", TARGET])
        .output()
    else {
        return false;
    };
    let libdir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    out.status.success()
        && std::fs::read_dir(&libdir)
            .map(|entries| {
                entries
                    .flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with("libstd-"))
            })
            .unwrap_or(false)
}
