//! The two model APIs: the request each takes and the answer read from
//! its response, streamed (server-sent events) or whole. Pure: tested
//! natively with recorded responses.

use serde::Deserialize;
use serde_json::{Value, json};
use wfhost_sdk::http::{Request, Response, secret};
use wfhost_sdk::prelude::PluginError;

use crate::sse;

/// Which API the endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// OpenAI's chat completions, and every server that speaks them.
    Openai,
    /// Anthropic's messages.
    Anthropic,
}

impl Api {
    pub fn name(self) -> &'static str {
        match self {
            Api::Openai => "openai",
            Api::Anthropic => "anthropic",
        }
    }

    fn default_endpoint(self) -> &'static str {
        match self {
            Api::Openai => "https://api.openai.com/v1/chat/completions",
            Api::Anthropic => "https://api.anthropic.com/v1/messages",
        }
    }
}

/// The block's config.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub api: Api,
    pub model: String,
    #[serde(default)]
    pub endpoint: Option<String>,
    #[serde(default)]
    pub api_key_secret: Option<String>,
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub stream: bool,
}

fn default_max_tokens() -> u32 {
    4096
}

/// The model's answer and what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub text: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

fn bad_config(message: String) -> PluginError {
    PluginError::new("bad-config", message)
}

fn model_error(message: String) -> PluginError {
    PluginError::new("model-error", message)
}

impl Config {
    /// What serde cannot say: names and ranges.
    pub fn check(&self) -> Result<(), PluginError> {
        if self.model.trim().is_empty() {
            return Err(bad_config("`model` is empty".into()));
        }
        if let Some(name) = &self.api_key_secret {
            let ok = !name.is_empty()
                && name.len() <= 128
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                return Err(bad_config(format!(
                    "`api_key_secret`: `{name}` is not a secret name (letters, digits and `_`)"
                )));
            }
        }
        if let Some(t) = self.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err(bad_config(format!(
                "`temperature` {t} is not between 0 and 2"
            )));
        }
        if self.max_tokens == 0 {
            return Err(bad_config("`max_tokens` must be above 0".into()));
        }
        Ok(())
    }

    pub fn endpoint(&self) -> &str {
        self.endpoint
            .as_deref()
            .unwrap_or(self.api.default_endpoint())
    }

    /// The request for `system` and `user`; the key as the host's
    /// placeholder.
    pub fn request(&self, system: &str, user: &str) -> Request {
        let mut body = match self.api {
            Api::Openai => {
                let mut messages = Vec::new();
                if !system.is_empty() {
                    messages.push(json!({"role": "system", "content": system}));
                }
                messages.push(json!({"role": "user", "content": user}));
                let mut body = json!({"model": self.model, "messages": messages,
                    "max_tokens": self.max_tokens});
                if self.stream {
                    body["stream"] = json!(true);
                    body["stream_options"] = json!({"include_usage": true});
                }
                body
            }
            Api::Anthropic => {
                let mut body = json!({"model": self.model, "max_tokens": self.max_tokens,
                    "messages": [{"role": "user", "content": user}]});
                if !system.is_empty() {
                    body["system"] = json!(system);
                }
                if self.stream {
                    body["stream"] = json!(true);
                }
                body
            }
        };
        if let Some(t) = self.temperature {
            body["temperature"] = json!(t);
        }
        let mut request = Request::post(self.endpoint(), body.to_string().into_bytes())
            .header("content-type", "application/json");
        if self.stream {
            request = request.header("accept", "text/event-stream");
        }
        match (self.api, &self.api_key_secret) {
            (Api::Openai, Some(name)) => {
                request = request.header("authorization", format!("Bearer {}", secret(name)));
            }
            (Api::Anthropic, Some(name)) => request = request.header("x-api-key", secret(name)),
            (_, None) => {}
        }
        if self.api == Api::Anthropic {
            request = request.header("anthropic-version", "2023-06-01");
        }
        request
    }

    /// The answer in `response`, or why there is none.
    pub fn answer(&self, response: &Response) -> Result<Answer, PluginError> {
        if !(200..300).contains(&response.status) {
            return Err(status_error(response));
        }
        let answer = match (self.api, self.stream) {
            (Api::Openai, false) => openai_whole(&json_of(response)?),
            (Api::Anthropic, false) => anthropic_whole(&json_of(response)?),
            (Api::Openai, true) => openai_stream(&sse::events(&response.text())),
            (Api::Anthropic, true) => anthropic_stream(&sse::events(&response.text())),
        }?;
        if answer.text.is_empty() {
            return Err(model_error("the model answered with no text".into()));
        }
        Ok(answer)
    }
}

