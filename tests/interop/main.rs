//! Cross-checks against implementations nobody here wrote, one binary behind the `interop`
//! feature (`cargo test --features interop --test interop`, the interop step of `.ci/run`,
//! which installs what they need):
//!
//! - `mcp`: `lmcp serve` driven by the official Python SDK client (`tests/mcp/*.py`) and the
//!   TypeScript SDK clients (`tests/interop/ts`);
//! - `editors`: EmmyLua's `emmylua_check` on the shipped Lua with the definitions `lmcp types`
//!   writes;
//! - `upstream`: lmcp as the client of the MCP project's reference "everything" server (npm,
//!   pinned), its tools called through `lmcp call` and `lmcp serve`;
//! - `inspector`: the MCP Inspector's CLI listing `lmcp serve`'s prompts and resources;
//! - `pdf`: the PDF tests of `tests/all/pdf.rs`, where with this feature every page rendered
//!   with hayro is also rendered by poppler's `pdftoppm`, and the two must agree.

#[path = "../common/mod.rs"]
mod common;

mod editors;
mod inspector;
mod mcp;
#[path = "../all/pdf.rs"]
mod pdf;
mod upstream;
