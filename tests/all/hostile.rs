//! Hostile input never takes lmcp down: bombs are refused early with a clear error, limits
//! name themselves, and no invocation panics.

use serde_json::json;
use std::path::Path;

use crate::common::{self, TestHost, call_yes, lmcp};

/// A YAML alias bomb (9 levels of 9 aliases: ~400 bytes that expand to billions of nodes) is
/// refused before anything is built, quickly, through `skill_install`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_yaml_alias_bomb_is_refused() {
    let t = TestHost::new();
    let mut front =
        String::from("name: bomb\ndescription: d\nversion: &a0 [x, x, x, x, x, x, x, x, x]\n");
    for i in 1..9 {
        let prev = format!("*a{}", i - 1);
        let list = vec![prev; 9].join(", ");
        front.push_str(&format!("l{i}: &a{i} [{list}]\n"));
    }
    let md = format!("---\n{front}---\nx\n");
    let started = std::time::Instant::now();
    let e = call_yes(&t.host, "skill_install", json!({"skill_md": md}))
        .await
        .unwrap_err();
    assert!(e.contains("aliases"), "{e}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    // and an oversized front matter
    let big = format!(
        "---\nname: big\ndescription: {}\n---\nx\n",
        "d".repeat(70_000)
    );
    let e = call_yes(&t.host, "skill_install", json!({"skill_md": big}))
        .await
        .unwrap_err();
    assert!(e.contains("the limit is 65536"), "{e}");
}

/// Out-of-range timeouts are usage errors, never panics.
#[test]
fn huge_timeouts_are_usage_errors() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let script = h.join("s.lua");
    std::fs::write(&script, "return 1").unwrap();
    for args in [
        vec![
            "call",
            "calculate",
            r#"{"expression": "1"}"#,
            "--timeout",
            "18446744073709551616",
        ],
        vec!["run", script.to_str().unwrap(), "--timeout", "1e20"],
        vec!["run", script.to_str().unwrap(), "--timeout", "inf"],
        vec!["run", script.to_str().unwrap(), "--timeout", "-1"],
    ] {
        let out = lmcp(h, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    }
}

/// A print flood is bounded: the run fails naming the limit instead of writing gigabytes.
#[test]
fn a_print_flood_stops_at_its_limit() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    std::fs::create_dir_all(h.join("config")).unwrap();
    // 16 KiB captured → 1 MiB to the terminal
    std::fs::write(
        h.join("config/config.json"),
        r#"{"limits": {"lua_output_kb": 16}}"#,
    )
    .unwrap();
    let script = h.join("flood.lua");
    std::fs::write(&script, "while true do print(string.rep('x', 1000)) end").unwrap();
    let out = lmcp(h, &["run", script.to_str().unwrap(), "--timeout", "20"]);
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("printed more than 1048576 bytes"), "{err}");
    assert!(out.stdout.len() <= 1 << 20, "{} bytes", out.stdout.len());
}

/// Output into a closed pipe ends quietly, never with a panic.
#[cfg(unix)]
#[test]
fn a_closed_pipe_is_a_quiet_exit() {
    use std::io::Read;
    let home = tempfile::tempdir().unwrap();
    // more than a pipe holds, so lmcp is still writing when the reader goes
    let ws = home.path().join("data/workspace");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("big.txt"), "line of text\n".repeat(60_000)).unwrap();
    let read = r#"{"path": "big.txt"}"#;
    for args in [
        vec!["call", "read_file", read],
        vec!["call", "read_file", read, "--json"],
        vec!["types"],
    ] {
        let mut child = common::spawn(home.path(), &args);
        // read a few bytes, then close our end while lmcp still writes
        let mut stdout = child.stdout.take().unwrap();
        let mut first = [0u8; 16];
        let _ = stdout.read(&mut first);
        drop(stdout);
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_ne!(out.status.code(), Some(101), "{args:?}");
    }
}

