//! The one place the store meets a database. Every module of the store
//! writes its SQL once, in the dialect both backends read (`?1`-style
//! parameters, standard SQL, `ON CONFLICT`, `RETURNING`), and runs it
//! through [`Db`]: on SQLite (the embedded default, one file in the home)
//! or on PostgreSQL (several servers sharing one database). Where the two
//! differ (JSON access, the schema's DDL), a call site names both texts
//! with [`Db::pick`].
//!
//! Values cross as [`Param`]s and come back through [`Row::get`], whose
//! conversions are the same on both: integers are 64-bit everywhere (the
//! PostgreSQL schema uses `BIGINT` for every integer column), flags are
//! integers 0/1, text is UTF-8.

mod postgres;
mod sqlite;
mod tls;

pub(crate) use postgres::{Notified, PgConn};

/// A store URL as the PostgreSQL driver reads it (wfhost's own TLS
/// parameters taken out, see `tls`).
pub(crate) fn driver_url(url: &str) -> String {
    tls::split(url).url
}

/// Which database a [`Db`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A database error, kept as the driver reported it so the store can tell
/// a busy file, a constraint and a lost connection apart.
#[derive(Debug)]
pub(crate) enum DbError {
    Sqlite(rusqlite::Error),
    Postgres(tokio_postgres::Error),
    /// A column held something other than what its reader expected.
    Conversion {
        column: usize,
        message: String,
    },
    /// A query expected to return a row returned none.
    NoRows,
    /// The connection to the database server was lost and not made again
    /// (or lost mid-transaction).
    Lost(String),
}

/// `.optional()`: a query's "no row" as None.
pub(crate) trait OptionalExtension<T> {
    fn optional(self) -> DbResult<Option<T>>;
}

impl<T> OptionalExtension<T> for DbResult<T> {
    fn optional(self) -> DbResult<Option<T>> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(DbError::NoRows) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DbError::Sqlite(e) => e.fmt(f),
            DbError::Postgres(e) => match e.as_db_error() {
                Some(db) => write!(f, "{}: {}", db.severity(), db.message()),
                None => e.fmt(f),
            },
            DbError::Conversion { column, message } => write!(f, "column {column}: {message}"),
            DbError::NoRows => f.write_str("the query returned no row"),
            DbError::Lost(why) => f.write_str(why),
        }
    }
}

impl From<rusqlite::Error> for DbError {
    fn from(e: rusqlite::Error) -> Self {
        match e {
            rusqlite::Error::QueryReturnedNoRows => DbError::NoRows,
            e => DbError::Sqlite(e),
        }
    }
}

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> Self {
        DbError::Postgres(e)
    }
}

impl DbError {
    /// A UNIQUE or PRIMARY KEY constraint refused the write.
    pub(crate) fn is_unique_violation(&self) -> bool {
        match self {
            DbError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => {
                e.code == rusqlite::ErrorCode::ConstraintViolation
            }
            DbError::Postgres(e) => {
                e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
            }
            _ => false,
        }
    }

    /// A conversion error for `column` (a row that does not decode).
    pub(crate) fn conversion(column: usize, message: impl std::fmt::Display) -> DbError {
        DbError::Conversion {
            column,
            message: message.to_string(),
        }
    }
}

/// A PostgreSQL error in one line: the server's message when it sent one,
/// else the driver's with its causes.
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return db.message().to_string();
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}

/// The connection is gone or the server cannot be reached (as opposed to
/// a statement the server refused).
pub(crate) fn is_unavailable(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    false
}

pub(crate) type DbResult<T> = Result<T, DbError>;

