//! The registry: every tool's description ([`ToolSpec`]) and its handler, in one place.
//!
//! A tool is data (name, schema, effect, kind, profile, annotations, requirements) plus a
//! handler. The handler is private to this module: the only way to run it is [`Tool::run`], which
//! demands a [`Pass`](crate::gate::Pass) that only the gate can mint. So the compiler, not a code
//! review, guarantees that every call goes through the gate.
//!
//! Everything people and programs learn about tools (CLI help, REPL help, the MCP tool list, Lua
//! definitions) is generated from the specs held here.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::gate::{CallContext, Caller, Pass};

pub use crate::config::Effect;

impl fmt::Display for Effect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What role a tool plays; programs may only use some kinds as steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Does one job itself.
    Leaf,
    /// A saved program exposed as a tool (`user_*`).
    Workflow,
    /// Creates or deletes recipes, tools or skills.
    Authoring,
    /// Runs other programs (`recipe_run`, `skill_call`).
    Gateway,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Leaf => "leaf",
            Kind::Workflow => "workflow",
            Kind::Authoring => "authoring",
            Kind::Gateway => "gateway",
        })
    }
}

/// Which tool list a client sees. `Full` is a superset of `Core`, and `Core` of `Code`. A
/// profile decides what is listed, never what may run: a program's calls are under the grants
/// whatever the session's profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Code mode: `lua_run` and `tool_search` only; an agent finds tools and calls them from a
    /// Lua chunk.
    Code,
    /// The everyday tools.
    Core,
    /// Everything, including power tools such as `run_command`.
    Full,
}

impl Profile {
    /// Whether a tool of profile `tool` is listed under this profile.
    pub fn includes(self, tool: Profile) -> bool {
        tool <= self
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Profile::Code => "code",
            Profile::Core => "core",
            Profile::Full => "full",
        })
    }
}

/// MCP tool annotations. Set explicitly on every tool: MCP's defaults (destructive, open world)
/// are the pessimistic ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    /// The tool does not change its environment.
    pub read_only_hint: bool,
    /// The tool may destroy or overwrite data.
    pub destructive_hint: bool,
    /// Repeating the same call has no further effect.
    pub idempotent_hint: bool,
    /// The tool reaches outside the host (network, other programs).
    pub open_world_hint: bool,
}

impl Annotations {
    /// A tool that changes state (readOnlyHint false): whether it may destroy or overwrite data,
    /// whether repeating a call has no further effect, and whether it reaches outside the host.
    pub const fn changing(destructive: bool, idempotent: bool, open_world: bool) -> Annotations {
        Annotations {
            read_only_hint: false,
            destructive_hint: destructive,
            idempotent_hint: idempotent,
            open_world_hint: open_world,
        }
    }

    /// A read-only, idempotent, closed-world tool.
    pub const READ: Annotations = Annotations {
        read_only_hint: true,
        destructive_hint: false,
        idempotent_hint: true,
        open_world_hint: false,
    };
}

/// What a tool needs from the host to be available.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Requirements {
    /// Needs terminal access (runs programs): refused when the host is in no-terminal mode or on
    /// platforms without processes.
    pub terminal: bool,
    /// Reads local files named by the caller: only over a local transport (CLI, REPL, stdio).
    pub local_files: bool,
}

/// How the caller reaches this host; decides whether local-file tools are available.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// Same machine: the CLI, the REPL, or MCP over stdio.
    #[default]
    Local,
    /// Over a network: the caller's files are not ours to read.
    Remote,
}

/// Why a tool that exists cannot run here and now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnavailableReason {
    /// Not supported on this operating system.
    Platform,
    /// The host has no terminal access.
    NoTerminal,
    /// Switched off in the config.
    DisabledByConfig,
    /// Needs the local (stdio) transport.
    NeedsStdioTransport,
}

/// Whether a tool can run here and now, with a reason a person can read when not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Availability {
    /// It can run.
    Available,
    /// It cannot, and `detail` says why and how to change that.
    Unavailable {
        reason: UnavailableReason,
        detail: String,
    },
}

impl Availability {
    /// Its JSON shape, for output schemas that report a tool's availability:
    /// `{status, reason?, detail?}` (the last two when unavailable).
    pub fn schema() -> Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "status": {"type": "string", "enum": ["available", "unavailable"]},
                "reason": {"type": "string", "enum": ["platform", "no_terminal", "disabled_by_config", "needs_stdio_transport"]},
                "detail": {"type": "string", "description": "Why it cannot run, and how to change that"}
            },
            "required": ["status"]
        })
    }

    /// True when the tool can run.
    pub fn is_available(&self) -> bool {
        matches!(self, Availability::Available)
    }
}

