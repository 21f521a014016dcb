//! Content addressing: `sha256:<hex>` digests and blobs that carry theirs.

use sha2::{Digest, Sha256};

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The hex part of a checked `sha256:` digest.
pub fn hex_of(digest: &str) -> Result<&str, String> {
    wfhost_core::manifest::plugin_ref::check_digest(digest)?;
    Ok(&digest["sha256:".len()..])
}

/// Bytes and their digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    pub bytes: Vec<u8>,
    pub digest: String,
}

impl Blob {
    pub fn new(bytes: Vec<u8>) -> Blob {
        let digest = sha256(&bytes);
        Blob { bytes, digest }
    }
}
