//! One sandboxed Lua state, its host API and its limits. See the module docs of `script`.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use mlua::chunk::ChunkMode;
use mlua::{Function, Lua, LuaOptions, LuaSerdeExt, MultiValue, StdLib, Table, Value};
use serde_json::{Map, Value as Json};

use super::{HOOK_EVERY, convert, patterns, stdlib};
use crate::error::{Error, Result};
use crate::gate::Caller;
use crate::gate::{CallContext, CallRequest, Outcome, Preview};
use crate::registry::Profile;

const PRELUDE: &str = include_str!("../../lua/prelude.lua");
/// The prelude compiled by `build.rs` with the VM this binary links; empty when built for
/// another target (see `build.rs`), and then the text is compiled at start.
const PRELUDE_BYTECODE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/prelude.luac"));

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
enum Interruption {
    Timeout,
    Cancelled,
}

/// `json.decode` takes text of at most this fraction of the Lua memory limit.
pub const JSON_DECODE_FRACTION: usize = 8;

/// How many times the capture limit a run may print to a terminal (`lmcp run`, the REPL).
pub const TERMINAL_OUTPUT_FACTOR: usize = 64;

/// State shared by the hook and the host API functions of one VM.
struct RunState {
    host: Arc<dyn Caller>,
    handle: tokio::runtime::Handle,
    ctx: Mutex<CallContext>,
    interrupted: AtomicBool,
    /// Set by the limit timer at the deadline or on cancellation: the call hook's cheap check.
    expired: Arc<AtomicBool>,
    /// The limit timer of the current context.
    timer: Mutex<Option<tokio::task::AbortHandle>>,
    why: Mutex<Option<Interruption>>,
    previews: Mutex<Vec<Preview>>,
    output: Output,
    captured: Mutex<String>,
    output_cap: usize,
    truncated: AtomicBool,
    /// Bytes printed to the terminal so far (bounded by [`TERMINAL_OUTPUT_FACTOR`] × the cap).
    printed: std::sync::atomic::AtomicUsize,
    modules: Vec<(String, String)>,
    memory_limit: usize,
    /// Whether tool calls are noted in `called` (the REPL, which keeps what a session tried).
    recording: AtomicBool,
    /// The tools called since the last [`Vm::take_called`], in order, each once.
    called: Mutex<Vec<String>>,
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
    fn poll(&self) -> Option<Interruption> {
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

    fn message(&self, why: Interruption) -> String {
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

    fn check(&self) -> mlua::Result<()> {
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
    fn write(&self, text: &str) -> mlua::Result<()> {
        match self.output {
            Output::Terminal => {
                self.count_printed(text.len())?;
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(text.as_bytes());
                let _ = out.flush();
            }
            Output::Capture => self.capture(text),
        }
        Ok(())
    }

    fn capture(&self, text: &str) {
        let mut buf = self.captured.lock().unwrap_or_else(|p| p.into_inner());
        let room = self.output_cap.saturating_sub(buf.len());
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

    fn log(&self, level: &str, message: &str) -> mlua::Result<()> {
        match self.output {
            Output::Terminal => {
                self.count_printed(level.len() + message.len() + 3)?;
                errln!("{level}: {message}");
            }
            Output::Capture => self.capture(&format!("[{level}] {message}\n")),
        }
        Ok(())
    }
}

/// The run a state's host functions act for. A state is made before its run is known (ahead,
/// on another core), so its functions reach the run through this cell, which [`Vm::new`] fills
/// once; a function called before that fails with a message rather than acting for no run.
#[derive(Clone, Default)]
struct RunCell(Arc<OnceLock<Arc<RunState>>>);

impl RunCell {
    fn get(&self) -> mlua::Result<&Arc<RunState>> {
        self.0
            .get()
            .ok_or_else(|| mlua::Error::runtime("the host API was called before its run began"))
    }
}

/// A Lua state with its standard libraries opened, the host API installed and the prelude run:
/// everything of a [`Vm`] that needs neither the host nor the run. The run's own values (the
/// state behind the API, `params`, `config`) are bound by [`Vm::new`].
struct Fresh {
    lua: Lua,
    env: Table,
    runner: Function,
    /// The prelude's `bind(params, config)`.
    bind: Function,
    run: RunCell,
}

impl Fresh {
    fn make() -> mlua::Result<Fresh> {
        // the libraries a script may use (`require` and `io` are the prelude's own, narrowed)
        let libs = StdLib::TABLE
            | StdLib::STRING
            | StdLib::MATH
            | StdLib::UTF8
            | StdLib::COROUTINE
            | StdLib::OS;
        let lua = Lua::new_with(libs, LuaOptions::new())?;
        // all it makes here lives as long as the state: a collection would find nothing to free
        lua.gc_stop();
        let prelude = load_prelude(&lua)?;
        let run = RunCell::default();
        let api = build_api(&lua, &run)?;
        let (env, runner, bind): (Table, Function, Function) = prelude.call(api)?;
        // Nothing the prelude kept in the real globals may stay reachable.
        let globals = lua.globals();
        let mut keys = Vec::new();
        globals.for_each::<Value, Value>(|k, _| {
            keys.push(k);
            Ok(())
        })?;
        for k in keys {
            globals.raw_set(k, Value::Nil)?;
        }
        lua.gc_restart();
        Ok(Fresh {
            lua,
            env,
            runner,
            bind,
            run,
        })
    }
}

/// The prelude as a function: its bytecode when the build made it, else its text compiled.
fn load_prelude(lua: &Lua) -> mlua::Result<Function> {
    if !PRELUDE_BYTECODE.is_empty() {
        let loaded = lua
            .load(PRELUDE_BYTECODE)
            .set_name("=prelude")
            .set_mode(ChunkMode::Binary)
            .into_function();
        // the build's bytecode always loads (a test holds it to that); were it refused, the
        // text still is the same program
        if let Ok(prelude) = loaded {
            return Ok(prelude);
        }
    }
    lua.load(PRELUDE)
        .set_name("=prelude")
        .set_mode(ChunkMode::Text)
        .into_function()
}

/// One [`Fresh`] state made ahead, on another core while the CLI parses its arguments and
/// opens the host, and the first run done on that same thread (no thread is started for it and
/// the state changes no hands). The first [`spawn`] runs there while the thread waits; the
/// first [`Vm::new`] elsewhere takes the state; every later one (and any when none was made)
/// makes its own.
pub mod ahead {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Condvar, Mutex};
    use std::time::{Duration, Instant};

    use super::Fresh;

    /// A run handed to the thread that made the state: it gets the state, or `None` when making
    /// it failed (the run then makes its own and reports what went wrong).
    pub(super) type Job = Box<dyn FnOnce(Option<Fresh>) + Send>;

    enum Slot {
        Empty,
        Making,
        Ready(Fresh),
    }

    struct Inner {
        slot: Slot,
        /// A run waiting for the state, on the thread that makes it.
        job: Option<Job>,
        /// Whether the thread that makes the state still takes a run after it.
        serving: bool,
    }

    /// A slot for one state, the run it is for, and the signal that either changed (one per
    /// process: [`SLOT`]).
    pub(super) struct Ahead {
        inner: Mutex<Inner>,
        changed: Condvar,
        /// Set with every run handed over and every state taken: what a thread spinning for
        /// a run watches (see [`Ahead::serve`]).
        poked: AtomicBool,
    }

    pub(super) static SLOT: Ahead = Ahead::new();

    impl Ahead {
        pub(super) const fn new() -> Ahead {
            Ahead {
                inner: Mutex::new(Inner {
                    slot: Slot::Empty,
                    job: None,
                    serving: false,
                }),
                changed: Condvar::new(),
                poked: AtomicBool::new(false),
            }
        }

        fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
            self.inner.lock().unwrap_or_else(|p| p.into_inner())
        }

        fn set(&self, slot: Slot) {
            self.lock().slot = slot;
            self.changed.notify_all();
        }

        /// Says a state is on its way (and, with `serving`, that its thread takes a run after).
        pub(super) fn expect(&self, serving: bool) {
            let mut inner = self.lock();
            inner.slot = Slot::Making;
            inner.serving = serving;
        }

        pub(super) fn make(&self, make: impl FnOnce() -> mlua::Result<Fresh>) {
            // a failure or a panic empties the slot, so that no one waits for it for ever
            struct Unblock<'a>(&'a Ahead);
            impl Drop for Unblock<'_> {
                fn drop(&mut self) {
                    let mut inner = self.0.lock();
                    if matches!(inner.slot, Slot::Making) {
                        inner.slot = Slot::Empty;
                    }
                    drop(inner);
                    self.0.changed.notify_all();
                }
            }
            let _unblock = Unblock(self);
            if let Ok(fresh) = make() {
                self.set(Slot::Ready(fresh));
            }
        }

        /// Makes the state, then runs the run handed over meanwhile or later with it; returns
        /// once the state was taken elsewhere instead, or making it failed with no run waiting.
        /// For up to `spin` it watches for the run on its CPU rather than sleep: waking a
        /// sleeping thread on another CPU took 40 to 280 us here, a good part of a one-line
        /// `lmcp run` (give `ZERO` when this thread shares its CPU with the one it waits for).
        pub(super) fn serve(&self, make: impl FnOnce() -> mlua::Result<Fresh>, spin: Duration) {
            struct Done<'a>(&'a Ahead);
            impl Drop for Done<'_> {
                fn drop(&mut self) {
                    // no run handed over from now on runs here (nor waits for this thread)
                    self.0.lock().serving = false;
                }
            }
            let _done = Done(self);
            self.make(make);
            let until = Instant::now() + spin;
            while !self.poked.load(Ordering::Acquire) && Instant::now() < until {
                std::hint::spin_loop();
            }
            let mut inner = self.lock();
            loop {
                if let Some(job) = inner.job.take() {
                    let fresh = match std::mem::replace(&mut inner.slot, Slot::Empty) {
                        Slot::Ready(fresh) => Some(fresh),
                        _ => None,
                    };
                    inner.serving = false;
                    drop(inner);
                    job(fresh);
                    return;
                }
                if !matches!(inner.slot, Slot::Ready(_)) {
                    return;
                }
                inner = self.changed.wait(inner).unwrap_or_else(|p| p.into_inner());
            }
        }

        /// Hands a run to the thread that makes (or made) the state; the run back when that
        /// thread takes none any more.
        pub(super) fn submit(&self, job: Job) -> Result<(), Job> {
            let mut inner = self.lock();
            if inner.serving
                && inner.job.is_none()
                && matches!(inner.slot, Slot::Making | Slot::Ready(_))
            {
                inner.job = Some(job);
                drop(inner);
                self.poked.store(true, Ordering::Release);
                self.changed.notify_all();
                Ok(())
            } else {
                Err(job)
            }
        }

        pub(super) fn take(&self) -> Option<Fresh> {
            let mut inner = self.lock();
            while matches!(inner.slot, Slot::Making) {
                inner = self.changed.wait(inner).unwrap_or_else(|p| p.into_inner());
            }
            let taken = match std::mem::replace(&mut inner.slot, Slot::Empty) {
                Slot::Ready(fresh) => Some(fresh),
                _ => None,
            };
            drop(inner);
            // the thread that made it stops waiting for a run
            self.poked.store(true, Ordering::Release);
            self.changed.notify_all();
            taken
        }
    }

    /// Makes the first state on a thread of its own, which then does the first run handed to
    /// it with [`submit`]. A process that never runs Lua never waits for it (the thread ends
    /// with the process).
    pub fn start() {
        SLOT.expect(true);
        let cpus = cpu::Elsewhere::here();
        let spawned = std::thread::Builder::new()
            .name("lua-ahead".into())
            .spawn(move || {
                cpus.leave();
                SLOT.serve(
                    || {
                        let made = Fresh::make();
                        // the run may go where the scheduler likes
                        cpus.release();
                        made
                    },
                    cpus.spin(),
                )
            });
        match spawned {
            Ok(thread) => cpus.send(&thread),
            Err(_) => {
                // no thread to make it on: the run makes its own
                SLOT.expect(false);
                SLOT.set(Slot::Empty);
            }
        }
    }

    /// Another CPU for the thread that makes the state. Linux starts a new thread on the CPU
    /// of the thread that made it, where it waits for that one to block: measured, the state
    /// began to be made only once the host was open and the run asked for it, so nothing was
    /// made ahead at all. Sent to another CPU (when the process may use one), it is made
    /// while this thread reads the command line and opens the host; once made, the thread may
    /// run anywhere again.
    pub(in crate::script::vm) mod cpu {
        /// The longest a thread with a CPU of its own spins for its run, once per process: the
        /// run was handed over 0.05 to 0.3 ms after the state was made (a one-line `lmcp run`).
        #[cfg(target_os = "linux")]
        const SPIN: std::time::Duration = std::time::Duration::from_millis(1);

        #[cfg(target_os = "linux")]
        #[derive(Clone, Copy)]
        pub(in crate::script::vm) struct Elsewhere {
            /// The CPUs this process may use, and those of them other than the starting
            /// thread's; `None` when there are no others.
            sets: Option<(libc::cpu_set_t, libc::cpu_set_t)>,
        }

        #[cfg(target_os = "linux")]
        impl Elsewhere {
            const SIZE: usize = std::mem::size_of::<libc::cpu_set_t>();

            /// The CPUs around the calling thread, which is about to start the other.
            pub(in crate::script::vm) fn here() -> Elsewhere {
                // SAFETY: plain system calls on zeroed sets of the size they are told
                let sets = unsafe {
                    let mut all: libc::cpu_set_t = std::mem::zeroed();
                    let here = libc::sched_getcpu();
                    if libc::sched_getaffinity(0, Self::SIZE, &mut all) != 0 || here < 0 {
                        None
                    } else {
                        let mut others = all;
                        libc::CPU_CLR(here as usize, &mut others);
                        (libc::CPU_COUNT(&others) > 0).then_some((all, others))
                    }
                };
                Elsewhere { sets }
            }

            /// Moves the calling thread (the new one) off the starting thread's CPU: the first
            /// thing it does, as it may have started there ahead of the starting thread.
            pub(in crate::script::vm) fn leave(&self) {
                if let Some((_, others)) = &self.sets {
                    // SAFETY: a system call on the calling thread with a full-sized set
                    unsafe {
                        libc::sched_setaffinity(0, Self::SIZE, others);
                    }
                }
            }

            /// Moves `thread` off this CPU, from the starting thread, in case it has not run yet.
            pub(in crate::script::vm) fn send(&self, thread: &std::thread::JoinHandle<()>) {
                use std::os::unix::thread::JoinHandleExt;
                if let Some((_, others)) = &self.sets {
                    // SAFETY: the thread handle is alive (a thread that ended already makes
                    // the call fail, which is fine: it no longer needs a CPU)
                    unsafe {
                        libc::pthread_setaffinity_np(thread.as_pthread_t(), Self::SIZE, others);
                    }
                }
            }

            /// How long the thread may spin for its run: a while when it has a CPU of its own.
            pub(in crate::script::vm) fn spin(&self) -> std::time::Duration {
                match self.sets {
                    Some(_) => SPIN,
                    None => std::time::Duration::ZERO,
                }
            }

            /// Lets the calling thread run on every CPU the process may use again.
            pub(in crate::script::vm) fn release(&self) {
                if let Some((all, _)) = &self.sets {
                    // SAFETY: a system call on the calling thread with a full-sized set
                    unsafe {
                        libc::sched_setaffinity(0, Self::SIZE, all);
                    }
                }
            }
        }

        #[cfg(not(target_os = "linux"))]
        #[derive(Clone, Copy)]
        pub(in crate::script::vm) struct Elsewhere;

        #[cfg(not(target_os = "linux"))]
        impl Elsewhere {
            pub(in crate::script::vm) fn here() -> Elsewhere {
                Elsewhere
            }
            pub(in crate::script::vm) fn leave(&self) {}
            pub(in crate::script::vm) fn send(&self, _: &std::thread::JoinHandle<()>) {}
            pub(in crate::script::vm) fn spin(&self) -> std::time::Duration {
                std::time::Duration::ZERO
            }
            pub(in crate::script::vm) fn release(&self) {}
        }
    }

    /// Hands a run to the thread [`start`] began, to do with the state made there; the run
    /// back when that thread takes none (there is none, or it already did one, or its state
    /// was taken by [`take`]).
    pub(super) fn submit(job: Job) -> Result<(), Job> {
        SLOT.submit(job)
    }

    /// The state made ahead, waiting for it if it is on its way; `None` when there is none.
    pub(super) fn take() -> Option<Fresh> {
        SLOT.take()
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
        let memory = options.limits.memory;
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
            output: options.output,
            captured: Mutex::new(String::new()),
            output_cap: options.limits.output,
            truncated: AtomicBool::new(false),
            printed: std::sync::atomic::AtomicUsize::new(0),
            modules: options.modules,
            memory_limit: options.limits.memory,
            recording: AtomicBool::new(false),
            called: Mutex::new(Vec::new()),
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
        lua.set_memory_limit(options.limits.memory)
            .map_err(script_error)?;
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
        *self.state.ctx.lock().unwrap_or_else(|p| p.into_inner()) = ctx;
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
        let f = self.compile(source, chunk_name)?;
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
        if let Some(message) = super::refuse_slow_source(source, chunk_name) {
            return Err(Error::Script { message });
        }
        self.lua
            .load(source)
            .set_name(format!("={chunk_name}"))
            .set_mode(ChunkMode::Text)
            .set_environment(self.env.clone())
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

    /// The previews recorded so far, taken.
    pub fn take_previews(&self) -> Vec<Preview> {
        std::mem::take(
            &mut *self
                .state
                .previews
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        )
    }

    /// The captured output so far, taken.
    pub fn take_output(&self) -> String {
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
fn clean_message(message: &str) -> String {
    let m = message.strip_prefix("runtime error: ").unwrap_or(message);
    match m.find("\nstack traceback:") {
        Some(i) => m[..i].to_string(),
        None => m.to_string(),
    }
}

/// An error a host function raised, as a script sees it: the message, after the script's
/// position when the traceback names one (`name.lua:3: bad argument #1: ...`).
fn error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { traceback, cause } => {
            let message = error_text(cause);
            match script_position(traceback) {
                Some(at) => format!("{at} {message}"),
                None => message,
            }
        }
        other => clean_message(&other.to_string()),
    }
}

