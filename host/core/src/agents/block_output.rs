//! The block output contract of seed 000: after an agent block, the engine
//! reads `.output/block-<nodeId>.json`, validates it, and maps its status to
//! a signal. A missing or malformed file never passes silently: it becomes a
//! synthetic output with `status: failed` and the reason.
//!
//! This module is pure (bytes in, verdict out) so that every defect is
//! tested without a process or a filesystem; reading the file and detecting
//! what really changed in the workspace belong to the executor adapters.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// The kind of agent block, which decides the shape of its deliverables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BlockType {
    Plan,
    Dev,
    Test,
    Review,
    Devops,
}

impl BlockType {
    /// Whether seed 000 counts it as a coding block (`dev`, `devops`):
    /// its primary output is file changes, its deliverables are `code`.
    pub fn is_coding(self) -> bool {
        matches!(self, BlockType::Dev | BlockType::Devops)
    }

    /// The `deliverables.blockType` this kind of block must report.
    pub fn deliverables_kind(self) -> &'static str {
        match self {
            BlockType::Plan => "plan",
            BlockType::Dev | BlockType::Devops => "code",
            BlockType::Test | BlockType::Review => "generic",
        }
    }

    /// Whether deliverables of `kind` are accepted from this kind of
    /// block: its own kind, and — for `devops`, which reported `generic`
    /// deliverables before it counted as a coding block — `generic` too.
    pub fn accepts_deliverables(self, kind: &str) -> bool {
        kind == self.deliverables_kind() || (self == BlockType::Devops && kind == "generic")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BlockOutputStatus {
    /// All outputs produced.
    Completed,
    /// Some outputs produced.
    Partial,
    /// The block errored.
    Failed,
}

impl BlockOutputStatus {
    /// The signal a status selects the block's transition with.
    pub fn signal(self) -> &'static str {
        match self {
            BlockOutputStatus::Completed => "SIGNAL:SUCCESS",
            BlockOutputStatus::Partial => "SIGNAL:PARTIAL",
            BlockOutputStatus::Failed => "SIGNAL:FAILED",
        }
    }
}

/// What a block produced, by kind (`deliverables.blockType`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "blockType", rename_all = "lowercase", deny_unknown_fields)]
pub enum Deliverables {
    #[serde(rename_all = "camelCase")]
    Plan {
        markdown_document: String,
        task_list: Vec<String>,
    },
    #[serde(rename_all = "camelCase")]
    Code {
        files_changed: Vec<String>,
        diff_summary: String,
    },
    Generic {
        summary: String,
    },
}

impl Deliverables {
    fn kind(&self) -> &'static str {
        match self {
            Deliverables::Plan { .. } => "plan",
            Deliverables::Code { .. } => "code",
            Deliverables::Generic { .. } => "generic",
        }
    }
}

/// What the model behind an agent consumed (`usage` in a BlockOutput):
/// reported by any CLI that writes its own BlockOutput, or filled in by a
/// preset's result adapter from the CLI's final result. Token counts are
/// whole numbers (a count beyond `u64`, a negative or a fraction is not a
/// valid output); their sum is the block's `tokens_used`, saturating.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    /// Input tokens read from the model's prompt cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Input tokens written to the model's prompt cache.
    #[serde(default)]
    pub cache_creation_tokens: u64,
    /// What the CLI says the work cost, in US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The CLI's session, to find its transcript.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// The most characters of a `usage` text field (model, session id).
pub const MAX_USAGE_TEXT: usize = 256;

impl Usage {
    /// Every token the model processed: input, output and both cache
    /// counts, saturating at `u64::MAX`.
    pub fn tokens(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.output_tokens)
            .saturating_add(self.cache_read_tokens)
            .saturating_add(self.cache_creation_tokens)
    }

    /// Why the usage is not a valid record, if it is not.
    pub fn check(&self) -> Result<(), String> {
        if let Some(cost) = self.cost_usd
            && !(cost.is_finite() && cost >= 0.0)
        {
            return Err(format!("usage.costUsd {cost} is not a cost"));
        }
        for (field, text) in [("model", &self.model), ("sessionId", &self.session_id)] {
            if text
                .as_ref()
                .is_some_and(|t| t.chars().count() > MAX_USAGE_TEXT)
            {
                return Err(format!(
                    "usage.{field} is longer than {MAX_USAGE_TEXT} characters"
                ));
            }
        }
        Ok(())
    }
}

