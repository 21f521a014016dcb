//! `wfhost run`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use wfhost_core::engine::{self, RunEvent, RunOptions, RunStatus};
use wfhost_core::manifest;
use wfhost_runtime::cache::CacheOutcome;

use crate::{builtin_names, exit, load_plugins, report_error, start_runtime};

#[derive(Args)]
pub struct RunArgs {
    /// The workflow manifest (JSON).
    manifest: PathBuf,
    /// The workspace the blocks work in (default: the current directory).
    #[arg(long, short = 'w', default_value = ".")]
    workspace: PathBuf,
    /// Where compiled plugins are cached (default: $WFHOST_CACHE_DIR, else
    /// ~/.cache/wfhost/components).
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Compile plugins without reading or writing the cache.
    #[arg(long, conflicts_with = "cache_dir")]
    no_cache: bool,
    /// Stop a run after this many blocks (loop protection).
    #[arg(long, default_value_t = 10_000)]
    max_steps: u64,
    /// Also print plugin loads and every block's log.
    #[arg(long, short, conflicts_with = "json")]
    verbose: bool,
    /// Print only a JSON report of the run (status, statistics per run and
    /// per block) on stdout.
    #[arg(long)]
    json: bool,
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

pub fn run(args: RunArgs) -> u8 {
    let workflow = match manifest::load(&args.manifest, &builtin_names()) {
        Ok(wf) => wf,
        Err(errors) => {
            report_error(errors);
            return exit::BAD_INPUT;
        }
    };
    match std::fs::metadata(&args.workspace) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            report_error(format!(
                "workspace {} is not a directory",
                args.workspace.display()
            ));
            return exit::BAD_INPUT;
        }
        Err(e) => {
            report_error(format!("workspace {}: {e}", args.workspace.display()));
            return exit::BAD_INPUT;
        }
    }

    let runtime = match start_runtime(args.cache_dir, args.no_cache) {
        Ok(rt) => rt,
        Err(e) => {
            report_error(e);
            return exit::BAD_INPUT;
        }
    };
    let plugins = match load_plugins(runtime, &workflow, &args.workspace) {
        Ok(p) => p,
        Err(e) => {
            report_error(e);
            return exit::BAD_INPUT;
        }
    };
    if args.verbose {
        for load in plugins.loads() {
            let how = match load.outcome {
                CacheOutcome::Hit => "compiled cache hit",
                CacheOutcome::Compiled => "compiled",
            };
            println!(
                "plugin {} ({}, {}): {how}, sha256 {}",
                load.name,
                load.world.name(),
                load.origin,
                &load.digest[..16]
            );
        }
    }

    let wf = &workflow.workflow;
    let json = args.json;
    if !json {
        println!(
            "running {} ({}) in {}",
            wf.id,
            workflow.file.display(),
            plugins.workspace().display()
        );
    }
    let execution_id = format!(
        "run-{:x}-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default(),
        std::process::id()
    );
    let mut options = RunOptions::new(execution_id.clone());
    options.max_steps = args.max_steps;
    let verbose = args.verbose;
    let mut observer = move |event: RunEvent<'_>| match event {
        _ if json => {}
        RunEvent::BlockStarted { .. } => {}
        RunEvent::BlockFinished {
            step,
            node,
            block,
            signal,
            duration,
            failure,
            log,
            ..
        } => {
            match failure {
                None => println!("  [{step}] {node}.{block} -> {signal} ({})", ms(duration)),
                Some(why) => println!(
                    "  [{step}] {node}.{block} -> {signal} ({}): block failed: {why}",
                    ms(duration)
                ),
            }
            if verbose {
                for line in log {
                    println!("        {line}");
                }
            }
        }
        RunEvent::ActionTaken {
            action, command, ..
        } => {
            println!("        {action}: {command}");
        }
    };

    let tokio = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            report_error(format!("cannot start the async runtime: {e}"));
            return exit::BAD_INPUT;
        }
    };
    let report = tokio.block_on(engine::run(wf, &plugins, &plugins, &options, &mut observer));
    let code = match &report.status {
        RunStatus::Succeeded => exit::SUCCESS,
        RunStatus::Failed { .. } => exit::RUN_FAILED,
        RunStatus::WaitingAtGate { .. } => exit::WAITING_AT_GATE,
    };
    if json {
        let (status, detail) = match &report.status {
            RunStatus::Succeeded => ("succeeded", serde_json::Value::Null),
            RunStatus::Failed { reason } => ("failed", serde_json::json!({ "reason": reason })),
            RunStatus::WaitingAtGate {
                node,
                block,
                prompt,
            } => (
                "waiting",
                serde_json::json!({ "gate": { "node": node, "block": block, "prompt": prompt } }),
            ),
        };
        let mut out = serde_json::json!({
            "workflow": wf.id,
            "manifest": workflow.file.display().to_string(),
            "execution_id": execution_id,
            "status": status,
            "steps": report.steps,
            "duration_ms": report.duration.as_secs_f64() * 1000.0,
            "statistics": report.statistics,
            "blocks": report.blocks,
            "payload": report.payload,
        });
        if let (Some(out), serde_json::Value::Object(extra)) = (out.as_object_mut(), detail) {
            out.extend(extra);
        }
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return code;
    }
    let stats = report.statistics;
    let summary = format!(
        "{} steps, {} lines written, {} tokens, {}",
        report.steps,
        stats.lines_written,
        stats.tokens_used,
        ms(report.duration)
    );
    match report.status {
        RunStatus::Succeeded => println!("run succeeded: {summary}"),
        RunStatus::Failed { reason } => {
            println!("run failed: {summary}");
            report_error(reason);
        }
        RunStatus::WaitingAtGate {
            node,
            block,
            prompt,
        } => println!("run waiting at a gate after {node}.{block}: {prompt} ({summary})"),
    }
    for (name, b) in &report.blocks {
        println!(
            "  {name}: {} run{}, {} tokens, {} lines, {}{}",
            b.attempts,
            if b.attempts == 1 { "" } else { "s" },
            b.tokens_used,
            b.lines_written,
            ms(b.duration),
            if b.failures > 0 {
                format!(", {} failed", b.failures)
            } else {
                String::new()
            }
        );
    }
    code
}
