//! `wfhost mcp`: the agent-facing contract over MCP.
pub mod catalog;
pub mod error;
pub mod keys;
pub mod reply;
pub mod server;
pub mod service;
pub mod session;
pub mod tags;
pub mod text;
pub mod token;
pub mod transport;