/// A statement parameter. Every variant carries its type, NULL included,
/// so PostgreSQL can be told each parameter's type when a statement is
/// prepared (`?1 << 32` is then `bigint << int`, never ambiguous).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Param<'a> {
    Int(Option<i64>),
    Real(Option<f64>),
    Text(Option<&'a str>),
    Blob(Option<&'a [u8]>),
}

/// A value that can be a statement parameter.
pub(crate) trait ToParam {
    fn to_param(&self) -> Param<'_>;
}

/// The NULL of a parameter's type (for `Option<T>`).
pub(crate) trait NullParam {
    fn null() -> Param<'static>;
}

macro_rules! int_param {
    ($($t:ty),*) => {$(
        impl ToParam for $t {
            fn to_param(&self) -> Param<'_> {
                Param::Int(Some(i64::try_from(*self).unwrap_or(i64::MAX)))
            }
        }
        impl NullParam for $t {
            fn null() -> Param<'static> { Param::Int(None) }
        }
    )*};
}
int_param!(i64, i32, u32, u16, u8, usize, u64);

impl ToParam for bool {
    fn to_param(&self) -> Param<'_> {
        Param::Int(Some(i64::from(*self)))
    }
}
impl NullParam for bool {
    fn null() -> Param<'static> {
        Param::Int(None)
    }
}
impl ToParam for f64 {
    fn to_param(&self) -> Param<'_> {
        Param::Real(Some(*self))
    }
}
impl NullParam for f64 {
    fn null() -> Param<'static> {
        Param::Real(None)
    }
}
impl ToParam for str {
    fn to_param(&self) -> Param<'_> {
        Param::Text(Some(self))
    }
}
impl ToParam for String {
    fn to_param(&self) -> Param<'_> {
        Param::Text(Some(self))
    }
}
impl NullParam for String {
    fn null() -> Param<'static> {
        Param::Text(None)
    }
}
impl NullParam for &str {
    fn null() -> Param<'static> {
        Param::Text(None)
    }
}
impl ToParam for [u8] {
    fn to_param(&self) -> Param<'_> {
        Param::Blob(Some(self))
    }
}
impl ToParam for Vec<u8> {
    fn to_param(&self) -> Param<'_> {
        Param::Blob(Some(self))
    }
}
impl NullParam for Vec<u8> {
    fn null() -> Param<'static> {
        Param::Blob(None)
    }
}
impl<T: ToParam + ?Sized> ToParam for &T {
    fn to_param(&self) -> Param<'_> {
        (**self).to_param()
    }
}
impl<T: NullParam> NullParam for &T {
    fn null() -> Param<'static> {
        T::null()
    }
}
impl<T: ToParam + NullParam> ToParam for Option<T> {
    fn to_param(&self) -> Param<'_> {
        match self {
            Some(v) => v.to_param(),
            None => T::null(),
        }
    }
}
impl ToParam for Param<'_> {
    fn to_param(&self) -> Param<'_> {
        *self
    }
}

/// A statement's parameters: a tuple or array of values, or `params![…]`.
pub(crate) trait Params {
    fn params(&self) -> Vec<Param<'_>>;
}

impl Params for () {
    fn params(&self) -> Vec<Param<'_>> {
        Vec::new()
    }
}
impl Params for [&dyn ToParam; 0] {
    fn params(&self) -> Vec<Param<'_>> {
        Vec::new()
    }
}
impl Params for &[&dyn ToParam] {
    fn params(&self) -> Vec<Param<'_>> {
        self.iter().map(|p| p.to_param()).collect()
    }
}
impl Params for Vec<&dyn ToParam> {
    fn params(&self) -> Vec<Param<'_>> {
        self.iter().map(|p| p.to_param()).collect()
    }
}
impl Params for &[Param<'_>] {
    fn params(&self) -> Vec<Param<'_>> {
        self.to_vec()
    }
}

macro_rules! array_params {
    ($($n:literal)*) => {$(
        impl<T: ToParam> Params for [T; $n] {
            fn params(&self) -> Vec<Param<'_>> {
                self.iter().map(|p| p.to_param()).collect()
            }
        }
    )*};
}
array_params!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);

macro_rules! tuple_params {
    ($(($($name:ident $i:tt),+))*) => {$(
        impl<$($name: ToParam),+> Params for ($($name,)+) {
            fn params(&self) -> Vec<Param<'_>> {
                vec![$(self.$i.to_param()),+]
            }
        }
    )*};
}
tuple_params! {
    (A 0)
    (A 0, B 1)
    (A 0, B 1, C 2)
    (A 0, B 1, C 2, D 3)
    (A 0, B 1, C 2, D 3, E 4)
    (A 0, B 1, C 2, D 3, E 4, F 5)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12)
}

