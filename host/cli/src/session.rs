//! `wfhost session`: the runs of one workstream (an MCP client's session,
//! or a git branch), listed, exported and imported together.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use wfhost_store::SessionBundle;
use wfhost_store::time::format_utc;

use crate::bundle::{read_file, write_json};
use crate::{Global, exit, report_error, store_error};

#[derive(Args)]
pub struct SessionArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// List the sessions, the most recently active first.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write every run of a session to one bundle file.
    Export {
        /// The session id (`wfhost session list`).
        session: String,
        /// The bundle file to write; `-` writes it to standard output.
        #[arg(long, short)]
        output: PathBuf,
    },
    /// Add the runs of a session bundle to the store, all or nothing.
    Import {
        /// A bundle written by `wfhost session export` or the MCP tool
        /// `session_export` (its `bundle`).
        file: PathBuf,
    },
}

pub fn session(args: SessionArgs, global: &Global) -> u8 {
    match args.action {
        Action::List { json } => list(json, global),
        Action::Export { session, output } => export(&session, &output, global),
        Action::Import { file } => import(&file, global),
    }
}

fn list(json: bool, global: &Global) -> u8 {
    let sessions = match global.existing_store() {
        Ok(store) => match store.sessions() {
            Ok(s) => s,
            Err(e) => return store_error(e),
        },
        Err(code) => return code,
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&sessions).unwrap_or_default()
        );
        return exit::SUCCESS;
    }
    if sessions.is_empty() {
        println!(
            "no sessions: runs started over MCP with a session id, or in a git repository, form them"
        );
        return exit::SUCCESS;
    }
    for s in &sessions {
        println!(
            "{}  {} run{}  last active {}",
            s.id,
            s.runs,
            if s.runs == 1 { "" } else { "s" },
            format_utc(s.last_at)
        );
    }
    exit::SUCCESS
}

fn export(session: &str, output: &std::path::Path, global: &Global) -> u8 {
    let store = match global.existing_store() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let bundle = match store.export_session(session) {
        Ok(b) => b,
        Err(e) => return store_error(e),
    };
    if let Err(code) = write_json(&bundle, output) {
        return code;
    }
    if output.as_os_str() != "-" {
        println!(
            "exported session {} ({} runs) to {}",
            bundle.session.id,
            bundle.runs.len(),
            output.display()
        );
    }
    exit::SUCCESS
}

fn import(file: &std::path::Path, global: &Global) -> u8 {
    let text = match read_file(file) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let bundle = match SessionBundle::parse(&text) {
        Ok(b) => b,
        Err(e) => {
            report_error(format!("{}: {e}", file.display()));
            return exit::BAD_INPUT;
        }
    };
    let mut store = match global.open_store() {
        Ok(s) => s,
        Err(code) => return code,
    };
    match store.import_session(&bundle) {
        Ok(done) => {
            println!(
                "imported session {}: {} run{} added, {} already here",
                done.session,
                done.imported.len(),
                if done.imported.len() == 1 { "" } else { "s" },
                done.already_present.len()
            );
            exit::SUCCESS
        }
        Err(e) => store_error(e),
    }
}
