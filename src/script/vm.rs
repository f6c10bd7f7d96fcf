//! One run's Lua state and the limits it runs under: [`Vm`], the options and outcome of a run,
//! and the state its hook and host functions share.
//!
//! What a run is (its context, interruption, output, previews) lives in one `RunState` in Rust,
//! outside Lua, so the count hook, the limit timer and every host function see the same
//! deadline and the same sticky interruption without a trip through Lua. The Lua side is made
//! without it (`prelude.rs`, perhaps ahead of time, `ahead.rs`) and bound to one run, once, by
//! [`Vm::new`]. The sandbox and why its limits hold are told in the module docs of `script`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use mlua::chunk::ChunkMode;
use mlua::{Function, Lua, MultiValue, Table, Value};
use serde_json::{Map, Value as Json};

use super::prelude::Fresh;
use super::{HOOK_EVERY, ahead, convert};
use crate::error::{Error, Result};
use crate::gate::Caller;
use crate::gate::{CallContext, Held, HostMemory, LuaShare, Preview, json_cost};

pub use crate::config::ScriptLimits;

/// Where `print` and `log` go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// `print` to stdout, `log` to stderr: `lmcp run` and the REPL.
    Terminal,
    /// Both into the run's captured log: MCP and programs run as tools, where stdout is not ours.
    Capture,
}

/// How a VM is set up.
#[derive(Debug, Clone)]
pub struct VmOptions {
    /// Memory and output limits.
    pub limits: ScriptLimits,
    /// Where output goes.
    pub output: Output,
    /// The `params` table.
    pub params: Map<String, Json>,
    /// Extra modules `require` can find (a skill's scripts): name and source.
    pub modules: Vec<(String, String)>,
    /// A read-only `config` table (a skill's configuration values), when given.
    pub config: Option<Map<String, Json>>,
}

impl Default for VmOptions {
    fn default() -> Self {
        VmOptions {
            limits: ScriptLimits::default(),
            output: Output::Terminal,
            params: Map::new(),
            modules: Vec::new(),
            config: None,
        }
    }
}

/// What a finished run produced.
#[derive(Debug, Clone)]
pub struct ScriptOutcome {
    /// The script's return value as JSON (`null` when it returned nothing; an array for several).
    pub value: Json,
    /// Every state-changing call that was previewed instead of run.
    pub previews: Vec<Preview>,
    /// Captured `print` and `log` output (empty when it went to the terminal).
    pub output: String,
}

/// Why a run was interrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Interruption {
    Timeout,
    Cancelled,
}

/// How many times the capture limit a run may print to a terminal (`lmcp run`, the REPL).
pub const TERMINAL_OUTPUT_FACTOR: usize = 64;

/// State shared by the hook and the host API functions of one VM.
pub(super) struct RunState {
    pub(super) host: Arc<dyn Caller>,
    pub(super) handle: tokio::runtime::Handle,
    pub(super) ctx: Mutex<CallContext>,
    interrupted: AtomicBool,
    /// Set by the limit timer at the deadline or on cancellation: the call hook's cheap check.
    expired: Arc<AtomicBool>,
    /// The limit timer of the current context.
    timer: Mutex<Option<tokio::task::AbortHandle>>,
    why: Mutex<Option<Interruption>>,
    pub(super) previews: Mutex<Vec<Preview>>,
    /// The host memory the kept previews hold, given back when they are taken.
    previews_held: Mutex<Vec<Held>>,
    output: Output,
    captured: Mutex<String>,
    /// The host memory the captured output holds, given back when it is taken.
    captured_held: Mutex<Option<Held>>,
    output_cap: usize,
    truncated: AtomicBool,
    /// Bytes printed to the terminal so far (bounded by [`TERMINAL_OUTPUT_FACTOR`] × the cap).
    printed: std::sync::atomic::AtomicUsize,
    pub(super) modules: Vec<(String, String)>,
    pub(super) memory_limit: usize,
    /// This state's share of its run's memory, given back when the state goes.
    _lua_share: LuaShare,
    /// Whether tool calls are noted in `called` (the REPL, which keeps what a session tried).
    pub(super) recording: AtomicBool,
    /// The tools called since the last [`Vm::take_called`], in order, each once.
    pub(super) called: Mutex<Vec<String>>,
    /// The hosts its `http_request` calls named, while recording (see [`Vm::take_connected`]).
    pub(super) connected: Mutex<Vec<String>>,
}

impl Drop for Vm {
    fn drop(&mut self) {
        if let Some(timer) = self
            .state
            .timer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            timer.abort();
        }
    }
}

