//! `lmcp run FILE.lua` end to end: parameters, previews, --yes, exit codes, and the shipped
//! example scripts.

use serde_json::json;

use crate::common::{self, json_out, lmcp};

fn write(dir: &std::path::Path, name: &str, src: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, src).unwrap();
    p.display().to_string()
}

fn example(name: &str) -> String {
    format!("{}/examples/scripts/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn runs_a_script_with_params() {
    let home = tempfile::tempdir().unwrap();
    let out = lmcp(
        home.path(),
        &["run", &example("squares.lua"), "--param", "n=4", "--json"],
    );
    assert_eq!(out.status.code(), Some(0));
    let v = json_out(&out);
    assert_eq!(v["result"], json!({"total": 30, "even_squares": [4, 16]}));
    assert_eq!(v["output"], "the sum of the first 4 squares is 30\n");
    let out = lmcp(home.path(), &["run", &example("squares.lua")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("the sum of the first 10 squares is 385") && text.contains("\"total\": 385"),
        "{text}"
    );
}

#[test]
fn without_confirmation_writes_are_previewed_and_listed() {
    let home = tempfile::tempdir().unwrap();
    let out = lmcp(home.path(), &["run", &example("notes.lua")]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("previewed 3 state-changing call(s)"),
        "{text}"
    );
    assert!(
        text.contains("write_file (write): write 29 bytes to notes/ideas.md"),
        "{text}"
    );
    assert!(!home.path().join("data/workspace/notes").exists());
    let v = json_out(&lmcp(
        home.path(),
        &["run", &example("notes.lua"), "--yes", "--json"],
    ));
    assert_eq!(v["result"]["written"].as_array().unwrap().len(), 3);
    assert_eq!(v["previews"], json!([]));
    assert!(home.path().join("data/workspace/notes/todo.md").exists());
    // run again: the notes exist and are kept
    let v = json_out(&lmcp(
        home.path(),
        &["run", &example("notes.lua"), "--yes", "--json"],
    ));
    assert_eq!(v["result"]["kept"].as_array().unwrap().len(), 3);
}

#[test]
fn word_count_reads_a_file_or_a_text() {
    let home = tempfile::tempdir().unwrap();
    let out = lmcp(
        home.path(),
        &[
            "run",
            &example("word_count.lua"),
            "-p",
            "text=b a b c b a",
            "-p",
            "limit=2",
            "--json",
        ],
    );
    assert_eq!(
        json_out(&out)["result"],
        json!({"total_words": 6, "top": [{"word": "b", "count": 3}, {"word": "a", "count": 2}]})
    );
    let out = lmcp(
        home.path(),
        &[
            "run",
            &example("word_count.lua"),
            "-p",
            "path=missing.txt",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        json_out(&out)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot read missing.txt")
    );
}

#[test]
fn exit_codes_and_messages() {
    let home = tempfile::tempdir().unwrap();
    let d = home.path();
    let code = |args: &[&str]| lmcp(d, args).status.code().unwrap();
    let bad_header = write(d, "h.lua", "---@param x strng\nreturn 1");
    let out = lmcp(d, &["run", &bad_header]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad program header: h.lua:1: "));
    let needs = write(d, "n.lua", "---@param x integer\nreturn params.x");
    let out = lmcp(d, &["run", &needs]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing required parameter `x`"));
    assert_eq!(code(&["run", &needs, "-p", "x=nope"]), 2);
    assert_eq!(code(&["run", &needs, "-p", "y=1"]), 2);
    assert_eq!(
        json_out(&lmcp(d, &["run", &needs, "-p", "x=7", "--json"]))["result"],
        json!(7)
    );
    let boom = write(d, "b.lua", "print('before') error('boom')");
    let out = lmcp(d, &["run", &boom]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("b.lua:1: boom"));
    let v = json_out(&lmcp(d, &["run", &boom, "--json"]));
    assert_eq!(v["outcome"], "failed");
    assert_eq!(v["output"], "before\n");
    // a script that does not compile is refused before its run, like a save
    let syntax = write(d, "s.lua", "if then");
    assert_eq!(code(&["run", &syntax]), 2);
    let forever = write(d, "f.lua", "while true do end");
    let out = lmcp(d, &["run", &forever, "--timeout", "0.3"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("timed out after 300ms"));
    let header_timeout = write(d, "t.lua", "---@timeout 0.2\nwhile true do end");
    assert!(
        String::from_utf8_lossy(&lmcp(d, &["run", &header_timeout]).stderr)
            .contains("timed out after 200ms")
    );
    assert_eq!(code(&["run", "/no/such/file.lua"]), 1);
    let not_lua = write(d, "x.txt", "return 1");
    assert_eq!(code(&["run", &not_lua]), 2);
    // denied calls surface as catchable errors, and uncaught they fail the run as refused (3)
    assert_eq!(code(&["grants", "deny", "calculate"]), 0);
    let denied = write(d, "d.lua", "return tools.calculate{expression = '1'}");
    let out = lmcp(d, &["run", &denied]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("denied: `calculate` was denied"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_out(&lmcp(d, &["run", &denied, "--json"]));
    assert_eq!(v["error"]["class"], "script_error", "{v}");
    assert_eq!(v["error"]["details"]["refusal"], "denied", "{v}");
    // how a script ends after catching the refusal (or making up one), and the exit code
    for (name, source, expected) in [
        // caught and raised again it is still the refusal
        (
            "a.lua",
            "local ok, e = pcall(tools.calculate, {expression = '1'})\nerror(e)",
            3,
        ),
        // caught and replaced, a script error
        (
            "r.lua",
            "local ok, e = pcall(tools.calculate, {expression = '1'})\nerror('gave up')",
            1,
        ),
        // a table that only looks like a tool's error is the script's own
        ("f2.lua", "error({code = 'denied', message = 'no'})", 1),
        // the code is the gate's, whatever the script writes into the error
        (
            "l.lua",
            "local ok, e = pcall(tools.calculate, {expression = '1'})\ne.code = 'other'\nerror(e)",
            3,
        ),
        (
            "p.lua",
            "local ok, e = pcall(tools.read_file, {path = 'none.txt'})\ne.code = 'denied'\nerror(e)",
            1,
        ),
    ] {
        let script = write(d, name, source);
        assert_eq!(code(&["run", &script]), expected, "{name}: {source}");
    }
    // an error a `__close` raises while the refusal unwinds replaces it
    for (name, raised) in [("c1.lua", "'in close'"), ("c2.lua", "{code = 'x'}")] {
        let closing = write(
            d,
            name,
            &format!(
                "local t <close> = setmetatable({{}}, {{__close = function() error({raised}) end}})\n\
                 tools.calculate{{expression = '1'}}"
            ),
        );
        assert_eq!(code(&["run", &closing]), 1, "{name}");
    }
    // refused inside programs: a Lua tool, a script over it, and a JSON-step tool
    let lua_tool = json!({"name": "user_sum", "description": "Adds through calculate",
        "lua": "---@uses calculate\nreturn tools.calculate{expression = '1+1'}"});
    let steps_tool = json!({"name": "user_step", "description": "Adds by a step",
        "steps": [{"id": "s", "tool": "calculate", "arguments": {"expression": "1+1"}}]});
    for def in [&lua_tool, &steps_tool] {
        assert_eq!(
            code(&["call", "custom_tool_create", &def.to_string(), "--yes"]),
            0,
            "{def}"
        );
    }
    for tool in ["user_sum", "user_step"] {
        assert_eq!(code(&["call", tool, "{}", "--yes"]), 3, "{tool}");
    }
    let over = write(d, "o.lua", "return tools.user_sum{}");
    let out = lmcp(d, &["run", &over, "--yes"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // an unavailable tool is refused too (3), from a script as from `lmcp call`
    assert_eq!(code(&["tool", "disable", "get_datetime"]), 0);
    assert_eq!(code(&["call", "get_datetime", "{}"]), 3);
    let unavailable = write(d, "u.lua", "return tools.get_datetime{}");
    let v = json_out(&lmcp(d, &["run", &unavailable, "--json"]));
    assert_eq!(v["error"]["details"]["refusal"], "unavailable", "{v}");
    assert_eq!(code(&["run", &unavailable]), 3);
    // a failure that is no refusal stays a failure
    assert_eq!(code(&["grants", "allow", "calculate"]), 0);
    let failing = json!({"name": "user_bad", "description": "Fails",
        "lua": "---@uses calculate\nreturn tools.calculate{expression = '1+'}"});
    assert_eq!(
        code(&["call", "custom_tool_create", &failing.to_string(), "--yes"]),
        0
    );
    assert_eq!(code(&["call", "user_bad", "{}", "--yes"]), 1);
}

#[test]
fn types_are_generated_from_the_registry() {
    let home = tempfile::tempdir().unwrap();
    let out = lmcp(home.path(), &["types"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("---@meta") && text.contains("function tools.write_file(args) end"));
    let file = home.path().join("meta.lua");
    assert_eq!(
        lmcp(home.path(), &["types", "-o", file.to_str().unwrap()])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    // what a checker needs besides the tools: a skill's config, the header's array and object,
    // previews from state-changing tools, and the sandbox's os with no io
    for wanted in [
        "config = {}",
        "---@alias array any[]",
        "---@alias object table<string, any>",
        "---@return write_file_result|Preview",
        "---@return calculate_result\n",
        "function os.clock() end",
        "---@deprecated The sandbox has no io library",
        "---@deprecated Not in the sandbox: pass values as params",
    ] {
        assert!(text.contains(wanted), "{wanted}");
    }
}

/// `lmcp types -o DIR --config`: the definitions and the bundled modules in DIR, and the
/// editor configs in the current folder pointing at it; a config with other settings is left
/// alone unless --force.
#[test]
fn types_for_an_editor_project() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(common::bin())
            .args(args)
            .current_dir(project.path())
            .env("LMCP_HOME", home.path())
            .output()
            .unwrap()
    };
    let out = run(&["types", "-o", ".lmcp", "--config"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for file in [
        "lmcp.lua",
        "tbl.lua",
        "retry.lua",
        "inspect.lua",
        "test.lua",
    ] {
        assert!(project.path().join(".lmcp").join(file).is_file(), "{file}");
    }
    let emmy: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(project.path().join(".emmyrc.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(emmy["workspace"]["library"][0], ".lmcp");
    assert_eq!(emmy["runtime"]["version"], "Lua5.4");
    assert_eq!(
        emmy["diagnostics"]["disable"][0], "annotation-usage-error",
        "program headers are accepted"
    );
    let luals: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(project.path().join(".luarc.json")).unwrap())
            .unwrap();
    assert_eq!(luals["workspace.library"][0], ".lmcp");
    assert_eq!(luals["runtime.builtin"]["io"], "disable");
    // again: same files, nothing to refuse
    assert_eq!(
        run(&["types", "-o", ".lmcp", "--config"]).status.code(),
        Some(0)
    );
    // a config of the person's own is not replaced without --force
    std::fs::write(project.path().join(".luarc.json"), "{\"mine\": true}").unwrap();
    let out = run(&["types", "-o", ".lmcp", "--config"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));
    assert_eq!(
        std::fs::read_to_string(project.path().join(".luarc.json")).unwrap(),
        "{\"mine\": true}"
    );
    assert_eq!(
        run(&["types", "-o", ".lmcp", "--config", "--force"])
            .status
            .code(),
        Some(0)
    );
}

/// A script killed with SIGKILL mid-run is resumed from its journal: the writes it made are
/// not made again (their files, removed meanwhile, stay gone), the rest run, and the result is
/// the one a whole run gives. A changed script is not resumed; nor is a run in private mode.
#[cfg(unix)]
#[test]
fn a_killed_script_resumes_without_repeating_its_steps() {
    let home = tempfile::tempdir().unwrap();
    let (h, work) = (home.path(), home.path().join("work"));
    std::fs::create_dir_all(&work).unwrap();
    common::lmcp_ok(h, &["roots", "add", work.to_str().unwrap()]);
    let src = format!(
        "---@param pause? boolean\n\
         local n = 0\n\
         for i = 1, 5 do\n\
           local r = tools.write_file{{path = '{}/f' .. i .. '.txt', content = 'x' .. i}}\n\
           n = n + r.bytes\n\
           if i == 3 and params.pause then sleep(30) end\n\
         end\n\
         return n",
        work.display()
    );
    let script = write(h, "steps.lua", &src);
    let mut child = common::spawn(h, &["run", &script, "-p", "pause=true", "--yes"]);
    let third = work.join("f3.txt");
    let started = std::time::Instant::now();
    while !third.exists() {
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    // while it runs, it is listed as running, and a resume of it is refused
    let runs = json_out(&lmcp(h, &["runs", "--json"]));
    assert_eq!(runs[0]["state"], "running", "{runs}");
    let id = runs[0]["run"].as_str().unwrap().to_string();
    let out = lmcp(h, &["run", &script, "--yes", "--resume", &id]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("in use by another lmcp process"));
    child.kill().unwrap();
    child.wait().unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode =
            |p: std::path::PathBuf| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(h.join(format!("data/runs/{id}.jsonl"))), 0o600);
        assert_eq!(mode(h.join("config/journal.key")), 0o600);
    }
    let runs = json_out(&lmcp(h, &["runs", "--json"]));
    assert_eq!(runs[0]["state"], "unfinished", "{runs}");
    assert_eq!(runs[0]["last_step"]["outcome"], "done", "{runs}");
    let id = runs[0]["run"].as_str().unwrap().to_string();
    for i in 1..=3 {
        std::fs::remove_file(work.join(format!("f{i}.txt"))).unwrap();
    }
    let out = lmcp(h, &["run", &script, "--yes", "--resume", &id, "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json_out(&out)["result"], 10, "the recorded results count");
    let made: Vec<bool> = (1..=5)
        .map(|i| work.join(format!("f{i}.txt")).exists())
        .collect();
    assert_eq!(
        made,
        [false, false, false, true, true],
        "steps 1-3 not run again"
    );
    let shown = json_out(&lmcp(h, &["runs", "show", &id, "--json"]));
    assert_eq!(shown["state"], "done");
    assert_eq!(shown["resumed"], 1);
    assert_eq!(shown["step_list"].as_array().unwrap().len(), 5);

    // the script changed: not resumed
    std::fs::write(&script, format!("{src}\n-- changed")).unwrap();
    let out = lmcp(h, &["run", &script, "--yes", "--resume", &id]);
    assert_eq!(out.status.code(), Some(1), "refused");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("changed since run"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // private mode keeps no journal, so it has nothing to resume
    common::lmcp_ok(h, &["mode", "private", "on"]);
    let out = lmcp(h, &["run", &script, "--yes", "--resume", &id]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("private mode keeps no run journals"));
}

/// A step the run died in (begun, no outcome) of a tool that is not idempotent is never run
/// again silently: the resume stops there unless the person says --retry-unknown; and
/// arguments that changed stop it too.
#[test]
fn a_step_of_unknown_outcome_needs_retry_unknown() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    // workspace_create is not idempotent (each call makes another workspace)
    let src = "---@param text? string\n\
               for i = 1, 3 do\n\
                 tools.workspace_create{name = (params.text or 'same') .. i}\n\
               end\n\
               return 'ok'";
    let script = write(h, "unknown.lua", src);
    common::lmcp_ok(h, &["run", &script, "--yes"]);
    let id = json_out(&lmcp(h, &["runs", "--json"]))[0]["run"]
        .as_str()
        .unwrap()
        .to_string();
    // the state a kill inside step 2 leaves: its start synced, nothing after it
    let journal = h.join(format!("data/runs/{id}.jsonl"));
    let text = std::fs::read_to_string(&journal).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .take_while(|l| !(l.contains("\"step\":2") && l.contains("\"result\"")))
        .collect();
    std::fs::write(&journal, kept.join("\n") + "\n").unwrap();
    let shown = json_out(&lmcp(h, &["runs", "show", &id, "--json"]));
    assert_eq!(shown["step_list"][1]["outcome"], "unknown", "{shown}");
    let out = lmcp(h, &["run", &script, "--yes", "--resume", &id]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("may or may not have happened") && err.contains("--retry-unknown"),
        "{err}"
    );
    // other inputs: the first step no longer matches
    let out = lmcp(
        h,
        &[
            "run",
            &script,
            "--yes",
            "--resume",
            &id,
            "--retry-unknown",
            "-p",
            "text=other",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("stopped at its state-changing call 1"));
    let out = lmcp(
        h,
        &["run", &script, "--yes", "--resume", &id, "--retry-unknown"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // the first run made three; the resume hands step 1 back and runs steps 2 (again) and 3
    // (whose lines went with the cut): five in all, one `same1`
    let listed = json_out(&lmcp(h, &["call", "workspace_list", "{}", "--json"]));
    let names: Vec<&str> = listed["result"]["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 5, "{listed}");
    assert_eq!(names.iter().filter(|n| **n == "same1").count(), 1);
}

/// A call cut short by the run's deadline may have done its work: its outcome is unknown, so a
/// resume asks before running it again (it was recorded as failed, and ran twice). A recipe run
/// inside a journaled script journals into the script's run, not a run of its own.
#[test]
fn a_call_cut_short_is_unknown_and_nested_recipes_share_the_run() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let script = write(
        h,
        "slow.lua",
        "---@uses run_command\n\
         tools.run_command{program = 'sleep', args = {'5'}}\n\
         return 1",
    );
    let out = lmcp(h, &["run", &script, "--yes", "--timeout", "1"]);
    assert_eq!(out.status.code(), Some(1), "timed out");
    let runs = json_out(&lmcp(h, &["runs", "--json"]));
    assert_eq!(runs[0]["last_step"]["outcome"], "unknown", "{runs}");
    let id = runs[0]["run"].as_str().unwrap().to_string();
    let out = lmcp(h, &["run", &script, "--yes", "--resume", &id]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--retry-unknown"));

    let nested = write(
        h,
        "nested.lua",
        "---@uses recipe_run\n\
         return tools.recipe_run{confirm = true, manifest = {name = 'inner', description = 'd', \
           schema_version = 1, steps = {{tool = 'workspace_create', args = {name = 'w'}}}}}.run",
    );
    let before = json_out(&lmcp(h, &["runs", "--json"]))
        .as_array()
        .unwrap()
        .len();
    let out = lmcp(h, &["run", &nested, "--yes", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs = json_out(&lmcp(h, &["runs", "--json"]));
    assert_eq!(
        runs.as_array().unwrap().len(),
        before + 1,
        "one run: {runs}"
    );
    assert_eq!(runs[0]["last_step"]["tool"], "workspace_create", "{runs}");
}

/// A recorded result changed in the journal after it was written is not handed back: results
/// are sealed under the installation's key.
#[test]
fn a_forged_result_in_a_journal_is_not_replayed() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let script = write(
        h,
        "one.lua",
        "return tools.workspace_create{name = 'w'}.name",
    );
    common::lmcp_ok(h, &["run", &script, "--yes"]);
    let id = json_out(&lmcp(h, &["runs", "--json"]))[0]["run"]
        .as_str()
        .unwrap()
        .to_string();
    // resumed as it is: the result comes back without running
    let out = lmcp(h, &["run", &script, "--yes", "--resume", &id, "--json"]);
    assert_eq!(
        json_out(&out)["result"],
        "w",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let journal = h.join(format!("data/runs/{id}.jsonl"));
    let text = std::fs::read_to_string(&journal).unwrap();
    assert!(text.contains("\"name\":\"w\""));
    std::fs::write(
        &journal,
        text.replace("\"name\":\"w\"", "\"name\":\"forged\""),
    )
    .unwrap();
    let out = lmcp(h, &["run", &script, "--yes", "--resume", &id]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("changed after it was written"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A confirmed call of a state-changing custom tool keeps a journal of its own (its id in the
/// result); inside a journaled script its calls go to the script's journal; a read-only tool,
/// a preview and private mode keep none.
#[test]
fn custom_tools_called_as_tools_keep_journals() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let writer = write(
        h,
        "writer.lua",
        "---@name user_two_writes\n---@description Writes two files.\n---@uses write_file\n\
         tools.write_file{path = 'a.txt', content = 'a', overwrite = true}\n\
         tools.write_file{path = 'b.txt', content = 'b', overwrite = true}\n\
         return 'written'",
    );
    common::lmcp_ok(h, &["tool", "create", &writer]);
    let reader = write(
        h,
        "reader.lua",
        "---@name user_reads\n---@description Reads the time.\n---@uses get_datetime\n\
         return tools.get_datetime{}.iso8601",
    );
    common::lmcp_ok(h, &["tool", "create", &reader]);
    let runs = |h: &std::path::Path| json_out(&lmcp(h, &["runs", "--json"]));

    let called = json_out(&common::lmcp_ok(
        h,
        &["--json", "call", "user_two_writes", "{}", "--yes"],
    ));
    let id = called["result"]["run"]
        .as_str()
        .expect("the run id")
        .to_string();
    let listed = runs(h);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["program"], "user_two_writes");
    assert_eq!(listed[0]["state"], "done");
    let shown = json_out(&lmcp(h, &["runs", "show", &id, "--json"]));
    let steps = shown["step_list"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{shown}");
    assert!(
        steps
            .iter()
            .all(|s| s["tool"] == "write_file" && s["outcome"] == "done")
    );

    // read-only, previewed: no journal
    common::lmcp_ok(h, &["call", "user_reads", "{}", "--yes"]);
    let out = lmcp(h, &["--json", "call", "user_two_writes", "{}"]);
    assert!(json_out(&out).get("run").is_none());
    assert_eq!(runs(h).as_array().unwrap().len(), 1);

    // inside a journaled script: one journal, the script's, with the tool's two writes
    let script = write(h, "outer.lua", "return tools.user_two_writes{}.result");
    common::lmcp_ok(h, &["run", &script, "--yes"]);
    let listed = runs(h);
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
    let outer = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run"] != id.as_str())
        .unwrap();
    assert!(
        outer["program"].as_str().unwrap().contains("outer"),
        "{outer}"
    );
    let shown = json_out(&lmcp(
        h,
        &["runs", "show", outer["run"].as_str().unwrap(), "--json"],
    ));
    assert_eq!(shown["step_list"].as_array().unwrap().len(), 2, "{shown}");

    // private mode: none
    common::lmcp_ok(h, &["mode", "private", "on"]);
    common::lmcp_ok(h, &["call", "user_two_writes", "{}", "--yes"]);
    assert_eq!(runs(h).as_array().unwrap().len(), 2);
}
