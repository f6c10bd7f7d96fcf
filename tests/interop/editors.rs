//! Interop cross-check (the `interop` feature, run by `.ci/run`): EmmyLua's checker,
//! `emmylua_check` 0.25.1 (`cargo install emmylua_check --version 0.25.1 --locked`), accepts
//! the shipped Lua — examples, the bundled modules and their tests — with the definitions and
//! config `lmcp types -o DIR --config` writes: 0 errors and 0 warnings. And it still catches
//! mistakes: an unknown tool, argument or result field (a nested one too), an argument the tool
//! does not take, a wrong argument type.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common;

fn checker() -> PathBuf {
    let name = "emmylua_check";
    let found = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .find(|f| f.is_file())
        })
        .unwrap_or_default();
    found.unwrap_or_else(|| {
        panic!(
            "{name} is missing: `cargo install emmylua_check --version 0.25.1 --locked` (the \
             .ci/run interop step installs it)"
        )
    })
}

/// Writes the definitions (to `output`: a folder, or one .lua file) and the configs into
/// `project`; the config's path.
fn configured_with(project: &Path, output: &str) -> PathBuf {
    let home = tempfile::tempdir().unwrap();
    let types = project.join(output);
    if output.ends_with(".lua") {
        std::fs::create_dir_all(types.parent().unwrap()).unwrap();
    }
    let out = Command::new(common::bin())
        .args(["types", "-o", types.to_str().unwrap(), "--config"])
        .current_dir(project)
        .env("LMCP_HOME", home.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    project.join(".emmyrc.json")
}

/// The definitions and the bundled modules, as `lmcp types -o DIR --config` writes them.
fn configured(project: &Path) -> PathBuf {
    configured_with(project, "lmcp-types")
}

fn check(config: &Path, paths: &[PathBuf]) -> (bool, String) {
    let out = Command::new(checker())
        .arg("-c")
        .arg(config)
        .arg("--warnings-as-errors")
        .args(paths)
        .output()
        .expect("run emmylua_check");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn the_shipped_lua_passes_emmylua_check() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // scripts and the modules' tests, with the modules as a library (as an editor has them)
    let project = tempfile::tempdir().unwrap();
    let config = configured(project.path());
    let paths = [root.join("examples"), root.join("tests/lua")];
    let (ok, report) = check(&config, &paths);
    assert!(ok, "emmylua_check found problems:\n{report}");
    // the modules themselves, with only the definitions (their copies would be duplicates)
    let project = tempfile::tempdir().unwrap();
    let config = configured_with(project.path(), "only/lmcp.lua");
    let (ok, report) = check(&config, &[root.join("stdlib")]);
    assert!(ok, "emmylua_check found problems in stdlib:\n{report}");
}

#[test]
fn emmylua_check_still_catches_mistakes() {
    let project = tempfile::tempdir().unwrap();
    let config = configured(project.path());
    // (EmmyLua always loads its own `io` and `os`, and no setting of 0.25 turns them off, so
    // it cannot flag them; LuaLS can, with the `runtime.builtin` the config sets.)
    for (code, what) in [
        (
            "local r = tools.no_such_tool{}\nreturn r",
            "an unknown tool",
        ),
        (
            "return tools.calculate{expression = 42}",
            "a wrong argument type",
        ),
        ("return tools.calculate{}", "a missing required argument"),
        // an argument the tool does not take, added to an arguments table (exact classes,
        // #37). EmmyLua 0.25.1 does not check the keys of a table constructor against a class,
        // exact or not (nor does LuaLS: its issues 2288 and 3040), so `tools.calculate{...,
        // precision = 2}` passes the checker; the gate refuses it (`additionalProperties:
        // false`) before the tool runs.
        (
            "local args = {expression = '1'} ---@type calculate_args\nargs.precision = 2\nreturn tools.calculate(args)",
            "an argument the tool does not take",
        ),
        (
            "local r = tools.recipe_list{}\nreturn r.recipes[1].nope",
            "an unknown field of a nested result class",
        ),
        (
            "local r = tools.calculate{expression = '1'}\nreturn r.nope",
            "an unknown result field",
        ),
        (
            "local t = require('tbl')\nreturn t.no_such_helper()",
            "an unknown module function",
        ),
    ] {
        let dir = project.path().join("mistake");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("bad.lua"), code).unwrap();
        let (ok, report) = check(&config, &[dir]);
        assert!(!ok, "{what} was not reported:\n{report}");
    }
}