impl RunState {
    /// (Re)starts the limit timer for the current context: it sets `expired` at the deadline or
    /// when the cancellation token fires, so the call hook stops the run at its next call.
    fn arm_timer(&self) {
        self.expired.store(false, Ordering::Relaxed);
        let (deadline, token) = {
            let ctx = self.ctx.lock().unwrap_or_else(|p| p.into_inner());
            (ctx.deadline(), ctx.cancel_token().clone())
        };
        let expired = Arc::clone(&self.expired);
        let task = self.handle.spawn(async move {
            let at_deadline = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = at_deadline => {}
                _ = token.cancelled() => {}
            }
            expired.store(true, Ordering::Relaxed);
        });
        let old = self
            .timer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(task.abort_handle());
        if let Some(old) = old {
            old.abort();
        }
    }

    /// Checks the deadline and the cancellation token; once interrupted, stays interrupted.
    pub(super) fn poll(&self) -> Option<Interruption> {
        if self.interrupted.load(Ordering::Relaxed) {
            return *self.why.lock().unwrap_or_else(|p| p.into_inner());
        }
        let ctx = self.ctx.lock().unwrap_or_else(|p| p.into_inner());
        let why = if ctx.cancel_token().is_cancelled() {
            Interruption::Cancelled
        } else if ctx.deadline().is_some_and(|d| Instant::now() >= d) {
            Interruption::Timeout
        } else {
            return None;
        };
        drop(ctx);
        *self.why.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
        self.interrupted.store(true, Ordering::Relaxed);
        Some(why)
    }

    pub(super) fn message(&self, why: Interruption) -> String {
        match why {
            Interruption::Cancelled => "cancelled".to_string(),
            Interruption::Timeout => {
                let budget = self.ctx.lock().unwrap_or_else(|p| p.into_inner()).budget();
                format!(
                    "time limit reached: the script ran longer than {}",
                    crate::error::human_duration(budget)
                )
            }
        }
    }

    pub(super) fn check(&self) -> mlua::Result<()> {
        match self.poll() {
            Some(why) => Err(mlua::Error::runtime(self.message(why))),
            None => Ok(()),
        }
    }

    fn interruption_error(&self) -> Option<Error> {
        let why = (*self.why.lock().unwrap_or_else(|p| p.into_inner()))?;
        Some(match why {
            Interruption::Cancelled => Error::Cancelled,
            Interruption::Timeout => Error::Timeout {
                after: self.ctx.lock().unwrap_or_else(|p| p.into_inner()).budget(),
            },
        })
    }

    /// Prints: to the terminal up to its bound (then the run fails, naming the limit), or into
    /// the capped capture.
    pub(super) fn write(&self, text: &str) -> mlua::Result<()> {
        match self.output {
            Output::Terminal => {
                self.count_printed(text.len())?;
                crate::text::terminal::program_output(text);
            }
            Output::Capture => self.capture(text)?,
        }
        Ok(())
    }

    fn capture(&self, text: &str) -> mlua::Result<()> {
        let mut buf = self.captured.lock().unwrap_or_else(|p| p.into_inner());
        let room = self.output_cap.saturating_sub(buf.len());
        {
            let mut held = self.captured_held.lock().unwrap_or_else(|p| p.into_inner());
            let held = held.get_or_insert_with(|| self.memory().hold_nothing());
            let total = buf.len() + text.len().min(room) + 64;
            held.cover(total, "the captured output")
                .map_err(|e| mlua::Error::runtime(e.to_string()))?;
        }
        if text.len() <= room {
            buf.push_str(text);
        } else if !self.truncated.swap(true, Ordering::Relaxed) {
            let mut cut = room;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            buf.push_str(&text[..cut]);
            buf.push_str(&format!(
                "\n[output truncated at {} bytes]\n",
                self.output_cap
            ));
        }
        Ok(())
    }

    /// The host memory budget of the current run.
    pub(super) fn memory(&self) -> Arc<HostMemory> {
        let ctx = self.ctx.lock().unwrap_or_else(|p| p.into_inner());
        match ctx.host_memory() {
            Some(m) => Arc::clone(m),
            // every context a state runs in was put in a run (`in_run`) when it was set
            None => HostMemory::new(self.memory_limit),
        }
    }

    /// Keeps a preview of a call that was not run, charging what it holds to the run.
    pub(super) fn keep_preview(&self, preview: Preview) -> mlua::Result<()> {
        let cost = json_cost(&preview.args) + preview.summary.len() + preview.tool.len();
        let held = self
            .memory()
            .hold(cost, "the run's previews")
            .map_err(|e| mlua::Error::runtime(e.to_string()))?;
        self.previews_held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(held);
        self.previews
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(preview);
        Ok(())
    }

    /// Counts `bytes` more printed by `print` or `log` straight out; past the bound the run
    /// fails, naming the limit.
    fn count_printed(&self, bytes: usize) -> mlua::Result<()> {
        let cap = self.output_cap.saturating_mul(TERMINAL_OUTPUT_FACTOR);
        let before = self.printed.fetch_add(bytes, Ordering::Relaxed);
        if before.saturating_add(bytes) > cap {
            return Err(mlua::Error::runtime(format!(
                "limit reached: the script printed more than {cap} bytes (the limit is \
                 {TERMINAL_OUTPUT_FACTOR} × limits.lua_output_kb, print and log together)"
            )));
        }
        Ok(())
    }

    pub(super) fn log(&self, level: &str, message: &str) -> mlua::Result<()> {
        match self.output {
            Output::Terminal => {
                self.count_printed(level.len() + message.len() + 3)?;
                errln!("{level}: {message}");
            }
            Output::Capture => self.capture(&format!("[{level}] {message}\n"))?,
        }
        Ok(())
    }
}

