//! Walks the registry: every tool is fully described, and results meet declared output schemas.

use lmcp::registry::{Effect, Profile};
use lmcp::{CallRequest, Host, Origin};
use serde_json::{Value, json};

use crate::common::{self, TestHost};

#[test]
fn every_tool_is_fully_described() {
    let dir = tempfile::tempdir().unwrap();
    let host = Host::open(lmcp::store::Paths::under(dir.path())).unwrap();
    let tools = host.registry().all();
    assert!(tools.len() >= 6);
    for tool in tools {
        tool.check().unwrap_or_else(|e| panic!("{e}"));
        let s = tool.spec();
        assert!(
            !s.description.trim().is_empty(),
            "{}: no description",
            s.name
        );
        assert!(!s.title.trim().is_empty(), "{}: no title", s.name);
        assert_eq!(s.input_schema["type"], "object", "{}", s.name);
        assert!(
            jsonschema::meta::is_valid(&s.input_schema),
            "{}: bad input schema",
            s.name
        );
        // every built-in tool (a fresh host has no others) types its result (#37)
        let o = s
            .output_schema
            .as_ref()
            .unwrap_or_else(|| panic!("{}: no output schema", s.name));
        assert!(
            jsonschema::meta::is_valid(o),
            "{}: bad output schema",
            s.name
        );
        assert_eq!(
            o["type"], "object",
            "{}: structuredContent is an object",
            s.name
        );
        let a = serde_json::to_value(s.annotations).unwrap();
        for key in [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ] {
            assert!(a[key].is_boolean(), "{}: annotation {key} not set", s.name);
        }
        assert_eq!(
            s.annotations.read_only_hint,
            s.effect == Effect::Read,
            "{}",
            s.name
        );
        assert!(matches!(
            s.effect,
            Effect::Read | Effect::Write | Effect::Send
        ));
    }
}

#[test]
fn core_is_a_subset_of_full() {
    let t = TestHost::new();
    let core: Vec<String> = t
        .host
        .tools(Profile::Core)
        .iter()
        .map(|(t, _)| t.spec().name.clone())
        .collect();
    let full: Vec<String> = t
        .host
        .tools(Profile::Full)
        .iter()
        .map(|(t, _)| t.spec().name.clone())
        .collect();
    assert!(core.iter().all(|n| full.contains(n)));
    assert!(
        full.contains(&"run_command".to_string()) && !core.contains(&"run_command".to_string())
    );
    let mut sorted = full.clone();
    sorted.sort();
    assert_eq!(
        full, sorted,
        "tool lists are in a deterministic (sorted) order"
    );
}

/// The keywords an output schema may use: portable JSON Schema that strict clients (MCP
/// Inspector, the TypeScript SDKs) accept, with one `type` name each (no `["integer", "null"]`).
const PORTABLE: &[&str] = &[
    "type",
    "properties",
    "required",
    "items",
    "description",
    "enum",
    "additionalProperties",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "format",
    "pattern",
    "title",
];

fn portability_problems(schema: &Value, at: &str, out: &mut Vec<String>) {
    let Value::Object(map) = schema else {
        out.push(format!("{at}: a schema must be an object"));
        return;
    };
    for (key, value) in map {
        if !PORTABLE.contains(&key.as_str()) {
            out.push(format!("{at}: `{key}` is not portable"));
        }
        match key.as_str() {
            "type" if !value.is_string() => out.push(format!("{at}: `type` is not one name")),
            "properties" => {
                for (name, sub) in value.as_object().into_iter().flatten() {
                    portability_problems(sub, &format!("{at}/{name}"), out);
                }
            }
            "items" => portability_problems(value, &format!("{at}[]"), out),
            "additionalProperties" if value.is_object() => {
                portability_problems(value, &format!("{at}/*"), out)
            }
            _ => {}
        }
    }
}

