//! Moving a home's runs to another store: `wfhost store migrate --to URL`
//! copies the embedded store into an empty PostgreSQL database, checked
//! table by table (`wfhost_store::Store::migrate_to`).

use std::path::{Path, PathBuf};

use wfhost_store::{Durability, Location, Store, TableCopy};

use crate::{AppError, store_error};

/// What a migration did.
#[derive(Debug)]
pub struct Migrated {
    /// The store file the runs were read from.
    pub from: PathBuf,
    /// The database they were written to (without the password).
    pub to: String,
    pub tables: Vec<TableCopy>,
    /// The home's settings file, where `store` makes the move stick.
    pub config: PathBuf,
}

/// Copy the embedded store of `home` into the PostgreSQL database `to`,
/// which must be empty (its tables are made if it has none). Refused while
/// any of the home's runs is being executed.
pub fn migrate(home: &Path, to: &str) -> Result<Migrated, AppError> {
    let target = Location::parse(to).map_err(|e| store_error(e).at("--to"))?;
    if target.is_embedded() {
        return Err(AppError::bad_input(
            "--to: give the postgres:// URL of the database to move the runs to",
        ));
    }
    let mut source = Store::open_existing_in(home, &Location::Embedded, Durability::Full)
        .map_err(store_error)?;
    for run in source.runs().map_err(store_error)? {
        if source.is_running(&run.id) {
            let pid = source
                .lock_holder(&run.id)
                .map(|p| format!(" (pid {p})"))
                .unwrap_or_default();
            return Err(AppError::busy(format!(
                "run {} is being executed{pid}: stop the home's runs and servers before moving its store",
                run.id
            )));
        }
    }
    let mut dest = Store::open_in(home, &target, Durability::Full).map_err(store_error)?;
    let tables = source.migrate_to(&mut dest).map_err(store_error)?;
    Ok(Migrated {
        from: source.path().to_path_buf(),
        to: target.to_string(),
        tables,
        config: home.join(wfhost_store::CONFIG_FILE),
    })
}
