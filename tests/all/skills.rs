//! Skills: install from a folder and through the tool, updates, invalid updates, list/get
//! fields, removal, calls with params and config, timeouts, `require` limits, secrets and
//! disabled skills.

use std::sync::Arc;
use std::time::Duration;

use lmcp::{CallContext, CallRequest, ConfirmMode, Origin};
use serde_json::{Value, json};

use crate::common::{self, TestHost, call, call_yes, json_out, lmcp};

async fn ok(t: &TestHost, tool: &str, args: Value) -> Value {
    call(&t.host, tool, args.clone())
        .await
        .into_result()
        .unwrap_or_else(|e| panic!("{tool} {args}: {e}"))
}

async fn err(t: &TestHost, tool: &str, args: Value) -> String {
    match call(&t.host, tool, args).await.into_result() {
        Ok(v) => panic!("{tool}: expected an error, got {v}"),
        Err(e) => e.to_string(),
    }
}

const SKILL_MD: &str = "---\nname: demo\ndescription: A demo skill.\nconfig:\n  greeting:\n    title: Greeting\n    type: text\n    required: true\n  api_key:\n    title: API key\n    type: text\n    secret: true\n  loud:\n    type: switch\n    default: false\n---\n# Demo\nSay hello.\n";

fn package(md: &str, hello: &str) -> Value {
    json!({
        "skill_md": md,
        "scripts": [
            {"name": "hello.lua", "code": hello},
            {"name": "util.lua", "code": "local M = {}\nfunction M.shout(s) return s:upper() .. '!' end\nreturn M"},
            {"name": "slow.lua", "code": "---@timeout 0.3\nwhile true do end"},
            {"name": "forever.lua", "code": "while true do end"},
            {"name": "escape.lua", "code": "return require('util').shout('own module')"},
            {"name": "outside.lua", "code": "return require('word_stats')"},
            {"name": "keys.lua", "code": "local keys = {}\nfor k, v in pairs(config) do keys[#keys + 1] = k .. '=' .. tostring(v) end\ntable.sort(keys)\nlocal ok, err = pcall(function() config.greeting = 'x' end)\nlocal _, state = pairs(config)\nreturn {keys = keys, written = ok, message = err, state = type(state)}"}
        ],
        "references": [{"name": "style.md", "content": "Be brief."}]
    })
}

