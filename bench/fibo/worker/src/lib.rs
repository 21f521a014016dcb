//! `fibo`: config `{"n": N}`; computes fibo(N) recursively, appends it as a
//! `FIBO` segment and signals `SIGNAL:SUCCESS`.

use serde::Deserialize;
use wfhost_sdk::prelude::*;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    n: u32,
}

fn fibo(n: u32) -> u64 {
    if n < 2 { n as u64 } else { fibo(n - 1) + fibo(n - 2) }
}

struct Fibo;

impl Worker for Fibo {
    fn run(ctx: BlockContext, mut payload: Payload) -> Result<WorkerOutput, PluginError> {
        let config: Config = ctx.config()?;
        payload.push(segment("FIBO", fibo(config.n).to_string()));
        Ok(WorkerOutput::new(payload, "SIGNAL:SUCCESS"))
    }
}

export_worker!(Fibo);
wfhost_sdk::declare_signals!["SIGNAL:SUCCESS"];
