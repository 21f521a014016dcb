//! `wfhost`: run workflows of sandboxed WebAssembly block workers.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod inspect;
mod list;
mod run;
mod validate;

use std::path::PathBuf;
use std::sync::Arc;

use wfhost_runtime::{RuntimeConfig, WasmRuntime};

/// Exit codes, documented in the README.
pub mod exit {
    /// The run succeeded.
    pub const SUCCESS: u8 = 0;
    /// The run executed and failed.
    pub const RUN_FAILED: u8 = 1;
    /// Bad input: manifest, plugin, workspace or usage. Nothing ran.
    pub const BAD_INPUT: u8 = 2;
    /// The run paused at a human gate.
    pub const WAITING_AT_GATE: u8 = 3;
}

#[derive(Parser)]
#[command(
    name = "wfhost",
    version,
    about = "Run workflows of sandboxed WebAssembly block workers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a workflow to completion.
    Run(run::RunArgs),
    /// Check a workflow and its plugins without running it.
    Validate(validate::ValidateArgs),
    /// Show a workflow's graph as text, Mermaid or DOT.
    Inspect(inspect::InspectArgs),
    /// List the workflows found under a directory.
    List(list::ListArgs),
    /// Print the JSON Schema of the workflow manifest.
    Schema,
}

fn main() -> ExitCode {
    // Like other Unix tools, end quietly when the reader of our output goes
    // away (`wfhost run ... | head`) instead of panicking on a broken pipe.
    // SAFETY: called before any other thread exists; SIG_DFL is always valid.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Validate(args) => validate::validate(args),
        Command::Inspect(args) => inspect::inspect(args),
        Command::List(args) => list::list(args),
        Command::Schema => {
            let schema = wfhost_core::manifest::json_schema();
            println!(
                "{}",
                serde_json::to_string_pretty(&schema).unwrap_or_default()
            );
            exit::SUCCESS
        }
    };
    ExitCode::from(code)
}

/// Names of the plugins embedded in the binary.
pub fn builtin_names() -> Vec<&'static str> {
    wfhost_guest_artifacts::BUILTIN_PLUGINS
        .iter()
        .map(|(name, _)| *name)
        .collect()
}

/// The wasm runtime with the cache the user asked for.
pub fn start_runtime(
    cache_dir: Option<PathBuf>,
    no_cache: bool,
) -> Result<Arc<WasmRuntime>, String> {
    let mut config = RuntimeConfig::default();
    if no_cache {
        config.cache_dir = None;
    } else if let Some(dir) = cache_dir {
        config.cache_dir = Some(dir);
    }
    WasmRuntime::new(config)
        .map(Arc::new)
        .map_err(|e| format!("cannot start the wasm runtime: {e:#}"))
}

/// Load and admit every plugin a workflow uses; the error names the
/// manifest, the plugin and what is wrong.
pub fn load_plugins(
    runtime: Arc<WasmRuntime>,
    workflow: &wfhost_core::manifest::LoadedWorkflow,
    workspace: &std::path::Path,
) -> Result<wfhost_runtime::PluginSet, String> {
    wfhost_runtime::PluginSet::for_workflow(
        runtime,
        workflow,
        wfhost_guest_artifacts::BUILTIN_PLUGINS,
        workspace,
    )
    .map_err(|e| format!("{}: {e}", workflow.file.display()))
}

/// Print an error the way every wfhost error looks.
pub fn report_error(message: impl std::fmt::Display) {
    for line in message.to_string().lines() {
        eprintln!("error: {line}");
    }
}
