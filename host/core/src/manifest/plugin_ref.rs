//! Plugin package references: `oci://REGISTRY/REPOSITORY:TAG`,
//! `oci://REGISTRY/REPOSITORY@sha256:DIGEST`, or both (`:TAG@sha256:…`,
//! the tag then only documents what the digest was).
//!
//! The grammar is the OCI distribution specification's, without its
//! defaults: the registry is always written out and a tag or a digest is
//! required, so a reference never silently means `latest` on Docker Hub.

use std::fmt;

/// The scheme every package reference starts with.
pub const SCHEME: &str = "oci://";

/// A parsed package reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PluginRef {
    /// `host`, `host:port`, `[v6]:port`.
    pub registry: String,
    /// `team/plugin`: lowercase path components.
    pub repository: String,
    pub tag: Option<String>,
    /// `sha256:<64 hex>`.
    pub digest: Option<String>,
}

impl PluginRef {
    /// Parse `oci://…`; the error says what is wrong.
    pub fn parse(text: &str) -> Result<PluginRef, String> {
        let rest = text.strip_prefix(SCHEME).ok_or_else(|| {
            format!("`{text}` is not a package reference: it must start with `{SCHEME}`")
        })?;
        let (name, digest) = match rest.split_once('@') {
            Some((name, digest)) => (name, Some(check_digest(digest)?)),
            None => (rest, None),
        };
        let (registry, path) = name.split_once('/').ok_or_else(|| {
            format!("`{text}` names no repository: write `{SCHEME}REGISTRY/REPOSITORY:TAG`")
        })?;
        check_registry(registry)?;
        // A `:` after the last `/` starts the tag.
        let (repository, tag) = match path.rfind(':') {
            Some(i) if !path[i..].contains('/') => (&path[..i], Some(check_tag(&path[i + 1..])?)),
            _ => (path, None),
        };
        check_repository(repository)?;
        if tag.is_none() && digest.is_none() {
            return Err(format!(
                "`{text}` has neither a tag nor a digest: add `:TAG` (e.g. `:1.0.0`) or `@sha256:…`"
            ));
        }
        Ok(PluginRef {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag,
            digest,
        })
    }

    /// The same package pinned to `digest` (the tag is kept).
    pub fn with_digest(&self, digest: &str) -> PluginRef {
        PluginRef {
            digest: Some(digest.to_string()),
            ..self.clone()
        }
    }

    /// `registry/repository[:tag][@digest]`, the form OCI tools take.
    pub fn without_scheme(&self) -> String {
        let mut out = format!("{}/{}", self.registry, self.repository);
        if let Some(tag) = &self.tag {
            out.push(':');
            out.push_str(tag);
        }
        if let Some(digest) = &self.digest {
            out.push('@');
            out.push_str(digest);
        }
        out
    }
}

impl fmt::Display for PluginRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}", self.without_scheme())
    }
}

/// Check a reference as written in a manifest.
pub fn check(text: &str) -> Result<(), String> {
    PluginRef::parse(text).map(|_| ())
}

/// `sha256:` and 64 lowercase hex digits.
pub fn check_digest(digest: &str) -> Result<String, String> {
    match digest.strip_prefix("sha256:") {
        Some(hex)
            if hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) =>
        {
            Ok(digest.to_string())
        }
        _ => Err(format!(
            "`{digest}` is not a digest: write `sha256:` and 64 lowercase hex digits"
        )),
    }
}

fn check_registry(registry: &str) -> Result<(), String> {
    let ok = !registry.is_empty()
        && registry.len() <= 255
        && registry
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{registry}` is not a registry host: write `host` or `host:port`"
        ))
    }
}

fn check_repository(repository: &str) -> Result<(), String> {
    let component_ok = |c: &str| {
        let bytes = c.as_bytes();
        !c.is_empty()
            && bytes[0].is_ascii_alphanumeric()
            && bytes[bytes.len() - 1].is_ascii_alphanumeric()
            && c.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
            })
    };
    if repository.len() <= 255 && repository.split('/').all(component_ok) {
        Ok(())
    } else {
        Err(format!(
            "`{repository}` is not a repository name: lowercase letters, digits and `._-` between them, components separated by `/`"
        ))
    }
}

fn check_tag(tag: &str) -> Result<String, String> {
    let bytes = tag.as_bytes();
    let ok = !tag.is_empty()
        && tag.len() <= 128
        && (bytes[0].is_ascii_alphanumeric() || bytes[0] == b'_')
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(tag.to_string())
    } else {
        Err(format!(
            "`{tag}` is not a tag: up to 128 letters, digits and `._-`, not starting with `.` or `-`"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn parses_tags_digests_and_ports() {
        let r = PluginRef::parse("oci://127.0.0.1:5000/acme/word-count:1.2.0").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "acme/word-count");
        assert_eq!(r.tag.as_deref(), Some("1.2.0"));
        assert_eq!(r.digest, None);
        let r = PluginRef::parse(&format!("oci://ghcr.io/a/b@{D}")).unwrap();
        assert_eq!((r.tag, r.digest.as_deref()), (None, Some(D)));
        let text = format!("oci://localhost:5000/a:v1@{D}");
        let r = PluginRef::parse(&text).unwrap();
        assert_eq!(r.to_string(), text);
        assert_eq!(r.without_scheme(), &text[SCHEME.len()..]);
    }

    #[test]
    fn refuses_what_is_not_a_reference_and_says_why() {
        for (text, says) in [
            ("127.0.0.1:5000/a:1", "must start with `oci://`"),
            ("oci://registry", "names no repository"),
            ("oci://r.io/a", "neither a tag nor a digest"),
            ("oci://r.io/A:1", "not a repository name"),
            ("oci://r.io/a/../b:1", "not a repository name"),
            ("oci://r.io/a:-x", "not a tag"),
            ("oci://r.io/a@sha256:12", "not a digest"),
            ("oci://r o/a:1", "not a registry host"),
            ("oci:///a:1", "not a registry host"),
        ] {
            let error = PluginRef::parse(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
