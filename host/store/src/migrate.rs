//! Moving a store to another backend (`wfhost store migrate --to URL`):
//! every table copied row for row inside one transaction of the target,
//! then read back and compared with what was read (row counts and a
//! SHA-256 over each table's rows) before that transaction commits. The
//! source is held under its write lock throughout, so nothing is written
//! to it meanwhile; a target that holds anything already is refused.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::db::{Db, DbError, Param};
use crate::{Backend, Store, StoreError};

/// A column's kind in both schemas.
#[derive(Clone, Copy)]
enum Kind {
    Int,
    Text,
}

/// A table: its name, its columns (`name:i` integer, `name:t` text) and
/// its key when it is one integer column (read in pages by it; the other
/// tables are small and sorted in memory).
struct Table {
    name: &'static str,
    columns: &'static str,
    int_key: Option<&'static str>,
    /// An identity column whose sequence must follow the copied ids.
    identity: Option<&'static str>,
}

const fn table(
    name: &'static str,
    columns: &'static str,
    int_key: Option<&'static str>,
    identity: Option<&'static str>,
) -> Table {
    Table {
        name,
        columns,
        int_key,
        identity,
    }
}

/// Every table of schema 9, parents before children.
const TABLES: &[Table] = &[
    table("definitions", "hash:t workflow_id:t body:t", None, None),
    table(
        "runs",
        "num:i id:t workflow_id:t workflow_hash:t manifest:t workspace:t created_at:i",
        Some("num"),
        Some("num"),
    ),
    table(
        "events",
        "key:i run:i branch:i parent:i at:i kind:t body:t snapshot:t",
        Some("key"),
        None,
    ),
    table(
        "jobs",
        "id:i run:i branch:i step:i lane:t node:t block:t requires:t request:t state:t attempt:i token:t agent:t expires_at:i result:t response:t created_at:i",
        Some("id"),
        Some("id"),
    ),
    table(
        "job_events",
        "id:i job:i at:i kind:t attempt:i agent:t detail:t",
        Some("id"),
        Some("id"),
    ),
    table(
        "job_telemetry",
        "id:i job:i attempt:i at:i body:t",
        Some("id"),
        Some("id"),
    ),
    table(
        "mcp_acks",
        "run:i snapshot:i attempt:i branch:i first_seq:i digest:t response:t at:i",
        None,
        None,
    ),
    table(
        "run_sessions",
        "run:i session:t source:t git_branch:t",
        Some("run"),
        None,
    ),
    table("timers", "run:i branch:i due_at:i", None, None),
    table(
        "served_runs",
        "run:i takeovers:i taken_at:i",
        Some("run"),
        None,
    ),
    table(
        "schedules",
        "name:t cron:t tz:t workflow:t workspace:t inputs:t overlap:t catch_up:i paused:i created_at:i next_tick:i missed:i",
        None,
        None,
    ),
    table(
        "schedule_ticks",
        "schedule:t tick:i manual:i state:t run_id:t reason:t at:i",
        None,
        None,
    ),
    table(
        "hooks",
        "name:t action:t workflow:t workspace:t format:t secret:t mapping:t inputs:t window_s:i created_at:i",
        None,
        None,
    ),
    table(
        "hook_deliveries",
        "hook:t delivery:t run_id:t state:t at:i",
        None,
        None,
    ),
    table(
        "notify_targets",
        "name:t url:t secret:t format:t events:t workflow:t created_at:i",
        None,
        None,
    ),
    table(
        "notifications",
        "id:i target:t delivery:t event:t run_id:t body:t state:t attempts:i next_at:i last_error:t created_at:i",
        Some("id"),
        Some("id"),
    ),
];

/// Rows read at a time from a table keyed by one integer.
const PAGE: i64 = 2_000;

/// What was copied of one table, checked on both sides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TableCopy {
    pub table: &'static str,
    pub rows: u64,
    /// `sha256:<hex>` over the table's rows in key order (as read from the
    /// source, and again from the target).
    pub digest: String,
}

/// One row as read: each column an integer or text, or NULL.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Value {
    Int(Option<i64>),
    Text(Option<String>),
}

impl Value {
    fn param(&self) -> Param<'_> {
        match self {
            Value::Int(v) => Param::Int(*v),
            Value::Text(v) => Param::Text(v.as_deref()),
        }
    }

    /// A byte string that says the value and nothing else (the digest's).
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Value::Int(None) | Value::Text(None) => out.push(b'N'),
            Value::Int(Some(v)) => out.extend_from_slice(format!("I{v};").as_bytes()),
            Value::Text(Some(t)) => {
                out.extend_from_slice(format!("T{}:", t.len()).as_bytes());
                out.extend_from_slice(t.as_bytes());
            }
        }
    }
}

fn columns(table: &Table) -> Vec<(&'static str, Kind)> {
    table
        .columns
        .split(' ')
        .map(|c| {
            let (name, kind) = c.split_once(':').expect("name:kind");
            (name, if kind == "i" { Kind::Int } else { Kind::Text })
        })
        .collect()
}