/// Inputs are bounded (`limits.input_mb`): `@FILE`, stdin, scripts and manifests larger than
/// the limit are refused naming it, without being read whole.
#[test]
fn inputs_are_bounded() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    std::fs::create_dir_all(h.join("config")).unwrap();
    std::fs::write(
        h.join("config/config.json"),
        r#"{"limits": {"input_mb": 1}}"#,
    )
    .unwrap();
    let big = h.join("big.json");
    std::fs::write(
        &big,
        format!("{{\"expression\": \"{}\"}}", "1".repeat(2 << 20)),
    )
    .unwrap();
    let at = format!("@{}", big.display());
    let script = h.join("big.lua");
    std::fs::write(&script, format!("-- {}\nreturn 1", "x".repeat(2 << 20))).unwrap();
    let manifest = h.join("big-recipe.json");
    std::fs::write(
        &manifest,
        format!(
            "{{\"name\": \"x\", \"description\": \"{}\"}}",
            "d".repeat(2 << 20)
        ),
    )
    .unwrap();
    for args in [
        vec!["call", "calculate", at.as_str()],
        vec!["run", script.to_str().unwrap()],
        vec!["recipe", "save", manifest.to_str().unwrap()],
        vec!["run", manifest.to_str().unwrap()],
    ] {
        let out = lmcp(h, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("limits.input_mb"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
    }
    // stdin: lmcp stops reading at the limit, so the writer may see a closed pipe
    use std::io::Write;
    let mut child = common::spawn(h, &["call", "calculate", "-"]);
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(format!("{{\"expression\": \"{}\"}}", "1".repeat(2 << 20)).as_bytes());
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("limits.input_mb"));
}

/// One call with thousands of keys is recorded as a few shapes and a count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_entries_are_bounded() {
    let t = TestHost::new();
    let args: serde_json::Map<String, serde_json::Value> =
        (0..5000).map(|i| (format!("k{i}"), json!(i))).collect();
    let _ = call_yes(&t.host, "calculate", serde_json::Value::Object(args)).await;
    let recent = t.host.history().recent(1).unwrap();
    let entry = recent.entries.last().unwrap();
    assert!(entry.args.len() <= 33, "{}", entry.args.len());
    assert_eq!(entry.args.last().unwrap().name, "(more)");
}

/// A skill whose script's tool name would not fit, or would take another skill's, is refused
/// before anything is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skill_tool_names_are_checked_before_anything_is_written() {
    let t = TestHost::new();
    let long = "s".repeat(60);
    let md = format!("---\nname: {long}\ndescription: d\n---\nx\n");
    let e = call_yes(
        &t.host,
        "skill_install",
        json!({"skill_md": md, "scripts": [{"name": "go.lua", "code": "return 1"}]}),
    )
    .await
    .unwrap_err();
    assert!(e.contains("longer than 64"), "{e}");
    assert!(!t.home().join(format!("data/skills/{long}")).exists());
    let listed = call_yes(&t.host, "skill_list", json!({})).await.unwrap();
    assert_eq!(listed["skills"], json!([]));
    // `a` with script `b__c` and `a--b` with script `c` would both be skill__a__b__c
    let md = |name: &str| format!("---\nname: {name}\ndescription: d\n---\nx\n");
    call_yes(
        &t.host,
        "skill_install",
        json!({"skill_md": md("a"), "scripts": [{"name": "b__c.lua", "code": "return 1"}]}),
    )
    .await
    .unwrap();
    let e = call_yes(
        &t.host,
        "skill_install",
        json!({"skill_md": md("a--b"), "scripts": [{"name": "c.lua", "code": "return 2"}]}),
    )
    .await
    .unwrap_err();
    // refused for its name now (no double hyphens), before anything clashes
    assert!(e.contains("single hyphens"), "{e}");
    assert!(!t.home().join("data/skills/a--b").exists());
}

/// Writes `code` to `script` and runs it with `--timeout 1`.
fn run_for_a_second(h: &Path, script: &Path, code: &str) -> std::process::Output {
    std::fs::write(script, code).unwrap();
    lmcp(h, &["run", script.to_str().unwrap(), "--timeout", "1"])
}

