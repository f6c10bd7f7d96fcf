//! Recipes: save-time checks, interpolation in real runs, plans and confirmation, plan hashes,
//! failing steps, cancel during a wait, export/import, restarts and corrupt files.

use std::time::{Duration, Instant};

use lmcp::{CallContext, CallRequest, ConfirmMode, Origin};
use serde_json::{Value, json};

use crate::common::{self, TestHost, call, ctx, json_out, lmcp};

async fn save(t: &TestHost, manifest: Value) -> Result<Value, String> {
    call(&t.host, "recipe_save", json!({"manifest": manifest}))
        .await
        .into_result()
        .map_err(|e| e.to_string())
}

async fn run(t: &TestHost, args: Value) -> Result<Value, lmcp::Error> {
    call(&t.host, "recipe_run", args).await.into_result()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_save_time_error_names_its_pointer() {
    let t = TestHost::new();
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "no steps",
            json!({"name": "r"}),
            "at /steps: `steps` is required",
        ),
        (
            "empty steps",
            json!({"name": "r", "steps": []}),
            "at /steps: `steps` must not be empty",
        ),
        (
            "no name",
            json!({"steps": [{"tool": "calculate"}]}),
            "missing field `name`",
        ),
        (
            "unknown field",
            json!({"name": "r", "stepz": []}),
            "unknown field `stepz`",
        ),
        (
            "schema version",
            json!({"name": "r", "schema_version": 9, "steps": [{"tool": "get_datetime"}]}),
            "at /schema_version",
        ),
        (
            "undeclared param",
            json!({"name": "r", "params": [{"name": "count", "type": "int"}], "steps": [{"tool": "calculate", "args": {"expression": "${cnt} + 1"}}]}),
            "at /steps/0/args/expression: `${cnt}` is not a declared param (declared: count)",
        ),
        (
            "later step",
            json!({"name": "r", "steps": [{"tool": "calculate", "args": {"expression": "1"}}, {"tool": "calculate", "args": {"expression": "${steps[1].result.value}"}}]}),
            "at /steps/1/args/expression: `${steps[1].result.value}` reads step 1, but a step can read only earlier steps (0 to 0)",
        ),
        (
            "out of range",
            json!({"name": "r", "steps": [{"tool": "calculate", "args": {"expression": "${steps[7].result}"}}]}),
            "the first step has no earlier step",
        ),
        (
            "wait has no result",
            json!({"name": "r", "steps": [{"wait": 1}, {"tool": "calculate", "args": {"expression": "${steps[0].result}"}}]}),
            "which is a wait and has no result",
        ),
        (
            "unknown tool",
            json!({"name": "r", "steps": [{"tool": "get_datetim"}]}),
            "at /steps/0/tool: there is no tool `get_datetim`; did you mean `get_datetime`?",
        ),
        (
            "authoring tool",
            json!({"name": "r", "steps": [{"tool": "recipe_delete", "args": {"name": "x"}}]}),
            "at /steps/0/tool: a recipe step cannot call `recipe_delete`",
        ),
        (
            "recipe_run",
            json!({"name": "r", "steps": [{"tool": "recipe_run", "args": {"name": "x"}}]}),
            "cannot call `recipe_run`",
        ),
        (
            "literal breaks the schema",
            json!({"name": "r", "steps": [{"tool": "calculate", "args": {"expression": 42}}]}),
            "at /steps/0/args/expression: value is not of type \"string\" (rule `type`)",
        ),
        (
            "missing argument",
            json!({"name": "r", "steps": [{"tool": "calculate", "args": {}}]}),
            "rule `required`",
        ),
        (
            "exact param of the wrong type",
            json!({"name": "r", "params": [{"name": "n", "type": "int", "default": 1}], "steps": [{"tool": "calculate", "args": {"expression": "${n}"}}]}),
            "at /steps/0/args/expression",
        ),
        (
            "wait too long",
            json!({"name": "r", "steps": [{"wait": {"seconds": 99999}}]}),
            "at /steps/0/wait: a wait must be more than 0 and at most 3600",
        ),
        (
            "wait zero",
            json!({"name": "r", "steps": [{"wait": 0}]}),
            "at /steps/0/wait",
        ),
        (
            "wait shape",
            json!({"name": "r", "steps": [{"wait": "soon"}]}),
            "write {\"wait\": N}",
        ),
        (
            "step shape",
            json!({"name": "r", "steps": [{"tool": "calculate", "arg": {}}]}),
            "at /steps/0/arg: unknown key `arg`",
        ),
        (
            "bad default type",
            json!({"name": "r", "params": [{"name": "n", "type": "int", "default": "ten"}], "steps": [{"tool": "get_datetime"}]}),
            "at /params/0/default: the default \"ten\" is not an integer",
        ),
        (
            "bad param type",
            json!({"name": "r", "params": [{"name": "n", "type": "float"}], "steps": [{"tool": "get_datetime"}]}),
            "at /params/0/type: unknown type `float`",
        ),
        (
            "duplicate params",
            json!({"name": "r", "params": [{"name": "n", "type": "int"}, {"name": "n", "type": "int"}], "steps": [{"tool": "get_datetime"}]}),
            "at /params/1/name: parameter `n` is declared twice",
        ),
        (
            "unclosed interpolation",
            json!({"name": "r", "steps": [{"tool": "calculate", "args": {"expression": "${oops"}}]}),
            "has no closing `}`",
        ),
        (
            "lua and steps",
            json!({"name": "r", "lua": "return 1", "steps": [{"tool": "get_datetime"}]}),
            "not both",
        ),
        (
            "lua syntax",
            json!({"name": "r", "lua": "return return"}),
            "at /lua: the program does not compile",
        ),
    ];
    let mut failures = Vec::new();
    for (what, manifest, expect) in cases {
        match save(&t, manifest).await {
            Ok(v) => failures.push(format!("{what}: saved {v}")),
            Err(e) if !e.contains(expect) => failures.push(format!("{what}: {e}")),
            Err(_) => {}
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    assert!(
        !t.home().join("data/recipes").exists()
            || std::fs::read_dir(t.home().join("data/recipes"))
                .unwrap()
                .count()
                == 0,
        "nothing half-saved"
    );
    // duplicate names
    let ok = json!({"name": "Demo morning brief", "steps": [{"tool": "get_datetime", "args": {}}]});
    assert_eq!(
        save(&t, ok.clone()).await.unwrap(),
        json!({"name": "Demo morning brief", "step_count": 1, "body": "steps", "replaced": false})
    );
    assert!(
        save(&t, ok.clone())
            .await
            .unwrap_err()
            .contains("exists; pass `\"replace\": true`")
    );
    let clash = json!({"name": "demo MORNING brief!", "steps": [{"tool": "get_datetime"}]});
    assert!(
        save(&t, clash)
            .await
            .unwrap_err()
            .contains("would share the file name demo-morning-brief.json")
    );
    let replaced = call(
        &t.host,
        "recipe_save",
        json!({"manifest": ok, "replace": true}),
    )
    .await
    .into_result()
    .unwrap();
    assert_eq!(replaced["replaced"], json!(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interpolation_in_a_real_run() {
    let t = TestHost::new();
    save(&t, json!({
        "name": "interp",
        "params": [{"name": "n", "type": "int", "default": 4}, {"name": "who", "type": "string"}],
        "steps": [
            {"tool": "probe_read", "args": {"n": "${n}", "text": "hi ${who}, n=${n}"}},
            {"tool": "probe_read", "args": {"text": "${steps[0].result.echo.text}", "n": "${steps[0].result.echo.n}"}},
            {"tool": "probe_read", "args": {"text": "$${not a param} ${steps[1].result.echo}"}}
        ]
    }))
    .await
    .unwrap();
    let r = run(&t, json!({"name": "interp", "params": {"who": "ana"}}))
        .await
        .unwrap();
    assert_eq!(
        r["steps"][0]["args"],
        json!({"n": 4, "text": "hi ana, n=4"}),
        "exact ${{n}} keeps the integer"
    );
    assert_eq!(
        r["steps"][1]["args"],
        json!({"text": "hi ana, n=4", "n": 4})
    );
    assert_eq!(
        r["steps"][2]["args"]["text"],
        json!("${not a param} {\"text\":\"hi ana, n=4\",\"n\":4}")
    );
    // a missing required param and a param of the wrong type
    let e = run(&t, json!({"name": "interp"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing required parameter `who`"), "{e}");
    let e = run(
        &t,
        json!({"name": "interp", "params": {"who": "a", "n": "four"}}),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("parameter `n`: must be an integer, got string"),
        "{e}"
    );
    // missing keys and indexes at run time stop the run with the path
    save(
        &t,
        json!({"name": "paths", "steps": [
            {"tool": "probe_read", "args": {"n": 1}},
            {"tool": "probe_read", "args": {"text": "${steps[0].result.echo.nope}"}}
        ]}),
    )
    .await
    .unwrap();
    let e = run(&t, json!({"name": "paths", "confirm": true}))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`steps[0].result.echo` has no key `nope` (it has: n)"),
        "{e}"
    );
    save(
        &t,
        json!({"name": "index", "steps": [
            {"tool": "list_dir", "args": {}},
            {"tool": "probe_read", "args": {"text": "${steps[0].result.entries[3].name}"}}
        ]}),
    )
    .await
    .unwrap();
    let e = run(&t, json!({"name": "index", "confirm": true}))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`steps[0].result.entries[3]` is out of range"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_previews_and_confirm_runs() {
    let t = TestHost::new();
    save(
        &t,
        json!({"name": "w", "params": [{"name": "n", "type": "int", "default": 1}], "steps": [
            {"tool": "probe_read", "args": {"n": "${n}"}},
            {"tool": "probe_write", "args": {"n": "${steps[0].result.echo.n}"}}
        ]}),
    )
    .await
    .unwrap();
    let plan = run(&t, json!({"name": "w"})).await.unwrap();
    assert_eq!(plan["confirmed"], json!(false));
    assert_eq!(
        plan["steps"][0]["status"],
        json!("done"),
        "read steps run for real"
    );
    assert_eq!(plan["steps"][1]["status"], json!("previewed"));
    assert_eq!(plan["steps"][1]["args"], json!({"n": 1}));
    assert_eq!(t.entered.count("probe_write"), 0);
    let hash = plan["plan_hash"].as_str().unwrap().to_string();
    assert_eq!(hash.len(), 64);
    // the same plan again has the same hash; other params change it
    assert_eq!(
        run(&t, json!({"name": "w"})).await.unwrap()["plan_hash"],
        json!(hash)
    );
    let other = run(&t, json!({"name": "w", "params": {"n": 2}}))
        .await
        .unwrap();
    assert_ne!(other["plan_hash"], json!(hash));
    // confirm with a hash that no longer matches: nothing runs
    let e = run(
        &t,
        json!({"name": "w", "params": {"n": 2}, "confirm": true, "plan_hash": hash}),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("the plan changed since it was approved") && e.contains("nothing ran"),
        "{e}"
    );
    assert_eq!(t.entered.count("probe_write"), 0);
    // confirm with the matching hash runs exactly that plan
    let r = run(&t, json!({"name": "w", "confirm": true, "plan_hash": hash}))
        .await
        .unwrap();
    assert_eq!(r["confirmed"], json!(true));
    assert_eq!(r["result"], json!({"echo": {"n": 1}}));
    assert_eq!(t.entered.count("probe_write"), 1);
    // a preview context stays a preview even with confirm: true (confirmation flows down)
    let preview = CallContext::root(Origin::Program, ConfirmMode::Preview);
    let o = t
        .host
        .call(CallRequest::new(
            "recipe_run",
            json!({"name": "w", "confirm": true}),
            preview,
        ))
        .await;
    assert_eq!(o.into_result().unwrap()["confirmed"], json!(false));
    assert_eq!(t.entered.count("probe_write"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_middle_step_stops_the_run() {
    let t = TestHost::new();
    save(
        &t,
        json!({"name": "f", "steps": [
            {"tool": "probe_read", "args": {"n": 1}},
            {"tool": "calculate", "args": {"expression": "1/0"}},
            {"tool": "probe_write", "args": {"n": 3}}
        ]}),
    )
    .await
    .unwrap();
    let e = run(&t, json!({"name": "f", "confirm": true}))
        .await
        .unwrap_err();
    assert_eq!(e.class(), "step_failed");
    let d = e.details().unwrap();
    assert_eq!(d["failed_step"]["id"], json!("1"));
    assert_eq!(d["completed_steps"][0]["result"], json!({"echo": {"n": 1}}));
    assert_eq!(t.entered.count("probe_write"), 0, "later steps do not run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_during_a_wait() {
    let t = TestHost::new();
    save(&t, json!({"name": "slow", "steps": [{"tool": "probe_read", "args": {}}, {"wait": {"seconds": 60}}, {"tool": "probe_write", "args": {}}]}))
        .await
        .unwrap();
    let c = ctx();
    let cancel = c.cancel_token().clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let o = t
        .host
        .call(CallRequest::new(
            "recipe_run",
            json!({"name": "slow", "confirm": true}),
            c,
        ))
        .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    let text = o.to_json().to_string();
    assert!(text.contains("cancelled"), "{text}");
    assert_eq!(t.entered.count("probe_write"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_import_round_trip_and_tampering() {
    let a = TestHost::new();
    let manifest = json!({"name": "Shared", "description": "d", "params": [{"name": "e", "type": "string", "default": "1+1"}],
        "steps": [{"tool": "calculate", "args": {"expression": "${e}"}}, {"tool": "run_command", "args": {"program": "true"}}]});
    save(&a, manifest.clone()).await.unwrap();
    let bundle = call(&a.host, "recipe_export", json!({"name": "Shared"}))
        .await
        .into_result()
        .unwrap();
    assert_eq!(bundle["format"], json!("lmcp-recipe"));
    assert_eq!(bundle["recipe"], manifest);

    let b = TestHost::new();
    b.host
        .update_config(|c| {
            c.modes.no_terminal = true;
            Ok(())
        })
        .unwrap();
    let report = call(
        &b.host,
        "recipe_import",
        json!({"bundle": bundle, "check_only": true}),
    )
    .await
    .into_result()
    .unwrap();
    assert_eq!(report["saved"], json!(false));
    assert_eq!(
        report["tools"][0],
        json!({"tool": "calculate", "effect": "read", "availability": {"status": "available"}})
    );
    assert_eq!(report["tools"][1]["effect"], json!("write"));
    assert_eq!(
        report["tools"][1]["availability"]["reason"],
        json!("no_terminal")
    );
    assert!(
        call(&b.host, "recipe_get", json!({"name": "Shared"}))
            .await
            .into_result()
            .is_err(),
        "check_only saves nothing"
    );
    let report = call(&b.host, "recipe_import", json!({"bundle": bundle}))
        .await
        .into_result()
        .unwrap();
    assert_eq!(report["saved"], json!(true));
    assert_eq!(
        call(&b.host, "recipe_get", json!({"name": "Shared"}))
            .await
            .into_result()
            .unwrap()["manifest"],
        manifest
    );

    let mut tampered = bundle.clone();
    tampered["recipe"]["steps"][0]["args"]["expression"] = json!("6*7");
    let e = call(
        &b.host,
        "recipe_import",
        json!({"bundle": tampered, "replace": true}),
    )
    .await
    .into_result()
    .unwrap_err()
    .to_string();
    assert!(e.contains("does not match its sha256"), "{e}");
    let mut wrong = bundle.clone();
    wrong["format"] = json!("something-else");
    assert!(
        call(&b.host, "recipe_import", json!({"bundle": wrong}))
            .await
            .into_result()
            .unwrap_err()
            .to_string()
            .contains("not a recipe bundle")
    );
}

/// A Lua recipe that calls a state-changing tool by name without listing it in `---@uses` is
/// refused at save, naming the tools, the line and the `---@uses` line to add; before, it was
/// saved, and every run had the call refused (inside a `pcall`: a warning, exit 0) (#34).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lua_recipe_must_list_the_writes_it_calls() {
    let t = TestHost::new();
    let body = "local total = tools.calculate{expression = \"2*3\"}.value\n\
                local ok = pcall(tools.write_file, {path = \"sum.txt\", content = \"x\"})\n\
                tools['probe_write']{n = 1}\n\
                return total";
    let e = save(&t, json!({"name": "sums", "lua": body}))
        .await
        .unwrap_err();
    assert!(
        e.contains("sums.lua:2: calls `write_file` (write) and `probe_write` (write)")
            && e.contains("without `---@uses` a saved recipe may call read tools only")
            && e.contains("add `---@uses calculate, write_file, probe_write` to its header"),
        "{e}"
    );
    let listed = format!("---@uses calculate, write_file\n{body}");
    let e = save(&t, json!({"name": "sums", "lua": listed}))
        .await
        .unwrap_err();
    assert!(
        e.contains("sums.lua:4: calls `probe_write` (write): its `---@uses` does not list it")
            && e.contains("make the line `---@uses calculate, write_file, probe_write`"),
        "{e}"
    );
    let all = format!("---@uses calculate, write_file, probe_write\n{body}");
    save(&t, json!({"name": "sums", "lua": all})).await.unwrap();
    // reads need no ---@uses, and a name only in a comment or a string is no call
    let reads = "-- tools.write_file{}\nlocal s = 'tools.write_file'\nreturn tools.calculate{expression = '1'}.value";
    save(&t, json!({"name": "reads", "lua": reads}))
        .await
        .unwrap();
    // the command line saves through the same check
    let file = t.home().join("sums.lua");
    std::fs::write(&file, format!("---@name sums\n{body}")).unwrap();
    let out = lmcp(t.home(), &["recipe", "save", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("add `---@uses calculate, write_file"), "{err}");
}

/// With `---@uses`, a program may call exactly what it lists: a read tool missing from the
/// line is refused at save like a write (`---@uses write_file` with `tools.calculate` saved,
/// then failed at every run); without it, reads stay allowed. Every literal spelling of a
/// tool's name counts, and a `tools` of the chunk's own, or a reference never called, does
/// not (#34).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_uses_line_is_exact_and_every_spelling_counts() {
    let t = TestHost::new();
    let e = save(
        &t,
        json!({"name": "u1", "lua": "---@uses write_file\nlocal n = tools.calculate{expression = '1'}.value\n\
                                     tools.write_file{path = 'a', content = 'b'}\nreturn n"}),
    )
    .await
    .unwrap_err();
    assert!(
        e.contains("u1.lua:2: calls `calculate` (read): its `---@uses` does not list it")
            && e.contains("make the line `---@uses write_file, calculate`"),
        "{e}"
    );
    save(
        &t,
        json!({"name": "u2", "lua": "return tools.calculate{expression = '1'}.value"}),
    )
    .await
    .unwrap();
    let spellings = [
        "tools[ [[write_file]] ]{}",
        "tools[ [==[write_file]==] ]{}",
        "tools[\"\\119rite_file\"]{}",
        "tools[\"\\x77rite_file\"]{}",
        "tools[\"\\u{77}rite_file\"]{}",
        "_ENV.tools.write_file{}",
        "_G.tools.write_file{}",
        "(tools).write_file{}",
        "tools[(\"write_file\")]{}",
    ];
    for (i, call) in spellings.iter().enumerate() {
        let e = save(
            &t,
            json!({"name": format!("s{i}"), "lua": format!("{call}\nreturn 1")}),
        )
        .await
        .unwrap_err();
        assert!(
            e.contains("calls `write_file` (write)") && e.contains("add `---@uses write_file`"),
            "{call}: {e}"
        );
    }
    for (i, lua) in [
        "local tools = {write_file = function() return 7 end}\nreturn tools.write_file()",
        "return tools.write_file ~= nil",
    ]
    .iter()
    .enumerate()
    {
        save(&t, json!({"name": format!("n{i}"), "lua": lua}))
            .await
            .unwrap_or_else(|e| panic!("{lua}: {e}"));
    }
    let r = run(&t, json!({"name": "n0", "confirm": true}))
        .await
        .unwrap();
    assert_eq!(r["result"], 7, "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lua_recipes_plan_and_run() {
    let t = TestHost::new();
    let lua = "---@param times? integer=2\n---@uses probe_write\nlocal out = {}\nfor i = 1, params.times do\n  if i % 2 == 1 then out[#out+1] = tools.probe_write{n = i} end\nend\nreturn #out";
    save(&t, json!({"name": "lua one", "lua": lua}))
        .await
        .unwrap();
    let plan = run(&t, json!({"name": "lua one", "params": {"times": 3}}))
        .await
        .unwrap();
    assert_eq!(plan["steps"].as_array().unwrap().len(), 2);
    assert_eq!(plan["steps"][1]["args"], json!({"n": 3}));
    assert_eq!(t.entered.count("probe_write"), 0);
    let r = run(&t, json!({"name": "lua one", "params": {"times": 3}, "confirm": true, "plan_hash": plan["plan_hash"]})).await.unwrap();
    assert_eq!(r["result"], json!(2));
    assert_eq!(t.entered.count("probe_write"), 2);
}

#[test]
fn recipes_survive_a_restart_and_a_corrupt_file_hides_nothing() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/recipes");
    for f in ["morning_brief.json", "daily_note.json", "countdown.lua"] {
        let out = lmcp(h, &["recipe", "save", examples.join(f).to_str().unwrap()]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{f}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::write(h.join("data/recipes/zzz-broken.json"), "{ nope").unwrap();
    let out = lmcp(h, &["recipe", "list", "--json"]);
    let v = json_out(&out);
    let names: Vec<&str> = v["recipes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        vec!["Countdown notes", "Daily note", "Demo morning brief"]
    );
    assert!(
        v["unreadable"][0]
            .as_str()
            .unwrap()
            .contains("zzz-broken.json is corrupt")
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("zzz-broken.json"));
    // the morning brief runs; the daily note previews its write until --yes
    let out = lmcp(h, &["recipe", "run", "Demo morning brief", "--json"]);
    assert!(json_out(&out)["result"]["weekday"].is_string());
    let out = lmcp(h, &["recipe", "run", "Daily note", "-p", "topic=work"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains("previewed") && text.contains("--plan-hash"),
        "{text}"
    );
    assert!(!h.join("data/workspace/daily").exists());
    let hash = text
        .lines()
        .find_map(|l| l.strip_prefix("plan hash: "))
        .unwrap()
        .to_string();
    let out = lmcp(
        h,
        &[
            "recipe",
            "run",
            "Daily note",
            "-p",
            "topic=work",
            "--yes",
            "--plan-hash",
            &hash,
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_dir(h.join("data/workspace/daily"))
            .unwrap()
            .count(),
        1
    );
    let out = lmcp(
        h,
        &[
            "recipe",
            "run",
            "Daily note",
            "-p",
            "topic=other",
            "--yes",
            "--plan-hash",
            &hash,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("plan changed"));
    // export, delete, import from the CLI
    let bundle = h.join("brief.json");
    assert_eq!(
        lmcp(
            h,
            &[
                "recipe",
                "export",
                "Demo morning brief",
                "-o",
                bundle.to_str().unwrap()
            ]
        )
        .status
        .code(),
        Some(0)
    );
    assert_eq!(
        lmcp(h, &["recipe", "delete", "Demo morning brief"])
            .status
            .code(),
        Some(3),
        "delete asks first"
    );
    assert_eq!(
        lmcp(h, &["recipe", "delete", "Demo morning brief", "--yes"])
            .status
            .code(),
        Some(0)
    );
    let out = lmcp(h, &["recipe", "import", bundle.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "import shows its report and waits for --yes"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("get_datetime         read   available"));
    assert_eq!(
        lmcp(h, &["recipe", "import", bundle.to_str().unwrap(), "--yes"])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        lmcp(h, &["recipe", "show", "Demo morning brief"])
            .status
            .code(),
        Some(0)
    );
    // a manifest runs without being saved
    let out = lmcp(
        h,
        &[
            "run",
            examples.join("morning_brief.json").to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(json_out(&out)["steps"][0]["status"], json!("done"));
    // the journal has the runs, without values
    let journal = std::fs::read_to_string(h.join("data/recipe_runs.jsonl")).unwrap();
    assert!(
        journal.contains("\"recipe\":\"Daily note\"") && !journal.contains("work"),
        "{journal}"
    );
}

/// A recipe whose third step fails is fixed and resumed: its first two steps (a write and a
/// workspace made, the counter) are handed back, not run again; over MCP too, `recipe_run`
/// takes `resume` and a confirmed run names its run id.
#[test]
fn a_failed_recipe_resumes_from_its_failed_step() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let (work, later) = (h.join("work"), h.join("later"));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&later).unwrap();
    common::lmcp_ok(h, &["roots", "add", work.to_str().unwrap()]);
    let manifest = json!({
        "name": "three steps",
        "description": "a write, a counter, then a write outside the roots",
        "schema_version": 1,
        "steps": [
            {"tool": "write_file", "args": {"path": work.join("a.txt"), "content": "one"}},
            {"tool": "workspace_create", "args": {"name": "counter"}},
            {"tool": "write_file", "args": {"path": later.join("b.txt"), "content": "three"}}
        ]
    });
    let file = h.join("three.json");
    std::fs::write(&file, manifest.to_string()).unwrap();
    let file = file.to_str().unwrap();
    let out = lmcp(h, &["run", file, "--yes"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let runs = json_out(&lmcp(h, &["runs", "--json"]));
    let id = runs[0]["run"].as_str().unwrap().to_string();
    assert!(err.contains(&format!("this is run {id}")), "{err}");
    assert_eq!(runs[0]["state"], "failed");
    // the cause fixed; what the first run did is undone by hand, to see it is not done again
    common::lmcp_ok(h, &["roots", "add", later.to_str().unwrap()]);
    std::fs::remove_file(work.join("a.txt")).unwrap();
    let out = lmcp(h, &["run", file, "--yes", "--resume", &id, "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json_out(&out)["run"], id.as_str());
    assert!(!work.join("a.txt").exists(), "step 1 not run again");
    assert!(later.join("b.txt").exists(), "step 3 ran");
    let listed = json_out(&lmcp(h, &["call", "workspace_list", "{}", "--json"]));
    assert_eq!(
        listed["result"]["workspaces"].as_array().unwrap().len(),
        1,
        "step 2 not run again: {listed}"
    );
    assert_eq!(
        json_out(&lmcp(h, &["runs", "show", &id, "--json"]))["state"],
        "done"
    );
    // the same through the recipe_run tool (what MCP clients call): resume a finished run
    // of a changed manifest is refused
    let mut changed = manifest.clone();
    changed["steps"][0]["args"]["content"] = json!("other");
    let args = json!({"manifest": changed, "confirm": true, "resume": id});
    let out = lmcp(h, &["call", "recipe_run", &args.to_string(), "--yes"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("changed since run"));
}
