//! Doorbells: how the processes that share a home wake each other instead
//! of polling the store.
//!
//! A doorbell is a Unix datagram socket in `<home>/bells/` (a folder only
//! its owner may enter). `wfhost serve` binds one (`s.<pid>.<random>`): a
//! run process rings it after each commit (a block's job queued, events
//! appended), so the server's lease waiters and event streams look again
//! at once. A run process whose blocks are jobs binds one named after its
//! run (`r.<run id>`, replaced by the next process of the run, which holds
//! the run's lock): the server rings it when one of the run's jobs is
//! completed or cancelled.
//!
//! A ring carries nothing: whatever a datagram holds, it only means "look
//! again at the store", which is what the listener would do on its slow
//! fallback timer anyway. A lost ring (a full socket buffer, a bell bound
//! after the commit) costs latency, never correctness; many rings before
//! the listener wakes are one wake-up.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use wfhost_core::ids::RunId;

/// The folder of the doorbells inside the home.
pub const BELLS_DIR: &str = "bells";

/// The first bytes of a server's bell's name.
const SERVER: &str = "s.";
/// The first bytes of a run's bell's name.
const RUN: &str = "r.";

/// The longest socket path (`sun_path` holds 108 bytes with its NUL).
const MAX_SOCKET_PATH: usize = 107;

/// Rings sent by this process (a count for tests and traces).
static RINGS: AtomicU64 = AtomicU64::new(0);

/// How many rings this process has sent so far.
pub fn rings_sent() -> u64 {
    RINGS.load(Ordering::Relaxed)
}

/// The bells folder of a home, and how its sockets are addressed: by
/// their path, or, when that is longer than a socket address holds,
/// through `/proc/self/fd/` and a descriptor of the folder.
struct Dir {
    path: PathBuf,
    fd: Option<File>,
}

impl Dir {
    fn open(home: &Path, create: bool) -> io::Result<Dir> {
        let path = home.join(BELLS_DIR);
        if create {
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        // Names are at most 3 + 26 bytes (`r.` and a run id, or `s.`,
        // a pid and 8 hex digits).
        let fd = if path.as_os_str().len() + 1 + 32 > MAX_SOCKET_PATH {
            Some(File::open(&path)?)
        } else {
            None
        };
        Ok(Dir { path, fd })
    }

    fn address(&self, name: &std::ffi::OsStr) -> PathBuf {
        match &self.fd {
            Some(fd) => Path::new(&format!("/proc/self/fd/{}", fd.as_raw_fd())).join(name),
            None => self.path.join(name),
        }
    }
}

/// A doorbell this process listens on; its socket file is removed when it
/// is dropped (unless another bell took its name meanwhile).
pub struct Bell {
    socket: UnixDatagram,
    path: PathBuf,
    /// The socket file's device and inode, as bound.
    file: (u64, u64),
    /// Keeps the folder's descriptor that [`Dir::address`] may name.
    _dir: Dir,
}

impl Bell {
    /// The bell of a `wfhost serve` process in `home`.
    pub fn for_server(home: &Path) -> io::Result<Bell> {
        let random = wfhost_core::random::token()?;
        let name = format!("{SERVER}{}.{}", std::process::id(), &random[..8]);
        Self::bind(home, &name)
    }

    /// The bell of the process executing `run` (call it holding the run's
    /// lock: a bell the run's last process left is replaced).
    pub fn for_run(home: &Path, run: &RunId) -> io::Result<Bell> {
        Self::bind(home, &format!("{RUN}{run}"))
    }

    fn bind(home: &Path, name: &str) -> io::Result<Bell> {
        let dir = Dir::open(home, true)?;
        let address = dir.address(name.as_ref());
        let _ = std::fs::remove_file(&address);
        let socket = UnixDatagram::bind(&address)?;
        socket.set_nonblocking(true)?;
        let path = dir.path.join(name);
        let meta = std::fs::symlink_metadata(&path)?;
        Ok(Bell {
            socket,
            path,
            file: (meta.dev(), meta.ino()),
            _dir: dir,
        })
    }

    /// Remove the bell's socket file, if it is still this bell's: nobody
    /// can ring it any more.
    pub fn remove(&self) {
        let ours =
            std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.file);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    /// Wait until the bell rings or `timeout` passes (None: until it
    /// rings); true when it rang. Every ring waiting is taken, so many
    /// rings are one wake-up.
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        let mut poll = libc::pollfd {
            fd: self.socket.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
        // SAFETY: one valid pollfd for the duration of the call.
        let ready = unsafe { libc::poll(&mut poll, 1, ms) };
        ready > 0 && self.take_rings()
    }