/// To-be-closed variables run, and a looping `__close` obeys the deadline wherever Lua closes
/// it: on a normal exit from its scope, while a timeout unwinds the main thread or a coroutine,
/// as a generic `for`'s closing value inside `coroutine.wrap` (the hang from the field), and
/// when the metamethod is added after `setmetatable`. `__gc` stays refused (finalizers run with
/// hooks off). The watchdog (which would end the process 5 s after the deadline) never fires.
#[test]
fn looping_close_handlers_obey_the_deadline() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let closer = "local closer = setmetatable({}, {__close = function() while true do end end})\n";
    let hangs = [
        "coroutine.wrap(function()\n\
           for _ in function() while true do end end, nil, nil, closer do end\n\
         end)()\n",
        "local x <close> = closer while true do end",
        "do local x <close> = closer end",
        "local x <close> = closer error('boom')",
        "local ok = pcall(function() local x <close> = closer while true do end end)",
        "local co = coroutine.create(function() local x <close> = closer while true do end end)\n\
         coroutine.resume(co)",
        "local co = coroutine.create(function() local x <close> = closer coroutine.yield() end)\n\
         coroutine.resume(co) coroutine.close(co)",
        "coroutine.wrap(function() local x <close> = closer error('boom') end)()",
        "coroutine.wrap(function() coroutine.wrap(function()\n\
           local x <close> = closer while true do end end)() end)()",
        // a __close that catches its own interruption, again and again
        "local c2 = setmetatable({}, {__close = function()\n\
           while true do pcall(function() while true do end end) end end})\n\
         local x <close> = c2 while true do end",
        // several closers in a row: each is stopped
        "local a <close> = closer local b <close> = closer local c <close> = closer\n\
         while true do end",
    ];
    let script = h.join("hang.lua");
    for code in hangs {
        let code = format!("{closer}{code}");
        let out = run_for_a_second(h, &script, &code);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{code}: {err}");
        assert!(err.contains("timed out after 1s"), "{code}: {err}");
        assert!(!err.contains("did not stop"), "{code}: {err}");
    }
    // the race: a coroutine killed by the deadline while its resumer is interrupted before it
    // could note so is still never closed (the hook's phase differs in each of 1,000 frames)
    let out = run_for_a_second(
        h,
        &script,
        "local looper = setmetatable({}, {__close = function() while true do end end})\n\
         local last_c\n\
         local function attempt(k)\n\
           local c = coroutine.create(function() local x <close> = looper while true do end end)\n\
           last_c = c\n\
           coroutine.resume(coroutine.create(function() for i = 1, k do end coroutine.resume(c) end))\n\
         end\n\
         local function frame(d)\n\
           local a <close> = setmetatable({}, {__close = function()\n\
             local c = last_c last_c = nil if c then coroutine.close(c) end end})\n\
           local b <close> = setmetatable({}, {__close = function() attempt(d) end})\n\
           if d < 1000 then frame(d + 1) else while true do end end\n\
         end\n\
         frame(0)",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("timed out after 1s") && !err.contains("did not stop"),
        "{err}"
    );
    // the metamethod added after setmetatable is closed under the deadline too
    let out = run_for_a_second(
        h,
        &script,
        "local mt = {} local c = setmetatable({}, mt)\n\
         mt.__close = function() while true do end end\n\
         do local x <close> = c end",
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("timed out after 1s"));
    // to-be-closed variables work: closed in reverse order, with the error that unwound them
    std::fs::write(
        &script,
        "local log = {}\n\
         local function closing(name) return setmetatable({}, {__close = function(_, e)\n\
           log[#log + 1] = name .. (e and (':' .. tostring(e)) or '') end}) end\n\
         do local a <close> = closing('a') local b <close> = closing('b') end\n\
         pcall(function() local c <close> = closing('c') error('boom', 0) end)\n\
         for _ in function(_, i) if not i then return 1 end end, nil, nil, closing('for') do end\n\
         local ok = pcall(coroutine.wrap(function() local d <close> = closing('d') error('x', 0) end))\n\
         return table.concat(log, ' ')",
    )
    .unwrap();
    let out = common::lmcp_ok(h, &["run", script.to_str().unwrap()]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "b a c:boom for d:x"
    );
    // a __close goes through the gate like any line: without --yes its write is only previewed
    std::fs::write(
        &script,
        "local x <close> = setmetatable({}, {__close = function()\n\
           tools.write_file{path = 'closed.txt', content = 'x'} end})\n\
         return 1",
    )
    .unwrap();
    let out = lmcp(h, &["run", script.to_str().unwrap()]);
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(all.contains("previewed 1 state-changing call"), "{all}");
    assert!(!h.join("data/workspace/closed.txt").exists());
    // __gc stays refused, however it is added
    for code in [
        "local mt = {} local t = setmetatable({}, mt) mt.__gc = function() while true do end end",
        "setmetatable({}, {__gc = function() while true do end end})",
        "local mt = {} local t = setmetatable({}, mt) rawset(mt, '__gc', print)",
        // the guard cannot be swapped out or reached
        "local mt = {} local obj = setmetatable({}, mt) setmetatable(mt, {})\n\
         mt.__gc = function() while true do end end",
        "local mt = {} local obj = setmetatable({}, mt)\n\
         local g = getmetatable(mt) g.__newindex = nil mt.__gc = print",
    ] {
        let out = run_for_a_second(h, &script, code);
        assert_eq!(out.status.code(), Some(1), "{code}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("metamethods are not allowed")
                || err.contains("already a metatable")
                || err.contains("index a boolean"),
            "{code}: {err}"
        );
    }
    // inheritance chains keep working
    let script = h.join("oop.lua");
    std::fs::write(
        &script,
        "local Base = {} Base.__index = Base function Base.hi() return 'hi' end\n\
         local C = setmetatable({}, {__index = Base}) C.__index = C\n\
         local o = setmetatable({}, C) function C.there() return ' there' end\n\
         return o.hi() .. o.there()",
    )
    .unwrap();
    let out = common::lmcp_ok(h, &["run", script.to_str().unwrap()]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "hi there");
    // coroutine.wrap keeps its meaning: values in and out, errors raised to the caller
    std::fs::write(
        &script,
        "local f = coroutine.wrap(function(a) local b = coroutine.yield(a + 1) return b * 2 end)\n\
         local x, y = f(1), f(10)\n\
         local ok, e = pcall(coroutine.wrap(function() error('boom', 0) end))\n\
         return x .. ' ' .. y .. ' ' .. tostring(ok) .. ' ' .. e",
    )
    .unwrap();
    let out = common::lmcp_ok(h, &["run", script.to_str().unwrap()]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "2 20 false boom"
    );
}

