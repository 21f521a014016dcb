//! A worker granted `http` that sends the requests of its config and
//! reports, as its structured output, exactly what it saw: each response's
//! status, headers and body, or the error. With `follow`, a redirect's
//! `Location` is requested next (the host checks that hop like any other).
//!
//! Config: `{"requests": [{"method", "url", "headers": [[name, value]],
//! "body", "follow"}]}`; `${secret.NAME}` in any of them is left for the
//! host to fill in.

use serde::Deserialize;
use serde_json::json;
use wfhost_sdk::http::{self, Request};
use wfhost_sdk::prelude::*;

#[derive(Deserialize)]
struct Config {
    requests: Vec<Asked>,
}

#[derive(Deserialize)]
struct Asked {
    #[serde(default = "get")]
    method: String,
    url: String,
    #[serde(default)]
    headers: Vec<(String, String)>,
    #[serde(default)]
    body: String,
    #[serde(default)]
    follow: bool,
}

fn get() -> String {
    "GET".into()
}

fn one(asked: &Asked) -> serde_json::Value {
    let mut request = Request::new(&asked.method, asked.url.clone());
    request.headers = asked.headers.clone();
    request.body = asked.body.clone().into_bytes();
    let mut seen = Vec::new();
    loop {
        match http::send(&request) {
            Err(e) => {
                seen.push(json!({"url": request.url, "error": format!("{e:?}")}));
                break;
            }
            Ok(response) => {
                let location = response.header("location").map(str::to_string);
                seen.push(json!({
                    "url": request.url,
                    "status": response.status,
                    "headers": response.headers,
                    "body": response.text(),
                }));
                match location {
                    Some(next) if asked.follow && (300..400).contains(&response.status) => {
                        request = Request::get(next);
                    }
                    _ => break,
                }
            }
        }
    }
    json!(seen)
}

pub struct HttpProbe;

impl Worker for HttpProbe {
    fn run(ctx: BlockContext, mut payload: Payload) -> Result<WorkerOutput, PluginError> {
        let config: Config = ctx.config()?;
        let results: Vec<serde_json::Value> = config.requests.iter().map(one).collect();
        let text = serde_json::to_string(&results).expect("json");
        payload.push(segment("HTTP", text.clone()));
        Ok(WorkerOutput::new(payload, "SIGNAL:SUCCESS").with_structured_output(text))
    }
}

export_worker!(HttpProbe);