/// `.output/block-<nodeId>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlockOutput {
    pub block_id: String,
    pub block_type: BlockType,
    pub status: BlockOutputStatus,
    pub deliverables: Deliverables,
    pub summary: String,
    pub files_modified: Vec<String>,
    pub files_created: Vec<String>,
    /// ISO-8601 time of the block's completion.
    pub timestamp: String,
    /// What the model consumed, when the CLI reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// The file name a node's output is expected under, inside `.output/`.
pub fn file_name(node_id: &str) -> String {
    format!("block-{node_id}.json")
}

/// Why an output file does not count.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutputDefect {
    #[error("the block wrote no {0}")]
    Missing(String),
    #[error("{file} is not valid block output JSON: {reason}")]
    Malformed { file: String, reason: String },
    #[error("{file} is for block `{found}`, not `{expected}`")]
    WrongBlock {
        file: String,
        expected: String,
        found: String,
    },
    #[error("{file}: {reason}")]
    Invalid { file: String, reason: String },
}

/// Parse and validate the output a block wrote (`None`: no file). The
/// block is `node_id`, of kind `block_type`.
pub fn read(
    bytes: Option<&[u8]>,
    node_id: &str,
    block_type: BlockType,
) -> Result<BlockOutput, OutputDefect> {
    let file = format!(".output/{}", file_name(node_id));
    let Some(bytes) = bytes else {
        return Err(OutputDefect::Missing(file));
    };
    crate::limits::json_depth(bytes).map_err(|e| OutputDefect::Invalid {
        file: file.clone(),
        reason: e.to_string(),
    })?;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let output: BlockOutput =
        serde_path_to_error::deserialize(&mut de).map_err(|e| OutputDefect::Malformed {
            file: file.clone(),
            reason: e.to_string(),
        })?;
    de.end().map_err(|e| OutputDefect::Malformed {
        file: file.clone(),
        reason: e.to_string(),
    })?;
    let invalid = |reason: String| OutputDefect::Invalid {
        file: file.clone(),
        reason,
    };
    if output.block_id != node_id {
        return Err(OutputDefect::WrongBlock {
            file,
            expected: node_id.to_string(),
            found: output.block_id,
        });
    }
    if output.block_type != block_type {
        return Err(invalid(format!(
            "blockType is `{}` but the block is a `{}` block",
            serde_json::to_value(output.block_type).unwrap_or_default(),
            serde_json::to_value(block_type).unwrap_or_default()
        )));
    }
    let expected = block_type.deliverables_kind();
    if !block_type.accepts_deliverables(output.deliverables.kind()) {
        return Err(invalid(format!(
            "a {} block's deliverables have blockType `{expected}`, not `{}`",
            serde_json::to_value(block_type).unwrap_or_default(),
            output.deliverables.kind()
        )));
    }
    for (field, paths) in [
        ("filesModified", &output.files_modified),
        ("filesCreated", &output.files_created),
    ] {
        if let Some(bad) = paths.iter().find(|p| !crate::policy::exec::stays_inside(p)) {
            return Err(invalid(format!(
                "{field} lists `{bad}`, which is not a relative path inside the workspace"
            )));
        }
    }
    if let Some(usage) = &output.usage {
        usage.check().map_err(invalid)?;
    }
    if !is_iso8601(&output.timestamp) {
        return Err(invalid(format!(
            "timestamp `{}` is not an ISO-8601 date and time",
            output.timestamp
        )));
    }
    Ok(output)
}

/// The output the engine records for a block whose own output does not
/// count: `status: failed`, the reason as its summary, empty deliverables
/// of the block's kind (so it passes [`read`] like any other output).
pub fn synthetic_failure(
    node_id: &str,
    block_type: BlockType,
    reason: &str,
    timestamp: String,
) -> BlockOutput {
    BlockOutput {
        block_id: node_id.to_string(),
        block_type,
        status: BlockOutputStatus::Failed,
        deliverables: match block_type {
            BlockType::Plan => Deliverables::Plan {
                markdown_document: String::new(),
                task_list: Vec::new(),
            },
            BlockType::Dev | BlockType::Devops => Deliverables::Code {
                files_changed: Vec::new(),
                diff_summary: String::new(),
            },
            BlockType::Test | BlockType::Review => Deliverables::Generic {
                summary: reason.to_string(),
            },
        },
        summary: format!("no valid block output: {reason}"),
        files_modified: Vec::new(),
        files_created: Vec::new(),
        timestamp,
        usage: None,
    }
}