const HELLO: &str = "---@param who string Who to greet\n---@param times? integer=1 How many times\nlocal util = require('util')\nlocal out = {}\nfor i = 1, params.times do\n  local line = config.greeting .. ', ' .. params.who\n  if config.loud then line = util.shout(line) end\n  out[#out + 1] = line\nend\nreturn {lines = out, has_key = config.api_key ~= nil}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_list_get_update_and_remove() {
    let t = TestHost::new();
    let installed = ok(&t, "skill_install", package(SKILL_MD, HELLO)).await;
    assert_eq!(installed["name"], "demo");
    assert_eq!(installed["updated"], false);
    let list = ok(&t, "skill_list", json!({})).await;
    let s = &list["skills"][0];
    assert_eq!(s["name"], "demo");
    assert_eq!(s["description"], "A demo skill.");
    assert_eq!(
        s["toolNames"],
        json!(["escape", "forever", "hello", "keys", "outside", "slow"]),
        "util is required by hello and escape: a module, not a tool"
    );
    assert_eq!(s["referenceNames"], json!(["style.md"]));
    assert_eq!(s["hasConfig"], true);
    assert_eq!(s["enabled"], true);
    let installtime = s["installtime"].as_i64().unwrap();
    assert!(s["updatetime"].as_i64().unwrap() >= installtime);

    let got = ok(&t, "skill_get", json!({"name": "demo"})).await["skill"].clone();
    assert_eq!(got["prompt"], "# Demo\nSay hello.\n");
    assert_eq!(got["config"]["greeting"]["required"], true);
    assert_eq!(got["config"]["api_key"]["secret"], true);
    let timeouts: Vec<(String, f64)> = got["scripts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s.get("module_of").is_none())
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["timeout_secs"].as_f64().unwrap(),
            )
        })
        .collect();
    assert!(
        got["scripts"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "util", "module_of": ["escape", "hello"]})),
        "{got}"
    );
    assert!(
        timeouts.contains(&("hello".to_string(), 300.0)),
        "default timeout: {timeouts:?}"
    );
    assert!(
        timeouts.contains(&("slow".to_string(), 0.3)),
        "@timeout: {timeouts:?}"
    );
    assert_eq!(
        ok(&t, "skill_get", json!({"name": "nope"})).await["skill"],
        Value::Null
    );

    // an update keeps installtime
    std::thread::sleep(Duration::from_millis(20));
    let updated = ok(
        &t,
        "skill_install",
        package(&SKILL_MD.replace("A demo skill.", "A better demo."), HELLO),
    )
    .await;
    assert_eq!(updated["updated"], true);
    assert_eq!(updated["installtime"].as_i64().unwrap(), installtime);
    assert!(updated["updatetime"].as_i64().unwrap() > installtime);
    // an invalid update changes nothing
    let e = err(
        &t,
        "skill_install",
        package(
            &SKILL_MD.replace("A demo skill.", "Broken."),
            "return return",
        ),
    )
    .await;
    assert!(
        e.contains("at /scripts/0 (`hello.lua`): the program does not compile"),
        "{e}"
    );
    let e = err(
        &t,
        "skill_install",
        package("---\nname: demo\n---\n", HELLO),
    )
    .await;
    assert!(e.contains("description"), "{e}");
    let after = ok(&t, "skill_get", json!({"name": "demo"})).await["skill"].clone();
    assert_eq!(after["description"], "A better demo.");
    let leftovers: Vec<String> = std::fs::read_dir(t.home().join("data/skills"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp") || n.ends_with(".old"))
        .collect();
    assert!(leftovers.is_empty(), "no temp folders left: {leftovers:?}");

    // removal
    assert_eq!(
        ok(&t, "skill_remove", json!({"name": "demo"})).await["removed"],
        true
    );
    assert_eq!(
        ok(&t, "skill_remove", json!({"name": "demo"})).await["removed"],
        false
    );
    assert!(t.host.registry().get("skill__demo__hello").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_with_params_config_timeouts_and_require() {
    let t = TestHost::new();
    ok(&t, "skill_install", package(SKILL_MD, HELLO)).await;
    let e = err(
        &t,
        "skill_call",
        json!({"skill": "demo", "script": "hello", "params": {"who": "ana"}}),
    )
    .await;
    assert!(
        e.contains("needs its config field `greeting`")
            && e.contains("lmcp skill config demo greeting=VALUE"),
        "{e}"
    );
    ok(
        &t,
        "skill_config",
        json!({"name": "demo", "values": {"greeting": "Hello", "loud": true}}),
    )
    .await;
    let r = ok(
        &t,
        "skill_call",
        json!({"skill": "demo", "script": "hello", "params": {"who": "ana", "times": 2}}),
    )
    .await;
    assert_eq!(
        r["result"],
        json!({"lines": ["HELLO, ANA!", "HELLO, ANA!"], "has_key": false})
    );
    // the script tool is the same call
    let r2 = ok(&t, "skill__demo__hello", json!({"who": "ana", "times": 2})).await;
    assert_eq!(r2["result"], r["result"]);
    // the config table can be walked with pairs, and not written
    let r = ok(&t, "skill_call", json!({"skill": "demo", "script": "keys"})).await;
    assert_eq!(
        r["result"]["keys"],
        json!(["greeting=Hello", "loud=true"]),
        "{r}"
    );
    assert_eq!(r["result"]["written"], json!(false));
    assert_eq!(
        r["result"]["state"],
        json!("nil"),
        "pairs hands out no table to write into"
    );
    assert!(
        r["result"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("config is read-only")),
        "{r}"
    );
    let e = err(
        &t,
        "skill_call",
        json!({"skill": "demo", "script": "hello", "params": {}}),
    )
    .await;
    assert!(e.contains("missing required parameter `who`"), "{e}");
    let e = err(
        &t,
        "skill_config",
        json!({"name": "demo", "values": {"loud": "very"}}),
    )
    .await;
    assert!(e.contains("does not fit its Switch field"), "{e}");
    let e = err(
        &t,
        "skill_config",
        json!({"name": "demo", "values": {"colour": "red"}}),
    )
    .await;
    assert!(e.contains("no config field `colour`"), "{e}");
    // @timeout holds
    let started = std::time::Instant::now();
    let e = err(&t, "skill_call", json!({"skill": "demo", "script": "slow"})).await;
    assert!(e.contains("timed out after 300ms"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // without @timeout, the 300 s default applies (a shorter deadline from the caller still wins)
    let short = CallContext::root(Origin::Mcp, ConfirmMode::Confirmed)
        .with_timeout(Duration::from_millis(300));
    let o = t
        .host
        .call(CallRequest::new(
            "skill_call",
            json!({"skill": "demo", "script": "forever"}),
            short,
        ))
        .await;
    assert_eq!(o.class(), "failed:timeout");
    // require: the skill's own scripts only
    let r = ok(
        &t,
        "skill_call",
        json!({"skill": "demo", "script": "escape", "params": {}}),
    )
    .await;
    assert_eq!(r["result"], json!("OWN MODULE!"));
    let e = err(
        &t,
        "skill_call",
        json!({"skill": "demo", "script": "outside"}),
    )
    .await;
    assert!(e.contains("module 'word_stats' not found"), "{e}");
    // unknown script, unknown skill
    assert!(
        err(&t, "skill_call", json!({"skill": "demo", "script": "nope"}))
            .await
            .contains("scripts: escape, forever, hello")
    );
    assert!(
        err(&t, "skill_call", json!({"skill": "ghost", "script": "x"}))
            .await
            .contains("no skill `ghost`")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_skills_cannot_be_called() {
    let t = TestHost::new();
    ok(&t, "skill_install", package(SKILL_MD, HELLO)).await;
    ok(
        &t,
        "skill_config",
        json!({"name": "demo", "values": {"greeting": "Hi"}}),
    )
    .await;
    ok(
        &t,
        "skill_enable",
        json!({"name": "demo", "enabled": false}),
    )
    .await;
    let e = err(
        &t,
        "skill_call",
        json!({"skill": "demo", "script": "hello", "params": {"who": "x"}}),
    )
    .await;
    assert!(
        e.contains("disabled") && e.contains("lmcp skill enable demo"),
        "{e}"
    );
    assert!(
        t.host.registry().get("skill__demo__hello").is_none(),
        "its tools disappear"
    );
    assert_eq!(
        ok(&t, "skill_list", json!({})).await["skills"][0]["enabled"],
        false
    );
    ok(&t, "skill_enable", json!({"name": "demo", "enabled": true})).await;
    assert!(t.host.registry().get("skill__demo__hello").is_some());
    ok(
        &t,
        "skill_call",
        json!({"skill": "demo", "script": "hello", "params": {"who": "x"}}),
    )
    .await;
}

/// A host with the `demo` skill installed and its secret `api_key` set to `secret`.
async fn demo_with_secret(secret: &str) -> TestHost {
    let t = TestHost::new();
    ok(&t, "skill_install", package(SKILL_MD, HELLO)).await;
    ok(
        &t,
        "skill_config",
        json!({"name": "demo", "values": {"greeting": "Hi", "api_key": secret}}),
    )
    .await;
    t
}

/// A result that holds a secret is masked before its `---@return` type is checked, so a masked
/// field that no longer fits fails the call, saying why, rather than reaching a client as a
/// result that breaks its own output schema; a secret number set as `12345678.0` is masked in
/// its integer form too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_masked_result_still_meets_its_declared_type() {
    let t = TestHost::new();
    let md = "---\nname: pins\ndescription: Has a secret pin.\nconfig:\n  pin:\n    type: number\n    secret: true\n---\nPins.\n";
    ok(
        &t,
        "skill_install",
        json!({"skill_md": md, "scripts": [
            {"name": "number.lua", "code": "---@return {n: integer}\nreturn {n = math.tointeger(config.pin)}"},
            {"name": "text.lua", "code": "---@return {s: string}\nreturn {s = string.format('%d', config.pin)}"}
        ]}),
    )
    .await;
    ok(
        &t,
        "skill_config",
        json!({"name": "pins", "values": {"pin": 12345678.0}}),
    )
    .await;
    let e = err(
        &t,
        "skill_call",
        json!({"skill": "pins", "script": "number", "params": {}}),
    )
    .await;
    assert!(
        e.contains("does not match the type") && e.contains("secret values"),
        "{e}"
    );
    assert!(!e.contains("12345678"), "{e}");
    let r = ok(
        &t,
        "skill_call",
        json!({"skill": "pins", "script": "text", "params": {}}),
    )
    .await;
    assert_eq!(r["result"]["s"], "********", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_appear_anywhere() {
    let secret = "sk-TOP-SECRET-4242";
    let t = demo_with_secret(secret).await;
    // the script can use it
    let r = ok(
        &t,
        "skill_call",
        json!({"skill": "demo", "script": "hello", "params": {"who": "x"}}),
    )
    .await;
    assert_eq!(r["result"]["has_key"], true);
    // but no output shows it (the history as written: its writer gathers entries first)
    t.host.history().flush().unwrap();
    let mut seen = vec![
        ok(&t, "skill_get", json!({"name": "demo"}))
            .await
            .to_string(),
        ok(&t, "skill_list", json!({})).await.to_string(),
        r.to_string(),
        std::fs::read_to_string(t.home().join("data/history.jsonl")).unwrap(),
    ];
    // a preview or a prompt of skill_config hides its arguments
    let preview = CallContext::root(Origin::Program, ConfirmMode::Preview);
    let o = t
        .host
        .call(CallRequest::new(
            "skill_config",
            json!({"name": "demo", "values": {"api_key": secret}}),
            preview,
        ))
        .await;
    seen.push(o.to_json().to_string());
    let person = Arc::new(lmcp::gate::Scripted::new([lmcp::gate::Answer::No]));
    let asking = CallContext::root(Origin::Repl, ConfirmMode::Ask).with_confirmer(person.clone());
    t.host
        .call(CallRequest::new(
            "skill_config",
            json!({"name": "demo", "values": {"api_key": secret}}),
            asking,
        ))
        .await;
    seen.push(format!("{:?}", person.asked()));
    for out in [
        ["skill", "show", "demo"].as_slice(),
        &["skill", "show", "demo", "--json"],
        &["skill", "list", "--json"],
        &["history", "--json"],
    ] {
        let o = lmcp(t.home(), out);
        seen.push(String::from_utf8_lossy(&o.stdout).into_owned());
        seen.push(String::from_utf8_lossy(&o.stderr).into_owned());
    }
    for (i, s) in seen.iter().enumerate() {
        assert!(!s.contains(secret), "output {i} shows the secret: {s}");
    }
    let shown = lmcp(t.home(), &["skill", "show", "demo"]);
    assert!(String::from_utf8_lossy(&shown.stdout).contains("config api_key: ********"));
    // stored apart, readable by the user only
    let secrets = t.home().join("config/skills/demo.secrets.json");
    assert!(std::fs::read_to_string(&secrets).unwrap().contains(secret));
    assert!(
        !std::fs::read_to_string(t.home().join("config/skills/demo.json"))
            .unwrap()
            .contains(secret)
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&secrets).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}

/// A script the skill's other scripts `require` is a module, not a tool: word-stats' `words`
/// was listed as `skill__word_stats__words`, which always failed ("the value at /count is a
/// function") (#34). It is still required; called on its own, it says what to call; one that
/// declares params is refused at install.
#[test]
fn a_required_helper_is_a_module_not_a_tool() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let ws = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/skills/word-stats");
    let out = lmcp(h, &["skill", "install", ws.to_str().unwrap(), "--yes"]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("module words") && shown.contains("required by: count_words"),
        "{shown}"
    );
    let tools = json_out(&lmcp(h, &["tools", "--json"]));
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .filter(|n| n.starts_with("skill__word_stats__"))
        .collect();
    assert_eq!(names, ["skill__word_stats__count_words"]);
    let list = json_out(&lmcp(h, &["skill", "list", "--json"]));
    assert_eq!(list["skills"][0]["toolNames"], json!(["count_words"]));
    let out = lmcp(h, &["skill", "call", "word-stats", "words", "{}"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`words` is a module of the skill `word-stats` (count_words `require`s it)")
            && err.contains("call count_words"),
        "{err}"
    );
    let out = lmcp(
        h,
        &[
            "skill",
            "call",
            "word-stats",
            "count_words",
            r#"{"text": "the cat the"}"#,
            "--json",
        ],
    );
    assert_eq!(
        json_out(&out)["result"]["total_words"],
        3,
        "the module still loads"
    );
    // a module with params was meant as a tool: refused, not guessed about
    let bad = h.join("bad");
    std::fs::create_dir_all(bad.join("scripts")).unwrap();
    std::fs::write(
        bad.join("SKILL.md"),
        "---\nname: bad\ndescription: d\n---\n",
    )
    .unwrap();
    std::fs::write(bad.join("scripts/main.lua"), "return require('helper').x").unwrap();
    std::fs::write(
        bad.join("scripts/helper.lua"),
        "---@param n integer A number\nreturn {x = 1}",
    )
    .unwrap();
    let out = lmcp(h, &["skill", "install", bad.to_str().unwrap(), "--yes"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("(`helper.lua`): main `require`s it, so it is a module")
            && err.contains("takes no `---@param`"),
        "{err}"
    );
}

/// Writes a skill folder `name` under `h` with these scripts; its path.
fn skill_dir(h: &std::path::Path, name: &str, scripts: &[(&str, &str)]) -> std::path::PathBuf {
    let dir = h.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: t\n---\nP\n"),
    )
    .unwrap();
    for (file, code) in scripts {
        std::fs::write(dir.join("scripts").join(file), code).unwrap();
    }
    dir
}

/// A module runs under the `---@uses` of the script that requires it, so its literal calls are
/// judged by that script's line (#34): a main.lua with `---@uses write_file` whose module calls
/// `tools.write_file` installs and writes, and a module whose requirer does not list the tool
/// is refused naming the requirer whose line to extend (the advice once was to give the module
/// its own `---@uses`, which installed a skill whose every run was refused).
#[test]
fn a_module_is_judged_by_the_uses_of_its_requirer() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let module =
        "return {go = function() return tools.write_file{path = 'a.txt', content = 'b'} end}\n";
    let good = skill_dir(
        h,
        "x1s",
        &[
            (
                "main.lua",
                "---@param a? string\n---@uses write_file\nreturn require(\"m\").go()\n",
            ),
            ("m.lua", module),
        ],
    );
    let out = lmcp(h, &["skill", "install", good.to_str().unwrap(), "--yes"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = lmcp(h, &["skill", "call", "x1s", "main", "--yes", "--json"]);
    assert_eq!(
        json_out(&out)["result"]["bytes"],
        1,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // the requirer without ---@uses: named, with the line to add; the module's own does not count
    let cases = [
        (
            "---@param a? string\nreturn require('m').go()\n",
            format!("---@uses write_file\n{module}"),
            "m.lua:2: calls `write_file` (write): m.lua is a module main.lua requires, so it runs \
             under main.lua's `---@uses`; without one main.lua may call read tools only",
            "add `---@uses write_file` to main.lua's header (a module's own `---@uses` does not count)",
        ),
        (
            // through another module, and pcall(require, ...) requires too
            "---@uses calculate\nlocal ok, n = pcall(require, 'n')\nreturn n.go()\n",
            "return require('m')\n".to_string(),
            "m.lua:1: calls `write_file` (write): m.lua is a module main.lua requires, so it runs \
             under main.lua's `---@uses`, which does not list it",
            "make main.lua's line `---@uses calculate, write_file`",
        ),
    ];
    for (main, other, says, fix) in cases {
        let (m, n) = if other.starts_with("return require") {
            (module.to_string(), Some(other))
        } else {
            (other, None)
        };
        let mut scripts = vec![("main.lua", main), ("m.lua", m.as_str())];
        if let Some(n) = &n {
            scripts.push(("n.lua", n.as_str()));
        }
        let bad = skill_dir(h, "x2s", &scripts);
        let out = lmcp(h, &["skill", "install", bad.to_str().unwrap(), "--yes"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(says) && err.contains(fix), "{err}");
    }
    // a module no script requires is not checked on its own (it is a script, with its own line)
    let lone = skill_dir(h, "x3s", &[("m.lua", module)]);
    let out = lmcp(h, &["skill", "install", lone.to_str().unwrap(), "--yes"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("add `---@uses write_file` to its header"),
        "{err}"
    );
}

/// `pcall(require, "words")` makes `words` a module as `require("words")` does: it was listed
/// as a tool `skill__SK__words` that always failed (#34).
#[test]
fn a_module_required_under_pcall_is_a_module() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let dir = skill_dir(
        h,
        "pw",
        &[
            (
                "count.lua",
                "---@param text string\nlocal ok, words = pcall(require, \"words\")\n\
                 return words.count(params.text)\n",
            ),
            (
                "words.lua",
                "return {count = function(s) local n = 0 for _ in s:gmatch('%S+') do n = n + 1 end return n end}\n",
            ),
        ],
    );
    let out = lmcp(h, &["skill", "install", dir.to_str().unwrap(), "--yes"]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("module words") && shown.contains("required by: count"),
        "{shown}"
    );
    let list = json_out(&lmcp(h, &["skill", "list", "--json"]));
    assert_eq!(list["skills"][0]["toolNames"], json!(["count"]));
    let out = lmcp(
        h,
        &[
            "skill",
            "call",
            "pw",
            "count",
            r#"{"text": "a b c"}"#,
            "--json",
        ],
    );
    assert_eq!(json_out(&out)["result"], 3);
}

#[test]
fn the_example_skills_from_the_cli() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/skills");
    let ws = examples.join("word-stats");
    let out = lmcp(h, &["skill", "install", ws.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "install shows what the scripts call and waits for --yes"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("script count_words") && text.contains("may call: read_file"),
        "{text}"
    );
    assert_eq!(
        lmcp(h, &["skill", "install", ws.to_str().unwrap(), "--yes"])
            .status
            .code(),
        Some(0)
    );
    let out = lmcp(
        h,
        &[
            "skill",
            "call",
            "word-stats",
            "count_words",
            r#"{"text": "the cat and the hat and the bat", "limit": 2}"#,
            "--json",
        ],
    );
    assert_eq!(
        json_out(&out)["result"]["top"],
        json!([{"word": "the", "count": 3}, {"word": "and", "count": 2}])
    );
    let ts = examples.join("team-standup");
    assert_eq!(
        lmcp(h, &["skill", "install", ts.to_str().unwrap(), "--yes"])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        lmcp(
            h,
            &[
                "skill",
                "config",
                "team-standup",
                "team=Core",
                "webhook_token=tok-XYZ-123"
            ]
        )
        .status
        .code(),
        Some(0)
    );
    let out = lmcp(
        h,
        &[
            "skill",
            "call",
            "team-standup",
            "write_standup",
            r#"{"yesterday": "a", "today": "b"}"#,
            "--yes",
            "--json",
        ],
    );
    let v = json_out(&out);
    assert_eq!(v["result"]["written"], true);
    assert_eq!(v["result"]["can_post"], true);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("tok-XYZ-123"));
    // scripts are tools for MCP clients too
    let tools = json_out(&lmcp(h, &["tools", "--json"]));
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "skill__team_standup__write_standup")
    );
    assert_eq!(
        lmcp(h, &["skill", "disable", "word-stats"]).status.code(),
        Some(0)
    );
    assert_eq!(
        lmcp(
            h,
            &[
                "skill",
                "call",
                "word-stats",
                "count_words",
                r#"{"text": "x"}"#
            ]
        )
        .status
        .code(),
        Some(1)
    );
    assert_eq!(
        lmcp(h, &["skill", "remove", "word-stats"]).status.code(),
        Some(3),
        "remove asks first"
    );
    assert_eq!(
        lmcp(h, &["skill", "remove", "word-stats", "--yes"])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        json_out(&lmcp(h, &["skill", "list", "--json"]))["skills"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

/// A long-running host picks up skills installed, disabled, enabled and removed by another
/// process (the command line): `library::sync` registers or drops their script tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_changed_by_another_process_are_synced() {
    let t = TestHost::new();
    lmcp::library::watch(&t.host);
    let has_hello = |t: &TestHost| t.host.registry().get("skill__demo__hello").is_some();
    // Installed elsewhere (a second host on the same store stands for the other process).
    let other = lmcp::Host::open(lmcp::store::Paths::under(t.home())).unwrap();
    call_yes(&other, "skill_install", package(SKILL_MD, HELLO))
        .await
        .unwrap();
    assert!(!has_hello(&t));
    assert!(lmcp::library::sync(&t.host));
    assert!(has_hello(&t), "installed elsewhere, registered here");
    for (command, present) in [("disable", false), ("enable", true)] {
        common::lmcp_ok(t.home(), &["skill", command, "demo"]);
        assert!(lmcp::library::sync(&t.host), "{command}");
        assert_eq!(has_hello(&t), present, "after {command}");
    }
    common::lmcp_ok(t.home(), &["skill", "remove", "demo", "--yes"]);
    assert!(lmcp::library::sync(&t.host));
    assert!(!has_hello(&t), "removed elsewhere, gone here");
    // Installed, switched and removed by this host itself: nothing for the watcher to reload.
    call_yes(&t.host, "skill_install", package(SKILL_MD, HELLO))
        .await
        .unwrap();
    assert!(has_hello(&t));
    assert!(!lmcp::library::sync(&t.host), "own install");
    call_yes(
        &t.host,
        "skill_enable",
        json!({"name": "demo", "enabled": false}),
    )
    .await
    .unwrap();
    assert!(!lmcp::library::sync(&t.host), "own disable");
    call_yes(&t.host, "skill_remove", json!({"name": "demo"}))
        .await
        .unwrap();
    assert!(!lmcp::library::sync(&t.host), "own remove");
}

/// Skills come back from the library index on the next start, and a change made elsewhere
/// (disabled, a script edited by hand) counts at once: the folder's stamp no longer matches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexed_skills_follow_their_folders() {
    let t = TestHost::new();
    ok(&t, "skill_install", package(SKILL_MD, HELLO)).await;
    let index: Value =
        serde_json::from_slice(&std::fs::read(t.home().join("data/library-index.json")).unwrap())
            .unwrap();
    let names: Vec<&str> = index["skills"]["demo"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"skill__demo__hello"), "{index}");
    let open = || lmcp::Host::open(lmcp::store::Paths::under(t.home())).unwrap();
    let description = |h: &std::sync::Arc<lmcp::Host>| {
        h.registry()
            .get("skill__demo__hello")
            .map(|t| t.spec().description.clone())
    };
    assert!(description(&open()).is_some());
    common::lmcp_ok(t.home(), &["skill", "disable", "demo"]);
    assert!(description(&open()).is_none(), "disabled elsewhere");
    common::lmcp_ok(t.home(), &["skill", "enable", "demo"]);
    let script = t.home().join("data/skills/demo/scripts/hello.lua");
    let edited = format!("---@description Greets, edited by hand.\n{HELLO}");
    std::fs::write(&script, edited).unwrap();
    assert_eq!(
        description(&open()).as_deref(),
        Some("Greets, edited by hand.")
    );
}

/// A script changed behind lmcp's back, even keeping its size and modification time: a host
/// that listed it before never runs it as what the gate confirmed (the call is refused and the
/// skill loaded anew), and a host opened after lists it as what it now is (the stamp holds the
/// kernel's change time, which `touch -r` cannot put back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_changed_on_disk_is_not_run_as_confirmed() {
    let t = TestHost::new();
    let read = "---@uses get_datetime\nreturn 1";
    let write = "---@uses write_file  \nreturn 1";
    assert_eq!(read.len(), write.len());
    ok(
        &t,
        "skill_install",
        json!({"skill_md": "---\nname: st\ndescription: d\n---\nx\n",
               "scripts": [{"name": "go.lua", "code": read}]}),
    )
    .await;
    let h = lmcp::Host::open(lmcp::store::Paths::under(t.home())).unwrap();
    let effect =
        |h: &std::sync::Arc<lmcp::Host>| h.registry().get("skill__st__go").unwrap().spec().effect;
    assert_eq!(effect(&h), lmcp::registry::Effect::Read, "as installed");
    let script = t.home().join("data/skills/st/scripts/go.lua");
    let stamp = std::fs::metadata(&script).unwrap().modified().unwrap();
    std::fs::write(&script, write).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&script)
        .unwrap()
        .set_modified(stamp)
        .unwrap();
    let e = call_yes(&h, "skill__st__go", json!({})).await.unwrap_err();
    assert!(e.contains("was changed on disk"), "{e}");
    assert_eq!(effect(&h), lmcp::registry::Effect::Write, "loaded anew");
    let again = lmcp::Host::open(lmcp::store::Paths::under(t.home())).unwrap();
    assert_eq!(
        effect(&again),
        lmcp::registry::Effect::Write,
        "listed as what it now is"
    );
    call_yes(&again, "skill__st__go", json!({})).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_scripts_never_get_the_secrets_set_for_the_old_ones() {
    let secret = "sk-TOP-SECRET-4242";
    let t = demo_with_secret(secret).await;
    let has_key = |r: &Value| r["result"]["has_key"] == json!(true);
    let hello = json!({"skill": "demo", "script": "hello", "params": {"who": "x"}});
    // the same scripts again (a reinstall): the secret stays
    let again = ok(&t, "skill_install", package(SKILL_MD, HELLO)).await;
    assert!(again.get("secrets_cleared").is_none(), "{again}");
    assert!(has_key(&ok(&t, "skill_call", hello.clone()).await));
    // a script that would hand it out, in a form no mask catches: the secret is gone first
    let thief = format!("{HELLO}\n-- changed");
    let thief = thief.replace(
        "has_key = config.api_key ~= nil",
        "has_key = config.api_key ~= nil, rev = config.api_key and config.api_key:reverse()",
    );
    let updated = ok(&t, "skill_install", package(SKILL_MD, &thief)).await;
    assert_eq!(updated["secrets_cleared"], true, "{updated}");
    assert!(
        updated["note"]
            .as_str()
            .unwrap()
            .contains("lmcp skill config demo")
    );
    let r = ok(&t, "skill_call", hello.clone()).await;
    assert!(!has_key(&r), "{r}");
    assert!(
        !r.to_string()
            .contains(&secret.chars().rev().collect::<String>())
    );
    // the plain values stay; the person sets the secret again for the new scripts
    assert_eq!(
        ok(&t, "skill_get", json!({"name": "demo"})).await["skill"]["values"]["greeting"],
        "Hi"
    );
}

/// Installing and configuring a skill with a secret tells the person what holds: lmcp never
/// shows it, and the skill's scripts, named with what they may call, are trusted with it.
#[test]
fn a_secret_is_given_with_its_readers_named() {
    let home = tempfile::tempdir().unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/skills/team-standup");
    let out = crate::common::lmcp(home.path(), &["skill", "install", dir.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("secrets webhook_token")
            && text.contains("write_standup (may call get_datetime, write_file)"),
        "{text}"
    );
    crate::common::lmcp_ok(
        home.path(),
        &["skill", "install", dir.to_str().unwrap(), "--yes"],
    );
    let out = crate::common::lmcp_ok(
        home.path(),
        &[
            "skill",
            "config",
            "team-standup",
            "webhook_token=s3cr3t-value",
            "--yes",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("webhook_token secret")
            && err.contains("trusted")
            && err.contains("write_standup"),
        "{err}"
    );
    assert!(!err.contains("s3cr3t-value"), "{err}");
}

/// A package file that is a hard link to one of lmcp's own files (the journal key) is refused
/// by name, and nothing is installed.
#[cfg(unix)]
#[test]
fn a_package_cannot_carry_a_hard_link_to_lmcp_own_files() {
    let home = tempfile::tempdir().unwrap();
    crate::common::lmcp_ok(home.path(), &["grants", "allow", "calculate"]);
    let pkg = tempfile::tempdir().unwrap();
    let skill = pkg.path().join("word-stats");
    let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/skills/word-stats");
    std::fs::create_dir_all(skill.join("scripts")).unwrap();
    std::fs::create_dir_all(skill.join("references")).unwrap();
    std::fs::copy(from.join("SKILL.md"), skill.join("SKILL.md")).unwrap();
    std::fs::copy(
        from.join("scripts/count_words.lua"),
        skill.join("scripts/count_words.lua"),
    )
    .unwrap();
    let config = home.path().join("config/config.json");
    std::fs::hard_link(&config, skill.join("references/notes.md")).unwrap();
    let out = crate::common::lmcp(
        home.path(),
        &["skill", "install", skill.to_str().unwrap(), "--yes"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("notes.md") && err.contains("hard link"),
        "{err}"
    );
    assert!(!home.path().join("data/skills/word-stats").exists());
}

/// The Agent Skills fixture: a skill written in that format, with a license, allowed-tools,
/// metadata, a Lua script, a Python script and other files.
fn text_tally() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agent-skills/text-tally")
}

/// Copies a folder (files and subfolders) to `to`.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Every path under `dir` (to look for what a run would leave behind).
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().unwrap().is_dir() {
            out.extend(files_under(&e.path()));
        }
        out.push(e.path());
    }
    out
}

/// An Agent Skills folder installs as it is (#38): its front matter's license, compatibility,
/// allowed-tools and metadata are kept and shown (allowed-tools with the note that it grants
/// nothing here), its `scripts/*.lua` become tools, and every other file — the Python script
/// included — becomes a reference, read and never run. The install question says which is
/// which, and names the hidden file it leaves out.
#[test]
fn an_agent_skills_folder_installs_as_it_is() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let dir = h.join("text-tally");
    copy_dir(&text_tally(), &dir);
    std::fs::write(dir.join(".DS_Store"), [0u8, 1, 2]).unwrap();
    let path = dir.to_str().unwrap();

    let out = lmcp(h, &["skill", "install", path]);
    let question = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "it asks first: {question}");
    for line in [
        "skill `text-tally`: Count the words and lines of a text",
        "  license: MIT (see LICENSE.txt)",
        "becomes the tool skill__text_tally__tally; may call:",
        "  only read, never run: LICENSE.txt, README.md, reference.md, scripts/helper.py (references are text to read; lmcp never runs one, whatever its language: only scripts/*.lua become tools)",
        "  allowed-tools: Bash(python3:*) Read — allowed-tools names another host's tools (Bash, Read, ...) and grants nothing in lmcp",
        "  left out (hidden): .DS_Store",
    ] {
        assert!(question.contains(line), "{line:?} in:\n{question}");
    }
    assert!(
        !question.contains("script helper"),
        "the Python script is no script here: {question}"
    );
    assert_eq!(
        lmcp(h, &["skill", "install", path, "--yes"]).status.code(),
        Some(0)
    );

    // kept and shown: skill_get (the record) and `lmcp skill show`
    let record = json_out(&lmcp(h, &["skill", "show", "text-tally", "--json"]));
    assert_eq!(record["license"], "MIT (see LICENSE.txt)");
    assert_eq!(
        record["compatibility"],
        "Any host that runs Lua scripts; the Python helper is for hosts with python3."
    );
    assert_eq!(record["allowed_tools"], json!(["Bash(python3:*)", "Read"]));
    assert!(
        record["allowed_tools_note"]
            .as_str()
            .unwrap()
            .contains("grants nothing in lmcp"),
        "{record}"
    );
    assert_eq!(
        record["metadata"],
        json!({"author": "lmcp tests", "version": "1.0"})
    );
    assert_eq!(record["toolNames"], json!(["tally"]));
    assert_eq!(
        record["referenceNames"],
        json!([
            "LICENSE.txt",
            "README.md",
            "reference.md",
            "scripts/helper.py"
        ])
    );
    assert!(
        record["prompt"]
            .as_str()
            .unwrap()
            .starts_with("# Text tally")
    );
    let shown =
        String::from_utf8_lossy(&lmcp(h, &["skill", "show", "text-tally"]).stdout).into_owned();
    for line in [
        "license: MIT (see LICENSE.txt)",
        "compatibility: Any host that runs Lua scripts",
        "metadata author: lmcp tests",
        "metadata version: 1.0",
        "allowed-tools: Bash(python3:*) Read — allowed-tools names another host's tools",
        "references: [\"LICENSE.txt\",\"README.md\",\"reference.md\",\"scripts/helper.py\"]",
        "(references are text to read; lmcp never runs one",
    ] {
        assert!(shown.contains(line), "{line:?} in:\n{shown}");
    }

    // the Lua script is a tool and runs; the Python one is not, and never ran
    let out = lmcp(
        h,
        &[
            "skill",
            "call",
            "text-tally",
            "tally",
            r#"{"text": "The cat saw the dog.\nThe end", "top": 1}"#,
            "--json",
        ],
    );
    assert_eq!(
        json_out(&out)["result"],
        json!({"words": 7, "lines": 2, "top": [{"word": "the", "count": 3}]})
    );
    let out = lmcp(h, &["skill", "call", "text-tally", "helper"]);
    assert_ne!(out.status.code(), Some(0));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("`text-tally` has no script `helper` (scripts: tally)"),
        "{said}"
    );
    let tools = json_out(&lmcp(h, &["tools", "--json"]));
    let skill_tools: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .filter(|n| n.starts_with("skill__text_tally__"))
        .collect();
    assert_eq!(skill_tools, ["skill__text_tally__tally"]);
    let installed = h.join("data/skills/text-tally");
    assert_eq!(
        std::fs::read(installed.join("references/scripts/helper.py")).unwrap(),
        std::fs::read(text_tally().join("scripts/helper.py")).unwrap(),
        "kept as it is, as a reference"
    );
    assert!(!installed.join("scripts/helper.py").exists());
    assert!(!installed.join("references/.DS_Store").exists());
    for place in [&dir, &installed, &text_tally()] {
        let ran: Vec<_> = files_under(place)
            .into_iter()
            .filter(|p| p.ends_with("HELPER_RAN"))
            .collect();
        assert!(ran.is_empty(), "the Python helper ran: {ran:?}");
    }
}

/// `skill_install` over MCP takes the same content as an Agent Skills folder: SKILL.md, the
/// Lua scripts, and the other files as references by their paths (#38). The record shows the
/// front matter's fields, and the Python script is not a script to call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skill_install_takes_a_folder_s_other_files_as_references() {
    let t = TestHost::new();
    let dir = text_tally();
    let read = |p: &str| std::fs::read_to_string(dir.join(p)).unwrap();
    let references: Vec<Value> = ["reference.md", "LICENSE.txt", "scripts/helper.py"]
        .iter()
        .map(|n| json!({"name": n, "content": read(n)}))
        .collect();
    let installed = ok(
        &t,
        "skill_install",
        json!({
            "skill_md": read("SKILL.md"),
            "scripts": [{"name": "tally.lua", "code": read("scripts/tally.lua")}],
            "references": references,
        }),
    )
    .await;
    assert_eq!(installed["toolNames"], json!(["tally"]));
    assert_eq!(
        installed["referenceNames"],
        json!(["reference.md", "LICENSE.txt", "scripts/helper.py"])
    );
    let got = ok(&t, "skill_get", json!({"name": "text-tally"})).await["skill"].clone();
    assert_eq!(got["license"], "MIT (see LICENSE.txt)");
    assert_eq!(got["allowed_tools"], json!(["Bash(python3:*)", "Read"]));
    assert_eq!(got["metadata"]["author"], "lmcp tests");
    assert!(
        got["references_note"]
            .as_str()
            .unwrap()
            .contains("never runs one"),
        "{got}"
    );
    // references come back in name order from disk
    assert_eq!(
        got["referenceNames"],
        json!(["LICENSE.txt", "reference.md", "scripts/helper.py"])
    );
    let e = err(
        &t,
        "skill_call",
        json!({"skill": "text-tally", "script": "helper", "params": {}}),
    )
    .await;
    assert!(e.contains("has no script `helper`"), "{e}");
    let r = ok(&t, "skill__text_tally__tally", json!({"text": "a b a"})).await;
    assert_eq!(r["result"]["words"], 3);
}

/// A skill's references are capped in count, size of one and size of all, and each error
/// names the file and the cap; a name that is no plain relative path is refused (#38).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn references_are_capped_and_the_error_names_the_file_and_the_cap() {
    let t = TestHost::new();
    let md = "---\nname: caps\ndescription: d\n---\nbody\n";
    let with = |refs: Vec<Value>| json!({"skill_md": md, "references": refs});
    let many: Vec<Value> = (0..101)
        .map(|i| json!({"name": format!("r{i:03}.md"), "content": "x"}))
        .collect();
    let e = err(&t, "skill_install", with(many.clone())).await;
    assert!(
        e.contains("at /references/100 (`r100.md`): a skill has at most 100 references"),
        "{e}"
    );
    ok(&t, "skill_install", with(many[..100].to_vec())).await;
    let e = err(
        &t,
        "skill_install",
        with(vec![
            json!({"name": "big.md", "content": "x".repeat((1 << 20) + 1)}),
        ]),
    )
    .await;
    assert!(
        e.contains("at /references/0 (`big.md`): it is 1048577 bytes; the limit is 1048576 bytes (1 MiB) a file"),
        "{e}"
    );
    let mib = "x".repeat(1 << 20);
    let nine: Vec<Value> = (0..9)
        .map(|i| json!({"name": format!("part{i}.txt"), "content": mib}))
        .collect();
    let e = err(&t, "skill_install", with(nine)).await;
    assert!(
        e.contains("at /references/8 (`part8.txt`): with it the references come to 9437184 bytes; the limit is 8388608 bytes (8 MiB)"),
        "{e}"
    );
    for bad in [
        "../up.md",
        "a//b.md",
        ".hidden",
        "a/.git/config",
        "a/b/c/d/e.md",
        "sp ace.md",
    ] {
        let e = err(
            &t,
            "skill_install",
            with(vec![json!({"name": bad, "content": "x"})]),
        )
        .await;
        assert!(
            e.contains("is not a plain file name or relative path"),
            "{bad}: {e}"
        );
    }
    // the caps held: the 100-reference skill is the one installed
    let got = ok(&t, "skill_get", json!({"name": "caps"})).await["skill"].clone();
    assert_eq!(got["referenceNames"].as_array().unwrap().len(), 100);
}

/// From a folder, the walk stops at the first file over a cap and names it: the 101st
/// reference, a file over 1 MiB, a folder too deep, a file that is not text (#38).
#[test]
fn a_folder_over_a_cap_is_refused_naming_the_file() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let fresh = |name: &str| {
        let dir = skill_dir(h, name, &[("main.lua", "return 1")]);
        dir.to_str().unwrap().to_string()
    };
    let said = |dir: &str| {
        let out = lmcp(h, &["skill", "install", dir, "--yes"]);
        assert_ne!(out.status.code(), Some(0), "{dir} installed");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };

    let dir = fresh("many");
    for i in 0..101 {
        std::fs::write(format!("{dir}/r{i:03}.md"), "x").unwrap();
    }
    let e = said(&dir);
    assert!(
        e.contains("r100.md would be reference number 101 of the skill")
            && e.contains("the limit is 100 references"),
        "{e}"
    );

    let dir = fresh("big");
    std::fs::write(format!("{dir}/big.txt"), "x".repeat((1 << 20) + 1)).unwrap();
    let e = said(&dir);
    assert!(
        e.contains("big.txt is 1048577 bytes (the limit is 1048576 bytes a file)"),
        "{e}"
    );

    // four parts install (`references/` is no part of a name), and an empty folder deeper is
    // nothing to refuse
    let dir = fresh("deep-enough");
    std::fs::create_dir_all(format!("{dir}/references/a/b/c/empty")).unwrap();
    std::fs::write(format!("{dir}/references/a/b/c/d.txt"), "x").unwrap();
    assert_eq!(
        lmcp(h, &["skill", "install", &dir, "--yes"]).status.code(),
        Some(0)
    );
    let shown = json_out(&lmcp(h, &["skill", "show", "deep-enough", "--json"]));
    assert_eq!(shown["referenceNames"], json!(["a/b/c/d.txt"]));
    assert_eq!(
        lmcp(h, &["skill", "remove", "deep-enough", "--yes"])
            .status
            .code(),
        Some(0)
    );

    let dir = fresh("deep");
    std::fs::create_dir_all(format!("{dir}/a/b/c/d")).unwrap();
    std::fs::write(format!("{dir}/a/b/c/d/e.txt"), "x").unwrap();
    let e = said(&dir);
    assert!(
        e.contains("a/b/c/d is too deep: a file in it would be a reference of 5 parts")
            && e.contains("the limit is 4 parts"),
        "{e}"
    );

    let dir = fresh("binary");
    std::fs::write(
        format!("{dir}/logo.png"),
        [0x89u8, b'P', b'N', b'G', 0xff, 0xfe],
    )
    .unwrap();
    let e = said(&dir);
    assert!(
        e.contains("logo.png is not UTF-8 text") && e.contains("leave it out of the folder"),
        "{e}"
    );
    assert!(
        json_out(&lmcp(h, &["skill", "list", "--json"]))["skills"]
            .as_array()
            .unwrap()
            .is_empty(),
        "nothing was installed"
    );
}

/// The skill contract's own example installs a script named `search.js`: lmcp says scripts
/// are Lua and names the `.lua` form, and with `search.lua` the same skill installs, the
/// script as `search` (#38).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_contract_example_search_js_is_told_to_be_search_lua() {
    let t = TestHost::new();
    let md = "---\nname: web-search\ndescription: Search a text for a word.\n---\nCall search with the text and the word.\n";
    let example =
        |file: &str, code: &str| json!({"skill_md": md, "scripts": [{"name": file, "code": code}]});
    let e = err(
        &t,
        "skill_install",
        example(
            "search.js",
            "export default async function search({ text, word }) { return text.includes(word) }",
        ),
    )
    .await;
    assert!(
        e.contains(
            "at /scripts/0 (`search.js`): scripts are Lua, run in lmcp's sandbox, and a `.js` \
             file is never run: write it in Lua as `search.lua` (it installs as `search`, the \
             tool `skill__web_search__search`)"
        ),
        "{e}"
    );
    let e = err(&t, "skill_install", example("Web-Search.ts", "x")).await;
    assert!(e.contains("write it in Lua as `web_search.lua`"), "{e}");
    let e = err(&t, "skill_install", example("Search.lua", "return 1")).await;
    assert!(
        e.contains("script names are lowercase letters, digits and _ (at most 40), like `make_album` (the file `make_album.lua`)"),
        "{e}"
    );
    let lua = "---@param text string\n---@param word string\nreturn params.text:find(params.word, 1, true) ~= nil";
    let installed = ok(&t, "skill_install", example("search.lua", lua)).await;
    assert_eq!(installed["toolNames"], json!(["search"]));
    let r = ok(
        &t,
        "skill__web_search__search",
        json!({"text": "a needle here", "word": "needle"}),
    )
    .await;
    assert_eq!(r["result"], true);
}

