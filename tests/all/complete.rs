//! Shell completion of installed names, as a shell asks for it (`COMPLETE=bash lmcp -- WORDS`):
//! tools after `lmcp call` and `lmcp tool show`, recipes after `lmcp recipe run`, skills after
//! `lmcp skill show|call|...`. The bash script end to end is in `docs.rs`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{self, lmcp_ok};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// A home with a custom tool, a recipe and a skill installed.
fn home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let ex = examples();
    let tool = ex.join("tools/user_calculate.json");
    lmcp_ok(h, &["tool", "create", tool.to_str().unwrap()]);
    let recipe = ex.join("recipes/daily_note.json");
    lmcp_ok(h, &["recipe", "save", recipe.to_str().unwrap()]);
    let skill = ex.join("skills/word-stats");
    lmcp_ok(h, &["skill", "install", skill.to_str().unwrap(), "--yes"]);
    home
}

/// What completing the last of `words` offers (the words as the shell has them, `lmcp` first).
fn complete(home: &Path, words: &[&str]) -> Vec<String> {
    let out = Command::new(common::bin())
        .arg("--")
        .args(words)
        .env("LMCP_HOME", home)
        .env("COMPLETE", "bash")
        .env("_CLAP_COMPLETE_INDEX", (words.len() - 1).to_string())
        .env("_CLAP_IFS", "\n")
        .output()
        .expect("run lmcp");
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn tool_names_complete_after_call() {
    let home = home();
    let h = home.path();
    assert_eq!(complete(h, &["lmcp", "call", "calc"]), ["calculate"]);
    let all = complete(h, &["lmcp", "call", ""]);
    for name in ["calculate", "write_file", "user_calculate", "recipe_run"] {
        assert!(all.iter().any(|n| n == name), "{name}: {all:?}");
    }
    // the installed custom tool, by its prefix
    assert_eq!(complete(h, &["lmcp", "call", "user_"]), ["user_calculate"]);
}

#[test]
fn tool_names_complete_after_tool_show() {
    let home = home();
    assert_eq!(
        complete(home.path(), &["lmcp", "tool", "show", "write_f"]),
        ["write_file"]
    );
}

#[test]
fn recipe_names_complete_after_recipe_run() {
    let home = home();
    let got = complete(home.path(), &["lmcp", "recipe", "run", "Dai"]);
    assert_eq!(got, ["Daily note"]);
    // nothing saved, nothing offered but the flags
    let empty = tempfile::tempdir().unwrap();
    let got = complete(empty.path(), &["lmcp", "recipe", "run", "Dai"]);
    assert!(got.is_empty(), "{got:?}");
}

#[test]
fn skill_names_complete_after_skill_commands() {
    let home = home();
    for sub in ["show", "call", "config", "enable", "disable", "remove"] {
        assert_eq!(
            complete(home.path(), &["lmcp", "skill", sub, "wo"]),
            ["word-stats"],
            "lmcp skill {sub}"
        );
    }
}
