//! Engine commands and the grammar of wfhost's default action handler.
//!
//! This crate is tiny and dependency-free on purpose: it is compiled into
//! the engine core (for static manifest checks and command execution) and
//! into the `actions-core` WebAssembly plugin (which interprets actions), so
//! the two can never disagree about what `JUMP:review` means.

pub mod command;
pub mod grammar;

/// Node and block names: letters, digits, `_` and `-`. The dot is reserved
/// for `node.block` addresses.
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}