/// The tools a program (a recipe, a custom tool, a skill script) may call while it runs. The
/// gate checks every call made inside the program, however deeply nested, against it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capabilities {
    /// Exactly these tools (the library's check decided which kinds may be listed).
    Tools(Vec<String>),
    /// Leaf tools whose effect is read (a Lua program that declared no `---@uses`).
    ReadOnly,
    /// Any tool: only a person's own script run from the command line (`lmcp run` without
    /// `---@uses`), which no gateway ever approves; the one question before such a run says
    /// "any tool", and a per-tool `ask` grant still asks each time.
    Unrestricted,
}

impl Capabilities {
    /// Whether a call of `spec` is allowed.
    pub fn allows(&self, spec: &ToolSpec) -> bool {
        match self {
            Capabilities::Tools(names) => names.iter().any(|n| n == &spec.name),
            Capabilities::ReadOnly => spec.kind == Kind::Leaf && spec.effect == Effect::Read,
            Capabilities::Unrestricted => true,
        }
    }

    /// For people: "read_file, calculate" or "read tools only".
    pub fn describe(&self) -> String {
        match self {
            Capabilities::Tools(names) if names.is_empty() => "no tools".to_string(),
            Capabilities::Tools(names) => names.join(", "),
            Capabilities::ReadOnly => "read tools only".to_string(),
            Capabilities::Unrestricted => "any tool, each confirmed on its own".to_string(),
        }
    }
}

/// Builds a one-line summary of a call's arguments for previews and confirmation prompts.
pub type Summarizer = fn(&Value) -> String;

/// Everything known about a tool except how to run it.
#[derive(Debug, Clone, Serialize)]
pub struct ToolSpec {
    /// snake_case; user-made tools start with `user_`.
    pub name: String,
    /// A short human title.
    pub title: String,
    /// What it does, for people and models: the single source for every front door's help.
    pub description: String,
    /// JSON Schema (an object schema) the arguments must meet.
    pub input_schema: Value,
    /// JSON Schema every successful result meets, when declared.
    pub output_schema: Option<Value>,
    /// MCP annotations.
    pub annotations: Annotations,
    /// Read, write or send.
    pub effect: Effect,
    /// Leaf, workflow, authoring or gateway.
    pub kind: Kind,
    /// Core or full.
    pub profile: Profile,
    /// What it needs from the host.
    pub requires: Requirements,
    /// False for tools whose contract has no preview (sent when called, e.g. friction reports).
    pub has_preview: bool,
    /// For programs exposed as tools: the tools they may call. `None` for tools that call none.
    pub capabilities: Option<Capabilities>,
    /// The arguments may hold secrets: previews and confirmation prompts never show them.
    pub secret_args: bool,
    /// For another MCP server's tool: the hash of its definition as the server gave it. An
    /// allow is pinned to it (see `Config::pin`), so a changed tool is asked about again.
    pub definition: Option<String>,
    /// Optional argument summary for previews and prompts.
    #[serde(skip)]
    pub summarize: Option<Summarizer>,
    /// For gateways: works out the program a call would run, so the gate can show and confirm
    /// that program's effect before anything runs, and hand the handler that very snapshot.
    #[serde(skip)]
    pub resolve: Option<Resolver>,
    /// The tool's own refusals the gate runs before it asks anyone (see [`Precheck`]).
    #[serde(skip)]
    pub precheck: Option<Precheck>,
    /// For a tool that reaches a host over the network (`http_request`): the host a call
    /// reaches. The gate then grants it by host (`lmcp hosts`), and refuses it inside a
    /// program whose `---@connect` lines do not name that host.
    #[serde(skip)]
    pub reaches: Option<Reaches>,
    /// For programs exposed as tools: the hosts they may reach (their `---@connect` lines, or
    /// the literal hosts of their JSON steps' URLs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub connect: Vec<String>,
}

impl ToolSpec {
    /// A read-only leaf tool in the core profile; adjust with the builder methods.
    pub fn new(name: &str, title: &str, description: &str, input_schema: Value) -> ToolSpec {
        ToolSpec {
            name: name.to_string(),
            title: title.to_string(),
            description: description.to_string(),
            input_schema,
            output_schema: None,
            annotations: Annotations::READ,
            effect: Effect::Read,
            kind: Kind::Leaf,
            profile: Profile::Core,
            requires: Requirements::default(),
            has_preview: true,
            capabilities: None,
            secret_args: false,
            definition: None,
            summarize: None,
            resolve: None,
            precheck: None,
            reaches: None,
            connect: Vec::new(),
        }
    }

    /// Declares the host a call reaches (see [`ToolSpec::reaches`]).
    pub fn reaching(mut self, f: Reaches) -> Self {
        self.reaches = Some(f);
        self
    }

    /// Declares the hosts this program may reach (see [`ToolSpec::connect`]).
    pub fn connects(mut self, hosts: Vec<String>) -> Self {
        self.connect = hosts;
        self
    }

    /// Marks another MCP server's tool, with the hash of its definition (see
    /// [`ToolSpec::definition`]).
    pub fn from_upstream(mut self, definition_hash: String) -> Self {
        self.definition = Some(definition_hash);
        self
    }