fn json_of(response: &Response) -> Result<Value, PluginError> {
    serde_json::from_slice(&response.body)
        .map_err(|e| model_error(format!("the response is not JSON: {e}")))
}

/// A non-2xx response: permanent when the key or request is wrong.
fn status_error(response: &Response) -> PluginError {
    let detail: String = serde_json::from_slice::<Value>(&response.body)
        .ok()
        .and_then(|v| {
            v["error"]["message"]
                .as_str()
                .or(v["error"].as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| response.text())
        .chars()
        .take(500)
        .collect();
    let message = format!("the model's server answered {}: {detail}", response.status);
    match response.status {
        400 | 401 | 403 | 404 => bad_config(message),
        _ => model_error(message),
    }
}

fn tokens(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn openai_whole(v: &Value) -> Result<Answer, PluginError> {
    let text = v["choices"][0]["message"]["content"]
        .as_str()
        .ok_or_else(|| model_error("no choices[0].message.content in the response".into()))?;
    Ok(Answer {
        text: text.to_string(),
        input_tokens: tokens(&v["usage"]["prompt_tokens"]),
        output_tokens: tokens(&v["usage"]["completion_tokens"]),
    })
}

fn anthropic_whole(v: &Value) -> Result<Answer, PluginError> {
    let blocks = v["content"]
        .as_array()
        .ok_or_else(|| model_error("no content in the response".into()))?;
    let text: String = blocks
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect();
    Ok(Answer {
        text,
        input_tokens: tokens(&v["usage"]["input_tokens"]),
        output_tokens: tokens(&v["usage"]["output_tokens"]),
    })
}

fn openai_stream(events: &[sse::Event]) -> Result<Answer, PluginError> {
    let mut answer = Answer {
        text: String::new(),
        input_tokens: 0,
        output_tokens: 0,
    };
    let mut done = false;
    for event in events {
        if event.data == "[DONE]" {
            done = true;
            break;
        }
        let v: Value = serde_json::from_str(&event.data)
            .map_err(|e| model_error(format!("a streamed chunk is not JSON: {e}")))?;
        if let Some(piece) = v["choices"][0]["delta"]["content"].as_str() {
            answer.text.push_str(piece);
        }
        if v["usage"].is_object() {
            answer.input_tokens = tokens(&v["usage"]["prompt_tokens"]);
            answer.output_tokens = tokens(&v["usage"]["completion_tokens"]);
        }
    }
    if !done {
        return Err(model_error("the stream ended before [DONE]".into()));
    }
    Ok(answer)
}

fn anthropic_stream(events: &[sse::Event]) -> Result<Answer, PluginError> {
    let mut answer = Answer {
        text: String::new(),
        input_tokens: 0,
        output_tokens: 0,
    };
    let mut stopped = false;
    for event in events {
        let v: Value = serde_json::from_str(&event.data)
            .map_err(|e| model_error(format!("a streamed event is not JSON: {e}")))?;
        match v["type"].as_str().unwrap_or(event.name.as_str()) {
            "message_start" => {
                answer.input_tokens = tokens(&v["message"]["usage"]["input_tokens"]);
                answer.output_tokens = tokens(&v["message"]["usage"]["output_tokens"]);
            }
            "content_block_delta" => {
                if let Some(piece) = v["delta"]["text"].as_str() {
                    answer.text.push_str(piece);
                }
            }
            "message_delta" => {
                if let Some(n) = v["usage"]["output_tokens"].as_u64() {
                    answer.output_tokens = n;
                }
            }
            "message_stop" => stopped = true,
            "error" => {
                let m = v["error"]["message"].as_str().unwrap_or("unknown error");
                return Err(model_error(format!("the stream carried an error: {m}")));
            }
            _ => {}
        }
    }
    if !stopped {
        return Err(model_error("the stream ended before message_stop".into()));
    }
    Ok(answer)
}

#[cfg(test)]
mod tests;
