//! `wfhost list`: the workflows found under a directory.

use std::path::PathBuf;

use clap::Args;
use wfhost_core::formats::discover;

use crate::{exit, report_error};

#[derive(Args)]
pub struct ListArgs {
    /// Where to look (recursively; hidden directories, `target` and
    /// `node_modules` are skipped).
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// Print the list as JSON: `{root, workflows, truncated}`, as
    /// `GET /v1/workflows` answers it.
    #[arg(long)]
    json: bool,
}

pub fn list(args: ListArgs) -> u8 {
    if !args.dir.is_dir() {
        report_error(format!("{} is not a directory", args.dir.display()));
        return exit::BAD_INPUT;
    }
    let found = discover::discover(&args.dir);
    if args.json {
        // The object `GET /v1/workflows` answers (the API's `Workflows`):
        // paths relative to `root`.
        let root = std::fs::canonicalize(&args.dir).unwrap_or_else(|_| args.dir.clone());
        let out = serde_json::json!({
            "root": root.display().to_string(),
            "workflows": found.workflows,
            "truncated": found.truncated,
        });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return exit::SUCCESS;
    }
    if found.truncated {
        eprintln!(
            "note: only the first {} JSON files under {} were looked at",
            discover::MAX_FILES,
            args.dir.display()
        );
    }
    let rows: Vec<_> = found
        .workflows
        .into_iter()
        .map(|f| {
            let path = args.dir.join(&f.path).display().to_string();
            match f.error {
                Some(error) => serde_json::json!({"path": path, "error": error}),
                None => serde_json::json!({
                    "id": f.id,
                    "version": f.version,
                    "path": path,
                    "description": f.description.unwrap_or_default(),
                }),
            }
        })
        .collect();
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