    /// Declares that the arguments may hold secrets (previews and prompts hide them).
    pub fn secret_args(mut self) -> Self {
        self.secret_args = true;
        self
    }

    /// Declares which tools this program may call; the gate refuses any other call made while
    /// it runs.
    pub fn capabilities(mut self, capabilities: Capabilities) -> Self {
        self.capabilities = Some(capabilities);
        self
    }

    /// Sets the effect and annotations together, since they must agree.
    pub fn effect(mut self, effect: Effect, annotations: Annotations) -> Self {
        self.effect = effect;
        self.annotations = annotations;
        self
    }

    /// Sets the kind.
    pub fn kind(mut self, kind: Kind) -> Self {
        self.kind = kind;
        self
    }

    /// Sets the profile.
    pub fn profile(mut self, profile: Profile) -> Self {
        self.profile = profile;
        self
    }

    /// Sets the requirements.
    pub fn requires(mut self, requires: Requirements) -> Self {
        self.requires = requires;
        self
    }

    /// Declares the output schema.
    pub fn output(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// Declares that the tool has no preview: it acts when called.
    pub fn without_preview(mut self) -> Self {
        self.has_preview = false;
        self
    }

    /// Declares the check the gate runs on the arguments before it asks or previews.
    pub fn prechecks(mut self, f: Precheck) -> Self {
        self.precheck = Some(f);
        self
    }

    /// Declares how the gate finds the program a call of this gateway runs.
    pub fn resolves(mut self, f: Resolver) -> Self {
        self.resolve = Some(f);
        self
    }

    /// Whether calls of this tool run a program (a gateway or a `user_` workflow): such calls
    /// are never previewed whole; their program runs and its own calls preview.
    pub fn runs_program(&self) -> bool {
        matches!(self.kind, Kind::Workflow | Kind::Gateway)
    }

    /// Sets the argument summarizer used in previews and prompts.
    pub fn summary(mut self, f: Summarizer) -> Self {
        self.summarize = Some(f);
        self
    }

    /// Whether the tool is available given the config and how the caller reaches us.
    pub fn availability(&self, config: &Config, transport: Transport) -> Availability {
        if config.disabled_tools.iter().any(|t| t == &self.name) {
            return Availability::Unavailable {
                reason: UnavailableReason::DisabledByConfig,
                detail: format!(
                    "it is disabled in the config; enable it with `lmcp tool enable {}`",
                    self.name
                ),
            };
        }
        if self.requires.terminal {
            if !cfg!(any(unix, windows)) {
                return Availability::Unavailable {
                    reason: UnavailableReason::Platform,
                    detail: "it needs to run programs, which this platform does not allow"
                        .to_string(),
                };
            }
            if config.modes.no_terminal {
                return Availability::Unavailable {
                    reason: UnavailableReason::NoTerminal,
                    detail: "this host has no terminal access (no-terminal mode is on; turn it \
                             off with `lmcp mode no-terminal off`)"
                        .to_string(),
                };
            }
        }
        // another server's tool runs only while its server is there and switched on (a
        // running `lmcp serve` sees `lmcp servers disable` or `remove` at its next call)
        if self.definition.is_some()
            && let Some(server) = crate::config::upstream_server(&self.name)
        {
            match config.servers.get(server) {
                None => {
                    return Availability::Unavailable {
                        reason: UnavailableReason::DisabledByConfig,
                        detail: format!("the MCP server `{server}` was removed"),
                    };
                }
                Some(s) if s.disabled => {
                    return Availability::Unavailable {
                        reason: UnavailableReason::DisabledByConfig,
                        detail: format!(
                            "the MCP server `{server}` is disabled; enable it with `lmcp \
                             servers enable {server}`"
                        ),
                    };
                }
                Some(_) => {}
            }
        }
        if self.definition.is_some()
            && transport != Transport::Local
            && let Some(server) = crate::config::upstream_server(&self.name)
            && !config.servers.get(server).is_some_and(|s| s.http)
        {
            return Availability::Unavailable {
                reason: UnavailableReason::NeedsStdioTransport,
                detail: format!(
                    "it is a tool of the MCP server `{server}`, which runs on this machine as the \
                     person, so it is not offered over HTTP unless the person says so with \
                     `lmcp servers http {server} on`"
                ),
            };
        }
        if self.requires.local_files && transport != Transport::Local {
            return Availability::Unavailable {
                reason: UnavailableReason::NeedsStdioTransport,
                detail: "it reads local files, which only the local (stdio) transport allows"
                    .to_string(),
            };
        }
        Availability::Available
    }
}

/// A program a gateway resolved, opaque to the registry and the gate: they pass it on to the
/// handler, which knows its type ([`Invocation::program`]).
pub type AnyProgram = Arc<dyn std::any::Any + Send + Sync>;

/// What a gateway's resolver found: the program it will run (opaque here: the gate only passes
/// it on to the handler), what that program may call, and whether it runs for real.
pub struct Resolved {
    /// The snapshot that will run: the handler receives this one, never a re-read.
    pub program: AnyProgram,
    /// The tools it may call, for the gate to work out and show its scope.
    pub capabilities: Capabilities,
    /// The hosts it may reach (`---@connect`), shown with its scope.
    pub connect: Vec<String>,
    /// False for a plan (`recipe_run` without `confirm`): its state-changing calls preview.
    pub for_real: bool,
}

/// Works out, from a gateway's validated arguments, the program it would run.
pub type Resolver = fn(&dyn Caller, &Value) -> Result<Resolved>;

/// A tool's own check of a call's arguments that needs nobody's yes (a path outside the
/// roots): the gate runs it before it asks or previews, so a person is never asked to allow a
/// call that would be refused anyway. The handler still checks what it opens; this only
/// refuses earlier.
pub type Precheck = fn(&dyn Caller, &Value) -> Result<()>;

/// The host a call of a network tool reaches, from its validated arguments (an error when
/// they name none it may reach, such as a URL that is not http or https).
pub type Reaches = fn(&Value) -> Result<crate::config::HostPort>;

/// What a handler receives: validated arguments, the call's context, and the caller for nested
/// calls (which go back through the gate).
pub struct Invocation {
    /// Arguments, already validated against the input schema.
    pub args: Value,
    /// Origin, depth, cancellation, deadline, progress, confirmation mode.
    pub ctx: CallContext,
    /// The house the call runs in, for tools that call other tools or read settings.
    pub caller: Arc<dyn Caller>,
    /// For a gateway: the program the gate resolved and showed; run exactly this one.
    pub program: Option<AnyProgram>,
}

impl Invocation {
    /// The program the gate resolved for this call, as the type its resolver made.
    pub fn program<T: std::any::Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.program.clone()?.downcast::<T>().ok()
    }
}

