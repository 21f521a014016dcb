//! `{{name}}`: a wfhost block worker.
//!
//! Config: `{"greeting": "..."}`. With a greeting it appends a `GREETING`
//! segment to the payload and signals `SIGNAL:SUCCESS`; without one it
//! signals `SIGNAL:EMPTY`.

use serde::Deserialize;
use wfhost_sdk::prelude::*;

/// The block's `config` in the workflow.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub greeting: Option<String>,
}

pub struct Plugin;

impl Worker for Plugin {
    fn run(ctx: BlockContext, mut payload: Payload) -> Result<WorkerOutput, PluginError> {
        let config: Config = ctx.config::<Option<Config>>()?.unwrap_or_default();
        let Some(greeting) = config.greeting else {
            log::warn("no `greeting` in the block's config");
            return Ok(WorkerOutput::new(payload, "SIGNAL:EMPTY"));
        };
        let text = format!("{greeting} from {}.{}", ctx.node_id, ctx.block_id);
        log::info(format!("greeting with: {text}"));
        payload.push(segment("GREETING", text));
        Ok(WorkerOutput::new(payload, "SIGNAL:SUCCESS"))
    }
}

export_worker!(Plugin);
// The signals this worker can return: `wfhost validate` warns about a
// transition on any other.
wfhost_sdk::declare_signals!["SIGNAL:SUCCESS", "SIGNAL:EMPTY"];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn greets_with_the_configured_greeting() {
        let ctx = BlockContext::for_test("greet", json!({"greeting": "hello"}));
        let output = Plugin::run(ctx, Vec::new()).unwrap();
        assert_eq!(output.signal, "SIGNAL:SUCCESS");
        assert_eq!(output.payload.len(), 1);
        assert_eq!(output.payload[0].kind, "GREETING");
        assert_eq!(output.payload[0].content, "hello from main.greet");
    }

    #[test]
    fn no_greeting_is_empty() {
        let ctx = BlockContext::for_test("greet", json!(null));
        let output = Plugin::run(ctx, Vec::new()).unwrap();
        assert_eq!(output.signal, "SIGNAL:EMPTY");
        assert!(output.payload.is_empty());
    }

    #[test]
    fn an_unknown_config_key_fails_the_block() {
        let ctx = BlockContext::for_test("greet", json!({"greting": "typo"}));
        let err = Plugin::run(ctx, Vec::new()).err().unwrap();
        assert_eq!(err.code, "bad-config");
    }
}
