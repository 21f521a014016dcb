//! The durable run store: one SQLite file (WAL mode) under the wfhost home.
//!
//! The `events` table is the single source of truth. It is append-only (a
//! trigger refuses updates), and every view of a run — its status, steps,
//! statistics, gates — is computed by folding events
//! ([`wfhost_core::run::state::RunState`]). The other tables hold immutable
//! facts recorded once: a run's identity (`runs`) and the pinned workflow
//! definitions it executes against (`definitions`).
//!
//! The log of a run is a tree. Events carry a per-run sequence number and
//! their parent; a *branch* is a path through the tree. Forking at an older
//! snapshot starts a new branch whose first event's parent is that
//! snapshot, so the original branch stays intact (seed 002's rewinds).
//!
//! Several wfhost processes may use one store at once: SQLite serializes
//! writers, appends run in immediate transactions that check the branch
//! head they extend, and a per-run lock file ([`RunLock`]) keeps two
//! processes from executing the same run.

mod acks;
pub mod bell;
mod bundle;
mod cancel;
mod config;
pub mod counters;
mod db;
pub mod detail;
mod error;
mod gc;
pub mod hooks;
mod ids;
mod job_telemetry;
mod jobs;
mod listing;
mod location;
mod lock;
mod log;
mod migrate;
pub mod notify;
pub mod report;
pub mod schedules;
mod schema;
pub mod secrets;
mod sessions;
pub mod shapes;
mod takeover;
pub mod time;
mod timers;
pub mod view;

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

pub use db::Backend;
use db::{Db, DbError, OptionalExtension, params};
use serde::{Deserialize, Serialize};

pub use acks::{Ack, NewAck};
pub use bundle::{BUNDLE_FORMAT, BUNDLE_VERSION, Bundle};
pub use cancel::{CANCELLED, CancelError, Cancellation};
pub use config::{CONFIG_FILE, DEFAULT_RETENTION, HomeConfig};
pub use error::StoreError;
pub use gc::GcCandidate;
pub use listing::{ListError, RUN_STATUSES, RunFilter, RunPage, RunSummary};
#[doc(hidden)]
pub mod forgery;
#[doc(hidden)]
pub mod testing;
pub use ids::{RunId, is_run_id, new_run_id, snapshot_id};
pub use job_telemetry::{JobTelemetry, TelemetryCaps, TelemetryTaken};
pub use jobs::{Completion, Job, JobEvent, JobState, Lease, LeaseLost, NewJob, OpenJob};
pub use location::{Location, STORE_ENV, redact};
pub use lock::{RunLock, RunNotifications, run_notifications};
pub use log::{BranchInfo, BranchWriter, ChainPage, OpenGate, StoredEvent};
pub use migrate::TableCopy;
pub use schema::SCHEMA_VERSION;
pub use secrets::HomeSecrets;
pub use sessions::{
    MAX_SESSION_ID, SESSION_BUNDLE_FORMAT, SESSION_BUNDLE_VERSION, SessionBundle, SessionImport,
    SessionSource, SessionSummary, SessionTag,
};
pub use takeover::ServedRun;
pub use timers::Timer;

/// The store file's name inside the wfhost home.
pub const STORE_FILE: &str = "wfhost.db";

/// How long a connection waits for another process's write lock before it
/// gives up with [`StoreError::Locked`].
pub const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How hard each append works to survive a power cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Every append is on disk (fsync) before the engine acts on it. Survives
    /// process crashes and power loss. The default.
    #[default]
    Full,
    /// Appends survive a crash of wfhost (kill -9 included) but the last
    /// ones may be lost on power loss or an OS crash. Much faster.
    Normal,
}

impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "full" => Ok(Durability::Full),
            "normal" => Ok(Durability::Normal),
            other => Err(format!(
                "unknown durability `{other}`: use `full` or `normal`"
            )),
        }
    }
}