/// The future a handler returns.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<Value>> + Send>>;

/// A tool's implementation.
pub type Handler = Arc<dyn Fn(Invocation) -> ToolFuture + Send + Sync>;

/// Makes a [`Handler`] from an async closure.
pub fn handler<F, Fut>(f: F) -> Handler
where
    F: Fn(Invocation) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value>> + Send + 'static,
{
    Arc::new(move |inv| Box::pin(f(inv)))
}

/// Makes a [`Handler`] from a quick synchronous function of the arguments.
pub fn sync_handler<F>(f: F) -> Handler
where
    F: Fn(&Value) -> Result<Value> + Send + Sync + 'static,
{
    Arc::new(move |inv| {
        let out = f(&inv.args);
        Box::pin(std::future::ready(out))
    })
}

/// A registered tool: its spec, its compiled input validator and its (private) handler.
pub struct Tool {
    spec: ToolSpec,
    /// Compiled on first use: compiling every schema at start cost more than the rest of
    /// opening the host.
    validator: std::sync::OnceLock<std::result::Result<jsonschema::Validator, String>>,
    handler: Handler,
}

impl Tool {
    /// The tool's description.
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// The compiled input schema.
    pub(crate) fn validator(&self) -> Result<&jsonschema::Validator> {
        self.validator
            .get_or_init(|| {
                jsonschema::validator_for(&self.spec.input_schema).map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|m| Error::Definition {
                tool: self.spec.name.clone(),
                message: format!("the input schema does not compile: {m}"),
            })
    }

    /// Checks the tool's schemas fully: both are valid JSON Schema and the input schema
    /// compiles. [`Registry::register`] does this for every tool it is given; built-in tools
    /// are checked by a test instead, to keep start-up fast.
    pub fn check(&self) -> Result<()> {
        let bad = |message: String| Error::Definition {
            tool: self.spec.name.clone(),
            message,
        };
        for (which, schema) in [
            ("input", Some(&self.spec.input_schema)),
            ("output", self.spec.output_schema.as_ref()),
        ] {
            if let Some(schema) = schema {
                jsonschema::meta::validate(schema).map_err(|e| {
                    bad(format!("the {which} schema is not valid JSON Schema: {e}"))
                })?;
            }
        }
        self.validator().map(|_| ())
    }

    /// Runs the handler. Only the gate holds a [`Pass`], so only the gate can call this.
    pub(crate) fn run(&self, invocation: Invocation, _pass: &Pass) -> ToolFuture {
        (self.handler)(invocation)
    }
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.spec.name)
            .finish_non_exhaustive()
    }
}

