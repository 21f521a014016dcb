//! `wfhost agents submit`: `wfhost agent` processes as one Slurm job array,
//! so that a server's jobs run on the cluster's nodes.
//!
//! One `sbatch --array=0-(N-1)` job, its options as `#SBATCH` lines of the
//! script (what `--print` shows is exactly what is submitted, on stdin);
//! each task `exec`s this very `wfhost` executable as `wfhost agent --name
//! <prefix>-<array job id>_<task id>`. The job carries the comment
//! `wfhost-agent=<server URL>` ([`wfhost_exec::slurm::AGENT_COMMENT_PREFIX`]),
//! which `wfhost gc` does not take for a block's job left behind: the
//! agents are meant to outlive the process that submitted them. `scancel`
//! stops them; each hands back the job it was running (see `agent`).
//!
//! What runs on the nodes must see, at the same paths: this executable,
//! the token file, the log directory, and the workspaces of the runs (and
//! `WFHOST_LANES_DIR`) — a shared filesystem.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::read_token;
use wfhost_app::jobs::submit::{
    Cache, MAX_AGENTS, Plan, absolute, batch_script, check_prefix, check_sbatch_args, check_value,
    sbatch, utf8,
};

use crate::{Global, Home, examples, exit, report_error};

#[derive(Subcommand)]
pub enum AgentsCommand {
    /// Submit `wfhost agent`s as one Slurm job array: each task leases and
    /// runs the server's jobs on a cluster node until it is cancelled.
    #[command(after_help = examples::AGENTS_SUBMIT)]
    Submit(SubmitArgs),
}

#[derive(Args)]
pub struct SubmitArgs {
    /// How many agents: the tasks of one Slurm job array (1 to 1000).
    #[arg(long = "slurm", value_name = "N")]
    count: u32,
    #[command(flatten)]
    runner: crate::options::RunnerOptions,
    /// The Slurm partition (default: the cluster's default partition).
    #[arg(long, value_name = "PARTITION")]
    partition: Option<String>,
    /// The agents' time limit, in Slurm's format (`60`, `1-00:00:00`);
    /// default: the partition's. At the limit each stops and hands back
    /// its job.
    #[arg(long, value_name = "LIMIT")]
    time: Option<String>,
    /// The agents are named `<NAME>-<array job id>_<task id>`.
    #[arg(long, default_value = "slurm", value_name = "NAME")]
    name_prefix: String,
    /// Where each agent's output goes, as `<array job id>_<task id>.log`
    /// (default: `agent-jobs/` in the wfhost home). The nodes must see it.
    #[arg(long, value_name = "DIR")]
    log_dir: Option<PathBuf>,
    /// One more `sbatch` option for the job, e.g. `--sbatch-arg=--account=lab`
    /// (repeatable). The options wfhost sets itself are refused.
    #[arg(long = "sbatch-arg", value_name = "ARG", allow_hyphen_values = true)]
    sbatch_args: Vec<String>,
    /// Print the batch script instead of submitting it (to read, or to
    /// adapt and submit with `sbatch` yourself).
    #[arg(long)]
    print: bool,
}

pub fn agents(command: AgentsCommand, home: &Home) -> u8 {
    match command {
        AgentsCommand::Submit(args) => submit(args, &Global::from(home)),
    }
}