/// The first frame of a traceback that is the script's own (not C, not the prelude), as
/// `chunk:line:`.
fn script_position(traceback: &str) -> Option<&str> {
    traceback
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("[C]") && !l.starts_with("prelude:"))
        .find_map(|l| {
            // `chunk:LINE: in ...`: the first `:` followed by digits and another `:`
            l.match_indices(':').find_map(|(i, _)| {
                let rest = &l[i + 1..];
                let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
                (digits > 0 && rest.as_bytes().get(digits) == Some(&b':'))
                    .then(|| &l[..i + 1 + digits + 1])
            })
        })
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

/// The error table a failed tool call raises: `{code=, message=, tool=}` (and `details=` when
/// the error has them).
fn error_table(lua: &Lua, code: &str, message: &str, tool: &str) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("code", code)?;
    t.raw_set("message", message)?;
    t.raw_set("tool", tool)?;
    Ok(t)
}

fn build_api(lua: &Lua, run: &RunCell) -> mlua::Result<Table> {
    let api = lua.create_table()?;

    let s = run.clone();
    api.set(
        "check",
        lua.create_function(move |lua, mut args: MultiValue| {
            s.get()?.check()?;
            // what `pcall` caught from a host function is mlua's error value: the script gets
            // its message, with the script's line, as for any error Lua raises
            if matches!(args.front(), Some(Value::Boolean(false)))
                && let Some(Value::Error(e)) = args.get(1)
            {
                let text = lua.create_string(error_text(e))?;
                args[1] = Value::String(text);
            }
            Ok(args)
        })?,
    )?;
    let s = run.clone();
    api.set(
        "interrupted",
        lua.create_function(move |_, ()| Ok(s.get()?.poll().is_some()))?,
    )?;

    let s = run.clone();
    api.set(
        "write",
        lua.create_function(move |_, text: mlua::LuaString| {
            s.get()?.write(&text.to_string_lossy())
        })?,
    )?;
    let s = run.clone();
    api.set(
        "log",
        lua.create_function(move |_, (level, text): (String, mlua::LuaString)| {
            s.get()?.log(&level, &text.to_string_lossy())
        })?,
    )?;

    let s = run.clone();
    api.set(
        "sleep",
        lua.create_function(move |_, seconds: f64| {
            if !(seconds >= 0.0 && seconds.is_finite()) {
                return Err(mlua::Error::runtime("sleep: seconds must be a number ≥ 0"));
            }
            let s = s.get()?;
            s.check()?;
            let ctx = s.ctx.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let mut until = Instant::now() + Duration::from_secs_f64(seconds.min(1e9));
            if let Some(d) = ctx.deadline() {
                until = until.min(d);
            }
            s.handle.block_on(async {
                tokio::select! {
                    _ = tokio::time::sleep_until(until.into()) => {}
                    _ = ctx.cancel_token().cancelled() => {}
                }
            });
            s.check()
        })?,
    )?;

    let s = run.clone();
    api.set(
        "call",
        lua.create_function(move |lua, (name, args): (mlua::LuaString, Value)| {
            call_tool(lua, s.get()?, &name.to_str()?, &args)
        })?,
    )?;

    let s = run.clone();
    api.set(
        "tool_exists",
        lua.create_function(move |_, name: String| {
            Ok(s.get()?.host.registry().get(&name).is_some())
        })?,
    )?;
    let s = run.clone();
    api.set(
        "unknown_tool",
        lua.create_function(move |_, name: String| {
            let e = Error::UnknownTool {
                suggestions: s.get()?.host.registry().closest(&name),
                name,
            };
            Ok(format!("tools: {e}"))
        })?,
    )?;
    let s = run.clone();
    api.set(
        "tool_list",
        lua.create_function(move |lua, ()| {
            let host = &s.get()?.host;
            let list: Vec<Json> = host
                .registry()
                .in_profile(Profile::Full, &host.config(), host.transport())
                .iter()
                .map(|(t, a)| {
                    let sp = t.spec();
                    serde_json::json!({
                        "name": sp.name, "title": sp.title, "description": sp.description,
                        "effect": sp.effect, "kind": sp.kind, "available": a.is_available(),
                        "annotations": sp.annotations,
                        "input_schema": sp.input_schema,
                    })
                })
                .collect();
            convert::to_lua(lua, &Json::Array(list))
        })?,
    )?;
    let s = run.clone();
    api.set(
        "previews",
        lua.create_function(move |lua, ()| {
            let list: Vec<Json> = s
                .get()?
                .previews
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .map(Preview::to_json)
                .collect();
            convert::to_lua(lua, &Json::Array(list))
        })?,
    )?;

    api.set(
        "json_encode",
        // (true, text), or (false, message) for the prelude to raise at the script's line
        lua.create_function(|lua, (v, opts): (Value, Option<Value>)| {
            let refused = |m: String| refusal(lua, format!("json.encode: {m}"));
            let j = match convert::to_json(lua, &v) {
                Ok(j) => j,
                Err(m) => return refused(m),
            };
            let pretty = match opts {
                Some(Value::Boolean(b)) => b,
                Some(Value::Table(t)) => t.raw_get::<Option<bool>>("pretty")?.unwrap_or(false),
                _ => false,
            };
            let text = if pretty {
                serde_json::to_string_pretty(&j)
            } else {
                serde_json::to_string(&j)
            };
            match text {
                Ok(text) => Ok((true, Value::String(lua.create_string(text)?))),
                Err(e) => refused(e.to_string()),
            }
        })?,
    )?;
    let s = run.clone();
    api.set(
        "json_decode",
        // (true, value), or (false, message) for the prelude to raise at the script's line
        lua.create_function(move |lua, text: mlua::LuaString| {
            let memory = s.get()?.memory_limit;
            let refused = |m: String| refusal(lua, format!("json.decode: {m}"));
            // The parsed value lives outside the Lua memory limit until it is converted (at
            // tens of bytes per element), so the text it comes from is bounded by that limit.
            let limit = memory / JSON_DECODE_FRACTION;
            if text.as_bytes().len() > limit {
                return refused(format!(
                    "the text is {} bytes; at most {limit} can be decoded (1/{} of \
                     limits.lua_memory_mb)",
                    text.as_bytes().len(),
                    JSON_DECODE_FRACTION
                ));
            }
            match serde_json::from_slice::<Json>(&text.as_bytes()) {
                Ok(j) => Ok((true, convert::to_lua(lua, &j)?)),
                Err(e) => refused(e.to_string()),
            }
        })?,
    )?;
    api.set("null", lua.null())?;
    api.set("array_mt", lua.array_metatable())?;
    api.set("version", env!("CARGO_PKG_VERSION"))?;

    let s = run.clone();
    api.set(
        "module_source",
        lua.create_function(move |_, name: String| {
            Ok(match stdlib::module_source(&name, &s.get()?.modules) {
                Ok((src, chunk)) => (Some(src), chunk),
                Err(msg) => (None, msg),
            })
        })?,
    )?;

    api.set("patterns", pattern_api(lua, run)?)?;
    api.set(
        "source_check",
        lua.create_function(|_, (src, name): (mlua::LuaString, Option<String>)| {
            let name = name.unwrap_or_else(|| "chunk".into());
            Ok(super::refuse_slow_source(
                &src.to_string_lossy(),
                name.trim_start_matches(['=', '@']),
            ))
        })?,
    )?;
    Ok(api)
}

