//! `scripted`: replays configured responses, standing in for an AI worker.
//!
//! Config:
//! - `responses` (required): the texts to answer with. The block's n-th
//!   answer is `responses[n]`, where n counts the `VALIDATION_ERROR`
//!   segments already in the payload — so a validation retry gets the next
//!   response — capped at the last one.
//! - `signal` (default `SIGNAL:SUCCESS`), `tokens_per_response` (default 0).
//! - `delay_ms` (default 0): think for this long before answering, like a
//!   real agent would; crash tests use it to stop the host mid-block. A
//!   whole number, or text holding one, so that an input can set it
//!   (`"delay_ms": "{{inputs.think_ms}}"`).
//!
//! The answer is appended as an `AI_RESPONSE` segment and returned as the
//! structured output, which the host validates when the block has a schema.

use serde::Deserialize;
use wfhost_sdk::prelude::*;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    responses: Vec<String>,
    #[serde(default)]
    signal: Option<String>,
    #[serde(default)]
    tokens_per_response: u64,
    #[serde(default, deserialize_with = "milliseconds")]
    delay_ms: u64,
}

/// A whole number of milliseconds, or text holding one (what an
/// `{{inputs.NAME}}` placeholder becomes).
fn milliseconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Number {
        Whole(u64),
        Text(String),
    }
    match Number::deserialize(d)? {
        Number::Whole(n) => Ok(n),
        Number::Text(text) => text.trim().parse().map_err(|_| {
            serde::de::Error::custom(format!("`{text}` is not a whole number of milliseconds"))
        }),
    }
}

pub struct Scripted;

impl Worker for Scripted {
    fn run(ctx: BlockContext, mut payload: Payload) -> Result<WorkerOutput, PluginError> {
        let config: Config = ctx.config()?;
        if config.responses.is_empty() {
            return Err(PluginError::new(
                "bad-config",
                "`responses` must not be empty",
            ));
        }
        if config.delay_ms > 0 {
            std::thread::sleep(std::time::Duration::from_millis(config.delay_ms));
        }
        let retries = payload
            .iter()
            .filter(|s| s.kind == "VALIDATION_ERROR")
            .count();
        let answer = config.responses[retries.min(config.responses.len() - 1)].clone();
        log::info(format!(
            "answering with response {}",
            retries.min(config.responses.len() - 1)
        ));
        payload.push(segment("AI_RESPONSE", answer.clone()));
        let lines = answer.lines().count() as u64;
        Ok(WorkerOutput::new(
            payload,
            config.signal.unwrap_or_else(|| "SIGNAL:SUCCESS".into()),
        )
        .with_structured_output(answer)
        .with_statistics(config.tokens_per_response, lines))
    }
}

export_worker!(Scripted);
wfhost_sdk::declare_signals!["SIGNAL:SUCCESS", "config:signal"];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx() -> BlockContext {
        BlockContext::for_test(
            "draft",
            json!({"responses": ["first", "second"], "tokens_per_response": 7}),
        )
    }

    #[test]
    fn each_validation_error_advances_to_the_next_response() {
        let out = Scripted::run(ctx(), vec![]).unwrap();
        assert_eq!(out.structured_output.as_deref(), Some("first"));
        assert_eq!(out.statistics.tokens_used, 7);
        let note = segment("VALIDATION_ERROR", "bad");
        let out = Scripted::run(ctx(), vec![note.clone()]).unwrap();
        assert_eq!(out.structured_output.as_deref(), Some("second"));
        let out = Scripted::run(ctx(), vec![note.clone(), note]).unwrap();
        assert_eq!(
            out.structured_output.as_deref(),
            Some("second"),
            "capped at the last"
        );
    }

    #[test]
    fn a_delay_may_be_text_holding_a_number() {
        let ctx = BlockContext::for_test("d", json!({"responses": ["x"], "delay_ms": "1"}));
        assert!(Scripted::run(ctx, vec![]).is_ok());
        let ctx = BlockContext::for_test("d", json!({"responses": ["x"], "delay_ms": "soon"}));
        let e = Scripted::run(ctx, vec![]).unwrap_err();
        assert!(
            e.message.contains("`soon` is not a whole number"),
            "{}",
            e.message
        );
    }

    #[test]
    fn empty_responses_are_a_config_error() {
        let ctx = BlockContext::for_test("d", json!({"responses": []}));
        assert_eq!(Scripted::run(ctx, vec![]).unwrap_err().code, "bad-config");
    }
}
