//! The LuaLS definitions in `lua/meta/tools.lua` match what the registry generates today.
//! Run `BLESS=1 cargo test --test all types::` to refresh them after changing a tool.

use lmcp::Host;
use lmcp::store::Paths;

#[test]
fn lua_meta_is_fresh() {
    let dir = tempfile::tempdir().unwrap();
    let host = Host::open(Paths::under(dir.path())).unwrap();
    let generated = lmcp::script::types::lua_definitions(&host.registry().all());
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("lua/meta/tools.lua");
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "lua/meta/tools.lua is stale; run `BLESS=1 cargo test --test all types::` and commit it"
    );
    assert!(generated.contains("function tools.calculate(args) end"));
    assert!(generated.contains("---@field expression string"));
}

/// Definitions a model or an editor can trust (#37): every built-in tool's result is typed
/// (no `any` result), its arguments are an exact class, and nested objects are classes of
/// their own.
#[test]
fn every_built_in_result_is_typed_and_every_argument_class_exact() {
    let dir = tempfile::tempdir().unwrap();
    let host = Host::open(Paths::under(dir.path())).unwrap();
    let tools = host.registry().all();
    let generated = lmcp::script::types::lua_definitions(&tools);
    let lines: Vec<&str> = generated.lines().collect();
    let untyped: Vec<&str> = lines
        .windows(2)
        .filter(|w| w[0].starts_with("---@return any") && w[1].starts_with("function tools."))
        .map(|w| w[1])
        .collect();
    assert!(
        lines
            .windows(2)
            .filter(|w| w[1].starts_with("function tools."))
            .all(|w| w[0].starts_with("---@return ")),
        "each tool function follows its ---@return line"
    );
    assert!(untyped.is_empty(), "{untyped:?}");
    for t in &tools {
        let name = &t.spec().name;
        assert!(
            generated.contains(&format!("---@class (exact) {name}_args\n")),
            "{name}: its arguments are not an exact class"
        );
        assert!(
            generated.contains(&format!("---@class {name}_result\n")),
            "{name}: no result class"
        );
    }
    // a field the schema does not require is optional; a nested object is its own class
    assert!(generated.contains("---@field run? string"));
    assert!(generated.contains("---@field recipes recipe_list_result.recipes[]"));
    assert!(generated.contains("---@class recipe_list_result.recipes\n"));
    assert!(generated.contains("---@field previews Preview[]"));
}
