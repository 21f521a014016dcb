//! The wfhost home's settings file, `config.json`: how long runs are kept
//! (`retention`, an age such as `60d`; default [`DEFAULT_RETENTION`]) and
//! where they are stored (`store`: `sqlite`, the default, or a PostgreSQL
//! URL; `WFHOST_STORE` overrides it).
//! A missing file means the defaults; a malformed one is an error naming
//! the file and the key, never a silent default.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::StoreError;
use crate::time::parse_age;

/// The settings file's name inside the wfhost home.
pub const CONFIG_FILE: &str = "config.json";
/// How long runs are kept when `config.json` does not say.
pub const DEFAULT_RETENTION: &str = "60d";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    retention: Option<String>,
    store: Option<String>,
}

/// The home's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HomeConfig {
    /// Runs (and sessions) whose last event is older are removed by
    /// `wfhost gc`.
    pub retention: Duration,
    /// `retention` as written (`60d`).
    pub retention_text: String,
    /// Where `retention` came from: the file, or `None` for the default.
    pub source: Option<PathBuf>,
    /// Where the runs are stored, as the file says (`WFHOST_STORE` is
    /// read by [`crate::Location::resolve`]).
    pub store: crate::Location,
}

impl HomeConfig {
    /// Read `<home>/config.json`.
    pub fn load(home: &Path) -> Result<HomeConfig, StoreError> {
        let path = home.join(CONFIG_FILE);
        let bad = |message: String| StoreError::Io {
            path: path.clone(),
            message,
        };
        let text = match std::fs::read(&path) {
            Ok(t) => Some(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(bad(e.to_string())),
        };
        let raw = match &text {
            Some(t) => serde_json::from_slice::<Raw>(t).map_err(|e| bad(e.to_string()))?,
            None => Raw {
                retention: None,
                store: None,
            },
        };
        let store = match &raw.store {
            Some(text) => crate::Location::parse(text).map_err(|e| bad(format!("`store`: {e}")))?,
            None => crate::Location::Embedded,
        };
        let source = raw.retention.as_ref().map(|_| path.clone());
        let retention_text = raw
            .retention
            .unwrap_or_else(|| DEFAULT_RETENTION.to_string());
        let retention = parse_age(&retention_text).map_err(|e| bad(format!("`retention`: {e}")))?;
        Ok(HomeConfig {
            retention,
            retention_text,
            source,
            store,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_reads_and_refuses() {
        let home = tempfile::tempdir().unwrap();
        let c = HomeConfig::load(home.path()).unwrap();
        assert_eq!(c.retention, Duration::from_secs(60 * 86_400));
        assert_eq!(c.source, None);
        std::fs::write(home.path().join(CONFIG_FILE), r#"{"retention": "2w"}"#).unwrap();
        let c = HomeConfig::load(home.path()).unwrap();
        assert_eq!(c.retention, Duration::from_secs(14 * 86_400));
        assert!(c.source.is_some());
        std::fs::write(
            home.path().join(CONFIG_FILE),
            r#"{"store": "postgres://wf:pw@db/runs"}"#,
        )
        .unwrap();
        let c = HomeConfig::load(home.path()).unwrap();
        assert!(matches!(c.store, crate::Location::Postgres(_)));
        for bad in [
            r#"{"retention": "soon"}"#,
            r#"{"retension": "2w"}"#,
            "{",
            r#"{"store": "mysql://db"}"#,
        ] {
            std::fs::write(home.path().join(CONFIG_FILE), bad).unwrap();
            let e = HomeConfig::load(home.path()).unwrap_err().to_string();
            assert!(e.contains(CONFIG_FILE), "{bad}: {e}");
        }
    }
}
