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