/// `params![a, b, c]`: parameters of different types.
macro_rules! params {
    ($($v:expr),* $(,)?) => {
        &[$(&$v as &dyn $crate::db::ToParam),*] as &[&dyn $crate::db::ToParam]
    };
}
pub(crate) use params;

/// A row being read: [`Row::get`] converts a column the same way on both
/// backends.
pub(crate) enum Row<'a> {
    Sqlite(&'a rusqlite::Row<'a>),
    Postgres(&'a tokio_postgres::Row),
}

/// A column's position (only `usize`: an integer literal is one).
pub(crate) trait ColumnIndex {
    fn index(self) -> usize;
}
impl ColumnIndex for usize {
    fn index(self) -> usize {
        self
    }
}

impl Row<'_> {
    pub(crate) fn get<I: ColumnIndex, T: FromColumn>(&self, column: I) -> DbResult<T> {
        let column = column.index();
        match self {
            Row::Sqlite(r) => T::from_sqlite(r, column),
            Row::Postgres(r) => T::from_postgres(r, column),
        }
    }
}

/// What a column can be read as.
pub(crate) trait FromColumn: Sized {
    fn from_sqlite(row: &rusqlite::Row<'_>, column: usize) -> DbResult<Self>;
    fn from_postgres(row: &tokio_postgres::Row, column: usize) -> DbResult<Self>;
}

/// The connection, with what the store counts of it.
pub(crate) struct Db {
    conn: Conn,
}

enum Conn {
    Sqlite(rusqlite::Connection),
    Postgres(Box<PgConn>),
}

impl Db {
    pub(crate) fn sqlite(conn: rusqlite::Connection) -> Db {
        Db {
            conn: Conn::Sqlite(conn),
        }
    }

    pub(crate) fn postgres(conn: PgConn) -> Db {
        Db {
            conn: Conn::Postgres(Box::new(conn)),
        }
    }

    /// The PostgreSQL connection this is, borrowed.
    pub(crate) fn as_postgres(&self) -> Option<&PgConn> {
        match &self.conn {
            Conn::Postgres(c) => Some(c),
            Conn::Sqlite(_) => None,
        }
    }

    pub(crate) fn backend(&self) -> Backend {
        match self.conn {
            Conn::Sqlite(_) => Backend::Sqlite,
            Conn::Postgres(_) => Backend::Postgres,
        }
    }

    /// Whether the connection is gone (PostgreSQL's server went away; a
    /// SQLite file is never "gone").
    pub(crate) fn is_closed(&self) -> bool {
        match &self.conn {
            Conn::Sqlite(_) => false,
            Conn::Postgres(c) => c.is_closed(),
        }
    }

    /// On PostgreSQL, whether the write transactions begun from now on
    /// commit without waiting for the disk (`SET LOCAL synchronous_commit
    /// = off`); SQLite switches its connection instead.
    pub(crate) fn set_unsynced(&self, unsynced: bool) {
        if let Conn::Postgres(c) = &self.conn {
            c.set_unsynced(unsynced);
        }
    }

    /// The statement for this backend: `sqlite` or `postgres`.
    pub(crate) fn pick<'s>(&self, sqlite: &'s str, postgres: &'s str) -> &'s str {
        match self.backend() {
            Backend::Sqlite => sqlite,
            Backend::Postgres => postgres,
        }
    }

    /// The SQLite connection, for what only SQLite has (pragmas, hooks).
    pub(crate) fn as_sqlite(&self) -> Option<&rusqlite::Connection> {
        match &self.conn {
            Conn::Sqlite(c) => Some(c),
            Conn::Postgres(_) => None,
        }
    }

    /// A number that changes when any connection commits a write
    /// transaction: SQLite's `data_version` (other connections' commits),
    /// PostgreSQL's count of the store's change notifications.
    pub(crate) fn data_version(&self) -> DbResult<i64> {
        match &self.conn {
            Conn::Sqlite(c) => c
                .query_row("PRAGMA data_version", [], |r| r.get(0))
                .map_err(DbError::from),
            Conn::Postgres(c) => Ok(c.changes()? as i64),
        }
    }