/// C loops that run no Lua instruction cannot outlive the deadline: `table.insert`, `remove`,
/// `sort` and `concat` over a length a metatable claims, and a sort whose comparator is a C
/// function. A metatable whose own metatable is protected cannot be used (its guard could not be
/// set), and the table is left as it was.
#[test]
fn c_loops_over_a_claimed_length_obey_the_deadline() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let script = h.join("c.lua");
    for code in [
        "local t = setmetatable({}, {__len = function() return 2^62 end}) table.insert(t, 1, true)",
        "local t = setmetatable({}, {__len = function() return math.maxinteger end}) table.remove(t, 1)",
        "local t = setmetatable({}, {__len = function() return 2^31 - 2 end}) table.sort(t, tonumber)",
        "local t = setmetatable({}, {__len = function() return 2^31 - 2 end, __index = rawlen})\n\
         table.sort(t)",
        "local t = setmetatable({}, {__len = function() return 2^40 end,\n\
           __index = function() return 'x' end}) table.concat(t)",
    ] {
        let out = run_for_a_second(h, &script, code);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{code}: {err}");
        assert!(
            (err.contains("timed out after 1s") || err.contains("ran out of memory"))
                && !err.contains("did not stop"),
            "{code}: {err}"
        );
    }
    std::fs::write(
        &script,
        "local mt = setmetatable({}, {__metatable = {}})\n\
         local t = {}\n\
         local ok, e = pcall(setmetatable, t, mt)\n\
         return tostring(ok) .. ' ' .. tostring(getmetatable(t) == mt) .. ' ' .. e",
    )
    .unwrap();
    let out = common::lmcp_ok(h, &["run", script.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("false false") && text.contains("own metatable is protected"),
        "{text}"
    );
}

