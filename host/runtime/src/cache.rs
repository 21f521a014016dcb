//! Compiled components on disk.
//!
//! Compiling a component with Cranelift takes tens of milliseconds; loading
//! a precompiled one takes well under one. Entries are keyed by the SHA-256
//! of the component bytes and a hash of everything that makes compiled code
//! compatible (wasmtime version, engine settings, target), so a changed
//! plugin, a new wasmtime or new settings never reuse stale code.
//!
//! A compiled entry is native code: whoever can write it can run code in
//! the host. So every entry carries an integrity record, an HMAC-SHA256 of
//! its bytes bound to the component digest and the engine key, under a
//! secret key of this user ([`key`]). The record is checked on the bytes in
//! memory before they are handed to wasmtime; an entry without a valid
//! record — written by anyone who does not hold the key, or copied from
//! another plugin's entry — is never deserialized: the component is
//! compiled again and the entry rewritten ([`CacheOutcome::Replaced`]).

mod key;
mod mac;

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

pub use key::KEY_FILE;

/// The first bytes of every entry: the format, then the 32-byte record.
const MAGIC: &[u8] = b"wfhost-cwasm-1\n";
const MAC_LEN: usize = 32;

/// Where a loaded component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Deserialized from the disk cache, its integrity record verified: no
    /// compilation.
    Hit,
    /// Compiled now, there being no entry (and stored, when the cache is
    /// enabled).
    Compiled,
    /// An entry was there but failed its integrity check (or could not be
    /// loaded): it was not used; the component was compiled now and the
    /// entry rewritten.
    Replaced,
}

/// Counters for tests and diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub compiles: u64,
    /// Entries refused by the integrity check (each also counts a compile).
    pub rejected: u64,
}

pub struct ComponentCache {
    dir: Option<PathBuf>,
    engine_key: String,
    /// The secret key, read or created on first use; `None` when it cannot
    /// be (the cache is then neither read nor written).
    key: OnceLock<Option<[u8; 32]>>,
    hits: AtomicU64,
    compiles: AtomicU64,
    rejected: AtomicU64,
    /// Components this process has loaded, by digest: a second load of the
    /// same bytes (every job of a server's agent loads its run's plugins)
    /// neither reads nor verifies the compiled file again. Bounded.
    loaded: std::sync::Mutex<HashMap<String, Component>>,
}

/// The most components kept loaded in memory.
const LOADED_MAX: usize = 64;

impl ComponentCache {
    pub fn new(engine: &Engine, dir: Option<PathBuf>) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        ComponentCache {
            dir,
            engine_key: format!("{:016x}", hasher.finish()),
            key: OnceLock::new(),
            hits: AtomicU64::new(0),
            compiles: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            loaded: std::sync::Mutex::new(HashMap::new()),
        }
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Count from zero again (a cache made ahead for a runtime not yet
    /// started).
    pub(crate) fn reset_stats(&self) {
        for n in [&self.hits, &self.compiles, &self.rejected] {
            n.store(0, Ordering::Relaxed);
        }
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            compiles: self.compiles.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
        }
    }

    /// The SHA-256 digest of a component, hex.
    pub fn digest(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    /// The entry file of a component, when the cache is enabled and its
    /// key usable.
    fn entry(&self, digest: &str) -> Option<(PathBuf, &[u8; 32])> {
        let dir = self.dir.as_ref()?;
        let key = self
            .key
            .get_or_init(|| key::load_or_create(dir).ok())
            .as_ref()?;
        Some((dir.join(format!("{digest}-{}.cwasm", self.engine_key)), key))
    }

    /// The integrity record of an entry's compiled bytes.
    fn record(&self, key: &[u8; 32], digest: &str, compiled: &[u8]) -> [u8; MAC_LEN] {
        mac::hmac_sha256(
            key,
            &[
                b"wfhost compiled component\0",
                digest.as_bytes(),
                b"\0",
                self.engine_key.as_bytes(),
                b"\0",
                compiled,
            ],
        )
    }

    /// Load a component, from the cache when possible.
    pub fn load(
        &self,
        engine: &Engine,
        bytes: &[u8],
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let digest = Self::digest(bytes);
        if let Some(component) = self.loaded_lock().get(&digest) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok((component.clone(), CacheOutcome::Hit));
        }
        let (component, outcome) = self.load_uncached(engine, bytes, &digest)?;
        self.keep(digest, component.clone());
        Ok((component, outcome))
    }

