//! The Lua sandbox, by category: capabilities that must be absent, limits that must hold (with
//! the host still working afterwards), and attempts to get around the gate.

use std::time::{Duration, Instant};

use lmcp::ConfirmMode;
use serde_json::{Value, json};

use crate::common::{TestHost, run_lua};

const SHORT: Duration = Duration::from_millis(400);
/// The deadline for scripts that recurse until a limit stops them: long enough that a loaded
/// machine reaches the limit (what these tests check) before the deadline.
const DEEP: Duration = Duration::from_secs(10);

async fn eval(t: &TestHost, src: &str) -> Value {
    match run_lua(
        &t.host,
        src,
        ConfirmMode::Confirmed,
        Duration::from_secs(10),
    )
    .await
    {
        Ok(o) => o.value,
        Err(e) => panic!("{src}\n=> {e}"),
    }
}

async fn fails(t: &TestHost, src: &str, timeout: Duration) -> lmcp::Error {
    match run_lua(&t.host, src, ConfirmMode::Confirmed, timeout).await {
        Ok(o) => panic!("{src}\n=> expected an error, got {}", o.value),
        Err(e) => e,
    }
}

/// After a limit was hit, the same host still runs scripts and tools.
async fn host_still_works(t: &TestHost) {
    assert_eq!(
        eval(t, "return tools.calculate{expression = '6*7'}.value").await,
        json!(42)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absent_capabilities() {
    let t = TestHost::new();
    let absent = [
        "io",
        "debug",
        "package",
        "dofile",
        "loadfile",
        "os.execute",
        "os.exit",
        "os.getenv",
        "os.remove",
        "os.rename",
        "os.tmpname",
        "string.dump",
        "(('').dump)",
        "require and nil",
        "module",
        "setfenv",
        "loadstring",
    ];
    for expr in absent {
        let v = eval(&t, &format!("return {expr} == nil")).await;
        assert_eq!(v, json!(true), "{expr} should be absent");
    }
    assert_eq!(
        eval(
            &t,
            "local n = 0 for k in pairs(os) do n = n + 1 end return n"
        )
        .await,
        json!(3)
    );
    // host globals through load
    assert_eq!(
        eval(
            &t,
            "return load('return io')() == nil and load('return _G')() == _G"
        )
        .await,
        json!(true)
    );
    assert_eq!(
        eval(&t, "local f = load('x = 1') f() return x").await,
        json!(1)
    );
    // binary chunks
    let v = eval(
        &t,
        r#"local f, err = load("\27Lua\84\0", "b", "b") return {f == nil, err}"#,
    )
    .await;
    assert_eq!(v[0], json!(true));
    let v = eval(
        &t,
        r#"local f, err = load("\27LuaT\0\25\147\13\10\26\10") return err"#,
    )
    .await;
    assert!(v.as_str().unwrap().contains("binary"), "{v}");
    // require of anything outside stdlib
    for m in ["os", "io", "socket", "../../etc/passwd", "ffi"] {
        let e = fails(&t, &format!("return require('{m}')"), SHORT)
            .await
            .to_string();
        assert!(e.contains("not found") && e.contains("inspect"), "{m}: {e}");
    }
    assert_eq!(
        eval(&t, "return type(require('tbl').map)").await,
        json!("function")
    );
    // collectgarbage only counts
    assert_eq!(
        eval(&t, "return type(collectgarbage('count'))").await,
        json!("number")
    );
    let e = fails(&t, "collectgarbage('collect')", SHORT)
        .await
        .to_string();
    assert!(e.contains("only \"count\""), "{e}");
    let e = fails(&t, "setmetatable({}, {__gc = function() end})", SHORT)
        .await
        .to_string();
    assert!(e.contains("__gc"), "{e}");
    // to-be-closed variables compile, also through load
    assert_eq!(
        eval(
            &t,
            "local f, err = load('local y <close> = nil return 7') return f()"
        )
        .await,
        json!(7)
    );
    // chunk names never show host paths
    let e = fails(&t, "error('boom')", SHORT).await.to_string();
    assert_eq!(e, "test.lua:1: boom");
}

/// `table.insert`, `remove`, `concat` and `sort` keep Lua's meaning on tables with metatables
/// (where they run as Lua, under the hooks) and on plain ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_functions_keep_their_meaning() {
    let t = TestHost::new();
    let v = eval(
        &t,
        r#"
        local store, n = {1, 2, 3}, 3
        local p = setmetatable({}, {
          __len = function() return n end,
          __index = function(_, k) return store[k] end,
          __newindex = function(_, k, v)
            store[k] = v
            if v == nil and k == n then n = n - 1 elseif k > n then n = k end
          end,
        })
        local out = {}
        table.insert(p, 4) table.insert(p, 1, 0)
        out[#out + 1] = table.concat(store, ",")
        out[#out + 1] = table.remove(p) .. ":" .. table.concat(store, ",")
        out[#out + 1] = table.remove(p, 1) .. ":" .. table.concat(store, ",")
        out[#out + 1] = table.concat(p, "-") .. "|" .. table.concat(p, "-", 2, 3)
        out[#out + 1] = select(2, pcall(table.insert, p, 9, 1))
        out[#out + 1] = select(2, pcall(table.insert, p, 1, 2, 3))
        out[#out + 1] = select(2, pcall(table.concat, setmetatable({1, {}}, {})))
        local s = {5, 3, 9, 1} table.sort(s) out[#out + 1] = table.concat(s, ",")
        s = {"b", "a", "c"} table.sort(s, function(a, b) return a > b end)
        out[#out + 1] = table.concat(s, ",")
        out[#out + 1] = select(2, pcall(table.sort, {3, "x"}))
        s = setmetatable({4, 2, 8}, {}) table.sort(s) out[#out + 1] = table.concat(s, ",")
        s = {} table.insert(s, "a") table.insert(s, 1, "b")
        out[#out + 1] = table.concat(s, ",") .. table.remove(s) .. tostring(table.remove({}))
        out[#out + 1] = select(2, pcall(table.sort, {1, 2}, 3))
        return table.concat(out, "\n")
    "#,
    )
    .await;
    assert_eq!(
        v.as_str().unwrap(),
        "0,1,2,3,4\n4:0,1,2,3\n0:1,2,3\n1-2-3|2-3\n\
         bad argument #2 to 'insert' (position out of bounds)\n\
         wrong number of arguments to 'insert'\n\
         invalid value (at index 2) in table for 'concat'\n\
         1,3,5,9\nc,b,a\n\
         table.sort:1: attempt to compare string with number\n\
         2,4,8\nb,aanil\n\
         bad argument #2 to 'sort' (function expected, got number)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_limits_hold_everywhere() {
    let t = TestHost::new();
    let cases = [
        ("plain loop", "while true do end"),
        (
            "inside pcall",
            "while true do pcall(function() while true do end end) end",
        ),
        (
            "pcall of error in a loop",
            "while true do pcall(error, 'x') end",
        ),
        (
            "nested pcalls",
            "local function f() pcall(f) end while true do pcall(f) end",
        ),
        (
            "coroutine.wrap",
            "local co = coroutine.wrap(function() while true do end end) co()",
        ),
        (
            "coroutine.resume loop",
            "while true do coroutine.resume(coroutine.create(function() while true do end end)) end",
        ),
        (
            "xpcall with a looping handler",
            "xpcall(function() while true do end end, function() while true do end end)",
        ),
        (
            "xpcall handler loops after an error",
            "while true do xpcall(function() error('x') end, function() while true do end end) end",
        ),
        (
            "error object with looping __tostring",
            "error(setmetatable({}, {__tostring = function() while true do end end}))",
        ),
        (
            "pattern backtracking",
            "return string.rep('a', 20000):find('.-.-.-b')",
        ),
        (
            "gsub backtracking",
            "return (string.rep('a', 20000)):gsub('.-.-.-b', 'x')",
        ),
        (
            "gmatch backtracking",
            "for m in string.rep('a', 20000):gmatch('.-.-.-b') do end",
        ),
        (
            "table.move over a huge range",
            "table.move({}, 1, math.maxinteger - 1, 2)",
        ),
        ("sleep past the deadline", "sleep(60)"),
        (
            "close of a coroutine",
            "while true do local c = coroutine.create(function() while true do end end) coroutine.resume(c) coroutine.close(c) end",
        ),
    ];
    for (name, src) in cases {
        let started = Instant::now();
        let e = fails(&t, src, SHORT).await;
        let took = started.elapsed();
        assert_eq!(e.class(), "timeout", "{name}: {e}");
        assert!(
            e.to_string().contains("timed out after 400ms"),
            "{name}: {e}"
        );
        assert!(took < Duration::from_secs(5), "{name} took {took:?}");
    }
    host_still_works(&t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_a_running_script() {
    let t = TestHost::new();
    let ctx = lmcp::CallContext::root(lmcp::Origin::Cli, ConfirmMode::Confirmed);
    let cancel = ctx.cancel_token().clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    let script = lmcp::script::Script {
        source: "while true do pcall(sleep, 10) end".into(),
        name: "c.lua".into(),
    };
    let e = lmcp::script::run(&t.host.caller(), script, ctx, Default::default())
        .await
        .unwrap_err();
    assert_eq!(e.error.class(), "cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_and_recursion_limits() {
    let t = TestHost::new();
    let memory_bombs = [
        "local s = 'x' while true do s = s .. s end",
        "local t = {} for i = 1, 1e9 do t[i] = ('x'):rep(1000) .. i end",
        "local t = {} for i = 1, 1e9 do t[i] = ('x'):rep(1000) .. i if i % 1000 == 0 then collectgarbage('count') end end",
        "return string.rep('x', 2^40)",
        "return ('x'):rep(2^25):rep(4)",
    ];
    for src in memory_bombs {
        let e = fails(&t, src, Duration::from_secs(20)).await;
        let text = e.to_string();
        assert!(
            e.class() == "limit" || text.contains("too large") || text.contains("memory"),
            "{src}: {e}"
        );
    }
    // A script that catches memory errors and keeps allocating still ends, at the deadline.
    let e = fails(
        &t,
        "local keep = {} while true do pcall(function() keep[#keep + 1] = ('y'):rep(2^24) end) end",
        Duration::from_secs(2),
    )
    .await;
    assert!(matches!(e.class(), "timeout" | "limit"), "{e}");
    let e = fails(&t, "local function f() return 1 + f() end return f()", DEEP)
        .await
        .to_string();
    assert!(
        e.contains("stack overflow") || e.contains("out of memory (raise"),
        "{e}"
    );
    let e = fails(
        &t,
        "local t = setmetatable({}, {__index = function(t, k) return t[k] end}) return t.x",
        DEEP,
    )
    .await
    .to_string();
    assert!(e.contains("stack overflow") || e.contains("C stack"), "{e}");
    let e = fails(
        &t,
        "local function g(s) return (s:gsub('x', g)) end return g('x')",
        SHORT,
    )
    .await
    .to_string();
    assert!(e.contains("stack overflow") || e.contains("C stack"), "{e}");
    assert_eq!(eval(&t, "return #string.rep('', 1e15)").await, json!(0));
    host_still_works(&t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_is_captured_and_capped() {
    let t = TestHost::new();
    let o = run_lua(
        &t.host,
        "print('a', 1, nil, true) log.warn('careful') return nil",
        ConfirmMode::Confirmed,
        SHORT,
    )
    .await
    .unwrap();
    assert_eq!(o.output, "a\t1\tnil\ttrue\n[warn] careful\n");
    let o = run_lua(
        &t.host,
        "for i = 1, 1e5 do print(('z'):rep(100)) end",
        ConfirmMode::Confirmed,
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert!(o.output.len() < (1 << 20) + 200, "{}", o.output.len());
    assert!(o.output.ends_with("[output truncated at 1048576 bytes]\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tools_table_cannot_be_tampered_with() {
    let t = TestHost::new();
    for src in [
        "rawset(tools, 'probe_write', function() end)",
        "tools.probe_write = function() end",
        "setmetatable(tools, {})",
    ] {
        let e = fails(&t, src, SHORT).await.to_string();
        assert!(e.contains("read-only"), "{src}: {e}");
    }
    assert_eq!(eval(&t, "return getmetatable(tools)").await, json!(false));
    // upvalue tricks: without the debug library nothing reaches the prelude's locals (the raw
    // pcall, the host API) through a function's upvalues or its bytecode
    let v = eval(
        &t,
        "local f = tools.calculate return {debug == nil, string.dump == nil, type(f)}",
    )
    .await;
    assert_eq!(v[0], json!(true));
    assert_eq!(v[1], json!(true));
    assert_eq!(v[2], json!("function"));
    let e = fails(&t, "return debug.getupvalue(tools.calculate, 1)", SHORT)
        .await
        .to_string();
    assert!(e.contains("attempt to index a nil value"), "{e}");
    // Replacing the global only changes the script's own name for it.
    let v = eval(&t, "local real = tools tools = {probe_write = function() return 'fake' end} return real.calculate{expression='1+1'}.value").await;
    assert_eq!(v, json!(2));
    let e = fails(&t, "return tools.calculat{expression = '1'}", SHORT)
        .await
        .to_string();
    assert!(e.contains("did you mean `calculate`"), "{e}");
    let e = fails(&t, "return tools.calculate('1+1')", SHORT)
        .await
        .to_string();
    assert!(
        e.contains("tools.calculate expects a table of arguments, got string"),
        "{e}"
    );
    // raised at the script's line, as a plain message
    for (arg, what) in [
        ("2", "number"),
        ("true", "boolean"),
        ("json.null", "userdata"),
        ("print", "function"),
    ] {
        let src = format!(
            "local ok, e = pcall(function()\n  local r = tools.calculate({arg})\n  return r\nend)\nreturn e"
        );
        let e = eval(&t, &src).await;
        let e = e.as_str().unwrap_or_default();
        assert!(
            e.ends_with(&format!(
                ":2: tools.calculate expects a table of arguments, got {what}"
            )),
            "{e}"
        );
    }
    // no arguments at all are an empty table: the schema names what is missing
    let e = fails(&t, "return tools.calculate()", SHORT)
        .await
        .to_string();
    assert!(e.contains("expression"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_changing_calls_preview_wherever_they_hide() {
    let t = TestHost::new();
    let src = r#"
        local results = {}
        results[1] = tools.probe_write{n = 1}
        results[2] = select(2, pcall(tools.probe_write, {n = 2}))
        local co = coroutine.wrap(function() coroutine.yield(tools.probe_write{n = 3}) end)
        results[3] = co()
        local mt = setmetatable({}, {__index = function(_, k) return tools.probe_write{n = 4} end})
        results[4] = mt.anything
        results[5] = select(2, xpcall(function() return tools.probe_write{n = 5} end, debug and debug.traceback or tostring))
        local s = ("x"):gsub("x", function() return tools.probe_write{n = 6}.tool end)
        results[6] = s
        return results
    "#;
    let o = run_lua(&t.host, src, ConfirmMode::Preview, Duration::from_secs(5))
        .await
        .unwrap();
    for i in 0..5 {
        assert_eq!(o.value[i]["preview"], json!(true), "{}", o.value);
    }
    assert_eq!(o.value[5], json!("probe_write"));
    assert_eq!(o.previews.len(), 6);
    assert_eq!(
        t.entered.count("probe_write"),
        0,
        "a previewed call must never run"
    );
}

/// A dry run hands a script a preview where it expected a result: printed, it says it is a
/// preview and of which tool (it printed as a plain table, and its missing fields as nil), and
/// it still encodes to the same JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview_prints_as_a_preview_of_its_tool() {
    let t = TestHost::new();
    let src = r#"
        local p = tools.write_file{path = "a.txt", content = "hello"}
        print(p)
        print("wrote " .. tostring(p))
        return {text = tostring(p), meta = getmetatable(p), json = json.decode(json.encode(p)),
                kind = p.preview and "preview" or "result", setmeta = select(2, pcall(setmetatable, p, {}))}
    "#;
    let o = run_lua(&t.host, src, ConfirmMode::Preview, Duration::from_secs(5))
        .await
        .unwrap();
    let text = o.value["text"].as_str().unwrap();
    assert!(
        text.starts_with("preview of write_file (write), not run: "),
        "{text}"
    );
    assert!(text.contains("a.txt"), "{text}");
    assert!(
        o.output.contains(&format!("{text}\nwrote {text}\n")),
        "{}",
        o.output
    );
    assert_eq!(o.value["meta"], json!("Preview"));
    assert_eq!(o.value["kind"], json!("preview"));
    assert!(
        o.value["setmeta"].as_str().unwrap().contains("protected"),
        "{}",
        o.value
    );
    let encoded = &o.value["json"];
    assert_eq!(encoded["preview"], json!(true));
    assert_eq!(encoded["tool"], json!("write_file"));
    assert_eq!(encoded["args"]["content"], json!("hello"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_are_converted_once_and_raw() {
    let t = TestHost::new();
    // __index supplies a value the raw table does not have: the gate never sees it.
    let src = r#"
        local args = setmetatable({n = 1}, {
            __index = function(_, k) if k == "text" then return "injected" end end,
            __pairs = function() return next, {n = 1, text = "injected"} end,
        })
        return tools.probe_read(args)
    "#;
    assert_eq!(eval(&t, src).await, json!({"echo": {"n": 1}}));
    let cases = [
        (
            "local a = {} a.self = a return tools.probe_read{text = a}",
            "cycle",
        ),
        (
            "local t = {} local cur = t for i = 1, 200000 do cur.x = {} cur = cur.x end return tools.probe_read(t)",
            "deeper than 64",
        ),
        ("return tools.probe_read{n = print}", "function"),
        ("return tools.probe_read{n = 0/0}", "JSON cannot hold"),
    ];
    for (src, what) in cases {
        let e = fails(&t, src, Duration::from_secs(5)).await.to_string();
        assert!(e.contains("invalid_args") && e.contains(what), "{src}: {e}");
    }
    assert_eq!(t.entered.count("probe_read"), 1);
    // A failed call is a catchable error value with a code, a message and the tool.
    let v = eval(&t, "local ok, e = pcall(tools.probe_read, {n = -1}) return {ok, e.code, e.tool, tostring(e):sub(1, 13)}").await;
    assert_eq!(
        v,
        json!([false, "invalid_args", "probe_read", "invalid_args:"])
    );
    let v = eval(
        &t,
        "local ok, e = pcall(tools.probe_send, {}) return e.code",
    )
    .await;
    assert_eq!(v, json!("needs_confirmation"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn globals_for_scripts() {
    let t = TestHost::new();
    assert_eq!(
        eval(&t, "return lmcp.version").await,
        json!(env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(eval(&t, "for _, t in ipairs(lmcp.tools()) do if t.name == 'calculate' then return t.effect end end").await, json!("read"));
    assert_eq!(
        eval(
            &t,
            "return json.decode(json.encode({a = {1, 2}, b = json.null, c = json.array()}))"
        )
        .await,
        json!({"a": [1, 2], "b": null, "c": []})
    );
    assert_eq!(eval(&t, "return json.decode('[]')").await, json!([]));
    let e = fails(&t, "return json.decode('{oops')", SHORT)
        .await
        .to_string();
    assert!(e.contains("json.decode"), "{e}");
    // what JSON cannot hold, or text that is not JSON, is a plain message at the script's line
    let v = eval(
        &t,
        "local function at(f, ...) local ok, e = pcall(f, ...) return {type(e), e} end\n\
         return {\n\
           at(function() local s = json.encode({x = 0/0}) return s end),\n\
           at(function() local v = json.decode('{oops') return v end),\n\
         }",
    )
    .await;
    assert_eq!(v[0][0], json!("string"), "{v}");
    let encode = v[0][1].as_str().unwrap_or_default();
    assert!(
        encode.ends_with(":3: json.encode: the value at /x is NaN, which JSON cannot hold"),
        "{encode}"
    );
    assert_eq!(v[1][0], json!("string"), "{v}");
    let decode = v[1][1].as_str().unwrap_or_default();
    assert!(
        decode.contains(":4: json.decode: key must be a string"),
        "{decode}"
    );
    // the same for every host function: what pcall catches is a message at the script's line
    let v = eval(
        &t,
        "local function at(f) local ok, e = pcall(f) return {type(e), e} end\n\
         return {\n\
           at(function() sleep('soon') end),\n\
           at(function() local x = lmcp.has_tool({}) return x end),\n\
           at(function() local x = json.decode({}) return x end),\n\
         }",
    )
    .await;
    for (i, line) in [3, 4, 5].into_iter().enumerate() {
        assert_eq!(v[i][0], json!("string"), "{v}");
        let e = v[i][1].as_str().unwrap_or_default();
        assert!(e.contains(&format!(":{line}: bad argument #1")), "{e}");
        assert!(!e.contains("traceback"), "{e}");
    }
    let started = Instant::now();
    eval(&t, "sleep(0.05)").await;
    assert!(started.elapsed() >= Duration::from_millis(50));
    let v = eval(&t, "return {math.floor(2.5), string.format('%05.1f', 3.14159), utf8.char(228), os.date('%Y', 0)}").await;
    assert_eq!(v, json!([2, "003.1", "ä", "1970"]));
    // an empty table passed where the schema wants an array becomes []
    t.set_grant("run_command", lmcp::config::Grant::Allow);
    let v = eval(
        &t,
        "return tools.run_command{program = 'true', args = {}}.exit_code",
    )
    .await;
    assert_eq!(v, json!(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_run_gets_a_fresh_state() {
    let t = TestHost::new();
    eval(&t, "leaked = 1 string.upper = nil string.lower = nil").await;
    assert_eq!(
        eval(
            &t,
            "return {leaked == nil, string.upper('a'), ('B'):lower()}"
        )
        .await,
        json!([true, "A", "b"])
    );
}
