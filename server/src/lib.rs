//! The vidforge service: CLI, configuration, durable task store, MCP front, HTTP endpoints.
//! Only this crate knows MCP, JSON and wire types.

pub mod cli;
