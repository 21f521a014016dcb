//! `wfhost validate`: everything `run` checks before it starts, plus
//! warnings about things that are legal but probably wrong; as text, or
//! as one JSON object (`--json`).

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;
use wfhost_core::formats;
use wfhost_core::manifest::{LoadedWorkflow, ManifestError, ManifestErrors, analysis};

use crate::{builtin_names, exit, load_plugins, report_error, start_runtime};

#[derive(Args)]
pub struct ValidateArgs {
    /// The workflow manifest (JSON).
    manifest: PathBuf,
    /// Treat warnings as errors (exit code 1).
    #[arg(long)]
    strict: bool,
    /// Print one JSON object: `ok`, the workflow's counts, `errors` and
    /// `warnings`, each with its `location` (JSON pointer or line:column).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    cache: crate::options::CacheOptions,
}

use wfhost_app::checks::{agent_presets, exec_policy, signal_warnings, slurm_options};

/// An error or a warning, where it is.
#[derive(Serialize)]
struct Problem {
    file: String,
    location: Option<String>,
    message: String,
}

impl From<&ManifestError> for Problem {
    fn from(e: &ManifestError) -> Problem {
        Problem {
            file: e.file.display().to_string(),
            location: e.location.clone(),
            message: e.message.clone(),
        }
    }
}

/// What `validate` found: the JSON it prints with `--json`.
#[derive(Serialize)]
struct Report {
    file: String,
    ok: bool,
    /// Absent when the workflow could not be read.
    workflow: Option<Summary>,
    errors: Vec<Problem>,
    warnings: Vec<Problem>,
}

#[derive(Serialize)]
struct Summary {
    id: String,
    version: Option<String>,
    nodes: usize,
    blocks: usize,
    plugins: usize,
}

pub fn validate(args: ValidateArgs) -> u8 {
    let report = check(&args);
    let failed_strict = args.strict && !report.warnings.is_empty();
    let code = match (&report.workflow, report.errors.is_empty()) {
        (_, false) => exit::BAD_INPUT,
        _ if failed_strict => exit::RUN_FAILED,
        _ => exit::SUCCESS,
    };
    let report = Report {
        ok: code == exit::SUCCESS,
        ..report
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        print_text(&report, failed_strict);
    }
    code
}

/// Every check `run` makes before it starts, nothing run.
fn check(args: &ValidateArgs) -> Report {
    let mut report = Report {
        file: args.manifest.display().to_string(),
        ok: false,
        workflow: None,
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    let workflow = match formats::load(&args.manifest, &builtin_names()) {
        Ok(wf) => wf,
        Err(errors) => {
            report.errors = problems(&errors);
            return report;
        }
    };
    report.file = workflow.file.display().to_string();
    for checked in [slurm_options, agent_presets, exec_policy] {
        if let Err(errors) = checked(&workflow) {
            report.errors = problems(&errors);
            return report;
        }
    }
    // Loading the plugins checks that each is a component of the right
    // world importing only what it is granted. Nothing runs.
    let plugins = match plugins_of(args, &workflow) {
        Ok(plugins) => plugins,
        Err(message) => {
            report.errors.push(Problem {
                file: report.file.clone(),
                location: None,
                message,
            });
            return report;
        }
    };
    let wf = &workflow.workflow;
    let mut warnings = analysis::warnings(wf);
    warnings.extend(signal_warnings(wf, &plugins));
    report.warnings = warnings
        .into_iter()
        .map(|w| Problem {
            file: report.file.clone(),
            location: Some(w.location),
            message: w.message,
        })
        .collect();
    report.workflow = Some(Summary {
        id: wf.id.clone(),
        version: wf.version.clone(),
        nodes: wf.nodes.len(),
        blocks: wf.nodes.values().map(|n| n.blocks.len()).sum(),
        plugins: plugins.loads().len(),
    });
    report
}

fn problems(errors: &ManifestErrors) -> Vec<Problem> {
    errors.0.iter().map(Problem::from).collect()
}

fn plugins_of(
    args: &ValidateArgs,
    workflow: &LoadedWorkflow,
) -> Result<wfhost_runtime::PluginSet, String> {
    let choice = args.cache.choice(None);
    let runtime = start_runtime(&choice, wfhost_exec::Executor::Local, None)
        .map_err(|e| e.message.clone())?;
    load_plugins(runtime, workflow, workflow.base_dir(), None).map_err(|e| e.message.clone())
}

/// The errors (one `error:` line each), the warnings, and the summary.
fn print_text(report: &Report, failed_strict: bool) {
    for e in &report.errors {
        report_error(line(e));
    }
    for w in &report.warnings {
        eprintln!("warning: {}", line(w));
    }
    let Some(wf) = &report.workflow else {
        return;
    };
    let count = |n: usize, noun: &str| wfhost_core::text::count(n as u64, noun);
    println!(
        "{}: {}: workflow `{}`{}: {}, {}, {}{}",
        report.file,
        if failed_strict {
            "failed (--strict)"
        } else {
            "ok"
        },
        wf.id,
        wf.version
            .as_deref()
            .map(|v| format!(" {v}"))
            .unwrap_or_default(),
        count(wf.nodes, "node"),
        count(wf.blocks, "block"),
        count(wf.plugins, "plugin"),
        match report.warnings.len() {
            0 => String::new(),
            n => format!(", {}", count(n, "warning")),
        }
    );
}

/// `FILE: LOCATION: MESSAGE`, as every wfhost error reads.
fn line(p: &Problem) -> String {
    match &p.location {
        Some(at) => format!("{}: {at}: {}", p.file, p.message),
        None => p.message.clone(),
    }
}
