//! The wfhost home: where the run store, the secrets, the installed
//! plugins, the locks and the home's configuration live (`--home`, else
//! `WFHOST_HOME`, else the user's data directory).

use std::path::{Path, PathBuf};

use wfhost_protocol::AppError;
use wfhost_store::{Durability, HomeConfig, Store};

/// A home, resolved, with how durably its store commits.
#[derive(Debug, Clone)]
pub struct Home {
    pub dir: PathBuf,
    pub durability: Durability,
}

impl Home {
    /// The home `given` names, else the default one.
    pub fn resolve(given: Option<&Path>, durability: Durability) -> Result<Home, AppError> {
        let dir = wfhost_store::resolve_home(given).map_err(crate::store_error)?;
        Ok(Home { dir, durability })
    }

    /// Its store, created if need be.
    pub fn store(&self) -> Result<Store, AppError> {
        Store::open(&self.dir, self.durability).map_err(crate::store_error)
    }

    /// Its store, which must exist (no run was ever recorded otherwise).
    pub fn existing_store(&self) -> Result<Store, AppError> {
        Store::open_existing_with(&self.dir, self.durability).map_err(crate::store_error)
    }

    /// Its configuration (`config.toml`: retention, …).
    pub fn config(&self) -> Result<HomeConfig, AppError> {
        HomeConfig::load(&self.dir).map_err(|e| AppError::bad_input(e).at("config.toml"))
    }
}
