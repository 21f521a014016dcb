//! [`super::Db`] on PostgreSQL, through tokio-postgres.
//!
//! The store's interface is synchronous and is called from plain threads
//! and from inside the run process's tokio runtime alike, so a connection
//! is not tied to the caller's runtime: each connection's socket is driven
//! by one background runtime thread shared by the process, and a caller
//! waits for its query with `futures_executor::block_on` (the client's
//! futures only talk to that task over channels). Statements are prepared
//! once per connection with their parameters' types.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use futures_executor::block_on;
use futures_util::StreamExt;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{AsyncMessage, Client, NoTls, Statement};

use super::{DbError, DbResult, Param, Row, dollar_params};
use crate::counters;

/// How long connecting may take when the URL does not say
/// (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The channel every write transaction notifies on commit: what
/// [`PgConn::changes`] counts, as SQLite's `data_version` counts other
/// connections' commits.
const CHANGES: &str = "wfhost_changes";

/// The channel a job's completion or cancellation is notified on, its
/// payload the run's id: what the process executing the run waits for
/// (the database's form of the run's doorbell).
pub(crate) const RUNS: &str = "wfhost_runs";

/// What a connection counts of the notifications it receives: all of them,
/// or only those whose payload is `only` (a run's id).
#[derive(Default)]
pub(crate) struct Notified {
    count: Mutex<(u64, Option<String>)>,
    changed: Condvar,
}

impl Notified {
    fn received(&self, payload: &str) {
        let mut state = self.count.lock().unwrap_or_else(|e| e.into_inner());
        if state.1.as_deref().is_none_or(|only| only == payload) {
            state.0 += 1;
            self.changed.notify_all();
        }
    }

    fn bump(&self) {
        self.count.lock().unwrap_or_else(|e| e.into_inner()).0 += 1;
        self.changed.notify_all();
    }

    pub(crate) fn count(&self) -> u64 {
        self.count.lock().unwrap_or_else(|e| e.into_inner()).0
    }

    /// Wait until the count is past `seen`, at most `timeout`; whether it
    /// is.
    pub(crate) fn wait(&self, seen: u64, timeout: Duration) -> bool {
        let guard = self.count.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = self
            .changed
            .wait_timeout_while(guard, timeout, |state| state.0 == seen)
            .unwrap_or_else(|e| e.into_inner());
        guard.0 != seen
    }
}

/// How long a lost connection is tried again before the operation that
/// needed it fails.
const RECONNECT_FOR: Duration = Duration::from_secs(30);

/// The advisory lock every write transaction holds (see
/// [`super::Db::begin`]): "wfhost" in ASCII.
const WRITE_LOCK: i64 = 0x0000_7766_686f_7374;

/// The runtime whose thread drives every connection's socket.
fn runtime() -> Result<&'static tokio::runtime::Runtime, String> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("wfhost-postgres")
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the PostgreSQL connection thread: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// One connection to the database.
pub(crate) struct PgConn {
    /// The connection; made again when it was lost between transactions
    /// (a database server restarted), see [`PgConn::live`].
    client: RefCell<Client>,
    config: tokio_postgres::Config,
    /// The TLS connector when the URL asks for TLS.
    tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    /// Inside a transaction this connection began: a connection lost now
    /// lost the transaction, which is an error, not a reconnect.
    in_tx: Cell<bool>,
    statements: RefCell<HashMap<(String, Vec<Type>), Statement>>,
    /// Notifications received on the channel listened to, and the
    /// condition a waiter for the next one sleeps on.
    notified: Arc<Notified>,
    /// Listening (again after a reconnect) on this channel: [`CHANGES`]
    /// unless [`PgConn::listen_for_run`] said otherwise.
    listening: Cell<bool>,
    channel: Cell<&'static str>,
    /// Write transactions begun now commit without waiting for the disk.
    unsynced: Cell<bool>,
}

/// TCP keepalives on both ends, unless the URL's `options` set the
/// server's own: the database notices a connection whose machine died in
/// about 25 s (the default is two hours), and with it releases the run
/// locks that machine held, so another server can take its runs over; this
/// end notices a database server that went away.
fn keep_alive(config: &mut tokio_postgres::Config) {
    config.keepalives(true);
    config.keepalives_idle(KEEPALIVE_IDLE);
    let given = config.get_options().unwrap_or_default().to_string();
    if !given.contains("tcp_keepalives") {
        let ours =
            "-c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3";
        let options = match given.trim() {
            "" => ours.to_string(),
            given => format!("{given} {ours}"),
        };
        config.options(&options);
    }
}

/// Idle time before this end's first keepalive probe.
const KEEPALIVE_IDLE: std::time::Duration = std::time::Duration::from_secs(10);

/// Why a connection could not be made: the message says to what, without
/// the password.
#[derive(Debug)]
pub(crate) struct ConnectError(pub String);

