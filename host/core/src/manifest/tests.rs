use std::path::Path;

use super::*;

const BUILTINS: &[&str] = &["actions-core", "echo"];

fn manifest(text: &str) -> Result<Workflow, ManifestErrors> {
    let file = Path::new("wf.json");
    let wf = parse(file, text)?;
    let errors = check(file, &wf, BUILTINS);
    if errors.is_empty() {
        Ok(wf)
    } else {
        Err(ManifestErrors(errors))
    }
}

fn minimal(action: &str) -> String {
    format!(
        r#"{{"id":"w","start_node":"main","nodes":{{"main":{{"entry_block":"a","blocks":{{
            "a":{{"worker":"echo","transitions":[{{"on_signal":"SIGNAL:SUCCESS","action":"{action}"}}]}},
            "b":{{"worker":"echo"}}}}}}}}}}"#
    )
}

#[test]
fn accepts_a_valid_manifest() {
    let wf = manifest(&minimal("JUMP:b")).unwrap();
    assert_eq!(wf.action_handler, DEFAULT_ACTION_HANDLER);
    assert!(wf.nodes["main"].context_inheritance);
}

#[test]
fn syntax_errors_carry_line_and_column() {
    let err = manifest("{\n  \"id\": \"w\",\n  oops\n}").unwrap_err();
    assert_eq!(err.0[0].location.as_deref(), Some("3:3"));
    assert!(err.to_string().starts_with("wf.json: 3:3: "), "{err}");
}

#[test]
fn unknown_fields_are_refused_with_their_path() {
    let text = minimal("END").replace("\"worker\":\"echo\",", "\"worker\":\"echo\",\"wrker\":1,");
    let err = manifest(&text).unwrap_err().to_string();
    assert!(err.contains("unknown field `wrker`"), "{err}");
    assert!(err.contains("nodes.main.blocks.a"), "{err}");
}

#[test]
fn jump_to_a_missing_block_names_the_place() {
    let err = manifest(&minimal("JUMP:nowhere")).unwrap_err();
    assert_eq!(
        err.0[0].location.as_deref(),
        Some("/nodes/main/blocks/a/transitions/0/action")
    );
    assert!(err.0[0].message.contains("`nowhere`"), "{err}");
}

#[test]
fn unknown_worker_is_refused() {
    let text = minimal("END").replacen("\"worker\":\"echo\"", "\"worker\":\"ghost\"", 1);
    let err = manifest(&text).unwrap_err();
    assert_eq!(
        err.0[0].location.as_deref(),
        Some("/nodes/main/blocks/a/worker")
    );
    assert!(err.0[0].message.contains("unknown worker `ghost`"));
}

#[test]
fn missing_start_node_and_entry_block_are_reported() {
    let text = r#"{"id":"w","start_node":"x","nodes":{"main":{"entry_block":"zz","blocks":{"a":{"worker":"echo"}}}}}"#;
    let err = manifest(text).unwrap_err();
    let locations: Vec<_> = err.0.iter().map(|e| e.location.clone().unwrap()).collect();
    assert_eq!(locations, ["/start_node", "/nodes/main/entry_block"]);
}

#[test]
fn calls_and_returns_are_checked() {
    assert!(manifest(&minimal("CALL:main@b")).is_ok());
    assert!(manifest(&minimal("CALL:ghost")).is_err());
    assert!(manifest(&minimal("CALL:main@ghost")).is_err());
}

#[test]
fn bad_merge_instructions_name_their_place() {
    let text = minimal("END").replacen(
        "\"worker\":\"echo\",",
        "\"worker\":\"echo\",\"payload_merge_strategy\":[\"inherit\",\"shuffle\"],",
        1,
    );
    let err = manifest(&text).unwrap_err();
    assert_eq!(
        err.0[0].location.as_deref(),
        Some("/nodes/main/blocks/a/payload_merge_strategy/1")
    );
    assert!(err.0[0].message.contains("`shuffle`"), "{err}");
}

