//! `wfhost`: run workflows of sandboxed WebAssembly block workers.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod run;

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
#[command(name = "wfhost", version, about = "Run workflows of sandboxed WebAssembly block workers")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a workflow to completion.
    Run(run::RunArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Run(args) => run::run(args),
    };
    ExitCode::from(code)
}

/// Print an error the way every wfhost error looks.
pub fn report_error(message: impl std::fmt::Display) {
    for line in message.to_string().lines() {
        eprintln!("error: {line}");
    }
}

/// Resolve a user-given directory for error messages.
pub fn display_path(path: &std::path::Path) -> String {
    PathBuf::from(path).display().to_string()
}
