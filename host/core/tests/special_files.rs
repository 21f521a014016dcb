//! FIFOs, sockets and devices in a workspace never stall a host-side walk:
//! copies, diffs and snapshots skip them.

use std::path::Path;
use std::time::{Duration, Instant};

use wfhost_core::workspace::{self, Snapshot};

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

fn tree_with_fifo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::write(ws.join("a.txt"), "a").unwrap();
    mkfifo(&ws.join("pipe"));
    mkfifo(&ws.join("sub/pipe"));
    dir
}

#[test]
fn copy_tree_skips_fifos_without_waiting() {
    let dir = tree_with_fifo();
    let start = Instant::now();
    let copy = dir.path().join("copy");
    workspace::copy_tree(&dir.path().join("ws"), &copy, &|_| false).unwrap();
    assert!(start.elapsed() < Duration::from_secs(2));
    assert_eq!(std::fs::read_to_string(copy.join("a.txt")).unwrap(), "a");
    assert!(!copy.join("pipe").exists());
    assert!(!copy.join("sub/pipe").exists());
}

#[test]
fn snapshot_and_diff_skip_fifos_without_waiting() {
    let dir = tree_with_fifo();
    let ws = dir.path().join("ws");
    let start = Instant::now();
    let snapshot = Snapshot::take(&ws, |_| false, &|_| true, &|_| dir.path().join("snap")).unwrap();
    mkfifo(&ws.join("new-pipe"));
    assert_eq!(snapshot.changes().unwrap(), Vec::new());
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let changes = workspace::diff(&other, &ws, &|_| false).unwrap();
    let paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["a.txt", "sub"]);
    assert!(start.elapsed() < Duration::from_secs(2));
}