    /// On PostgreSQL, wait until a commit after [`Db::data_version`]
    /// `seen` is notified, at most `timeout`: Some(whether one was). None
    /// on SQLite, which cannot be waited on (the home's doorbells are).
    pub(crate) fn wait_for_change(
        &self,
        seen: i64,
        timeout: std::time::Duration,
    ) -> DbResult<Option<bool>> {
        match &self.conn {
            Conn::Sqlite(_) => Ok(None),
            Conn::Postgres(c) => c.wait_for_change(seen as u64, timeout).map(Some),
        }
    }

    /// On PostgreSQL, tell the processes waiting for `run_id`'s jobs that
    /// one became final (inside the transaction that makes it so: sent at
    /// its commit); nothing on SQLite, whose doorbells do it.
    pub(crate) fn notify_run(&self, run_id: &str) -> DbResult<()> {
        match &self.conn {
            Conn::Sqlite(_) => Ok(()),
            Conn::Postgres(c) => c
                .execute(
                    &format!("SELECT pg_notify('{}', ?1)", postgres::RUNS),
                    &[Param::Text(Some(run_id))],
                )
                .map(drop),
        }
    }

    /// On PostgreSQL, make [`Db::data_version`] and
    /// [`Db::wait_for_change`] count only `run_id`'s job notifications;
    /// false on SQLite.
    pub(crate) fn listen_for_run(&self, run_id: &str) -> DbResult<bool> {
        match &self.conn {
            Conn::Sqlite(_) => Ok(false),
            Conn::Postgres(c) => c.listen_for_run(run_id).map(|()| true),
        }
    }

    /// Run a statement; the number of rows it changed.
    pub(crate) fn execute(&self, sql: &str, params: impl Params) -> DbResult<usize> {
        let params = params.params();
        match &self.conn {
            Conn::Sqlite(c) => sqlite::execute(c, sql, &params),
            Conn::Postgres(c) => c.execute(sql, &params),
        }
    }

    /// The first row `sql` returns, read by `f`; [`DbError::NoRows`] when
    /// it returns none (`.optional()` makes that None).
    pub(crate) fn query_row<T>(
        &self,
        sql: &str,
        params: impl Params,
        f: impl FnOnce(&Row<'_>) -> DbResult<T>,
    ) -> DbResult<T> {
        let params = params.params();
        let first = match &self.conn {
            Conn::Sqlite(c) => sqlite::query_row(c, sql, &params, f),
            Conn::Postgres(c) => c.query_row(sql, &params, f),
        };
        first?.ok_or(DbError::NoRows)
    }

    /// Every row `sql` returns, each read by `f`.
    pub(crate) fn query_all<T>(
        &self,
        sql: &str,
        params: impl Params,
        f: impl FnMut(&Row<'_>) -> DbResult<T>,
    ) -> DbResult<Vec<T>> {
        let params = params.params();
        match &self.conn {
            Conn::Sqlite(c) => sqlite::query(c, sql, &params, f),
            Conn::Postgres(c) => c.query(sql, &params, f),
        }
    }

    /// A statement to run (prepared and cached by the backend when it runs).
    pub(crate) fn prepare_cached(&self, sql: &str) -> DbResult<Stmt<'_>> {
        Ok(Stmt {
            db: self,
            sql: sql.to_string(),
        })
    }

    /// Statements without parameters, run in order (schema scripts).
    pub(crate) fn execute_batch(&self, sql: &str) -> DbResult<()> {
        match &self.conn {
            Conn::Sqlite(c) => c.execute_batch(sql).map_err(DbError::from),
            Conn::Postgres(c) => c.batch(sql),
        }
    }

    /// Begin a write transaction that holds the store's write lock from its
    /// first statement: SQLite's `BEGIN IMMEDIATE`; on PostgreSQL a
    /// transaction holding the store's advisory write lock, so writers
    /// are serialized across every server exactly as SQLite serializes
    /// the processes sharing its file, and a check-then-write (a branch's
    /// head, a job's lease) sees no concurrent writer.
    pub(crate) fn begin(&self) -> DbResult<Tx<'_>> {
        match &self.conn {
            // Cached: a step's append parses no SQL.
            Conn::Sqlite(c) => sqlite::execute(c, "BEGIN IMMEDIATE", &[]).map(drop)?,
            Conn::Postgres(c) => c.begin_write()?,
        }
        Ok(Tx {
            db: self,
            done: false,
        })
    }
}

/// A write transaction: committed by [`Tx::commit`], rolled back when
/// dropped without it.
pub(crate) struct Tx<'a> {
    db: &'a Db,
    done: bool,
}

