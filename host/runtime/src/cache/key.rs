//! The secret key of the compiled cache's integrity records.
//!
//! 32 random bytes in [`KEY_FILE`] in the cache directory, created with
//! mode 0600 (the directory 0700 when wfhost creates it). Only a key file
//! that is a regular file of this user, readable by nobody else, of the
//! right size, is used; anything else is replaced by a new key, which
//! makes every existing entry fail its check and be recompiled. wfhost
//! refuses to run a workspace that contains the cache directory, so no
//! plugin can read the key.

use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::Path;

/// The key file's name in the cache directory.
pub const KEY_FILE: &str = "integrity.key";

/// Read this user's key from `dir`, creating the directory and the key if
/// needed, or replacing a key file that cannot be trusted.
pub fn load_or_create(dir: &Path) -> io::Result<[u8; 32]> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let path = dir.join(KEY_FILE);
    match read_trusted(&path) {
        Ok(Some(key)) => return Ok(key),
        Ok(None) => return write_new(dir, &path, true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(_) => return write_new(dir, &path, true),
    }
    match write_new(dir, &path, false) {
        // Another wfhost process created it first: use theirs.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => read_trusted(&path)?
            .ok_or_else(|| io::Error::other("the cache key was replaced while it was read")),
        other => other,
    }
}

/// The key in `path`, or `None` when the file is not one to trust.
fn read_trusted(path: &Path) -> io::Result<Option<[u8; 32]>> {
    let mut file = wfhost_core::workspace::regular_file::open_regular(path)?;
    let meta = file.metadata()?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.len() != 32 || meta.uid() != me || meta.mode() & 0o077 != 0 {
        return Ok(None);
    }
    let mut key = [0u8; 32];
    file.read_exact(&mut key)?;
    Ok(Some(key))
}

fn write_new(dir: &Path, path: &Path, replace: bool) -> io::Result<[u8; 32]> {
    let mut key = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
    // A temporary file is created with mode 0600.
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    io::Write::write_all(&mut tmp, &key)?;
    tmp.as_file().sync_all()?;
    if replace {
        tmp.persist(path).map_err(|e| e.error)?;
    } else {
        tmp.persist_noclobber(path).map_err(|e| e.error)?;
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_key_is_created_private_and_then_reused() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let key = load_or_create(&cache).unwrap();
        let meta = std::fs::metadata(cache.join(KEY_FILE)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert_eq!(load_or_create(&cache).unwrap(), key);
    }

    #[test]
    fn a_key_others_can_read_or_a_planted_link_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let key = load_or_create(dir.path()).unwrap();
        let path = dir.path().join(KEY_FILE);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let second = load_or_create(dir.path()).unwrap();
        assert_ne!(second, key);
        std::fs::remove_file(&path).unwrap();
        std::fs::write(dir.path().join("known"), [7u8; 32]).unwrap();
        std::os::unix::fs::symlink("known", &path).unwrap();
        let third = load_or_create(dir.path()).unwrap();
        assert_ne!(third, [7u8; 32]);
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
    }
}
