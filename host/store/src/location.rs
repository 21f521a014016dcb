//! Where a home's runs are stored: the embedded SQLite file in the home
//! (the default), or a PostgreSQL database several servers share, named
//! by `WFHOST_STORE` (or a surface's `--store`).

use std::fmt;
use std::path::Path;

use crate::StoreError;

/// The environment variable naming the store.
pub const STORE_ENV: &str = "WFHOST_STORE";

/// Where the run store is.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum Location {
    /// `wfhost.db` in the home.
    #[default]
    Embedded,
    /// A PostgreSQL database: `postgres://user:password@host:port/db?…`.
    Postgres(String),
}

impl fmt::Debug for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The URL without its password, for messages and logs.
impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Embedded => f.write_str("the home's embedded store"),
            Location::Postgres(url) => f.write_str(&redact(url)),
        }
    }
}

impl Location {
    /// `sqlite` (or empty) for the embedded store, else a
    /// `postgres://`/`postgresql://` URL; anything else is refused saying
    /// what is accepted.
    pub fn parse(text: &str) -> Result<Location, StoreError> {
        let text = text.trim();
        if text.is_empty() || text == "sqlite" {
            return Ok(Location::Embedded);
        }
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            if let Err(e) = crate::db::driver_url(text).parse::<tokio_postgres::Config>() {
                return Err(StoreError::Usage(format!(
                    "store `{}` is not a PostgreSQL URL wfhost can read: {e}",
                    redact(text)
                )));
            }
            return Ok(Location::Postgres(text.to_string()));
        }
        Err(StoreError::Usage(format!(
            "store `{}` is not one wfhost knows: give `sqlite` (the home's embedded store) or a postgres://user@host/database URL",
            redact(text)
        )))
    }

    /// The store of `home`: `WFHOST_STORE`, else the home's `config.json`
    /// `store`, else the embedded file.
    pub fn resolve(home: &Path) -> Result<Location, StoreError> {
        match Self::from_env()? {
            Some(location) => Ok(location),
            None => Ok(crate::HomeConfig::load(home)?.store),
        }
    }

    /// `WFHOST_STORE`, if it is set (and not empty).
    pub fn from_env() -> Result<Option<Location>, StoreError> {
        match std::env::var(STORE_ENV) {
            Ok(v) if v.trim().is_empty() => Ok(None),
            Ok(v) => Self::parse(&v)
                .map(Some)
                .map_err(|e| StoreError::Usage(format!("{STORE_ENV}: {e}"))),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => {
                Err(StoreError::Usage(format!("{STORE_ENV} is not valid UTF-8")))
            }
        }
    }

    pub fn is_embedded(&self) -> bool {
        matches!(self, Location::Embedded)
    }
}

/// `url` with the password (in the user part, or a `password=` parameter)
/// replaced by `***`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _)) => format!("{name}:***@{host}"),
            None => format!("{user}@{host}"),
        },
        None => authority.to_string(),
    };
    let tail = tail
        .split('&')
        .map(|part| {
            let (lead, kv) = match part.split_once('?') {
                Some((a, b)) => (format!("{a}?"), b),
                None => (String::new(), part),
            };
            if kv.starts_with("password=") {
                format!("{lead}password=***")
            } else {
                format!("{lead}{kv}")
            }
        })
        .collect::<Vec<_>>()
        .join("&");
    format!("{scheme}://{authority}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_a_message() {
        assert_eq!(
            redact("postgres://wf:s3cret@db.example:5432/runs?sslmode=require"),
            "postgres://wf:***@db.example:5432/runs?sslmode=require"
        );
        assert_eq!(
            redact("postgresql://wf@db/runs?password=s3cret&application_name=x"),
            "postgresql://wf@db/runs?password=***&application_name=x"
        );
        assert_eq!(redact("postgres://db/runs"), "postgres://db/runs");
        let e = Location::parse("mysql://root:pw@db/x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("postgres://") && !e.contains("pw"), "{e}");
    }

    #[test]
    fn the_embedded_store_is_the_default() {
        assert_eq!(Location::parse("").unwrap(), Location::Embedded);
        assert_eq!(Location::parse("sqlite").unwrap(), Location::Embedded);
        assert!(matches!(
            Location::parse("postgres://u@h/d").unwrap(),
            Location::Postgres(_)
        ));
    }
}
