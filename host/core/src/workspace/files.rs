//! Single files the host reads from or writes into a workspace: block
//! output files, session files. A container agent shares the workspace, so
//! it could plant a link where the host is about to write (`.output/` made
//! a link to a directory of the host's user, a link at the temporary file's
//! name); reaching every file from the workspace's handle without passing
//! a link, and creating the temporary file exclusively, keeps those writes
//! inside.

use std::io::{self, Write};
use std::path::Path;

use super::dirs::open_real_dir;
use super::handles;
use super::regular_file::create_new_in;

/// The regular file `rel` under `root`, at most `max` bytes, reached
/// without passing a link; a link, FIFO or device at `rel` is refused
/// without waiting.
pub fn read_file(root: &Path, rel: &str, max: u64) -> io::Result<Vec<u8>> {
    let (parent, name) = handles::split(rel);
    let dir = open_real_dir(root, parent, false)?;
    crate::workspace::regular_file::read_bounded(handles::open_file(&dir, name)?, max)
}

/// Remove the file `rel` under `root`, reached without passing a link.
pub fn remove_file(root: &Path, rel: &str) -> io::Result<()> {
    let (parent, name) = handles::split(rel);
    open_real_dir(root, parent, false)?.remove_file(name)
}

/// Replace `rel` under `root` with `bytes` at once (a reader sees the old
/// file or the new one): written to a new file beside it, synced when
/// `durable`, renamed over it. Missing parent directories are created; none
/// is passed through a link.
pub fn write_file(root: &Path, rel: &str, bytes: &[u8], durable: bool) -> io::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let (parent, name) = handles::split(rel);
    let dir = open_real_dir(root, parent, true)?;
    let temp = format!(
        ".{name}.{}-{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let written = create_new_in(&dir, &temp, 0o666).and_then(|mut file| {
        file.write_all(bytes)?;
        if durable {
            file.sync_all()?;
        }
        dir.rename(&temp, &dir, name)
    });
    if written.is_err() {
        let _ = dir.remove_file(&temp);
    }
    written?;
    if durable {
        // The rename is durable once the directory is.
        let _ = dir.open(".").and_then(|d| d.sync_all());
    }
    Ok(())
}