/// Fields a result has that its schema does not declare (the Lua types are generated from the
/// schemas, so an undeclared field is one scripts cannot see either).
fn undeclared(result: &Value, schema: &Value, at: &str, out: &mut Vec<String>) {
    let (Value::Object(fields), Some(props)) = (result, schema["properties"].as_object()) else {
        if let (Value::Array(items), Some(item)) = (result, schema.get("items")) {
            for v in items {
                undeclared(v, item, &format!("{at}[]"), out);
            }
        }
        return;
    };
    for (k, v) in fields {
        match props.get(k) {
            Some(sub) => undeclared(v, sub, &format!("{at}/{k}"), out),
            None if schema
                .get("additionalProperties")
                .is_some_and(Value::is_object) => {}
            None => out.push(format!("{at}/{k}")),
        }
    }
}

/// The `skill_install` arguments of the Agent Skills fixture (`tests/fixtures/agent-skills`):
/// its Lua script, and its other files as references.
fn agent_skill() -> Value {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/agent-skills/text-tally");
    let read = |p: &str| std::fs::read_to_string(dir.join(p)).unwrap();
    json!({
        "skill_md": read("SKILL.md"),
        "scripts": [{"name": "tally.lua", "code": read("scripts/tally.lua")}],
        "references": [
            {"name": "reference.md", "content": read("reference.md")},
            {"name": "scripts/helper.py", "content": read("scripts/helper.py")},
        ],
    })
}

/// The `skill_install` arguments of an example skill (`examples/skills/NAME`), as a person
/// would give them: SKILL.md, its scripts and its references.
pub(crate) fn example_skill(name: &str) -> Value {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/skills")
        .join(name);
    let files = |sub: &str, key: &str| -> Vec<Value> {
        let mut paths: Vec<_> = std::fs::read_dir(dir.join(sub))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        paths.sort();
        paths
            .iter()
            .map(|p| {
                json!({
                    "name": p.file_name().unwrap().to_str().unwrap(),
                    key: std::fs::read_to_string(p).unwrap(),
                })
            })
            .collect()
    };
    json!({
        "skill_md": std::fs::read_to_string(dir.join("SKILL.md")).unwrap(),
        "scripts": files("scripts", "code"),
        "references": files("references", "content"),
    })
}

/// An example file's text (`examples/PATH`).
pub(crate) fn example(path: &str) -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples")
            .join(path),
    )
    .unwrap()
}

