//! What the store's tests share: a run's identity and its first event.

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

pub fn record(id: &str) -> RunRecord {
    RunRecord {
        id: id.into(),
        workflow_id: "w".into(),
        workflow_hash: wfhost_core::manifest::pinning::hash_of("{}"),
        manifest: "/nowhere/w.json".into(),
        workspace: "/tmp".into(),
        created_at: 1,
    }
}
