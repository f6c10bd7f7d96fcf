//! Everything lmcp prints passes one writer (`text::terminal`): text that a script, an agent, a
//! file's author or a skill chose is shown with its controls escaped in every door, while the
//! person's own `print` stays as written. `house_rules::only_the_terminal_writer_writes` keeps
//! the writer the only way out; these tests show what comes out of each door.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{json_out, lmcp, lmcp_ok};

/// An OSC 52 clipboard write, a C1 CSI, a bidi override, a zero-width space, DEL, a line
/// separator and a carriage return: each would act on a terminal if printed raw.
const HOSTILE: &str = "a\u{1b}]52;c;aGk=\u{7}b\u{9b}2J\u{202e}c\u{200b}\u{7f}\u{2028}d\re";

/// The first character a terminal would obey rather than show, if any (newlines and tabs are
/// layout).
fn raw_control(text: &str) -> Option<char> {
    text.chars().find(|&c| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
    })
}

fn assert_shown(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    if let Some(c) = raw_control(&text) {
        panic!("{what} holds {c:?} raw:\n{text:?}");
    }
}

fn both(out: &std::process::Output) -> Vec<u8> {
    let mut all = out.stdout.clone();
    all.extend_from_slice(&out.stderr);
    all
}

fn home() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    lmcp_ok(dir.path(), &["roots"]);
    dir
}

#[test]
fn log_lines_are_escaped_and_the_persons_print_is_not() {
    let h = home();
    let script = h.path().join("s.lua");
    std::fs::write(
        &script,
        format!(
            "local s = {HOSTILE:?}\nlog.info(s)\nlog.warn(s)\nlog.error(s)\nprint('own \\27[1mbold\\27[0m')\n"
        ),
    )
    .unwrap();
    let out = lmcp_ok(h.path(), &["run", script.to_str().unwrap()]);
    assert_shown("log lines on stderr", &out.stderr);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("\\e]52;c;").count(), 3, "{err}");
    assert!(err.contains("\\u{202e}") && err.contains("\\x9b"), "{err}");
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains("own \u{1b}[1mbold\u{1b}[0m"),
        "print writes the person's own output as it is: {printed:?}"
    );
}

#[test]
fn a_hostile_file_name_is_escaped_in_call_output_and_json_keeps_it() {
    let h = home();
    let name = format!("invoice\u{202e}txt.exe\u{9b}2J{HOSTILE}");
    std::fs::write(h.path().join("data/workspace").join(&name), "x").unwrap();
    let out = lmcp_ok(h.path(), &["call", "list_dir", "{}"]);
    assert_shown("lmcp call's pretty result", &out.stdout);
    let pretty: Value = serde_json::from_slice(&out.stdout).expect("still JSON");
    assert_eq!(pretty["entries"][0]["name"], json!(name));
    let out = lmcp_ok(h.path(), &["call", "list_dir", "{}", "--json"]);
    assert_shown("lmcp call --json", &out.stdout);
    assert_eq!(
        json_out(&out)["result"]["entries"][0]["name"],
        json!(name),
        "the escapes are JSON's own: the value reads back unchanged"
    );
    // the history shows shapes, and its listing goes through the same writer
    let out = lmcp_ok(h.path(), &["history"]);
    assert_shown("lmcp history", &both(&out));
}

/// A description any MCP client may set without a yes (a read-only custom tool) reaches
/// `lmcp types` on stdout and in the file it writes, `tool list`, `tool show` and `tool create`.
#[test]
fn descriptions_chosen_by_an_agent_are_escaped_in_types_and_listings() {
    let h = home();
    let def = json!({
        "name": "user_shout",
        "description": HOSTILE,
        "parameters": [{"name": "text", "type": "string", "description": HOSTILE}],
        "steps": [{"id": "one", "tool": "calculate", "arguments": {"expression": "1+1"}}]
    });
    let out = lmcp_ok(h.path(), &["call", "custom_tool_create", &def.to_string()]);
    assert_shown("custom_tool_create's result", &both(&out));
    for args in [
        &["types"][..],
        &["tool", "list"],
        &["tool", "show", "user_shout"],
        &["tools"],
    ] {
        let out = lmcp(h.path(), args);
        assert_shown(&format!("lmcp {args:?}"), &both(&out));
    }
    let file = h.path().join("lmcp.lua");
    lmcp_ok(h.path(), &["types", "-o", file.to_str().unwrap()]);
    let written = std::fs::read(&file).unwrap();
    assert_shown("the definitions file", &written);
    assert!(String::from_utf8_lossy(&written).contains("\\e]52;c;"));

    let lua = h.path().join("echo.lua");
    std::fs::write(
        &lua,
        format!(
            "---@name user_echo\n---@description {}\nreturn 1\n",
            HOSTILE.replace(['\r'], "")
        ),
    )
    .unwrap();
    let out = lmcp(h.path(), &["tool", "create", lua.to_str().unwrap()]);
    assert_shown("lmcp tool create", &both(&out));
}

#[test]
fn a_skills_description_is_escaped_in_skill_list() {
    let h = home();
    let skill = h.path().join("word-stats");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/skills/word-stats"),
        &skill,
    );
    let md = std::fs::read_to_string(skill.join("SKILL.md")).unwrap();
    let line = md
        .lines()
        .find(|l| l.starts_with("description:"))
        .unwrap()
        .to_string();
    // YAML's double-quoted escapes put the raw characters into the parsed description
    let md = md.replace(
        &line,
        "description: \"Counts \\e]52;c;aGk=\\a words \\x9b2J \\u202e \\u200b\"",
    );
    std::fs::write(skill.join("SKILL.md"), md).unwrap();
    let out = lmcp(
        h.path(),
        &["skill", "install", skill.to_str().unwrap(), "--yes"],
    );
    assert_shown("lmcp skill install", &both(&out));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    for args in [&["skill", "list"][..], &["skill", "show", "word-stats"]] {
        let out = lmcp(h.path(), args);
        assert_shown(&format!("lmcp {args:?}"), &both(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("\\e]52;c;"),
            "{out:?}"
        );
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// A run's journal shows what a script chose (its program name, step arguments' shapes): the
/// listing and the single run both go through the writer.
#[test]
fn runs_listings_escape_what_a_script_chose() {
    let h = home();
    let script = h.path().join(format!("run{}.lua", "\u{1b}[2J\u{202e}"));
    std::fs::write(
        &script,
        format!(
            "---@uses write_file\ntools.write_file{{path = {:?}, content = 'x'}}\nerror({HOSTILE:?})\n",
            "n\u{9b}2J.txt"
        ),
    )
    .unwrap();
    let out = lmcp(h.path(), &["run", script.to_str().unwrap(), "--yes"]);
    assert_shown("a failed run's report", &both(&out));
    let out = lmcp_ok(h.path(), &["runs", "list", "--json"]);
    let id = json_out(&out)[0]["run"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| panic!("a run was kept: {out:?}"));
    for args in [&["runs", "list"][..], &["runs", "show", &id]] {
        let out = lmcp(h.path(), args);
        assert_shown(&format!("lmcp {args:?}"), &both(&out));
    }
}

/// clap's own errors quote what was typed (a file name someone else chose, expanded by the
/// shell): they pass the writer too.
#[test]
fn usage_errors_quote_arguments_escaped() {
    let h = home();
    let out = lmcp(
        h.path(),
        &["tools", "--xa\u{202e}b\u{9b}2J\u{2028}c", HOSTILE],
    );
    assert_eq!(out.status.code(), Some(2));
    assert_shown("a usage error", &both(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\\u{202e}"));
}
