//! `lua_run` over MCP with rmcp's client, in the default `core` profile: one chunk instead of
//! many calls, its one question before the run, and the refusals that keep it inside what it
//! declared (issue #37, point 1).

use super::*;

/// A `core` session (the default profile) over stdio, with output schemas listed.
async fn core(home: &Path, g: Generation, person: Person) -> Session {
    Session::over_stdio(home, g, person, &[("LMCP_OUTPUT_SCHEMAS", "1")], "core").await
}

/// A chunk that calls `calculate` 20 times in a loop and returns a table: one call over MCP,
/// the twenty go through the gate inside lmcp, and the result meets the output schema.
async fn twenty_calls_in_one(g: Generation) {
    let home = tempfile::tempdir().unwrap();
    let s = core(home.path(), g, Person::Absent).await;
    let tools = s.tools().await;
    let listed = tool(&tools, "lua_run");
    assert!(listed.output_schema.is_some(), "{listed:?}");
    let code = "local squares, sum = {}, 0\n\
                for i = 1, 20 do\n\
                  local v = tools.calculate{expression = i .. \" ^ 2\"}.value\n\
                  squares[#squares + 1] = v\n\
                  sum = sum + v\n\
                end\n\
                print(\"done\")\n\
                return {squares = squares, sum = sum}";
    let r = s.call("lua_run", json!({"code": code})).await;
    assert!(!is_error(&r), "{r:?}");
    check_output_schema(&tools, "lua_run", &r);
    let out = structured(&r);
    let squares: Vec<f64> = (1..=20).map(|i| f64::from(i * i)).collect();
    let got: Vec<f64> = out["result"]["squares"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(got, squares, "{out}");
    assert_eq!(out["result"]["sum"].as_f64(), Some(2870.0), "{out}");
    assert_eq!(out["output"], "done\n");
    assert_eq!(out["previews"], json!([]));
    assert!(s.asked.lock().unwrap().is_empty(), "reads ask nothing");
    s.close().await;
}

/// A chunk that writes: without `confirm` it previews (nothing asked, nothing written); with
/// `confirm: true` it asks once, through elicitation, listing what its `---@uses` names, and
/// then runs, both of its writes under that one yes.
async fn a_writing_chunk_previews_then_asks_once(g: Generation) {
    let home = tempfile::tempdir().unwrap();
    let workspace = home.path().join("data/workspace");
    let code = "---@uses write_file\n\
                tools.write_file{path = \"one.txt\", content = \"1\"}\n\
                tools.write_file{path = \"two.txt\", content = \"2\"}\n\
                return \"wrote\"";
    let s = core(home.path(), g, Person::Accepts).await;
    let tools = s.tools().await;

    let r = s.call("lua_run", json!({"code": code})).await;
    assert!(!is_error(&r), "{r:?}");
    check_output_schema(&tools, "lua_run", &r);
    let previews = structured(&r)["previews"].as_array().unwrap().clone();
    assert_eq!(previews.len(), 2, "{r:?}");
    assert!(
        previews
            .iter()
            .all(|p| p["tool"] == "write_file" && p["preview"] == true)
    );
    assert!(s.asked.lock().unwrap().is_empty(), "a plan asks nothing");
    assert!(!workspace.join("one.txt").exists(), "a plan writes nothing");

    let r = s
        .call("lua_run", json!({"code": code, "confirm": true}))
        .await;
    assert!(!is_error(&r), "{r:?}");
    check_output_schema(&tools, "lua_run", &r);
    let out = structured(&r);
    assert_eq!(out["result"], "wrote");
    assert_eq!(out["previews"], json!([]));
    assert!(
        out["run"].is_string(),
        "a confirmed run names its run: {out}"
    );
    let asked = s.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "asked once, before the run: {asked:?}");
    assert!(asked[0].contains("write_file"), "{}", asked[0]);
    s.close().await;
    assert_eq!(
        std::fs::read_to_string(workspace.join("one.txt")).unwrap(),
        "1"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("two.txt")).unwrap(),
        "2"
    );
}

/// A chunk that does not compile says its line, and nothing runs.
async fn a_syntax_error_returns_its_line(g: Generation) {
    let home = tempfile::tempdir().unwrap();
    let s = core(home.path(), g, Person::Absent).await;
    let r = s
        .call(
            "lua_run",
            json!({"code": "local x = 1\nlocal = 2\nreturn x"}),
        )
        .await;
    assert!(is_error(&r), "{r:?}");
    assert!(text(&r).contains("chunk.lua:2:"), "{}", text(&r));
    s.close().await;
}

