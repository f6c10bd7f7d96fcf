//! One rule for every door a program comes in by (`lmcp run`, recipes, custom tools, skill
//! scripts): what a source may start with, what its header's name must be, where its
//! description comes from, the shortest timeout, and the tools it may not call.

use serde_json::{Value, json};

use crate::common::{TestHost, call_yes, json_out, lmcp, lmcp_ok};

fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn skill(script: &str) -> Value {
    json!({
        "skill_md": "---\nname: sk\ndescription: d\n---\nbody\n",
        "scripts": [{"name": "s.lua", "code": script}],
    })
}

/// A UTF-8 byte order mark and a `#!` first line compile in every door, and line numbers
/// stay those of the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bom_and_a_shebang_compile_everywhere() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let shebang = write(h, "sb.lua", "#!/usr/bin/env lmcp\nreturn 1\n");
    let out = lmcp_ok(h, &["run", &shebang, "--json"]);
    assert_eq!(json_out(&out)["result"], json!(1));
    let bom = write(h, "bom.lua", "\u{feff}---@uses calculate\nreturn 2\n");
    assert_eq!(
        json_out(&lmcp_ok(h, &["run", &bom, "--json"]))["result"],
        json!(2)
    );
    // the line of an error is the file's
    let bad = write(h, "bad.lua", "#!/usr/bin/env lmcp\n\nerror('here')\n");
    let out = lmcp(h, &["run", &bad]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bad.lua:3:"),
        "{out:?}"
    );
    let tool = write(
        h,
        "user_bom.lua",
        "\u{feff}#!/usr/bin/env lmcp\n---@name user_bom\n---@description d\nreturn 3\n",
    );
    lmcp_ok(h, &["tool", "create", &tool]);
    let recipe = write(h, "r.lua", "\u{feff}---@name bomrec\nreturn 4\n");
    lmcp_ok(h, &["recipe", "save", &recipe]);
    let json_recipe = write(
        h,
        "bomj.json",
        "\u{feff}{\"name\":\"bomj\",\"steps\":[{\"tool\":\"calculate\",\"args\":{\"expression\":\"1\"}}]}",
    );
    lmcp_ok(h, &["recipe", "save", &json_recipe]);
    let t = TestHost::new();
    let installed = call_yes(
        &t.host,
        "skill_install",
        skill("\u{feff}#!/usr/bin/env lmcp\nreturn 5\n"),
    )
    .await;
    assert!(installed.is_ok(), "{installed:?}");
    let custom = json!({"name": "user_sb", "description": "d",
        "lua": "#!/usr/bin/env lmcp\nreturn 6"});
    call_yes(&t.host, "custom_tool_create", custom)
        .await
        .unwrap();
    assert_eq!(
        call_yes(&t.host, "user_sb", json!({})).await.unwrap()["result"],
        json!(6)
    );
}

/// A `---@name` that is not the program's is refused in every door that names the program
/// otherwise, at the header's line; a header's description is the recipe's from MCP too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_name_and_description_follow_one_rule() {
    let t = TestHost::new();
    let lua = "-- a comment\n---@name other\n---@description From the header\nreturn 1";
    let e = call_yes(
        &t.host,
        "recipe_save",
        json!({"manifest": {"name": "mine", "lua": lua}}),
    )
    .await
    .unwrap_err();
    assert!(
        e.contains("mine.lua:2:") && e.contains("---@name other"),
        "{e}"
    );
    let e = call_yes(&t.host, "skill_install", skill(lua))
        .await
        .unwrap_err();
    assert!(
        e.contains("s.lua:2:") && e.contains("---@name other"),
        "{e}"
    );
    let e = call_yes(
        &t.host,
        "custom_tool_create",
        json!({"name": "user_mine", "description": "d", "lua": lua}),
    )
    .await
    .unwrap_err();
    assert!(e.contains("user_mine.lua:2:"), "{e}");
    // the same header with the matching name saves, and its description is the recipe's
    let named = lua.replace("other", "mine");
    call_yes(
        &t.host,
        "recipe_save",
        json!({"manifest": {"name": "mine", "lua": named}}),
    )
    .await
    .unwrap();
    let list = call_yes(&t.host, "recipe_list", json!({})).await.unwrap();
    assert_eq!(
        list["recipes"][0]["description"], "From the header",
        "{list}"
    );
    // a skill script may name itself by its file
    let own = lua.replace("other", "s");
    assert!(
        call_yes(&t.host, "skill_install", skill(&own))
            .await
            .is_ok()
    );
}

/// A timeout under 1 ms rounds to nothing: refused in a header and in `--timeout`, naming the
/// minimum.
#[test]
fn a_timeout_under_a_millisecond_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let tiny = write(h, "tiny.lua", "---@timeout 1e-12\nreturn 1\n");
    let out = lmcp(h, &["run", &tiny]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 0.001 seconds (1 ms)"));
    let ok = write(h, "ok.lua", "return 1\n");
    let out = lmcp(h, &["run", &ok, "--timeout", "1e-12"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 0.001 seconds (1 ms)"));
    lmcp_ok(h, &["run", &ok, "--timeout", "0.5"]);
}

/// A script that does not compile is refused before its run begins: no journal to resume,
/// exit 2 like a save.
#[test]
fn a_script_that_does_not_compile_starts_no_run() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let syn = write(h, "syn.lua", "return return\n");
    let out = lmcp(h, &["run", &syn, "--yes"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("syn.lua:1:") && !err.contains("--resume"),
        "{err}"
    );
    let runs = json_out(&lmcp_ok(h, &["runs", "--json"]));
    assert_eq!(runs, json!([]));
}

/// A nested failure names its cause once: no `script_error: ` per level.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_failure_is_not_prefixed_per_level() {
    let t = TestHost::new();
    // a Lua recipe calling a custom tool that fails: the cause is said once, unprefixed
    let inner = json!({"name": "user_inner", "description": "d", "lua": "error('deep cause')"});
    call_yes(&t.host, "custom_tool_create", inner)
        .await
        .unwrap();
    let outer = "---@uses user_inner\nreturn tools.user_inner{}";
    call_yes(
        &t.host,
        "recipe_save",
        json!({"manifest": {"name": "outer", "lua": outer}}),
    )
    .await
    .unwrap();
    let e = call_yes(
        &t.host,
        "recipe_run",
        json!({"name": "outer", "confirm": true}),
    )
    .await
    .unwrap_err();
    assert!(e.contains("deep cause"), "{e}");
    assert!(!e.contains("script_error: "), "{e}");
}

/// A skill script with an empty `---@uses` is shown as calling no tools, in the one wording.
#[test]
fn an_empty_uses_reads_no_tools() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let dir = h.join("sk");
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: sk\ndescription: d\n---\nbody\n",
    )
    .unwrap();
    std::fs::write(dir.join("scripts/s.lua"), "---@uses\nreturn 1\n").unwrap();
    let out = lmcp(h, &["skill", "install", dir.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("may call: no tools"), "{out:?}");
}
