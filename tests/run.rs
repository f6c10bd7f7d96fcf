//! `lmcp run FILE.lua` end to end: parameters, previews, --yes, exit codes, and the shipped
//! example scripts.

mod common;

use common::{json_out, lmcp};
use serde_json::json;

fn write(dir: &std::path::Path, name: &str, src: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, src).unwrap();
    p.display().to_string()
}

fn example(name: &str) -> String {
    format!("{}/examples/scripts/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn runs_a_script_with_params() {
    let home = tempfile::tempdir().unwrap();
    let out = lmcp(
        home.path(),
        &["run", &example("squares.lua"), "--param", "n=4", "--json"],
    );
    assert_eq!(out.status.code(), Some(0));
    let v = json_out(&out);
    assert_eq!(v["result"], json!({"total": 30, "even_squares": [4, 16]}));
    assert_eq!(v["output"], "the sum of the first 4 squares is 30\n");
    let out = lmcp(home.path(), &["run", &example("squares.lua")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("the sum of the first 10 squares is 385") && text.contains("\"total\": 385"),
        "{text}"
    );
}

#[test]
fn without_confirmation_writes_are_previewed_and_listed() {
    let home = tempfile::tempdir().unwrap();
    let out = lmcp(home.path(), &["run", &example("notes.lua")]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("previewed 3 state-changing call(s)"),
        "{text}"
    );
    assert!(
        text.contains("write_file (write): write 29 bytes to notes/ideas.md"),
        "{text}"
    );
    assert!(!home.path().join("data/workspace/notes").exists());
    let v = json_out(&lmcp(
        home.path(),
        &["run", &example("notes.lua"), "--yes", "--json"],
    ));
    assert_eq!(v["result"]["written"].as_array().unwrap().len(), 3);
    assert_eq!(v["previews"], json!([]));
    assert!(home.path().join("data/workspace/notes/todo.md").exists());
    // run again: the notes exist and are kept
    let v = json_out(&lmcp(
        home.path(),
        &["run", &example("notes.lua"), "--yes", "--json"],
    ));
    assert_eq!(v["result"]["kept"].as_array().unwrap().len(), 3);
}

#[test]
fn word_count_reads_a_file_or_a_text() {
    let home = tempfile::tempdir().unwrap();
    let out = lmcp(
        home.path(),
        &[
            "run",
            &example("word_count.lua"),
            "-p",
            "text=b a b c b a",
            "-p",
            "limit=2",
            "--json",
        ],
    );
    assert_eq!(
        json_out(&out)["result"],
        json!({"total_words": 6, "top": [{"word": "b", "count": 3}, {"word": "a", "count": 2}]})
    );
    let out = lmcp(
        home.path(),
        &[
            "run",
            &example("word_count.lua"),
            "-p",
            "path=missing.txt",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        json_out(&out)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot read missing.txt")
    );
}

#[test]
fn exit_codes_and_messages() {
    let home = tempfile::tempdir().unwrap();
    let d = home.path();
    let code = |args: &[&str]| lmcp(d, args).status.code().unwrap();
    let bad_header = write(d, "h.lua", "---@param x strng\nreturn 1");
    let out = lmcp(d, &["run", &bad_header]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad program header: h.lua:1: "));
    let needs = write(d, "n.lua", "---@param x integer\nreturn params.x");
    let out = lmcp(d, &["run", &needs]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing required parameter `x`"));
    assert_eq!(code(&["run", &needs, "-p", "x=nope"]), 2);
    assert_eq!(code(&["run", &needs, "-p", "y=1"]), 2);
    assert_eq!(
        json_out(&lmcp(d, &["run", &needs, "-p", "x=7", "--json"]))["result"],
        json!(7)
    );
    let boom = write(d, "b.lua", "print('before') error('boom')");
    let out = lmcp(d, &["run", &boom]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("b.lua:1: boom"));
    let v = json_out(&lmcp(d, &["run", &boom, "--json"]));
    assert_eq!(v["outcome"], "failed");
    assert_eq!(v["output"], "before\n");
    let syntax = write(d, "s.lua", "if then");
    assert_eq!(code(&["run", &syntax]), 1);
    let forever = write(d, "f.lua", "while true do end");
    let out = lmcp(d, &["run", &forever, "--timeout", "0.3"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("timed out after 300ms"));
    let header_timeout = write(d, "t.lua", "---@timeout 0.2\nwhile true do end");
    assert!(
        String::from_utf8_lossy(&lmcp(d, &["run", &header_timeout]).stderr)
            .contains("timed out after 200ms")
    );
    assert_eq!(code(&["run", "/no/such/file.lua"]), 1);
    let not_lua = write(d, "x.txt", "return 1");
    assert_eq!(code(&["run", &not_lua]), 2);
    // denied calls surface as catchable errors, and uncaught they fail the run
    assert_eq!(code(&["grants", "deny", "calculate"]), 0);
    let denied = write(d, "d.lua", "return tools.calculate{expression = '1'}");
    let out = lmcp(d, &["run", &denied]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("denied: `calculate` was denied"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn types_are_generated_from_the_registry() {
    let home = tempfile::tempdir().unwrap();
    let out = lmcp(home.path(), &["types"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("---@meta") && text.contains("function tools.write_file(args) end"));
    let file = home.path().join("meta.lua");
    assert_eq!(
        lmcp(home.path(), &["types", "-o", file.to_str().unwrap()])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    // what a checker needs besides the tools: a skill's config, the header's array and object,
    // previews from state-changing tools, and the sandbox's os with no io
    for wanted in [
        "config = {}",
        "---@alias array any[]",
        "---@alias object table<string, any>",
        "---@return write_file_result|Preview",
        "---@return calculate_result\n",
        "function os.clock() end",
        "---@deprecated The sandbox has no io library",
        "---@deprecated Not in the sandbox: pass values as params",
    ] {
        assert!(text.contains(wanted), "{wanted}");
    }
}

/// `lmcp types -o DIR --config`: the definitions and the bundled modules in DIR, and the
/// editor configs in the current folder pointing at it; a config with other settings is left
/// alone unless --force.
#[test]
fn types_for_an_editor_project() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(common::bin())
            .args(args)
            .current_dir(project.path())
            .env("LMCP_HOME", home.path())
            .output()
            .unwrap()
    };
    let out = run(&["types", "-o", ".lmcp", "--config"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for file in [
        "lmcp.lua",
        "tbl.lua",
        "retry.lua",
        "inspect.lua",
        "test.lua",
    ] {
        assert!(project.path().join(".lmcp").join(file).is_file(), "{file}");
    }
    let emmy: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(project.path().join(".emmyrc.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(emmy["workspace"]["library"][0], ".lmcp");
    assert_eq!(emmy["runtime"]["version"], "Lua5.4");
    assert_eq!(
        emmy["diagnostics"]["disable"][0], "annotation-usage-error",
        "program headers are accepted"
    );
    let luals: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(project.path().join(".luarc.json")).unwrap())
            .unwrap();
    assert_eq!(luals["workspace.library"][0], ".lmcp");
    assert_eq!(luals["runtime.builtin"]["io"], "disable");
    // again: same files, nothing to refuse
    assert_eq!(
        run(&["types", "-o", ".lmcp", "--config"]).status.code(),
        Some(0)
    );
    // a config of the person's own is not replaced without --force
    std::fs::write(project.path().join(".luarc.json"), "{\"mine\": true}").unwrap();
    let out = run(&["types", "-o", ".lmcp", "--config"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));
    assert_eq!(
        std::fs::read_to_string(project.path().join(".luarc.json")).unwrap(),
        "{\"mine\": true}"
    );
    assert_eq!(
        run(&["types", "-o", ".lmcp", "--config", "--force"])
            .status
            .code(),
        Some(0)
    );
}
