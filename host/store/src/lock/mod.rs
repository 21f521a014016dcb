//! The per-run execution lock. With the embedded store, a `flock` on
//! `<home>/locks/<run-id>.lock`: the kernel releases it when its holder
//! dies, kill -9 included, so a crashed run never stays "locked" and no
//! lease expiry has to be guessed. With a PostgreSQL store, whose runs
//! processes on several machines may execute, a session advisory lock of
//! the database held by a connection of its own: the database releases it
//! when that connection ends (the holder died, or its machine did), and
//! the holder's machine and pid are recorded in `run_locks`. Either way a
//! live holder keeps every other process from executing the same run at
//! the same time.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

mod keeper;

pub(crate) use keeper::lost;

use crate::db::{Notified, OptionalExtension, PgConn};
use crate::{RunId, StoreError};

/// Held while a process executes a run; released on drop or death.
pub struct RunLock {
    _held: Held,
    /// The run, for the registry of notifications (database locks).
    run_id: String,
}

impl std::fmt::Debug for RunLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self._held {
            Held::File(_) => "RunLock(file)",
            Held::Database(_) => "RunLock(database)",
        })
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Released now, not when the server notices the connection closed
        // (a process that takes the lock again at once must get it).
        if let Held::Database(keeper) = &mut self._held {
            registry().remove(&self.run_id);
            keeper.release();
        }
    }
}

enum Held {
    // Keeping the descriptor open keeps the lock; the file itself stays
    // (another process may be opening it).
    File(#[allow(dead_code)] File),
    // The thread owning the connection that holds the advisory lock
    // (closing it releases it), which takes the lock again should the
    // connection be lost.
    Database(keeper::Keeper),
}

/// The first key of the run locks' advisory locks ("wfr1"); the second is
/// `hashtext(run id)`. (The write lock uses the one-key form, a separate
/// key space.)
const RUN_LOCK_CLASS: i32 = 0x7766_7231;
// (Written out in `UNLOCKED_SERVED_RUNS`.)
const _: () = assert!(RUN_LOCK_CLASS == 2003202609);

/// This machine's name, as recorded beside a database run lock.
pub(crate) fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The database form of the lock: `url`'s database, `path` naming it in
/// errors.
pub(crate) fn acquire_in_database(
    url: &str,
    path: &Path,
    run_id: &RunId,
) -> Result<RunLock, StoreError> {
    let conn = PgConn::connect(url).map_err(|e| StoreError::Unavailable {
        path: path.to_path_buf(),
        message: e.0,
    })?;
    let db = crate::db::Db::postgres(conn);
    let err = |e| StoreError::from_db(path, e);
    if !take(&db, run_id).map_err(err)? {
        return Err(StoreError::Busy {
            run_id: run_id.to_string(),
            pid: local_holder(&db, run_id).map_err(err)?,
        });
    }
    let conn = db.as_postgres().expect("made on PostgreSQL");
    // The lock's connection is idle while held: it also listens for the
    // run's jobs becoming final, for the process's job waiter
    // ([`run_notifications`]), so a run process needs no third connection.
    if conn.listen_for_run(run_id.as_str()).is_ok() {
        registry().insert(run_id.to_string(), conn.notifications());
    }
    Ok(RunLock {
        _held: Held::Database(keeper::Keeper::start(db, run_id.clone())),
        run_id: run_id.to_string(),
    })
}

/// The served runs whose database lock no session holds (see
/// [`crate::Store::unexecuted_served_runs`]).
pub(crate) const UNLOCKED_SERVED_RUNS: &str =
    "SELECT s.run, r.id, s.takeovers, s.taken_at, r.workspace
     FROM served_runs s JOIN runs r ON r.num = s.run
     WHERE s.run > ?1 AND NOT EXISTS (
       SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted
         AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
         AND l.classid = 2003202609::oid AND l.objid = hashtext(r.id)::oid AND l.objsubid = 2)
     ORDER BY s.run LIMIT ?2";

/// Try to take `run_id`'s database lock on `db`'s connection, and record
/// this process as its holder: whether it was free.
fn take(db: &crate::db::Db, run_id: &RunId) -> crate::db::DbResult<bool> {
    let got: bool = db.query_row(
        &format!("SELECT pg_try_advisory_lock({RUN_LOCK_CLASS}, hashtext(?1))"),
        (run_id.as_str(),),
        |r| r.get(0),
    )?;
    if got {
        db.execute(
            "INSERT INTO run_locks (run_id, host, pid, at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (run_id) DO UPDATE SET host = excluded.host, pid = excluded.pid, at = excluded.at",
            (
                run_id.as_str(),
                host_name(),
                i64::from(std::process::id()),
                crate::time::now_ms(),
            ),
        )?;
    }
    Ok(got)
}

/// The notifications of the runs whose database lock this process holds.
fn registry() -> std::sync::MutexGuard<'static, HashMap<String, Arc<Notified>>> {
    static RUNS: OnceLock<Mutex<HashMap<String, Arc<Notified>>>> = OnceLock::new();
    RUNS.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// That one of a run's jobs became final, as the database notifies it to
/// the connection holding the run's lock in this process.
#[derive(Clone)]
pub struct RunNotifications(Arc<Notified>);

impl RunNotifications {
    /// How many were received so far.
    pub fn count(&self) -> u64 {
        self.0.count()
    }

