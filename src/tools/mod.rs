//! The built-in leaf tools, one file per family.
//!
//! | file          | tools                                   | effect        |
//! |---------------|-----------------------------------------|---------------|
//! | `datetime.rs` | `get_datetime`                          | read          |
//! | `calculate.rs`| `calculate`                             | read          |
//! | `files.rs`    | `read_file`, `write_file`, `list_dir`   | read / write  |
//! | `command.rs`  | `run_command`                           | write (destructive, full profile) |
//! | `friction.rs` | `report_friction`, `friction_flush`, `friction_log` | send / read           |
//! | `http.rs`     | `http_request` (hosts granted by `lmcp hosts`, `---@connect`) | send         |
//! | `assets.rs`   | `workspace_*`, `asset_*`                 | read / write                      |
//! | `pdf/`        | `build_image_pdf` (layout, streaming writer, prepared planes, re-coding) | write |
//! | `search.rs`   | `tool_search` (the tools here, found by words; the `code` profile) | read |
//! | `jpeg.rs`     | (no tool) reads JPEG headers for `pdf/`  |                                   |
//! | `beneath.rs`  | (no tool) opens paths beneath the roots, never lmcp's own folders |          |

pub mod assets;
pub mod beneath;
pub mod calculate;
pub mod command;
pub mod datetime;
pub mod files;
pub mod friction;
pub mod http;
pub mod jpeg;
pub mod pdf;
pub mod search;

use crate::error::Result;
use crate::registry::Registry;

/// Registers every built-in tool.
pub fn register_builtins(registry: &Registry) -> Result<()> {
    registry.register_builtin(datetime::spec(), datetime::handler())?;
    registry.register_builtin(calculate::spec(), calculate::handler())?;
    registry.register_builtin(files::read_spec(), files::read_handler())?;
    registry.register_builtin(files::write_spec(), files::write_handler())?;
    registry.register_builtin(files::list_spec(), files::list_handler())?;
    registry.register_builtin(command::spec(), command::handler_fn())?;
    registry.register_builtin(friction::spec(), friction::handler_fn())?;
    registry.register_builtin(friction::flush_spec(), friction::flush_handler())?;
    registry.register_builtin(friction::log_spec(), friction::log_handler())?;
    registry.register_builtin(http::spec(), http::handler_fn())?;
    registry.register_builtin(pdf::spec(), pdf::handler_fn())?;
    registry.register_builtin(search::spec(), search::handler())?;
    for (spec, handler) in assets::tools() {
        registry.register_builtin(spec, handler)?;
    }
    Ok(())
}
