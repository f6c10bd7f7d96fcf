//! Host memory a program drives is bounded by the run's budget (`gate::HostMemory`): each test
//! runs one hostile program in a child `lmcp`, reads the peak RSS it reports of itself, and asserts a
//! bound far below the gigabytes these programs once made lmcp hold. A bound on memory, not a
//! timing: it holds on a noisy machine.

use std::path::Path;

use serde_json::json;

use crate::common::{self, Peak, lmcp_ok};

/// The most a child may hold at its peak: the Lua state's 64 MiB, the run's 64 MiB of host
/// memory, and what lmcp itself needs, with room to spare.
const BOUND: u64 = 256 << 20;

fn home() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    lmcp_ok(dir.path(), &["roots"]);
    dir
}

/// Runs `lmcp run FILE` of `source` (written to `name` in `home`) and checks the peak.
fn run_file(home: &Path, name: &str, source: &str, extra: &[&str]) -> Peak {
    let file = home.join(name);
    std::fs::write(&file, source).unwrap();
    let mut args = vec!["run", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    common::peak_rss(home, &args)
}

fn assert_bounded(what: &str, peak: &Peak, expected: &str) {
    eprintln!("{what}: peak RSS {} MiB", peak.rss >> 20);
    assert!(
        peak.rss < BOUND,
        "{what}: peak RSS {} MiB (bound {} MiB); stderr: {}",
        peak.rss >> 20,
        BOUND >> 20,
        clip(&peak.stderr)
    );
    assert_ne!(
        peak.code,
        Some(0),
        "{what} must fail: {}",
        clip(&peak.stderr)
    );
    assert!(
        peak.stderr.contains(expected),
        "{what}: expected {expected:?} in: {}",
        clip(&peak.stderr)
    );
}

fn clip(s: &str) -> &str {
    let mut end = s.len().min(2000);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The message every budget error carries.
const HOST_MEMORY: &str = "host memory";

/// A recipe whose 256 KiB default is embedded 65,536 times in one argument (16 GiB of text):
/// once 24 GB of RSS, then exit 0.
#[test]
fn an_interpolation_bomb_stops_at_the_budget() {
    let h = home();
    let manifest = json!({
        "name": "bomb",
        "params": [{"name": "p", "type": "string", "default": "x".repeat(256 << 10)}],
        "steps": [{"tool": "calculate", "args": {"expression": "${p}".repeat(65_536)}}]
    });
    let peak = run_file(h.path(), "bomb.json", &manifest.to_string(), &[]);
    assert_bounded("the interpolation bomb", &peak, HOST_MEMORY);
}

/// `gsub` with 4,096 `%0`s in its replacement on an 8 MiB subject (32 GiB of result): once
/// 2.8 GB of RSS. Matched once as a whole, and a byte at a time.
#[test]
fn a_gsub_bomb_stops_at_the_budget() {
    let h = home();
    for pattern in [".+", "."] {
        let source = format!(
            "local s = string.rep('a', 8 << 20)\nlocal r = string.rep('%0', 4096)\n\
             local out = s:gsub('{pattern}', r)\nreturn #out\n"
        );
        let peak = run_file(h.path(), "gsub.lua", &source, &[]);
        assert_bounded(&format!("gsub of {pattern:?}"), &peak, HOST_MEMORY);
    }
}

/// Unconfirmed 1 MiB `write_file` calls in a loop, each preview kept until the run ends: once
/// 2.7 GB in 5 s.
#[test]
fn kept_previews_stop_at_the_budget() {
    let h = home();
    let source = "---@uses write_file\nlocal c = string.rep('x', 1 << 20)\n\
                  for i = 1, 100000 do tools.write_file{path = 'f.txt', content = c} end\n";
    let peak = run_file(h.path(), "previews.lua", source, &[]);
    assert_bounded("kept previews", &peak, HOST_MEMORY);
}

/// Every step's result is kept for the steps after it (and in the report): a recipe reading a
/// 1 MiB file over and over.
#[test]
fn kept_step_results_stop_at_the_budget() {
    let h = home();
    std::fs::write(
        h.path().join("data/workspace/big.txt"),
        "y".repeat((1 << 20) - 64),
    )
    .unwrap();
    let steps: Vec<_> = (0..2_000)
        .map(|_| json!({"tool": "read_file", "args": {"path": "big.txt"}}))
        .collect();
    let manifest = json!({"name": "reader", "steps": steps});
    let peak = run_file(h.path(), "reader.json", &manifest.to_string(), &[]);
    assert_bounded("kept step results", &peak, HOST_MEMORY);
}

/// `json.encode` of a table that holds one subtable many times: each mention becomes a copy.
#[test]
fn json_of_a_shared_subtable_stops_at_the_budget() {
    let h = home();
    let source = "local t = {string.rep('z', 1 << 16)}\nfor i = 1, 30 do t = {t, t} end\n\
                  return #json.encode(t)\n";
    let peak = run_file(h.path(), "shared.lua", source, &[]);
    assert_bounded("json.encode of a shared subtable", &peak, HOST_MEMORY);
    // the same table as a tool's arguments
    let source = "local t = {string.rep('z', 1 << 16)}\nfor i = 1, 30 do t = {t, t} end\n\
                  return tools.calculate{expression = '1', extra = t}\n";
    let peak = run_file(h.path(), "shared_args.lua", source, &[]);
    assert_bounded("a shared subtable as arguments", &peak, HOST_MEMORY);
}

/// What Lua builds itself (`string.rep`, `string.format`, `table.concat`) is bounded by the Lua
/// state's own limit.
#[test]
fn lua_built_strings_stop_at_the_lua_limit() {
    let h = home();
    for (what, source) in [
        ("string.rep", "return #string.rep('x', 1 << 28)"),
        (
            "string.format",
            "local s = string.rep('x', 1 << 22)\nlocal f = string.rep('%s', 64)\n\
             local args = {}\nfor i = 1, 64 do args[i] = s end\n\
             return #string.format(f, table.unpack(args))",
        ),
        (
            "table.concat",
            "local s = string.rep('x', 1 << 20)\nlocal t = {}\nfor i = 1, 1000 do t[i] = s end\n\
             return #table.concat(t)",
        ),
    ] {
        let peak = run_file(h.path(), "lua.lua", source, &[]);
        assert_bounded(what, &peak, "memory");
    }
}

/// A Lua recipe that runs itself fifteen deep, each level keeping 50 MiB in Lua: each nested
/// Lua state once had a limit of its own (990 MB of RSS, even as a plan); now a nested state
/// draws on its run's memory.
#[test]
fn nested_lua_programs_share_one_run_of_memory() {
    let h = home();
    let source = "---@name deep\n---@description nested memory\n---@param d? integer=0 depth\n\
                  ---@uses recipe_run\nlocal keep = {}\n\
                  for i = 1, 50 do keep[i] = string.rep('x', 1 << 20) .. i end\n\
                  local r = nil\n\
                  if params.d < 14 then r = tools.recipe_run{name = 'deep', params = {d = params.d + 1}} end\n\
                  if r and r.error then error(r.error.message, 0) end\n\
                  return {d = params.d, n = #keep}\n";
    let file = h.path().join("deep.lua");
    std::fs::write(&file, source).unwrap();
    lmcp_ok(h.path(), &["recipe", "save", file.to_str().unwrap()]);
    for args in [
        &["recipe", "run", "deep", "--yes"][..],
        &["recipe", "run", "deep"],
    ] {
        let peak = common::peak_rss(h.path(), args);
        assert_bounded(&format!("lmcp {args:?}"), &peak, "memory");
    }
}
