//! [`super::Db`] on SQLite: cached prepared statements, parameters bound by
//! position.

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ToSql};

use super::{DbResult, Param, Row};

impl ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match *self {
            Param::Int(Some(v)) => ValueRef::Integer(v),
            Param::Real(Some(v)) => ValueRef::Real(v),
            Param::Text(Some(v)) => ValueRef::Text(v.as_bytes()),
            Param::Blob(Some(v)) => ValueRef::Blob(v),
            Param::Int(None) | Param::Real(None) | Param::Text(None) | Param::Blob(None) => {
                ValueRef::Null
            }
        }))
    }
}

pub(super) fn execute(conn: &Connection, sql: &str, params: &[Param<'_>]) -> DbResult<usize> {
    let mut stmt = conn.prepare_cached(sql)?;
    Ok(stmt.execute(rusqlite::params_from_iter(params.iter()))?)
}

pub(super) fn query_row<T>(
    conn: &Connection,
    sql: &str,
    params: &[Param<'_>],
    f: impl FnOnce(&Row<'_>) -> DbResult<T>,
) -> DbResult<Option<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(rusqlite::params_from_iter(params.iter()))?;
    match rows.next()? {
        Some(row) => f(&Row::Sqlite(row)).map(Some),
        None => Ok(None),
    }
}

pub(super) fn query<T>(
    conn: &Connection,
    sql: &str,
    params: &[Param<'_>],
    mut f: impl FnMut(&Row<'_>) -> DbResult<T>,
) -> DbResult<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(rusqlite::params_from_iter(params.iter()))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(f(&Row::Sqlite(row))?);
    }
    Ok(out)
}
