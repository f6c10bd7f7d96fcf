//! Property tests for every parser that takes outside input: whatever the input, the answer is a
//! value or a typed error, never a panic or a hang. `.ci/run` runs this with
//! `PROPTEST_CASES=10000`; a plain `cargo test` runs proptest's default number of cases.
//!
//! Inputs are built to be near misses of the real formats (valid keys, wrong shapes, stray
//! syntax), which reach deeper than random bytes would.

mod common;

use std::sync::OnceLock;

use common::TestHost;
use lmcp::library::{custom_tools, recipes, skills};
use lmcp::program::{header::Header, interpolate};
use proptest::prelude::*;
use serde_json::{Value, json};

/// One host for every case (saving is never reached: only checks run).
fn host() -> &'static TestHost {
    static HOST: OnceLock<TestHost> = OnceLock::new();
    HOST.get_or_init(TestHost::new)
}

/// JSON values of every shape, small and nested.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-z${}\\[\\]._ 0-9]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("${x}"),
            Just("${steps[0].result.a}"),
            Just("$${"),
            Just("${steps[9].result}"),
            Just("calculate"),
            Just("write_file"),
            Just("recipe_run"),
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("name".to_string()),
                    Just("tool".to_string()),
                    Just("args".to_string()),
                    Just("steps".to_string()),
                    Just("params".to_string()),
                    Just("type".to_string()),
                    Just("wait".to_string()),
                    Just("lua".to_string()),
                    Just("$input".to_string()),
                    Just("$step".to_string()),
                    Just("path".to_string()),
                    Just("id".to_string()),
                    "[a-z]{1,6}",
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Lua-header-like text: tags, names, types, defaults and noise.
fn header_text() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        "---@(name|description|param|timeout|uses|return|parm) [a-zA-Z0-9_?=\" ,.\\[\\]{}-]{0,24}",
        "-- [a-z ]{0,10}",
        "local x = [0-9]{1,3}",
        "#!.{0,8}",
        Just(String::new()),
    ];
    prop::collection::vec(line, 0..8).prop_map(|l| l.join("\n"))
}

/// SKILL.md-like text: front matter with keys, anchors, aliases, nesting and noise.
fn skill_md_text() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        "(name|description|version|config): [a-zA-Z0-9 &*\\[\\]{}:,-]{0,16}",
        " {2,4}[a-z]{1,6}: [a-zA-Z0-9 &*\\[\\]{}-]{0,10}",
        "- [a-z*&]{0,6}",
        "[a-z]{1,5}: &a[0-9] \\[x, x\\]",
        "[a-z]{1,5}: \\[\\*a[0-9], \\*a[0-9]\\]",
    ];
    (prop::collection::vec(line, 0..10), any::<bool>()).prop_map(|(lines, close)| {
        let end = if close { "\n---\nbody\n" } else { "\n" };
        format!("---\n{}{end}", lines.join("\n"))
    })
}

proptest! {
    #[test]
    fn recipe_manifests_check_or_say_why(v in json_value()) {
        if let Ok(m) = recipes::parse_manifest(v) {
            let _ = recipes::check(host().host.registry(), m);
        }
    }

    #[test]
    fn custom_tool_definitions_compile_or_say_why(v in json_value(), name in "user_[a-z]{1,8}") {
        let mut def = json!({"name": name, "description": "d"});
        if let Value::Object(extra) = v {
            for (k, x) in extra {
                def[k] = x;
            }
        }
        if let Ok(d) = serde_json::from_value::<custom_tools::Definition>(def) {
            let _ = custom_tools::compile(host().host.registry(), d);
        }
    }

    #[test]
    fn program_headers_parse_or_name_the_line(text in header_text()) {
        if let Err(e) = Header::parse(&text, "t.lua") {
            prop_assert!(e.to_string().contains("t.lua:"), "{}", e);
        }
    }

    #[test]
    fn skill_md_parses_or_says_why(text in skill_md_text()) {
        let _ = skills::parse_skill_md(&text);
    }

    #[test]
    fn calculate_evaluates_or_says_why(expr in "[0-9a-z+*/^%().,_ -]{0,40}") {
        let _ = lmcp::tools::calculate::evaluate(&expr);
    }

    #[test]
    fn interpolation_strings_parse_or_say_why(text in "[a-z0-9${}\\[\\]._ -]{0,40}") {
        let _ = interpolate::parse(&text);
    }

    #[test]
    fn bundles_import_or_say_why(v in json_value(), recipe in json_value()) {
        let mut bundle = json!({"format": "lmcp-recipe", "version": 1, "recipe": recipe});
        if let Value::Object(extra) = v {
            for (k, x) in extra {
                bundle[k] = x;
            }
        }
        let _ = recipes::import(&host().host, &bundle, true, false);
    }
}

/// Hundreds of hostile lines into `lmcp serve` (garbage, cut-off JSON, requests with wrong
/// methods and params): the server stays up and answers the next good request.
#[test]
fn serve_survives_hostile_lines() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    use std::io::{BufRead, BufReader, Write};

    let home = tempfile::tempdir().unwrap();
    let mut child = common::spawn(home.path(), &["serve"]);
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.contains("\"id\":\"last\"") {
                return Some(line);
            }
        }
        None
    });
    let mut runner = TestRunner::deterministic();
    let methods = [
        "initialize",
        "tools/list",
        "tools/call",
        "ping",
        "nope",
        "resources/list",
    ];
    let lines = prop_oneof![
        "[ -~]{0,60}",
        json_value().prop_map(|v| v.to_string()),
        (0..methods.len(), json_value()).prop_map(move |(m, p)| {
            json!({"jsonrpc": "2.0", "id": 7, "method": methods[m], "params": p}).to_string()
        }),
        json_value().prop_map(|v| {
            let s = v.to_string();
            s[..s.len() / 2].to_string()
        }),
    ];
    for _ in 0..400 {
        let line = lines.new_tree(&mut runner).unwrap().current();
        if stdin
            .write_all(format!("{}\n", line.replace('\n', " ")).as_bytes())
            .is_err()
        {
            break;
        }
    }
    let init = common::initialize(json!("last"));
    stdin.write_all(format!("{init}\n").as_bytes()).unwrap();
    stdin.flush().unwrap();
    let answer = reader.join().unwrap();
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    let answer = answer.expect("the server answered after the hostile lines");
    assert!(answer.contains("serverInfo"), "{answer}");
}
