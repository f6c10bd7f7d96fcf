//! Programs: what recipes, custom tools and skill scripts are underneath.
//!
//! A [`Program`] is a name, typed parameters, the tools it may call ([`Capabilities`]), an
//! optional timeout, and a [`Body`]: JSON steps or Lua. The three libraries only turn their file
//! formats into one, store them and describe their tools; everything else is here, once:
//!
//! | what | where |
//! |---|---|
//! | the header, parameter types, params → schema, `k=v` parsing | [`header`] |
//! | `${...}` templates | [`interpolate`] |
//! | step templates (both placeholder styles) and result paths | [`steps`] |
//! | the runner for both engines: steps, and Lua (timeout, VM options, restriction, output) | [`run`] |
//! | the one compile path: a library's [`compile::Source`] in, a checked `Program` out | [`compile`] |
//! | the effect a program may have, and what a person is shown about it | [`Program::scope`] |

pub mod compile;
pub mod header;
pub mod interpolate;
pub mod run;
pub mod steps;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::error::Result;
use crate::gate::ShownCall;
use crate::host::Host;
use crate::registry::{Annotations, Capabilities, Effect, Kind, Registry, ToolSpec};
pub use compile::{Intent, Param, Policy, Problem, Source, SourceBody, StepSource, compile};
pub use header::{Header, ParamSpec, ParamType};
pub use steps::{Step, Template};

/// A Lua body with what it runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct LuaBody {
    /// The source.
    pub source: String,
    /// The chunk name in error messages (`name.lua`, never a host path).
    pub chunk: String,
    /// Modules the program may `require` besides the stdlib (a skill's other scripts).
    pub modules: Vec<(String, String)>,
    /// A skill's config values, readable as `config`.
    pub config: Option<Map<String, Value>>,
}

/// What a program does when it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Tool calls and pauses, in order.
    Steps(Vec<Step>),
    /// A Lua program.
    Lua(LuaBody),
}

/// A checked program, ready to run by [`run`].
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    /// Its name, for messages, journals and restrictions.
    pub name: String,
    /// What it does (the source's description, else a Lua header's `---@description`).
    pub description: String,
    /// Its typed parameters.
    pub params: Vec<ParamSpec>,
    /// The tools it may call; the gate refuses any other call made while it runs.
    pub capabilities: Capabilities,
    /// How long it may run; the configured Lua timeout when not given.
    pub timeout: Option<Duration>,
    /// Steps or Lua.
    pub body: Body,
}

/// What a gateway is about to run: the program, and whether for real (or as a plan).
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The snapshot that will run: the handler receives this one, never a re-read.
    pub program: Arc<Program>,
    /// False for a plan (`recipe_run` without `confirm`): its state-changing calls preview.
    pub for_real: bool,
}

/// Works out, from a gateway's validated arguments, the program it would run.
pub type Resolver = fn(&Host, &Value) -> Result<Resolved>;

/// What a program may do, worked out before it runs: the state-changing calls it may make.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scope {
    /// Every state-changing tool it may call, with its effect and whether it is destructive.
    pub calls: Vec<ShownCall>,
    /// Whether every tool it may call is idempotent.
    pub idempotent: bool,
    /// Whether any tool it may call reaches outside the host.
    pub open_world: bool,
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
        }
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

impl Program {
    /// What this program may do when run for real (or as a plan).
    pub fn scope(&self, registry: &Registry, for_real: bool) -> Scope {
        Scope::of(registry, &self.capabilities, for_real)
    }

    /// A hash of what the program is (name, parameters, body): a run journal is resumed only
    /// by the program it was made by.
    pub fn fingerprint(&self) -> String {
        use sha2::Digest;
        let text = format!("{}\n{:?}\n{:?}", self.name, self.params, self.body);
        format!("{:x}", sha2::Sha256::digest(text.as_bytes()))
    }

    /// The same program with what it runs with inside a skill package: the package's scripts
    /// as modules it may `require`, and the skill's config values. A JSON-steps program has
    /// neither, and is returned as it is.
    pub fn in_package(
        mut self,
        modules: Vec<(String, String)>,
        config: Map<String, Value>,
    ) -> Program {
        if let Body::Lua(lua) = &mut self.body {
            lua.modules = modules;
            lua.config = Some(config);
        }
        self
    }

    /// The header view of the parameters, for binding and `k=v` parsing.
    pub fn header(&self) -> Header {
        Header {
            params: self.params.clone(),
            timeout: self.timeout,
            ..Header::default()
        }
    }
}

pub use run::{RunMode, RunReport, run, run_lua};
