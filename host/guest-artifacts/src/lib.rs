//! The wasm guest components built from this workspace: wfhost's first-party
//! plugins (embedded in the `wfhost` binary) and the guests used by tests.
//!
//! `build.rs` compiles them for `wasm32-wasip2`; nothing else needs a
//! separate plugin build step.

include!(concat!(env!("OUT_DIR"), "/guests.rs"));

pub mod wasm_target;

/// `bytes` with every `from` replaced by `to` (same length): for tests, a
/// guest turned into one that targets another contract version
/// (`wfhost:plugin/block-worker@0.1.0` → `@9.9.9`) without a toolchain.
pub fn patched(bytes: &[u8], from: &str, to: &str) -> Vec<u8> {
    assert_eq!(from.len(), to.len(), "a patch keeps the length");
    let mut out = bytes.to_vec();
    let mut at = 0;
    while let Some(i) = out[at..]
        .windows(from.len())
        .position(|w| w == from.as_bytes())
    {
        out[at + i..at + i + to.len()].copy_from_slice(to.as_bytes());
        at += i + to.len();
    }
    out
}
