//! Programs: what recipes, custom tools and skill scripts are underneath.
//!
//! A [`Program`] is a name, typed parameters, the tools it may call ([`Capabilities`]), an
//! optional timeout, and a [`Body`]: JSON steps or Lua. The three libraries only turn their file
//! formats into one, store them and describe their tools; everything else is here, once:
//!
//! | what | where |
//! |---|---|
//! | the header, parameter types, params → schema, `k=v` parsing | [`header`] |
//! | `---@return` types (LuaLS syntax) as JSON Schema | [`luatype`] |
//! | the output schemas of program runs, and checking a result against its declared type | [`output`] |
//! | `${...}` templates | [`interpolate`] |
//! | step templates (both placeholder styles) and result paths | [`steps`] |
//! | the runner for both engines: steps, and Lua (timeout, VM options, restriction, output) | [`run`] |
//! | the one compile path: a library's [`compile::Source`] in, a checked `Program` out | [`compile`] |
//! | the effect a program may have, and what a person is shown about it | [`Program::scope`] |

pub mod compile;
pub mod header;
pub mod interpolate;
pub mod luatype;
pub mod output;
pub mod run;
pub mod steps;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

pub use crate::gate::Scope;
use crate::registry::{Capabilities, Registry, Resolved};
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
    /// The hosts it may reach, as patterns: a Lua program's `---@connect` lines, or the literal
    /// hosts of its JSON steps' URLs. Empty: it makes no request.
    pub connect: Vec<String>,
    /// How long it may run; the configured Lua timeout when not given.
    pub timeout: Option<Duration>,
    /// Steps or Lua.
    pub body: Body,
    /// The JSON Schema of what it returns, when known: a Lua header's `---@return`, or the
    /// output schema of the tool a JSON program's last step calls. A tool made of the program
    /// (a custom tool, a skill script) types its `result` with it.
    pub returns: Option<Value>,
}

impl Program {
    /// What a gateway hands the gate: this program, which it will run exactly as resolved, and
    /// whether for real (false for a plan: its state-changing calls preview).
    pub fn resolved(self, for_real: bool) -> Resolved {
        Resolved {
            capabilities: self.capabilities.clone(),
            connect: self.connect.clone(),
            program: Arc::new(self),
            for_real,
        }
    }

    /// What this program may do when run for real (or as a plan).
    pub fn scope(&self, registry: &Registry, for_real: bool) -> Scope {
        Scope::of(registry, &self.capabilities, for_real).with_hosts(&self.connect)
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
