//! The keys tokens are signed with: `<home>/mcp-keys.json`.
//!
//! The file lists the keys by id; the highest id signs new tokens and
//! every listed key verifies. `wfhost mcp rotate-key` adds a key and keeps
//! the one before it, so tokens clients hold stay valid through one
//! rotation; older keys are dropped and their tokens refused as retired.
//! The file is created on first use with a random key, readable by its
//! owner only, and replaced whole (written aside, synced, renamed).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use crate::token::TokenError;

/// The key file's name in the wfhost home.
pub const KEY_FILE: &str = "mcp-keys.json";
const KEY_LEN: usize = 32;
const FORMAT: u32 = 1;

/// The keys in use, newest last.
#[derive(Debug, Clone)]
pub struct Keyring {
    keys: Vec<(u16, [u8; KEY_LEN])>,
    /// The highest key id ever seen: a lower id not kept was retired.
    oldest_kept: u16,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    format: u32,
    keys: Vec<KeyEntry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyEntry {
    kid: u16,
    alg: String,
    /// base64url, 32 bytes.
    key: String,
    created_at_ms: i64,
}

impl Keyring {
    /// A keyring of the given keys (tests, golden tokens).
    pub fn fixed(keys: &[(u16, [u8; KEY_LEN])]) -> Keyring {
        let mut keys = keys.to_vec();
        keys.sort_by_key(|(kid, _)| *kid);
        let oldest_kept = keys.first().map_or(0, |(kid, _)| *kid);
        Keyring { keys, oldest_kept }
    }

    /// The keyring of `home`, created with a new random key if there is
    /// none yet.
    pub fn open(home: &Path) -> Result<Keyring, String> {
        let path = home.join(KEY_FILE);
        match read(&path)? {
            Some(ring) => Ok(ring),
            None => {
                let ring = Keyring::fixed(&[(1, random_key()?)]);
                // Two processes creating it at once: the first one wins
                // and the other reads its keys.
                match write(&path, &ring, false) {
                    Ok(()) => Ok(ring),
                    Err(_) if path.exists() => read(&path)?
                        .ok_or_else(|| format!("{}: vanished while being created", path.display())),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Add a new signing key; keep the previous one for verifying only.
    /// Returns the new key's id.
    pub fn rotate(home: &Path) -> Result<u16, String> {
        let path = home.join(KEY_FILE);
        let ring = Keyring::open(home)?;
        let (current, key) = ring.current();
        let next = current
            .checked_add(1)
            .ok_or_else(|| format!("{}: no key id is left after {current}", path.display()))?;
        let rotated = Keyring::fixed(&[(current, *key), (next, random_key()?)]);
        write(&path, &rotated, true)?;
        Ok(next)
    }

    /// The signing key: the newest.
    pub fn current(&self) -> (u16, &[u8; KEY_LEN]) {
        let (kid, key) = self.keys.last().expect("a keyring has a key");
        (*kid, key)
    }

    /// Every kept key, the newest first (for tokens that do not name
    /// their key).
    pub fn all(&self) -> impl Iterator<Item = &[u8; KEY_LEN]> {
        self.keys.iter().rev().map(|(_, key)| key)
    }

    /// The key `kid`, for verifying.
    pub fn key(&self, kid: u16) -> Result<&[u8; KEY_LEN], TokenError> {
        match self.keys.iter().find(|(k, _)| *k == kid) {
            Some((_, key)) => Ok(key),
            None if kid < self.oldest_kept => Err(TokenError::KeyRetired(kid)),
            None => Err(TokenError::BadSignature),
        }
    }

    /// Whether `kid` is newer than every key here (the file was rotated
    /// since it was read).
    pub fn is_newer(&self, kid: u16) -> bool {
        kid > self.current().0
    }
}

/// What tells that the key file was replaced or rewritten: its inode,
/// size and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    inode: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

impl FileStamp {
    /// The key file in `home` as it is now (none if it cannot be read).
    pub fn of(home: &Path) -> Option<FileStamp> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(home.join(KEY_FILE)).ok()?;
        Some(FileStamp {
            inode: meta.ino(),
            len: meta.len(),
            modified: meta.modified().ok(),
        })
    }
}

fn random_key() -> Result<[u8; KEY_LEN], String> {
    let mut key = [0u8; KEY_LEN];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut key))
        .map_err(|e| format!("cannot read random bytes for a signing key: {e}"))?;
    Ok(key)
}

fn read(path: &Path) -> Result<Option<Keyring>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(format!(
                "{}: cannot read the MCP token keys: {e}",
                path.display()
            ));
        }
    };
    let bad = |why: String| format!("{}: not a valid MCP key file: {why}", path.display());
    let file: KeyFile = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    if file.format != FORMAT {
        return Err(bad(format!(
            "format {}, this wfhost reads format {FORMAT}",
            file.format
        )));
    }
    if file.keys.is_empty() {
        return Err(bad("it lists no key".into()));
    }
    let mut keys = Vec::new();
    for entry in &file.keys {
        if entry.alg != "hmac-sha256" {
            return Err(bad(format!(
                "key {}: unknown algorithm `{}`",
                entry.kid, entry.alg
            )));
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(&entry.key)
            .ok()
            .filter(|b| b.len() == KEY_LEN)
            .ok_or_else(|| bad(format!("key {} is not 32 bytes of base64url", entry.kid)))?;
        let mut key = [0u8; KEY_LEN];
        key.copy_from_slice(&bytes);
        keys.push((entry.kid, key));
    }
    Ok(Some(Keyring::fixed(&keys)))
}

