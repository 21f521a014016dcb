//! Identifiers that become part of a path, a file name, a script or a
//! command line.
//!
//! An id that arrives from outside — a run bundle, an HTTP request, a
//! token, an MCP call, a row of a store written by another version — is
//! text anyone could have written. Every place that joins an id into a
//! path or a script takes one of the types here, and the only way to get
//! one is its checked constructor, so no future import path can hand a
//! raw string to a path join:
//!
//! - [`RunId`]: a run id, exactly the shape wfhost gives them
//!   (`run-YYYYMMDD-HHMMSS-xxxxxx`);
//! - [`SafeName`]: any other id used as one path component or one word of
//!   a script (lane ids, job ids, session folder names): ASCII letters,
//!   digits, `.`, `_` and `-`, at most [`SafeName::MAX_LEN`] bytes, never
//!   `.` or `..`, never starting with `-` or `.`.
//!
//! Neither can hold `/`, `..`, NUL, a newline or any control character, or
//! a leading `-` (which a command would read as an option).

use std::fmt;
use std::ops::Deref;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Why a text is not an id of the kind asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} `{shown}` is not valid: {why}")]
pub struct IdError {
    /// What kind of id was expected ("run id", "lane id", …).
    pub what: &'static str,
    /// The text, with control characters escaped and cut to a readable
    /// length, safe to print.
    pub shown: String,
    pub why: String,
}

impl IdError {
    fn new(what: &'static str, text: &str, why: impl Into<String>) -> IdError {
        let mut shown: String = crate::text::escape(text).chars().take(80).collect();
        if text.chars().count() > 80 {
            shown.push('…');
        }
        IdError {
            what,
            shown,
            why: why.into(),
        }
    }
}

/// A run id: `run-YYYYMMDD-HHMMSS-xxxxxx` (UTC start time and six
/// lowercase hex digits). Safe as a path component and as script text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(String);

impl schemars::JsonSchema for RunId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RunId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^run-[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$",
            "description": "A run id: `run-YYYYMMDD-HHMMSS-xxxxxx` (UTC start time, six hex digits)."
        })
    }
}

impl RunId {
    /// Check `text` against the run id grammar.
    pub fn parse(text: &str) -> Result<RunId, IdError> {
        if is_run_id(text) {
            Ok(RunId(text.to_string()))
        } else {
            Err(IdError::new(
                "run id",
                text,
                "a run id is `run-YYYYMMDD-HHMMSS-xxxxxx` (digits, then six lowercase hex digits)",
            ))
        }
    }

