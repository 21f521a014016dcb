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

use super::{DbResult, Param, Row, dollar_params};
use crate::counters;

/// How long connecting may take when the URL does not say
/// (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The channel every write transaction notifies on commit: what
/// [`PgConn::changes`] counts, as SQLite's `data_version` counts other
/// connections' commits.
const CHANGES: &str = "wfhost_changes";

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
    client: Client,
    statements: RefCell<HashMap<(String, Vec<Type>), Statement>>,
    /// Notifications on [`CHANGES`] received, once listening, and the
    /// condition a waiter for the next one sleeps on.
    notified: Arc<(Mutex<u64>, Condvar)>,
    listening: Cell<bool>,
}

/// Why a connection could not be made: the message says to what, without
/// the password.
#[derive(Debug)]
pub(crate) struct ConnectError(pub String);

impl PgConn {
    /// Connect to `url` (`postgres://user:password@host:port/database?…`,
    /// or libpq's `key=value` form).
    pub(crate) fn connect(url: &str) -> Result<PgConn, ConnectError> {
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| ConnectError(format!("the PostgreSQL URL cannot be read: {e}")))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("wfhost");
        }
        let runtime = runtime().map_err(ConnectError)?;
        let notified = Arc::new((Mutex::new(0u64), Condvar::new()));
        let counter = notified.clone();
        let connecting = runtime.spawn(async move {
            let (client, mut connection) = config.connect(NoTls).await?;
            // Driven by its messages, so notifications are counted as they
            // arrive.
            tokio::spawn(async move {
                let mut messages =
                    futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                while let Some(message) = messages.next().await {
                    match message {
                        Ok(AsyncMessage::Notification(_)) => {
                            let (count, changed) = &*counter;
                            *count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
                            changed.notify_all();
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(error = %e, "the PostgreSQL connection ended");
                            break;
                        }
                    }
                }
            });
            Ok::<_, tokio_postgres::Error>(client)
        });
        let client = block_on(connecting)
            .map_err(|e| ConnectError(format!("connecting to PostgreSQL failed: {e}")))?
            .map_err(|e| ConnectError(describe_connect_error(&e)))?;
        Ok(PgConn {
            client,
            statements: RefCell::new(HashMap::new()),
            notified,
            listening: Cell::new(false),
        })
    }

    /// Whether the connection was lost (the server went away).
    pub(crate) fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    fn statement(&self, sql: &str, params: &[Param<'_>]) -> DbResult<Statement> {
        let types: Vec<Type> = params.iter().map(param_type).collect();
        let key = (sql.to_string(), types);
        if let Some(s) = self.statements.borrow().get(&key) {
            return Ok(s.clone());
        }
        let prepared = block_on(self.client.prepare_typed(&dollar_params(sql), &key.1))?;
        self.statements.borrow_mut().insert(key, prepared.clone());
        Ok(prepared)
    }

    pub(super) fn execute(&self, sql: &str, params: &[Param<'_>]) -> DbResult<usize> {
        let stmt = self.statement(sql, params)?;
        counters::count_statement();
        let changed = block_on(self.client.execute(&stmt, &values(params)))?;
        Ok(usize::try_from(changed).unwrap_or(usize::MAX))
    }

    pub(super) fn query_row<T>(
        &self,
        sql: &str,
        params: &[Param<'_>],
        f: impl FnOnce(&Row<'_>) -> DbResult<T>,
    ) -> DbResult<Option<T>> {
        let stmt = self.statement(sql, params)?;
        counters::count_statement();
        let rows = block_on(self.client.query(&stmt, &values(params)))?;
        rows.first().map(|r| f(&Row::Postgres(r))).transpose()
    }

    pub(super) fn query<T>(
        &self,
        sql: &str,
        params: &[Param<'_>],
        mut f: impl FnMut(&Row<'_>) -> DbResult<T>,
    ) -> DbResult<Vec<T>> {
        let stmt = self.statement(sql, params)?;
        counters::count_statement();
        let rows = block_on(self.client.query(&stmt, &values(params)))?;
        rows.iter().map(|r| f(&Row::Postgres(r))).collect()
    }

    pub(crate) fn batch(&self, sql: &str) -> DbResult<()> {
        counters::count_statement();
        Ok(block_on(self.client.batch_execute(sql))?)
    }

    pub(super) fn begin_write(&self) -> DbResult<()> {
        // The notification is sent when (and only if) the transaction
        // commits; several in one transaction are one.
        self.batch(&format!(
            "BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK}); NOTIFY {CHANGES}"
        ))
    }

    /// How many write transactions (of any connection, this one's
    /// included) committed since this connection started listening; the
    /// first call starts listening.
    pub(crate) fn changes(&self) -> DbResult<u64> {
        if !self.listening.get() {
            self.batch(&format!("LISTEN {CHANGES}"))?;
            self.listening.set(true);
        }
        Ok(*self.notified.0.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Wait until a change after `seen` (a value of [`PgConn::changes`])
    /// is notified, at most `timeout`; whether one was.
    pub(crate) fn wait_for_change(&self, seen: u64, timeout: Duration) -> DbResult<bool> {
        self.changes()?;
        let (count, changed) = &*self.notified;
        let guard = count.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = changed
            .wait_timeout_while(guard, timeout, |n| *n == seen)
            .unwrap_or_else(|e| e.into_inner());
        Ok(*guard != seen)
    }

    pub(super) fn commit(&self) -> DbResult<()> {
        self.batch("COMMIT")?;
        counters::count_commit();
        Ok(())
    }
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
        None => format!("cannot connect to PostgreSQL: {}", super::describe(e)),
    }
}
