//! What the store's tests share: a run's identity and its first event.
#![allow(dead_code)]

use wfhost_core::event::Event;
use wfhost_store::RunRecord;

pub fn started(run_id: &str) -> Event {
    Event::RunStarted {
        run_id: run_id.into(),
        workflow_id: "w".into(),
        workflow_hash: wfhost_core::manifest::pinning::hash_of("{}"),
        plugins: Default::default(),
        start_node: "main".into(),
        start_block: "a".into(),
        max_steps: 100,
        max_call_depth: 8,
        default_executor: String::new(),
        inputs: Default::default(),
    }
}

/// Run ids of the tests (one per name they used to have).
pub const R: &str = "run-20260101-000000-00000a";
pub const R1: &str = "run-20260101-000000-000001";
pub const R2: &str = "run-20260101-000000-000002";
pub const R3: &str = "run-20260101-000000-000003";
pub const R4: &str = "run-20260101-000000-000004";
pub const Q: &str = "run-20260101-000000-00000c";
pub const M: &str = "run-20260101-000000-00000d";

pub fn record(id: &str) -> RunRecord {
    RunRecord {
        id: wfhost_store::RunId::parse(id).unwrap(),
        workflow_id: "w".into(),
        workflow_hash: wfhost_core::manifest::pinning::hash_of("{}"),
        manifest: "/nowhere/w.json".into(),
        workspace: "/tmp".into(),
        created_at: 1,
    }
}

/// Ids an attacker would put in a bundle: a directory to have removed, a
/// way out of the home, a file beside a project's, and a second line of a
/// batch script.
pub const HOSTILE_RUN_IDS: &[&str] = &[
    "/tmp/wfhost-victim",
    "../../outside",
    "run-20260101-000000-000001/../../x",
    "/work/project/Cargo",
    "run-20260101-000000-000001\ntouch /tmp/wfhost-pwned",
    "-rf",
];

/// A serialized bundle (its checksum the last field) sealed again the
/// way anyone can: the checksum is a plain SHA-256 of the fields before it.
pub fn reseal(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let at = text.rfind(",\"checksum\":").expect("the checksum is last");
    let body = &text[..at];
    let sum = format!("sha256:{}", hex::encode(Sha256::digest(format!("{body}}}"))));
    format!("{body},\"checksum\":\"{sum}\"}}")
}

/// A run bundle with every `from` replaced by `to`, re-sealed.
pub fn forge(bundle: &wfhost_store::Bundle, from: &str, to: &str) -> String {
    let quoted = |s: &str| serde_json::to_string(s).unwrap();
    let text = serde_json::to_string(bundle).unwrap();
    reseal(&text.replace(&quoted(from), &quoted(to)))
}

/// A session bundle whose runs are each [`forge`]d, re-sealed.
pub fn forge_session(bundle: &wfhost_store::SessionBundle, from: &str, to: &str) -> String {
    let mut text = serde_json::to_string(bundle).unwrap();
    for run in &bundle.runs {
        let inner = serde_json::to_string(run).unwrap();
        text = text.replace(&inner, &forge(run, from, to));
    }
    reseal(&text)
}
