//! `wfhost mcp`: the MCP server on stdio, with this binary's wasm runtime
//! executing the blocks between the ones the client performs.

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

use wfhost_mcp::service::{Service, Settings};

use crate::{Global, builtin_names, exit, report_error};

#[derive(clap::Args)]
pub struct McpArgs {
    #[command(subcommand)]
    command: Option<McpCommand>,
    /// A directory of workflows the client may run (`DIR/*.json` and
    /// `DIR/*/workflow.json`); repeat for more. Default: `./workflows`.
    #[arg(long = "workflows", value_name = "DIR")]
    workflows: Vec<PathBuf>,
    /// Where runs work unless the client names a directory
    /// (`workspacePath`). Default: the current directory.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    #[command(flatten)]
    cache: crate::options::CacheOptions,
}

#[derive(clap::Subcommand)]
enum McpCommand {
    /// Sign new tokens with a new key; tokens signed with the previous key
    /// stay valid, older ones are refused.
    RotateKey,
}

pub fn mcp(args: McpArgs, global: &Global) -> u8 {
    let home = match global.home() {
        Ok(h) => h,
        Err(code) => return code,
    };
    if let Some(McpCommand::RotateKey) = args.command {
        return match wfhost_mcp::keys::Keyring::rotate(&home) {
            Ok(kid) => {
                println!(
                    "new token key {kid} in {}; tokens of key {} stay valid until the next rotation",
                    home.join(wfhost_mcp::keys::KEY_FILE).display(),
                    kid - 1
                );
                exit::SUCCESS
            }
            Err(e) => {
                report_error(e);
                exit::BAD_INPUT
            }
        };
    }
    // Standard output carries protocol frames only: whatever else this
    // process (or a process it starts) prints goes to standard error.
    let protocol = match protocol_stdout() {
        Ok(fd) => fd,
        Err(e) => {
            report_error(format!("cannot set up standard output for MCP: {e}"));
            return exit::BAD_INPUT;
        }
    };
    let workflows = if args.workflows.is_empty() {
        vec![PathBuf::from("workflows")]
    } else {
        args.workflows.clone()
    };
    let workflows = workflows
        .iter()
        .map(|d| std::path::absolute(d).unwrap_or_else(|_| d.clone()))
        .collect();
    let workspace = args
        .workspace
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("."));
    let executor = wfhost_app::mcp::McpExecutor::new(home.clone(), args.cache.choice(None));
    let settings = Settings {
        home,
        durability: global.durability,
        workflow_dirs: workflows,
        workspace,
        builtins: builtin_names(),
    };
    let service = match Service::new(settings, executor) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            report_error(e);
            return exit::BAD_INPUT;
        }
    };
    let tokio = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            report_error(format!("cannot start the async runtime: {e}"));
            return exit::BAD_INPUT;
        }
    };
    let served = tokio.block_on(async {
        let out = tokio::fs::File::from_std(std::fs::File::from(protocol));
        wfhost_mcp::server::serve(service, tokio::io::stdin(), out).await
    });
    tokio.shutdown_background();
    match served {
        Ok(()) => exit::SUCCESS,
        Err(e) => {
            report_error(e);
            exit::RUN_FAILED
        }
    }
}

/// A copy of standard output for the protocol; standard output itself
/// then points at standard error.
pub fn protocol_stdout() -> std::io::Result<OwnedFd> {
    // SAFETY: dup and dup2 on the process's own standard descriptors; the
    // duplicate is owned by the returned OwnedFd alone.
    unsafe {
        let fd = libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::dup2(2, 1) < 0 {
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            return Err(e);
        }
        Ok(OwnedFd::from_raw_fd(fd))
    }
}