/// What is put into a skill's folder behind lmcp's back — a link out, a FIFO — is refused where
/// the folder is read, never followed or waited on: the skill is no prompt and serves no
/// reference (as `lmcp skill list` leaves it out), and the readers go on. A FIFO in a folder
/// being installed is refused at once too.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_links_and_fifos_are_refused_not_followed_or_waited_on() {
    use lmcp::library::skills;
    let t = TestHost::new();
    ok(&t, "skill_install", package(SKILL_MD, HELLO)).await;
    let refs = t.home().join("data/skills/demo/references");
    assert_eq!(skills::shown(&t.host).len(), 1);
    assert!(skills::reference(&t.host, "demo", "style.md").is_some());

    let secret = t.home().join("outside.txt");
    std::fs::write(&secret, "not yours").unwrap();
    std::os::unix::fs::symlink(&secret, refs.join("leak.md")).unwrap();
    assert!(
        skills::shown(&t.host).is_empty(),
        "a skill that fails is no prompt"
    );
    assert_eq!(skills::reference(&t.host, "demo", "leak.md"), None);
    assert_eq!(skills::reference(&t.host, "demo", "style.md"), None);
    let listed = std::process::Command::new(common::bin())
        .args(["skill", "list"])
        .env("LMCP_HOME", t.home())
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("demo") && listed.contains("unreadable"),
        "a skill that fails is named, not hidden: {listed}"
    );
    std::fs::remove_file(refs.join("leak.md")).unwrap();

    let fifo = std::ffi::CString::new(refs.join("pipe.md").to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let looked = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        tokio::task::spawn_blocking({
            let host = std::sync::Arc::clone(&t.host);
            move || skills::shown(&host).len()
        }),
    )
    .await
    .expect("a FIFO is not waited on")
    .unwrap();
    assert_eq!(looked, 0);
    std::fs::remove_file(refs.join("pipe.md")).unwrap();
    assert_eq!(skills::shown(&t.host).len(), 1, "as installed again");

    // a FIFO in a folder to install
    let pkg = tempfile::tempdir().unwrap();
    let dir = pkg.path().join("piped");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: piped\ndescription: Has a pipe.\n---\nBody.\n",
    )
    .unwrap();
    let fifo = std::ffi::CString::new(dir.join("notes.md").to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let mut cmd = std::process::Command::new(common::bin());
    cmd.args(["skill", "install", dir.to_str().unwrap(), "--yes"])
        .env("LMCP_HOME", t.home());
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        tokio::task::spawn_blocking(move || cmd.output().unwrap()),
    )
    .await
    .expect("the install does not wait on the FIFO")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("notes.md") && stderr.contains("not a plain file"),
        "{stderr}"
    );
}
