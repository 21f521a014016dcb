//! `wfhost.lock`: the project's pins. Each package reference a workflow
//! uses is pinned to its manifest digest, its component's digest and its
//! signer, so a run uses exactly what was installed, whatever the tag
//! names today. TOML, versioned, sorted by reference; written atomically
//! while holding an exclusive lock on the project directory.

use std::fs::File;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use wfhost_core::manifest::plugin_ref::{PluginRef, check_digest};

pub const FILE_NAME: &str = "wfhost.lock";
pub const VERSION: u32 = 1;
const HEADER: &str = "# Written by `wfhost plugin install` and `wfhost plugin update`; commit it.\n# It pins each plugin package to the digests and signer that were checked.\n\n";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockEntry {
    /// The reference as workflows write it (`oci://…`).
    pub reference: String,
    /// The package manifest's digest.
    pub manifest: String,
    /// The component's digest.
    pub layer: String,
    /// `ed25519:…`, or `unsigned`.
    pub signer: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    pub version: u32,
    #[serde(default, rename = "plugin")]
    pub plugins: Vec<LockEntry>,
}

impl Lock {
    pub fn get(&self, reference: &str) -> Option<&LockEntry> {
        self.plugins.iter().find(|e| e.reference == reference)
    }

    /// Add or replace the entry for its reference, keeping the order.
    pub fn put(&mut self, entry: LockEntry) {
        self.plugins.retain(|e| e.reference != entry.reference);
        self.plugins.push(entry);
        self.plugins.sort_by(|a, b| a.reference.cmp(&b.reference));
    }

    pub fn parse(text: &str, path: &Path) -> Result<Lock, String> {
        let lock: Lock = toml::from_str(text).map_err(|e| format!("{}: {e}", path.display()))?;
        if lock.version != VERSION {
            return Err(format!(
                "{}: lock file version {} is not one this wfhost reads ({VERSION}); it may come from a newer wfhost",
                path.display(),
                lock.version
            ));
        }
        for (i, entry) in lock.plugins.iter().enumerate() {
            let at = |m: String| {
                format!(
                    "{}: plugin {} ({}): {m}",
                    path.display(),
                    i + 1,
                    entry.reference
                )
            };
            PluginRef::parse(&entry.reference).map_err(at)?;
            check_digest(&entry.manifest).map_err(at)?;
            check_digest(&entry.layer).map_err(at)?;
            if lock.plugins[..i]
                .iter()
                .any(|e| e.reference == entry.reference)
            {
                return Err(at("listed twice".into()));
            }
        }
        Ok(lock)
    }

    pub fn to_toml(&self) -> String {
        let mut sorted = self.clone();
        sorted.plugins.sort_by(|a, b| a.reference.cmp(&b.reference));
        format!(
            "{HEADER}{}",
            toml::to_string(&sorted).expect("a lock serializes")
        )
    }
}

/// The `wfhost.lock` of the project `dir` is in: the nearest one in `dir`
/// or a directory above it.
pub fn find(dir: &Path) -> Option<PathBuf> {
    let dir = std::path::absolute(dir).ok()?;
    dir.ancestors()
        .map(|d| d.join(FILE_NAME))
        .find(|p| p.is_file())
}

/// Read a lock file; a missing one is empty.
pub fn read(path: &Path) -> Result<Lock, String> {
    match read_toml(path) {
        Ok(text) => Lock::parse(&text, path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Lock {
            version: VERSION,
            plugins: Vec::new(),
        }),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// A TOML file's text, read within the host's bound on text it parses
/// ([`wfhost_core::limits::MAX_TEXT_BYTES`]; the `toml` parser bounds its
/// own nesting at 80 levels).
pub(crate) fn read_toml(path: &Path) -> std::io::Result<String> {
    let bytes = wfhost_core::workspace::regular_file::read_regular(
        path,
        wfhost_core::limits::MAX_TEXT_BYTES as u64,
    )?;
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// Change the lock at `path` under an exclusive lock on its directory:
/// read it, let `change` edit it, write it back atomically. Nothing is
/// written when `change` fails.
pub fn update<T>(
    path: &Path,
    change: impl FnOnce(&mut Lock) -> Result<T, String>,
) -> Result<T, String> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let guard = File::open(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    guard
        .lock()
        .map_err(|e| format!("cannot lock {}: {e}", dir.display()))?;
    let mut lock = read(path)?;
    lock.version = VERSION;
    let out = change(&mut lock)?;
    crate::layout::write(path, lock.to_toml().as_bytes())?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(reference: &str, n: char) -> LockEntry {
        LockEntry {
            reference: reference.into(),
            manifest: format!("sha256:{}", n.to_string().repeat(64)),
            layer: format!("sha256:{}", "f".repeat(64)),
            signer: "unsigned".into(),
        }
    }

    #[test]
    fn concurrent_installs_each_keep_their_pin() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let path = path.clone();
                std::thread::spawn(move || {
                    update(&path, |lock| {
                        std::thread::sleep(std::time::Duration::from_millis(5));
                        lock.put(entry(&format!("oci://r.io/p{i}:1"), 'a'));
                        Ok(())
                    })
                    .unwrap()
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(
            read(&path).unwrap().plugins.len(),
            8,
            "no pin lost to a race"
        );
    }

    #[test]
    fn round_trips_sorted_and_refuses_bad_files_naming_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        update(&path, |lock| {
            lock.put(entry("oci://r.io/b:1", 'b'));
            lock.put(entry("oci://r.io/a:1", 'a'));
            Ok(())
        })
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.find("r.io/a:1").unwrap() < text.find("r.io/b:1").unwrap(),
            "{text}"
        );
        assert!(text.contains("version = 1"), "{text}");
        let lock = read(&path).unwrap();
        assert_eq!(
            lock.get("oci://r.io/b:1"),
            Some(&entry("oci://r.io/b:1", 'b'))
        );
        assert_eq!(find(&dir.path().join("sub/deeper")), Some(path.clone()));

        let failed = update(&path, |lock| {
            lock.plugins.clear();
            Err::<(), _>("no".into())
        });
        assert!(failed.is_err());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            text,
            "a failed change writes nothing"
        );

        for (bad, says) in [
            (text.replace("version = 1", "version = 9"), "version 9"),
            (text.replace("sha256:aaaa", "sha256:zzzz"), "not a digest"),
            (
                text.replace("oci://r.io/b:1", "oci://r.io/a:1"),
                "listed twice",
            ),
            (text.replace("signer", "signed"), "unknown field"),
        ] {
            let error = Lock::parse(&bad, &path).unwrap_err();
            assert!(
                error.contains(says) && error.contains("wfhost.lock"),
                "{error}"
            );
        }
    }
}
