//! The limit hook: a raw Lua count hook that raises the run's interruption as a Lua error.
//!
//! It is installed with `lua_sethook` directly, not with mlua's `set_global_hook`, because of
//! what happens when a hook raises an error. mlua's hook wrapper resets the stack top
//! (`lua_settop`) before it raises, and inside a hook that stack belongs to the interrupted Lua
//! function: Lua 5.4's `lua_settop` closes every to-be-closed variable above the new top, so
//! each `__close` of the interrupted frame would run right there, inside the hook, where Lua
//! calls no hooks — a looping `__close` would never be stopped (mlua 0.12.2, Lua 5.4.9). This
//! hook only pushes the message and raises: the error unwinds to the nearest `pcall` (or the
//! top-level call), which turns hooks back on before it closes anything.
//!
//! It runs on two events. Every [`HOOK_EVERY`](super::HOOK_EVERY) instructions it checks the
//! clock and the cancellation token. And before every function call, C functions included, it
//! looks at one flag a timer sets at the deadline or on cancellation: a loop of expensive C
//! calls (`utf8.len` of a 20 MB string, say) runs few instructions between two counts, so only
//! the call event stops it within one call of the deadline.
//!
//! New coroutines inherit the hook from the thread that creates them (`lua_newthread` copies
//! it), so it follows every coroutine of the run.

use std::ffi::{c_char, c_void};

use mlua::{Lua, ffi};

/// Decides, each time the hook runs, whether the run must stop: the error message if so. Its
/// argument says whether this is a call event (which must be cheap: a flag) or a count event.
pub type LimitCheck = Box<dyn Fn(bool) -> Option<String> + Send + Sync>;

/// Owns the check for as long as the Lua state lives (mlua drops app data after `lua_close`,
/// which may still run hooks while it closes the main thread).
struct Installed(#[allow(dead_code)] Box<LimitCheck>);

/// The registry key under which the check's address is kept.
static KEY: u8 = 0;

/// Installs `check` as the hook of `lua`'s main thread: before every call, and every `every`
/// instructions.
pub fn install(lua: &Lua, every: u32, check: LimitCheck) -> mlua::Result<()> {
    let boxed = Box::new(check);
    let address = &*boxed as *const LimitCheck as *mut c_void;
    lua.set_app_data(Installed(boxed));
    let count = i32::try_from(every).unwrap_or(i32::MAX);
    // SAFETY: the closure only pushes a light userdata into the registry and sets the hook on
    // the state mlua hands it; the address stays valid while the state lives (see `Installed`).
    unsafe {
        lua.exec_raw::<()>((), |state| {
            ffi::lua_pushlightuserdata(state, address);
            ffi::lua_rawsetp(state, ffi::LUA_REGISTRYINDEX, key());
            ffi::lua_sethook(
                state,
                Some(limit_hook),
                ffi::LUA_MASKCOUNT | ffi::LUA_MASKCALL,
                count,
            );
        })
    }
}

fn key() -> *const c_void {
    &KEY as *const u8 as *const c_void
}

/// The hook itself. Nothing that needs dropping is alive when `lua_error` jumps out of it.
unsafe extern "C-unwind" fn limit_hook(state: *mut ffi::lua_State, ar: *mut ffi::lua_Debug) {
    // SAFETY: Lua guarantees LUA_MINSTACK free slots inside a hook; the registry entry is the
    // light userdata `install` stored, whose target outlives the state.
    unsafe {
        ffi::lua_rawgetp(state, ffi::LUA_REGISTRYINDEX, key());
        let check = ffi::lua_touserdata(state, -1) as *const LimitCheck;
        ffi::lua_pop(state, 1);
        if check.is_null() {
            return;
        }
        let call = !ar.is_null() && (*ar).event != ffi::LUA_HOOKCOUNT;
        let verdict = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (*check)(call)))
            .unwrap_or_else(|_| Some("the run's limit check failed".to_string()));
        let Some(message) = verdict else {
            return;
        };
        ffi::lua_pushlstring(state, message.as_ptr() as *const c_char, message.len());
        drop(message);
        ffi::lua_error(state);
    }
}
