//! A program's scope: the state-changing calls it may make, worked out from what it may call
//! before it runs. It is what a person is shown and what a yes then covers.

use super::ShownCall;
use crate::registry::{Annotations, Capabilities, Effect, Kind, Registry, ToolSpec};

/// What a program may do, worked out before it runs: the state-changing calls it may make.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scope {
    /// Every state-changing tool it may call, with its effect and whether it is destructive.
    pub calls: Vec<ShownCall>,
    /// Whether every tool it may call is idempotent.
    pub idempotent: bool,
    /// Whether any tool it may call reaches outside the host.
    pub open_world: bool,
    /// The hosts its requests may reach (its `---@connect` lines): shown with the calls, and
    /// a yes covers these hosts and no others.
    pub hosts: Vec<String>,
}

impl Scope {
    /// The scope of a program limited to `capabilities`. In a plan (`for_real` false) only the
    /// tools that act even in a plan (those without a preview) count.
    pub fn of(registry: &Registry, capabilities: &Capabilities, for_real: bool) -> Scope {
        let specs: Vec<ToolSpec> = match capabilities {
            Capabilities::Tools(names) => names
                .iter()
                .filter_map(|n| registry.get(n))
                .map(|t| t.spec().clone())
                .collect(),
            Capabilities::ReadOnly => Vec::new(),
            Capabilities::Unrestricted => registry.all().iter().map(|t| t.spec().clone()).collect(),
        };
        Scope {
            calls: specs
                .iter()
                .filter(|s| {
                    if s.kind == Kind::Gateway {
                        // in a plan, a gateway's own program is a plan too: worked out (and
                        // asked about, if need be) when it is called
                        for_real
                    } else {
                        s.effect.changes_state() && (for_real || !s.has_preview)
                    }
                })
                .map(|s| {
                    // A gateway runs a program chosen by its arguments at run time: shown at its
                    // worst, and its own program is worked out (and asked about) when called.
                    let gateway = s.kind == Kind::Gateway;
                    ShownCall {
                        tool: s.name.clone(),
                        effect: if gateway { Effect::Send } else { s.effect },
                        destructive: gateway || s.annotations.destructive_hint,
                    }
                })
                .collect(),
            idempotent: specs.iter().all(|s| s.annotations.idempotent_hint),
            open_world: specs.iter().any(|s| s.annotations.open_world_hint),
            hosts: Vec::new(),
        }
    }

    /// This scope with the hosts the program may reach.
    pub fn with_hosts(mut self, hosts: &[String]) -> Scope {
        self.hosts = hosts.to_vec();
        self
    }

    /// The strongest effect among the calls; read when there are none.
    pub fn effect(&self) -> Effect {
        self.calls
            .iter()
            .map(|c| c.effect)
            .max()
            .unwrap_or(Effect::Read)
    }

    /// Whether any call may destroy or overwrite data.
    pub fn destructive(&self) -> bool {
        self.calls.iter().any(|c| c.destructive)
    }

    /// The effect and MCP annotations of a tool that runs this program.
    pub fn effect_and_annotations(&self) -> (Effect, Annotations) {
        let effect = self.effect();
        (
            effect,
            Annotations {
                read_only_hint: effect == Effect::Read,
                destructive_hint: self.destructive(),
                idempotent_hint: self.idempotent,
                open_world_hint: self.open_world,
            },
        )
    }
}