/// All tools, by name. Cheap to read from many threads; tools can be added and removed at run
/// time (custom tools, skills).
pub struct Registry {
    tools: RwLock<BTreeMap<String, Arc<Tool>>>,
    /// Bumped on every change, so front doors (the MCP server) can announce new tool lists.
    changes: tokio::sync::watch::Sender<u64>,
    /// The saved programs, registered when first needed (see [`Registry::defer`]).
    deferred: Deferred,
    /// The built-in tools, registered when first needed (see [`Registry::with_builtins`]): a
    /// one-line script that calls no tool builds no schema.
    builtins: Deferred,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            tools: RwLock::default(),
            changes: tokio::sync::watch::Sender::new(0),
            deferred: Deferred::default(),
            builtins: Deferred::default(),
        }
    }
}

/// What registers a registry's built-in tools.
pub type MakeBuiltins = fn(&Registry) -> Result<()>;

/// Work that registers tools (the built-ins, or the saved programs), run the first time a name
/// is missed or the whole list is read: start-up then does not grow with the library, and a
/// script that calls only built-in tools never loads it.
#[derive(Default)]
struct Deferred {
    /// Set once the work has run (or there was none): the fast path of every later look-up.
    done: std::sync::atomic::AtomicBool,
    state: std::sync::Mutex<DeferredState>,
    finished: std::sync::Condvar,
}

#[derive(Default)]
enum DeferredState {
    #[default]
    Nothing,
    Waiting(Box<dyn FnOnce(&Registry) + Send>),
    /// Running on this thread; its own look-ups see what is registered so far.
    Running(std::thread::ThreadId),
    Done,
}

impl Deferred {
    /// A deferred `work`, waiting for its first need.
    fn waiting(work: Box<dyn FnOnce(&Registry) + Send>) -> Deferred {
        let deferred = Deferred::default();
        *deferred.state.lock().unwrap_or_else(|p| p.into_inner()) = DeferredState::Waiting(work);
        deferred
    }

    /// Runs the work for `registry` (whose field this is) if it has not run.
    fn ensure(&self, registry: &Registry) {
        use std::sync::atomic::Ordering;
        if self.done.load(Ordering::Acquire) {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            match std::mem::take(&mut *state) {
                DeferredState::Waiting(work) => {
                    *state = DeferredState::Running(std::thread::current().id());
                    drop(state);
                    // whatever happens in the work, the others waiting are let go
                    let finish = FinishDeferred(self);
                    work(registry);
                    drop(finish);
                    return;
                }
                DeferredState::Running(id) if id == std::thread::current().id() => {
                    *state = DeferredState::Running(id);
                    return;
                }
                running @ DeferredState::Running(_) => {
                    *state = running;
                    state = self.finished.wait(state).unwrap_or_else(|p| p.into_inner());
                }
                DeferredState::Nothing | DeferredState::Done => {
                    *state = DeferredState::Done;
                    self.done.store(true, Ordering::Release);
                    return;
                }
            }
        }
    }
}

/// Marks deferred work finished when dropped, even by a panic inside it.
struct FinishDeferred<'a>(&'a Deferred);

impl Drop for FinishDeferred<'_> {
    fn drop(&mut self) {
        let mut state = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
        *state = DeferredState::Done;
        self.0
            .done
            .store(true, std::sync::atomic::Ordering::Release);
        self.0.finished.notify_all();
    }
}

impl Registry {
    /// The tools a profile shows, each with its availability under `config` and `transport`.
    pub fn in_profile(
        &self,
        profile: Profile,
        config: &Config,
        transport: Transport,
    ) -> Vec<(Arc<Tool>, Availability)> {
        self.all()
            .into_iter()
            .filter(|t| profile.includes(t.spec().profile))
            .map(|t| {
                let a = t.spec().availability(config, transport);
                (t, a)
            })
            .collect()
    }

    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// A registry whose built-in tools `make` registers on first need: the first look-up,
    /// listing or registration, on whichever thread comes first (the others wait).
    pub fn with_builtins(make: MakeBuiltins) -> Registry {
        Registry {
            builtins: Deferred::waiting(Box::new(move |registry| {
                // The built-ins are this program's own definitions, each checked in full by a
                // test: failing to register one is a bug, not a condition to handle.
                if let Err(e) = make(registry) {
                    panic!("the built-in tools could not be registered: {e}");
                }
            })),
            ..Registry::default()
        }
    }

    /// Registers the built-in tools now if they are not yet (a server does so before its
    /// first client can subscribe to changes: their arrival is not a change to announce).
    pub fn load_builtins(&self) {
        self.builtins.ensure(self);
    }

    /// Both kinds of tools registered on first need, built-ins first.
    fn ensure_all(&self) {
        self.builtins.ensure(self);
        self.deferred.ensure(self);
    }

    /// Defers `work` that registers more tools (the saved programs) until a look-up misses or
    /// the whole list is read, whichever comes first; it runs once. Look-ups from inside the
    /// work see what is registered so far; other threads wait for it to finish.
    pub fn defer(&self, work: impl FnOnce() + Send + 'static) {
        let mut state = self
            .deferred
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        *state = DeferredState::Waiting(Box::new(move |_: &Registry| work()));
        self.deferred
            .done
            .store(false, std::sync::atomic::Ordering::Release);
    }

