//! `llm`: the block's prompt to a model, the answer back as the block's
//! output. Speaks OpenAI-compatible chat completions and Anthropic
//! messages, streaming or not, over the `http` capability: the workflow
//! grants the plugin `http` and lists the model's host (with the API key's
//! secret) in `plugins.llm.http.allow`; the key never enters the sandbox.
//!
//! Config:
//! - `api`: `openai` (chat completions, and every server that speaks it)
//!   or `anthropic` (messages). Required.
//! - `model`: the model's name. Required (an `{{inputs.NAME}}` works).
//! - `endpoint`: the full URL (default: the API's public one).
//! - `api_key_secret`: the secret holding the key (sent as
//!   `Authorization: Bearer` or `x-api-key`); absent: no key is sent.
//! - `max_tokens` (default 4096), `temperature`, `stream` (default false).
//!
//! The prompt: the block's system prompt as the system message, its
//! assembled context (payload, contract, memory, artifacts — with any
//! `VALIDATION_ERROR` of a previous answer) as the user message. The
//! answer is appended as an `AI_RESPONSE` segment and returned as the
//! structured output, which the host cleans and validates against the
//! block's `validation_schema` (a failed validation runs the block again
//! with the error in its context). Tokens used (input + output) go to the
//! block's statistics.
//!
//! Failures: a refused request, a 401/403 or a malformed config is
//! `bad-config` (permanent: a retry would not help); a 429, a 5xx, a
//! timeout or a cut connection is `model-error` (retried by a retry
//! policy).

use wfhost_sdk::http::{self, HttpError};
use wfhost_sdk::prelude::*;

pub mod api;
pub mod sse;

use api::{Answer, Config};

pub struct Llm;

impl Worker for Llm {
    fn run(ctx: BlockContext, mut payload: Payload) -> Result<WorkerOutput, PluginError> {
        let config: Config = ctx.config()?;
        config.check()?;
        let request = config.request(&ctx.system_prompt, &ctx.assembled_context);
        log::info(format!(
            "asking {} ({} API, model {}{})",
            http::parse_url(&request.url)
                .map(|u| u.authority.to_string())
                .unwrap_or_default(),
            config.api.name(),
            config.model,
            if config.stream { ", streaming" } else { "" }
        ));
        let response = http::send(&request).map_err(failed)?;
        let answer: Answer = config.answer(&response)?;
        log::info(format!(
            "answered: {} input + {} output tokens",
            answer.input_tokens, answer.output_tokens
        ));
        payload.push(segment("AI_RESPONSE", answer.text.clone()));
        let lines = answer.text.lines().count() as u64;
        Ok(WorkerOutput::new(payload, "SIGNAL:SUCCESS")
            .with_structured_output(answer.text)
            .with_statistics(answer.input_tokens + answer.output_tokens, lines))
    }
}

fn failed(e: HttpError) -> PluginError {
    match e {
        HttpError::Denied | HttpError::BadRequest(_) => PluginError::new(
            "bad-config",
            format!(
                "{e}: grant the plugin `http` and list the endpoint's host (and the key's secret) in plugins.<name>.http.allow"
            ),
        ),
        other => PluginError::new("model-error", other.to_string()),
    }
}

export_worker!(Llm);
wfhost_sdk::declare_signals!["SIGNAL:SUCCESS"];
