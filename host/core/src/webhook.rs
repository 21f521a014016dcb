//! Webhook triggers: a signed HTTP delivery that starts a run. What is
//! pure here — checking a delivery's signature, its time and its id in the
//! formats senders use, and mapping its JSON payload to the run's inputs —
//! so the rules are tested without a server.
//!
//! Formats:
//! - `github`: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`
//!   and the delivery id in `X-GitHub-Delivery` (GitHub sends no time: a
//!   replay is caught by its id alone).
//! - `sha256`: `X-Wfhost-Signature: sha256=<hex HMAC-SHA256 of
//!   "<timestamp>.<body>">`, `X-Wfhost-Timestamp: <unix seconds>` (within
//!   the hook's window of now) and `X-Wfhost-Delivery: <id>`; the time is
//!   signed, so an old delivery cannot be made new.
//! - `unsigned`: nothing checked but the delivery id, when one is sent —
//!   only for a hook added as such, explicitly.

use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::Sha256;

/// The formats a hook may take deliveries in.
pub const FORMATS: &[&str] = &["github", "sha256", "unsigned"];

/// The longest delivery id kept.
pub const MAX_DELIVERY_ID: usize = 200;

/// Why a delivery is refused: the HTTP status, a stable code, and a
/// message for the sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
}

fn refuse(status: u16, code: &'static str, message: impl Into<String>) -> Refusal {
    Refusal {
        status,
        code,
        message: message.into(),
    }
}

/// A delivery whose signature and time were checked: its id, if it had
/// one (an `unsigned` hook's sender may send none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub delivery: Option<String>,
}

/// Check a delivery of `format` (`header` looks a request header up,
/// case-insensitively) against `secret`, at `now_s` (unix seconds), the
/// time allowed off by `window_s`.
pub fn check(
    format: &str,
    secret: Option<&[u8]>,
    header: &dyn Fn(&str) -> Option<String>,
    body: &[u8],
    (now_s, window_s): (i64, i64),
) -> Result<Checked, Refusal> {
    let unauthorized = |m: &str| refuse(401, "bad_signature", m);
    match format {
        "github" => {
            let secret = secret.ok_or_else(|| {
                refuse(
                    500,
                    "no_secret",
                    "the hook's secret is not set on the server",
                )
            })?;
            let given = header("x-hub-signature-256")
                .ok_or_else(|| unauthorized("no X-Hub-Signature-256 header"))?;
            verify(secret, &[body], &given).map_err(|m| unauthorized(&m))?;
            let id = delivery_id(header("x-github-delivery"), "X-GitHub-Delivery")?;
            Ok(Checked { delivery: Some(id) })
        }
        "sha256" => {
            let secret = secret.ok_or_else(|| {
                refuse(
                    500,
                    "no_secret",
                    "the hook's secret is not set on the server",
                )
            })?;
            let given = header("x-wfhost-signature")
                .ok_or_else(|| unauthorized("no X-Wfhost-Signature header"))?;
            let stamp = header("x-wfhost-timestamp")
                .ok_or_else(|| unauthorized("no X-Wfhost-Timestamp header"))?;
            let at: i64 = stamp
                .trim()
                .parse()
                .map_err(|_| unauthorized("X-Wfhost-Timestamp is not unix seconds"))?;
            verify(secret, &[stamp.trim().as_bytes(), b".", body], &given)
                .map_err(|m| unauthorized(&m))?;
            if (now_s - at).abs() > window_s {
                return Err(refuse(
                    401,
                    "stale",
                    format!(
                        "the delivery's timestamp is {} s from the server's time, over the hook's window of {window_s} s",
                        (now_s - at).abs()
                    ),
                ));
            }
            let id = delivery_id(header("x-wfhost-delivery"), "X-Wfhost-Delivery")?;
            Ok(Checked { delivery: Some(id) })
        }
        "unsigned" => {
            let given = header("x-github-delivery").or_else(|| header("x-wfhost-delivery"));
            let delivery = match given {
                Some(id) => Some(delivery_id(Some(id), "the delivery id")?),
                None => None,
            };
            Ok(Checked { delivery })
        }
        other => Err(refuse(
            500,
            "bad_hook",
            format!("unknown hook format `{other}`"),
        )),
    }
}

