//! `wfhost inspect`: a workflow's graph as text, Mermaid or DOT.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use wfhost_core::formats;
use wfhost_core::manifest::graph;

use crate::{builtin_names, exit, report_error};

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Mermaid,
    Dot,
}

#[derive(Args)]
pub struct InspectArgs {
    /// The workflow manifest (JSON).
    manifest: PathBuf,
    /// Output format.
    #[arg(long, short, value_enum, default_value = "text")]
    format: Format,
}

pub fn inspect(args: InspectArgs) -> u8 {
    let workflow = match formats::load(&args.manifest, &builtin_names()) {
        Ok(wf) => wf,
        Err(errors) => {
            report_error(errors);
            return exit::BAD_INPUT;
        }
    };
    let wf = &workflow.workflow;
    let rendered = match args.format {
        Format::Text => graph::text(wf),
        Format::Mermaid => graph::mermaid(wf),
        Format::Dot => graph::dot(wf),
    };
    print!("{rendered}");
    exit::SUCCESS
}
