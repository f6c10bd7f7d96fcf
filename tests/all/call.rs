//! `lmcp call NAME KEY=VALUE...`: pairs typed by the tool's input schema, one test per JSON type
//! a program header can declare (null, which none can, is tested beside the parser in
//! `src/front/call_args.rs`), `@FILE` and `@@`, and the error that names a key whose value does
//! not fit.

use serde_json::{Value, json};

use crate::common::{json_out, lmcp, lmcp_ok};

/// A custom tool that hands back the arguments it was given, one optional param per type.
const ECHO: &str = "\
---@name user_echo
---@description Hands back the arguments it was given.
---@param s? string
---@param i? integer
---@param n? number
---@param b? boolean
---@param a? array
---@param o? object
return params
";

/// A home with `user_echo` saved.
fn home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("echo.lua");
    std::fs::write(&file, ECHO).unwrap();
    lmcp_ok(home.path(), &["tool", "create", file.to_str().unwrap()]);
    home
}

/// What `user_echo` hands back for these pairs.
fn echo(home: &std::path::Path, pairs: &[&str]) -> Value {
    let mut args = vec!["--json", "call", "user_echo"];
    args.extend_from_slice(pairs);
    json_out(&lmcp_ok(home, &args))["result"]["result"].clone()
}

#[test]
fn a_string_is_the_text_as_typed() {
    let home = tempfile::tempdir().unwrap();
    let out = lmcp_ok(
        home.path(),
        &["--json", "call", "calculate", "expression=6*7"],
    );
    assert_eq!(json_out(&out)["result"]["value"], 42);
    let home = self::home();
    assert_eq!(echo(home.path(), &["s=42"]), json!({"s": "42"}));
}

#[test]
fn an_integer_is_parsed() {
    let home = home();
    let got = echo(home.path(), &["i=7"]);
    assert_eq!(got, json!({"i": 7}));
    assert!(got["i"].is_i64());
}

#[test]
fn a_number_is_parsed() {
    let home = home();
    assert_eq!(echo(home.path(), &["n=2.5"]), json!({"n": 2.5}));
}

#[test]
fn a_boolean_is_true_or_false() {
    let home = home();
    assert_eq!(
        echo(home.path(), &["b=true", "s=x"]),
        json!({"b": true, "s": "x"})
    );
    assert_eq!(echo(home.path(), &["b=false"]), json!({"b": false}));
}

#[test]
fn an_array_is_json() {
    let home = home();
    assert_eq!(
        echo(home.path(), &[r#"a=[1,"two"]"#]),
        json!({"a": [1, "two"]})
    );
}

#[test]
fn an_object_is_json() {
    let home = home();
    assert_eq!(
        echo(home.path(), &[r#"o={"k":{"deep":true}}"#]),
        json!({"o": {"k": {"deep": true}}})
    );
}

#[test]
fn at_file_reads_the_value_and_at_at_is_a_literal_at() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let notes = h.join("notes.txt");
    std::fs::write(&notes, "first line\n@second\n").unwrap();
    let content = format!("content=@{}", notes.display());
    lmcp_ok(h, &["call", "write_file", "path=a.txt", &content, "--yes"]);
    assert_eq!(
        std::fs::read_to_string(h.join("data/workspace/a.txt")).unwrap(),
        "first line\n@second\n"
    );
    lmcp_ok(
        h,
        &[
            "call",
            "write_file",
            "path=b.txt",
            "content=@@home",
            "--yes",
        ],
    );
    assert_eq!(
        std::fs::read_to_string(h.join("data/workspace/b.txt")).unwrap(),
        "@home"
    );
    // a file that is not there is named, with the way to write a literal `@`
    let out = lmcp(
        h,
        &["call", "write_file", "path=c.txt", "content=@nope.txt"],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`content`: cannot read nope.txt") && err.contains("@@"),
        "{err}"
    );
}

#[test]
fn a_value_that_does_not_fit_names_the_key() {
    let home = home();
    let out = lmcp(home.path(), &["call", "user_echo", "i=seven"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("argument `i` must be integer") && err.contains("`seven` is not an integer"),
        "{err}"
    );
    // JSON stays accepted, whole
    let out = lmcp_ok(home.path(), &["--json", "call", "user_echo", r#"{"i": 3}"#]);
    assert_eq!(json_out(&out)["result"]["result"], json!({"i": 3}));
}
