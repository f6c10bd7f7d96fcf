//! The REPL session's scope: where the top-level locals of its chunks live, so that
//! `local n = 6` on one line and `n * 7` on the next gives 42, as node and ipython do.
//!
//! `locals.rs` rewrites a chunk's top-level `local`s into slot declarations; this module holds
//! the slots. The logic is Lua (`lua/repl_scope.lua`), run once per session in the session's
//! state: each chunk gets a fresh environment table whose lookups reach the slots it can see,
//! then the script environment's globals. Nothing is reachable from it that the sandbox did not
//! already give the chunk: the tables hold the chunk's own values and the script environment,
//! and their metatable is hidden (`__metatable = false`).

use mlua::{Function, Table, Value};

use crate::error::{Error, Result};
use crate::script::Vm;

const SCOPE: &str = include_str!("../../lua/repl_scope.lua");

/// The session's slots, and the maker of each chunk's environment over them.
pub struct SessionScope {
    new_scope: Function,
    slots: Function,
}

fn lua_failed(e: mlua::Error) -> Error {
    Error::Script {
        message: format!("the REPL's session scope failed: {e}"),
    }
}

impl SessionScope {
    /// Sets up the scope in the VM's state, over its script environment.
    pub fn new(vm: &Vm) -> Result<SessionScope> {
        let lua = vm.lua();
        let env = vm.env();
        // the one raw function it needs that the sandbox does not give: a plain setmetatable
        let setmeta = lua
            .create_function(|_, (t, mt): (Table, Table)| {
                t.set_metatable(Some(mt))?;
                Ok(())
            })
            .map_err(lua_failed)?;
        let (new_scope, slots): (Function, Function) = lua
            .load(SCOPE)
            .set_name("=repl_scope")
            .set_mode(mlua::chunk::ChunkMode::Text)
            .call((
                env.clone(),
                setmeta,
                env.raw_get::<Value>("next").map_err(lua_failed)?,
                env.raw_get::<Value>("select").map_err(lua_failed)?,
                env.raw_get::<Value>("error").map_err(lua_failed)?,
            ))
            .map_err(lua_failed)?;
        Ok(SessionScope { new_scope, slots })
    }

    /// A new chunk's environment: the slots declared so far, then the globals.
    pub fn next_chunk(&self) -> Result<Table> {
        self.new_scope.call(()).map_err(lua_failed)
    }

    /// The slots and their values now (for completion).
    pub fn slots(&self) -> Result<Table> {
        self.slots.call(()).map_err(lua_failed)
    }
}
