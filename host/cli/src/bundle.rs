//! `wfhost export` and `wfhost import`: a run as one versioned file.

use std::io::Write;
use std::path::{Path, PathBuf};

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
    if let Err(code) = write_json(&bundle, &args.output) {
        return code;
    }
    if args.output.as_os_str() == "-" {
        return exit::SUCCESS;
    }
    println!(
        "exported run {} ({} events) to {}",
        bundle.run.id,
        bundle.events.len(),
        args.output.display()
    );
    exit::SUCCESS
}

/// Write `value` as pretty JSON to `output` (`-`: standard output), whole
/// or not at all: a file is written beside the target and renamed.
pub fn write_json<T: serde::Serialize>(value: &T, output: &Path) -> Result<(), u8> {
    let json = serde_json::to_vec_pretty(value).map_err(|e| {
        report_error(format!("cannot serialize the bundle: {e}"));
        exit::RUN_FAILED
    })?;
    if output.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        return out
            .write_all(&json)
            .and_then(|()| out.flush())
            .map_err(|e| {
                report_error(format!("cannot write the bundle to standard output: {e}"));
                exit::RUN_FAILED
            });
    }
    let dir = match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    tempfile::NamedTempFile::new_in(&dir)
        .and_then(|mut tmp| {
            tmp.write_all(&json)?;
            tmp.as_file().sync_all()?;
            tmp.persist(output).map_err(|e| e.error)?;
            Ok(())
        })
        .map_err(|e| {
            report_error(format!("cannot write {}: {e}", output.display()));
            exit::BAD_INPUT
        })
}

/// A bundle file's bytes; a read error names the file.
pub fn read_file(path: &Path) -> Result<Vec<u8>, u8> {
    std::fs::read(path).map_err(|e| {
        report_error(format!("cannot read {}: {e}", path.display()));
        exit::BAD_INPUT
    })
}

pub fn import(args: ImportArgs, global: &Global) -> u8 {
    let text = match read_file(&args.file) {
        Ok(t) => t,
        Err(code) => return code,
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