/// The tools a chunk may call are the ones its `---@uses` lists (read tools without one): a
/// call by name outside them is refused before the run, with the line to write; one the check
/// cannot see (a computed name) is refused when it is made, after the calls before it, which
/// the failure lists with its line and the run id, as a failed recipe does.
async fn a_tool_outside_uses_is_refused(g: Generation) {
    let home = tempfile::tempdir().unwrap();
    let workspace = home.path().join("data/workspace");
    let s = core(home.path(), g, Person::Accepts).await;

    let r = s
        .call(
            "lua_run",
            json!({"code": "tools.write_file{path = \"no.txt\", content = \"x\"}", "confirm": true}),
        )
        .await;
    assert!(is_error(&r), "{r:?}");
    assert!(
        text(&r).contains("add `---@uses write_file`"),
        "says how to declare it: {}",
        text(&r)
    );

    let r = s
        .call(
            "lua_run",
            json!({"code": "---@uses read_file\nreturn tools.write_file{path = \"no.txt\", content = \"x\"}", "confirm": true}),
        )
        .await;
    assert!(is_error(&r), "{r:?}");
    assert!(text(&r).contains("---@uses"), "{}", text(&r));

    let code = "---@uses write_file\n\
                tools.write_file{path = \"first.txt\", content = \"1\"}\n\
                local name = \"list\" .. \"_dir\"\n\
                local listing = tools[name]{}\n\
                return listing";
    let r = s
        .call("lua_run", json!({"code": code, "confirm": true}))
        .await;
    assert!(is_error(&r), "{r:?}");
    let message = text(&r).to_string();
    assert!(
        message.contains("`list_dir` is not among them"),
        "{message}"
    );
    assert!(message.contains("line 4"), "its line: {message}");
    assert!(
        message.contains("completed before it: 1 (write_file)"),
        "the calls that completed: {message}"
    );
    assert!(message.contains("this is run "), "the run id: {message}");
    s.close().await;
    assert!(!workspace.join("no.txt").exists());
    assert!(workspace.join("first.txt").exists());
}

/// A chunk past its `timeout_secs` is stopped, and says so.
async fn a_chunk_past_its_timeout_is_stopped(g: Generation) {
    let home = tempfile::tempdir().unwrap();
    let s = core(home.path(), g, Person::Absent).await;
    let started = Instant::now();
    let r = s
        .call(
            "lua_run",
            json!({"code": "while true do end", "timeout_secs": 0.5}),
        )
        .await;
    assert!(is_error(&r), "{r:?}");
    assert!(text(&r).contains("timed out"), "{}", text(&r));
    assert!(started.elapsed() < Duration::from_secs(10), "stopped soon");
    // the session goes on
    let r = s.call("lua_run", json!({"code": "return 1 + 1"})).await;
    assert_eq!(structured(&r)["result"], 2, "{r:?}");
    s.close().await;
}

/// Profiles decide what a client sees, never what it may do: `run_command` is not listed in
/// `core`, but a chunk that declares it may call it under the grants, exactly as a custom tool
/// could, and its destructive grant asks. Declined or with nobody to ask, nothing runs; a yes
/// runs it.
async fn run_command_from_core_is_asked_about(g: Generation) {
    let home = tempfile::tempdir().unwrap();
    let mark = home.path().join(format!("ran-{}.txt", g.name()));
    let code = format!(
        "---@uses run_command\nreturn tools.run_command{{program = \"sh\", args = {{\"-c\", \"echo x >> '{}'\"}}}}.exit_code",
        mark.display()
    );
    let args = json!({"code": code, "confirm": true});

    let s = core(home.path(), g, Person::Declines).await;
    let tools = s.tools().await;
    assert!(
        !tools.iter().any(|t| t.name == "run_command"),
        "core does not list run_command"
    );
    let r = s.call("lua_run", args.clone()).await;
    assert!(is_error(&r) && text(&r).contains("declined"), "{r:?}");
    let asked = s.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].contains("run_command"), "{}", asked[0]);
    s.close().await;
    assert!(!mark.exists(), "declined: not run");

    let s = core(home.path(), g, Person::Absent).await;
    let r = s.call("lua_run", args.clone()).await;
    assert!(is_error(&r), "{r:?}");
    s.close().await;
    assert!(!mark.exists(), "nobody to ask: not run");

    let s = core(home.path(), g, Person::Accepts).await;
    let r = s.call("lua_run", args).await;
    assert!(!is_error(&r), "{r:?}");
    assert_eq!(structured(&r)["result"], 0, "{r:?}");
    assert_eq!(s.asked.lock().unwrap().len(), 1);
    s.close().await;
    assert_eq!(std::fs::read_to_string(&mark).unwrap(), "x\n", "ran once");
}

