use super::*;

fn config(json: Value) -> Config {
    serde_json::from_value(json).unwrap()
}

fn response(status: u16, body: &str) -> Response {
    Response {
        status,
        headers: vec![],
        body: body.as_bytes().to_vec(),
    }
}

#[test]
fn openai_requests_carry_the_prompt_and_the_key_placeholder() {
    let c = config(
        json!({"api": "openai", "model": "m1", "api_key_secret": "OPENAI_KEY",
        "temperature": 0.5, "endpoint": "http://127.0.0.1:9/v1/chat/completions"}),
    );
    let r = c.request("be brief", "the context");
    assert_eq!(r.url, "http://127.0.0.1:9/v1/chat/completions");
    assert!(
        r.headers
            .contains(&("authorization".into(), "Bearer ${secret.OPENAI_KEY}".into()))
    );
    let body: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(body["model"], "m1");
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": "be brief"})
    );
    assert_eq!(
        body["messages"][1],
        json!({"role": "user", "content": "the context"})
    );
    assert_eq!(body["temperature"], 0.5);
    assert!(body.get("stream").is_none());
}

#[test]
fn anthropic_requests_put_the_system_prompt_apart() {
    let c = config(
        json!({"api": "anthropic", "model": "claude", "api_key_secret": "AK",
        "stream": true}),
    );
    let r = c.request("rules", "ctx");
    assert_eq!(r.url, "https://api.anthropic.com/v1/messages");
    assert!(
        r.headers
            .contains(&("x-api-key".into(), "${secret.AK}".into()))
    );
    assert!(
        r.headers
            .contains(&("anthropic-version".into(), "2023-06-01".into()))
    );
    let body: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(body["system"], "rules");
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": "ctx"}])
    );
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], 4096);
}

#[test]
fn whole_answers_are_read_with_their_usage() {
    let c = config(json!({"api": "openai", "model": "m"}));
    let a = c
        .answer(&response(
            200,
            r#"{"choices":[{"message":{"role":"assistant","content":"hi"}}],
            "usage":{"prompt_tokens":12,"completion_tokens":3}}"#,
        ))
        .unwrap();
    assert_eq!(
        (a.text.as_str(), a.input_tokens, a.output_tokens),
        ("hi", 12, 3)
    );
    let c = config(json!({"api": "anthropic", "model": "m"}));
    let a = c
        .answer(&response(
            200,
            r#"{"content":[{"type":"text","text":"a"},{"type":"tool_use"},
            {"type":"text","text":"b"}],"usage":{"input_tokens":7,"output_tokens":2}}"#,
        ))
        .unwrap();
    assert_eq!(
        (a.text.as_str(), a.input_tokens, a.output_tokens),
        ("ab", 7, 2)
    );
}

#[test]
fn streamed_answers_are_joined_and_must_end() {
    let c = config(json!({"api": "openai", "model": "m", "stream": true}));
    let stream = "data: {\"choices\":[{\"delta\":{\"content\":\"he\"}}]}\n\n\
                  data: {\"choices\":[{\"delta\":{\"content\":\"llo\"}}]}\n\n\
                  data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n\
                  data: [DONE]\n\n";
    let a = c.answer(&response(200, stream)).unwrap();
    assert_eq!(
        (a.text.as_str(), a.input_tokens, a.output_tokens),
        ("hello", 5, 2)
    );
    let cut = &stream[..stream.find("data: [DONE]").unwrap()];
    let e = c.answer(&response(200, cut)).unwrap_err();
    assert_eq!(e.code, "model-error");
    let c = config(json!({"api": "anthropic", "model": "m", "stream": true}));
    let stream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n\
                  event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"o\"}}\n\n\
                  event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"k\"}}\n\n\
                  event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":4}}\n\n\
                  event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let a = c.answer(&response(200, stream)).unwrap();
    assert_eq!(
        (a.text.as_str(), a.input_tokens, a.output_tokens),
        ("ok", 9, 4)
    );
}

#[test]
fn errors_say_whether_a_retry_could_help() {
    let c = config(json!({"api": "openai", "model": "m"}));
    let e = c
        .answer(&response(401, r#"{"error":{"message":"bad key"}}"#))
        .unwrap_err();
    assert_eq!(e.code, "bad-config");
    assert!(e.message.contains("401: bad key"), "{}", e.message);
    for status in [429, 500, 503] {
        assert_eq!(
            c.answer(&response(status, "busy")).unwrap_err().code,
            "model-error"
        );
    }
    assert_eq!(
        c.answer(&response(200, "not json")).unwrap_err().code,
        "model-error"
    );
    let empty = r#"{"choices":[{"message":{"content":""}}]}"#;
    assert_eq!(
        c.answer(&response(200, empty)).unwrap_err().code,
        "model-error"
    );
}

#[test]
fn configs_are_checked() {
    for (bad, says) in [
        (json!({"api": "openai", "model": " "}), "`model` is empty"),
        (
            json!({"api": "openai", "model": "m", "api_key_secret": "A-B"}),
            "not a secret name",
        ),
        (
            json!({"api": "openai", "model": "m", "temperature": 3.0}),
            "temperature",
        ),
        (
            json!({"api": "openai", "model": "m", "max_tokens": 0}),
            "max_tokens",
        ),
    ] {
        let e = config(bad).check().unwrap_err();
        assert!(e.message.contains(says), "{}", e.message);
    }
    assert!(serde_json::from_value::<Config>(json!({"api": "gemini", "model": "m"})).is_err());
}
