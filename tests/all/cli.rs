//! The command line, end to end: every subcommand and every exit code, in a temporary home.

use serde_json::json;

use crate::common::{self, json_out, lmcp, lmcp_ok, lmcp_with_stdin};

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn code(out: &std::process::Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

#[test]
fn tools_lists_for_people_and_as_json() {
    let home = tempfile::tempdir().unwrap();
    let out = lmcp(home.path(), &["tools"]);
    assert_eq!(code(&out), 0);
    let t = text(&out);
    assert!(
        t.starts_with("NAME") && t.contains("calculate") && t.contains("write (destructive)"),
        "{t}"
    );
    let all = json_out(&lmcp(home.path(), &["tools", "--json"]));
    assert!(
        all.as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "run_command")
    );
    let core = json_out(&lmcp(
        home.path(),
        &["tools", "--profile", "core", "--json"],
    ));
    assert!(
        !core
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "run_command")
    );
    assert_eq!(core[0]["availability"]["status"], "available");
}

#[test]
fn tool_show_enable_disable() {
    let home = tempfile::tempdir().unwrap();
    let out = lmcp(home.path(), &["tool", "show", "calculate"]);
    assert_eq!(code(&out), 0);
    let t = text(&out);
    assert!(
        t.contains("input schema:")
            && t.contains("\"expression\"")
            && t.contains("kind          leaf"),
        "{t}"
    );
    let v = json_out(&lmcp(
        home.path(),
        &["tool", "show", "write_file", "--json"],
    ));
    assert_eq!(v["annotations"]["destructiveHint"], true);
    assert_eq!(v["grant"], "ask");
    let out = lmcp(home.path(), &["tool", "show", "calculat"]);
    assert_eq!(code(&out), 2);
    assert!(text(&out).contains("did you mean `calculate`"));

    assert_eq!(
        code(&lmcp(home.path(), &["tool", "disable", "calculate"])),
        0
    );
    let v = json_out(&lmcp(home.path(), &["tool", "show", "calculate", "--json"]));
    assert_eq!(v["availability"]["reason"], "disabled_by_config");
    let out = lmcp(
        home.path(),
        &["call", "calculate", r#"{"expression": "1"}"#],
    );
    assert_eq!(code(&out), 3, "{}", text(&out));
    assert!(text(&out).contains("lmcp tool enable calculate"));
    assert_eq!(
        code(&lmcp(home.path(), &["tool", "enable", "calculate"])),
        0
    );
    assert_eq!(
        code(&lmcp(
            home.path(),
            &["call", "calculate", r#"{"expression": "1"}"#]
        )),
        0
    );
}

#[test]
fn call_exit_codes() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let out = lmcp(
        h,
        &["call", "calculate", r#"{"expression": "(1 + 2) * 3 ^ 2"}"#],
    );
    assert_eq!(code(&out), 0);
    assert!(text(&out).contains("\"value\": 27"), "{}", text(&out));
    let v = json_out(&lmcp(
        h,
        &["call", "calculate", r#"{"expression": "2*21"}"#, "--json"],
    ));
    assert_eq!(
        v,
        json!({"outcome": "done", "result": {"expression": "2*21", "value": 42}})
    );

    // 1: the tool failed
    let out = lmcp(h, &["call", "calculate", r#"{"expression": "1/0"}"#]);
    assert_eq!(code(&out), 1);
    assert!(
        text(&out).contains("division by zero at position 2"),
        "{}",
        text(&out)
    );
    // 2: bad usage, bad JSON, invalid arguments, unknown tool
    assert_eq!(code(&lmcp(h, &["call"])), 2);
    assert_eq!(code(&lmcp(h, &["frobnicate"])), 2);
    let out = lmcp(h, &["call", "calculate", "{oops"]);
    assert_eq!(code(&out), 2);
    assert!(text(&out).contains("not valid JSON"));
    let out = lmcp(h, &["call", "calculate", r#"{"expression": 3}"#, "--json"]);
    assert_eq!(code(&out), 2);
    let v = json_out(&out);
    assert_eq!(v["error"]["class"], "invalid_args");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at /expression")
    );
    assert_eq!(code(&lmcp(h, &["call", "nope_tool"])), 2);
    // 3: needs confirmation (destructive, no TTY, no --yes), then confirmed with --yes
    let args = r#"{"path": "notes.txt", "content": "hello"}"#;
    let out = lmcp(h, &["call", "write_file", args]);
    assert_eq!(code(&out), 3);
    assert!(text(&out).contains("--yes"));
    assert!(!h.join("data/workspace/notes.txt").exists());
    assert_eq!(code(&lmcp(h, &["call", "write_file", args, "--yes"])), 0);
    assert_eq!(
        std::fs::read_to_string(h.join("data/workspace/notes.txt")).unwrap(),
        "hello"
    );
    // refusing to clobber is a tool failure that says how to proceed
    let out = lmcp(h, &["call", "write_file", args, "--yes"]);
    assert_eq!(code(&out), 1);
    assert!(text(&out).contains("overwrite"));
}

#[test]
fn call_reads_args_from_stdin_and_files() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let out = lmcp_with_stdin(
        h,
        &["call", "calculate", "-", "--json"],
        Some(r#"{"expression": "6*7"}"#),
    );
    assert_eq!(json_out(&out)["result"]["value"], 42);
    let f = h.join("args.json");
    std::fs::write(&f, r#"{"expression": "max(1, 9)"}"#).unwrap();
    let at = format!("@{}", f.display());
    let out = lmcp(h, &["call", "calculate", &at, "--json"]);
    assert_eq!(json_out(&out)["result"]["value"], 9);
}

#[test]
fn call_timeout_is_a_failure() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let args = r#"{"program": "sleep", "args": ["5"]}"#;
    let out = lmcp(
        h,
        &[
            "call",
            "run_command",
            args,
            "--yes",
            "--timeout",
            "0.2",
            "--json",
        ],
    );
    assert_eq!(code(&out), 1);
    assert_eq!(json_out(&out)["error"]["class"], "timeout");
}

#[test]
fn grants_change_what_runs() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let args = r#"{"path": "a.txt", "content": "x"}"#;
    assert_eq!(code(&lmcp(h, &["grants", "allow", "write_file"])), 0);
    assert_eq!(code(&lmcp(h, &["call", "write_file", args])), 0);
    assert_eq!(code(&lmcp(h, &["grants", "deny", "read"])), 0);
    let out = lmcp(h, &["call", "calculate", r#"{"expression": "1"}"#]);
    assert_eq!(code(&out), 3);
    assert!(
        text(&out).contains("grant for read tools is deny"),
        "{}",
        text(&out)
    );
    let v = json_out(&lmcp(h, &["grants", "--json"]));
    assert_eq!(v["rules"], json!({"read": "deny", "write_file": "allow"}));
    let calc = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool"] == "calculate")
        .unwrap()
        .clone();
    assert_eq!(calc["grant"], "deny");
    let out = lmcp(h, &["grants", "list"]);
    assert!(text(&out).contains("read: deny"));
    assert_eq!(code(&lmcp(h, &["grants", "reset", "read"])), 0);
    assert_eq!(
        code(&lmcp(h, &["call", "calculate", r#"{"expression": "1"}"#])),
        0
    );
    let out = lmcp(h, &["grants", "reset", "read"]);
    assert_eq!(code(&out), 2);
    let out = lmcp(h, &["grants", "allow", "writ_file"]);
    assert_eq!(code(&out), 2);
    assert!(
        text(&out).contains("did you mean `write_file`"),
        "{}",
        text(&out)
    );
    assert_eq!(code(&lmcp(h, &["grants", "maybe", "x"])), 2);
    assert_eq!(code(&lmcp(h, &["grants", "reset"])), 0);
    assert_eq!(
        json_out(&lmcp(h, &["grants", "--json"]))["rules"],
        json!({})
    );
}

#[test]
fn modes_persist_and_apply() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let v = json_out(&lmcp(h, &["mode", "--json"]));
    assert_eq!(
        v,
        json!({"private": false, "read-only": false, "no-terminal": false})
    );
    assert_eq!(code(&lmcp(h, &["mode", "read-only", "on"])), 0);
    let out = lmcp(
        h,
        &[
            "call",
            "write_file",
            r#"{"path": "a", "content": ""}"#,
            "--yes",
        ],
    );
    assert_eq!(code(&out), 3);
    assert!(text(&out).contains("read-only mode is on"));
    assert_eq!(code(&lmcp(h, &["mode", "read-only", "off"])), 0);
    assert!(text(&lmcp(h, &["mode", "read-only"])).contains("read-only: off"));

    assert_eq!(code(&lmcp(h, &["mode", "private", "on"])), 0);
    let before = json_out(&lmcp(h, &["history", "--json"]))
        .as_array()
        .unwrap()
        .len();
    assert_eq!(
        code(&lmcp(h, &["call", "calculate", r#"{"expression": "1"}"#])),
        0
    );
    let after = json_out(&lmcp(h, &["history", "--json"]))
        .as_array()
        .unwrap()
        .len();
    assert_eq!(before, after, "private mode must write no history");
    assert_eq!(code(&lmcp(h, &["mode", "private", "off"])), 0);
    assert_eq!(
        code(&lmcp(h, &["call", "calculate", r#"{"expression": "1"}"#])),
        0
    );
    let hist = json_out(&lmcp(h, &["history", "--json"]));
    assert_eq!(hist.as_array().unwrap().len(), before + 1);
    assert_eq!(hist[before]["tool"], "calculate");

    assert_eq!(code(&lmcp(h, &["mode", "no-terminal", "on"])), 0);
    let out = lmcp(
        h,
        &["call", "run_command", r#"{"program": "true"}"#, "--yes"],
    );
    assert_eq!(code(&out), 3);
    assert_eq!(code(&lmcp(h, &["mode", "bogus", "on"])), 2);
}

#[test]
fn roots_confine_the_file_tools() {
    let home = tempfile::tempdir().unwrap();
    let extra = tempfile::tempdir().unwrap();
    let h = home.path();
    std::fs::write(extra.path().join("in.txt"), "outside text").unwrap();
    let args = format!(r#"{{"path": "{}"}}"#, extra.path().join("in.txt").display());
    let out = lmcp(h, &["call", "read_file", &args]);
    assert_eq!(code(&out), 1);
    assert!(
        text(&out).contains("outside the allowed roots"),
        "{}",
        text(&out)
    );
    let out = lmcp(
        h,
        &["call", "read_file", r#"{"path": "../config/config.json"}"#],
    );
    assert_eq!(code(&out), 1);

    let dir = extra.path().to_str().unwrap();
    assert_eq!(code(&lmcp(h, &["roots", "add", dir])), 0);
    let roots = json_out(&lmcp(h, &["roots", "--json"]));
    assert_eq!(roots.as_array().unwrap().len(), 2);
    let out = lmcp(h, &["call", "read_file", &args, "--json"]);
    assert_eq!(json_out(&out)["result"]["content"], "outside text");
    assert_eq!(code(&lmcp(h, &["roots", "remove", dir])), 0);
    assert_eq!(code(&lmcp(h, &["call", "read_file", &args])), 1);
    assert_eq!(code(&lmcp(h, &["roots", "remove", dir])), 2);
    assert_eq!(code(&lmcp(h, &["roots", "add", "/no/such/dir"])), 2);
}

#[test]
fn paths_follow_lmcp_home() {
    let home = tempfile::tempdir().unwrap();
    let v = json_out(&lmcp(home.path(), &["paths", "--json"]));
    let config_dir = home.path().join("config");
    assert_eq!(v["config_dir"], config_dir.display().to_string());
    assert!(text(&lmcp(home.path(), &["paths"])).contains("workspace"));
    let out = std::process::Command::new(common::bin())
        .args(["paths"])
        .env("LMCP_HOME", "relative/dir")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("absolute"));
}

#[test]
fn a_config_that_cannot_be_read_fails_closed_and_is_never_written_over() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    // deny, read-only and private, then one typo: none of it may be lost
    lmcp_ok(h, &["grants", "deny", "write_file"]);
    lmcp_ok(h, &["mode", "private", "on"]);
    let path = h.join("config/config.json");
    let good = std::fs::read_to_string(&path).unwrap();
    let broken = good.replace("\"deny\"", "\"Deny\"");
    assert_ne!(broken, good);
    std::fs::write(&path, &broken).unwrap();
    // a write is refused (read-only), and says why
    let out = lmcp(
        h,
        &[
            "call",
            "write_file",
            r#"{"path": "a.txt", "content": "x"}"#,
            "--yes",
        ],
    );
    assert_eq!(code(&out), 3);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("read-only") && err.contains("config repair"),
        "{err}"
    );
    // and gives no advice that would itself be refused while the file is broken
    assert!(
        !err.contains("mode read-only off") && !err.contains("grants allow"),
        "{err}"
    );
    assert!(!h.join("data/workspace/a.txt").exists());
    // a read asks (every grant is ask), so with nobody to ask it does not run
    let out = lmcp(h, &["call", "calculate", r#"{"expression": "1+1"}"#]);
    assert_eq!(code(&out), 3);
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning:"));
    // private: nothing recorded while broken
    let out = lmcp(h, &["history", "--json"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("calculate"));
    // grants and mode say so
    let out = lmcp(h, &["grants", "--json"]);
    assert!(json_out(&out)["config_problem"].is_string());
    let out = lmcp(h, &["mode"]);
    assert!(text(&out).contains("config:"), "{}", text(&out));
    // a settings change is refused, and the file is left exactly as it was
    let out = lmcp(h, &["grants", "allow", "send"]);
    assert_ne!(code(&out), 0);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), broken);
    // repair asks, then keeps the broken file under a name of its own
    assert_eq!(code(&lmcp(h, &["config", "repair"])), 3);
    assert_eq!(code(&lmcp(h, &["config", "check"])), 1);
    lmcp_ok(h, &["config", "repair", "--yes"]);
    let kept: Vec<_> = std::fs::read_dir(h.join("config"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("corrupt-"))
        .collect();
    assert_eq!(kept.len(), 1);
    assert_eq!(std::fs::read_to_string(kept[0].path()).unwrap(), broken);
    lmcp_ok(h, &["config", "check"]);
    lmcp_ok(h, &["call", "calculate", r#"{"expression": "1+1"}"#]);
}

/// Every way a config can be unreadable or unsound fails closed (and none of them hangs):
/// a FIFO, a link to nothing, a folder, a huge file, a grant given twice, a relative root, a
/// zero limit, a forbidden endpoint. `config repair` sets each aside.
#[cfg(unix)]
#[test]
fn every_unsound_config_fails_closed() {
    type Make = fn(&std::path::Path);
    let cases: Vec<(&str, Make)> = vec![
        ("fifo", |p| {
            assert!(
                std::process::Command::new("mkfifo")
                    .arg(p)
                    .status()
                    .unwrap()
                    .success()
            )
        }),
        ("link to nothing", |p| {
            std::os::unix::fs::symlink(p.with_file_name("nowhere.json"), p).unwrap()
        }),
        ("folder", |p| std::fs::create_dir(p).unwrap()),
        ("huge", |p| {
            let mut text = " ".repeat(2 << 20);
            text.push_str("{}");
            std::fs::write(p, text).unwrap()
        }),
        ("grant twice", |p| {
            std::fs::write(
                p,
                r#"{"grants": {"write_file": "deny", "write_file": "allow"}}"#,
            )
            .unwrap()
        }),
        ("relative root", |p| {
            std::fs::write(p, r#"{"roots": ["."]}"#).unwrap()
        }),
        ("zero limit", |p| {
            std::fs::write(p, r#"{"limits": {"max_depth": 0}}"#).unwrap()
        }),
        ("endpoint", |p| {
            std::fs::write(p, r#"{"signals": {"endpoint": "http://example.com/x"}}"#).unwrap()
        }),
    ];
    for (what, make) in cases {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        std::fs::create_dir_all(h.join("config")).unwrap();
        make(&h.join("config/config.json"));
        let started = std::time::Instant::now();
        let out = lmcp(h, &["mode"]);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{what}: hung"
        );
        let shown = text(&out);
        assert!(
            shown.contains("config:") && shown.contains("read-only: on"),
            "{what}: {shown}"
        );
        lmcp_ok(h, &["config", "repair", "--yes"]);
        lmcp_ok(h, &["config", "check"]);
    }
}

#[test]
fn unknown_config_fields_are_warned_about_and_kept() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    std::fs::create_dir_all(h.join("config")).unwrap();
    std::fs::write(
        h.join("config/config.json"),
        r#"{"modes": {"read_only": true, "turbo": 1}, "future": {"x": 2}}"#,
    )
    .unwrap();
    let out = lmcp(h, &["mode", "private", "on"]);
    assert_eq!(code(&out), 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("future, modes.turbo"), "{err}");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(h.join("config/config.json")).unwrap())
            .unwrap();
    assert_eq!(saved["modes"]["turbo"], 1);
    assert_eq!(saved["future"]["x"], 2);
    assert_eq!(saved["modes"]["read_only"], true);
    assert_eq!(saved["modes"]["private"], true);
}

#[test]
fn help_and_version() {
    let home = tempfile::tempdir().unwrap();
    let out = lmcp(home.path(), &["--help"]);
    assert_eq!(code(&out), 0);
    assert!(text(&out).contains("call") && text(&out).contains("grants"));
    assert_eq!(code(&lmcp(home.path(), &["--version"])), 0);
}

/// A grant key that names nothing (a typo) is named on every command, with the key it likely
/// meant, and `config check` fails on it: the rule it was meant to set would silently apply to
/// nothing.
#[test]
fn a_mistyped_grant_key_is_named_on_every_command() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    std::fs::create_dir_all(h.join("config")).unwrap();
    std::fs::write(
        h.join("config/config.json"),
        r#"{"grants": {"destrucive": "deny", "write_fiel": "deny", "user_later": "allow"}}"#,
    )
    .unwrap();
    let out = lmcp(h, &["mode"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("did you mean `destructive`"), "{err}");
    assert!(err.contains("did you mean `write_file`"), "{err}");
    assert!(
        !err.contains("user_later"),
        "saved tools may be loaded later: {err}"
    );
    let out = lmcp(h, &["config", "check", "--json"]);
    assert_eq!(code(&out), 1);
    assert_eq!(json_out(&out)["warnings"].as_array().unwrap().len(), 2);
}

/// A grant for a custom tool that does not exist (yet) is kept, and said so, with the closest
/// saved name: a typo would otherwise deny nothing without a word.
#[test]
fn a_grant_for_a_custom_tool_not_saved_yet_is_warned_about() {
    let home = tempfile::tempdir().unwrap();
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tools");
    let def = examples.join("user_calculate.json");
    common::lmcp_ok(home.path(), &["tool", "create", def.to_str().unwrap()]);
    let out = common::lmcp_ok(home.path(), &["grants", "deny", "user_calculat"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no custom tool `user_calculat` yet") && err.contains("`user_calculate`"),
        "{err}"
    );
    let out = common::lmcp_ok(home.path(), &["grants", "deny", "user_calculate"]);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Advice that names an argument says the flag on the command line (`--replace`), not the MCP
/// argument (`"replace": true`), which a CLI user cannot pass (#34). `lmcp call`, where the
/// person writes the JSON, keeps the JSON words.
#[test]
fn errors_name_the_flags_a_cli_user_types() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let recipe = root.join("examples/recipes/daily_note.json");
    let recipe = recipe.to_str().unwrap();
    let tool = root.join("examples/tools/user_calculate.json");
    let tool = tool.to_str().unwrap();
    let bundle = h.join("note.bundle.json");
    let bundle = bundle.to_str().unwrap();
    lmcp_ok(h, &["recipe", "save", recipe]);
    lmcp_ok(h, &["recipe", "export", "Daily note", "-o", bundle]);
    lmcp_ok(h, &["tool", "create", tool]);
    let cases: [&[&str]; 3] = [
        &["recipe", "save", recipe],
        &["recipe", "import", bundle, "--yes"],
        &["tool", "create", tool],
    ];
    for args in cases {
        let out = lmcp(h, args);
        let t = text(&out);
        assert_ne!(code(&out), 0, "{args:?}: {t}");
        assert!(!t.contains("\"replace\""), "{args:?}: {t}");
        assert!(t.contains("pass `--replace`"), "{args:?}: {t}");
    }
    // --json says the same words
    let out = lmcp(h, &["recipe", "save", recipe, "--json"]);
    assert!(
        json_out(&out)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`--replace`")
    );
    // the JSON words where the person wrote JSON
    let manifest = std::fs::read_to_string(root.join("examples/recipes/daily_note.json")).unwrap();
    let call = format!("{{\"manifest\": {manifest}}}");
    let t = text(&lmcp(h, &["call", "recipe_save", &call, "--yes"]));
    assert!(t.contains("pass `\"replace\": true`"), "{t}");
}

/// Each door says the arguments and tools its advice names the way its caller gives them
/// (#34): `lmcp call` with KEY=VALUE pairs says `overwrite=true`, a subcommand its flag
/// (`--yes`), a Lua script `overwrite = true`, MCP `"overwrite": true`; on the command line a
/// tool that helps next is said as its command (`lmcp skill list`), not as `skill_list`.
#[test]
fn each_door_says_arguments_and_tools_in_its_own_words() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let write = ["call", "write_file", "path=z", "content=1", "--yes"];
    lmcp_ok(h, &write);
    let t = text(&lmcp(h, &write));
    assert!(
        t.contains("exists; pass `overwrite=true` to replace it"),
        "{t}"
    );
    let t = text(&lmcp(
        h,
        &[
            "call",
            "write_file",
            r#"{"path": "z", "content": "1"}"#,
            "--yes",
        ],
    ));
    assert!(t.contains("pass `\"overwrite\": true`"), "{t}");
    let t = text(&lmcp(
        h,
        &[
            "run",
            "-e",
            "return tools.write_file{path = 'z', content = '1'}",
            "--yes",
        ],
    ));
    assert!(t.contains("pass `overwrite = true`"), "{t}");
    let manifest = h.join("r.json");
    std::fs::write(
        &manifest,
        r#"{"name": "r", "steps": [{"tool": "get_datetime", "args": {}}]}"#,
    )
    .unwrap();
    let pair = format!("manifest=@{}", manifest.display());
    lmcp_ok(h, &["call", "recipe_save", &pair, "--yes"]);
    let t = text(&lmcp(h, &["call", "recipe_save", &pair, "--yes"]));
    assert!(t.contains("pass `replace=true` to replace it"), "{t}");
    let zeros = "0".repeat(64);
    let t = text(&lmcp(
        h,
        &["recipe", "run", "r", "--yes", "--plan-hash", &zeros],
    ));
    assert!(
        t.contains("nothing ran. Run it without `--yes` to see the new plan"),
        "{t}"
    );
    for (args, says) in [
        (
            &["tool", "show", "nope"][..],
            "; `lmcp tools` lists the tools",
        ),
        (&["call", "nope"], "; `lmcp tools` lists the tools"),
        (
            &["skill", "call", "nope", "x"],
            "; `lmcp skill list` lists them",
        ),
        (
            &["recipe", "run", "nope"],
            "; `lmcp recipe list` lists them",
        ),
        (
            &["call", "calculate", "nope=1"],
            "; `lmcp tool show calculate` shows its input schema",
        ),
    ] {
        let t = text(&lmcp(h, args));
        assert!(
            t.contains(says) && !t.contains("_list") && !t.contains("tools/list"),
            "{args:?}: {t}"
        );
    }
}
