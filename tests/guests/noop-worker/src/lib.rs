//! The cheapest possible worker, for measuring the host's per-call cost.

use wfhost_sdk::prelude::*;

pub struct Noop;

impl Worker for Noop {
    fn run(_ctx: BlockContext, payload: Payload) -> Result<WorkerOutput, PluginError> {
        Ok(WorkerOutput::new(payload, "SIGNAL:SUCCESS"))
    }
}

export_worker!(Noop);
