use super::*;

fn grant(json: serde_json::Value) -> HttpGrant {
    serde_json::from_value(json).unwrap()
}

fn policy(json: serde_json::Value, operator: Option<&[&str]>) -> Policy {
    let operator = operator
        .map(|o| operator_allowlist(&o.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap());
    grant(json).policy("probe", operator).unwrap()
}

fn target<'a>(method: &'a str, https: bool, host: &'a str, port: Option<u16>) -> Target<'a> {
    Target {
        method,
        https,
        host,
        port,
    }
}

#[test]
fn host_patterns_parse_and_refuse() {
    for good in [
        "api.openai.com",
        "API.OpenAI.com",
        "*.example.com",
        "127.0.0.1:8080",
        "[::1]:9000",
        "[2001:db8::1]",
        "localhost",
    ] {
        HostPattern::parse(good).unwrap_or_else(|e| panic!("{good}: {e}"));
    }
    for (bad, says) in [
        ("https://api.openai.com", "the scheme in `scheme`"),
        ("api.openai.com/v1", "no path"),
        ("user@host", "no path"),
        ("host:http", "is not a port"),
        ("host:0", "port 0"),
        ("", "is not a host"),
        ("*.1.2.3.4", "is not a host"),
        ("-bad.com", "is not a host"),
        ("a b", "is not a host"),
        ("*", "is not a host"),
        ("[::1", "is not a host"),
        ("999.1.1.1", "is not a host"),
    ] {
        let e = HostPattern::parse(bad).unwrap_err();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn patterns_match_hosts_ports_and_domains() {
    let p = HostPattern::parse("api.example.com").unwrap();
    assert!(p.matches("api.example.com", 443, 443));
    assert!(p.matches("API.example.com.", 443, 443));
    assert!(!p.matches("api.example.com", 8443, 443));
    assert!(!p.matches("evil-api.example.com", 443, 443));
    let w = HostPattern::parse("*.example.com").unwrap();
    assert!(w.matches("a.example.com", 443, 443));
    assert!(w.matches("a.b.example.com", 443, 443));
    assert!(!w.matches("example.com", 443, 443));
    assert!(!w.matches("badexample.com", 443, 443));
    let ip = HostPattern::parse("[::1]:9000").unwrap();
    assert!(ip.matches("[::1]", 9000, 80));
    assert!(!ip.matches("[::1]", 80, 80));
}

#[test]
fn a_grant_checks_every_field_with_its_pointer() {
    let g = grant(serde_json::json!({
        "allow": [
            {"host": "https://x.com"},
            {"host": "ok.com", "scheme": "ftp", "methods": ["get"], "secrets": ["1BAD"]}
        ],
        "timeout": "soon",
        "max_response_bytes": 0
    }));
    let pointers: Vec<String> = g.check().into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        pointers,
        [
            "/allow/0/host",
            "/allow/1/scheme",
            "/allow/1/methods/0",
            "/allow/1/secrets/0",
            "/timeout",
            "/max_response_bytes"
        ]
    );
    let empty = grant(serde_json::json!({"allow": []}));
    assert_eq!(empty.check()[0].0, "/allow");
}

#[test]
fn requests_are_allowed_by_host_scheme_port_and_method_only() {
    let p = policy(
        serde_json::json!({"allow": [
            {"host": "api.example.com", "methods": ["POST"], "secrets": ["KEY"]},
            {"host": "127.0.0.1:8080", "scheme": "http"}
        ]}),
        None,
    );
    let rule = p
        .allow(target("POST", true, "api.example.com", None))
        .unwrap();
    assert_eq!(rule.secrets, ["KEY"]);
    p.allow(target("GET", false, "127.0.0.1", Some(8080)))
        .unwrap();
    for (t, says) in [
        (
            target("GET", true, "api.example.com", None),
            "be sent POST only",
        ),
        (
            target("POST", false, "api.example.com", None),
            "over https only",
        ),
        (
            target("POST", true, "evil.example.com", None),
            "`evil.example.com` is not in plugins.probe.http.allow",
        ),
        (
            target("GET", false, "127.0.0.1", Some(8081)),
            "port 8081 of `127.0.0.1` is not in plugins.probe.http.allow",
        ),
    ] {
        let e = p.allow(t).unwrap_err();
        assert!(e.contains(says), "{e}");
    }
}

#[test]
fn the_operator_allowlist_narrows_the_workflow_grant() {
    let p = policy(
        serde_json::json!({"allow": [{"host": "a.com"}, {"host": "b.com"}]}),
        Some(&["a.com", "*.c.com"]),
    );
    p.allow(target("GET", true, "a.com", None)).unwrap();
    let e = p.allow(target("GET", true, "b.com", None)).unwrap_err();
    assert!(e.contains("operator's http_allow"), "{e}");
    // The operator allowing a host does not grant it.
    let e = p.allow(target("GET", true, "x.c.com", None)).unwrap_err();
    assert!(e.contains("plugins.probe.http.allow"), "{e}");
}

#[test]
fn placeholders_are_found_and_filled() {
    let text = b"Bearer ${secret.KEY} and ${secret.OTHER_1} and ${secret.KEY}";
    assert_eq!(placeholders(text).unwrap(), ["KEY", "OTHER_1"]);
    let filled = fill(
        text,
        &[
            ("KEY".into(), "sk-1".into()),
            ("OTHER_1".into(), "v".into()),
        ],
    );
    assert_eq!(filled, b"Bearer sk-1 and v and sk-1");
    assert!(placeholders(b"no secrets $ {secret.X}").unwrap().is_empty());
    for bad in [&b"${secret.}"[..], b"${secret.A-B}", b"${secret.KEY"] {
        let e = placeholders(bad).unwrap_err();
        assert!(e.contains("not a secret placeholder"), "{e}");
    }
    assert_eq!(placeholder("KEY"), "${secret.KEY}");
}
