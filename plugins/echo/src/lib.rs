//! `echo`: the sample block worker.
//!
//! Config (all optional):
//! - `message`: text of the `ECHO` segment appended to the payload
//!   (default: `hello from <block>`);
//! - `signal`: the signal to emit (default `SIGNAL:SUCCESS`);
//! - `write`: `{ "path": ..., "content": ... }`, a file to write, relative to
//!   the workspace. A write the block's file restrictions forbid fails with
//!   `SIGNAL:WRITE_REFUSED` and the reason in the payload.

use serde::Deserialize;
use wfhost_sdk::prelude::*;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Config {
    message: Option<String>,
    signal: Option<String>,
    write: Option<WriteFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteFile {
    path: String,
    content: String,
}

pub struct Echo;

impl Worker for Echo {
    fn run(ctx: BlockContext, mut payload: Payload) -> Result<WorkerOutput, PluginError> {
        let config: Config = ctx.config::<Option<Config>>()?.unwrap_or_default();
        let message = config
            .message
            .unwrap_or_else(|| format!("hello from {}", ctx.block_id));
        payload.push(segment("ECHO", message));
        let mut lines = 0;
        if let Some(write) = config.write {
            if let Some(parent) = std::path::Path::new(&write.path).parent() {
                let _ = std::fs::create_dir_all(parent);
            }
            if let Err(e) = std::fs::write(&write.path, &write.content) {
                log::warn(format!("write to {} refused: {e}", write.path));
                payload.push(segment("WRITE_REFUSED", format!("{}: {e}", write.path)));
                return Ok(WorkerOutput::new(payload, "SIGNAL:WRITE_REFUSED"));
            }
            lines = write.content.lines().count() as u64;
            let noun = if lines == 1 { "line" } else { "lines" };
            log::info(format!("wrote {} ({lines} {noun})", write.path));
        }
        let signal = config.signal.unwrap_or_else(|| "SIGNAL:SUCCESS".into());
        Ok(WorkerOutput::new(payload, signal).with_statistics(0, lines))
    }
}

export_worker!(Echo);
wfhost_sdk::declare_signals!["SIGNAL:SUCCESS", "SIGNAL:WRITE_REFUSED", "config:signal"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_the_configured_message_and_signal() {
        let ctx = BlockContext::for_test(
            "greet",
            serde_json::json!({"message": "hi", "signal": "SIGNAL:DONE"}),
        );
        let out = Echo::run(ctx, vec![]).unwrap();
        assert_eq!(out.signal, "SIGNAL:DONE");
        assert_eq!(out.payload[0].content, "hi");
    }

    #[test]
    fn defaults_without_config() {
        let out = Echo::run(
            BlockContext::for_test("greet", serde_json::Value::Null),
            vec![],
        )
        .unwrap();
        assert_eq!(out.signal, "SIGNAL:SUCCESS");
        assert_eq!(out.payload[0].content, "hello from greet");
    }

    #[test]
    fn rejects_unknown_config() {
        let err = Echo::run(
            BlockContext::for_test("g", serde_json::json!({"mesage": 1})),
            vec![],
        )
        .unwrap_err();
        assert_eq!(err.code, "bad-config");
    }
}