    /// Take every ring waiting, without waiting; whether there was one.
    pub fn take_rings(&self) -> bool {
        let mut buf = [0u8; 16];
        let mut rang = false;
        while self.socket.recv(&mut buf).is_ok() {
            rang = true;
        }
        rang
    }
}

impl Drop for Bell {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Rings the bells of a home, remembering the servers' bells until the
/// folder changes (one `stat` per ring when nothing changed).
#[derive(Default)]
pub(crate) struct Ringer {
    socket: Option<UnixDatagram>,
    /// The folder's identity and modification time when last listed.
    listed: Option<(u64, u64, i64, i64)>,
    servers: Vec<OsString>,
}

impl Ringer {
    /// Ring every server bound to `home`'s store.
    pub(crate) fn ring_servers(&mut self, home: &Path) {
        let dir = home.join(BELLS_DIR);
        let Ok(meta) = std::fs::metadata(&dir) else {
            return;
        };
        let stamp = (meta.dev(), meta.ino(), meta.mtime(), meta.mtime_nsec());
        if self.listed != Some(stamp) {
            self.listed = Some(stamp);
            self.servers = std::fs::read_dir(&dir)
                .map(|entries| {
                    entries
                        .filter_map(Result::ok)
                        .map(|e| e.file_name())
                        .filter(|n| n.as_bytes().starts_with(SERVER.as_bytes()))
                        .collect()
                })
                .unwrap_or_default();
        }
        if self.servers.is_empty() {
            return;
        }
        let Ok(dir) = Dir::open(home, false) else {
            return;
        };
        let servers = std::mem::take(&mut self.servers);
        for name in &servers {
            self.ring(&dir, name);
        }
        self.servers = servers;
    }

    /// Ring the bell of the process executing `run`, if it has one.
    pub(crate) fn ring_run(&mut self, home: &Path, run: &str) {
        if !wfhost_core::ids::is_run_id(run) {
            return;
        }
        if let Ok(dir) = Dir::open(home, false) {
            self.ring(&dir, format!("{RUN}{run}").as_ref());
        }
    }

    fn ring(&mut self, dir: &Dir, name: &std::ffi::OsStr) {
        if self.socket.is_none() {
            self.socket = UnixDatagram::unbound().ok();
            if let Some(s) = &self.socket {
                let _ = s.set_nonblocking(true);
            }
        }
        let Some(socket) = &self.socket else {
            return;
        };
        match socket.send_to(b"!", dir.address(name)) {
            Ok(_) => {
                RINGS.fetch_add(1, Ordering::Relaxed);
            }
            // Nobody listens there any more (its process died): the
            // socket file is a leftover.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                let _ = std::fs::remove_file(dir.path.join(name));
            }
            // Full (the listener has rings to take already) or gone.
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_wakes_the_bell_and_many_rings_are_one_wake_up() {
        let home = tempfile::tempdir().unwrap();
        let bell = Bell::for_server(home.path()).unwrap();
        assert!(!bell.wait(Some(Duration::from_millis(1))));
        let mut ringer = Ringer::default();
        for _ in 0..5 {
            ringer.ring_servers(home.path());
        }
        assert!(bell.wait(Some(Duration::from_secs(10))));
        assert!(!bell.take_rings(), "the five rings were one wake-up");
    }

    #[test]
    fn a_run_bell_is_rung_by_its_run_id_and_removed_when_dropped() {
        let home = tempfile::tempdir().unwrap();
        let run = RunId::parse("run-20261126-190000-abcdef").unwrap();
        let bell = Bell::for_run(home.path(), &run).unwrap();
        let mut ringer = Ringer::default();
        ringer.ring_run(home.path(), "run-20261126-190000-000000");
        assert!(!bell.wait(Some(Duration::from_millis(1))), "another run's");
        ringer.ring_run(home.path(), run.as_str());
        assert!(bell.wait(Some(Duration::from_secs(10))));
        let path = home.path().join(BELLS_DIR).join(format!("r.{run}"));
        assert!(path.exists());
        // The run's next process takes the name; the old bell leaves it.
        let next = Bell::for_run(home.path(), &run).unwrap();
        drop(bell);
        assert!(path.exists());
        drop(next);
        assert!(!path.exists());
        // Ringing nobody is fine.
        ringer.ring_run(home.path(), run.as_str());
    }

    #[test]
    fn a_home_too_deep_for_a_socket_address_still_rings() {
        let home = tempfile::tempdir().unwrap();
        let deep = home.path().join("d".repeat(60)).join("e".repeat(60));
        std::fs::create_dir_all(&deep).unwrap();
        let bell = Bell::for_server(&deep).unwrap();
        Ringer::default().ring_servers(&deep);
        assert!(bell.wait(Some(Duration::from_secs(10))));
    }

    #[test]
    fn a_dead_servers_bell_is_removed_by_the_next_ring() {
        let home = tempfile::tempdir().unwrap();
        // A server that died leaves its socket file behind, bound by
        // nobody.
        let path = home.path().join(BELLS_DIR).join("s.1.deadbeef");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        drop(UnixDatagram::bind(&path).unwrap());
        assert!(path.exists());
        let mut ringer = Ringer::default();
        ringer.ring_servers(home.path());
        assert!(!path.exists());
    }

    #[test]
    fn anything_sent_to_a_bell_only_wakes_it() {
        let home = tempfile::tempdir().unwrap();
        let bell = Bell::for_server(home.path()).unwrap();
        let hostile = UnixDatagram::unbound().unwrap();
        hostile.send_to(&[0xff; 4096], &bell.path).unwrap();
        hostile.send_to(b"", &bell.path).unwrap();
        assert!(bell.wait(Some(Duration::from_secs(10))));
        assert!(!bell.take_rings());
    }
}
