//! `wfhost list`: the workflows found under a directory.

use std::path::{Path, PathBuf};

use clap::Args;
use wfhost_core::formats::{self, workrail};

use crate::{exit, report_error};

#[derive(Args)]
pub struct ListArgs {
    /// Where to look (recursively; hidden directories, `target` and
    /// `node_modules` are skipped).
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// Print the list as JSON.
    #[arg(long)]
    json: bool,
}

const MAX_DEPTH: usize = 8;

fn candidates(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(|e| e.ok()).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        // Never follow symlinks: a workspace may hold links that lead out.
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_dir() {
            if depth < MAX_DEPTH
                && !name.starts_with('.')
                && name != "target"
                && name != "node_modules"
            {
                candidates(&entry.path(), depth + 1, out);
            }
        } else if ft.is_file() && name.ends_with(".json") {
            out.push(entry.path());
        }
    }
}

pub fn list(args: ListArgs) -> u8 {
    if !args.dir.is_dir() {
        report_error(format!("{} is not a directory", args.dir.display()));
        return exit::BAD_INPUT;
    }
    let mut files = Vec::new();
    candidates(&args.dir, 0, &mut files);
    let mut rows = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        // Only files that look like workflows are listed (or reported broken).
        let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let manifest = value.get("nodes").is_some() && value.get("start_node").is_some();
        if !manifest && !workrail::is_workrail(&value) {
            continue;
        }
        match formats::parse_any(&file, &text) {
            Ok(wf) => rows.push(serde_json::json!({
                "id": wf.id,
                "version": wf.version,
                "path": file.display().to_string(),
                "description": wf.description.as_deref().and_then(|d| d.lines().next()).unwrap_or(""),
            })),
            Err(e) => rows.push(serde_json::json!({
                "path": file.display().to_string(),
                "error": e.to_string(),
            })),
        }
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).unwrap_or_default()
        );
        return exit::SUCCESS;
    }
    if rows.is_empty() {
        println!("no workflows under {}", args.dir.display());
    }
    for row in &rows {
        match row.get("error") {
            Some(error) => println!(
                "(invalid)  {}  {}",
                row["path"].as_str().unwrap_or(""),
                error.as_str().unwrap_or("")
            ),
            None => println!(
                "{}  {}  {}  {}",
                row["id"].as_str().unwrap_or(""),
                row["version"].as_str().unwrap_or("-"),
                row["path"].as_str().unwrap_or(""),
                row["description"].as_str().unwrap_or("")
            ),
        }
    }
    exit::SUCCESS
}
