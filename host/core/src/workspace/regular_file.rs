//! Opening files the host reads without being stalled or misled by them.
//!
//! A path in a workspace, or one a user passes as a manifest, may name a
//! FIFO (opening it for reading waits for a writer, reading it waits for
//! data), a device (`/dev/zero` never ends) or a symbolic link. Host code
//! that reads such a path opens it with [`open_regular`]: without blocking,
//! without following a final symlink, and refusing anything the opened
//! descriptor does not show to be a regular file. Files read whole go
//! through [`read_regular`], which also bounds their size.
//!
//! Files the host creates new (a temporary file renamed into place, a
//! key, a secret, a `.gitignore`, a copy, a bundle's file) are made by
//! [`create_in`] ([`create_new_in`], or [`create_new`] for a path): never
//! through a symbolic link.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The largest workflow manifest wfhost reads: 16 MiB.
pub const MAX_MANIFEST_BYTES: u64 = 16 << 20;
/// The largest JSON Schema file a block's `validation_schema` may name:
/// 16 MiB.
pub const MAX_SCHEMA_BYTES: u64 = 16 << 20;
/// The largest plugin component wfhost loads from a file: 256 MiB.
pub const MAX_PLUGIN_BYTES: u64 = 256 << 20;

/// Open `path` for reading if it is a regular file. The open never waits
/// (`O_NONBLOCK`: a FIFO without a writer does not stall it), never follows
/// a symlink in the last component (`O_NOFOLLOW`), and the type is checked
/// on the opened descriptor, so a swap between a check and the open cannot
/// slip a FIFO or device through.
pub fn open_regular(path: &Path) -> io::Result<File> {
    open_checked(path, libc::O_NOFOLLOW)
}

fn open_checked(path: &Path, extra_flags: i32) -> io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | extra_flags)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => io::Error::new(
                io::ErrorKind::InvalidInput,
                "is a symbolic link, not a regular file",
            ),
            _ => e,
        })?;
    check_regular(file)
}

/// What [`create_in`] does with a file already at the name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Refuse it (`O_CREAT | O_EXCL`): the file is new.
    Refuse,
    /// Empty it and write it anew (`O_CREAT | O_TRUNC`).
    Truncate,
}

/// Create `name` in the directory handle `dir` for writing, with the
/// permission bits `mode` (less the umask) when it is made; a file already
/// there is refused or emptied as `existing` says. A symbolic link at
/// `name` is never followed (`O_NOFOLLOW`; with [`Existing::Refuse`] even
/// a dangling one is refused). The one way host code creates a file it is
/// about to fill.
pub fn create_in(
    dir: &cap_std::fs::Dir,
    name: &str,
    existing: Existing,
    mode: u32,
) -> io::Result<File> {
    use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
    use cap_std::fs::OpenOptionsExt as _;
    let mut options = cap_std::fs::OpenOptions::new();
    options.write(true).follow(FollowSymlinks::No).mode(mode);
    match existing {
        Existing::Refuse => options.create_new(true),
        Existing::Truncate => options.create(true).truncate(true),
    };
    Ok(dir.open_with(name, &options)?.into_std())
}

/// [`create_in`] of a new file.
pub fn create_new_in(dir: &cap_std::fs::Dir, name: &str, mode: u32) -> io::Result<File> {
    create_in(dir, name, Existing::Refuse, mode)
}

/// [`create_new_in`] for a path: its file name in its parent directory
/// (the parent itself is reached as the path says).
pub fn create_new(path: &Path, mode: u32) -> io::Result<File> {
    let invalid = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} does not name a file", path.display()),
        )
    };
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(invalid)?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = cap_std::fs::Dir::open_ambient_dir(parent, cap_std::ambient_authority())?;
    create_new_in(&dir, name, mode)
}

/// `file` if its descriptor shows a regular file; otherwise an error
/// naming what it is.
pub fn check_regular(file: File) -> io::Result<File> {
    let kind = file.metadata()?.file_type();
    if kind.is_file() {
        return Ok(file);
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("is {}, not a regular file", describe(&kind)),
    ))
}

/// Read a whole regular file of at most `max` bytes: a file a user names
/// (a manifest, a plugin, a schema), so a symlink to a regular file is
/// followed. A FIFO or device is refused without waiting; a file that is
/// larger than `max` (or grows past it while it is read) is refused
/// without reading more than `max + 1` bytes.
pub fn read_regular(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    read_bounded(open_checked(path, 0)?, max)
}

pub(crate) fn read_bounded(file: File, max: u64) -> io::Result<Vec<u8>> {
    let len = file.metadata()?.len();
    if len > max {
        return Err(too_large(max));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_large(max));
    }
    Ok(bytes)
}

/// Read the whole regular file at `path` (no symlink followed, no FIFO or
/// device read).
pub fn read_all(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_regular(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn too_large(max: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("is larger than the limit of {}", human_size(max)),
    )
}

/// `16 MiB`, `256 MiB`, or bytes when not a whole number of MiB.
pub fn human_size(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

/// Whether a directory entry's type (from `symlink_metadata`) is one the
/// host may read as file content: not a FIFO, socket or device.
pub fn is_special(kind: &std::fs::FileType) -> bool {
    kind.is_fifo() || kind.is_socket() || kind.is_block_device() || kind.is_char_device()
}

fn describe(kind: &std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn a_fifo_is_refused_at_once() {
        let dir = tmp();
        let fifo = dir.path().join("pipe");
        mkfifo(&fifo);
        let start = Instant::now();
        let err = read_regular(&fifo, 10).unwrap_err();
        assert!(err.to_string().contains("a FIFO"), "{err}");
        assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_device_is_refused_without_reading_it() {
        let err = read_regular(Path::new("/dev/zero"), MAX_MANIFEST_BYTES).unwrap_err();
        assert!(err.to_string().contains("character device"), "{err}");
    }

    #[test]
    fn a_symlink_is_not_followed() {
        let dir = tmp();
        std::fs::write(dir.path().join("real"), "x").unwrap();
        std::os::unix::fs::symlink("real", dir.path().join("link")).unwrap();
        let err = open_regular(&dir.path().join("link")).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        // A path a user names may be a link to a regular file.
        assert_eq!(read_regular(&dir.path().join("link"), 1).unwrap(), b"x");
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero")).unwrap();
        assert!(read_regular(&dir.path().join("zero"), 1).is_err());
    }

    #[test]
    fn a_new_file_is_never_an_existing_one_nor_made_through_a_link() {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        let dir = tmp();
        let path = dir.path().join("key");
        create_new(&path, 0o600)
            .unwrap()
            .write_all(b"secret")
            .unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = create_new(&path, 0o600).unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
        // A link, even a dangling one, is neither followed nor replaced.
        let target = dir.path().join("elsewhere");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(create_new(&link, 0o600).is_err());
        assert!(!target.exists());
        assert_eq!(std::fs::read(&path).unwrap(), b"secret");
    }

    #[test]
    fn a_file_over_the_limit_is_refused() {
        let dir = tmp();
        let path = dir.path().join("big");
        std::fs::write(&path, vec![b'a'; 2048]).unwrap();
        let err = read_regular(&path, 2047).unwrap_err();
        assert!(err.to_string().contains("larger than the limit"), "{err}");
        assert_eq!(read_regular(&path, 2048).unwrap().len(), 2048);
        assert!(open_regular(dir.path()).is_err());
    }
}