/// The home directory: `--home`, else `$WFHOST_HOME`, else
/// `$XDG_DATA_HOME/wfhost`, else `~/.local/share/wfhost`.
pub fn resolve_home(flag: Option<&Path>) -> Result<PathBuf, StoreError> {
    if let Some(dir) = flag {
        return Ok(dir.to_path_buf());
    }
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = env("WFHOST_HOME") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = env("XDG_DATA_HOME") {
        return Ok(PathBuf::from(dir).join("wfhost"));
    }
    if let Some(dir) = env("HOME") {
        return Ok(PathBuf::from(dir).join(".local/share/wfhost"));
    }
    Err(StoreError::Usage(
        "cannot tell where the wfhost home is: set WFHOST_HOME or pass --home".into(),
    ))
}

/// Make a directory's entries durable (a new store file's name).
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// A run's identity, recorded once when it starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRecord {
    /// Checked on the way in (a bundle, a row), so it is safe in paths.
    pub id: RunId,
    pub workflow_id: String,
    /// `sha256:<hex>` of the pinned definition.
    pub workflow_hash: String,
    /// The manifest file the run was started from, for change warnings.
    pub manifest: String,
    /// The workspace directory the run works in.
    pub workspace: String,
    /// Unix milliseconds.
    pub created_at: i64,
}

/// The durable store.
pub struct Store {
    db: Db,
    /// Where the store is (a run lock on PostgreSQL needs the URL).
    location: Location,
    /// The store file, or for PostgreSQL its URL without the password:
    /// what error messages name.
    path: PathBuf,
    home: PathBuf,
    /// Events read and decoded so far: how tests see that a listing costs
    /// the same whatever the length of the runs it lists.
    decoded: std::cell::Cell<u64>,
    /// What the connection was opened with.
    sync: Durability,
    /// Rings the home's doorbells after a commit others wait for.
    ringer: bell::Ringer,
}

impl Store {
    /// Open the store in `home`, creating the directory and the file if
    /// they do not exist.
    pub fn open(home: &Path, durability: Durability) -> Result<Store, StoreError> {
        Self::open_in(home, &Location::resolve(home)?, durability)
    }

    /// [`Store::open`] at `location` (the home's embedded file, or a
    /// PostgreSQL database: made ready, tables included, if it is empty).
    pub fn open_in(
        home: &Path,
        location: &Location,
        durability: Durability,
    ) -> Result<Store, StoreError> {
        if let Location::Postgres(url) = location {
            return Self::open_postgres(home, url, durability, true);
        }
        std::fs::create_dir_all(home).map_err(|e| StoreError::Io {
            path: home.to_path_buf(),
            message: format!("cannot create the wfhost home: {e}"),
        })?;
        if !home.join(STORE_FILE).exists() {
            Self::create_file(home)?;
        }
        Self::open_file(home, durability)
    }

