//! `wfhost validate`: everything `run` checks before it starts, plus
//! warnings about things that are legal but probably wrong.

use std::path::PathBuf;

use clap::Args;
use wfhost_core::formats;
use wfhost_core::manifest::analysis;

use crate::{builtin_names, exit, load_plugins, report_error, start_runtime};

#[derive(Args)]
pub struct ValidateArgs {
    /// The workflow manifest (JSON).
    manifest: PathBuf,
    /// Treat warnings as errors (exit code 1).
    #[arg(long)]
    strict: bool,
    #[command(flatten)]
    cache: crate::options::CacheOptions,
}

use wfhost_app::checks::{agent_presets, exec_policy, signal_warnings, slurm_options};

pub fn validate(args: ValidateArgs) -> u8 {
    let workflow = match formats::load(&args.manifest, &builtin_names()) {
        Ok(wf) => wf,
        Err(errors) => {
            report_error(errors);
            return exit::BAD_INPUT;
        }
    };
    if let Err(errors) = slurm_options(&workflow) {
        report_error(errors);
        return exit::BAD_INPUT;
    }
    if let Err(errors) = agent_presets(&workflow) {
        report_error(errors);
        return exit::BAD_INPUT;
    }
    if let Err(errors) = exec_policy(&workflow) {
        report_error(errors);
        return exit::BAD_INPUT;
    }
    // Loading the plugins checks that each is a component of the right
    // world importing only what it is granted. Nothing runs.
    let choice = args.cache.choice(None);
    let runtime = match start_runtime(&choice, wfhost_exec::Executor::Local, None) {
        Ok(rt) => rt,
        Err(e) => {
            report_error(e);
            return exit::BAD_INPUT;
        }
    };
    let plugins = match load_plugins(runtime, &workflow, workflow.base_dir(), None) {
        Ok(p) => p,
        Err(e) => {
            report_error(e);
            return exit::BAD_INPUT;
        }
    };
    let wf = &workflow.workflow;
    let mut warnings = analysis::warnings(wf);
    warnings.extend(signal_warnings(wf, &plugins));
    for w in &warnings {
        eprintln!(
            "warning: {}: {}: {}",
            workflow.file.display(),
            w.location,
            w.message
        );
    }
    let blocks: usize = wf.nodes.values().map(|n| n.blocks.len()).sum();
    let count = |n: usize, noun: &str| wfhost_core::text::count(n as u64, noun);
    let failed = args.strict && !warnings.is_empty();
    println!(
        "{}: {}: workflow `{}`{}: {}, {}, {}{}",
        workflow.file.display(),
        if failed { "failed (--strict)" } else { "ok" },
        wf.id,
        wf.version
            .as_deref()
            .map(|v| format!(" {v}"))
            .unwrap_or_default(),
        count(wf.nodes.len(), "node"),
        count(blocks, "block"),
        count(plugins.loads().len(), "plugin"),
        match warnings.len() {
            0 => String::new(),
            n => format!(", {}", count(n, "warning")),
        }
    );
    if failed {
        return exit::RUN_FAILED;
    }
    exit::SUCCESS
}
