//! The libraries of programs people and agents save: custom tools, recipes and skills. Each library stores its programs under the data directory, registers them as tools
//! and offers the authoring tools that create and delete them.

pub mod custom_tools;
pub mod recipes;
pub mod skills;

use crate::error::Result;
use crate::host::Host;
use crate::registry::Registry;

/// Registers every library's authoring tools.
pub fn register_tools(registry: &Registry) -> Result<()> {
    custom_tools::register_tools(registry)?;
    recipes::register_tools(registry)?;
    skills::register_tools(registry)
}

/// Loads every saved program as a tool; problems become warnings on the host.
pub fn load_all(host: &Host) {
    custom_tools::load_all(host);
    skills::load_all(host);
}