/// A server on loopback that answers each of its first connections with one of `bodies`
/// (content type, body), in order.
pub(crate) fn tiny_server(bodies: &[(&'static str, &'static str)]) -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let bodies = bodies.to_vec();
    std::thread::spawn(move || {
        for (kind, body) in bodies {
            let Ok((mut s, _)) = listener.accept() else {
                return;
            };
            let mut seen = Vec::new();
            let mut buf = [0u8; 1024];
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    addr
}

/// Every tool that declares an output schema declares a portable one, and every kind of
/// result it returns meets it with no field left undeclared: here each such tool is called
/// (its failures included, where they are results), and a tool that gains a schema without
/// being added here fails the test. Error outcomes carry no structured content where a schema
/// was listed (see `front::mcp`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_meet_their_output_schemas() {
    let t = TestHost::new();
    let workspace = t.home().join("data/workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    image::RgbImage::from_pixel(8, 6, image::Rgb([200, 30, 30]))
        .save(workspace.join("red.png"))
        .unwrap();
    let call = |name: &'static str, args: Value| {
        let host = std::sync::Arc::clone(&t.host);
        async move {
            match host
                .call(CallRequest::new(name, args, common::confirmed(Origin::Cli)))
                .await
                .into_result()
            {
                Ok(v) => v,
                // a failure the tool describes in its own shape (isError over MCP, with this as
                // its structured content) must meet the schema too
                Err(e @ lmcp::Error::Reported { .. }) => e.details().unwrap(),
                Err(e) => panic!("{name}: {e}"),
            }
        }
    };
    let ws = call("workspace_create", json!({"name": "schemas"})).await["workspace_id"].clone();
    let mut results: Vec<(&str, Value)> = vec![("workspace_create", json!({"workspace_id": ws}))];
    let calls: Vec<(&'static str, Value)> = vec![
        ("calculate", json!({"expression": "2^10 / 3"})),
        ("get_datetime", json!({})),
        ("write_file", json!({"path": "d/x.txt", "content": "héllo"})),
        ("read_file", json!({"path": "d/x.txt"})),
        ("list_dir", json!({"path": "d"})),
        ("list_dir", json!({})),
        ("run_command", json!({"program": "echo", "args": ["hi"]})),
        // timed out: no exit code
        (
            "run_command",
            json!({"program": "sleep", "args": ["5"], "timeout_seconds": 1}),
        ),
        (
            "asset_import",
            json!({"workspace_id": ws, "path": "red.png"}),
        ),
        (
            "build_image_pdf",
            json!({"workspace_id": ws, "source_asset_ids": [1], "title": "t", "preset": "square"}),
        ),
        // a failed build: an error whose details are a result of the same shape
        (
            "build_image_pdf",
            json!({"workspace_id": ws, "source_asset_ids": [99], "title": "t", "preset": "square"}),
        ),
        ("report_friction", json!({"friction_type": "other"})),
        ("tool_search", json!({"query": "file"})),
        ("tool_search", json!({"query": "no such words here"})),
        // a Lua chunk run for real (its run id) and as a plan (its previews)
        (
            "lua_run",
            json!({"code": "---@uses write_file\nprint(1)\nreturn tools.write_file{path = 'd/l.txt', content = 'x'}", "confirm": true}),
        ),
        (
            "lua_run",
            json!({"code": "---@uses write_file\nreturn tools.write_file{path = 'd/l.txt', content = 'x'}"}),
        ),
    ];
    // `http_request` against a one-shot server on loopback, granted by its exact address
    let web = tiny_server(&[
        ("application/json", "{\"a\":[1,2]}"),
        ("text/plain", "plain text"),
    ]);
    t.host
        .update_config(|c| {
            c.hosts.insert(
                web.to_string(),
                lmcp::config::HostRule {
                    grant: lmcp::config::Grant::Allow,
                    private: true,
                },
            );
            Ok(())
        })
        .unwrap();
    let calls: Vec<(&'static str, Value)> = calls
        .into_iter()
        .chain([
            ("http_request", json!({"url": format!("http://{web}/a")})),
            (
                "http_request",
                json!({"url": format!("http://{web}/b"), "max_bytes": 5}),
            ),
        ])
        .collect();
    for (name, args) in calls {
        results.push((name, call(name, args).await));
    }
    // the recipe tools, on the example recipe and a Lua one (#37)
    let daily: Value = serde_json::from_str(&example("recipes/daily_note.json")).unwrap();
    let countdown = example("recipes/countdown.lua");
    let recipe_calls: Vec<(&'static str, Value)> = vec![
        ("recipe_save", json!({"manifest": daily})),
        (
            "recipe_save",
            json!({"manifest": {"name": "Countdown notes", "lua": countdown}}),
        ),
        ("recipe_list", json!({})),
        ("recipe_get", json!({"name": "Daily note"})),
        // a plan (a previewed step), a real run (its run id), a Lua recipe's plan (its
        // previewed calls with their summaries), and a plan with a wait and a step whose
        // arguments wait on a previewed one
        ("recipe_run", json!({"name": "Daily note"})),
        ("recipe_run", json!({"name": "Daily note", "confirm": true})),
        (
            "recipe_run",
            json!({"name": "Countdown notes", "params": {"days": 3}}),
        ),
        (
            "recipe_run",
            json!({"manifest": {"name": "waits", "steps": [
                {"tool": "write_file", "args": {"path": "d/w.txt", "content": "w", "overwrite": true}},
                {"wait": 1},
                {"tool": "write_file", "args": {"path": "d/w2.txt", "content": "${steps[0].result.path}"}}
            ]}}),
        ),
    ];
    for (name, args) in recipe_calls {
        results.push((name, call(name, args).await));
    }
    let bundle = call("recipe_export", json!({"name": "Daily note"})).await;
    results.push(("recipe_export", bundle.clone()));
    for (name, args) in [
        (
            "recipe_import",
            json!({"bundle": bundle, "check_only": true}),
        ),
        ("recipe_import", json!({"bundle": bundle, "replace": true})),
        ("recipe_delete", json!({"name": "Countdown notes"})),
    ] {
        results.push((name, call(name, args).await));
    }
    // the custom tool tools, and the example custom tools: a JSON workflow (its result typed by
    // its last step's tool) and a Lua one typed by its `---@return`
    let copy: Value = serde_json::from_str(&example("tools/user_copy_note.json")).unwrap();
    let calc: Value = serde_json::from_str(&example("tools/user_calculate.json")).unwrap();
    let squares = example("tools/user_sum_squares.lua");
    for (name, args) in [
        ("custom_tool_create", copy),
        ("custom_tool_create", calc),
        (
            "custom_tool_create",
            json!({"name": "user_sum_squares", "description": "Sum squares", "lua": squares}),
        ),
        ("custom_tool_list", json!({})),
        (
            "user_copy_note",
            json!({"from": "d/x.txt", "to": "d/copy.txt"}),
        ),
        ("user_sum_squares", json!({"n": 4, "skip": 2})),
        ("custom_tool_delete", json!({"name": "user_calculate"})),
    ] {
        results.push((name, call(name, args).await));
    }
    // the skill tools, and an example skill's script tool (typed by its `---@return`)
    for (name, args) in [
        ("skill_install", example_skill("word-stats")),
        ("skill_install", example_skill("team-standup")),
        ("skill_install", example_skill("team-standup")),
        ("skill_list", json!({})),
        ("skill_get", json!({"name": "team-standup"})),
        ("skill_get", json!({"name": "no-such-skill"})),
        // an Agent Skills folder's fields (license, allowed-tools, metadata) in the record
        ("skill_install", agent_skill()),
        ("skill_get", json!({"name": "text-tally"})),
        (
            "skill__text_tally__tally",
            json!({"text": "one two two\nthree"}),
        ),
        (
            "skill_config",
            json!({"name": "team-standup", "values": {"team": "Core", "webhook_token": "t0ken"}}),
        ),
        (
            "skill_enable",
            json!({"name": "team-standup", "enabled": false}),
        ),
        (
            "skill_enable",
            json!({"name": "team-standup", "enabled": true}),
        ),
        (
            "skill_call",
            json!({"skill": "word-stats", "script": "count_words", "params": {"text": "a cat, a hat, a cat"}}),
        ),
        (
            "skill_call",
            json!({"skill": "team-standup", "script": "write_standup", "params": {"yesterday": "a", "today": "b"}}),
        ),
        (
            "skill__word_stats__count_words",
            json!({"text": "the cat and the hat and the bat", "limit": 2}),
        ),
        ("skill_remove", json!({"name": "team-standup"})),
        ("skill_remove", json!({"name": "team-standup"})),
    ] {
        results.push((name, call(name, args).await));
    }
    // the workspace tools, after the import above gave the workspace an asset
    for (name, args) in [
        ("workspace_list", json!({})),
        ("friction_log", json!({})),
        ("friction_flush", json!({"force": true})),
        ("asset_list", json!({"workspace_id": ws})),
        ("asset_get", json!({"workspace_id": ws, "asset_id": 1})),
    ] {
        results.push((name, call(name, args).await));
    }
    let gone = call("workspace_create", json!({"name": "to delete"})).await["workspace_id"].clone();
    results.push((
        "workspace_delete",
        call("workspace_delete", json!({"workspace_id": gone})).await,
    ));
    // the created workspace's own result
    results[0].1 = call("workspace_create", json!({"name": "again"})).await;
    let mut problems = Vec::new();
    let mut covered = std::collections::BTreeSet::new();
    for (name, result) in &results {
        covered.insert(name.to_string());
        let tool = t.host.registry().get(name).unwrap();
        let schema = tool
            .spec()
            .output_schema
            .as_ref()
            .expect("declares an output");
        let v = jsonschema::validator_for(schema).unwrap();
        problems.extend(
            v.iter_errors(result)
                .map(|e| format!("{name}: {e} in {result}")),
        );
        let mut extra = Vec::new();
        undeclared(result, schema, name, &mut extra);
        problems.extend(extra.into_iter().map(|f| format!("{f}: not in the schema")));
    }
    let mut declared = std::collections::BTreeSet::new();
    for tool in t.host.registry().all() {
        if let Some(schema) = &tool.spec().output_schema {
            declared.insert(tool.spec().name.clone());
            portability_problems(schema, &tool.spec().name, &mut problems);
        }
    }
    assert_eq!(
        covered, declared,
        "every tool with an output schema is exercised here"
    );
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// A Lua custom tool's `---@return` types its result in its output schema (and in `lmcp
/// types`); a type with no portable schema is refused naming its line; and a confirmed run
/// whose result breaks its declared type fails rather than sending what clients would reject.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_return_types_a_custom_tool() {
    let t = TestHost::new();
    let create = |lua: &str| {
        let host = std::sync::Arc::clone(&t.host);
        let args =
            json!({"name": "user_typed", "description": "Typed", "lua": lua, "replace": true});
        async move {
            host.call(CallRequest::new(
                "custom_tool_create",
                args,
                common::confirmed(Origin::Cli),
            ))
            .await
            .into_result()
        }
    };
    let e = create("---@param n integer\n---@return {total: number|nil}\nreturn {}")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("user_typed.lua:2") && e.contains("@return: a union"),
        "{e}"
    );
    create("---@param n integer\n---@return {total: number, names?: string[], tags: string[]}\nif params.n > 0 then return {total = params.n, tags = {}} end\nreturn {total = 'none', tags = {}}")
        .await
        .unwrap();
    let spec = t.host.registry().get("user_typed").unwrap().spec().clone();
    let result = &spec.output_schema.as_ref().unwrap()["properties"]["result"];
    assert_eq!(result["properties"]["total"]["type"], "number");
    assert_eq!(result["required"], json!(["total", "tags"]));
    let defs = lmcp::script::types::lua_definitions(&t.host.registry().all());
    assert!(
        defs.contains("---@field result user_typed_result.result")
            && defs.contains("---@class user_typed_result.result\n---@field total number\n---@field names? string[]\n---@field tags string[]\n"),
        "{defs}"
    );
    let run = |n: i64| {
        let host = std::sync::Arc::clone(&t.host);
        async move {
            host.call(CallRequest::new(
                "user_typed",
                json!({"n": n}),
                common::confirmed(Origin::Cli),
            ))
            .await
            .into_result()
        }
    };
    // an empty table where a list is declared is that list
    assert_eq!(
        run(2).await.unwrap()["result"],
        json!({"total": 2, "tags": []})
    );
    let e = run(0).await.unwrap_err().to_string();
    assert!(
        e.contains("does not match the type its `---@return` line declares")
            && e.contains("/total"),
        "{e}"
    );
}

/// Front doors reach tools only through the gate: nothing under `src/front/` names a tool
/// module (`crate::tools`), so no handler or tool function can be called around the gate.
#[test]
fn front_doors_import_nothing_from_the_tools() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/front");
    let mut offenders = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            if line.contains("crate::tools") || line.contains("lmcp::tools") {
                offenders.push(format!("{}:{}: {line}", path.display(), i + 1));
            }
        }
    }
    assert!(offenders.is_empty(), "\n{}", offenders.join("\n"));
}
