//! An example block worker written with `wfhost-sdk`.
//!
//! Config: `{"dirs": ["docs"]}` (default: the whole workspace). It reads
//! every `.md` and `.txt` file below those directories (the workspace is
//! read-only to it), counts words, writes the report to
//! `.output/word-count.json` and returns it as structured output.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use wfhost_sdk::prelude::*;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    dirs: Vec<String>,
}

/// Word counts of the text files below `dir`, keyed by relative path.
pub fn count_words(dir: &Path, counts: &mut BTreeMap<String, usize>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            count_words(&path, counts)?;
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "md" || e == "txt") {
            let text = std::fs::read_to_string(&path)?;
            counts.insert(path.display().to_string(), text.split_whitespace().count());
        }
    }
    Ok(())
}

pub struct WordCount;

impl Worker for WordCount {
    fn run(ctx: BlockContext, mut payload: Payload) -> Result<WorkerOutput, PluginError> {
        let config: Config = ctx.config::<Option<Config>>()?.unwrap_or_default();
        let dirs = if config.dirs.is_empty() {
            vec![".".to_string()]
        } else {
            config.dirs
        };
        let mut counts = BTreeMap::new();
        for dir in &dirs {
            count_words(Path::new(dir), &mut counts)
                .map_err(|e| PluginError::new("unreadable", format!("{dir}: {e}")))?;
        }
        let total: usize = counts.values().sum();
        let report = serde_json::json!({ "files": counts, "total": total }).to_string();
        std::fs::write(".output/word-count.json", &report)
            .map_err(|e| PluginError::new("unwritable", format!(".output/word-count.json: {e}")))?;
        log::info(format!("{total} words in {} files", counts.len()));
        payload.push(segment(
            "WORD_COUNT",
            format!("{total} words in {} files", counts.len()),
        ));
        Ok(WorkerOutput::new(payload, "SIGNAL:SUCCESS").with_structured_output(report))
    }
}

export_worker!(WordCount);
wfhost_sdk::declare_signals!["SIGNAL:SUCCESS"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_words_of_text_files_only() {
        let dir = std::env::temp_dir().join(format!("wc-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("a.md"), "one two three").unwrap();
        std::fs::write(dir.join("sub/b.txt"), "four\nfive").unwrap();
        std::fs::write(dir.join("c.rs"), "fn main() {}").unwrap();
        let mut counts = BTreeMap::new();
        count_words(&dir, &mut counts).unwrap();
        assert_eq!(counts.values().sum::<usize>(), 5);
        assert_eq!(counts.len(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
