//! The wasm guest components built from this workspace: wfhost's first-party
//! plugins (embedded in the `wfhost` binary) and the guests used by tests.
//!
//! `build.rs` compiles them for `wasm32-wasip2`; nothing else needs a
//! separate plugin build step.

include!(concat!(env!("OUT_DIR"), "/guests.rs"));

pub mod wasm_target;
