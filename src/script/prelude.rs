//! The Lua state every run starts from: the libraries a script may use, the host API
//! installed, and `lua/prelude.lua` run over them to build the script environment.
//!
//! It is made apart from [`Vm`](super::Vm) because none of it depends on the host or the run,
//! so it can be made before either exists (on another CPU, `ahead.rs`) and bound to its run
//! later ([`Vm::new`](super::Vm::new)). The prelude is loaded as the bytecode `build.rs`
//! compiled with the same vendored Lua, which spares compiling it at every start; its text
//! stays as the fallback, so a build without the bytecode (another target) runs the same
//! program.

use mlua::chunk::ChunkMode;
use mlua::{Function, Lua, LuaOptions, StdLib, Table, Value};

use super::api::build_api;
use super::vm::RunCell;

const PRELUDE: &str = include_str!("../../lua/prelude.lua");
/// The prelude compiled by `build.rs` with the VM this binary links; empty when built for
/// another target (see `build.rs`), and then the text is compiled at start.
const PRELUDE_BYTECODE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/prelude.luac"));

/// A Lua state with its standard libraries opened, the host API installed and the prelude run:
/// everything of a [`Vm`](super::Vm) that needs neither the host nor the run. The run's own values (the
/// state behind the API, `params`, `config`) are bound by [`Vm::new`](super::Vm::new).
pub(super) struct Fresh {
    pub(super) lua: Lua,
    pub(super) env: Table,
    pub(super) runner: Function,
    /// The prelude's `bind(params, config)`.
    pub(super) bind: Function,
    pub(super) run: RunCell,
}

impl Fresh {
    pub(super) fn make() -> mlua::Result<Fresh> {
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

#[cfg(test)]
mod tests {
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
}