/// The run a state's host functions act for. A state is made before its run is known (ahead,
/// on another core), so its functions reach the run through this cell, which [`Vm::new`] fills
/// once; a function called before that fails with a message rather than acting for no run.
#[derive(Clone, Default)]
pub(super) struct RunCell(Arc<OnceLock<Arc<RunState>>>);

impl RunCell {
    pub(super) fn get(&self) -> mlua::Result<&Arc<RunState>> {
        self.0
            .get()
            .ok_or_else(|| mlua::Error::runtime("the host API was called before its run began"))
    }
}

/// Starts a run with a new [`Vm`] on a thread where blocking is fine: the thread that made
/// the first state ahead when it still waits for a run, else tokio's blocking pool. `work`
/// gets the VM (or why it could not be made); its value comes back on the receiver, which
/// fails if `work` panicked. The VM is closed after its value was sent, so that closing it
/// (freeing every Lua object) is not on the caller's path.
pub fn spawn<T: Send + 'static>(
    host: Arc<dyn Caller>,
    handle: tokio::runtime::Handle,
    ctx: CallContext,
    options: VmOptions,
    work: impl FnOnce(Result<&Vm>) -> T + Send + 'static,
) -> tokio::sync::oneshot::Receiver<T> {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    let pool = handle.clone();
    let job: ahead::Job = Box::new(move |fresh| {
        // the ahead thread is not one of the runtime's: tool calls and timers need its context
        let _context = handle.enter();
        match Vm::from_fresh(fresh, host, handle.clone(), ctx, options) {
            Ok(vm) => {
                let _ = sender.send(work(Ok(&vm)));
                drop(vm);
            }
            Err(e) => {
                let _ = sender.send(work(Err(e)));
            }
        }
    });
    if let Err(job) = ahead::submit(job) {
        drop(pool.spawn_blocking(move || job(ahead::take())));
    }
    receiver
}

/// A sandboxed Lua state with the host API installed.
pub struct Vm {
    lua: Lua,
    env: Table,
    runner: Function,
    state: Arc<RunState>,
}

impl Vm {
    /// Builds a fresh sandbox whose tool calls run in children of `ctx`.
    pub fn new(
        host: Arc<dyn Caller>,
        handle: tokio::runtime::Handle,
        ctx: CallContext,
        options: VmOptions,
    ) -> Result<Vm> {
        Vm::from_fresh(ahead::take(), host, handle, ctx, options)
    }