    /// Runs the deferred work now if it has not run (a server lists its tools at once anyway).
    pub fn load_deferred(&self) {
        self.ensure_all();
    }

    /// Adds a tool after checking its name and schemas fully. Fails if the name is taken.
    pub fn register(&self, spec: ToolSpec, handler: Handler) -> Result<()> {
        // a name taken by a built-in must be seen as taken
        self.builtins.ensure(self);
        let tool = Self::build(spec, handler)?;
        tool.check()?;
        self.insert(tool)
    }

    /// Adds a built-in tool with the cheap checks only; its schemas are compiled on first use
    /// (a test checks them all fully).
    pub(crate) fn register_builtin(&self, spec: ToolSpec, handler: Handler) -> Result<()> {
        self.insert(Self::build(spec, handler)?)
    }

    /// A receiver that sees a new value after every change of the tool list.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Tells subscribers the tool list changed for a reason outside the registry (a tool
    /// switched on or off, a mode that takes tools away).
    pub fn announce_change(&self) {
        self.changed();
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    /// Adds or replaces a tool (a custom tool saved again with `replace`), after full checks.
    pub fn register_or_replace(&self, spec: ToolSpec, handler: Handler) -> Result<()> {
        let tool = Self::build(spec, handler)?;
        tool.check()?;
        self.replace(tool);
        Ok(())
    }

    /// Adds or replaces a saved program's tool whose schemas were checked in full when it was
    /// indexed (see `library::index`): the cheap checks only, its schema compiled on first use.
    pub(crate) fn restore(&self, spec: ToolSpec, handler: Handler) -> Result<()> {
        // only ever a saved program, and never in place of a tool of another kind
        let taken = self
            .get(&spec.name)
            .is_some_and(|t| t.spec().kind != Kind::Workflow);
        if spec.kind != Kind::Workflow || taken {
            return Err(Error::Definition {
                tool: spec.name.clone(),
                message: "a saved program cannot take the place of a built-in tool".to_string(),
            });
        }
        self.replace(Self::build(spec, handler)?);
        Ok(())
    }

    fn replace(&self, tool: Tool) {
        // the deferred programs first, so they never land over this newer one
        self.ensure_all();
        self.tools
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(tool.spec.name.clone(), Arc::new(tool));
        self.changed();
    }

    fn insert(&self, tool: Tool) -> Result<()> {
        let mut tools = self.tools.write().unwrap_or_else(|p| p.into_inner());
        if tools.contains_key(&tool.spec.name) {
            return Err(Error::Definition {
                tool: tool.spec.name.clone(),
                message: "a tool with this name is already registered".to_string(),
            });
        }
        tools.insert(tool.spec.name.clone(), Arc::new(tool));
        drop(tools);
        self.changed();
        Ok(())
    }

    /// Removes a tool; returns whether it was there.
    pub fn unregister(&self, name: &str) -> bool {
        self.ensure_all();
        let removed = self
            .tools
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name)
            .is_some();
        if removed {
            self.changed();
        }
        removed
    }

    fn build(spec: ToolSpec, handler: Handler) -> Result<Tool> {
        check_name(&spec.name)?;
        let bad = |message: String| Error::Definition {
            tool: spec.name.clone(),
            message,
        };
        if spec.description.trim().is_empty() {
            return Err(bad("the description is empty".into()));
        }
        if spec.input_schema.get("type") != Some(&Value::String("object".into())) {
            return Err(bad(
                "the input schema must be an object schema (`\"type\": \"object\"`)".into(),
            ));
        }
        if spec.annotations.read_only_hint != (spec.effect == Effect::Read) {
            return Err(bad(
                "readOnlyHint must be true exactly when the effect is read".into(),
            ));
        }
        Ok(Tool {
            spec,
            validator: std::sync::OnceLock::new(),
            handler,
        })
    }

