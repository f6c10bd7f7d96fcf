//! The Lua engine: a sandboxed Lua 5.4 VM in which every tool is a function that goes through
//! the gate.
//!
//! | file             | its job                                                             |
//! |------------------|---------------------------------------------------------------------|
//! | `mod.rs`         | [`run`]: a script on a blocking thread, under the watchdog          |
//! | `vm.rs`          | [`Vm`]: one run's state, its limits, compiling and running chunks   |
//! | `prelude.rs`     | the state every run starts from: libraries, host API, `prelude.lua` |
//! | `ahead.rs`       | the first state made ahead, on another CPU, and the first run there |
//! | `api.rs`         | the host API the prelude builds the script environment from         |
//! | `bridge.rs`      | `tools.NAME{...}`: a script's call into [`Host::call`] and back     |
//! | `hook.rs`        | the count hook that raises a run's interruption                     |
//! | `literal.rs`     | the tools a source calls and the modules it requires, by name       |
//! | `convert.rs`     | Lua values to JSON and back, raw                                    |
//! | `patterns.rs`    | Lua's pattern matching, ported to Rust with a step budget           |
//! | `sourcecheck.rs` | refuses source Lua's compiler would take far too long over          |
//! | `stdlib.rs`      | the embedded modules `require` finds (`stdlib/`)                    |
//! | `types.rs`       | LuaLS definitions of the tools, for editors                         |
//!
//! # The sandbox
//!
//! Each run gets a fresh `mlua` state built from explicit libraries (base, `table`, `string`,
//! `math`, `utf8`, `coroutine`, `os`) — never `Lua::new()`, which loads `io` and `package`. The
//! runtime's prelude (`lua/prelude.lua`) then builds the script environment: `os` keeps only
//! `time`, `date` and `clock`; `dofile`, `loadfile`, `string.dump` and `collectgarbage` (except
//! `"count"`) are gone; `load` takes text only and runs in the script's environment; `require`
//! finds only the embedded `stdlib/` modules (and, for skills, the skill's own scripts). The
//! real globals are emptied afterwards, so nothing the prelude kept is reachable. Every chunk is
//! loaded in text mode under a name without host paths.
//!
//! # Limits, and why they hold
//!
//! - **Time and cancellation.** A count hook (`hook.rs`; new coroutines inherit it) runs
//!   every [`HOOK_EVERY`] instructions and raises an error once the run's deadline has passed or
//!   its cancellation token fired. The interruption is *sticky*: from then on every catching
//!   function (`pcall`, `xpcall`, `coroutine.resume`, `coroutine.close`) re-raises it when it
//!   returns, so no amount of nested `pcall`s can swallow it. Lua 5.4 runs `xpcall` handlers of
//!   hook-raised errors and `__gc` finalizers with hooks off: the prelude skips handlers once the
//!   run is interrupted and refuses `__gc` metamethods, so neither can outlive the deadline.
//! - **Long single C calls.** A hook cannot interrupt a C function. The unbounded ones are
//!   replaced: pattern matching (`find`, `match`, `gmatch`, `gsub`) is a Rust port of Lua's
//!   matcher that checks the deadline every few thousand steps ([`patterns`]); plain `find` is
//!   linear; `string.rep` of empty strings returns at once; `table.move` runs as Lua. What is
//!   left (`string.rep`, `table.concat`, `table.sort`, `string.format`...) does work in
//!   proportion to memory the script must allocate first, so the memory limit bounds it.
//! - **`<close>` variables and finalizers.** To-be-closed variables work as in Lua 5.4, and
//!   their `__close` runs under the same hook and gate as any code: `pcall` and the top-level
//!   call restore hooks before they close what an error unwinds. The one place Lua would close
//!   values with hooks off is a coroutine killed by the hook's own error (the error left hooks
//!   off in that coroutine): the prelude marks such a coroutine when its resume returns and
//!   never closes it (`coroutine.close` refuses it, `coroutine.wrap` is built on `resume`, which
//!   does not close). `__gc` finalizers always run with hooks off, so no metatable may hold
//!   `__gc` — not when set, not added later by assignment or `rawset`. The metatables the host
//!   hands out (tool errors, `json.array`, strings) are closed with `__metatable`.
//! - **Compiling.** Compiling is one C call the hook cannot interrupt, and Lua's parser is
//!   quadratic in two shapes (long `and`/`or` runs, many `goto`s); chunks with those at sizes
//!   nobody writes by hand are refused before they compile ([`refuse_slow_source`]), in
//!   scripts, `load` and saved programs alike.
//! - **The backstop.** Should a run still not return within [`WATCHDOG_GRACE`] of its deadline
//!   or cancellation, the process ends with a message rather than spin forever.
//! - **Memory.** `set_memory_limit` turns allocation bombs into a "not enough memory" error; the
//!   host and the state live on.
//! - **Depth.** Lua's own stack and C-stack limits stop deep recursion with an error; tool calls
//!   nest through the gate, which bounds their depth.
//! - **Output.** Captured `print` and `log` output is capped; past the cap it is dropped with a
//!   note.
//!
//! # The bridge
//!
//! `tools.NAME{...}` converts its table to JSON once, raw (no metamethod runs, cycles and depth
//! refused; see [`convert`]), and calls [`Host::call`] with a child of the run's context, so the
//! run's confirmation mode flows into every call and a script can never raise it. The VM runs
//! on a blocking thread and waits for each gated call with `Handle::block_on`, so coroutines
//! and pcall work around tool calls exactly as around any function.