/// `lmcp serve --profile code` lists `lua_run` and `tool_search` only. A tool it does not list
/// is not called directly, but a chunk may call it (the profile decides what is listed; the
/// grants what runs), and `tool_search` finds it.
async fn the_code_profile_lists_two_tools(g: Generation) {
    let home = tempfile::tempdir().unwrap();
    let s = Session::over_stdio(
        home.path(),
        g,
        Person::Absent,
        &[("LMCP_OUTPUT_SCHEMAS", "1")],
        "code",
    )
    .await;
    let tools = s.tools().await;
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort();
    assert_eq!(names, ["lua_run", "tool_search"]);

    let r = s.call("tool_search", json!({"query": "calculate"})).await;
    assert!(!is_error(&r), "{r:?}");
    check_output_schema(&tools, "tool_search", &r);
    let found = &structured(&r)["tools"];
    assert_eq!(found[0]["name"], "calculate", "{found}");
    assert_eq!(found[0]["effect"], "read", "{found}");
    assert!(found[0].get("inputSchema").is_none(), "no schemas: {found}");

    let r = s.try_call("calculate", json!({"expression": "6*7"})).await;
    assert!(
        r.is_err() || is_error(r.as_ref().unwrap()),
        "not listed, not called directly: {r:?}"
    );
    let r = s
        .call(
            "lua_run",
            json!({"code": "return tools.calculate{expression = \"6*7\"}.value"}),
        )
        .await;
    assert_eq!(structured(&r)["result"], 42, "{r:?}");
    s.close().await;
}

/// The typed API is a resource every profile offers: `resources/list` names it, `resources/read`
/// returns what `lmcp types` writes, and a client subscribed to it is told once when a custom
/// tool created over MCP changes it (`resources/subscribe` in the handshake era, the listen
/// stream's `resourceSubscriptions` in 2026-07-28). An unknown URI is an error that names the
/// resource there is.
async fn the_types_resource_follows_the_tool_set(g: Generation) {
    use rmcp::model::{ReadResourceRequestParams, ResourceContents, SubscribeRequestParams};
    const TYPES: &str = "lmcp://types/lmcp.lua";
    let home = tempfile::tempdir().unwrap();
    let mut s = core(home.path(), g, Person::Absent).await;
    let listed = s.client.list_all_resources().await.expect("resources/list");
    let types = listed
        .iter()
        .find(|r| r.uri == TYPES)
        .unwrap_or_else(|| panic!("the types resource is listed: {listed:?}"));
    assert_eq!(types.mime_type.as_deref(), Some("text/x-lua"));
    let read = |s: &Session| {
        let client = s.client.peer().clone();
        async move {
            let r = client
                .read_resource(ReadResourceRequestParams::new(TYPES))
                .await
                .expect("resources/read");
            match &r.contents[0] {
                ResourceContents::TextResourceContents { text, .. } => text.clone(),
                other => panic!("text: {other:?}"),
            }
        }
    };
    let before = read(&s).await;
    assert!(
        before.contains("function tools.calculate(args) end"),
        "{before}"
    );
    assert!(
        before.contains("---@class calculate_result"),
        "typed results"
    );
    assert!(!before.contains("user_double"));

    let definition = custom_definition("user_double", "Double a number with calculate");
    match g {
        Generation::Legacy => {
            #[allow(deprecated)]
            s.client
                .subscribe(SubscribeRequestParams::new(TYPES))
                .await
                .expect("resources/subscribe");
            let r = s.call("custom_tool_create", definition).await;
            assert!(!is_error(&r), "{r:?}");
            let uri = tokio::time::timeout(NOTICE_TIMEOUT, s.resource_updated.recv())
                .await
                .expect("no notifications/resources/updated within 10 s")
                .unwrap();
            assert_eq!(uri, TYPES);
            let again = tokio::time::timeout(REPEAT_WINDOW, s.resource_updated.recv()).await;
            assert!(again.is_err(), "told once: {again:?}");
        }
        Generation::Modern => {
            let mut filter = SubscriptionFilter::new();
            filter.resource_subscriptions = Some(vec![TYPES.into(), "lmcp://nope".into()]);
            let mut sub = s.client.listen(filter).await.expect("subscriptions/listen");
            assert_eq!(
                sub.acknowledged().resource_subscriptions,
                Some(vec![TYPES.to_string()]),
                "only what there is to watch is accepted"
            );
            let r = s.call("custom_tool_create", definition).await;
            assert!(!is_error(&r), "{r:?}");
            let next = tokio::time::timeout(NOTICE_TIMEOUT, sub.next())
                .await
                .expect("no resource update on the subscription within 10 s");
            assert!(
                matches!(&next, Ok(Some(ServerNotification::ResourceUpdatedNotification(n)))
                    if n.params.uri == TYPES),
                "{next:?}"
            );
            let more = tokio::time::timeout(REPEAT_WINDOW, sub.next()).await;
            assert!(more.is_err(), "told once: {more:?}");
        }
    }
    let after = read(&s).await;
    assert!(
        after.contains("function tools.user_double(args) end"),
        "{after}"
    );

    // one tool's part, named by the template
    let templates = s
        .client
        .list_all_resource_templates()
        .await
        .expect("resources/templates/list");
    assert_eq!(templates[0].uri_template, "lmcp://types/tools/{name}.lua");
    let one = s
        .client
        .read_resource(ReadResourceRequestParams::new(
            "lmcp://types/tools/user_double.lua",
        ))
        .await
        .expect("one tool's types");
    let ResourceContents::TextResourceContents { text, .. } = &one.contents[0] else {
        panic!("text: {one:?}");
    };
    assert!(
        text.contains("function tools.user_double(args) end"),
        "{text}"
    );
    assert!(!text.contains("function tools.calculate"), "{text}");

    let missing = s
        .client
        .read_resource(ReadResourceRequestParams::new("lmcp://types/other.lua"))
        .await;
    match missing {
        Err(ServiceError::McpError(e)) => {
            // 2026-07-28 says invalid params for a missing resource; older versions -32002
            let code = match g {
                Generation::Legacy => rmcp::model::ErrorCode::RESOURCE_NOT_FOUND,
                Generation::Modern => rmcp::model::ErrorCode::INVALID_PARAMS,
            };
            assert_eq!(e.code, code, "{e:?}");
            assert!(e.message.contains(TYPES), "{e:?}");
        }
        other => panic!("an unknown URI is an error: {other:?}"),
    }
    s.close().await;
}

