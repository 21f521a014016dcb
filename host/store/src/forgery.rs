//! Bundles forged the way anyone can, for tests of the checks that do not
//! rest on the checksum: a bundle's checksum is a plain SHA-256 of its
//! content (integrity against damage, not authenticity), so whoever edits a
//! bundle can seal it again. Not part of the supported interface.

/// Ids an attacker would put in a bundle: a directory to have removed, a
/// way out of the home, a file beside a project's, and a second line of a
/// batch script.
pub const HOSTILE_RUN_IDS: &[&str] = &[
    "/tmp/wfhost-victim",
    "../../outside",
    "run-20260101-000000-000001/../../x",
    "/work/project/Cargo",
    "run-20260101-000000-000001\ntouch /tmp/wfhost-pwned",
    "-rf",
];

/// A serialized bundle (its checksum the last field) sealed again the
/// way anyone can: the checksum is a plain SHA-256 of the fields before it.
pub fn reseal(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let at = text.rfind(",\"checksum\":").expect("the checksum is last");
    let body = &text[..at];
    let sum = format!(
        "sha256:{}",
        hex::encode(Sha256::digest(format!("{body}}}")))
    );
    format!("{body},\"checksum\":\"{sum}\"}}")
}

/// A run bundle with every `from` replaced by `to`, re-sealed.
pub fn forge(bundle: &crate::Bundle, from: &str, to: &str) -> String {
    let quoted = |s: &str| serde_json::to_string(s).unwrap();
    let text = serde_json::to_string(bundle).unwrap();
    reseal(&text.replace(&quoted(from), &quoted(to)))
}

/// A session bundle whose runs are each [`forge`]d, re-sealed.
pub fn forge_session(bundle: &crate::SessionBundle, from: &str, to: &str) -> String {
    let mut text = serde_json::to_string(bundle).unwrap();
    for run in &bundle.runs {
        let inner = serde_json::to_string(run).unwrap();
        text = text.replace(&inner, &forge(run, from, to));
    }
    reseal(&text)
}