pub mod ahead;
mod api;
mod bridge;
pub mod convert;
mod hook;
pub mod literal;
pub mod patterns;
mod prelude;
mod sourcecheck;
mod stdlib;
pub mod types;
mod vm;

pub use sourcecheck::{MAX_GOTOS, MAX_LOGIC_CHAIN, refuse_slow_source};
pub use stdlib::{STDLIB_MODULES, module_source};
pub use vm::{Output, ScriptLimits, ScriptOutcome, Vm, VmOptions};

use std::sync::Arc;

use crate::error::Error;
use crate::gate::CallContext;
use crate::gate::Caller;

/// Instructions between two runs of the limit hook.
pub const HOOK_EVERY: u32 = 1000;

/// A Lua program to run once.
#[derive(Debug, Clone)]
pub struct Script {
    /// The source text.
    pub source: String,
    /// The chunk name shown in error messages (a file name, never a host path).
    pub name: String,
}

/// A failed run: the error, and what the script printed and previewed before it failed (so a
/// caller can show the run's log and inspect side effects).
#[derive(Debug)]
pub struct ScriptFailure {
    /// Why the run failed.
    pub error: Error,
    /// Captured output up to the failure.
    pub output: String,
    /// Calls previewed before the failure.
    pub previews: Vec<crate::gate::Preview>,
}

impl From<ScriptFailure> for Error {
    fn from(f: ScriptFailure) -> Error {
        f.error
    }
}

impl From<Error> for ScriptFailure {
    fn from(error: Error) -> ScriptFailure {
        ScriptFailure {
            error,
            output: String::new(),
            previews: Vec::new(),
        }
    }
}

/// Runs a script in a fresh sandbox on a thread where blocking is fine ([`vm::spawn`]) and
/// returns its outcome. The context's deadline and cancellation token bound it.
pub async fn run(
    host: &Arc<dyn Caller>,
    script: Script,
    ctx: CallContext,
    options: VmOptions,
) -> std::result::Result<ScriptOutcome, ScriptFailure> {
    let host = Arc::clone(host);
    let handle = tokio::runtime::Handle::current();
    let deadline = ctx.deadline();
    let cancel = ctx.cancel_token().clone();
    let mut task = vm::spawn(host, handle, ctx, options, move |vm| {
        let vm = vm?;
        vm.run(&script.source, &script.name)
            .map_err(|error| ScriptFailure {
                error,
                output: vm.take_output(),
                previews: vm.take_previews(),
            })
    });
    tokio::select! {
        done = &mut task => done.map_err(|_| {
            ScriptFailure::from(Error::Script {
                message: "the script's thread failed before the script ended".into(),
            })
        })?,
        why = watchdog(deadline, cancel) => {
            // The hook could not stop it (a `__close` or finalizer looping where Lua runs no
            // hooks): nothing else can, so the process ends rather than spin forever.
            errln!(
                "lmcp: a Lua run did not stop within {}s of its {why}; ending the process",
                WATCHDOG_GRACE.as_secs()
            );
            std::process::exit(WATCHDOG_EXIT);
        }
    }
}

/// How long a run may go on after its deadline or cancellation before the process ends.
pub const WATCHDOG_GRACE: std::time::Duration = std::time::Duration::from_secs(5);
/// The exit code when the watchdog ends the process.
pub const WATCHDOG_EXIT: i32 = 1;

/// Waits until the grace after the deadline, or after a cancellation, has passed; the reason.
async fn watchdog(
    deadline: Option<std::time::Instant>,
    cancel: tokio_util::sync::CancellationToken,
) -> &'static str {
    let after_deadline = async {
        match deadline {
            Some(d) => tokio::time::sleep_until((d + WATCHDOG_GRACE).into()).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = after_deadline => "deadline",
        _ = async {
            cancel.cancelled().await;
            tokio::time::sleep(WATCHDOG_GRACE).await;
        } => "cancellation",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_watchdog_fires_once_the_grace_after_the_deadline_has_passed() {
        let past = std::time::Instant::now() - WATCHDOG_GRACE - std::time::Duration::from_secs(1);
        let token = tokio_util::sync::CancellationToken::new();
        let why = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            watchdog(Some(past), token.clone()),
        )
        .await
        .expect("fires at once");
        assert_eq!(why, "deadline");
        // with no deadline and no cancellation it never fires
        let quiet =
            tokio::time::timeout(std::time::Duration::from_millis(50), watchdog(None, token)).await;
        assert!(quiet.is_err());
    }
}
