//! The vidforge binary's library: the command line ([`cli`]) and the wiring ([`app`]) of the
//! domain (`vidforge_core`), the HTTP side (`vidforge_http`) and the MCP front (`vidforge_mcp`)
//! into one server. `vidforge bench` and `vidforge load` are `vidforge_bench`'s.

pub mod app;
pub mod cli;
