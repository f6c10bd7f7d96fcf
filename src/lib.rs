//! lmcp: a local tool host with an embedded Lua runtime.
//!
//! One registry, one gate, two program engines, three libraries of programs, four front doors
//! (the layers and their rules: `src/house_rules.rs`). Every tool call, whoever makes it, goes
//! through [`Host::call`] and so through the gate; handlers are private to the registry and need
//! a pass only the gate makes.
//!
//! | module       | its job                                                                  |
//! |--------------|--------------------------------------------------------------------------|
//! | [`host`]     | `Host`: config + store + registry + gate; `Host::call`, the one way in    |
//! | [`open`]     | `Host::open`: the host with every tool source (built-ins, libraries)     |
//! | [`gate`]     | the gate's stages, call context, confirmation, approvals, plans, history,|
//! |              | run journals (resume)                                                    |
//! | [`registry`] | `ToolSpec` (schema, effect, kind, profile, annotations, availability)    |
//! | [`config`]   | persisted grants, modes, roots, disabled tools and limits                |
//! | [`store`]    | paths (`LMCP_HOME` or the platform's), atomic writes, file locks          |
//! | [`script`]   | the Lua engine: sandboxed VM, limit hook, compile checks, the `tools`    |
//! |              | bridge, stdlib, the editor definitions                                   |
//! | [`library`]  | saved programs: custom tools, recipes, skills (formats, stores, tools), |
//! |              | loaded when first needed, from the library index                         |
//! | [`program`]  | `Program` (params, capabilities, steps or Lua), its scope and effect,   |
//! |              | the one check, the header, and one runner per engine                     |
//! | [`tools`]    | the built-in leaf tools: datetime, calculate, files, run_command,        |
//! |              | friction reports, workspaces and assets, `build_image_pdf`                |
//! | [`upstream`] | other MCP servers: lmcp as their client, their tools as `mcp__S__T`,    |
//! |              | started on first need, trusted for nothing they claim                    |
//! | [`front`]    | the front doors: command line, `lmcp run`, REPL, MCP server, `lmcp pdf`, |
//! |              | `door`, what they share (gated call, who answers, output), and `docs`,   |
//! |              | the text generated from the code (help, man pages, tool lists)           |
//! | [`net`]      | the one HTTP client stack (reqwest, rustls on ring, the system's roots) |
//! | [`error`]    | the one error enum, its classes and exit codes                           |
//! | [`text`]     | strings shown to people: control characters escaped                      |

#![warn(clippy::undocumented_unsafe_blocks)]

/// A line on stderr through the terminal writer (`text::terminal`): controls escaped, and a
/// stderr that cannot be written (`2>/dev/full`, a closed terminal) never turns an error report
/// into a crash (exit 101).
macro_rules! errln {
    () => {
        $crate::text::terminal::show($crate::text::terminal::Stream::Err, "\n")
    };
    ($($arg:tt)*) => {
        $crate::text::terminal::show_line(
            $crate::text::terminal::Stream::Err,
            &format!($($arg)*),
        )
    };
}

/// Text on stderr without a newline (see `errln!`).
macro_rules! errw {
    ($($arg:tt)*) => {
        $crate::text::terminal::show($crate::text::terminal::Stream::Err, &format!($($arg)*))
    };
}

/// A line on stdout through the terminal writer (see `errln!`); a closed stdout ends the
/// process quietly with exit 0.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::text::terminal::show_line(
            $crate::text::terminal::Stream::Out,
            &format!($($arg)*),
        )
    };
}

pub mod config;
pub mod error;
pub mod front;
pub mod gate;
pub mod host;
#[cfg(test)]
mod house_rules;
pub mod library;
pub mod net;
pub mod open;
pub mod program;
pub mod registry;
pub mod script;
pub mod store;
pub mod text;
pub mod tools;
pub mod upstream;

pub use error::{Error, Result};
pub use gate::{CallContext, CallRequest, ConfirmMode, Origin, Outcome};
pub use host::{Host, HostOptions};
