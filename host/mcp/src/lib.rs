//! `wfhost mcp`: the agent-facing contract over MCP.
pub mod keys;
pub mod token;