/// Work no instruction count sees obeys the deadline too: a loop of expensive C calls (stopped
/// at its next call), a sort of long strings, a huge unknown tool name (no lookup over it), and
/// compiling source Lua's parser is quadratic over (refused before it compiles, in the script
/// itself, through `load`, and in a saved custom tool). `log` counts toward the output bound,
/// and `json.decode` takes text in proportion to the memory limit.
#[test]
fn slow_c_work_obeys_the_deadline() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let script = h.join("slow.lua");
    let chain = format!("return {}a", "a and ".repeat(150_000));
    for (code, expected) in [
        (
            "local a = string.rep('a', 2e7) local f = utf8.len while true do f(a) end".to_string(),
            "timed out after 1s",
        ),
        (
            "local s = string.rep('a', 2e7) local t = {} for i = 1, 3000 do t[i] = s end \
             table.sort(t)"
                .to_string(),
            "timed out after 1s",
        ),
        (
            "local x = tools[string.rep('x', 1e7)]".to_string(),
            "(10000000 bytes)",
        ),
        (
            format!("local a = 1\n{chain}"),
            "slow.lua:2: an expression with more than 500",
        ),
        (
            format!("local f, e = load({chain:?}) error(e, 0)"),
            "more than 500 `and`/`or` operators",
        ),
        (
            "local s = string.rep('x', 1e6) while true do log.info(s) end".to_string(),
            "print and log together",
        ),
        (
            "json.decode('[' .. string.rep('0,', 6e6) .. '0]')".to_string(),
            "at most 8388608 can be decoded",
        ),
        (
            "coroutine.close(coroutine.running())".to_string(),
            "cannot close",
        ),
    ] {
        let started = std::time::Instant::now();
        let out = run_for_a_second(h, &script, &code);
        let err = String::from_utf8_lossy(&out.stderr);
        let head = &code[..code.len().min(60)];
        // source refused before it compiles is refused before the run, like a save (2)
        let refused_source = expected.starts_with("slow.lua:2:");
        let want = if refused_source { 2 } else { 1 };
        assert_eq!(out.status.code(), Some(want), "{head}: {err}");
        assert!(
            err.contains(expected),
            "{head}: {}",
            &err[..err.len().min(500)]
        );
        assert!(!err.contains("did not stop"), "{head}: {err}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(4),
            "{head}: took {:?}",
            started.elapsed()
        );
    }
    // closing the running coroutine keeps Lua's own message
    std::fs::write(&script, "coroutine.close(coroutine.running())").unwrap();
    let out = lmcp(h, &["run", script.to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("deadline"));
    // a custom tool whose body would compile for minutes is refused when saved
    let def = json!({"name": "user_slow", "description": "slow", "lua": chain});
    let file = h.join("slow.json");
    std::fs::write(&file, def.to_string()).unwrap();
    let out = lmcp(h, &["tool", "create", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("more than 500"), "{err}");
    // a manifest run keeps --timeout
    let manifest = h.join("wait.json");
    std::fs::write(
        &manifest,
        r#"{"name": "w", "steps": [{"wait": {"seconds": 20}}]}"#,
    )
    .unwrap();
    let started = std::time::Instant::now();
    let out = lmcp(
        h,
        &["run", manifest.to_str().unwrap(), "--yes", "--timeout", "1"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("timed out after 1s"));
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

/// The metatables the host hands out are closed: a tool error's cannot get a `__gc` that keeps
/// the process alive, nor can json.array's or the strings'.
#[test]
fn host_metatables_are_closed() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let script = h.join("gc.lua");
    std::fs::write(
        &script,
        "local ok, e = pcall(tools.read_file, {path = 'nope.txt'})\n\
         local results = {}\n\
         for _, v in ipairs({e, json.array{}, ''}) do\n\
           local mt = getmetatable(v)\n\
           results[#results + 1] = type(mt)\n\
           results[#results + 1] = tostring(pcall(setmetatable, v, {}))\n\
         end\n\
         return table.concat(results, ' ')",
    )
    .unwrap();
    let out = common::lmcp_ok(h, &["run", script.to_str().unwrap(), "--json"]);
    let v = common::json_out(&out);
    assert_eq!(
        v["result"],
        json!("string false string false string false"),
        "{v}"
    );
}

/// A corrupt saved file is kept aside, never written over; a corrupt outbox does not stop
/// friction reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_saved_files_are_kept_aside() {
    let t = TestHost::new();
    let tools = t.home().join("data/tools");
    std::fs::create_dir_all(&tools).unwrap();
    std::fs::write(tools.join("user_x.json"), "{ broken").unwrap();
    let def = json!({"name": "user_x", "description": "d", "lua": "return 1", "replace": true});
    call_yes(&t.host, "custom_tool_create", def).await.unwrap();
    let kept: Vec<String> = std::fs::read_dir(&tools)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("corrupt-"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(
        std::fs::read_to_string(tools.join(&kept[0])).unwrap(),
        "{ broken"
    );
    let recipes = t.home().join("data/recipes");
    std::fs::create_dir_all(&recipes).unwrap();
    std::fs::write(recipes.join("r.json"), "{ broken").unwrap();
    let manifest =
        json!({"name": "r", "steps": [{"tool": "calculate", "args": {"expression": "1"}}]});
    call_yes(
        &t.host,
        "recipe_save",
        json!({"manifest": manifest, "replace": true}),
    )
    .await
    .unwrap();
    assert!(std::fs::read_dir(&recipes).unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .contains("corrupt-")
    }));
    let outbox = t.home().join("data/friction");
    std::fs::create_dir_all(&outbox).unwrap();
    std::fs::write(outbox.join("outbox.json"), "[ broken").unwrap();
    let r = call_yes(
        &t.host,
        "report_friction",
        json!({"friction_type": "other"}),
    )
    .await
    .unwrap();
    assert_eq!(r["status"], "queued", "{r}");
}

