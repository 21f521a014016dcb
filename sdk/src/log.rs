//! Logging into the block's log.
//!
//! Inside the host, lines go through the `wfhost:plugin/log` import. Off-wasm
//! (a plugin's native unit tests) they go to stderr, so plugin logic can be
//! tested with plain `cargo test`.

use crate::bindings::worker::wfhost::plugin::log::Level;

fn emit(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    crate::bindings::worker::wfhost::plugin::log::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[{level:?}] {message}");
}

pub fn trace(message: impl AsRef<str>) {
    emit(Level::Trace, message.as_ref());
}
pub fn debug(message: impl AsRef<str>) {
    emit(Level::Debug, message.as_ref());
}
pub fn info(message: impl AsRef<str>) {
    emit(Level::Info, message.as_ref());
}
pub fn warn(message: impl AsRef<str>) {
    emit(Level::Warn, message.as_ref());
}
pub fn error(message: impl AsRef<str>) {
    emit(Level::Error, message.as_ref());
}
