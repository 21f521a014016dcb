//! `wfhost plugin`: write, build, package, sign, publish and install
//! plugins.

mod install;
mod publish;
pub mod refs;

use std::path::PathBuf;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum PluginCommand {
    /// Make an Ed25519 key pair for signing packages: FILE (PKCS#8 PEM,
    /// private, mode 0600) and its public key beside it (`.pub`).
    Keygen(publish::KeygenArgs),
    /// Trust a publisher's public key (a `.pub` PEM file or
    /// `ed25519:<base64>`): packages it signed install without
    /// `--allow-unsigned`.
    Trust(publish::TrustArgs),
    /// Package a built plugin as an OCI artifact (an OCI image layout
    /// directory), checking its wfhost-plugin.toml against the component.
    Pack(publish::PackArgs),
    /// Sign a packed plugin with a private key (from `plugin keygen`).
    Sign(publish::SignArgs),
    /// Push a packed (and signed) plugin to an OCI registry.
    Push(publish::PushArgs),
    /// Fetch a package into the local cache and verify its digests and
    /// signature, without installing it.
    Pull(install::PullArgs),
    /// Install a package: verify it, show and allow the capabilities it
    /// requests, and pin it in the project's wfhost.lock. Without a
    /// reference: install everything wfhost.lock pins.
    Install(install::InstallArgs),
    /// Move wfhost.lock to what a package's tag names now (after checking
    /// it like `install`).
    Update(install::UpdateArgs),
    /// List the installed packages.
    Ls(install::LsArgs),
}

pub fn plugin(command: PluginCommand, home: Option<PathBuf>) -> u8 {
    let home = match wfhost_store::resolve_home(home.as_deref()) {
        Ok(home) => home,
        Err(e) => {
            crate::report_error(e);
            return crate::exit::BAD_INPUT;
        }
    };
    let result = match command {
        PluginCommand::Keygen(args) => publish::keygen(args),
        PluginCommand::Trust(args) => publish::trust(args, &home),
        PluginCommand::Pack(args) => publish::pack(args),
        PluginCommand::Sign(args) => publish::sign(args),
        PluginCommand::Push(args) => publish::push(args),
        PluginCommand::Pull(args) => install::pull(args, &home),
        PluginCommand::Install(args) => install::install(args, &home),
        PluginCommand::Update(args) => install::update(args, &home),
        PluginCommand::Ls(args) => install::ls(args, &home),
    };
    match result {
        Ok(()) => crate::exit::SUCCESS,
        Err(message) => {
            crate::report_error(message);
            crate::exit::BAD_INPUT
        }
    }
}

/// Run an async registry operation to completion.
fn block_on<T>(future: impl std::future::Future<Output = Result<T, String>>) -> Result<T, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the network runtime: {e}"))?
        .block_on(future)
}

/// A reference as typed: `oci://…`, or without the scheme.
fn parse_ref(text: &str) -> Result<wfhost_core::manifest::plugin_ref::PluginRef, String> {
    use wfhost_core::manifest::plugin_ref::{PluginRef, SCHEME};
    if text.starts_with(SCHEME) {
        PluginRef::parse(text)
    } else {
        PluginRef::parse(&format!("{SCHEME}{text}"))
    }
}