/// Recipes are found by their exact name (after NFC), not by the slug of their file: names in
/// any script work, look-alike spellings are one name, and names sharing a file are refused
/// naming both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recipe_names_are_exact() {
    let t = TestHost::new();
    let steps = json!([{"tool": "calculate", "args": {"expression": "1"}}]);
    let save = |name: &str| json!({"manifest": {"name": name, "steps": steps}});
    call_yes(&t.host, "recipe_save", save("Weekly report"))
        .await
        .unwrap();
    let e = call_yes(
        &t.host,
        "recipe_delete",
        json!({"name": "WEEKLY   report?"}),
    )
    .await
    .unwrap_err();
    assert!(e.contains("did you mean \"Weekly report\""), "{e}");
    call_yes(&t.host, "recipe_get", json!({"name": "Weekly report"}))
        .await
        .unwrap();
    for name in ["Утренняя сводка", "早报"] {
        call_yes(&t.host, "recipe_save", save(name)).await.unwrap();
        call_yes(
            &t.host,
            "recipe_run",
            json!({"name": name, "confirm": true}),
        )
        .await
        .unwrap();
    }
    // composed and decomposed "Café" are one recipe
    call_yes(&t.host, "recipe_save", save("Caf\u{e9}"))
        .await
        .unwrap();
    call_yes(&t.host, "recipe_get", json!({"name": "Cafe\u{301}"}))
        .await
        .unwrap();
    // "A B" and "a_b" would share a file
    call_yes(&t.host, "recipe_save", save("A B")).await.unwrap();
    let e = call_yes(&t.host, "recipe_save", save("a_b"))
        .await
        .unwrap_err();
    assert!(e.contains("\"a_b\"") && e.contains("\"A B\""), "{e}");
    // text-reordering characters are refused
    let e = call_yes(&t.host, "recipe_save", save("evil\u{202e}txt"))
        .await
        .unwrap_err();
    assert!(e.contains("text-reordering"), "{e}");
}

