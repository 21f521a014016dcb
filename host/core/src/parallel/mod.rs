//! Parallel blocks: `fan_out` runs a block's lanes concurrently, each with
//! its own step index, and resumes unfinished ones; `fan_in` decides which
//! lane's changes reach the main workspace under each merge strategy, finds
//! conflicts and opens the fail-on-conflict gate; `items` reads the list
//! a block over a list fans out over. The host side of lanes
//! (their workspaces) is `wfhost_exec::lanes`.

pub mod fan_in;
pub mod fan_out;
pub mod items;