    /// Wait until one after `seen` arrives, at most `timeout`; whether one
    /// did.
    pub fn wait(&self, seen: u64, timeout: std::time::Duration) -> bool {
        self.0.wait(seen, timeout)
    }
}

/// The notifications of `run_id`'s jobs, when this process holds the run's
/// lock in a PostgreSQL store (None otherwise: the run's doorbell serves).
pub fn run_notifications(run_id: &str) -> Option<RunNotifications> {
    registry().get(run_id).cloned().map(RunNotifications)
}

/// Whether a session holds the database lock of `run_id`.
pub(crate) fn held_in_database(db: &crate::db::Db, run_id: &RunId) -> crate::db::DbResult<bool> {
    db.query_row(
        &format!(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
               AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND classid = {RUN_LOCK_CLASS}::oid AND objid = hashtext(?1)::oid AND objsubid = 2)"
        ),
        (run_id.as_str(),),
        |r| r.get(0),
    )
}

/// The pid of the holder of `run_id`'s database lock when it is a process
/// of this machine (a pid of another machine is nothing to signal here).
pub(crate) fn local_holder(db: &crate::db::Db, run_id: &RunId) -> crate::db::DbResult<Option<u32>> {
    if !held_in_database(db, run_id)? {
        return Ok(None);
    }
    let row: Option<(String, i64)> = db
        .query_row(
            "SELECT host, pid FROM run_locks WHERE run_id = ?1",
            (run_id.as_str(),),
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    Ok(row
        .filter(|(host, _)| *host == host_name())
        .and_then(|(_, pid)| u32::try_from(pid).ok()))
}

/// Record the holder's pid in the lock file, in place: a process taking
/// the lock again (an MCP server advancing a run call after call) finds it
/// there and writes nothing, and no write truncates the file (on ext4 a
/// truncation to zero forces the file's pages to disk).
fn write_pid(file: &mut File) -> std::io::Result<()> {
    let ours = format!("{:<10}", std::process::id());
    let mut found = [0u8; 16];
    let n = file.read_at(&mut found, 0)?;
    if &found[..n] == ours.as_bytes() {
        return Ok(());
    }
    file.write_all_at(ours.as_bytes(), 0)?;
    if n > ours.len() {
        file.set_len(ours.len() as u64)?;
    }
    Ok(())
}

impl RunLock {
    fn path(home: &Path, run_id: &RunId) -> PathBuf {
        home.join("locks").join(format!("{run_id}.lock"))
    }

    /// Take the lock, or fail at once naming the holder.
    pub fn acquire(home: &Path, run_id: &RunId) -> Result<RunLock, StoreError> {
        let path = Self::path(home, run_id);
        let io = |e: std::io::Error| StoreError::Io {
            path: path.clone(),
            message: format!("cannot use the run lock: {e}"),
        };
        std::fs::create_dir_all(path.parent().expect("lock files live in a directory"))
            .map_err(io)?;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        // SAFETY: flock on a file descriptor we own.
        let try_lock = || unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        let mut rc = try_lock();
        // A probe (`is_held`) holds a shared lock for a few microseconds:
        // a real holder is still there after a short wait, a probe is not.
        for _ in 0..10 {
            if rc == 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
            rc = try_lock();
        }
        if rc != 0 {
            let pid = std::fs::read_to_string(&path)
                .ok()
                .and_then(|s| s.trim().parse().ok());
            return Err(StoreError::Busy {
                run_id: run_id.to_string(),
                pid,
            });
        }
        write_pid(&mut file).map_err(io)?;
        Ok(RunLock {
            _held: Held::File(file),
            run_id: run_id.to_string(),
        })
    }

    /// Whether some process holds the lock now.
    pub fn is_held(home: &Path, run_id: &RunId) -> bool {
        let path = Self::path(home, run_id);
        let Ok(file) = File::open(&path) else {
            return false;
        };
        // SAFETY: flock on a file descriptor we own; a shared probe that is
        // released at once.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
        if rc == 0 {
            unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
            false
        } else {
            true
        }
    }

    /// The pid of the process holding the lock, if one does and has
    /// written it.
    pub fn holder(home: &Path, run_id: &RunId) -> Option<u32> {
        if !Self::is_held(home, run_id) {
            return None;
        }
        std::fs::read_to_string(Self::path(home, run_id))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    }

    /// Remove the lock file of a run that is gone (gc).
    pub(crate) fn remove(home: &Path, run_id: &RunId) {
        let _ = std::fs::remove_file(Self::path(home, run_id));
    }
}