/// Runs a call from the Lua thread (never a runtime thread) to its end: polled once in the
/// runtime's context first, since most calls finish at once and need no parking, then, if it
/// waits on something, driven by `block_on`.
fn run_to_end<F: std::future::Future>(handle: &tokio::runtime::Handle, call: F) -> F::Output {
    let mut call = std::pin::pin!(call);
    let first = {
        let _in_runtime = handle.enter();
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        call.as_mut().poll(&mut cx)
    };
    match first {
        std::task::Poll::Ready(out) => out,
        std::task::Poll::Pending => handle.block_on(call),
    }
}

fn call_tool(
    lua: &Lua,
    s: &Arc<RunState>,
    name: &str,
    args: &Value,
) -> mlua::Result<(bool, Value)> {
    s.check()?;
    if s.recording.load(Ordering::Relaxed) {
        let mut called = s.called.lock().unwrap_or_else(|p| p.into_inner());
        if !called.iter().any(|c| c == name) {
            called.push(name.to_string());
        }
    }
    let fail = |code: &str, message: &str| -> mlua::Result<(bool, Value)> {
        Ok((false, Value::Table(error_table(lua, code, message, name)?)))
    };
    let json = match args {
        // `tools.NAME()`: no arguments
        Value::Nil => Ok(Json::Object(Map::new())),
        Value::Table(_) => convert::to_json(lua, args),
        other => {
            return refusal(
                lua,
                format!(
                    "tools.{name} expects a table of arguments, got {}",
                    lua_type_name(other)
                ),
            );
        }
    };
    let mut json = match json {
        Ok(j) => j,
        Err(m) => {
            return fail(
                "invalid_args",
                &format!("invalid arguments for `{name}`: {m}"),
            );
        }
    };
    let ctx = s.ctx.lock().unwrap_or_else(|p| p.into_inner()).child();
    let request = match s.host.registry().get(name) {
        Some(tool) => {
            convert::coerce_empty_arrays(&mut json, &tool.spec().input_schema);
            CallRequest::to_tool(tool, json, ctx)
        }
        None => CallRequest::new(name, json, ctx),
    };
    let outcome = run_to_end(&s.handle, s.host.call(request));
    match outcome {
        Outcome::Done(v) => Ok((true, convert::to_lua(lua, &v)?)),
        Outcome::Preview(p) => {
            let v = convert::to_lua(lua, &p.to_json())?;
            s.previews.lock().unwrap_or_else(|p| p.into_inner()).push(p);
            Ok((true, v))
        }
        Outcome::Denied { reason, .. } => fail("denied", &format!("`{name}` was denied: {reason}")),
        Outcome::NeedsConfirmation { reason, .. } => fail(
            "needs_confirmation",
            &format!("`{name}` needs confirmation: {reason}"),
        ),
        Outcome::Failed(e) => {
            // An interrupted run must stop, not hand the script a catchable tool error.
            s.check()?;
            let t = error_table(lua, e.caller_class(), &e.to_string(), name)?;
            if let Some(d) = e.details() {
                // The completed steps of a failed program: a script can inspect side effects.
                t.raw_set("details", convert::to_lua(lua, &d)?)?;
            }
            Ok((false, Value::Table(t)))
        }
    }
}

