//! Custom tools: every create-time check, discovery at once and after a restart, running steps
//! through the gate, failing steps, declared capabilities, deletion and corrupt files.

use std::sync::Arc;
use std::time::Duration;

use lmcp::gate::{Answer, Scripted};
use lmcp::{CallContext, CallRequest, ConfirmMode, Origin, Outcome};
use serde_json::{Value, json};

use crate::common::{self, TestHost, call, ctx, json_out, lmcp, run_lua};

async fn create(t: &TestHost, def: Value) -> Result<Value, String> {
    call(&t.host, "custom_tool_create", def)
        .await
        .into_result()
        .map_err(|e| e.to_string())
}

fn calc_def() -> Value {
    json!({
        "name": "user_calc",
        "description": "Numeric arithmetic",
        "parameters": [{"name": "expression", "type": "string", "description": "Numeric arithmetic", "required": true}],
        "steps": [{"id": "answer", "tool": "calculate", "arguments": {"expression": {"$input": "expression"}}}]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_create_time_error_is_named() {
    let t = TestHost::new();
    create(
        &t,
        json!({"name": "user_other", "description": "x", "lua": "return 1"}),
    )
    .await
    .unwrap();
    let step = |tool: &str, args: Value| json!({"id": "a", "tool": tool, "arguments": args});
    let with = |params: Value, steps: Value| json!({"name": "user_t", "description": "d", "parameters": params, "steps": steps});
    let s_param =
        |name: &str, ty: &str, req: bool| json!({"name": name, "type": ty, "required": req});
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "prefix",
            json!({"name": "calc2", "description": "d", "steps": [step("calculate", json!({"expression": "1"}))]}),
            "pattern",
        ),
        (
            "charset",
            json!({"name": "user_Calc", "description": "d", "steps": [step("calculate", json!({"expression": "1"}))]}),
            "pattern",
        ),
        (
            "no body",
            json!({"name": "user_t", "description": "d"}),
            "give the body",
        ),
        (
            "both bodies",
            json!({"name": "user_t", "description": "d", "lua": "return 1", "steps": [step("calculate", json!({"expression": "1"}))]}),
            "not both",
        ),
        (
            "duplicate ids",
            with(
                json!([]),
                json!([
                    step("calculate", json!({"expression": "1"})),
                    step("calculate", json!({"expression": "2"}))
                ]),
            ),
            "used twice",
        ),
        (
            "unknown tool",
            with(json!([]), json!([step("calculat", json!({}))])),
            "no tool `calculat`; did you mean `calculate`",
        ),
        (
            "authoring step",
            with(json!([]), json!([step("custom_tool_list", json!({}))])),
            "authoring tool; steps can only call leaf tools",
        ),
        (
            "workflow step",
            with(json!([]), json!([step("user_other", json!({}))])),
            "workflow tool; steps can only call leaf tools",
        ),
        (
            "later step",
            with(
                json!([]),
                json!([
                    {"id": "a", "tool": "calculate", "arguments": {"expression": {"$step": "b", "path": "result.expression"}}},
                    {"id": "b", "tool": "calculate", "arguments": {"expression": "1"}}
                ]),
            ),
            "`b` (result.expression), which is a later step",
        ),
        (
            "unknown step",
            with(
                json!([]),
                json!([step("calculate", json!({"expression": {"$step": "zz"}}))]),
            ),
            "which is no step",
        ),
        (
            "bad path",
            with(
                json!([]),
                json!([{"id": "a", "tool": "calculate", "arguments": {"expression": "1"}}, {"id": "b", "tool": "calculate", "arguments": {"expression": {"$step": "a", "path": "value"}}}]),
            ),
            "starts at the step's result",
        ),
        (
            "undeclared input",
            with(
                json!([]),
                json!([step("calculate", json!({"expression": {"$input": "e"}}))]),
            ),
            "input `e`, which is not declared",
        ),
        (
            "literal of the wrong type",
            with(
                json!([]),
                json!([step("calculate", json!({"expression": 5}))]),
            ),
            "at /steps/0/arguments/expression: value is not of type",
        ),
        (
            "missing required argument",
            with(json!([]), json!([step("calculate", json!({}))])),
            "rule `required`",
        ),
        (
            "extra argument",
            with(
                json!([]),
                json!([step("calculate", json!({"expression": "1", "x": 1}))]),
            ),
            "additionalProperties",
        ),
        (
            "input of the wrong type",
            with(
                json!([s_param("n", "number", true)]),
                json!([step("calculate", json!({"expression": {"$input": "n"}}))]),
            ),
            "takes input `n`, a number, but `calculate` expects a string there",
        ),
        (
            "optional input for a required argument",
            with(
                json!([s_param("e", "string", false)]),
                json!([step("calculate", json!({"expression": {"$input": "e"}}))]),
            ),
            "make `e` required or give a literal",
        ),
        (
            "bad parameter type",
            with(
                json!([s_param("e", "text", true)]),
                json!([step("calculate", json!({"expression": "1"}))]),
            ),
            "enum",
        ),
        (
            "duplicate parameter",
            with(
                json!([s_param("e", "string", true), s_param("e", "string", true)]),
                json!([step("calculate", json!({"expression": "1"}))]),
            ),
            "declared twice",
        ),
        ("empty steps", with(json!([]), json!([])), "minItems"),
        (
            "lua header name",
            json!({"name": "user_t", "description": "d", "lua": "---@name user_x\nreturn 1"}),
            "the tool is named `user_t`",
        ),
        (
            "lua uses unknown tool",
            json!({"name": "user_t", "description": "d", "lua": "---@uses read_fil\nreturn 1"}),
            "no tool `read_fil`",
        ),
        (
            "lua syntax",
            json!({"name": "user_t", "description": "d", "lua": "return return"}),
            "does not compile",
        ),
        (
            "lua params in parameters",
            json!({"name": "user_t", "description": "d", "parameters": [s_param("a", "string", true)], "lua": "return 1"}),
            "declares its parameters in its header",
        ),
    ];
    let mut failures = Vec::new();
    for (what, def, expect) in cases {
        match create(&t, def).await {
            Ok(v) => failures.push(format!("{what}: created {v}")),
            Err(e) if !e.contains(expect) => failures.push(format!("{what}: {e}")),
            Err(_) => {}
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    assert!(
        t.host.registry().get("user_t").is_none(),
        "nothing half-saved"
    );
    assert!(!t.home().join("data/tools/user_t.json").exists());
    // replacing needs replace: true
    create(&t, calc_def()).await.unwrap();
    let e = create(&t, calc_def()).await.unwrap_err();
    assert!(
        e.contains("already exists; pass `\"replace\": true`"),
        "{e}"
    );
    let mut again = calc_def();
    again["replace"] = json!(true);
    assert_eq!(create(&t, again).await.unwrap()["replaced"], json!(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_tools_are_discovered_at_once_and_after_restart() {
    let t = TestHost::new();
    let mut changes = t.host.registry().subscribe();
    let before = *changes.borrow_and_update();
    create(&t, calc_def()).await.unwrap();
    assert!(
        changes.has_changed().unwrap(),
        "the registry announces the new tool"
    );
    assert!(*changes.borrow() > before);
    let spec = t.host.registry().get("user_calc").unwrap().spec().clone();
    assert_eq!(spec.kind, lmcp::registry::Kind::Workflow);
    assert_eq!(spec.effect, lmcp::registry::Effect::Read);
    let v = call(&t.host, "user_calc", json!({"expression": "6*7"}))
        .await
        .into_result()
        .unwrap();
    assert_eq!(v["result"]["value"], json!(42));
    assert_eq!(v["steps"][0]["id"], json!("answer"));
    // a new process sees it
    let out = lmcp(t.home(), &["tools", "--json"]);
    let listed = json_out(&out);
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["name"] == "user_calc" && x["kind"] == "workflow")
    );
    let out = lmcp(
        t.home(),
        &["call", "user_calc", r#"{"expression": "1+1"}"#, "--json"],
    );
    assert_eq!(json_out(&out)["result"]["result"]["value"], json!(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_middle_step_returns_the_completed_steps() {
    let t = TestHost::new();
    create(&t, json!({
        "name": "user_three",
        "description": "three steps, the middle one fails",
        "parameters": [{"name": "bad", "type": "string", "required": true}],
        "steps": [
            {"id": "first", "tool": "probe_read", "arguments": {"n": 1}},
            {"id": "middle", "tool": "calculate", "arguments": {"expression": {"$input": "bad"}}},
            {"id": "last", "tool": "probe_write", "arguments": {"n": 3}}
        ]
    }))
    .await
    .unwrap();
    let outcome = call(&t.host, "user_three", json!({"bad": "1/0"})).await;
    let j = outcome.to_json();
    let Outcome::Failed(e) = outcome else {
        panic!("{j}")
    };
    assert_eq!(e.class(), "step_failed");
    let msg = e.to_string();
    assert!(
        msg.contains("stopped at step `middle` (calculate)") && msg.contains("division by zero"),
        "{msg}"
    );
    assert!(
        msg.contains("completed before it: first (probe_read)"),
        "{msg}"
    );
    let details = e.details().unwrap();
    assert_eq!(
        details["completed_steps"][0]["result"],
        json!({"echo": {"n": 1}})
    );
    assert_eq!(
        details["failed_step"]["error"]["class"],
        json!("tool_error")
    );
    assert_eq!(j["error"]["details"]["failed_step"]["id"], json!("middle"));
    assert_eq!(t.entered.count("probe_read"), 1);
    assert_eq!(
        t.entered.count("probe_write"),
        0,
        "steps after the failure never run"
    );
    // Lua sees the same details on the error it catches
    let lua = "local ok, e = pcall(tools.user_three, {bad = '1/0'})\nreturn {e.code, e.details.failed_step.id, e.details.completed_steps[1].id}";
    let out = common::run_lua(
        &t.host,
        lua,
        ConfirmMode::Confirmed,
        std::time::Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert_eq!(out.value, json!(["step_failed", "middle", "first"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_pass_results_and_stay_under_the_gate() {
    let t = TestHost::new();
    create(&t, json!({
        "name": "user_chain",
        "description": "passes a result on",
        "steps": [
            {"id": "a", "tool": "calculate", "arguments": {"expression": "2*3"}},
            {"id": "b", "tool": "probe_write", "arguments": {"text": {"$step": "a", "path": "result.expression"}}}
        ]
    }))
    .await
    .unwrap();
    let spec = t.host.registry().get("user_chain").unwrap().spec().clone();
    assert_eq!(
        spec.effect,
        lmcp::registry::Effect::Write,
        "the strongest effect of its steps"
    );
    let v = call(&t.host, "user_chain", json!({}))
        .await
        .into_result()
        .unwrap();
    assert_eq!(v["result"], json!({"echo": {"text": "2*3"}}));
    // a grant on a step still applies
    t.set_grant("probe_write", lmcp::config::Grant::Deny);
    let e = call(&t.host, "user_chain", json!({}))
        .await
        .into_result()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("stopped at step `b`") && e.contains("deny"),
        "{e}"
    );
    // read-only mode refuses the whole write workflow
    t.host
        .update_config(|c| {
            c.grants.clear();
            c.modes.read_only = true;
            Ok(())
        })
        .unwrap();
    assert_eq!(
        call(&t.host, "user_chain", json!({})).await.class(),
        "denied"
    );
    // in a preview run the workflow runs with its own state-changing steps previewed, so a
    // plan shows what it would do
    t.host
        .update_config(|c| {
            c.modes.read_only = false;
            Ok(())
        })
        .unwrap();
    let ctx = CallContext::root(Origin::Program, ConfirmMode::Preview);
    let o = t
        .host
        .call(CallRequest::new("user_chain", json!({}), ctx))
        .await;
    assert_eq!(o.class(), "done", "{}", o.to_json());
    assert!(
        o.to_json().to_string().contains("\"status\":\"previewed\""),
        "{}",
        o.to_json()
    );
    assert_eq!(
        t.entered.count("probe_write"),
        1,
        "only the confirmed run wrote"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_yes_covers_the_steps() {
    let t = TestHost::new();
    create(
        &t,
        json!({
            "name": "user_two_writes",
            "description": "two destructive steps",
            "steps": [
                {"id": "a", "tool": "probe_destructive", "arguments": {"n": 1}},
                {"id": "b", "tool": "probe_destructive", "arguments": {"n": 2}}
            ]
        }),
    )
    .await
    .unwrap();
    assert!(
        t.host
            .registry()
            .get("user_two_writes")
            .unwrap()
            .spec()
            .annotations
            .destructive_hint
    );
    let person = Arc::new(Scripted::new([Answer::Yes]));
    let ctx =
        CallContext::root(Origin::Repl, ConfirmMode::Confirmed).with_confirmer(person.clone());
    let o = t
        .host
        .call(CallRequest::new("user_two_writes", json!({}), ctx))
        .await;
    assert_eq!(o.class(), "done", "{}", o.to_json());
    assert_eq!(
        person.asked().len(),
        1,
        "asked once, for the tool as a whole"
    );
    assert_eq!(t.entered.count("probe_destructive"), 2);
    let person = Arc::new(Scripted::new([Answer::No]));
    let ctx =
        CallContext::root(Origin::Repl, ConfirmMode::Confirmed).with_confirmer(person.clone());
    assert_eq!(
        t.host
            .call(CallRequest::new("user_two_writes", json!({}), ctx))
            .await
            .class(),
        "denied"
    );
    assert_eq!(t.entered.count("probe_destructive"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lua_tools_are_held_to_their_declared_capabilities() {
    let t = TestHost::new();
    // a name built at run time is not seen at save: the gate holds the program to its list
    let lua = r#"---@param n integer
---@uses calculate
local r = tools.calculate{expression = params.n .. "*2"}
if params.n > 5 then
  return tools["probe_" .. "write"]{n = params.n}
end
return r.value"#;
    create(
        &t,
        json!({"name": "user_lua", "description": "d", "lua": lua}),
    )
    .await
    .unwrap();
    assert_eq!(
        call(&t.host, "user_lua", json!({"n": 2}))
            .await
            .into_result()
            .unwrap()["result"],
        json!(4)
    );
    let e = call(&t.host, "user_lua", json!({"n": 9}))
        .await
        .into_result()
        .unwrap_err()
        .to_string();
    assert!(e.contains("`user_lua` may call calculate (its declared capabilities), and `probe_write` is not among them"), "{e}");
    assert_eq!(t.entered.count("probe_write"), 0);
    // without ---@uses: read tools only, and not even through pcall
    let lua = "local w = 'probe_write' local ok, e = pcall(tools[w], {}) return {ok, e.code, tools.probe_read{n = 1}.echo.n}";
    create(
        &t,
        json!({"name": "user_ro", "description": "d", "lua": lua}),
    )
    .await
    .unwrap();
    assert_eq!(
        call(&t.host, "user_ro", json!({}))
            .await
            .into_result()
            .unwrap()["result"],
        json!([false, "denied", 1])
    );
    assert_eq!(
        t.host.registry().get("user_ro").unwrap().spec().effect,
        lmcp::registry::Effect::Read
    );
    assert_eq!(t.entered.count("probe_write"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_and_corrupt_files() {
    let t = TestHost::new();
    create(&t, calc_def()).await.unwrap();
    let mut other = calc_def();
    other["name"] = json!("user_calc2");
    create(&t, other).await.unwrap();
    // a corrupt definition beside them, and one that no longer checks
    std::fs::write(t.home().join("data/tools/user_broken.json"), "{ not json").unwrap();
    std::fs::write(
        t.home().join("data/tools/user_stale.json"),
        r#"{"name": "user_stale", "description": "d", "steps": [{"id": "a", "tool": "gone_tool"}]}"#,
    )
    .unwrap();
    let out = lmcp(t.home(), &["tools", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("user_broken.json was not loaded") && stderr.contains("corrupt"),
        "{stderr}"
    );
    assert!(
        stderr.contains("user_stale.json was not loaded") && stderr.contains("no tool `gone_tool`"),
        "{stderr}"
    );
    let names: Vec<String> = json_out(&out)
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&"user_calc".to_string()) && names.contains(&"user_calc2".to_string()));

    // deleting is destructive: it asks, and without a person it does not run
    let ctx = CallContext::root(Origin::Cli, ConfirmMode::Confirmed);
    let o = t
        .host
        .call(CallRequest::new(
            "custom_tool_delete",
            json!({"name": "user_calc"}),
            ctx,
        ))
        .await;
    assert_eq!(o.class(), "needs_confirmation");
    assert_eq!(
        call(&t.host, "custom_tool_delete", json!({"name": "user_calc"}))
            .await
            .class(),
        "done"
    );
    assert!(t.host.registry().get("user_calc").is_none());
    assert!(!t.home().join("data/tools/user_calc.json").exists());
    assert_eq!(
        call(&t.host, "user_calc", json!({"expression": "1"}))
            .await
            .class(),
        "failed:unknown_tool"
    );
    let e = call(&t.host, "custom_tool_delete", json!({"name": "user_calc"}))
        .await
        .into_result()
        .unwrap_err()
        .to_string();
    assert!(e.contains("no custom tool `user_calc`"), "{e}");
    let e = call(&t.host, "custom_tool_delete", json!({"name": "calculate"}))
        .await
        .into_result()
        .unwrap_err()
        .to_string();
    assert!(e.contains("pattern"), "{e}");
    let list = call(&t.host, "custom_tool_list", json!({}))
        .await
        .into_result()
        .unwrap();
    assert_eq!(list["tools"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_tool_from_the_cli_and_from_lua_gives_the_same_result() {
    let t = TestHost::new();
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tools");
    for file in [
        "user_calculate.json",
        "user_sum_squares.lua",
        "user_copy_note.json",
    ] {
        let out = lmcp(
            t.home(),
            &[
                "tool",
                "create",
                examples.join(file).to_str().unwrap(),
                "--json",
            ],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{file}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let host = lmcp::Host::open(t.host.paths().clone()).unwrap();
    let cli = json_out(&lmcp(
        t.home(),
        &[
            "call",
            "user_sum_squares",
            r#"{"n": 10, "skip": 3}"#,
            "--json",
        ],
    ))["result"]
        .clone();
    let lua = run_lua(
        &host,
        "return tools.user_sum_squares{n = 10, skip = 3}",
        ConfirmMode::Confirmed,
        Duration::from_secs(10),
    )
    .await
    .unwrap()
    .value;
    assert_eq!(cli, lua);
    assert_eq!(cli["result"], json!({"total": 259, "numbers_used": 7}));
    // the header's default applies when the input is left out
    let v = json_out(&lmcp(
        t.home(),
        &["call", "user_sum_squares", r#"{"n": 3}"#, "--json"],
    ));
    assert_eq!(v["result"]["result"]["total"], json!(14));
    let cli = json_out(&lmcp(
        t.home(),
        &[
            "call",
            "user_calculate",
            r#"{"expression": "2^5"}"#,
            "--json",
        ],
    ))["result"]
        .clone();
    let lua = run_lua(
        &host,
        "return tools.user_calculate{expression = '2^5'}",
        ConfirmMode::Confirmed,
        Duration::from_secs(10),
    )
    .await
    .unwrap()
    .value;
    assert_eq!(cli, lua);
    // the copy example: two steps, the second reading the first's result
    std::fs::create_dir_all(t.home().join("data/workspace")).unwrap();
    std::fs::write(t.home().join("data/workspace/a.txt"), "copied text").unwrap();
    let out = lmcp(
        t.home(),
        &[
            "call",
            "user_copy_note",
            r#"{"from": "a.txt", "to": "b.txt"}"#,
            "--yes",
            "--json",
        ],
    );
    assert_eq!(json_out(&out)["result"]["steps"][1]["id"], json!("write"));
    assert_eq!(
        std::fs::read_to_string(t.home().join("data/workspace/b.txt")).unwrap(),
        "copied text"
    );
    // tool show lists what it may call; tool list and delete work from the CLI
    let shown = json_out(&lmcp(
        t.home(),
        &["tool", "show", "user_copy_note", "--json"],
    ));
    assert_eq!(shown["may_call"], json!("read_file, write_file"));
    let listed = json_out(&lmcp(t.home(), &["tool", "list", "--json"]));
    assert_eq!(listed["result"]["tools"].as_array().unwrap().len(), 3);
    assert_eq!(
        lmcp(t.home(), &["tool", "delete", "user_calculate"])
            .status
            .code(),
        Some(3)
    );
    assert_eq!(
        lmcp(t.home(), &["tool", "delete", "user_calculate", "--yes"])
            .status
            .code(),
        Some(0)
    );
    let out = lmcp(
        t.home(),
        &[
            "tool",
            "create",
            examples.join("user_calculate.json").to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let out = lmcp(
        t.home(),
        &[
            "tool",
            "create",
            examples.join("user_calculate.json").to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "exists without --replace");
    let out = lmcp(
        t.home(),
        &[
            "tool",
            "create",
            examples.join("user_calculate.json").to_str().unwrap(),
            "--replace",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
}

/// A long-running host (the MCP server's) picks up custom tools another process saved or
/// deleted: `library::sync` reloads what changed on disk, and the registry announces each change
/// (which the server turns into `tools/list_changed`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_saved_or_deleted_by_another_process_are_synced() {
    let t = TestHost::new();
    lmcp::library::watch(&t.host);
    assert!(!lmcp::library::sync(&t.host), "nothing changed yet");
    let mut changes = t.host.registry().subscribe();
    changes.mark_unchanged();
    common::lmcp_ok(
        t.home(),
        &[
            "call",
            "custom_tool_create",
            &calc_def().to_string(),
            "--yes",
            "--json",
        ],
    );
    assert!(
        t.host.registry().get("user_calc").is_none(),
        "not seen before a sync"
    );
    assert!(lmcp::library::sync(&t.host));
    assert!(changes.has_changed().unwrap(), "the change is announced");
    let r = call(&t.host, "user_calc", json!({"expression": "6*7"}))
        .await
        .into_result()
        .unwrap();
    assert_eq!(r["result"]["value"], 42, "{r}");
    assert!(
        !lmcp::library::sync(&t.host),
        "a second look finds nothing new"
    );
    // Replaced elsewhere: the new definition is what runs here.
    let mut changed = calc_def();
    changed["description"] = json!("Arithmetic, replaced from the command line");
    changed["replace"] = json!(true);
    common::lmcp_ok(
        t.home(),
        &["call", "custom_tool_create", &changed.to_string(), "--yes"],
    );
    assert!(lmcp::library::sync(&t.host));
    let tool = t.host.registry().get("user_calc").unwrap();
    assert_eq!(
        tool.spec().description,
        "Arithmetic, replaced from the command line"
    );
    // Deleted elsewhere: gone here too.
    common::lmcp_ok(
        t.home(),
        &[
            "call",
            "custom_tool_delete",
            r#"{"name": "user_calc"}"#,
            "--yes",
        ],
    );
    assert!(lmcp::library::sync(&t.host));
    assert!(t.host.registry().get("user_calc").is_none());
    // Saved by this host itself: registered (and announced) once, when saved; the watcher
    // does not reload it and announce it again.
    let mut def = calc_def();
    def["name"] = json!("user_mine");
    let saved = call(&t.host, "custom_tool_create", def).await.into_result();
    assert!(saved.is_ok(), "{saved:?}");
    assert!(
        !lmcp::library::sync(&t.host),
        "this host's own save is not reloaded"
    );
    let deleted = call(&t.host, "custom_tool_delete", json!({"name": "user_mine"}))
        .await
        .into_result();
    assert!(deleted.is_ok(), "{deleted:?}");
    assert!(!lmcp::library::sync(&t.host), "nor its own delete");
}

/// The library index: a second start registers saved tools from it (no compile), keeps listing
/// exact when a file changes behind lmcp's back, never indexes a file that does not load, and
/// refuses a call whose definition changed after it was listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_library_index_stays_exact() {
    let t = TestHost::new();
    create(&t, calc_def()).await.unwrap();
    let index_path = t.home().join("data/library-index.json");
    let index: Value = serde_json::from_slice(&std::fs::read(&index_path).unwrap()).unwrap();
    assert_eq!(
        index["custom_tools"]["user_calc.json"]["tools"][0]["name"], "user_calc",
        "the writer indexed it: {index}"
    );
    let open = || lmcp::Host::open(lmcp::store::Paths::under(t.home())).unwrap();
    let describe = |h: &Arc<lmcp::Host>, name: &str| {
        h.registry()
            .get(name)
            .map(|tool| tool.spec().description.clone())
    };

    // restored from the index, it runs (compiled on its first call)
    let second = open();
    assert_eq!(
        describe(&second, "user_calc").unwrap(),
        "Numeric arithmetic"
    );
    let r = second
        .call(CallRequest::new(
            "user_calc",
            json!({"expression": "6*7"}),
            ctx(),
        ))
        .await
        .into_result()
        .unwrap();
    assert_eq!(r["result"]["value"], 42, "{r}");

    // changed behind lmcp's back: the next start compiles the new file
    let file = t.home().join("data/tools/user_calc.json");
    let mut def: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    def["description"] = json!("Numeric arithmetic, as edited by hand");
    std::fs::write(&file, serde_json::to_vec_pretty(&def).unwrap()).unwrap();
    let third = open();
    assert_eq!(
        describe(&third, "user_calc").unwrap(),
        "Numeric arithmetic, as edited by hand"
    );

    // changed after it was listed: the call is refused, not run as something else
    let listed = open();
    assert!(describe(&listed, "user_calc").is_some());
    def["steps"][0]["tool"] = json!("write_file");
    def["steps"][0]["arguments"] = json!({"path": "x.txt", "content": {"$input": "expression"}});
    std::fs::write(&file, serde_json::to_vec_pretty(&def).unwrap()).unwrap();
    let e = listed
        .call(CallRequest::new(
            "user_calc",
            json!({"expression": "1"}),
            ctx(),
        ))
        .await
        .into_result()
        .unwrap_err()
        .to_string();
    assert!(e.contains("was changed on disk"), "{e}");
    // ...and loaded anew, in this host and in the index: the next call is confirmed as what
    // it now is (a write), and a new start lists that, even with the file's stamp put back
    let effect = |h: &Arc<lmcp::Host>| h.registry().get("user_calc").unwrap().spec().effect;
    assert_eq!(effect(&listed), lmcp::registry::Effect::Write);
    assert_eq!(effect(&open()), lmcp::registry::Effect::Write);

    // a file that does not load is warned about at every start, never indexed away
    std::fs::write(&file, b"{ not json").unwrap();
    for _ in 0..2 {
        let h = open();
        assert!(h.registry().get("user_calc").is_none());
        let warned = h.take_warnings().join("\n");
        assert!(warned.contains("user_calc.json was not loaded"), "{warned}");
    }

    // an index written by another lmcp version is not trusted
    std::fs::write(&file, serde_json::to_vec_pretty(&def).unwrap()).unwrap();
    let h = open();
    assert!(h.registry().get("user_calc").is_some());
    drop(h);
    let mut index: Value = serde_json::from_slice(&std::fs::read(&index_path).unwrap()).unwrap();
    index["version"] = json!("0.0.0");
    index["custom_tools"]["user_calc.json"]["tools"][0]["description"] = json!("forged");
    std::fs::write(&index_path, index.to_string()).unwrap();
    let h = open();
    assert_eq!(
        describe(&h, "user_calc").unwrap(),
        "Numeric arithmetic, as edited by hand"
    );
}

/// Saved programs load when first needed: a host that only calls built-in tools never reads
/// the library, and the first look-up of a saved tool (or a listing) loads it whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saved_tools_load_when_first_needed() {
    let t = TestHost::new();
    create(&t, calc_def()).await.unwrap();
    std::fs::write(t.home().join("data/tools/user_broken.json"), b"{").unwrap();
    let h = lmcp::Host::open(lmcp::store::Paths::under(t.home())).unwrap();
    h.call(CallRequest::new(
        "calculate",
        json!({"expression": "1+1"}),
        ctx(),
    ))
    .await
    .into_result()
    .unwrap();
    assert!(
        h.take_warnings().is_empty(),
        "a built-in call does not load the library"
    );
    assert!(h.registry().get("user_calc").is_some());
    let warned = h.take_warnings().join("\n");
    assert!(warned.contains("user_broken.json"), "{warned}");
}

/// A forged library index: an entry edited to say `effect: read` (and `readOnlyHint`) for a
/// tool that writes is not trusted, and the tool is listed as what its file says. An entry
/// with no seal (a file from before seals, or a copied index) is compiled again too, and an
/// edit of the tool's file beside its entry (the stamp put back) is caught by the stamp.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_index_entry_is_compiled_again() {
    let t = TestHost::new();
    let def = json!({
        "name": "user_writes",
        "description": "Writes a note",
        "parameters": [{"name": "text", "type": "string", "required": true}],
        "steps": [{"id": "w", "tool": "write_file", "arguments": {"path": "note.txt", "content": {"$input": "text"}}}]
    });
    create(&t, def).await.unwrap();
    let index_path = t.home().join("data/library-index.json");
    let open = || lmcp::Host::open(lmcp::store::Paths::under(t.home())).unwrap();
    let spec_of = |h: &Arc<lmcp::Host>| h.registry().get("user_writes").unwrap().spec().clone();
    assert_eq!(spec_of(&open()).effect, lmcp::registry::Effect::Write);

    for forge in ["edit", "drop the seal", "seal of another entry"] {
        let mut index: Value =
            serde_json::from_slice(&std::fs::read(&index_path).unwrap()).unwrap();
        let entry = &mut index["custom_tools"]["user_writes.json"];
        assert!(entry["seal"].is_string(), "the entry is sealed: {entry}");
        let tool = &mut entry["tools"][0];
        tool["effect"] = json!("read");
        assert!(tool["annotations"]["readOnlyHint"].is_boolean(), "{tool}");
        tool["annotations"]["readOnlyHint"] = json!(true);
        tool["annotations"]["destructiveHint"] = json!(false);
        tool["description"] = json!("Only reads, honest");
        match forge {
            "drop the seal" => {
                entry.as_object_mut().unwrap().remove("seal");
            }
            "seal of another entry" => entry["seal"] = json!("00".repeat(32)),
            _ => {}
        }
        std::fs::write(&index_path, serde_json::to_vec(&index).unwrap()).unwrap();
        let h = open();
        let spec = spec_of(&h);
        assert_eq!(spec.effect, lmcp::registry::Effect::Write, "{forge}");
        assert!(!spec.annotations.read_only_hint, "{forge}");
        assert_eq!(spec.description, "Writes a note", "{forge}");
    }
}

/// A tool file edited behind lmcp's back to its old size, with its modification time put back
/// (`touch -r`), still shows as changed: the stamp holds the kernel's change time too. Its new
/// effect is listed at once, not after a first call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_edited_to_its_old_size_and_time_is_listed_anew() {
    let t = TestHost::new();
    let lua = "---@uses calculate\nreturn tools.calculate{expression = '1'} -- xxxxxxxxxxxxxxxxxxxxxxxxxxxx";
    create(
        &t,
        json!({"name": "user_t", "description": "pads", "lua": lua}),
    )
    .await
    .unwrap();
    let open = || lmcp::Host::open(lmcp::store::Paths::under(t.home())).unwrap();
    let effect = |h: &Arc<lmcp::Host>| h.registry().get("user_t").unwrap().spec().effect;
    assert_eq!(effect(&open()), lmcp::registry::Effect::Read);
    let file = t.home().join("data/tools/user_t.json");
    let before = std::fs::read_to_string(&file).unwrap();
    let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
    let call = "tools.calculate{expression = '1'} -- xxxxxxxxxxxxxxxxxxxxxxxxxxxx";
    let write = "tools.write_file{path = 'p', content = 'x'} --";
    // one byte more in ---@uses, so one less here
    let padded = format!("{write}{}", "x".repeat(call.len() - write.len() - 1));
    let evil = before
        .replace("---@uses calculate", "---@uses write_file")
        .replace(call, &padded);
    assert_eq!(evil.len(), before.len(), "the same size");
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&file, &evil).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(modified)
        .unwrap();
    assert_eq!(effect(&open()), lmcp::registry::Effect::Write);
}