    /// The tool of that name.
    pub fn get(&self, name: &str) -> Option<Arc<Tool>> {
        self.builtins.ensure(self);
        let found = self
            .tools
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned();
        if found.is_some()
            || self
                .deferred
                .done
                .load(std::sync::atomic::Ordering::Acquire)
        {
            return found;
        }
        self.deferred.ensure(self);
        self.tools
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    /// Every tool, sorted by name.
    pub fn all(&self) -> Vec<Arc<Tool>> {
        self.ensure_all();
        self.tools
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Up to three registered names closest to `name`, best first, for "did you mean".
    pub fn closest(&self, name: &str) -> Vec<String> {
        // No tool name is longer than 64 bytes; comparing a huge one would only take time.
        if name.len() > 128 {
            return Vec::new();
        }
        self.ensure_all();
        let tools = self.tools.read().unwrap_or_else(|p| p.into_inner());
        let mut scored: Vec<(f64, &String)> = tools
            .keys()
            .map(|k| {
                let mut s = strsim::jaro_winkler(name, k);
                if !name.is_empty() && (k.contains(name) || name.contains(k.as_str())) {
                    s = s.max(0.9);
                }
                (s, k)
            })
            .filter(|(s, _)| *s >= 0.75)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
        scored.into_iter().take(3).map(|(_, k)| k.clone()).collect()
    }
}

impl Registry {
    /// "; did you mean `NAME`?" for the closest registered name, or "" when none is close: the
    /// one hint every "there is no tool" message uses.
    pub fn did_you_mean(&self, name: &str) -> String {
        self.closest(name)
            .first()
            .map(|h| format!("; did you mean `{h}`?"))
            .unwrap_or_default()
    }
}

/// Tool names are snake_case ASCII: a lowercase letter, then lowercase letters, digits and `_`,
/// at most 64 characters (MCP clients cap names near there).
///
/// Another MCP server's tool keeps the case of its own name: `mcp__SERVER__TOOL`, where TOOL has
/// ASCII letters, digits and `_` (every other character was made `_`).
pub fn check_name(name: &str) -> Result<()> {
    let upstream = crate::config::upstream_server(name).is_some();
    // `mcp__` names only ever another server's tool: one the server part cannot be read from
    // (`mcp__s__`, `mcp__x`) would escape every rule that names its server
    let ok = !name.is_empty()
        && (upstream || !name.starts_with(crate::config::UPSTREAM_PREFIX))
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| {
            c.is_ascii_lowercase()
                || c.is_ascii_digit()
                || c == '_'
                || (upstream && c.is_ascii_uppercase())
        });
    if ok {
        Ok(())
    } else {
        Err(Error::Definition {
            tool: name.to_string(),
            message: "names are snake_case: a lowercase letter, then lowercase letters, digits \
                      or `_`, at most 64 characters"
                .to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(name: &str) -> ToolSpec {
        ToolSpec::new(name, "T", "does t", json!({"type": "object"}))
    }

    fn noop() -> Handler {
        sync_handler(|_| Ok(Value::Null))
    }

    /// Another server's tool runs only while its server is there and switched on, and over
    /// HTTP only when its server is marked for it: the gate's availability, not the profile
    /// (which only decides what is listed).
    #[test]
    fn upstream_tools_run_only_as_their_server_entry_says() {
        let tool = spec("mcp__fx__echo").from_upstream("h".repeat(64));
        let mut config = Config::default();
        let server = crate::config::Server {
            command: vec!["x".into()],
            ..Default::default()
        };
        config.servers.insert("fx".into(), server);
        assert!(tool.availability(&config, Transport::Local).is_available());
        match tool.availability(&config, Transport::Remote) {
            Availability::Unavailable { detail, .. } => {
                assert!(detail.contains("lmcp servers http fx on"), "{detail}")
            }
            Availability::Available => panic!("offered over HTTP unasked"),
        }
        config.servers.get_mut("fx").unwrap().http = true;
        assert!(tool.availability(&config, Transport::Remote).is_available());
        // a disabled or removed server's tools do not run, at any door
        config.servers.get_mut("fx").unwrap().disabled = true;
        assert!(!tool.availability(&config, Transport::Local).is_available());
        config.servers.clear();
        assert!(!tool.availability(&config, Transport::Local).is_available());
        // a built-in's name that only looks like one is not another server's tool
        assert!(
            spec("mcp_thing")
                .availability(&Config::default(), Transport::Remote)
                .is_available()
        );
        // names no server part can be read from are no tool's
        for bad in ["mcp__s__", "mcp__x", "mcp____t"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert!(check_name("mcp__s__Get_Thing").is_ok());
    }

    static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    fn two_builtins(r: &Registry) -> Result<()> {
        MADE.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        r.register_builtin(spec("first"), noop())?;
        r.register_builtin(spec("second"), noop())
    }

    /// Built-ins are made once, on first need, whichever way the registry is first asked;
    /// before that nothing is built, and every thread asking at once sees them whole.
    #[test]
    fn builtins_are_made_once_on_first_need() {
        let count = || MADE.load(std::sync::atomic::Ordering::SeqCst);
        let before = count();
        let r = Arc::new(Registry::with_builtins(two_builtins));
        assert!(
            r.tools.read().unwrap().is_empty(),
            "nothing is built up front"
        );
        assert_eq!(count(), before);
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let r = Arc::clone(&r);
                std::thread::spawn(move || r.get("second").is_some())
            })
            .collect();
        assert!(threads.into_iter().all(|t| t.join().unwrap()));
        assert_eq!(count(), before + 1, "made once");
        assert_eq!(r.all().len(), 2);
        // a name a built-in holds is taken even when nothing looked it up first
        let fresh = Registry::with_builtins(two_builtins);
        assert!(fresh.register(spec("first"), noop()).is_err());
        assert!(
            Registry::with_builtins(two_builtins)
                .closest("secnd")
                .contains(&"second".to_string())
        );
        assert_eq!(Registry::with_builtins(two_builtins).all().len(), 2);
    }

    /// A registry with `builtin` registered and deferred work that registers `saved` (after
    /// looking itself up, as loading programs does), counting its runs.
    fn deferring() -> (Arc<Registry>, Arc<std::sync::atomic::AtomicUsize>) {
        let r = Arc::new(Registry::new());
        r.register(spec("builtin"), noop()).unwrap();
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (weak, counted) = (Arc::downgrade(&r), Arc::clone(&runs));
        r.defer(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let r = weak.upgrade().unwrap();
            // look-ups from inside the work see what is there so far, without waiting on itself
            assert!(r.get("saved").is_none());
            assert_eq!(r.all().len(), 1);
            std::thread::sleep(std::time::Duration::from_millis(50));
            r.register(spec("saved"), noop()).unwrap();
        });
        (r, runs)
    }

    #[test]
    fn deferred_tools_load_on_the_first_miss_and_only_once() {
        let (r, runs) = deferring();
        assert!(r.get("builtin").is_some());
        assert_eq!(
            runs.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "a hit loads nothing"
        );
        assert!(r.get("saved").is_some(), "a miss loads the deferred tools");
        assert!(r.get("nothing").is_none());
        assert_eq!(r.all().len(), 2);
        assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
        // listing loads them too, and a second thread waits for the first to finish
        let (r, runs) = deferring();
        let other = {
            let r = Arc::clone(&r);
            std::thread::spawn(move || r.all().len())
        };
        let here = r.closest("save").len();
        assert_eq!(other.join().unwrap(), 2);
        assert_eq!(here, 1);
        assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn a_restored_program_never_takes_a_built_in_tools_place() {
        let r = Registry::new();
        r.register(spec("read_file"), noop()).unwrap();
        let forged = spec("read_file").kind(Kind::Workflow);
        assert!(r.restore(forged, noop()).is_err());
        assert!(r.restore(spec("user_x"), noop()).is_err(), "only workflows");
        r.restore(spec("user_x").kind(Kind::Workflow), noop())
            .unwrap();
        assert_eq!(r.get("read_file").unwrap().spec().kind, Kind::Leaf);
    }

    #[test]
    fn names_must_be_snake_case() {
        for bad in ["", "Calc", "1x", "a-b", "a b", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        check_name("user_word_count2").unwrap();
    }

    #[test]
    fn register_refuses_duplicates_and_bad_schemas() {
        let r = Registry::new();
        r.register(spec("a"), noop()).unwrap();
        assert!(r.register(spec("a"), noop()).is_err());
        let mut s = spec("b");
        s.input_schema = json!({"type": "string"});
        assert!(r.register(s, noop()).is_err());
        let mut s = spec("c");
        s.input_schema = json!({"type": "object", "properties": {"x": {"type": 5}}});
        let err = r.register(s, noop()).unwrap_err().to_string();
        assert!(err.contains("not valid JSON Schema"), "{err}");
        let s = spec("d").effect(Effect::Write, Annotations::READ);
        assert!(r.register(s, noop()).is_err());
    }

    #[test]
    fn closest_names_suggest_typos() {
        let r = Registry::new();
        for n in ["calculate", "read_file", "write_file", "list_dir"] {
            r.register(spec(n), noop()).unwrap();
        }
        assert_eq!(r.closest("calculat"), vec!["calculate"]);
        assert_eq!(
            r.closest("read_fil").first().map(String::as_str),
            Some("read_file")
        );
        assert!(r.closest("zzzz").is_empty());
    }

    #[test]
    fn profiles_nest() {
        assert!(Profile::Full.includes(Profile::Core));
        assert!(!Profile::Core.includes(Profile::Full));
        assert!(Profile::Core.includes(Profile::Code));
        assert!(!Profile::Code.includes(Profile::Core));
    }

    #[test]
    fn availability_reasons() {
        let mut config = Config::default();
        let s = spec("run").requires(Requirements {
            terminal: true,
            local_files: true,
        });
        assert!(s.availability(&config, Transport::Local).is_available());
        let a = s.availability(&config, Transport::Remote);
        assert!(matches!(
            a,
            Availability::Unavailable {
                reason: UnavailableReason::NeedsStdioTransport,
                ..
            }
        ));
        config.modes.no_terminal = true;
        let a = s.availability(&config, Transport::Local);
        assert!(matches!(
            a,
            Availability::Unavailable {
                reason: UnavailableReason::NoTerminal,
                ..
            }
        ));
        config.disabled_tools.push("run".into());
        let a = s.availability(&config, Transport::Local);
        assert!(matches!(
            a,
            Availability::Unavailable {
                reason: UnavailableReason::DisabledByConfig,
                ..
            }
        ));
    }
}
