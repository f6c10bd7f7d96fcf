//! Opening a host: the one place that knows every tool source and wires them into a [`Host`].
//!
//! The host itself (config, store, registry, gate) knows no tool: the built-in tools and the
//! libraries' authoring tools are registered on first need, and the saved programs and other
//! MCP servers' tools load when first needed, from here. So `host` stands below `tools` and `library`, which build on it.

use std::sync::Arc;

use crate::error::Result;
use crate::host::{Host, HostOptions};
use crate::registry::Registry;
use crate::store::Paths;

/// The built-in tools and the libraries' authoring tools: what every host starts with,
/// registered on first need (see [`Registry::with_builtins`]).
pub fn builtin_registry() -> Result<Registry> {
    Ok(Registry::with_builtins(|registry| {
        crate::tools::register_builtins(registry)?;
        crate::library::register_tools(registry)
    }))
}

impl Host {
    /// Opens the host on these paths with the built-in tools registered.
    pub fn open(paths: Paths) -> Result<Arc<Host>> {
        Host::open_with(paths, HostOptions::default())
    }

    /// Opens the host with options.
    pub fn open_with(paths: Paths, options: HostOptions) -> Result<Arc<Host>> {
        Host::open_prepared(paths, options, builtin_registry()?)
    }

    /// Opens the host on a registry [`builtin_registry`] made (its built-in tools are
    /// registered on first need).
    pub fn open_prepared(
        paths: Paths,
        options: HostOptions,
        registry: Registry,
    ) -> Result<Arc<Host>> {
        let host = Host::new(paths, options, registry);
        crate::library::recover(&host);
        let host = Arc::new(host);
        crate::upstream::attach(&host);
        // the saved programs and other servers' tools load when first needed: a script that
        // calls only built-in tools never reads the library (see `Registry::defer`)
        let weak = Arc::downgrade(&host);
        host.registry().defer(move || {
            if let Some(host) = weak.upgrade() {
                crate::library::load_all(&host);
                crate::upstream::load_all(&host);
            }
        });
        for w in host.unknown_grant_keys() {
            host.warn(w);
        }
        Ok(host)
    }
}