fn names(table: &Table) -> String {
    columns(table)
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

fn read_row(row: &crate::db::Row<'_>, kinds: &[(&str, Kind)]) -> Result<Vec<Value>, DbError> {
    kinds
        .iter()
        .enumerate()
        .map(|(i, (_, kind))| match kind {
            Kind::Int => row.get(i).map(Value::Int),
            Kind::Text => row.get(i).map(Value::Text),
        })
        .collect()
}

/// Every row of `table` in key order, handed to `each` a page at a time.
fn read_table(
    db: &Db,
    table: &Table,
    mut each: impl FnMut(Vec<Vec<Value>>) -> Result<(), DbError>,
) -> Result<(), DbError> {
    let kinds = columns(table);
    let cols = names(table);
    let Some(key) = table.int_key else {
        let mut rows = db.query_all(&format!("SELECT {cols} FROM {}", table.name), (), |r| {
            read_row(r, &kinds)
        })?;
        rows.sort();
        return each(rows);
    };
    let key_at = kinds
        .iter()
        .position(|(n, _)| *n == key)
        .expect("key column");
    let sql = format!(
        "SELECT {cols} FROM {} WHERE {key} > ?1 ORDER BY {key} LIMIT {PAGE}",
        table.name
    );
    let mut after = i64::MIN;
    loop {
        let rows = db.query_all(&sql, (after,), |r| read_row(r, &kinds))?;
        let Some(last) = rows.last() else {
            return Ok(());
        };
        after = match &last[key_at] {
            Value::Int(Some(k)) => *k,
            _ => return Err(DbError::conversion(key_at, "a NULL key")),
        };
        let full = rows.len() as i64 == PAGE;
        each(rows)?;
        if !full {
            return Ok(());
        }
    }
}

/// Count and digest the rows as they come.
#[derive(Default)]
struct Tally {
    rows: u64,
    hash: Sha256,
}

impl Tally {
    fn add(&mut self, row: &[Value]) {
        let mut bytes = Vec::new();
        for v in row {
            v.encode(&mut bytes);
        }
        bytes.push(b'\n');
        self.hash.update(&bytes);
        self.rows += 1;
    }

    fn finish(self) -> (u64, String) {
        (
            self.rows,
            format!("sha256:{}", hex::encode(self.hash.finalize())),
        )
    }
}

fn tally(db: &Db, table: &Table) -> Result<(u64, String), DbError> {
    let mut t = Tally::default();
    read_table(db, table, |rows| {
        rows.iter().for_each(|r| t.add(r));
        Ok(())
    })?;
    Ok(t.finish())
}

/// Copy `table` from `from` into `to`; its count and digest as read.
fn copy_table(from: &Db, to: &Db, table: &Table) -> Result<(u64, String), DbError> {
    let count = columns(table).len();
    let placeholders = (1..=count)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let insert = format!(
        "INSERT INTO {} ({}) VALUES ({placeholders})",
        table.name,
        names(table)
    );
    let mut t = Tally::default();
    read_table(from, table, |rows| {
        for row in rows {
            t.add(&row);
            let params: Vec<Param<'_>> = row.iter().map(Value::param).collect();
            to.execute(&insert, params.as_slice())?;
        }
        Ok(())
    })?;
    if let (Some(column), Backend::Postgres) = (table.identity, to.backend()) {
        to.execute_batch(&format!(
            "SELECT setval(pg_get_serial_sequence('{0}', '{column}'), \
             (SELECT coalesce(max({column}), 0) FROM {0}) + 1, false)",
            table.name
        ))?;
    }
    Ok(t.finish())
}

impl Store {
    /// How many rows the tables a user writes hold (runs, definitions,
    /// schedules, hooks, notification targets): a store to migrate into
    /// must hold none.
    fn user_rows(&self) -> Result<i64, StoreError> {
        self.db
            .query_row(
                "SELECT (SELECT count(*) FROM runs) + (SELECT count(*) FROM definitions)
                      + (SELECT count(*) FROM schedules) + (SELECT count(*) FROM hooks)
                      + (SELECT count(*) FROM notify_targets)",
                (),
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))
    }

    /// Copy everything this store holds into `target`, which must be
    /// empty, and check it arrived whole (see the module's doc). Nothing
    /// is written to `target` unless every table matches.
    pub fn migrate_to(&mut self, target: &mut Store) -> Result<Vec<TableCopy>, StoreError> {
        let held = target.user_rows()?;
        if held > 0 {
            return Err(StoreError::Usage(format!(
                "{} already holds runs, workflows or triggers ({held} rows): migrate into an empty database",
                target.path.display()
            )));
        }
        let source_path = self.path.clone();
        let target_path = target.path.clone();
        let from_err = |e| StoreError::from_db(&source_path, e);
        let to_err = |e| StoreError::from_db(&target_path, e);
        // Both under their write locks: nothing is written to the source
        // meanwhile, and the target commits all or nothing.
        let from = self.db.begin().map_err(from_err)?;
        let to = target.db.begin().map_err(to_err)?;
        let mut copied = Vec::with_capacity(TABLES.len());
        for table in TABLES {
            let (rows, digest) = copy_table(&from, &to, table).map_err(|e| match e {
                DbError::Sqlite(_) if from.backend() == Backend::Sqlite => from_err(e),
                e => to_err(e),
            })?;
            let (back_rows, back_digest) = tally(&to, table).map_err(to_err)?;
            if (back_rows, &back_digest) != (rows, &digest) {
                return Err(StoreError::Inconsistent(format!(
                    "table {} read back differently from {} ({back_rows} rows, {back_digest}) than it was read from {} ({rows} rows, {digest}); nothing was written",
                    table.name,
                    target_path.display(),
                    source_path.display()
                )));
            }
            copied.push(TableCopy {
                table: table.name,
                rows,
                digest,
            });
        }
        to.commit().map_err(to_err)?;
        drop(from);
        Ok(copied)
    }

    /// The count and digest of every table, as [`Store::migrate_to`]
    /// reports them: to compare two stores.
    pub fn table_digests(&self) -> Result<Vec<TableCopy>, StoreError> {
        TABLES
            .iter()
            .map(|table| {
                let (rows, digest) = tally(&self.db, table).map_err(|e| self.err(e))?;
                Ok(TableCopy {
                    table: table.name,
                    rows,
                    digest,
                })
            })
            .collect()
    }
}
