//! `wfhost plugin`: write, build, package, sign, publish and install
//! plugins. One file per subcommand (the publisher's and the user's sides
//! of distribution in `publish.rs` and `install.rs`).

mod build;
mod call;
mod install;
mod lang;
mod new;
mod publish;

use std::path::PathBuf;

use clap::Subcommand;

use crate::examples;

#[derive(Subcommand)]
pub enum PluginCommand {
    /// Create a plugin crate that builds and tests at once: a sample worker
    /// or action handler, a native test, a sample workflow, a manifest and
    /// the SDK vendored.
    #[command(after_help = examples::PLUGIN_NEW)]
    New(new::NewArgs),
    /// Build a plugin crate for wasm32-wasip2 (installing the target if
    /// missing) and print the path of its component.
    #[command(after_help = examples::PLUGIN_BUILD)]
    Build(build::BuildArgs),
    /// Run one block of a worker (or one action of an action handler)
    /// without a workflow and print its output and signal.
    #[command(after_help = examples::PLUGIN_CALL)]
    Call(call::CallArgs),
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

/// Run a `wfhost plugin` subcommand; returns the exit code.
pub fn plugin(command: PluginCommand, home: Option<PathBuf>) -> u8 {
    let distribution = match command {
        PluginCommand::New(args) => return new::new(args),
        PluginCommand::Build(args) => return build::build(args),
        PluginCommand::Call(args) => return call::call(args),
        other => other,
    };
    let home = match wfhost_store::resolve_home(home.as_deref()) {
        Ok(home) => home,
        Err(e) => {
            crate::report_error(e);
            return crate::exit::BAD_INPUT;
        }
    };
    let result = match distribution {
        PluginCommand::Keygen(args) => publish::keygen(args),
        PluginCommand::Trust(args) => publish::trust(args, &home),
        PluginCommand::Pack(args) => publish::pack(args),
        PluginCommand::Sign(args) => publish::sign(args),
        PluginCommand::Push(args) => publish::push(args),
        PluginCommand::Pull(args) => install::pull(args, &home),
        PluginCommand::Install(args) => install::install(args, &home),
        PluginCommand::Update(args) => install::update(args, &home),
        PluginCommand::Ls(args) => install::ls(args, &home),
        PluginCommand::New(_) | PluginCommand::Build(_) | PluginCommand::Call(_) => {
            unreachable!("handled above")
        }
    };
    match result {
        Ok(()) => crate::exit::SUCCESS,
        Err(message) => {
            crate::report_error(message);
            crate::exit::BAD_INPUT
        }
    }
}

/// A package targets a WIT version this wfhost serves.
fn check_served(plugin: &wfhost_distribution::manifest::PluginManifest) -> Result<(), String> {
    let served = wfhost_runtime::admission::served_versions();
    if served.contains(&plugin.wit.as_str()) {
        return Ok(());
    }
    Err(format!(
        "`{}` {} targets wfhost:plugin@{}, but this wfhost serves wfhost:plugin {}",
        plugin.name,
        plugin.version,
        plugin.wit,
        served.join(", ")
    ))
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