impl std::ops::Deref for Tx<'_> {
    type Target = Db;
    fn deref(&self) -> &Db {
        self.db
    }
}

impl Tx<'_> {
    pub(crate) fn commit(mut self) -> DbResult<()> {
        self.done = true;
        match &self.db.conn {
            Conn::Sqlite(c) => sqlite::execute(c, "COMMIT", &[])
                .map(drop)
                .inspect_err(|_| {
                    // A failed COMMIT leaves SQLite's transaction open.
                    let _ = c.execute_batch("ROLLBACK");
                }),
            Conn::Postgres(c) => c.commit(),
        }
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let rolled = match &self.db.conn {
            Conn::Sqlite(c) => c.execute_batch("ROLLBACK").map_err(DbError::from),
            Conn::Postgres(c) => c.rollback(),
        };
        // (A rollback after the connection was lost has nothing to undo.)
        if let Err(e) = rolled {
            tracing::warn!(error = %e, "rolling back a store transaction failed");
        }
    }
}

/// A statement of a [`Db`], used as rusqlite's cached statements are.
pub(crate) struct Stmt<'a> {
    db: &'a Db,
    sql: String,
}

impl Stmt<'_> {
    pub(crate) fn execute(&mut self, params: impl Params) -> DbResult<usize> {
        self.db.execute(&self.sql, params)
    }

    pub(crate) fn query_row<T>(
        &mut self,
        params: impl Params,
        f: impl FnOnce(&Row<'_>) -> DbResult<T>,
    ) -> DbResult<T> {
        self.db.query_row(&self.sql, params, f)
    }

    /// Every row, each read by `f` (read whole, then iterated).
    pub(crate) fn query_map<T>(
        &mut self,
        params: impl Params,
        f: impl FnMut(&Row<'_>) -> DbResult<T>,
    ) -> DbResult<std::vec::IntoIter<DbResult<T>>> {
        let rows = self.db.query_all(&self.sql, params, f)?;
        Ok(rows.into_iter().map(Ok).collect::<Vec<_>>().into_iter())
    }
}

// ---- conversions ---------------------------------------------------------

fn pg_int(row: &tokio_postgres::Row, column: usize) -> DbResult<Option<i64>> {
    use tokio_postgres::types::Type;
    let ty = row
        .columns()
        .get(column)
        .ok_or_else(|| DbError::conversion(column, "no such column"))?
        .type_()
        .clone();
    let got = match ty {
        Type::INT8 => row.try_get::<_, Option<i64>>(column),
        Type::INT4 => row
            .try_get::<_, Option<i32>>(column)
            .map(|v| v.map(i64::from)),
        Type::INT2 => row
            .try_get::<_, Option<i16>>(column)
            .map(|v| v.map(i64::from)),
        Type::BOOL => row
            .try_get::<_, Option<bool>>(column)
            .map(|v| v.map(i64::from)),
        other => {
            return Err(DbError::conversion(
                column,
                format!("an integer was expected, the column is {other}"),
            ));
        }
    };
    got.map_err(DbError::from)
}

fn out_of_range(column: usize, v: i64) -> DbError {
    DbError::conversion(column, format!("{v} is out of range"))
}

fn required<T>(column: usize, v: Option<T>) -> DbResult<T> {
    v.ok_or_else(|| DbError::conversion(column, "NULL where a value was expected"))
}

macro_rules! int_column {
    ($($t:ty),*) => {$(
        impl FromColumn for $t {
            fn from_sqlite(row: &rusqlite::Row<'_>, column: usize) -> DbResult<Self> {
                let v: i64 = row.get(column)?;
                <$t>::try_from(v).map_err(|_| out_of_range(column, v))
            }
            fn from_postgres(row: &tokio_postgres::Row, column: usize) -> DbResult<Self> {
                let v = required(column, pg_int(row, column)?)?;
                <$t>::try_from(v).map_err(|_| out_of_range(column, v))
            }
        }
        impl FromColumn for Option<$t> {
            fn from_sqlite(row: &rusqlite::Row<'_>, column: usize) -> DbResult<Self> {
                let v: Option<i64> = row.get(column)?;
                v.map(|v| <$t>::try_from(v).map_err(|_| out_of_range(column, v))).transpose()
            }
            fn from_postgres(row: &tokio_postgres::Row, column: usize) -> DbResult<Self> {
                pg_int(row, column)?
                    .map(|v| <$t>::try_from(v).map_err(|_| out_of_range(column, v)))
                    .transpose()
            }
        }
    )*};
}
int_column!(i64, u64, u32, i32, usize);

impl FromColumn for bool {
    fn from_sqlite(row: &rusqlite::Row<'_>, column: usize) -> DbResult<Self> {
        let v: i64 = row.get(column)?;
        Ok(v != 0)
    }
    fn from_postgres(row: &tokio_postgres::Row, column: usize) -> DbResult<Self> {
        Ok(required(column, pg_int(row, column)?)? != 0)
    }
}

impl FromColumn for Option<String> {
    fn from_sqlite(row: &rusqlite::Row<'_>, column: usize) -> DbResult<Self> {
        row.get(column).map_err(DbError::from)
    }
    fn from_postgres(row: &tokio_postgres::Row, column: usize) -> DbResult<Self> {
        row.try_get(column).map_err(DbError::from)
    }
}

impl FromColumn for String {
    fn from_sqlite(row: &rusqlite::Row<'_>, column: usize) -> DbResult<Self> {
        row.get(column).map_err(DbError::from)
    }
    fn from_postgres(row: &tokio_postgres::Row, column: usize) -> DbResult<Self> {
        required(column, row.try_get(column)?)
    }
}

impl FromColumn for Option<f64> {
    fn from_sqlite(row: &rusqlite::Row<'_>, column: usize) -> DbResult<Self> {
        row.get(column).map_err(DbError::from)
    }
    fn from_postgres(row: &tokio_postgres::Row, column: usize) -> DbResult<Self> {
        row.try_get(column).map_err(DbError::from)
    }
}

impl FromColumn for f64 {
    fn from_sqlite(row: &rusqlite::Row<'_>, column: usize) -> DbResult<Self> {
        row.get(column).map_err(DbError::from)
    }
    fn from_postgres(row: &tokio_postgres::Row, column: usize) -> DbResult<Self> {
        required(column, row.try_get(column)?)
    }
}

impl FromColumn for Vec<u8> {
    fn from_sqlite(row: &rusqlite::Row<'_>, column: usize) -> DbResult<Self> {
        row.get(column).map_err(DbError::from)
    }
    fn from_postgres(row: &tokio_postgres::Row, column: usize) -> DbResult<Self> {
        required(column, row.try_get(column)?)
    }
}

/// `sql` with `?N` parameters written `$N` (PostgreSQL's), outside quoted
/// text.
pub(crate) fn dollar_params(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut quoted = false;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted = !quoted;
                out.push(c);
            }
            '?' if !quoted && chars.peek().is_some_and(char::is_ascii_digit) => out.push('$'),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_become_dollars_outside_quotes_only() {
        assert_eq!(
            dollar_params("SELECT a FROM t WHERE b = ?1 AND c = '?2' AND d IN (?2, ?10)"),
            "SELECT a FROM t WHERE b = $1 AND c = '?2' AND d IN ($2, $10)"
        );
        assert_eq!(dollar_params("SELECT '?' || ?3"), "SELECT '?' || $3");
    }
}
