//! The checks every program gets before it is saved, whichever library it belongs to: the Lua
//! compile check (with the sandbox's `<close>` refusal), the tool lookup with "did you mean",
//! and the identifier rule for parameter names and step ids. Each returns a message without a
//! location; the caller adds its own (a JSON pointer into the manifest, or `file.lua:LINE`).

use std::sync::Arc;

use crate::host::Host;
use crate::registry::{Capabilities, Kind, Tool};

/// Longest parameter name or step id.
pub const MAX_IDENTIFIER: usize = 64;

/// Parameter names and step ids: a letter or `_`, then letters, digits and `_`, at most 64.
pub fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_IDENTIFIER
        && s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Compiles Lua source without running it. The error names the place as `chunk:LINE`.
pub fn compile_lua(source: &str, chunk: &str) -> std::result::Result<(), String> {
    if let Some(line) = crate::script::find_close_attribute(source) {
        return Err(format!(
            "{chunk}:{line}: to-be-closed variables (<close>) are not available in the sandbox"
        ));
    }
    let lua = mlua::Lua::new_with(mlua::StdLib::NONE, mlua::LuaOptions::new())
        .map_err(|e| e.to_string())?;
    lua.load(source)
        .set_name(format!("={chunk}"))
        .set_mode(mlua::chunk::ChunkMode::Text)
        .into_function()
        .map(|_| ())
        .map_err(|e| format!("the program does not compile: {e}"))
}

/// The registered tool `name`, or a message suggesting the closest names.
pub fn find_tool(host: &Host, name: &str) -> std::result::Result<Arc<Tool>, String> {
    host.registry().get(name).ok_or_else(|| {
        let hint = host
            .registry()
            .closest(name)
            .first()
            .map(|h| format!("; did you mean `{h}`?"))
            .unwrap_or_else(|| "; `lmcp tools` lists them".into());
        format!("there is no tool `{name}`{hint}")
    })
}

/// A tool a program may call, of one of the `kinds` allowed there.
pub fn callable_tool(
    host: &Host,
    name: &str,
    kinds: &[Kind],
) -> std::result::Result<Arc<Tool>, String> {
    let t = find_tool(host, name)?;
    if !kinds.contains(&t.spec().kind) {
        let allowed: Vec<String> = kinds.iter().map(|k| k.to_string()).collect();
        return Err(format!(
            "`{name}` is a {} tool; steps can only call {} tools",
            t.spec().kind,
            allowed.join(" or ")
        ));
    }
    Ok(t)
}

/// The capabilities a Lua header's `---@uses` gives: exactly those tools (each checked to exist
/// and be of an allowed kind), or read tools only without it. The error names the list entry.
pub fn uses_capabilities(
    host: &Host,
    uses: Option<&Vec<String>>,
    kinds: &[Kind],
) -> std::result::Result<Capabilities, String> {
    match uses {
        Some(list) => {
            for (i, tool) in list.iter().enumerate() {
                callable_tool(host, tool, kinds).map_err(|m| format!("@uses[{i}]: {m}"))?;
            }
            Ok(Capabilities::Tools(list.clone()))
        }
        None => Ok(Capabilities::ReadOnly),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers() {
        for ok in ["a", "_x", "step_2", "A1"] {
            assert!(is_identifier(ok), "{ok}");
        }
        for bad in ["", "1a", "a-b", "a b", "é", &"x".repeat(65)] {
            assert!(!is_identifier(bad), "{bad}");
        }
    }

    #[test]
    fn compile_errors_name_the_chunk_and_line() {
        assert!(compile_lua("return 1", "t.lua").is_ok());
        let e = compile_lua("\nlocal x <close> = nil", "t.lua").unwrap_err();
        assert!(e.starts_with("t.lua:2:"), "{e}");
        let e = compile_lua("return return", "t.lua").unwrap_err();
        assert!(e.contains("t.lua:1:"), "{e}");
    }
}