    /// The id of a run started at `date` (`YYYYMMDD`) `time` (`HHMMSS`)
    /// with `random` as its three random bytes.
    pub fn from_parts(date: &str, time: &str, random: [u8; 3]) -> Result<RunId, IdError> {
        let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
        RunId::parse(&format!("run-{date}-{time}-{hex}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Whether `id` has the shape of a run id.
pub fn is_run_id(id: &str) -> bool {
    let Some(rest) = id.strip_prefix("run-") else {
        return false;
    };
    let mut parts = rest.split('-');
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let hex = |s: &str| s.len() == 6 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    matches!(
        (parts.next(), parts.next(), parts.next(), parts.next()),
        (Some(date), Some(time), Some(random), None)
            if digits(date, 8) && digits(time, 6) && hex(random)
    )
}

/// An id used as one path component or one word of a script: lane ids,
/// job ids, session folder names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SafeName(String);

impl SafeName {
    /// The longest name, in bytes (a file name is at most 255).
    pub const MAX_LEN: usize = 128;

    /// Check `text` as a `what` ("lane id", "job id", …).
    pub fn parse_as(what: &'static str, text: &str) -> Result<SafeName, IdError> {
        let fail = |why: &str| Err(IdError::new(what, text, why));
        if text.is_empty() {
            return fail("it is empty");
        }
        if text.len() > Self::MAX_LEN {
            return fail(&format!(
                "it is {} bytes long, at most {} are allowed",
                text.len(),
                Self::MAX_LEN
            ));
        }
        if let Some(c) = text
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return fail(&format!(
                "`{}` is not allowed (letters, digits, `.`, `_` and `-` are)",
                c.escape_default()
            ));
        }
        if text.starts_with('-') || text.starts_with('.') {
            return fail("it must not start with `-` or `.`");
        }
        Ok(SafeName(text.to_string()))
    }

    /// Check `text` as a name.
    pub fn parse(text: &str) -> Result<SafeName, IdError> {
        Self::parse_as("name", text)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<RunId> for SafeName {
    fn from(id: RunId) -> SafeName {
        SafeName(id.0)
    }
}

macro_rules! string_like {
    ($t:ty, $parse:expr) => {
        impl Deref for $t {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }
        impl AsRef<str> for $t {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
        impl AsRef<Path> for $t {
            fn as_ref(&self) -> &Path {
                Path::new(&self.0)
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl From<$t> for String {
            fn from(id: $t) -> String {
                id.0
            }
        }
        impl TryFrom<String> for $t {
            type Error = IdError;
            fn try_from(text: String) -> Result<Self, IdError> {
                $parse(&text)
            }
        }
        impl std::str::FromStr for $t {
            type Err = IdError;
            fn from_str(text: &str) -> Result<Self, IdError> {
                $parse(text)
            }
        }
        impl PartialEq<str> for $t {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }
        impl PartialEq<&str> for $t {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
        impl PartialEq<String> for $t {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }
        impl PartialEq<$t> for String {
            fn eq(&self, other: &$t) -> bool {
                self == &other.0
            }
        }
        impl PartialEq<$t> for &str {
            fn eq(&self, other: &$t) -> bool {
                *self == other.0
            }
        }
    };
}

string_like!(RunId, RunId::parse);
string_like!(SafeName, SafeName::parse);

#[cfg(test)]
mod tests {
    use super::*;

    /// Texts that must never become an id of any kind: each would be a
    /// path out of its directory, a second script line or an option.
    const HOSTILE: &[&str] = &[
        "",
        "/",
        "/etc",
        "/tmp/victim",
        "..",
        ".",
        "../x",
        "a/../../b",
        "x/y",
        "-rf",
        "--help",
        "a\nb",
        "run-20261123-040112-9c2e41\ntouch /tmp/pwned",
        "a\0b",
        "a\rb",
        "a b",
        "a;b",
        "$(id)",
        "`id`",
        "a\\b",
        "é",
    ];

    #[test]
    fn hostile_texts_are_neither_run_ids_nor_names() {
        for text in HOSTILE {
            assert!(RunId::parse(text).is_err(), "run id {text:?}");
            assert!(SafeName::parse(text).is_err(), "name {text:?}");
            let json = serde_json::to_string(text).unwrap();
            assert!(serde_json::from_str::<RunId>(&json).is_err(), "{text:?}");
            assert!(serde_json::from_str::<SafeName>(&json).is_err(), "{text:?}");
        }
    }

    #[test]
    fn run_ids_have_one_shape() {
        let id = RunId::parse("run-20261123-040112-9c2e41").unwrap();
        assert_eq!(id.as_str(), "run-20261123-040112-9c2e41");
        assert_eq!(
            serde_json::from_str::<RunId>("\"run-20261123-040112-9c2e41\"").unwrap(),
            id
        );
        for bad in [
            "run-1-2-3",
            "run-20261123-040112-9C2E41",
            "x-20261123-040112-9c2e41",
            "run-20261123-040112-9c2e41-x",
            "run-2026112a-040112-9c2e41",
            "run-20261123-040112-9c2e4",
        ] {
            assert!(RunId::parse(bad).is_err(), "{bad}");
        }
        let made = RunId::from_parts("20261123", "040112", [0x9c, 0x2e, 0x41]).unwrap();
        assert_eq!(made, id);
    }

    #[test]
    fn names_allow_the_ids_wfhost_writes() {
        for ok in [
            "lane-1",
            "a_b.c",
            "job-0001",
            "2026-11-22_one-101503-3c1f0a",
            "UD-3",
        ] {
            assert!(SafeName::parse(ok).is_ok(), "{ok}");
        }
        assert!(SafeName::parse(&"x".repeat(SafeName::MAX_LEN)).is_ok());
        assert!(SafeName::parse(&"x".repeat(SafeName::MAX_LEN + 1)).is_err());
    }

    #[test]
    fn errors_print_the_text_escaped() {
        let e = RunId::parse("a\nb").unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e}");
        assert!(e.starts_with("run id `a"), "{e}");
    }
}
