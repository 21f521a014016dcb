//! Write limits that hold while a block runs.
//!
//! A block's `limits` (bytes and files written) are checked on its staged
//! changes before they are applied, but that is after the writing: a guest
//! looping over `write` could fill the disk first, and what goes straight
//! to the workspace (an unrestricted block, `.output/`) is never staged. So
//! while the guest runs, its writable mounts are looked at every
//! [`CHECK_EVERY`] (or ten times as long as the last look took, for big
//! trees): every file changed since the block started (by its ctime, which
//! no guest can set) counts with its whole size. Over a limit, the guest
//! is stopped and the block fails naming the limit.
//!
//! The look happens at the wasm engine's periodic deadline check (epoch
//! interruption), so it costs nothing for blocks shorter than
//! [`CHECK_EVERY`]; a guest can overshoot by what it writes between two
//! looks. While the guest waits in a host call — an exec command, an agent,
//! a container, where host processes write into the live workspace — no
//! wasm runs, so a second watch over the same mounts and the live
//! workspace runs beside the call (`plugins::within_deadline`); over a
//! limit the call is dropped, which kills the processes it waited on.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use wfhost_core::manifest::WriteLimits;

/// How often the writable mounts are looked at while a guest runs.
pub const CHECK_EVERY: Duration = Duration::from_millis(20);

/// How far the kernel's file timestamps may lag the precise clock.
const COARSE_CLOCK_LAG: Duration = Duration::from_millis(20);

/// The writable mounts of one block execution and what they may take.
#[derive(Debug)]
pub struct WriteWatch {
    roots: Vec<PathBuf>,
    /// Seconds and nanoseconds of the block's start (ctime resolution).
    since: (i64, i64),
    limits: WriteLimits,
    next: Instant,
}

impl WriteWatch {
    /// Watch `roots` from now on.
    pub fn new(roots: Vec<PathBuf>, limits: WriteLimits) -> WriteWatch {
        // The kernel stamps ctime from a coarse clock that can lag the
        // precise one by a tick: start a little early so that nothing
        // written right after the start is missed (what changed in those
        // few milliseconds before it counts too).
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .saturating_sub(COARSE_CLOCK_LAG);
        WriteWatch {
            roots,
            since: (now.as_secs() as i64, now.subsec_nanos() as i64),
            limits,
            next: Instant::now() + CHECK_EVERY,
        }
    }

    /// Look again if it is time; the limit passed, if one is.
    pub fn check_if_due(&mut self) -> Result<(), String> {
        let now = Instant::now();
        if now < self.next {
            return Ok(());
        }
        let (mut files, mut bytes) = (0u64, 0u64);
        for root in &self.roots {
            self.count(root, &mut files, &mut bytes);
        }
        let took = now.elapsed();
        self.next = Instant::now() + CHECK_EVERY.max(took * 10);
        self.limits.check(files, bytes)
    }

    /// Files under `dir` changed since the start, never following a link
    /// or opening anything.
    fn count(&self, dir: &Path, files: &mut u64, bytes: &mut u64) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.is_dir() {
                self.count(&entry.path(), files, bytes);
            } else if (meta.ctime(), meta.ctime_nsec()) >= self.since {
                *files += 1;
                *bytes += meta.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_changed_since_the_start_counts() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("old.bin"), vec![0u8; 4096]).unwrap();
        std::thread::sleep(COARSE_CLOCK_LAG * 3);
        let limits = WriteLimits {
            max_written_bytes: 1000,
            max_written_files: 2,
        };
        let mut watch = WriteWatch::new(vec![dir.path().to_path_buf()], limits);
        watch.next = Instant::now();
        assert_eq!(watch.check_if_due(), Ok(()), "the old file does not count");
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/new.txt"), vec![1u8; 600]).unwrap();
        watch.next = Instant::now();
        assert_eq!(watch.check_if_due(), Ok(()));
        std::fs::write(dir.path().join("sub/more.txt"), vec![1u8; 600]).unwrap();
        assert_eq!(watch.check_if_due(), Ok(()), "not due yet");
        watch.next = Instant::now();
        let over = watch.check_if_due().unwrap_err();
        assert!(over.contains("max_written_bytes"), "{over}");
    }
}
