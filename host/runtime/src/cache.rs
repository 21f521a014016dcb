//! Compiled components on disk.
//!
//! Compiling a component with Cranelift takes tens of milliseconds; loading
//! a precompiled one takes well under one. Entries are keyed by the SHA-256
//! of the component bytes and a hash of everything that makes compiled code
//! compatible (wasmtime version, engine settings, target), so a changed
//! plugin, a new wasmtime or new settings never reuse stale code.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Where a loaded component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Deserialized from the disk cache: no compilation.
    Hit,
    /// Compiled now (and stored, when the cache is enabled).
    Compiled,
}

/// Counters for tests and diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub compiles: u64,
}

pub struct ComponentCache {
    dir: Option<PathBuf>,
    engine_key: String,
    hits: AtomicU64,
    compiles: AtomicU64,
}

impl ComponentCache {
    pub fn new(engine: &Engine, dir: Option<PathBuf>) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        ComponentCache {
            dir,
            engine_key: format!("{:016x}", hasher.finish()),
            hits: AtomicU64::new(0),
            compiles: AtomicU64::new(0),
        }
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            compiles: self.compiles.load(Ordering::Relaxed),
        }
    }

    /// The SHA-256 digest of a component, hex.
    pub fn digest(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    fn entry(&self, digest: &str) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        Some(dir.join(format!("{digest}-{}.cwasm", self.engine_key)))
    }

    /// Load a component, from the cache when possible.
    pub fn load(
        &self,
        engine: &Engine,
        bytes: &[u8],
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let digest = Self::digest(bytes);
        let entry = self.entry(&digest);
        if let Some(path) = &entry
            && path.is_file()
        {
            // SAFETY: entries are written only by `store` below, from
            // `Component::serialize` of this engine configuration (the key
            // includes its compatibility hash); wasmtime still validates the
            // header and refuses incompatible or truncated artifacts, in
            // which case we recompile.
            match unsafe { Component::deserialize_file(engine, path) } {
                Ok(component) => {
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    return Ok((component, CacheOutcome::Hit));
                }
                Err(_) => {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
        let component = Component::from_binary(engine, bytes)?;
        self.compiles.fetch_add(1, Ordering::Relaxed);
        if let Some(path) = &entry {
            // A cache that cannot be written only costs a recompile later.
            let _ = store(path, &component);
        }
        Ok((component, CacheOutcome::Compiled))
    }
}

fn store(path: &Path, component: &Component) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let bytes = component.serialize().map_err(std::io::Error::other)?;
    // Write then rename, so a concurrent reader never sees a partial file.
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, &bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
