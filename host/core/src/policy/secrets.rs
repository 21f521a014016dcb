//! Secrets: names, references in block configs, and masking.
//!
//! A block's `env` value may be `{"secret": "NAME"}` instead of a string.
//! The reference is what the workflow definition keeps (pinned, stored,
//! exported); the value is looked up only when a command is started, on
//! the host that starts it, from that host's home (`<home>/secrets/NAME`)
//! and else from the environment variable `NAME` of the wfhost process
//! (a [`SecretSource`]). Every output the host keeps of such a command has
//! each value replaced by [`MASK`] ([`Masker`], [`MaskStream`]).
//!
//! Between a plugin and the host, over the frozen WIT `env: list<tuple<
//! string, string>>`, a reference travels as an env value that starts with
//! a NUL byte ([`encode`], [`decode`]), which no real environment value can
//! hold: `"\0secret:NAME"` (a secret) or `"\0env:NAME"` (the variable
//! `NAME` of the host's environment, for `env_passthrough`).

use std::collections::BTreeSet;

use crate::json_pointer::pointer;

/// What a masked value is replaced by.
pub const MASK: &[u8] = b"***";

/// Values shorter than this are not masked: masking every `a` or `1` of a
/// command's output would make it unreadable and tell as much.
pub const MIN_MASKED_LEN: usize = 4;

/// Whether `name` can name a secret (and an environment variable):
/// `[A-Za-z_][A-Za-z0-9_]*`, at most 128 bytes.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 128
}

/// Why a name is refused, for messages.
pub fn check_name(name: &str) -> Result<(), String> {
    if valid_name(name) {
        Ok(())
    } else {
        Err(format!(
            "`{}` is not a secret name: use letters, digits and `_`, not starting with a digit (at most 128)",
            crate::text::escape(name)
        ))
    }
}

/// Where the host finds a secret's value.
pub trait SecretSource: Send + Sync {
    /// The value of `name`, or `None` when it is set nowhere.
    fn get(&self, name: &str) -> Option<String>;
}

/// Secrets from the environment of this process only.
pub struct EnvSecrets;

impl SecretSource for EnvSecrets {
    fn get(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

/// A shared [`SecretSource`]; the default is [`EnvSecrets`].
#[derive(Clone)]
pub struct Secrets(pub std::sync::Arc<dyn SecretSource>);

impl Default for Secrets {
    fn default() -> Self {
        Secrets(std::sync::Arc::new(EnvSecrets))
    }
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secrets")
    }
}

impl Secrets {
    pub fn get(&self, name: &str) -> Option<String> {
        self.0.get(name)
    }
}

/// A reference an env value carries from a plugin to the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvRef {
    /// `{"secret": "NAME"}`.
    Secret(String),
    /// A variable of the host's environment (`env_passthrough`).
    Host(String),
}

const SECRET_TAG: &str = "\0secret:";
const HOST_TAG: &str = "\0env:";

/// The env value that carries `r` over the WIT.
pub fn encode(r: &EnvRef) -> String {
    match r {
        EnvRef::Secret(name) => format!("{SECRET_TAG}{name}"),
        EnvRef::Host(name) => format!("{HOST_TAG}{name}"),
    }
}

/// `Ok(Some(_))` for a reference, `Ok(None)` for any other value (one
/// with a NUL elsewhere is refused by the exec policy, as always), an
/// error for a reference with a bad name.
pub fn decode(value: &str) -> Result<Option<EnvRef>, String> {
    if !value.starts_with('\0') {
        return Ok(None);
    }
    let (r, name) = if let Some(name) = value.strip_prefix(SECRET_TAG) {
        (EnvRef::Secret(name.to_string()), name)
    } else if let Some(name) = value.strip_prefix(HOST_TAG) {
        (EnvRef::Host(name.to_string()), name)
    } else {
        return Ok(None);
    };
    check_name(name)?;
    Ok(Some(r))
}