/// Over HTTP one server serves every session, and each keeps its own subscriptions: the session
/// that subscribed to the types hears of a tool a third session creates, the one that did not
/// hears only that the tool list changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_sessions_keep_their_own_resource_subscriptions() {
    use rmcp::model::SubscribeRequestParams;
    const TYPES: &str = "lmcp://types/lmcp.lua";
    let home = tempfile::tempdir().unwrap();
    let server = HttpServer::start(home.path(), &[]).await;
    let mut subscribed = server.connect(Generation::Legacy, Person::Absent).await;
    let mut other = server.connect(Generation::Legacy, Person::Absent).await;
    #[allow(deprecated)]
    subscribed
        .client
        .subscribe(SubscribeRequestParams::new(TYPES))
        .await
        .expect("resources/subscribe");
    let maker = server.connect(Generation::Legacy, Person::Absent).await;
    let r = maker
        .call(
            "custom_tool_create",
            custom_definition("user_double", "Double a number with calculate"),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    let uri = tokio::time::timeout(NOTICE_TIMEOUT, subscribed.resource_updated.recv())
        .await
        .expect("the subscriber hears of the change within 10 s")
        .unwrap();
    assert_eq!(uri, TYPES);
    other.list_changed().await;
    let heard = tokio::time::timeout(REPEAT_WINDOW, other.resource_updated.recv()).await;
    assert!(
        heard.is_err(),
        "a session that did not subscribe: {heard:?}"
    );
    for s in [subscribed, other, maker] {
        s.close().await;
    }
    let mut child = server.child;
    if let Some(pid) = child.id() {
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    }
    let _ = child.wait().await;
}

per_generation! {
    twenty_calls_in_one => twenty_calls_legacy, twenty_calls_2026;
    a_writing_chunk_previews_then_asks_once => writes_ask_once_legacy, writes_ask_once_2026;
    a_syntax_error_returns_its_line => syntax_error_legacy, syntax_error_2026;
    a_tool_outside_uses_is_refused => outside_uses_legacy, outside_uses_2026;
    a_chunk_past_its_timeout_is_stopped => timeout_legacy, timeout_2026;
    run_command_from_core_is_asked_about => run_command_legacy, run_command_2026;
    the_code_profile_lists_two_tools => code_profile_legacy, code_profile_2026;
    the_types_resource_follows_the_tool_set => types_resource_legacy, types_resource_2026;
}
