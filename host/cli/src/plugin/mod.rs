//! `wfhost plugin`: write, build, package, sign, publish and install
//! plugins. One file per subcommand.

mod build;
mod call;
mod new;

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
}

/// Run a `wfhost plugin` subcommand; returns the exit code.
pub fn plugin(command: PluginCommand) -> u8 {
    match command {
        PluginCommand::New(args) => new::new(args),
        PluginCommand::Build(args) => build::build(args),
        PluginCommand::Call(args) => call::call(args),
    }
}
