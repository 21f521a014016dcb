//! `wfhost`: run workflows of sandboxed WebAssembly block workers.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bundle;
mod execute;
mod gc;
mod inputs;
mod inspect;
mod list;
mod resume;
mod run;
mod runs;
mod session_files;
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
    /// Another wfhost process is executing the run.
    pub const BUSY: u8 = 4;
}

#[derive(Parser)]
#[command(
    name = "wfhost",
    version,
    about = "Run workflows of sandboxed WebAssembly block workers"
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// Options every command takes.
#[derive(clap::Args)]
pub struct Global {
    /// The wfhost home, where the run store lives (default: $WFHOST_HOME,
    /// else $XDG_DATA_HOME/wfhost, else ~/.local/share/wfhost).
    #[arg(long, global = true, value_name = "DIR")]
    home: Option<PathBuf>,
    /// How durable each recorded event is: `full` (on disk before the run
    /// goes on; survives power loss) or `normal` (survives a crash of
    /// wfhost, may lose the last events on power loss; faster).
    #[arg(
        long,
        global = true,
        default_value = "full",
        env = "WFHOST_DURABILITY",
        value_name = "full|normal"
    )]
    durability: wfhost_store::Durability,
}

impl Global {
    fn home(&self) -> Result<PathBuf, u8> {
        wfhost_store::resolve_home(self.home.as_deref()).map_err(store_error)
    }

    /// The store, created if needed (commands that start or continue runs).
    pub fn open_store(&self) -> Result<wfhost_store::Store, u8> {
        wfhost_store::Store::open(&self.home()?, self.durability).map_err(store_error)
    }

    /// The existing store (commands that only read, or add to an existing
    /// run): asking about a run never creates a store.
    pub fn existing_store(&self) -> Result<wfhost_store::Store, u8> {
        wfhost_store::Store::open_existing(&self.home()?).map_err(store_error)
    }
}

/// Print a store error; returns its exit code.
pub fn store_error(e: wfhost_store::StoreError) -> u8 {
    report_error(&e);
    match e {
        wfhost_store::StoreError::Busy { .. } => exit::BUSY,
        _ => exit::BAD_INPUT,
    }
}

#[derive(Subcommand)]
enum Command {
    /// Start a durable run of a workflow and execute it.
    Run(run::RunArgs),
    /// Continue a run whose host stopped (crash, kill, power loss).
    Resume(resume::ResumeArgs),
    /// Continue a run from an older snapshot, as a new branch.
    Fork(resume::ForkArgs),
    /// List the gates waiting for a human answer.
    Gates(runs::GatesArgs),
    /// Answer a gate (`approved` or `changes-requested:<text>`; a fan-in gate: `use-lane:<lane>`, `use-lane:<file>=<lane>,...` or `resolved`) and continue the run.
    Gate(resume::GateArgs),
    /// List the runs in the store.
    Runs(runs::RunsArgs),
    /// Show a run: branches, steps, signals, gates, statistics.
    Show(runs::ShowArgs),
    /// Print a run's event log (`--follow` to watch a live run).
    Events(runs::EventsArgs),
    /// Write a run, its pinned definition and its whole log to a bundle file.
    Export(bundle::ExportArgs),
    /// Add a run from a bundle file to the store.
    Import(bundle::ImportArgs),
    /// Remove runs older than a retention age.
    Gc(gc::GcArgs),
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
        Command::Run(args) => run::run(args, &cli.global),
        Command::Resume(args) => resume::resume(args, &cli.global),
        Command::Fork(args) => resume::fork(args, &cli.global),
        Command::Gate(args) => resume::gate(args, &cli.global),
        Command::Gates(args) => runs::gates(args, &cli.global),
        Command::Runs(args) => runs::runs(args, &cli.global),
        Command::Show(args) => runs::show(args, &cli.global),
        Command::Events(args) => runs::events(args, &cli.global),
        Command::Export(args) => bundle::export(args, &cli.global),
        Command::Import(args) => bundle::import(args, &cli.global),
        Command::Gc(args) => gc::gc(args, &cli.global),
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

/// The wasm runtime with the cache and default executor the user asked
/// for.
pub fn start_runtime(
    cache_dir: Option<PathBuf>,
    no_cache: bool,
    default_executor: wfhost_exec::Executor,
) -> Result<Arc<WasmRuntime>, String> {
    let mut config = RuntimeConfig {
        default_executor,
        ..RuntimeConfig::default()
    };
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