    /// Load the component of `bytes` into memory from the directory,
    /// never compiling it (for a warm-up, which must not start the
    /// compiler's threads): whether it is in memory now.
    pub fn preload(&self, engine: &Engine, bytes: &[u8]) -> bool {
        let digest = Self::digest(bytes);
        if self.loaded_lock().contains_key(&digest) {
            return true;
        }
        let Some((path, key)) = self.entry(&digest) else {
            return false;
        };
        let Lookup::Verified(compiled) = self.read_verified(&path, key, &digest) else {
            return false;
        };
        let Some(component) = deserialize_verified(engine, &compiled) else {
            return false;
        };
        self.keep(digest, component);
        true
    }

    /// Keep `component` in memory under `digest` (all forgotten when full).
    fn keep(&self, digest: String, component: Component) {
        let mut loaded = self.loaded_lock();
        if loaded.len() >= LOADED_MAX {
            loaded.clear();
        }
        loaded.insert(digest, component);
    }

    fn loaded_lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Component>> {
        self.loaded.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn load_uncached(
        &self,
        engine: &Engine,
        bytes: &[u8],
        digest: &str,
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let digest = digest.to_string();
        let entry = self.entry(&digest);
        let mut outcome = CacheOutcome::Compiled;
        if let Some((path, key)) = &entry {
            match self.read_verified(path, key, &digest) {
                Lookup::Missing => {}
                Lookup::Verified(compiled) => {
                    if let Some(component) = deserialize_verified(engine, &compiled) {
                        self.hits.fetch_add(1, Ordering::Relaxed);
                        return Ok((component, CacheOutcome::Hit));
                    }
                    // wasmtime refused it (another engine's): recompiled.
                    outcome = CacheOutcome::Replaced;
                }
                Lookup::Rejected => outcome = CacheOutcome::Replaced,
            }
        }
        if outcome == CacheOutcome::Replaced {
            self.rejected.fetch_add(1, Ordering::Relaxed);
        }
        let component = Component::from_binary(engine, bytes)?;
        self.compiles.fetch_add(1, Ordering::Relaxed);
        if let Some((path, key)) = &entry {
            // A cache that cannot be written only costs a recompile later.
            let _ = self.store(path, key, &digest, &component);
        }
        Ok((component, outcome))
    }

    /// Read an entry and check its integrity record. The bytes returned are
    /// the ones checked: the file is read once.
    fn read_verified(&self, path: &Path, key: &[u8; 32], digest: &str) -> Lookup {
        let bytes = match wfhost_core::workspace::regular_file::read_all(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Lookup::Missing,
            Err(_) => return Lookup::Rejected,
        };
        let Some(rest) = bytes.strip_prefix(MAGIC) else {
            return Lookup::Rejected;
        };
        if rest.len() < MAC_LEN {
            return Lookup::Rejected;
        }
        let (recorded, compiled) = rest.split_at(MAC_LEN);
        if !mac::equal(recorded, &self.record(key, digest, compiled)) {
            return Lookup::Rejected;
        }
        Lookup::Verified(bytes)
    }

    fn store(
        &self,
        path: &Path,
        key: &[u8; 32],
        digest: &str,
        component: &Component,
    ) -> std::io::Result<()> {
        let dir = path.parent().unwrap_or(Path::new("."));
        let compiled = component.serialize().map_err(std::io::Error::other)?;
        let record = self.record(key, digest, &compiled);
        // Write then rename, so a concurrent reader never sees a partial
        // file (and a symlink planted at `path` is replaced, not followed).
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        std::io::Write::write_all(&mut tmp, MAGIC)?;
        std::io::Write::write_all(&mut tmp, &record)?;
        std::io::Write::write_all(&mut tmp, &compiled)?;
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    }
}

enum Lookup {
    Missing,
    Rejected,
    /// The whole entry file, its record verified.
    Verified(Vec<u8>),
}

/// The component of a cache file whose integrity record was verified
/// (`file`: magic, record, compiled bytes), or None when wasmtime refuses
/// it (made by an incompatible engine).
fn deserialize_verified(engine: &Engine, file: &[u8]) -> Option<Component> {
    let compiled = file.get(MAGIC.len() + MAC_LEN..)?;
    // SAFETY: `compiled` is exactly the bytes whose integrity record was
    // just verified in memory: they were written by `store` from
    // `Component::serialize` of an engine with this compatibility key
    // (bound into the record), by a holder of this user's secret key.
    // wasmtime still checks the header and refuses an incompatible
    // artifact.
    unsafe { Component::deserialize(engine, compiled) }.ok()
}
