//! `wfhost rerun`: run a run again after a fix, as a new run with its
//! inputs, workspace and executor — from the beginning or from one of its
//! steps — under the manifest as it is now (or the pinned definition).
//! The planning is `wfhost_app::rerun`; this parses and prints.

use clap::{Args, ValueEnum};
use wfhost_app::rerun::Definition;
use wfhost_protocol::AppError;

use crate::options::{CacheOptions, OutputOptions};
use crate::run::{InputSource, RunSpec};
use crate::{Global, fail};

#[derive(Args)]
pub struct RerunArgs {
    /// The run to run again: its id, or any part of it that is unique.
    run: String,
    /// Start at this step of the run (a step number, or a block:
    /// `node.block` or a block name, at its last execution) with the
    /// payload and block outputs the run had before it; default: the
    /// beginning.
    #[arg(long, value_name = "STEP|BLOCK")]
    from: Option<String>,
    /// Which definition to execute: the manifest file as it is now
    /// (`current`: the fix) or the one the run was pinned to (`pinned`).
    #[arg(long, value_enum, default_value_t = DefinitionArg::Current)]
    definition: DefinitionArg,
    /// Where exec blocks that name no executor run (default: the one the
    /// run was started with).
    #[arg(long, value_name = "EXECUTOR")]
    executor: Option<wfhost_exec::Executor>,
    /// Run even if another run is using the workspace.
    #[arg(long)]
    shared_workspace: bool,
    /// Fail the run after this many block executions.
    #[arg(long, default_value_t = 10_000)]
    max_steps: u64,
    #[command(flatten)]
    cache: CacheOptions,
    #[command(flatten)]
    output: OutputOptions,
}

#[derive(Clone, Copy, ValueEnum)]
enum DefinitionArg {
    Current,
    Pinned,
}

pub fn rerun(args: RerunArgs, global: &Global) -> u8 {
    start(args, global).unwrap_or_else(fail)
}

fn start(args: RerunArgs, global: &Global) -> Result<u8, AppError> {
    let store = global.app_existing_store()?;
    let old = store
        .resolve_run(&args.run)
        .map_err(wfhost_app::store_error)?;
    let definition = match args.definition {
        DefinitionArg::Current => Definition::Current,
        DefinitionArg::Pinned => Definition::Pinned,
    };
    let plan = wfhost_app::rerun::plan(&store, &old, args.from.as_deref(), definition)?;
    drop(store);
    let executor = match args.executor {
        Some(executor) => executor,
        None if plan.executor.is_empty() => wfhost_exec::Executor::Local,
        None => plan.executor.parse().map_err(|e| {
            AppError::bad_input(format!(
                "run {}: its recorded executor `{}`: {e}",
                old.id, plan.executor
            ))
        })?,
    };
    let output: crate::execute::Output = args.output.into();
    if !output.json && !output.quiet {
        println!("{}", provenance(&old.id, &plan));
    }
    let spec = RunSpec {
        manifest: plan.manifest,
        workspace: Some(plan.workspace),
        shared_workspace: args.shared_workspace,
        runtime: args.cache.choice(None),
        max_steps: args.max_steps,
        output,
        inputs: InputSource::Given(Some(plan.inputs)),
        executor,
        session: None,
        run_id: None,
        definition: Some(plan.definition),
        rerun: Some(plan.seed),
    };
    crate::run::start(spec, global, &mut |_| {})
}

/// `rerun of RUN from step 3 (main.build)`.
fn provenance(old: &str, plan: &wfhost_app::rerun::Plan) -> String {
    let from = match (&plan.seed.rerun_of.from_step, &plan.seed.start_at) {
        (Some(step), Some((node, block))) => format!(" from its step {step} ({node}.{block})"),
        _ => " from the beginning".to_string(),
    };
    format!("rerun of {old}{from}")
}