    /// Make the store file whole before anyone can see it: built under a
    /// private name (WAL mode, schema) and linked into place, so a process
    /// opening the store meanwhile finds either no store or a finished one,
    /// never a file still switching journal modes (which SQLite reports as
    /// busy at once, whatever the busy timeout). If another process links
    /// its store first, that one is kept.
    fn create_file(home: &Path) -> Result<(), StoreError> {
        let path = home.join(STORE_FILE);
        let unique = wfhost_core::random::token().map_err(|e| StoreError::Io {
            path: home.to_path_buf(),
            message: format!("cannot name a new store: {e}"),
        })?;
        let tmp = home.join(format!(".{STORE_FILE}.{unique}.new"));
        let built = Self::open_path(&tmp, home, Durability::Full, true).map(drop);
        let linked = built.and_then(|()| match std::fs::hard_link(&tmp, &path) {
            Ok(()) => sync_dir(home).map_err(|e| StoreError::Io {
                path: home.to_path_buf(),
                message: format!("cannot sync the wfhost home: {e}"),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            // A file system without hard links: made in place, as SQLite
            // does (a reader may then meet it half-made and be refused).
            Err(_) => Self::open_path(&path, home, Durability::Full, true).map(drop),
        });
        for leftover in ["", "-wal", "-shm", "-journal"] {
            let mut name = tmp.clone().into_os_string();
            name.push(leftover);
            let _ = std::fs::remove_file(name);
        }
        linked
    }

    /// Open the store in `home` if there is one; reading commands use this
    /// so that asking about a run never creates a store.
    pub fn open_existing(home: &Path) -> Result<Store, StoreError> {
        Self::open_existing_with(home, Durability::Full)
    }

    /// [`Store::open_existing`] with the durability of the events this
    /// process appends (`resume`, `fork`, `gate` go on with a run).
    pub fn open_existing_with(home: &Path, durability: Durability) -> Result<Store, StoreError> {
        Self::open_existing_in(home, &Location::resolve(home)?, durability)
    }

    /// [`Store::open_existing_with`] at `location`: a PostgreSQL database
    /// without wfhost's tables is no store yet.
    pub fn open_existing_in(
        home: &Path,
        location: &Location,
        durability: Durability,
    ) -> Result<Store, StoreError> {
        if let Location::Postgres(url) = location {
            return Self::open_postgres(home, url, durability, false);
        }
        if !home.join(STORE_FILE).is_file() {
            return Err(StoreError::NoStore {
                path: home.join(STORE_FILE),
            });
        }
        Self::open_file(home, durability)
    }

    /// The durability this connection writes with (SQLite's `synchronous`).
    pub fn durability(&self) -> Result<Durability, StoreError> {
        let Some(conn) = self.db.as_sqlite() else {
            return Ok(self.sync);
        };
        let level: i64 = conn
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .map_err(|e| StoreError::from_sqlite(&self.path, e))?;
        Ok(if level >= 2 {
            Durability::Full
        } else {
            Durability::Normal
        })
    }

    fn open_file(home: &Path, durability: Durability) -> Result<Store, StoreError> {
        Self::open_path(&home.join(STORE_FILE), home, durability, false)
    }

    fn open_path(
        path: &Path,
        home: &Path,
        durability: Durability,
        create: bool,
    ) -> Result<Store, StoreError> {
        let path = path.to_path_buf();
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let err = |e: rusqlite::Error| StoreError::from_sqlite(&path, e);
        let mut conn = Connection::open_with_flags(&path, flags).map_err(err)?;
        counters::install(&mut conn).map_err(err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(err)?;
        // Reading the schema version is the first access of the file: a
        // file that is not a database, or a damaged one, fails here.
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(err)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Io {
                path,
                message: format!("cannot switch the store to WAL mode (it is in {mode} mode)"),
            });
        }
        let sync = match durability {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        };
        conn.execute_batch(&format!(
            "PRAGMA synchronous = {sync}; PRAGMA foreign_keys = ON;"
        ))
        .map_err(err)?;
        let db = Db::sqlite(conn);
        schema::migrate(&db, version).map_err(|e| match e {
            schema::MigrateError::Db(e) => StoreError::from_db(&path, e),
            schema::MigrateError::TooNew(found) => StoreError::TooNew {
                path: path.clone(),
                found,
            },
        })?;
        Ok(Store {
            db,
            location: Location::Embedded,
            path,
            home: home.to_path_buf(),
            decoded: std::cell::Cell::new(0),
            sync: durability,
            ringer: bell::Ringer::default(),
        })
    }

    /// Connect to the PostgreSQL database at `url`, making wfhost's tables
    /// when `create` (else an empty database is [`StoreError::NoStore`]).
    /// The home still holds what belongs to this machine: configuration,
    /// secrets, doorbells, run locks.
    fn open_postgres(
        home: &Path,
        url: &str,
        durability: Durability,
        create: bool,
    ) -> Result<Store, StoreError> {
        let path = PathBuf::from(redact(url));
        let conn = db::PgConn::connect(url).map_err(|e| StoreError::Unavailable {
            path: path.clone(),
            message: e.0,
        })?;
        let db = Db::postgres(conn);
        let found = schema::postgres_version(&db).map_err(|e| StoreError::from_db(&path, e))?;
        if found.is_none() && !create {
            return Err(StoreError::NoStore { path });
        }
        if create {
            std::fs::create_dir_all(home).map_err(|e| StoreError::Io {
                path: home.to_path_buf(),
                message: format!("cannot create the wfhost home: {e}"),
            })?;
        }
        schema::migrate(&db, found.unwrap_or(0)).map_err(|e| match e {
            schema::MigrateError::Db(e) => StoreError::from_db(&path, e),
            schema::MigrateError::TooNew(found) => StoreError::TooNew {
                path: path.clone(),
                found,
            },
        })?;
        let store = Store {
            db,
            location: Location::Postgres(url.to_string()),
            path,
            home: home.to_path_buf(),
            decoded: std::cell::Cell::new(0),
            sync: durability,
            ringer: bell::Ringer::default(),
        };
        store.set_synchronous(durability == Durability::Full)?;
        Ok(store)
    }

    /// The store file (for PostgreSQL, its URL without the password).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The wfhost home the store lives in.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// An immediate transaction (the write lock is taken at once, so a
    /// concurrent writer waits instead of failing mid-way), and the store's
    /// path for error messages.
    fn begin(&mut self) -> Result<(db::Tx<'_>, PathBuf), StoreError> {
        let path = self.path.clone();
        let tx = self.db.begin().map_err(|e| StoreError::from_db(&path, e))?;
        Ok((tx, path))
    }

    /// Whether this connection can still be used: false once a database
    /// server's connection was lost (open the store again).
    pub fn is_usable(&self) -> bool {
        !self.db.is_closed()
    }

    /// The database this store is on.
    pub fn backend(&self) -> Backend {
        self.db.backend()
    }

    /// Ring the servers bound to this home (a job was queued, events were
    /// appended): their lease waiters and event streams look again now
    /// rather than on their fallback timers. See [`bell`].
    pub(crate) fn ring_servers(&mut self) {
        let Store { ringer, home, .. } = self;
        ringer.ring_servers(home);
    }

    /// Ring the process executing `run` (one of its jobs became final).
    pub(crate) fn ring_run(&mut self, run: &str) {
        let Store { ringer, home, .. } = self;
        ringer.ring_run(home, run);
        // (On PostgreSQL the transaction that made the job final notified
        // the run's process too, wherever it is: `Db::notify_run`.)
    }

    /// On PostgreSQL, make this connection wait ([`Store::wait_for_change`])
    /// for `run_id`'s jobs becoming final, wherever they are completed;
    /// false on SQLite (the run's doorbell does that).
    pub fn listen_for_run(&self, run_id: &str) -> Result<bool, StoreError> {
        self.db.listen_for_run(run_id).map_err(|e| self.err(e))
    }

    /// Run `f` with its commits not synced (`synchronous = NORMAL` for the
    /// while): for the lease operations of `jobs`, whose loss on a power
    /// cut only puts a job back where a lease's expiry puts it.
    ///
    /// Why that is safe: the store is one WAL file that commits append to
    /// in order, and recovery keeps the longest valid prefix of it. A
    /// commit is therefore durable as soon as any later commit is synced,
    /// by any process: the run's next step, which at `full` is synced, and
    /// which the run makes only after it has read the completion, carries
    /// the lease and the completion to disk with it — one sync for the
    /// three. Until then a power cut (a crash of the process alone loses
    /// nothing: the OS has the file) can lose them, and the store is then
    /// as it was before: a lost lease leaves the job queued (its agent's
    /// token no longer matches, so its heartbeats and result are refused and
    /// it stops); a lost completion leaves it leased until the lease runs
    /// out and the job is queued again. The block then runs again — at
    /// least once, as for any interrupted block — and its step is still
    /// recorded once, since no step was recorded from the lost completion.
    pub(crate) fn unsynced<T>(
        &mut self,
        f: impl FnOnce(&mut Store) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if self.sync == Durability::Normal {
            return f(self);
        }
        if self.db.backend() == Backend::Postgres {
            // Each write transaction of `f` says so itself (`SET LOCAL`,
            // sent with its BEGIN): no round trips to switch back and forth.
            self.db.set_unsynced(true);
            let done = f(self);
            self.db.set_unsynced(false);
            return done;
        }
        self.set_synchronous(false)?;
        let done = f(self);
        let restored = self.set_synchronous(true);
        let done = done?;
        restored?;
        Ok(done)
    }

    /// Whether commits wait for the disk: SQLite's `synchronous` (FULL or
    /// NORMAL), PostgreSQL's `synchronous_commit` (on or off: a commit
    /// is then lost only when the database server itself crashes).
    pub(crate) fn set_synchronous(&self, full: bool) -> Result<(), StoreError> {
        let sql = match (self.db.backend(), full) {
            (Backend::Sqlite, true) => "PRAGMA synchronous = FULL",
            (Backend::Sqlite, false) => "PRAGMA synchronous = NORMAL",
            (Backend::Postgres, true) => "SET synchronous_commit = on",
            (Backend::Postgres, false) => "SET synchronous_commit = off",
        };
        match self.db.as_sqlite() {
            Some(conn) => conn
                .prepare_cached(sql)
                .and_then(|mut s| s.raw_execute())
                .map(drop)
                .map_err(|e| self.err(e)),
            None => self.db.execute_batch(sql).map_err(|e| self.err(e)),
        }
    }

    fn err(&self, e: impl Into<DbError>) -> StoreError {
        StoreError::from_db(&self.path, e.into())
    }

    /// Record a new run: its pinned definition, its identity and its first
    /// event, all or nothing. Returns the writer for its first branch.
    pub fn create_run(
        &mut self,
        record: &RunRecord,
        definition_json: &str,
        started: &wfhost_core::run::event::Event,
    ) -> Result<(), StoreError> {
        self.create_run_in(record, definition_json, started, None)
    }

    /// [`Store::create_run`], the run belonging to `session`.
    pub fn create_run_in(
        &mut self,
        record: &RunRecord,
        definition_json: &str,
        started: &wfhost_core::run::event::Event,
        session: Option<&SessionTag>,
    ) -> Result<(), StoreError> {
        let (tx, path) = self.begin()?;
        let err = |e| StoreError::from_db(&path, e);
        let existing: Option<String> = tx
            .query_row(
                "SELECT body FROM definitions WHERE hash = ?1",
                params![&record.workflow_hash],
                |r| r.get(0),
            )
            .optional()
            .map_err(err)?;
        match existing {
            Some(body) if body != definition_json => {
                return Err(StoreError::Inconsistent(format!(
                    "definition {} is stored with different content",
                    record.workflow_hash
                )));
            }
            Some(_) => {}
            None => {
                tx.execute(
                    "INSERT INTO definitions (hash, workflow_id, body) VALUES (?1, ?2, ?3)",
                    params![&record.workflow_hash, &record.workflow_id, definition_json],
                )
                .map_err(err)?;
            }
        }
        let run = match insert_run(&tx, record) {
            Err(e) if e.is_unique_violation() => {
                return Err(StoreError::RunExists(record.id.to_string()));
            }
            other => other.map_err(err)?,
        };
        log::insert_event(&tx, run, &record.id, 1, 1, None, time::now_ms(), started)
            .map_err(err)?;
        if let Some(session) = session {
            sessions::insert(&tx, run, session).map_err(err)?;
        }
        tx.commit().map_err(err)?;
        self.ring_servers();
        Ok(())
    }

    /// The run `id`, or the only run whose id contains `id` (the part a
    /// person remembers: `3c1f0a`, `024925`, a prefix). Ambiguous or unknown
    /// is an error that lists the candidates.
    pub fn resolve_run(&self, id: &str) -> Result<RunRecord, StoreError> {
        if let Some(run) = self.run(id)? {
            return Ok(run);
        }
        if id.is_empty() {
            return Err(StoreError::Usage(
                "an empty run id matches every run".into(),
            ));
        }
        let ids: Vec<String> = self
            .db
            .query_all(
                self.db.pick(
                    "SELECT id FROM runs WHERE instr(id, ?1) > 0 ORDER BY id LIMIT 6",
                    "SELECT id FROM runs WHERE strpos(id, ?1) > 0 ORDER BY id LIMIT 6",
                ),
                params![id],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        match ids.as_slice() {
            [] => Err(StoreError::UnknownRun {
                id: id.to_string(),
                store: self.path.clone(),
            }),
            [only] => Ok(self.run(only)?.expect("the run was just listed")),
            many => Err(StoreError::Usage(format!(
                "run id `{id}` is ambiguous: it matches {}{}",
                many.iter().take(5).cloned().collect::<Vec<_>>().join(", "),
                if many.len() > 5 { ", …" } else { "" }
            ))),
        }
    }

    /// The run `id`, if it exists.
    pub fn run(&self, id: &str) -> Result<Option<RunRecord>, StoreError> {
        self.db
            .query_row(
                "SELECT id, workflow_id, workflow_hash, manifest, workspace, created_at
                 FROM runs WHERE id = ?1",
                params![id],
                row_to_run,
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Every run, newest first. A row whose id is no run id (written by an
    /// older import that did not check it) is left out: it cannot be
    /// executed or exported, only removed by `gc`.
    pub fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        let rows = self
            .db
            .query_all(
                "SELECT id, workflow_id, workflow_hash, manifest, workspace, created_at
                 FROM runs ORDER BY created_at DESC, id DESC",
                params![],
                |r| Ok(row_to_run(r).ok()),
            )
            .map_err(|e| self.err(e))?;
        Ok(rows.into_iter().flatten().collect())
    }

    /// The pinned definition `hash` as stored (canonical JSON).
    pub fn definition(&self, hash: &str) -> Result<String, StoreError> {
        self.definition_if_any(hash)?.ok_or_else(|| {
            StoreError::Inconsistent(format!("the pinned definition {hash} is missing"))
        })
    }

    /// The pinned definition with this hash, if the store has it.
    pub fn definition_if_any(&self, hash: &str) -> Result<Option<String>, StoreError> {
        self.db
            .query_row(
                "SELECT body FROM definitions WHERE hash = ?1",
                params![hash],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Take the execution lock of `run_id`, failing at once if another
    /// process holds it.
    pub fn lock_run(&self, run_id: &RunId) -> Result<RunLock, StoreError> {
        match &self.location {
            Location::Postgres(url) => lock::acquire_in_database(url, &self.path, run_id),
            Location::Embedded => RunLock::acquire(&self.home, run_id),
        }
    }

    /// The pid of the process executing `run_id` right now, if any.
    pub fn lock_holder(&self, run_id: &RunId) -> Option<u32> {
        match self.location {
            Location::Postgres(_) => lock::local_holder(&self.db, run_id).ok().flatten(),
            Location::Embedded => RunLock::holder(&self.home, run_id),
        }
    }

    /// Whether a process is executing `run_id` right now. A database that
    /// cannot be asked answers yes: what removes, stops or takes over a
    /// run's things on "not running" (gc, orphaned containers, lanes)
    /// leaves them alone on a guess ([`Store::running_now`] tells the
    /// error apart).
    pub fn is_running(&self, run_id: &RunId) -> bool {
        match self.location {
            Location::Postgres(_) => lock::held_in_database(&self.db, run_id).unwrap_or(true),
            Location::Embedded => RunLock::is_held(&self.home, run_id),
        }
    }

    /// [`Store::is_running`] of an id read from the store: a row whose id
    /// is no run id (written by an older, unchecked import) has no lock
    /// file and is never running.
    pub(crate) fn is_running_text(&self, run_id: &str) -> bool {
        RunId::parse(run_id).is_ok_and(|id| self.is_running(&id))
    }
}

/// Insert a run's row; its number (`runs.num`). Numbers are the largest
/// one plus one, as SQLite numbers rows, on both backends (a sequence
/// would leave gaps where a transaction rolled back, and the two backends
/// would number the same runs differently); writers hold the store's
/// write lock, so two never take the same number.
pub(crate) fn insert_run(db: &Db, record: &RunRecord) -> Result<i64, DbError> {
    db.query_row(
        "INSERT INTO runs (num, id, workflow_id, workflow_hash, manifest, workspace, created_at)
         SELECT coalesce(max(num), 0) + 1, ?1, ?2, ?3, ?4, ?5, ?6 FROM runs RETURNING num",
        params![
            record.id.as_str(),
            &record.workflow_id,
            &record.workflow_hash,
            &record.manifest,
            &record.workspace,
            record.created_at,
        ],
        |r| r.get(0),
    )
}

fn row_to_run(r: &db::Row<'_>) -> Result<RunRecord, DbError> {
    let id: String = r.get(0)?;
    let id = RunId::parse(&id).map_err(|e| DbError::conversion(0, e))?;
    Ok(RunRecord {
        id,
        workflow_id: r.get(1)?,
        workflow_hash: r.get(2)?,
        manifest: r.get(3)?,
        workspace: r.get(4)?,
        created_at: r.get(5)?,
    })
}
