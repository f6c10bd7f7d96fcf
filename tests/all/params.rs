//! Parameters by one rule in every kind of program: optional ones without a default, integers,
//! and what a custom tool's parameters may say.

use serde_json::json;

use crate::common::{TestHost, call_yes, lmcp, lmcp_ok};

/// An optional parameter without a default is left out where it is a whole argument, in a
/// recipe as in a custom tool; inside text it is refused at save, not at every run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unset_optional_param_leaves_its_argument_out() {
    let t = TestHost::new();
    let in_text = json!({"name": "opt", "params": [{"name": "a", "type": "string", "required": false}],
        "steps": [{"tool": "calculate", "args": {"expression": "1+${a}"}}]});
    let e = call_yes(&t.host, "recipe_save", json!({"manifest": in_text}))
        .await
        .unwrap_err();
    assert!(
        e.contains("/steps/0/args/expression") && e.contains("optional without a default"),
        "{e}"
    );
    let whole = json!({"name": "opt2", "params": [{"name": "a", "type": "string", "required": false}],
        "steps": [{"tool": "list_dir", "args": {"path": "${a}"}}]});
    call_yes(&t.host, "recipe_save", json!({"manifest": whole}))
        .await
        .unwrap();
    let r = call_yes(&t.host, "recipe_run", json!({"name": "opt2"}))
        .await
        .unwrap();
    assert_eq!(r["steps"][0]["args"], json!({}), "{r}");
    let r = call_yes(
        &t.host,
        "recipe_run",
        json!({"name": "opt2", "params": {"a": "."}}),
    )
    .await
    .unwrap();
    assert_eq!(r["steps"][0]["args"], json!({"path": "."}), "{r}");
}

/// A plan that cannot fill in a step's arguments (and not because a step before it was only
/// previewed) fails, and `lmcp recipe run` exits non-zero.
#[test]
fn an_unresolvable_plan_exits_non_zero() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let file = h.join("pl.json");
    std::fs::write(
        &file,
        json!({"name": "pl", "steps": [
            {"tool": "calculate", "args": {"expression": "1"}},
            {"tool": "calculate", "args": {"expression": "${steps[0].result.nope}"}}]})
        .to_string(),
    )
    .unwrap();
    lmcp_ok(h, &["recipe", "save", file.to_str().unwrap()]);
    let out = lmcp(h, &["recipe", "run", "pl"]);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no key `nope`"));
}

/// An integer parameter takes 1.0 as the integer 1 (as its JSON Schema does) and refuses a
/// whole number beyond the 64-bit range, with a clear error, instead of a float.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integers_follow_the_schema_and_the_range() {
    let t = TestHost::new();
    let def = json!({"name": "user_int", "description": "d",
        "lua": "---@param n integer\nreturn {n = params.n, kind = math.type(params.n)}"});
    call_yes(&t.host, "custom_tool_create", def).await.unwrap();
    let r = call_yes(&t.host, "user_int", json!({"n": 1.0}))
        .await
        .unwrap();
    assert_eq!(r["result"], json!({"n": 1, "kind": "integer"}), "{r}");
    let e = call_yes(&t.host, "user_int", json!({"n": 18446744073709551615u64}))
        .await
        .unwrap_err();
    assert!(e.contains("beyond the integer range"), "{e}");
}

/// A JSON custom tool's parameters take what the shared parameter type takes: a default, and
/// the type names a header or a recipe may use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_tool_params_take_defaults_and_every_type_name() {
    let t = TestHost::new();
    let def = json!({"name": "user_def", "description": "d",
        "parameters": [{"name": "e", "type": "string", "default": "2+3"}, {"name": "n", "type": "int"}],
        "steps": [{"id": "a", "tool": "calculate", "arguments": {"expression": {"$input": "e"}}}]});
    call_yes(&t.host, "custom_tool_create", def).await.unwrap();
    let r = call_yes(&t.host, "user_def", json!({})).await.unwrap();
    assert_eq!(r["result"]["value"], json!(5), "{r}");
}

/// 100,000 parameters, in a JSON recipe, a JSON custom tool and a Lua header, are refused at
/// once with the limit named (a save once ran for more than 20 s on them); 256 still save.
/// Through the binary, so this test process stays small.
#[test]
fn parameter_counts_are_bounded() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let many = |n: usize| -> Vec<serde_json::Value> {
        (0..n)
            .map(|i| json!({"name": format!("p{i}"), "type": "string", "default": "x"}))
            .collect()
    };
    let refused = |args: &[&str], expected: &[&str]| {
        let out = lmcp(h, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}: {err}");
        for e in expected {
            assert!(err.contains(e), "{args:?}: expected {e:?} in {err}");
        }
    };
    let recipe = h.join("wide.json");
    let manifest = json!({"name": "wide", "params": many(100_000),
        "steps": [{"tool": "calculate", "args": {"expression": "1"}}]});
    std::fs::write(&recipe, manifest.to_string()).unwrap();
    refused(
        &["recipe", "save", recipe.to_str().unwrap()],
        &["at most 256", "/params"],
    );
    let tool = h.join("tool.json");
    let def = json!({"name": "user_wide", "description": "d", "parameters": many(100_000),
        "steps": [{"id": "a", "tool": "calculate", "arguments": {"expression": "1"}}]});
    std::fs::write(&tool, def.to_string()).unwrap();
    refused(
        &[
            "call",
            "custom_tool_create",
            &format!("@{}", tool.display()),
        ],
        &["at most 256"],
    );
    let header: String = (0..100_000)
        .map(|i| format!("---@param p{i}? string\n"))
        .collect();
    let lua = h.join("user_wide_lua.lua");
    std::fs::write(
        &lua,
        format!("---@name user_wide_lua\n---@description d\n{header}return 1\n"),
    )
    .unwrap();
    refused(
        &["tool", "create", lua.to_str().unwrap()],
        &["at most that many", ":259"],
    );
    let fits = h.join("fits.json");
    let manifest = json!({"name": "wide_ok", "params": many(256),
        "steps": [{"tool": "calculate", "args": {"expression": "1"}}]});
    std::fs::write(&fits, manifest.to_string()).unwrap();
    lmcp_ok(h, &["recipe", "save", fits.to_str().unwrap()]);
}
