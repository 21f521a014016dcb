//! `wfhost export` and `wfhost import`: a run as one versioned file.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use wfhost_store::Bundle;

use crate::{Global, exit, report_error, store_error};

#[derive(Args)]
pub struct ExportArgs {
    /// The run: its id, or any part of it that is unique.
    run: String,
    /// The bundle file to write; `-` writes it to standard output.
    #[arg(long, short)]
    output: PathBuf,
}

#[derive(Args)]
pub struct ImportArgs {
    /// A bundle written by `wfhost export`.
    file: PathBuf,
}

pub fn export(args: ExportArgs, global: &Global) -> u8 {
    let store = match global.existing_store() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let bundle = match store.export(&args.run) {
        Ok(b) => b,
        Err(e) => return store_error(e),
    };
    let json = match serde_json::to_vec_pretty(&bundle) {
        Ok(j) => j,
        Err(e) => {
            report_error(format!("cannot serialize the bundle: {e}"));
            return exit::RUN_FAILED;
        }
    };
    if args.output.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        if let Err(e) = out.write_all(&json).and_then(|()| out.flush()) {
            report_error(format!("cannot write the bundle to standard output: {e}"));
            return exit::RUN_FAILED;
        }
        return exit::SUCCESS;
    }
    // Write beside the target and rename, so that a failed export never
    // leaves half a bundle where a whole one is expected.
    let dir = match args.output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let written = tempfile::NamedTempFile::new_in(&dir).and_then(|mut tmp| {
        tmp.write_all(&json)?;
        tmp.as_file().sync_all()?;
        tmp.persist(&args.output).map_err(|e| e.error)?;
        Ok(())
    });
    if let Err(e) = written {
        report_error(format!("cannot write {}: {e}", args.output.display()));
        return exit::BAD_INPUT;
    }
    println!(
        "exported run {} ({} events) to {}",
        bundle.run.id,
        bundle.events.len(),
        args.output.display()
    );
    exit::SUCCESS
}

pub fn import(args: ImportArgs, global: &Global) -> u8 {
    let text = match std::fs::read(&args.file) {
        Ok(t) => t,
        Err(e) => {
            report_error(format!("cannot read {}: {e}", args.file.display()));
            return exit::BAD_INPUT;
        }
    };
    let bundle = match Bundle::parse(&text) {
        Ok(b) => b,
        Err(e) => {
            report_error(format!("{}: {e}", args.file.display()));
            return exit::BAD_INPUT;
        }
    };
    let mut store = match global.open_store() {
        Ok(s) => s,
        Err(code) => return code,
    };
    if let Err(e) = store.import(&bundle) {
        return store_error(e);
    }
    println!(
        "imported run {} of {} ({} events)",
        bundle.run.id,
        bundle.run.workflow_id,
        bundle.events.len()
    );
    exit::SUCCESS
}
