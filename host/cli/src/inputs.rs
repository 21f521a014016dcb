//! `wfhost run --input FILE --set NAME=VALUE`: the run's inputs, read and
//! checked against the workflow's `inputs` schema before anything is
//! written.

use std::io::Read;
use std::path::Path;

use wfhost_core::manifest::Workflow;
use wfhost_core::run::inputs::{self, Inputs};

/// The largest input file read (or standard input with `--input -`).
const MAX_INPUT_FILE: u64 = 16 << 20;

/// The validated inputs of a new run of `workflow`; the error is one line
/// naming the input (or the file) and what is wrong.
pub fn read(workflow: &Workflow, file: Option<&Path>, sets: &[String]) -> Result<Inputs, String> {
    let schema = workflow.inputs.as_ref();
    let file = file.map(read_file).transpose()?;
    let mut parsed = Vec::with_capacity(sets.len());
    for set in sets {
        let Some((name, text)) = set.split_once('=') else {
            return Err(format!("--set `{set}`: expected NAME=VALUE"));
        };
        let value = inputs::parse_set(schema, name, text).map_err(|e| format!("--set: {e}"))?;
        parsed.push((name.to_string(), value));
    }
    inputs::resolve(schema, file, parsed)
}

/// Read and parse the input file (`-`: standard input).
fn read_file(path: &Path) -> Result<serde_json::Value, String> {
    let name = path.display();
    let mut text = String::new();
    let read = if path == Path::new("-") {
        std::io::stdin()
            .take(MAX_INPUT_FILE + 1)
            .read_to_string(&mut text)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(MAX_INPUT_FILE + 1).read_to_string(&mut text))
    };
    read.map_err(|e| format!("--input {name}: {e}"))?;
    if text.len() as u64 > MAX_INPUT_FILE {
        return Err(format!("--input {name}: larger than 16 MiB"));
    }
    wfhost_core::manifest::strict_json::check_no_duplicate_keys(&text)
        .and_then(|()| serde_json::from_str(&text))
        .map_err(|e| format!("--input {name}: not a JSON object: {e}"))
}
