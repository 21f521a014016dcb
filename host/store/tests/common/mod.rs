//! What the store's tests share: a run's identity and its first event.
#![allow(dead_code)]

use wfhost_core::run::event::Event;
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
        rerun_of: None,
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

#[allow(unused_imports)]
pub use wfhost_store::forgery::{HOSTILE_RUN_IDS, forge, forge_session};
