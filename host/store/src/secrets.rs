//! The home's secrets: `<home>/secrets/NAME`, one file per secret holding
//! its value, mode 0600 in a 0700 directory, each written through a new
//! file and a rename. Names are checked
//! ([`wfhost_core::policy::secrets::check_name`]) before they reach a path.
//!
//! [`HomeSecrets`] is the [`SecretSource`] commands resolve `{"secret":
//! NAME}` references from: the home's file, else the environment variable
//! `NAME` of this process.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use wfhost_core::policy::secrets::{SecretSource, check_name};

use crate::StoreError;

/// The folder of secrets inside the home.
pub const SECRETS_DIR: &str = "secrets";

/// The most bytes a secret may hold.
pub const MAX_SECRET_BYTES: usize = 64 * 1024;

/// The secrets of one wfhost home.
#[derive(Debug, Clone)]
pub struct HomeSecrets {
    dir: PathBuf,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> StoreError + '_ {
    move |e| StoreError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

impl HomeSecrets {
    pub fn new(home: &Path) -> HomeSecrets {
        HomeSecrets {
            dir: home.join(SECRETS_DIR),
        }
    }

    fn path(&self, name: &str) -> Result<PathBuf, StoreError> {
        check_name(name).map_err(StoreError::Usage)?;
        Ok(self.dir.join(name))
    }

    /// Store `value` as `name`, replacing any earlier value.
    pub fn set(&self, name: &str, value: &[u8]) -> Result<(), StoreError> {
        let path = self.path(name)?;
        if value.is_empty() {
            return Err(StoreError::Usage(format!(
                "the value of secret `{name}` is empty"
            )));
        }
        if value.len() > MAX_SECRET_BYTES
            || value.contains(&0)
            || std::str::from_utf8(value).is_err()
        {
            return Err(StoreError::Usage(format!(
                "the value of secret `{name}` must be UTF-8 text without NUL bytes, at most {MAX_SECRET_BYTES} bytes"
            )));
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(io(&self.dir))?;
        // A folder made earlier with a looser mode is tightened.
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))
            .map_err(io(&self.dir))?;
        let tmp = self.dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let written = (|| {
            let mut file = wfhost_core::workspace::regular_file::create_new(&tmp, 0o600)?;
            file.write_all(value)?;
            file.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            std::fs::File::open(&self.dir)?.sync_all()
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map_err(io(&path))
    }

    /// The value of `name` in the home, if it is there.
    pub fn read(&self, name: &str) -> Result<Option<String>, StoreError> {
        let path = self.path(name)?;
        match std::fs::read(&path) {
            Ok(bytes) => String::from_utf8(bytes)
                .map(Some)
                .map_err(|_| StoreError::Io {
                    path,
                    message: "not UTF-8 text".into(),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(&path)(e)),
        }
    }

    /// The names of the home's secrets, sorted.
    pub fn names(&self) -> Result<Vec<String>, StoreError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(&self.dir)(e)),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io(&self.dir))?;
            if let Some(name) = entry.file_name().to_str()
                && wfhost_core::policy::secrets::valid_name(name)
                && entry.file_type().is_ok_and(|t| t.is_file())
            {
                names.push(name.to_string());
            }
        }
        names.sort();
        Ok(names)
    }

    /// Remove `name`; `false` when there was none.
    pub fn remove(&self, name: &str) -> Result<bool, StoreError> {
        let path = self.path(name)?;
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io(&path)(e)),
        }
    }
}

impl SecretSource for HomeSecrets {
    /// The home's value, else the environment variable of this process.
    fn get(&self, name: &str) -> Option<String> {
        match self.read(name) {
            Ok(Some(value)) => Some(value),
            _ => std::env::var(name).ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_list_read_remove() {
        let home = tempfile::tempdir().unwrap();
        let secrets = HomeSecrets::new(home.path());
        assert_eq!(secrets.names().unwrap(), Vec::<String>::new());
        secrets.set("TOKEN", b"s3cr3t").unwrap();
        secrets.set("TOKEN", b"s3cr3t-2").unwrap();
        secrets.set("_OTHER", b"x").unwrap();
        assert_eq!(secrets.names().unwrap(), ["TOKEN", "_OTHER"]);
        assert_eq!(secrets.read("TOKEN").unwrap().as_deref(), Some("s3cr3t-2"));
        assert_eq!(secrets.get("TOKEN").as_deref(), Some("s3cr3t-2"));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&home.path().join("secrets/TOKEN")), 0o600);
        assert_eq!(mode(&home.path().join("secrets")), 0o700);
        assert!(secrets.remove("TOKEN").unwrap());
        assert!(!secrets.remove("TOKEN").unwrap());
        assert_eq!(secrets.read("TOKEN").unwrap(), None);
    }

    #[test]
    fn bad_names_never_reach_a_path() {
        let home = tempfile::tempdir().unwrap();
        let secrets = HomeSecrets::new(home.path());
        for bad in ["../x", "a/b", "", "1X", ".hidden", "A-B"] {
            assert!(
                matches!(secrets.set(bad, b"v"), Err(StoreError::Usage(_))),
                "{bad}"
            );
            assert!(secrets.read(bad).is_err());
            assert!(secrets.remove(bad).is_err());
        }
        assert!(secrets.set("EMPTY", b"").is_err());
        assert!(secrets.set("NUL", b"a\0b").is_err());
        assert!(!home.path().join("secrets").join("EMPTY").exists());
    }
}