/// Write `ring` to `path`: aside, synced, then renamed over it (`replace`)
/// or linked to it only if there is none.
fn write(path: &Path, ring: &Keyring, replace: bool) -> Result<(), String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let file = KeyFile {
        format: FORMAT,
        keys: ring
            .keys
            .iter()
            .map(|(kid, key)| KeyEntry {
                kid: *kid,
                alg: "hmac-sha256".into(),
                key: URL_SAFE_NO_PAD.encode(key),
                created_at_ms: wfhost_core::time::now_ms(),
            })
            .collect(),
    };
    let text = serde_json::to_string_pretty(&file).expect("serializes") + "\n";
    let aside: PathBuf = dir.join(format!(
        ".{KEY_FILE}.{}.{}",
        std::process::id(),
        wfhost_core::random::token().map_err(|e| e.to_string())?
    ));
    let written =
        wfhost_core::workspace::regular_file::create_new(&aside, 0o600).and_then(|mut f| {
            f.write_all(text.as_bytes())?;
            f.sync_all()
        });
    let placed = written.and_then(|()| {
        if replace {
            std::fs::rename(&aside, path)
        } else {
            let linked = std::fs::hard_link(&aside, path);
            let _ = std::fs::remove_file(&aside);
            linked
        }
    });
    if placed.is_err() {
        let _ = std::fs::remove_file(&aside);
    }
    placed.map_err(|e| format!("{}: cannot write the MCP token keys: {e}", path.display()))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_key_file_is_made_once_private_and_rotated_keeping_one_previous() {
        let home = tempfile::tempdir().unwrap();
        let first = Keyring::open(home.path()).unwrap();
        let again = Keyring::open(home.path()).unwrap();
        assert_eq!(first.current(), again.current());
        let mode = std::fs::metadata(home.path().join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(Keyring::rotate(home.path()).unwrap(), 2);
        let rotated = Keyring::open(home.path()).unwrap();
        assert_eq!(rotated.current().0, 2);
        assert_eq!(rotated.key(1).unwrap(), first.current().1);
        assert_eq!(Keyring::rotate(home.path()).unwrap(), 3);
        let twice = Keyring::open(home.path()).unwrap();
        assert_eq!(twice.key(1), Err(TokenError::KeyRetired(1)));
        assert!(twice.key(2).is_ok());
        assert_eq!(twice.key(9), Err(TokenError::BadSignature));
        assert!(twice.is_newer(4) && !twice.is_newer(3));
        let leftovers: Vec<_> = std::fs::read_dir(home.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().starts_with('.'))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn a_damaged_key_file_is_an_error_naming_it() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join(KEY_FILE), "{\"format\":1,\"keys\":[]}").unwrap();
        let err = Keyring::open(home.path()).unwrap_err();
        assert!(err.contains(KEY_FILE) && err.contains("no key"), "{err}");
    }
}