/// What an agent that must write its BlockOutput file is told at the end of
/// its prompt: the exact path, every field, and an example that passes
/// [`read`] — so a model that follows its prompt succeeds.
pub fn prompt_contract(node_id: &str, block_type: BlockType) -> String {
    let deliverables = match block_type {
        BlockType::Plan => Deliverables::Plan {
            markdown_document: "# Plan\n…".into(),
            task_list: vec!["First task".into(), "Second task".into()],
        },
        BlockType::Dev | BlockType::Devops => Deliverables::Code {
            files_changed: Vec::new(),
            diff_summary: "Added the subtract function.".into(),
        },
        BlockType::Test | BlockType::Review => Deliverables::Generic {
            summary: "What was checked and found.".into(),
        },
    };
    let deliverables_fields = match block_type {
        BlockType::Plan => {
            "`blockType: \"plan\"`, `markdownDocument` (text), `taskList` (list of text)"
        }
        BlockType::Dev | BlockType::Devops => {
            "`blockType: \"code\"`, `filesChanged` (paths), `diffSummary` (text)"
        }
        _ => "`blockType: \"generic\"`, `summary` (text)",
    };
    let example = BlockOutput {
        block_id: node_id.to_string(),
        block_type,
        status: BlockOutputStatus::Completed,
        deliverables,
        summary: "One or two sentences on what you did.".into(),
        files_modified: Vec::new(),
        files_created: Vec::new(),
        timestamp: "2026-01-01T12:00:00Z".into(),
        usage: None,
    };
    let json = serde_json::to_string_pretty(&example).expect("block outputs serialize");
    let kind = serde_json::to_string(&block_type).expect("block types serialize");
    format!(
        "When you are done, write your result as one JSON object to the file `.output/{file}` \
(the `.output/` directory is always writable, whatever else is read-only). Its fields, all required:\n\
- `blockId`: \"{node_id}\"\n\
- `blockType`: {kind}\n\
- `status`: \"completed\" (all done), \"partial\" (some done) or \"failed\"\n\
- `deliverables`: an object with {deliverables_fields}\n\
- `summary`: what you did, in a sentence or two\n\
- `filesModified`, `filesCreated`: the workspace-relative paths you changed and created\n\
- `timestamp`: the time you finished, ISO-8601 UTC\n\
For example:\n```json\n{json}\n```",
        file = file_name(node_id),
    )
}

/// Where what an agent claimed it changed differs from what the host saw.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimMismatch {
    /// Changed on disk but not claimed.
    pub unreported_modified: Vec<String>,
    pub unreported_created: Vec<String>,
    /// Claimed but not changed on disk.
    pub claimed_not_modified: Vec<String>,
    pub claimed_not_created: Vec<String>,
}

impl ClaimMismatch {
    pub fn is_empty(&self) -> bool {
        self.unreported_modified.is_empty()
            && self.unreported_created.is_empty()
            && self.claimed_not_modified.is_empty()
            && self.claimed_not_created.is_empty()
    }
}

