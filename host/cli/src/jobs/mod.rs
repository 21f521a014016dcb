//! `wfhost agent` (the job runner, `wfhost_app::jobs::runner`, started
//! with its options and stopped on signals) and agents submitted as a
//! Slurm job array (`submit`: `wfhost agents submit`).

pub mod submit;

use clap::Args;

use crate::{exit, report_error};

pub use wfhost_app::jobs::http::Server;
use wfhost_app::jobs::runner as agent;

#[derive(Args)]
pub struct AgentArgs {
    #[command(flatten)]
    runner: crate::options::RunnerOptions,
    /// The agent's name in leases and job histories (default: the host
    /// name and the process id).
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
}

/// The capabilities an agent may claim.
pub const CAPABILITIES: [&str; 4] = wfhost_server::jobs::CAPABILITIES;

/// How long a stopping agent may take to stop its jobs and hand them
/// back before it exits anyway (their leases then run out).
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

pub fn agent(args: AgentArgs) -> u8 {
    let config = match agent_config(args) {
        Ok(c) => c,
        Err(e) => {
            report_error(e);
            return exit::BAD_INPUT;
        }
    };
    if let Err(e) = agent::stop_on_signals() {
        report_error(format!("cannot watch for SIGINT and SIGTERM: {e}"));
        return exit::BAD_INPUT;
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            report_error(format!("cannot start the agent's runtime: {e}"));
            return exit::BAD_INPUT;
        }
    };
    let name = config.name.clone();
    println!(
        "wfhost agent {name}: leasing jobs from {} ({})",
        config.server.url(),
        config.capabilities.join(", ")
    );
    let (ask, stop) = tokio::sync::watch::channel(None);
    let ended = runtime.block_on(async {
        let run = agent::run(config, stop);
        tokio::pin!(run);
        tokio::select! {
            ended = &mut run => (None, Some(ended)),
            signal = agent::signalled() => {
                // Lease nothing more; stop the jobs and hand them back.
                let _ = ask.send(Some(signal));
                (Some(signal), tokio::time::timeout(STOP_GRACE, &mut run).await.ok())
            }
        }
    });
    // A job still running is dropped with the runtime: its processes stop.
    runtime.shutdown_background();
    match ended {
        (_, Some(agent::Ended::Failed(why))) => {
            report_error(why);
            exit::BAD_INPUT
        }
        (signal, Some(agent::Ended::Stopped { handed_back })) => {
            println!(
                "wfhost agent {name}: stopped ({}); {} handed back",
                signal.unwrap_or("asked to"),
                wfhost_core::text::count(handed_back as u64, "job")
            );
            exit::SUCCESS
        }
        (signal, None) => {
            report_error(format!(
                "agent {name}: did not stop within {} s of {}: the leases of its jobs will run out instead",
                STOP_GRACE.as_secs(),
                signal.unwrap_or("the stop")
            ));
            exit::INTERRUPTED
        }
    }
}

fn agent_config(args: AgentArgs) -> Result<agent::AgentConfig, String> {
    let mut server = args.runner.check()?;
    if let Some(file) = &args.runner.token_file {
        server.token = Some(read_token(file)?);
    }
    let name = args
        .name
        .unwrap_or_else(|| format!("{}-{}", wfhost_exec::hostname(), std::process::id()));
    Ok(agent::AgentConfig {
        server,
        name,
        capabilities: args.runner.capabilities,
        concurrency: args.runner.concurrency,
        cache_dir: args.runner.cache.cache_dir,
        cache_disabled: args.runner.cache.no_cache,
        report_jobs: true,
    })
}

fn read_token(file: &std::path::Path) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let bytes = wfhost_core::workspace::regular_file::read_regular(file, 4096)
        .map_err(|e| format!("cannot read the token file {}: {e}", file.display()))?;
    let mode = std::fs::metadata(file)
        .map_err(|e| format!("{}: {e}", file.display()))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        return Err(format!(
            "the token file {} can be read by other users; `chmod 600` it",
            file.display()
        ));
    }
    let token = String::from_utf8_lossy(&bytes).trim().to_string();
    if token.is_empty() {
        return Err(format!("the token file {} is empty", file.display()));
    }
    Ok(token)
}