/// A delivery id from `header`: present, short and printable.
fn delivery_id(value: Option<String>, header: &str) -> Result<String, Refusal> {
    let id = value.ok_or_else(|| {
        refuse(
            400,
            "no_delivery",
            format!("no {header} header: each delivery needs an id"),
        )
    })?;
    let id = id.trim().to_string();
    if id.is_empty() || id.len() > MAX_DELIVERY_ID || id.chars().any(|c| c.is_control()) {
        return Err(refuse(
            400,
            "bad_delivery",
            format!("{header} must be 1 to {MAX_DELIVERY_ID} printable characters"),
        ));
    }
    Ok(id)
}

/// Whether `given` (`sha256=<hex>`) is the HMAC-SHA256 of `parts` under
/// `secret`, compared in constant time.
fn verify(secret: &[u8], parts: &[&[u8]], given: &str) -> Result<(), String> {
    let hex = given
        .trim()
        .strip_prefix("sha256=")
        .ok_or("the signature is not `sha256=<hex>`")?;
    let bytes = decode_hex(hex).ok_or("the signature is not hexadecimal")?;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).map_err(|e| e.to_string())?;
    for part in parts {
        mac.update(part);
    }
    mac.verify_slice(&bytes)
        .map_err(|_| "the signature does not match the body and the hook's secret".to_string())
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `sha256=<hex>` of `parts` under `secret`: what a sender signs with.
pub fn sign(secret: &[u8], parts: &[&[u8]]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key");
    for part in parts {
        mac.update(part);
    }
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// The run's inputs from a delivery: `fixed` ones, then each of `mapping`
/// (input name → JSON pointer into `payload`; a pointer that finds
/// nothing leaves the input out, for the workflow's default or its
/// `required` to decide). The inputs are checked against the workflow
/// after.
pub fn inputs_of(
    mapping: &Map<String, Value>,
    fixed: &Map<String, Value>,
    payload: &Value,
) -> Map<String, Value> {
    let mut inputs = fixed.clone();
    for (name, pointer) in mapping {
        if let Some(found) = pointer.as_str().and_then(|p| payload.pointer(p)) {
            inputs.insert(name.clone(), found.clone());
        }
    }
    inputs
}

/// What is wrong with a mapping: each value a JSON pointer (`""` or
/// starting with `/`); the input names plain. The first problem: the
/// input and why.
pub fn check_mapping(mapping: &Map<String, Value>) -> Result<(), (String, String)> {
    for (name, pointer) in mapping {
        match pointer.as_str() {
            Some(p) if p.is_empty() || p.starts_with('/') => {}
            _ => {
                return Err((
                    name.clone(),
                    format!(
                        "`{pointer}` is not a JSON pointer into the payload (such as `/repository/full_name`)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, String)]) -> impl Fn(&str) -> Option<String> + use<> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
            .collect();
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == &name.to_ascii_lowercase())
                .map(|(_, v)| v.clone())
        }
    }

    const SECRET: &[u8] = b"It's a Secret to Everybody";
    const BODY: &[u8] = b"Hello, World!";

    #[test]
    fn a_github_delivery_is_checked_against_its_signature_and_needs_an_id() {
        // GitHub's documented example.
        let sig = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert_eq!(sign(SECRET, &[BODY]), sig);
        let ok = headers(&[
            ("X-Hub-Signature-256", sig.into()),
            (
                "X-GitHub-Delivery",
                "72d3162e-cc78-11e3-81ab-4c9367dc0958".into(),
            ),
        ]);
        let checked = check("github", Some(SECRET), &ok, BODY, (0, 300)).unwrap();
        assert_eq!(
            checked.delivery.as_deref(),
            Some("72d3162e-cc78-11e3-81ab-4c9367dc0958")
        );
        let wrong = check("github", Some(b"another"), &ok, BODY, (0, 300)).unwrap_err();
        assert_eq!((wrong.status, wrong.code), (401, "bad_signature"));
        let tampered = check("github", Some(SECRET), &ok, b"Hello, World?", (0, 300)).unwrap_err();
        assert_eq!(tampered.code, "bad_signature");
        let unsigned = headers(&[("X-GitHub-Delivery", "x".into())]);
        assert_eq!(
            check("github", Some(SECRET), &unsigned, BODY, (0, 300))
                .unwrap_err()
                .status,
            401
        );
        let no_id = headers(&[("X-Hub-Signature-256", sig.into())]);
        assert_eq!(
            check("github", Some(SECRET), &no_id, BODY, (0, 300))
                .unwrap_err()
                .code,
            "no_delivery"
        );
        for bad in ["sha1=abc", "sha256=zz", "sha256=abc"] {
            let h = headers(&[
                ("X-Hub-Signature-256", bad.into()),
                ("X-GitHub-Delivery", "d".into()),
            ]);
            assert_eq!(
                check("github", Some(SECRET), &h, BODY, (0, 300))
                    .unwrap_err()
                    .status,
                401,
                "{bad}"
            );
        }
        assert_eq!(
            check("github", None, &ok, BODY, (0, 300)).unwrap_err().code,
            "no_secret"
        );
    }

    #[test]
    fn a_timestamped_delivery_is_refused_outside_its_window_and_its_time_is_signed() {
        let now = 1_800_000_000;
        let at = |t: i64, body: &[u8], signed_at: i64| {
            let stamp = signed_at.to_string();
            headers(&[
                (
                    "X-Wfhost-Signature",
                    sign(SECRET, &[stamp.as_bytes(), b".", body]),
                ),
                ("X-Wfhost-Timestamp", t.to_string()),
                ("X-Wfhost-Delivery", "d-1".into()),
            ])
        };
        assert!(
            check(
                "sha256",
                Some(SECRET),
                &at(now - 10, BODY, now - 10),
                BODY,
                (now, 300)
            )
            .is_ok()
        );
        let stale = check(
            "sha256",
            Some(SECRET),
            &at(now - 301, BODY, now - 301),
            BODY,
            (now, 300),
        )
        .unwrap_err();
        assert_eq!((stale.status, stale.code), (401, "stale"));
        let future = check(
            "sha256",
            Some(SECRET),
            &at(now + 400, BODY, now + 400),
            BODY,
            (now, 300),
        )
        .unwrap_err();
        assert_eq!(future.code, "stale");
        // An old delivery with a fresh timestamp: the signature no longer fits.
        let moved = check(
            "sha256",
            Some(SECRET),
            &at(now, BODY, now - 3600),
            BODY,
            (now, 300),
        )
        .unwrap_err();
        assert_eq!(moved.code, "bad_signature");
        let words = headers(&[
            ("X-Wfhost-Signature", sign(SECRET, &[b"soon", b".", BODY])),
            ("X-Wfhost-Timestamp", "soon".into()),
            ("X-Wfhost-Delivery", "d".into()),
        ]);
        assert_eq!(
            check("sha256", Some(SECRET), &words, BODY, (now, 300))
                .unwrap_err()
                .status,
            401
        );
    }

    #[test]
    fn an_unsigned_hook_takes_any_body_and_keeps_an_id_when_sent() {
        let none = headers(&[]);
        assert_eq!(
            check("unsigned", None, &none, BODY, (0, 0))
                .unwrap()
                .delivery,
            None
        );
        let with = headers(&[("X-Wfhost-Delivery", "abc".into())]);
        assert_eq!(
            check("unsigned", None, &with, BODY, (0, 0))
                .unwrap()
                .delivery
                .as_deref(),
            Some("abc")
        );
        let bad = headers(&[("X-Wfhost-Delivery", "a\nb".into())]);
        assert_eq!(
            check("unsigned", None, &bad, BODY, (0, 0))
                .unwrap_err()
                .code,
            "bad_delivery"
        );
    }

    #[test]
    fn a_payload_maps_to_inputs_by_pointer_over_the_fixed_ones() {
        let payload = serde_json::json!({"ref": "refs/heads/main", "repository": {"full_name": "o/r"}, "n": [1, 2]});
        let mapping: Map<String, Value> = serde_json::from_value(serde_json::json!({
            "branch": "/ref", "repo": "/repository/full_name", "second": "/n/1", "absent": "/nope"
        }))
        .unwrap();
        let fixed: Map<String, Value> =
            serde_json::from_value(serde_json::json!({"env": "prod", "repo": "x"})).unwrap();
        let inputs = inputs_of(&mapping, &fixed, &payload);
        assert_eq!(
            Value::Object(inputs),
            serde_json::json!({"env": "prod", "repo": "o/r", "branch": "refs/heads/main", "second": 2})
        );
        assert!(check_mapping(&mapping).is_ok());
        let bad: Map<String, Value> =
            serde_json::from_value(serde_json::json!({"x": "ref"})).unwrap();
        assert_eq!(check_mapping(&bad).unwrap_err().0, "x");
    }
}