/// Stored descriptions are bounded: they go out with every tool list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descriptions_are_bounded() {
    let t = TestHost::new();
    let long = "d".repeat(3000);
    let steps = json!([{"tool": "calculate", "args": {"expression": "1"}}]);
    let e = call_yes(
        &t.host,
        "recipe_save",
        json!({"manifest": {"name": "r", "description": long, "steps": steps}}),
    )
    .await
    .unwrap_err();
    assert!(e.contains("the limit is 2000"), "{e}");
    let e = call_yes(
        &t.host,
        "custom_tool_create",
        json!({"name": "user_t", "description": long, "lua": "return 1"}),
    )
    .await
    .unwrap_err();
    assert!(e.contains("the limit is 2000"), "{e}");
    let md = format!("---\nname: s\ndescription: {}\n---\nx\n", "d".repeat(1100));
    let e = call_yes(&t.host, "skill_install", json!({"skill_md": md}))
        .await
        .unwrap_err();
    assert!(e.contains("the limit is 1024"), "{e}");
}

/// An update killed between its two renames leaves the skill set aside with nothing in its
/// place: the next start puts it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_update_cut_short_is_rolled_back_at_start() {
    let t = TestHost::new();
    let md = "---\nname: demo\ndescription: d\n---\nx\n";
    call_yes(
        &t.host,
        "skill_install",
        json!({"skill_md": md, "scripts": [{"name": "go.lua", "code": "return 1"}]}),
    )
    .await
    .unwrap();
    let skills = t.home().join("data/skills");
    // the state a kill between the renames leaves
    std::fs::rename(skills.join("demo"), skills.join(".demo.0123.old")).unwrap();
    std::fs::create_dir_all(skills.join(".demo.4567.tmp")).unwrap();
    let host = lmcp::Host::open(lmcp::store::Paths::under(t.home())).unwrap();
    assert!(skills.join("demo/SKILL.md").exists());
    assert!(!skills.join(".demo.0123.old").exists());
    assert!(host.registry().get("skill__demo__go").is_some());
    let warned = host.take_warnings().join("\n");
    assert!(warned.contains("cut short"), "{warned}");
}

/// A line that is not JSON gets the JSON-RPC parse error (-32700, id null), and the server goes
/// on answering.
#[test]
fn serve_answers_bad_json_with_a_parse_error() {
    use std::io::{BufRead, BufReader, Write};
    let home = tempfile::tempdir().unwrap();
    let mut child = common::spawn(home.path(), &["serve"]);
    let mut stdin = child.stdin.take().unwrap();
    let init = common::initialize(json!(1));
    stdin
        .write_all(format!("not json\n{{\"cut\": \n{init}\n").as_bytes())
        .unwrap();
    stdin.flush().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(lines.next().unwrap().unwrap());
    }
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    let parse: Vec<&String> = got.iter().filter(|l| l.contains("-32700")).collect();
    assert_eq!(parse.len(), 2, "{got:?}");
    assert!(parse[0].contains("\"id\":null"), "{got:?}");
    assert!(
        got.iter()
            .any(|l| l.contains("\"id\":1") && l.contains("serverInfo")),
        "{got:?}"
    );
}

/// A tool the server's profile leaves out is named as such, with the flag that offers it (not
/// "did you mean" itself), and a megabyte-long unknown name is answered at once, clipped.
#[test]
fn serve_names_tools_outside_its_profile() {
    use std::io::{BufRead, BufReader, Write};
    let home = tempfile::tempdir().unwrap();
    let mut child = common::spawn(home.path(), &["serve"]);
    let mut stdin = child.stdin.take().unwrap();
    let call = |id: u32, name: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": name, "arguments": {}}})
    };
    let lines = [
        common::initialize(json!(1)),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        call(2, "run_command"),
        call(3, &"x".repeat(5_000_000)),
    ];
    for l in lines {
        stdin.write_all(format!("{l}\n").as_bytes()).unwrap();
    }
    stdin.flush().unwrap();
    let started = std::time::Instant::now();
    let mut got = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines().take(3) {
        got.push(line.unwrap());
    }
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    let profile = got.iter().find(|l| l.contains("\"id\":2")).unwrap();
    assert!(
        profile.contains("not offered in the core profile")
            && profile.contains("--profile full")
            && !profile.contains("did you mean"),
        "{profile}"
    );
    let long = got.iter().find(|l| l.contains("\"id\":3")).unwrap();
    assert!(
        long.contains("(5000000 bytes)") && long.len() < 1000,
        "{}",
        &long[..200]
    );
}

