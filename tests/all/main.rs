//! The integration tests, one binary (`cargo test --test all`): one module per area, sharing
//! the helpers in `tests/common`. One binary links mlua, rmcp, hyper and image once, where a
//! binary per file linked them once each. Run one area with a filter on its module path, e.g.
//! `cargo test --test all http::`.
//!
//! The other integration test binaries: `tests/fuzz.rs` (property tests of the parsers, run at
//! full strength by `.ci/run`) and `tests/interop` (cross-checks against other implementations,
//! behind the `interop` feature).

#[path = "../common/mod.rs"]
mod common;

mod assets;
mod call;
mod cli;
mod complete;
mod custom_tools;
mod docs;
mod doors;
mod friction;
mod gate;
mod hostile;
mod http;
mod lua;
mod mcp_client;
mod memory;
mod params;
mod pdf;
mod protect;
mod readme;
mod recipes;
mod registry;
#[cfg(unix)]
mod repl;
mod run;
#[cfg(unix)]
mod run_terminal;
mod saving;
mod script;
mod skills;
mod store;
mod terminal;
mod types;
mod upstream;
mod web;
