//! No path is made of a raw id: in the crates that touch the file system,
//! a function that takes an id as plain text (`…id: &str`, `…id: String`)
//! never joins it into a path. Ids that become paths are
//! `wfhost_core::ids::RunId` / `SafeName`, which only their checked
//! constructors make (see `src/ids.rs`).

use std::path::{Path, PathBuf};

/// The crates (and folders) whose code makes paths.
const SCANNED: &[&str] = &[
    "host/store/src",
    "host/exec/src",
    "host/runtime/src",
    "host/core/src/workspace",
    "host/server/src",
    "host/cli/src",
    "host/app/src",
    "host/mcp/src",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text from `open` (an opening bracket at byte `at`) to its match.
fn matching(text: &str, at: usize, open: u8, close: u8) -> Option<&str> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    for (i, &b) in bytes.iter().enumerate().skip(at) {
        if b == open {
            depth += 1;
        } else if b == close {
            depth -= 1;
            if depth == 0 {
                return Some(&text[at + 1..i]);
            }
        }
    }
    None
}

/// The parameters of a signature that are ids as plain text.
fn raw_ids(params: &str) -> Vec<String> {
    params
        .split(',')
        .filter_map(|p| {
            let (name, ty) = p.split_once(':')?;
            let name = name.trim().trim_start_matches("mut ");
            let ty = ty.trim();
            let texty = matches!(ty, "&str" | "String" | "&String" | "&'static str");
            let idish = name.ends_with("_id") || name == "id" || name == "run";
            (texty && idish).then(|| name.to_string())
        })
        .collect()
}

fn mentions(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        let part = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !part(before) && !part(after)
    })
}

/// `file:line: fn name joins raw id `x`` for each offence in `text`.
fn offences(file: &str, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("fn ") {
        let Some(open) = text[at..].find('(').map(|i| at + i) else {
            continue;
        };
        let Some(params) = matching(text, open, b'(', b')') else {
            continue;
        };
        let ids = raw_ids(params);
        if ids.is_empty() {
            continue;
        }
        let after_params = open + params.len() + 2;
        let Some(body_at) = text[after_params..]
            .find(['{', ';'])
            .map(|i| after_params + i)
        else {
            continue;
        };
        if text.as_bytes()[body_at] == b';' {
            continue; // a declaration
        }
        let Some(body) = matching(text, body_at, b'{', b'}') else {
            continue;
        };
        for (j, _) in body.match_indices(".join(") {
            let Some(arg) = matching(body, j + ".join".len(), b'(', b')') else {
                continue;
            };
            for id in &ids {
                if mentions(arg, id) {
                    let line = text[..body_at + j].lines().count();
                    let name: String = text[at + 3..open].to_string();
                    found.push(format!(
                        "{file}:{line}: fn {name} joins raw id `{id}` into a path"
                    ));
                }
            }
        }
    }
    found
}

#[test]
fn no_function_joins_an_id_it_took_as_plain_text_into_a_path() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in SCANNED {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 50, "the scan found the sources");
    let mut all = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let shown = file
            .strip_prefix(&root)
            .unwrap_or(&file)
            .display()
            .to_string();
        all.extend(offences(&shown, &text));
    }
    assert!(
        all.is_empty(),
        "raw ids joined into paths:\n{}",
        all.join("\n")
    );
}

#[test]
fn the_scan_sees_an_offence() {
    let bad = "pub fn lock(home: &Path, run_id: &str) -> PathBuf {\n    home.join(\"locks\").join(format!(\"{run_id}.lock\"))\n}\n";
    assert_eq!(offences("x.rs", bad).len(), 1);
    let good = "pub fn lock(home: &Path, run_id: &RunId) -> PathBuf {\n    home.join(run_id)\n}\n";
    assert!(offences("x.rs", good).is_empty());
}