/// tools/call with params that do not fit gets -32602 with the reason and its id (rmcp alone
/// answered "method not found", or an invalid request without the id, so clients waited).
#[test]
fn serve_answers_bad_params_with_invalid_params() {
    use std::io::{BufRead, BufReader, Write};
    let home = tempfile::tempdir().unwrap();
    let mut child = common::spawn(home.path(), &["serve"]);
    let mut stdin = child.stdin.take().unwrap();
    let bad = [
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "calculate", "arguments": [1]}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": 5}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": null}),
        json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": []}),
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": "x"}}),
    ];
    let mut lines = vec![
        common::initialize(json!(1)),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ];
    lines.extend(bad);
    lines.push(json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "calculate", "arguments": {"expression": "1+1"}}}));
    for l in lines {
        stdin.write_all(format!("{l}\n").as_bytes()).unwrap();
    }
    stdin.flush().unwrap();
    let mut got = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines().take(8) {
        got.push(line.unwrap());
    }
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    for id in 2..=7 {
        let reply = got
            .iter()
            .find(|l| l.contains(&format!("\"id\":{id},")) || l.contains(&format!("\"id\":{id}}}")))
            .unwrap_or_else(|| panic!("no reply to {id}: {got:?}"));
        assert!(
            reply.contains("-32602") && reply.contains("Invalid params"),
            "{reply}"
        );
    }
    assert!(
        got.iter()
            .any(|l| l.contains("\"id\":8") && l.contains("\"value\":2")),
        "{got:?}"
    );
}

/// `lmcp serve` that no client has spoken to yet (a terminal, a process manager's idle child)
/// ends at once on SIGTERM or SIGINT, exit 0, as it does after the handshake; it waited for
/// `initialize` before (#34).
#[cfg(target_os = "linux")]
#[test]
fn serve_ends_on_a_signal_before_any_client_speaks() {
    for (name, signal) in [("SIGTERM", libc::SIGTERM), ("SIGINT", libc::SIGINT)] {
        let home = tempfile::tempdir().unwrap();
        let mut child = common::spawn(home.path(), &["serve"]);
        let stdin = child.stdin.take();
        common::wait_until_signals_caught(child.id());
        // SAFETY: kill(2) on our own child's pid, which it still is (not yet waited for)
        unsafe { libc::kill(child.id() as i32, signal) };
        let status = common::exit_within_10s(&mut child, name);
        assert_eq!(
            status.code(),
            Some(0),
            "{name}: ended, not killed: {status:?}"
        );
        drop(stdin);
    }
}

/// A client that stops the server with SIGTERM (or SIGINT) right after its last reply loses no
/// history: the server ends as if stdin had closed, and writes what it recorded.
#[cfg(unix)]
#[test]
fn serve_stopped_by_a_signal_keeps_its_history() {
    use std::io::{BufRead, BufReader, Write};
    for signal in ["-TERM", "-INT"] {
        let home = tempfile::tempdir().unwrap();
        let mut child = common::spawn(home.path(), &["serve"]);
        let mut stdin = child.stdin.take().unwrap();
        let mut lines = vec![
            common::initialize(json!(1)),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ];
        for id in 2..7 {
            lines.push(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "calculate", "arguments": {"expression": "1+1"}}}));
        }
        for l in lines {
            stdin.write_all(format!("{l}\n").as_bytes()).unwrap();
        }
        stdin.flush().unwrap();
        let replies = BufReader::new(child.stdout.take().unwrap())
            .lines()
            .take(6)
            .count();
        assert_eq!(replies, 6);
        let killed = std::process::Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{signal}: ended, not killed");
        let history =
            std::fs::read_to_string(home.path().join("data/history.jsonl")).unwrap_or_default();
        assert_eq!(
            history.lines().filter(|l| l.contains("calculate")).count(),
            5,
            "{signal}: {history}"
        );
        drop(stdin);
    }
}