/// Compare the output's claims with the files the host detected as
/// modified and created (paths relative to the workspace; `.output/` is
/// the contract's own directory and is not compared).
pub fn compare_claims(
    output: &BlockOutput,
    detected_modified: &[String],
    detected_created: &[String],
) -> ClaimMismatch {
    fn set(paths: &[String]) -> BTreeSet<String> {
        paths
            .iter()
            .map(|p| p.trim_start_matches("./").to_string())
            .filter(|p| !p.starts_with(".output/"))
            .collect()
    }
    let (claimed_m, claimed_c) = (set(&output.files_modified), set(&output.files_created));
    let (seen_m, seen_c) = (set(detected_modified), set(detected_created));
    let minus = |a: &BTreeSet<String>, b: &BTreeSet<String>| a.difference(b).cloned().collect();
    ClaimMismatch {
        unreported_modified: minus(&seen_m, &claimed_m),
        unreported_created: minus(&seen_c, &claimed_c),
        claimed_not_modified: minus(&claimed_m, &seen_m),
        claimed_not_created: minus(&claimed_c, &seen_c),
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, with plausible ranges.
pub(crate) fn is_iso8601(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |from: usize, n: usize| -> Option<u32> {
        let part = b.get(from..from + n)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| std::str::from_utf8(part).ok()?.parse().ok())?
    };
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    let (Some(_year), Some(month), Some(day), Some(hour), Some(minute), Some(second)) = (
        digits(0, 4),
        digits(5, 2),
        digits(8, 2),
        digits(11, 2),
        digits(14, 2),
        digits(17, 2),
    ) else {
        return false;
    };
    if !(at(4, b'-')
        && at(7, b'-')
        && (at(10, b'T') || at(10, b't'))
        && at(13, b':')
        && at(16, b':'))
    {
        return false;
    }
    if !((1..=12).contains(&month)
        && (1..=31).contains(&day)
        && hour < 24
        && minute < 60
        && second <= 60)
    {
        return false;
    }
    let mut i = 19;
    if at(i, b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match b.get(i) {
        Some(b'Z' | b'z') => i + 1 == b.len(),
        Some(b'+' | b'-') => {
            i + 6 == b.len()
                && digits(i + 1, 2).is_some_and(|h| h < 24)
                && at(i + 3, b':')
                && digits(i + 4, 2).is_some_and(|m| m < 60)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_contract_names_the_file_and_its_example_passes() {
        for block_type in [
            BlockType::Plan,
            BlockType::Dev,
            BlockType::Test,
            BlockType::Review,
            BlockType::Devops,
        ] {
            let text = prompt_contract("dev.implement", block_type);
            assert!(
                text.contains("`.output/block-dev.implement.json`"),
                "{text}"
            );
            let example = text
                .split("```json\n")
                .nth(1)
                .and_then(|rest| rest.split("\n```").next())
                .unwrap();
            let read = read(Some(example.as_bytes()), "dev.implement", block_type);
            assert!(read.is_ok(), "{block_type:?}: {read:?}\n{example}");
        }
    }

    fn valid() -> serde_json::Value {
        serde_json::json!({
            "blockId": "dev-1",
            "blockType": "dev",
            "status": "completed",
            "deliverables": {"blockType": "code", "filesChanged": ["src/a.rs"], "diffSummary": "added a"},
            "summary": "Added a.",
            "filesModified": ["src/lib.rs"],
            "filesCreated": ["src/a.rs"],
            "timestamp": "2026-11-22T12:00:00.123Z"
        })
    }

    fn read_value(v: &serde_json::Value) -> Result<BlockOutput, OutputDefect> {
        read(Some(v.to_string().as_bytes()), "dev-1", BlockType::Dev)
    }

    #[test]
    fn a_valid_output_is_read_and_its_status_selects_the_signal() {
        let out = read_value(&valid()).unwrap();
        assert_eq!(out.status.signal(), "SIGNAL:SUCCESS");
        for (status, signal) in [("partial", "SIGNAL:PARTIAL"), ("failed", "SIGNAL:FAILED")] {
            let mut v = valid();
            v["status"] = status.into();
            assert_eq!(read_value(&v).unwrap().status.signal(), signal);
        }
    }

    #[test]
    fn a_devops_block_is_a_coding_block() {
        assert!(BlockType::Devops.is_coding() && BlockType::Dev.is_coding());
        assert!(!BlockType::Review.is_coding());
        assert_eq!(BlockType::Devops.deliverables_kind(), "code");
        let mut v = valid();
        v["blockType"] = "devops".into();
        let out = read(Some(v.to_string().as_bytes()), "dev-1", BlockType::Devops).unwrap();
        assert_eq!(
            out.deliverables,
            Deliverables::Code {
                files_changed: vec!["src/a.rs".into()],
                diff_summary: "added a".into()
            }
        );
        // What a devops block reported before still reads.
        v["deliverables"] = serde_json::json!({"blockType": "generic", "summary": "deployed"});
        assert!(read(Some(v.to_string().as_bytes()), "dev-1", BlockType::Devops).is_ok());
        // A plan's deliverables are no devops block's.
        v["deliverables"] =
            serde_json::json!({"blockType": "plan", "markdownDocument": "#", "taskList": []});
        let e = read(Some(v.to_string().as_bytes()), "dev-1", BlockType::Devops).unwrap_err();
        assert!(e.to_string().contains("blockType `code`"), "{e}");
        let failed = synthetic_failure("b", BlockType::Devops, "x", "2026-11-22T12:00:00Z".into());
        assert!(matches!(failed.deliverables, Deliverables::Code { .. }));
    }

    #[test]
    fn every_defect_is_named() {
        assert_eq!(
            read(None, "dev-1", BlockType::Dev),
            Err(OutputDefect::Missing(".output/block-dev-1.json".into()))
        );
        let malformed = read(Some(b"{not json"), "dev-1", BlockType::Dev).unwrap_err();
        assert!(
            matches!(malformed, OutputDefect::Malformed { .. }),
            "{malformed}"
        );
        let trailing = read(
            Some(format!("{} x", valid()).as_bytes()),
            "dev-1",
            BlockType::Dev,
        )
        .unwrap_err();
        assert!(matches!(trailing, OutputDefect::Malformed { .. }));

        let mut wrong = valid();
        wrong["blockId"] = "dev-2".into();
        assert!(matches!(
            read_value(&wrong),
            Err(OutputDefect::WrongBlock { found, .. }) if found == "dev-2"
        ));

        let cases: Vec<(&str, serde_json::Value, &str)> = vec![
            ("status", "done".into(), "status"),
            ("blockType", "plan".into(), "blockType is `\"plan\"`"),
            ("timestamp", "yesterday".into(), "not an ISO-8601"),
            (
                "timestamp",
                "2026-13-01T00:00:00Z".into(),
                "not an ISO-8601",
            ),
            (
                "filesModified",
                serde_json::json!(["../etc/passwd"]),
                "filesModified",
            ),
            (
                "filesCreated",
                serde_json::json!(["/tmp/x"]),
                "filesCreated",
            ),
            (
                "deliverables",
                serde_json::json!({"blockType": "generic", "summary": "x"}),
                "deliverables have blockType `code`",
            ),
            ("extra", "field".into(), "unknown field"),
        ];
        for (field, value, expected) in cases {
            let mut v = valid();
            v[field] = value;
            let err = read_value(&v).unwrap_err().to_string();
            assert!(err.contains(expected), "{field}: {err}");
        }
        let mut missing = valid();
        missing.as_object_mut().unwrap().remove("summary");
        let err = read_value(&missing).unwrap_err().to_string();
        assert!(err.contains("summary"), "{err}");
    }

    #[test]
    fn a_deeply_nested_output_is_refused_before_it_is_parsed() {
        crate::limits::tests::on_small_stack(|| {
            let deep = format!(
                r#"{{"blockId": "dev-1", "x": {}{}}}"#,
                "[".repeat(100_000),
                "]".repeat(100_000)
            );
            let e = read(Some(deep.as_bytes()), "dev-1", BlockType::Dev).unwrap_err();
            assert!(
                e.to_string()
                    .contains("block-dev-1.json: nested more than 64 levels deep"),
                "{e}"
            );
        });
    }

    #[test]
    fn a_synthetic_failure_is_itself_valid_output() {
        for block_type in [
            BlockType::Plan,
            BlockType::Dev,
            BlockType::Test,
            BlockType::Review,
            BlockType::Devops,
        ] {
            let out = synthetic_failure(
                "b",
                block_type,
                "the block wrote no .output/block-b.json",
                "2026-11-22T12:00:00Z".into(),
            );
            assert_eq!(out.status.signal(), "SIGNAL:FAILED");
            assert!(out.summary.contains("wrote no"));
            let json = serde_json::to_vec(&out).unwrap();
            assert_eq!(read(Some(&json), "b", block_type), Ok(out));
        }
    }

    #[test]
    fn claims_are_compared_with_what_changed() {
        let out = read_value(&valid()).unwrap();
        let same = compare_claims(
            &out,
            &["src/lib.rs".into()],
            &["./src/a.rs".into(), ".output/block-dev-1.json".into()],
        );
        assert!(same.is_empty(), "{same:?}");
        let diff = compare_claims(&out, &["Cargo.toml".into()], &["src/a.rs".into()]);
        assert_eq!(diff.unreported_modified, ["Cargo.toml"]);
        assert_eq!(diff.claimed_not_modified, ["src/lib.rs"]);
        assert!(diff.unreported_created.is_empty() && diff.claimed_not_created.is_empty());
    }

    #[test]
    fn iso8601_forms() {
        for ok in [
            "2026-11-22T12:00:00Z",
            "2026-11-22T12:00:00.5+01:00",
            "2026-11-22t23:59:60-05:30",
        ] {
            assert!(is_iso8601(ok), "{ok}");
        }
        for bad in [
            "",
            "2026-11-22",
            "2026-11-22T12:00:00",
            "2026-11-22T12:00:00.Z",
            "2026-11-22T24:00:00Z",
            "2026-11-22T12:00:00+1:00",
            "2026-11-22T12:00:00Zjunk",
            "２026-11-22T12:00:00Z",
        ] {
            assert!(!is_iso8601(bad), "{bad}");
        }
    }
}