    /// [`Vm::new`] on a state made already (or on one made now, when `None`).
    fn from_fresh(
        fresh: Option<Fresh>,
        host: Arc<dyn Caller>,
        handle: tokio::runtime::Handle,
        ctx: CallContext,
        options: VmOptions,
    ) -> Result<Vm> {
        let ctx = ctx.in_run(options.limits.memory);
        // a Lua program nested in another draws on the run's memory, not a limit of its own
        let lua_share = match ctx.host_memory() {
            Some(m) => m.lua_state(options.limits.memory)?,
            None => HostMemory::new(options.limits.memory).lua_state(options.limits.memory)?,
        };
        let memory = lua_share.limit();
        let script_error = |e| lua_error(e, memory);
        let Fresh {
            lua,
            env,
            runner,
            bind,
            run,
        } = match fresh {
            Some(fresh) => fresh,
            None => Fresh::make().map_err(script_error)?,
        };
        let state = Arc::new(RunState {
            host,
            handle,
            ctx: Mutex::new(ctx),
            interrupted: AtomicBool::new(false),
            expired: Arc::new(AtomicBool::new(false)),
            timer: Mutex::new(None),
            why: Mutex::new(None),
            previews: Mutex::new(Vec::new()),
            previews_held: Mutex::new(Vec::new()),
            output: options.output,
            captured: Mutex::new(String::new()),
            captured_held: Mutex::new(None),
            output_cap: options.limits.output,
            truncated: AtomicBool::new(false),
            printed: std::sync::atomic::AtomicUsize::new(0),
            modules: options.modules,
            memory_limit: memory,
            _lua_share: lua_share,
            recording: AtomicBool::new(false),
            called: Mutex::new(Vec::new()),
            connected: Mutex::new(Vec::new()),
        });
        if run.0.set(Arc::clone(&state)).is_err() {
            unreachable!("a fresh state is bound to one run, once");
        }
        let params = convert::to_lua(&lua, &Json::Object(options.params)).map_err(script_error)?;
        let config = match options.config {
            Some(config) => convert::to_lua(&lua, &Json::Object(config)).map_err(script_error)?,
            None => Value::Nil,
        };
        bind.call::<()>((params, config)).map_err(script_error)?;
        let hook_state = Arc::clone(&state);
        super::hook::install(
            &lua,
            HOOK_EVERY,
            Box::new(move |call| {
                if call && !hook_state.expired.load(Ordering::Relaxed) {
                    return None;
                }
                hook_state.poll().map(|why| hook_state.message(why))
            }),
        )
        .map_err(script_error)?;
        lua.set_memory_limit(memory).map_err(script_error)?;
        state.arm_timer();
        Ok(Vm {
            lua,
            env,
            runner,
            state,
        })
    }

    /// Replaces the context for the next runs (the REPL: a new cancellation token per line, the
    /// mode chosen with `/confirm`). Clears a previous interruption.
    pub fn set_context(&self, ctx: CallContext) {
        *self.state.ctx.lock().unwrap_or_else(|p| p.into_inner()) =
            ctx.in_run(self.state.memory_limit);
        *self.state.why.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.state.interrupted.store(false, Ordering::Relaxed);
        self.state.arm_timer();
        // the print bound is per run: each REPL line starts afresh
        self.state.printed.store(0, Ordering::Relaxed);
    }

    /// Runs a chunk and returns its outcome (value, previews, captured output).
    pub fn run(&self, source: &str, chunk_name: &str) -> Result<ScriptOutcome> {
        let value = self.exec(source, chunk_name)?;
        let values: Vec<Value> = value.into_iter().collect();
        let json = match values.len() {
            0 => Json::Null,
            1 => convert::to_json(&self.lua, &values[0]).map_err(|m| Error::Script {
                message: format!("the script's result cannot be returned: {m}"),
            })?,
            _ => {
                let mut out = Vec::new();
                for v in &values {
                    out.push(convert::to_json(&self.lua, v).map_err(|m| Error::Script {
                        message: format!("the script's result cannot be returned: {m}"),
                    })?);
                }
                Json::Array(out)
            }
        };
        Ok(ScriptOutcome {
            value: json,
            previews: self.take_previews(),
            output: self.take_output(),
        })
    }

    /// Compiles and runs a chunk in the sandbox; the values it returned.
    pub fn exec(&self, source: &str, chunk_name: &str) -> Result<MultiValue> {
        self.exec_in(source, chunk_name, &self.env)
    }

    /// [`Vm::exec`] with another environment for the chunk (the REPL's session scope, which
    /// reaches the script environment through its metatable).
    pub fn exec_in(&self, source: &str, chunk_name: &str, env: &Table) -> Result<MultiValue> {
        let f = self.compile_in(source, chunk_name, env)?;
        let result = self.runner.call::<MultiValue>(f);
        if let Some(e) = self.state.interruption_error() {
            return Err(e);
        }
        let mut values = result
            .map_err(|e| lua_error(e, self.state.memory_limit))?
            .into_iter();
        match values.next() {
            Some(Value::Boolean(true)) => Ok(values.collect()),
            _ => {
                let err = values.next().unwrap_or(Value::Nil);
                let message = match &err {
                    Value::String(s) => s.to_string_lossy(),
                    Value::Error(e) => e.to_string(),
                    other => format!("{other:?}"),
                };
                if message.contains("not enough memory") {
                    return Err(memory_error(self.state.memory_limit));
                }
                let message = clean_message(&message);
                // an uncaught tool error that was a refusal: the run was refused, as a JSON
                // step refused the same way
                let code = match values.next() {
                    Some(Value::String(code)) => code.to_string_lossy(),
                    _ => String::new(),
                };
                if crate::error::is_refusal(&code) {
                    Err(Error::ScriptRefused {
                        message,
                        refusal: code,
                    })
                } else {
                    Err(Error::Script { message })
                }
            }
        }
    }