impl PgConn {
    /// Connect to `url` (`postgres://user:password@host:port/database?…`,
    /// or libpq's `key=value` form).
    pub(crate) fn connect(url: &str) -> Result<PgConn, ConnectError> {
        let split = super::tls::split(url);
        let mut config: tokio_postgres::Config = split
            .url
            .parse()
            .map_err(|e| ConnectError(format!("the PostgreSQL URL cannot be read: {e}")))?;
        let tls = match split.require {
            true => Some(super::tls::connector(split.root_cert.as_ref())?),
            false => None,
        };
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("wfhost");
        }
        keep_alive(&mut config);
        let notified = Arc::new(Notified::default());
        let client = open_client(&config, tls.as_ref(), &notified)?;
        Ok(PgConn {
            client: RefCell::new(client),
            config,
            tls,
            in_tx: Cell::new(false),
            statements: RefCell::new(HashMap::new()),
            notified,
            listening: Cell::new(false),
            channel: Cell::new(CHANGES),
            unsynced: Cell::new(false),
        })
    }

    /// The connection, made again first if it was lost outside a
    /// transaction: for up to [`RECONNECT_FOR`] while the server comes
    /// back (a restart). Its prepared statements and `LISTEN` are gone
    /// with the old one; waiters for changes are woken (what happened
    /// meanwhile was not notified to them).
    fn live(&self) -> DbResult<std::cell::Ref<'_, Client>> {
        if !self.client.borrow().is_closed() {
            return Ok(self.client.borrow());
        }
        if self.in_tx.get() {
            return Err(DbError::Lost(
                "the connection to PostgreSQL was lost in the middle of a transaction, which was not committed".into(),
            ));
        }
        tracing::warn!("the connection to PostgreSQL was lost; connecting again");
        let started = std::time::Instant::now();
        let mut pause = Duration::from_millis(50);
        let client = loop {
            match open_client(&self.config, self.tls.as_ref(), &self.notified) {
                Ok(client) => break client,
                Err(e) if started.elapsed() >= RECONNECT_FOR => {
                    return Err(DbError::Lost(format!(
                        "the connection to PostgreSQL was lost and could not be made again in {} s: {}",
                        RECONNECT_FOR.as_secs(),
                        e.0
                    )));
                }
                Err(_) => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
            }
        };
        *self.client.borrow_mut() = client;
        self.statements.borrow_mut().clear();
        self.listening.set(false);
        self.notified.bump();
        Ok(self.client.borrow())
    }

    /// Whether the connection was lost (the server went away).
    pub(crate) fn is_closed(&self) -> bool {
        self.client.borrow().is_closed()
    }

    fn statement(&self, sql: &str, params: &[Param<'_>]) -> DbResult<Statement> {
        // A connection lost since the statement was prepared is made again
        // first, which forgets the statements prepared on the old one.
        drop(self.live()?);
        let types: Vec<Type> = params.iter().map(param_type).collect();
        let key = (sql.to_string(), types);
        if let Some(s) = self.statements.borrow().get(&key) {
            return Ok(s.clone());
        }
        let prepared = block_on(self.live()?.prepare_typed(&dollar_params(sql), &key.1))?;
        self.statements.borrow_mut().insert(key, prepared.clone());
        Ok(prepared)
    }

    /// `f`, and once more when the connection turned out to be gone
    /// outside a transaction (the server restarted since it was last
    /// used): the second try connects again first.
    fn once_more<T>(&self, f: impl Fn() -> DbResult<T>) -> DbResult<T> {
        match f() {
            Err(DbError::Postgres(e)) if e.is_closed() && !self.in_tx.get() => f(),
            other => other,
        }
    }

    pub(super) fn execute(&self, sql: &str, params: &[Param<'_>]) -> DbResult<usize> {
        let changed = self.once_more(|| {
            let stmt = self.statement(sql, params)?;
            counters::count_statement();
            Ok(block_on(self.live()?.execute(&stmt, &values(params)))?)
        })?;
        Ok(usize::try_from(changed).unwrap_or(usize::MAX))
    }

    pub(super) fn query_row<T>(
        &self,
        sql: &str,
        params: &[Param<'_>],
        f: impl FnOnce(&Row<'_>) -> DbResult<T>,
    ) -> DbResult<Option<T>> {
        let rows = self.once_more(|| {
            let stmt = self.statement(sql, params)?;
            counters::count_statement();
            Ok(block_on(self.live()?.query(&stmt, &values(params)))?)
        })?;
        rows.first().map(|r| f(&Row::Postgres(r))).transpose()
    }

    pub(super) fn query<T>(
        &self,
        sql: &str,
        params: &[Param<'_>],
        mut f: impl FnMut(&Row<'_>) -> DbResult<T>,
    ) -> DbResult<Vec<T>> {
        let rows = self.once_more(|| {
            let stmt = self.statement(sql, params)?;
            counters::count_statement();
            Ok(block_on(self.live()?.query(&stmt, &values(params)))?)
        })?;
        rows.iter().map(|r| f(&Row::Postgres(r))).collect()
    }

    pub(crate) fn batch(&self, sql: &str) -> DbResult<()> {
        self.once_more(|| {
            counters::count_statement();
            Ok(block_on(self.live()?.batch_execute(sql))?)
        })
    }

    pub(super) fn begin_write(&self) -> DbResult<()> {
        // The notification is sent when (and only if) the transaction
        // commits; several in one transaction are one.
        let unsynced = if self.unsynced.get() {
            " SET LOCAL synchronous_commit = off;"
        } else {
            ""
        };
        self.batch(&format!(
            "BEGIN;{unsynced} SELECT pg_advisory_xact_lock({WRITE_LOCK}); NOTIFY {CHANGES}"
        ))?;
        self.in_tx.set(true);
        Ok(())
    }

    pub(crate) fn set_unsynced(&self, unsynced: bool) {
        self.unsynced.set(unsynced);
    }

    /// End the transaction without committing it (nothing to do when the
    /// connection, and with it the transaction, was lost).
    pub(super) fn rollback(&self) -> DbResult<()> {
        let was = self.in_tx.replace(false);
        if was && self.is_closed() {
            return Ok(());
        }
        self.batch("ROLLBACK")
    }

    /// How many notifications this connection counted since it started
    /// listening (write transactions committed, by any connection, this
    /// one's included; or, after [`PgConn::listen_for_run`], that run's
    /// job notifications); the first call starts listening.
    pub(crate) fn changes(&self) -> DbResult<u64> {
        if !self.listening.get() {
            self.batch(&format!("LISTEN {}", self.channel.get()))?;
            self.listening.set(true);
        }
        Ok(self.notified.count())
    }

    /// Count only the notifications that one of `run_id`'s jobs became
    /// final (instead of every commit).
    pub(crate) fn listen_for_run(&self, run_id: &str) -> DbResult<()> {
        self.notified
            .count
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1 = Some(run_id.to_string());
        self.channel.set(RUNS);
        self.listening.set(false);
        self.changes().map(drop)
    }

    /// Wait until a change after `seen` (a value of [`PgConn::changes`])
    /// is notified, at most `timeout`; whether one was.
    pub(crate) fn wait_for_change(&self, seen: u64, timeout: Duration) -> DbResult<bool> {
        self.changes()?;
        Ok(self.notified.wait(seen, timeout))
    }

    /// What this connection counts of its notifications.
    pub(crate) fn notifications(&self) -> Arc<Notified> {
        Arc::clone(&self.notified)
    }

    pub(super) fn commit(&self) -> DbResult<()> {
        let committed = self.batch("COMMIT");
        self.in_tx.set(false);
        committed?;
        counters::count_commit();
        Ok(())
    }
}

/// Connect with `config`; the connection's messages are driven on the
/// background runtime, notifications counted into `notified`.
fn open_client(
    config: &tokio_postgres::Config,
    tls: Option<&tokio_postgres_rustls::MakeRustlsConnect>,
    notified: &Arc<Notified>,
) -> Result<Client, ConnectError> {
    let runtime = runtime().map_err(ConnectError)?;
    let counter = notified.clone();
    let config = config.clone();
    let tls = tls.cloned();
    let connecting = runtime.spawn(async move {
        match tls {
            Some(tls) => {
                let (client, connection) = config.connect(tls).await?;
                drive(connection, counter);
                Ok(client)
            }
            None => {
                let (client, connection) = config.connect(NoTls).await?;
                drive(connection, counter);
                Ok::<_, tokio_postgres::Error>(client)
            }
        }
    });
    block_on(connecting)
        .map_err(|e| ConnectError(format!("connecting to PostgreSQL failed: {e}")))?
        .map_err(|e| ConnectError(describe_connect_error(&e)))
}

/// Drive `connection` on the background runtime, counting the
/// notifications it receives into `counter`.
fn drive<S, T>(mut connection: tokio_postgres::Connection<S, T>, counter: Arc<Notified>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => counter.received(n.payload()),
                Ok(_) => {}
                Err(e) => {
                    // Said (as a warning) when the connection is next
                    // needed and made again.
                    tracing::debug!(error = %super::describe(&e), "the PostgreSQL connection ended");
                    break;
                }
            }
        }
    });
}

fn param_type(p: &Param<'_>) -> Type {
    match p {
        Param::Int(_) => Type::INT8,
        Param::Real(_) => Type::FLOAT8,
        Param::Text(_) => Type::TEXT,
        Param::Blob(_) => Type::BYTEA,
    }
}

fn values<'p>(params: &'p [Param<'_>]) -> Vec<&'p (dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| -> &(dyn ToSql + Sync) {
            match p {
                Param::Int(v) => v,
                Param::Real(v) => v,
                Param::Text(v) => v,
                Param::Blob(v) => v,
            }
        })
        .collect()
}

/// A failed connection in one line: the server's own message when it sent
/// one (wrong password, no such database), else the driver's (refused,
/// timed out).
fn describe_connect_error(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("PostgreSQL refused the connection: {}", db.message()),
        None => {
            let why = super::describe(e);
            let hint = if why.contains("certificate") {
                ": name the CA that signed the server's certificate with sslrootcert=FILE in the URL"
            } else {
                ""
            };
            format!("cannot connect to PostgreSQL: {why}{hint}")
        }
    }
}