fn submit(args: SubmitArgs, global: &Global) -> u8 {
    let print = args.print;
    let plan = match plan(args, global) {
        Ok(plan) => plan,
        Err(code) => return code,
    };
    let script = batch_script(&plan);
    if print {
        print!("{script}");
        return exit::SUCCESS;
    }
    if let Err(e) = std::fs::create_dir_all(&plan.log_dir) {
        report_error(format!(
            "cannot create the agents' log directory {}: {e}",
            plan.log_dir
        ));
        return exit::BAD_INPUT;
    }
    let job_id = match sbatch(&script) {
        Ok(id) => id,
        Err(e) => {
            report_error(e);
            return exit::BAD_INPUT;
        }
    };
    let last = plan.count - 1;
    println!(
        "submitted {} as Slurm job array {job_id}{}: {}-{job_id}_0{}",
        wfhost_core::text::count(u64::from(plan.count), "wfhost agent"),
        plan.partition
            .as_deref()
            .map(|p| format!(" on partition {p}"))
            .unwrap_or_default(),
        plan.name_prefix,
        match last {
            0 => String::new(),
            1 => format!(" and {}-{job_id}_1", plan.name_prefix),
            _ => format!(" … {}-{job_id}_{last}", plan.name_prefix),
        }
    );
    println!("  leasing from: {}", plan.server);
    println!("  logs:         {}/{job_id}_<task>.log", plan.log_dir);
    println!("  stop them:    scancel {job_id}");
    exit::SUCCESS
}

/// The checked plan of `args`; the error is reported, its exit code returned.
fn plan(args: SubmitArgs, global: &Global) -> Result<Plan, u8> {
    let bad = |message: String| {
        report_error(message);
        exit::BAD_INPUT
    };
    if args.count == 0 || args.count > MAX_AGENTS {
        return Err(bad(format!(
            "--slurm {}: give 1 to {MAX_AGENTS} agents",
            args.count
        )));
    }
    args.runner.check().map_err(bad)?;
    if args.runner.server.chars().any(char::is_control) {
        return Err(bad(format!(
            "--server {}: a URL without control characters",
            args.runner.server.escape_debug()
        )));
    }
    check_prefix(&args.name_prefix).map_err(bad)?;
    for (flag, value) in [("--partition", &args.partition), ("--time", &args.time)] {
        if let Some(v) = value {
            check_value(flag, v).map_err(bad)?;
        }
    }
    check_sbatch_args(&args.sbatch_args).map_err(bad)?;
    let exe = std::env::current_exe()
        .map_err(|e| bad(format!("cannot tell which wfhost executable this is: {e}")))?;
    let exe = utf8("the wfhost executable", &exe).map_err(bad)?;
    let token_file = match &args.runner.token_file {
        Some(file) => {
            // The nodes read it again; here it is checked as they will.
            read_token(file).map_err(bad)?;
            Some(absolute("--token-file", file).map_err(bad)?)
        }
        None => None,
    };
    let mut tls = Vec::new();
    for (flag, file) in [
        ("--ca", &args.runner.ca),
        ("--client-cert", &args.runner.client_cert),
        ("--client-key", &args.runner.client_key),
    ] {
        if let Some(file) = file {
            tls.push((flag.to_string(), absolute(flag, file).map_err(bad)?));
        }
    }
    let cache = match (&args.runner.cache.cache_dir, args.runner.cache.no_cache) {
        (_, true) => Cache::Off,
        (Some(dir), false) => Cache::Dir(absolute("--cache-dir", dir).map_err(bad)?),
        (None, false) => Cache::Default,
    };
    let log_dir = match &args.log_dir {
        Some(dir) => absolute("--log-dir", dir).map_err(bad)?,
        None => {
            let home = global.home()?;
            absolute("the wfhost home", &home.join("agent-jobs")).map_err(bad)?
        }
    };
    if log_dir.contains('\\') {
        // sbatch leaves a file name with a backslash unexpanded.
        return Err(bad(format!(
            "the log directory {log_dir} has a backslash: sbatch would not name the logs by job; give another --log-dir"
        )));
    }
    Ok(Plan {
        count: args.count,
        exe,
        server: args.runner.server,
        partition: args.partition,
        time: args.time,
        capabilities: args.runner.capabilities,
        concurrency: args.runner.concurrency,
        token_file,
        tls,
        cache,
        name_prefix: args.name_prefix,
        log_dir,
        sbatch_args: args.sbatch_args,
    })
}