/// `(false, message)`: a refusal the prelude raises as a plain message at the script's line.
fn refusal(lua: &Lua, message: String) -> mlua::Result<(bool, Value)> {
    Ok((false, Value::String(lua.create_string(message)?)))
}

/// What Lua's `type` says of a value.
fn lua_type_name(v: &Value) -> &'static str {
    match v {
        Value::Integer(_) | Value::Number(_) => "number",
        Value::LightUserData(_) | Value::UserData(_) | Value::Error(_) | Value::Other(_) => {
            "userdata"
        }
        other => other.type_name(),
    }
}

fn pattern_api(lua: &Lua, run: &RunCell) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let stopper = |run: &RunCell| {
        let run = run.clone();
        move || {
            let s = run.get().ok()?;
            s.poll().map(|why| s.message(why))
        }
    };
    for (key, find) in [("find", true), ("match", false)] {
        let stop = stopper(run);
        t.set(
            key,
            lua.create_function(
                move |lua,
                      (s, p, init, plain): (
                    mlua::LuaString,
                    mlua::LuaString,
                    Option<i64>,
                    Option<Value>,
                )| {
                    let plain =
                        plain.is_some_and(|v| !matches!(v, Value::Nil | Value::Boolean(false)));
                    patterns::find_aux(lua, &s.as_bytes(), &p.as_bytes(), init, plain, find, &stop)
                },
            )?,
        )?;
    }
    let stop: Arc<dyn Fn() -> Option<String> + Send + Sync> = Arc::new(stopper(run));
    t.set(
        "gmatch",
        lua.create_function(
            move |lua, (s, p, init): (mlua::LuaString, mlua::LuaString, Option<i64>)| {
                patterns::gmatch(lua, s, p, init, Arc::clone(&stop))
            },
        )?,
    )?;
    let stop = stopper(run);
    t.set(
        "gsub",
        lua.create_function(
            move |lua, (s, p, repl, n): (mlua::LuaString, mlua::LuaString, Value, Option<i64>)| {
                let repl = match repl {
                    Value::String(r) => patterns::Replacement::Text(r.as_bytes().to_vec()),
                    Value::Integer(i) => patterns::Replacement::Text(i.to_string().into_bytes()),
                    Value::Number(f) => {
                        patterns::Replacement::Text(patterns::lua_number_string(f).into_bytes())
                    }
                    Value::Table(t) => patterns::Replacement::Table(t),
                    Value::Function(f) => patterns::Replacement::Function(f),
                    other => {
                        return Err(mlua::Error::runtime(format!(
                            "bad argument #3 to 'gsub' (string/function/table expected, got {})",
                            other.type_name()
                        )));
                    }
                };
                patterns::gsub(lua, &s.as_bytes(), &p.as_bytes(), &repl, n, &stop)
            },
        )?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::Fresh;
    use super::ahead::Ahead;

    #[test]
    fn a_state_made_ahead_is_waited_for_and_taken_once() {
        let ahead = Arc::new(Ahead::new());
        assert!(
            ahead.take().is_none(),
            "nothing announced: nothing to wait for"
        );
        ahead.expect(false);
        let maker = Arc::clone(&ahead);
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            maker.make(Fresh::make);
        });
        // announced but not made yet: the taker waits for it rather than getting nothing
        let fresh = ahead.take().expect("the announced state");
        assert!(
            fresh.env.contains_key("tools").unwrap(),
            "the prelude ran: the script environment is there"
        );
        assert!(ahead.take().is_none(), "taken once");
        thread.join().unwrap();
    }

    /// What a handed-over run got, and on which thread it ran.
    fn handed_over(
        ahead: &Arc<Ahead>,
    ) -> (
        Result<(), super::ahead::Job>,
        std::sync::mpsc::Receiver<(bool, std::thread::ThreadId)>,
    ) {
        let (sender, receiver) = std::sync::mpsc::channel();
        let job: super::ahead::Job = Box::new(move |fresh| {
            let _ = sender.send((fresh.is_some(), std::thread::current().id()));
        });
        (ahead.submit(job), receiver)
    }

    #[test]
    fn a_run_handed_over_runs_with_the_state_on_the_thread_that_made_it() {
        let ahead = Arc::new(Ahead::new());
        ahead.expect(true);
        let server = Arc::clone(&ahead);
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            server.serve(Fresh::make, Duration::ZERO);
        });
        let maker = thread.thread().id();
        // handed over while the state is still being made
        let (submitted, ran) = handed_over(&ahead);
        assert!(submitted.is_ok());
        assert_eq!(
            ran.recv().unwrap(),
            (true, maker),
            "with the state, on its thread"
        );
        thread.join().unwrap();
        // one run only: the next is handed back, for a thread of its own
        assert!(handed_over(&ahead).0.is_err());
        assert!(ahead.take().is_none(), "the state went with the run");
    }

    #[test]
    fn a_state_taken_elsewhere_ends_the_wait_for_a_run_and_hands_later_runs_back() {
        let ahead = Arc::new(Ahead::new());
        ahead.expect(true);
        let server = Arc::clone(&ahead);
        let thread =
            std::thread::spawn(move || server.serve(Fresh::make, Duration::from_millis(20)));
        assert!(ahead.take().is_some(), "Vm::new elsewhere takes the state");
        // the serving thread notices and ends, without a run
        thread.join().unwrap();
        assert!(handed_over(&ahead).0.is_err());
    }

    #[test]
    fn a_run_handed_over_while_making_fails_gets_no_state_and_still_runs() {
        let ahead = Arc::new(Ahead::new());
        ahead.expect(true);
        let (submitted, ran) = handed_over(&ahead);
        assert!(submitted.is_ok());
        let server = Arc::clone(&ahead);
        std::thread::spawn(move || {
            server.serve(|| Err(mlua::Error::runtime("no memory")), Duration::ZERO)
        })
        .join()
        .unwrap();
        assert!(!ran.recv().unwrap().0, "no state: the run makes its own");
        // a maker that panics with no run waiting leaves nothing waiting either
        ahead.expect(true);
        let server = Arc::clone(&ahead);
        assert!(
            std::thread::spawn(
                move || server.serve(|| panic!("a maker that panics"), Duration::ZERO)
            )
            .join()
            .is_err()
        );
        assert!(handed_over(&ahead).0.is_err(), "the thread is gone");
        assert!(ahead.take().is_none());
    }

    #[test]
    fn the_prelude_bytecode_from_the_build_loads_and_is_the_prelude() {
        use mlua::chunk::ChunkMode;
        // a native build always makes it (build.rs); an empty one means text at every start
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            assert!(!super::PRELUDE_BYTECODE.is_empty());
        }
        let lua = mlua::Lua::new();
        let binary = lua
            .load(super::PRELUDE_BYTECODE)
            .set_name("=prelude")
            .set_mode(ChunkMode::Binary)
            .into_function()
            .expect("the VM this binary links loads the build's bytecode");
        let text = lua
            .load(super::PRELUDE)
            .set_name("=prelude")
            .set_mode(ChunkMode::Text)
            .into_function()
            .unwrap();
        // the same function: compiled from the same text, so the same dump
        assert_eq!(binary.dump(false), text.dump(false));
        let info = binary.info();
        assert_eq!(
            info.source.as_deref(),
            Some("=prelude"),
            "error lines name the prelude"
        );
    }

    /// The thread that makes the state leaves the starting thread's CPU, and may run anywhere
    /// once the state is made.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_making_thread_runs_on_another_cpu_then_anywhere() {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        let affinity = move || {
            // SAFETY: a system call on the calling thread with a zeroed, full-sized set
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                assert_eq!(libc::sched_getaffinity(0, size, &mut set), 0);
                set
            }
        };
        let before = affinity();
        // SAFETY: reads the calling thread's CPU
        let here = unsafe { libc::sched_getcpu() };
        let cpus = super::ahead::cpu::Elsewhere::here();
        let (during, after) = std::thread::spawn(move || {
            cpus.leave();
            let during = affinity();
            cpus.release();
            (during, affinity())
        })
        .join()
        .unwrap();
        // SAFETY: CPU_ISSET and CPU_COUNT read the sets
        unsafe {
            if libc::CPU_COUNT(&before) > 1 {
                assert!(
                    !libc::CPU_ISSET(here as usize, &during),
                    "off the starting CPU"
                );
                assert_eq!(libc::CPU_COUNT(&during), libc::CPU_COUNT(&before) - 1);
                assert!(cpus.spin() > Duration::ZERO);
            } else {
                assert_eq!(libc::CPU_COUNT(&during), 1, "one CPU: it stays");
                assert_eq!(cpus.spin(), Duration::ZERO, "no spinning on a shared CPU");
            }
            assert_eq!(
                libc::CPU_COUNT(&after),
                libc::CPU_COUNT(&before),
                "anywhere again"
            );
        }
    }

    #[test]
    fn a_failed_or_panicking_maker_does_not_leave_takers_waiting() {
        let ahead = Arc::new(Ahead::new());
        ahead.expect(false);
        ahead.make(|| Err(mlua::Error::runtime("no memory")));
        assert!(ahead.take().is_none());
        ahead.expect(false);
        let maker = Arc::clone(&ahead);
        let panicked = std::thread::spawn(move || maker.make(|| panic!("a maker that panics")))
            .join()
            .is_err();
        assert!(panicked);
        assert!(
            ahead.take().is_none(),
            "the slot was emptied as the maker unwound"
        );
    }
}