/// The name a config value refers to when it is `{"secret": "NAME"}`
/// (exactly that one key); `Err` when it is such an object with a bad name.
pub fn reference(value: &serde_json::Value) -> Option<Result<&str, String>> {
    let map = value.as_object()?;
    if map.len() != 1 {
        return None;
    }
    let name = map.get("secret")?;
    Some(match name.as_str() {
        Some(name) => check_name(name).map(|()| name),
        None => Err("a secret reference is `{\"secret\": \"NAME\"}` with NAME a string".into()),
    })
}

/// One secret reference of a manifest: its JSON pointer and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub pointer: String,
    pub name: String,
}

/// The secret references of a workflow's block and lane configs: every
/// value of an `env` object that is `{"secret": "NAME"}`. A malformed one
/// is an error naming its pointer.
pub fn references(
    manifest: &crate::manifest::Workflow,
) -> Result<Vec<Reference>, (String, String)> {
    let mut out = Vec::new();
    for (node_id, node) in &manifest.nodes {
        for (block_id, block) in &node.blocks {
            let base = vec![
                "nodes".to_string(),
                node_id.clone(),
                "blocks".to_string(),
                block_id.clone(),
            ];
            let mut at = base.clone();
            at.push("config".into());
            walk(&block.config, &mut at, false, &mut out)?;
            if let Some(parallel) = &block.parallel {
                for (lane, spec) in &parallel.lanes {
                    let mut at = base.clone();
                    at.extend(["parallel".into(), "lanes".into(), lane.clone()]);
                    at.push("config".into());
                    walk(&spec.config, &mut at, false, &mut out)?;
                }
            }
        }
    }
    Ok(out)
}

fn walk(
    value: &serde_json::Value,
    at: &mut Vec<String>,
    in_env: bool,
    out: &mut Vec<Reference>,
) -> Result<(), (String, String)> {
    match value {
        serde_json::Value::Object(map) if in_env => {
            for (k, v) in map {
                at.push(k.clone());
                if let Some(r) = reference(v) {
                    let name = r.map_err(|e| (pointer(at), e))?;
                    out.push(Reference {
                        pointer: pointer(at),
                        name: name.to_string(),
                    });
                }
                at.pop();
            }
        }
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                at.push(k.clone());
                // Only the values directly under an `env` are variables.
                walk(v, at, k == "env", out)?;
                at.pop();
            }
        }
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                at.push(i.to_string());
                walk(v, at, false, out)?;
                at.pop();
            }
        }
        _ => {}
    }
    Ok(())
}

/// The values to mask in a command's output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Masker {
    /// Longest first, so that a value that contains another is masked
    /// whole; none shorter than [`MIN_MASKED_LEN`].
    values: Vec<Vec<u8>>,
}

impl Masker {
    pub fn new<I, V>(values: I) -> Masker
    where
        I: IntoIterator<Item = V>,
        V: AsRef<[u8]>,
    {
        let set: BTreeSet<Vec<u8>> = values
            .into_iter()
            .map(|v| v.as_ref().to_vec())
            .filter(|v| v.len() >= MIN_MASKED_LEN)
            .collect();
        let mut values: Vec<Vec<u8>> = set.into_iter().collect();
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        Masker { values }
    }

