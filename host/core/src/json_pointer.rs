//! JSON pointers (RFC 6901), the one way core names a place in a JSON
//! document: the static checks of a manifest, the secret references of a
//! block config, the inputs schema, the foreign formats and a serde error's
//! path (also the pointer the HTTP API names in a 400).

/// One reference token, escaped: `~` as `~0`, `/` as `~1`.
pub fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// The JSON pointer of `parts` (each escaped), e.g. `["a/b", "0"]` →
/// `/a~1b/0`; no parts is the whole document, the empty pointer.
pub fn pointer<S: AsRef<str>>(parts: &[S]) -> String {
    let mut out = String::new();
    for p in parts {
        out.push('/');
        out.push_str(&escape(p.as_ref()));
    }
    out
}

/// The JSON pointer of a serde path (an enum variant as its name, an
/// unknown segment as `?`).
pub fn of_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path.iter() {
        out.push('/');
        match segment {
            Segment::Seq { index } => out.push_str(&index.to_string()),
            Segment::Map { key } => out.push_str(&escape(key)),
            Segment::Enum { variant } => out.push_str(variant),
            Segment::Unknown => out.push('?'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_escaped_tilde_first() {
        assert_eq!(escape("a~/b"), "a~0~1b");
        assert_eq!(escape("~1"), "~01");
        assert_eq!(pointer(&["nodes", "a/b", "~"]), "/nodes/a~1b/~0");
        assert_eq!(pointer::<&str>(&[]), "");
        assert_eq!(pointer(&[String::from("x")]), "/x");
    }

    #[test]
    fn a_serde_path_becomes_its_pointer() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Doc {
            items: Vec<std::collections::BTreeMap<String, u32>>,
        }
        let v = serde_json::json!({"items": [{"ok": 1}, {"a/b": "x"}]});
        let e = serde_path_to_error::deserialize::<_, Doc>(&v).unwrap_err();
        assert_eq!(of_path(e.path()), "/items/1/a~1b");
    }
}