    /// Compiles a chunk in text mode, in the script environment.
    pub fn compile(&self, source: &str, chunk_name: &str) -> Result<Function> {
        self.compile_in(source, chunk_name, &self.env)
    }

    /// [`Vm::compile`] with another environment for the chunk.
    pub fn compile_in(&self, source: &str, chunk_name: &str, env: &Table) -> Result<Function> {
        if let Some(message) = super::refuse_slow_source(source, chunk_name) {
            return Err(Error::Script { message });
        }
        self.lua
            .load(source)
            .set_name(format!("={chunk_name}"))
            .set_mode(ChunkMode::Text)
            .set_environment(env.clone())
            .into_function()
            .map_err(|e| match e {
                // worded as the library's checks word it (`check::compile_lua`)
                mlua::Error::SyntaxError { .. } => Error::Script {
                    message: clean_message(&format!("the program does not compile: {e}")),
                },
                e => lua_error(e, self.state.memory_limit),
            })
    }

    /// Whether compiling `source` fails only because the input ends too early (the REPL's
    /// continuation prompt).
    pub fn is_incomplete(&self, source: &str) -> bool {
        let incomplete = |src: &str| {
            matches!(
                self.lua.load(src).set_mode(ChunkMode::Text).into_function(),
                Err(mlua::Error::SyntaxError {
                    incomplete_input: true,
                    ..
                })
            )
        };
        let as_expr = format!("return {source}");
        let expr_ok = self
            .lua
            .load(as_expr.as_str())
            .set_mode(ChunkMode::Text)
            .into_function()
            .is_ok();
        !expr_ok
            && incomplete(source)
            && (incomplete(&as_expr) || !source.trim_start().starts_with("return"))
    }

    /// Notes from now on which tools the chunks call (for [`Vm::take_called`]).
    pub fn record_calls(&self) {
        self.state.recording.store(true, Ordering::Relaxed);
    }

    /// The tools called (whatever their outcome) since the last take, in order, each once.
    pub fn take_called(&self) -> Vec<String> {
        std::mem::take(&mut *self.state.called.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The hosts the `http_request` calls recorded so far named (`host` or `host:port`), taken.
    pub fn take_connected(&self) -> Vec<String> {
        std::mem::take(
            &mut *self
                .state
                .connected
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        )
    }

    /// The previews recorded so far, taken (the host memory they held goes with them).
    pub fn take_previews(&self) -> Vec<Preview> {
        self.state
            .previews_held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        std::mem::take(
            &mut *self
                .state
                .previews
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        )
    }

    /// The captured output so far, taken (the host memory it held goes with it).
    pub fn take_output(&self) -> String {
        *self
            .state
            .captured_held
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = None;
        std::mem::take(
            &mut *self
                .state
                .captured
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        )
    }

    /// The script environment (the REPL completes its keys).
    pub fn env(&self) -> &Table {
        &self.env
    }

    /// The Lua state.
    pub fn lua(&self) -> &Lua {
        &self.lua
    }
}

/// Host paths never appear in chunk names, but mlua may wrap messages in its own text; keep the
/// first line of a runtime error and drop mlua's traceback.
pub(super) fn clean_message(message: &str) -> String {
    let m = message.strip_prefix("runtime error: ").unwrap_or(message);
    match m.find("\nstack traceback:") {
        Some(i) => m[..i].to_string(),
        None => m.to_string(),
    }
}

fn memory_error(limit: usize) -> Error {
    Error::Limit {
        what: "the script ran out of memory (raise limits.lua_memory_mb in the config if it needs more)".into(),
        limit: format!("{} MiB", limit >> 20),
    }
}

/// Converts an mlua error; `memory_limit` is named when the state ran out of memory.
fn lua_error(e: mlua::Error, memory_limit: usize) -> Error {
    match e {
        mlua::Error::MemoryError(_) => memory_error(memory_limit),
        mlua::Error::SyntaxError { message, .. } => Error::Script { message },
        mlua::Error::CallbackError { cause, .. } => lua_error((*cause).clone(), memory_limit),
        other => Error::Script {
            message: clean_message(&other.to_string()),
        },
    }
}