    /// Add the values of `other`.
    pub fn extend(&mut self, other: &Masker) {
        *self = Masker::new(self.values.iter().chain(other.values.iter()));
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// `bytes` with every value replaced by [`MASK`].
    pub fn mask(&self, bytes: &[u8]) -> Vec<u8> {
        let mut stream = self.stream();
        let mut out = stream.push(bytes);
        out.extend(stream.finish());
        out
    }

    /// Text with every value replaced by `***`.
    pub fn mask_str(&self, text: &str) -> String {
        if self.is_empty() {
            return text.to_string();
        }
        String::from_utf8_lossy(&self.mask(text.as_bytes())).into_owned()
    }

    /// A masker for output that arrives in chunks: a value split across
    /// two chunks is still masked.
    pub fn stream(&self) -> MaskStream {
        MaskStream {
            masker: self.clone(),
            pending: Vec::new(),
        }
    }
}

/// Masks a stream of chunks; see [`Masker::stream`].
pub struct MaskStream {
    masker: Masker,
    /// Bytes that may begin a value, held back until the next chunk shows.
    pending: Vec<u8>,
}

impl MaskStream {
    /// The masked bytes that are certain after `chunk`; the tail that may
    /// begin a value is held back.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        if self.masker.is_empty() {
            return chunk.to_vec();
        }
        self.pending.extend_from_slice(chunk);
        self.drain(false)
    }

    /// What was held back, masked: the stream has ended.
    pub fn finish(&mut self) -> Vec<u8> {
        self.drain(true)
    }

    fn drain(&mut self, end: bool) -> Vec<u8> {
        let buf = std::mem::take(&mut self.pending);
        let mut out = Vec::with_capacity(buf.len());
        let mut i = 0;
        'scan: while i < buf.len() {
            let rest = &buf[i..];
            for v in &self.masker.values {
                if rest.starts_with(v) {
                    out.extend_from_slice(MASK);
                    i += v.len();
                    continue 'scan;
                }
            }
            if !end && self.masker.values.iter().any(|v| v.starts_with(rest)) {
                // The rest may be the start of a value: wait for more.
                self.pending = rest.to_vec();
                return out;
            }
            out.push(buf[i]);
            i += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["TOKEN", "_x", "a1_B2", "A"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "1A", "A-B", "A B", "A=B", "é", "A\0", &"A".repeat(129)] {
            assert!(!valid_name(bad), "{bad:?}");
            assert!(check_name(bad).is_err());
        }
    }

    #[test]
    fn references_travel_and_come_back() {
        for r in [EnvRef::Secret("TOKEN".into()), EnvRef::Host("HOME".into())] {
            assert_eq!(decode(&encode(&r)), Ok(Some(r)));
        }
        assert_eq!(decode("plain value"), Ok(None));
        assert_eq!(decode("a\0b"), Ok(None));
        assert!(decode("\0secret:1bad").is_err());
    }

    #[test]
    fn config_references_with_pointers() {
        let manifest: crate::manifest::Workflow = serde_json::from_value(serde_json::json!({
            "id": "w", "start_node": "n",
            "nodes": {"n": {"entry_block": "b", "blocks": {"b": {
                "worker": "exec",
                "config": {"commands": [{"argv": ["env"], "env": {
                    "TOKEN": {"secret": "TOKEN"}, "PLAIN": "x"}}],
                    "note": {"secret": "NOT_ENV"}}
            }}}}
        }))
        .unwrap();
        let refs = references(&manifest).unwrap();
        assert_eq!(
            refs,
            [Reference {
                pointer: "/nodes/n/blocks/b/config/commands/0/env/TOKEN".into(),
                name: "TOKEN".into()
            }]
        );
    }

    #[test]
    fn masks_whole_values_and_not_short_ones() {
        let m = Masker::new(["s3cr3t", "abc", "s3cr3t-longer"]);
        assert_eq!(m.mask(b"x s3cr3t y abc"), b"x *** y abc");
        assert_eq!(m.mask(b"s3cr3t-longer!"), b"***!");
        assert_eq!(m.mask_str("TOKEN=s3cr3ts3cr3t"), "TOKEN=******");
        assert!(Masker::new(["abc"]).is_empty());
    }

    #[test]
    fn a_value_split_across_chunks_is_masked() {
        let m = Masker::new(["s3cr3t"]);
        let text = b"before s3cr3t middle s3cr3 after s3cr3t";
        for cut in 0..text.len() {
            for cut2 in cut..text.len() {
                let mut s = m.stream();
                let mut out = s.push(&text[..cut]);
                out.extend(s.push(&text[cut..cut2]));
                out.extend(s.push(&text[cut2..]));
                out.extend(s.finish());
                assert_eq!(out, b"before *** middle s3cr3 after ***", "{cut} {cut2}");
            }
        }
    }
}