#[test]
fn a_bad_retry_policy_names_each_field_with_its_pointer() {
    let with = |retry: &str| {
        minimal("END").replacen(
            "\"worker\":\"echo\",",
            &format!("\"worker\":\"echo\",\"retry\":{retry},"),
            1,
        )
    };
    let err = manifest(&with(
        r#"{"max_attempts":0,"multiplier":0.5,"jitter":1.5,"on":["SIGNAL:FAIL_DEFAULT"]}"#,
    ))
    .unwrap_err();
    let at: Vec<&str> = err.0.iter().filter_map(|e| e.location.as_deref()).collect();
    assert_eq!(
        at,
        [
            "/nodes/main/blocks/a/retry/max_attempts",
            "/nodes/main/blocks/a/retry/multiplier",
            "/nodes/main/blocks/a/retry/jitter",
            "/nodes/main/blocks/a/retry/on/0"
        ],
        "{err}"
    );
    // A duration that does not parse, or an unknown field, is refused as
    // the manifest is read, naming its path.
    for (retry, path, says) in [
        (
            r#"{"initial":"soon"}"#,
            "retry.initial",
            "is not a duration",
        ),
        (
            r#"{"max_interval":"90"}"#,
            "retry.max_interval",
            "is not a duration",
        ),
        (r#"{"tries":3}"#, "retry", "unknown field `tries`"),
    ] {
        let err = manifest(&with(retry)).unwrap_err().to_string();
        assert!(err.contains(path) && err.contains(says), "{retry}: {err}");
    }
    assert!(
        manifest(&with(
            r#"{"max_attempts":5,"initial":"1m30s","never":["SIGNAL:X"]}"#
        ))
        .is_ok()
    );
}

#[test]
fn an_invalid_schema_is_a_manifest_error() {
    let text = minimal("END").replacen(
        "\"worker\":\"echo\",",
        "\"worker\":\"echo\",\"validation_schema\":{\"type\":\"banana\"},",
        1,
    );
    let err = manifest(&text).unwrap_err();
    assert_eq!(
        err.0[0].location.as_deref(),
        Some("/nodes/main/blocks/a/validation_schema")
    );
    assert!(err.0[0].message.contains("invalid JSON Schema"), "{err}");
}

#[test]
fn schema_files_are_loaded_relative_to_the_manifest() {
    let dir = std::env::temp_dir().join(format!("wfhost-schema-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("schemas")).unwrap();
    std::fs::write(dir.join("schemas/plan.json"), r#"{"type":"object"}"#).unwrap();
    let text = minimal("END").replacen(
        "\"worker\":\"echo\",",
        "\"worker\":\"echo\",\"validation_schema\":\"schemas/plan.json\",",
        1,
    );
    std::fs::write(dir.join("wf.json"), &text).unwrap();
    let wf = crate::formats::load(&dir.join("wf.json"), BUILTINS).unwrap();
    let schema = wf.workflow.nodes["main"].blocks["a"]
        .validation_schema
        .clone();
    assert_eq!(schema, Some(serde_json::json!({"type": "object"})));

    std::fs::write(
        dir.join("wf.json"),
        text.replace("plan.json", "missing.json"),
    )
    .unwrap();
    let err = crate::formats::load(&dir.join("wf.json"), BUILTINS)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("/nodes/main/blocks/a/validation_schema") && err.contains("missing.json"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn action_verbs_are_checked() {
    let with_handlers = |handlers: &str| {
        minimal("END").replacen(
            "\"start_node\"",
            &format!("\"action_handlers\":{handlers},\"start_node\""),
            1,
        )
    };
    assert!(manifest(&with_handlers(r#"{"ESCALATE":"echo"}"#)).is_ok());
    let err = manifest(&with_handlers(r#"{"JUMP":"echo"}"#)).unwrap_err();
    assert_eq!(err.0[0].location.as_deref(), Some("/action_handlers/JUMP"));
    let err = manifest(&with_handlers(r#"{"lower":"echo"}"#)).unwrap_err();
    assert!(err.0[0].message.contains("upper-case"), "{err}");
    let err = manifest(&with_handlers(r#"{"X":"ghost"}"#)).unwrap_err();
    assert!(err.0[0].message.contains("`ghost`"), "{err}");
}

#[test]
fn durations_parse() {
    assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
    assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
    assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
    assert_eq!(parse_duration("168h").unwrap(), MAX_DURATION);
    for huge in [
        "99999999999999999999s",
        "10000000000000000000s",
        "92233720368547758s",
        "168.001h",
        "1e400s",
    ] {
        assert!(parse_duration(huge).is_err(), "{huge}");
    }
    assert!(parse_duration("10 parsecs").is_err());
    assert!(parse_duration("0s").is_err());
    assert!(parse_duration("s").is_err());
}

#[test]
fn external_is_a_worker_and_not_a_plugin_name() {
    let ok = minimal("JUMP:b").replace(r#""b":{"worker":"echo"}"#, r#""b":{"worker":"external"}"#);
    manifest(&ok).unwrap();
    let fanned = minimal("JUMP:b").replace(
        r#""b":{"worker":"echo"}"#,
        r#""b":{"worker":"external","parallel":{"lanes":{"x":{}}}}"#,
    );
    let err = manifest(&fanned).unwrap_err().to_string();
    assert!(
        err.contains("/nodes/main/blocks/b/parallel") && err.contains("cannot fan out"),
        "{err}"
    );
    let named = minimal("JUMP:b").replace(
        r#""nodes":"#,
        r#""plugins":{"external":{"path":"x.wasm"}},"nodes":"#,
    );
    let err = manifest(&named).unwrap_err().to_string();
    assert!(
        err.contains("/plugins/external") && err.contains("not a plugin"),
        "{err}"
    );
}

#[test]
fn a_plugin_comes_from_a_path_or_a_package_ref_never_both() {
    let with = |plugin: &str| {
        minimal("END")
            .replace(
                r#""worker":"echo","transitions""#,
                r#""worker":"wc","transitions""#,
            )
            .replace(
                r#""nodes":"#,
                &format!(r#""plugins":{{"wc":{plugin}}},"nodes":"#),
            )
    };
    let wf = manifest(&with(
        r#"{"ref":"oci://127.0.0.1:5000/acme/wc:1.0.0","grants":["exec"]}"#,
    ))
    .unwrap();
    assert_eq!(
        wf.plugins["wc"].reference.as_deref(),
        Some("oci://127.0.0.1:5000/acme/wc:1.0.0")
    );
    for (plugin, place, says) in [
        (
            r#"{"ref":"oci://r.io/a:1","path":"a.wasm"}"#,
            "/plugins/wc",
            "both `path` and `ref`",
        ),
        (
            r#"{"ref":"r.io/a:1"}"#,
            "/plugins/wc/ref",
            "must start with `oci://`",
        ),
        (
            r#"{"ref":"oci://r.io/a"}"#,
            "/plugins/wc/ref",
            "neither a tag nor a digest",
        ),
        (r#"{"grants":[]}"#, "/plugins/wc", "no `path` or `ref`"),
    ] {
        let err = manifest(&with(plugin)).unwrap_err().to_string();
        assert!(err.contains(place) && err.contains(says), "{plugin}: {err}");
    }
}

#[test]
fn artifact_gates_guard_worker_blocks_with_a_session_folder() {
    let gated = |extra: &str| {
        minimal("END").replacen(
            r#""worker":"echo","#,
            &format!(r#""worker":"echo",{extra}"#),
            1,
        )
    };
    let wf = manifest(&gated(r#""artifact_gates":["spec.md","tasks.yaml"],"#)).unwrap();
    assert!(wf.uses_session_files(), "gates keep the session folder");
    for (text, says) in [
        (
            gated(r#""artifact_gates":["spec.md","spec.md"],"#),
            "listed twice",
        ),
        (
            gated(r#""artifact_gates":["notes.md"],"#),
            "unknown variant `notes.md`",
        ),
        (
            gated(r#""artifact_gates":["spec.md"],"#)
                .replace(r#""start_node""#, r#""session_files":false,"start_node""#),
            "turns off",
        ),
        (
            gated(r#""artifact_gates":["spec.md"],"parallel":{"lanes":{"x":{}}},"#),
            "not an `external`, control or parallel block",
        ),
    ] {
        let err = manifest(&text).unwrap_err().to_string();
        assert!(err.contains(says), "{text}: {err}");
    }
}
