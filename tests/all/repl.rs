//! The REPL end to end, through a pseudo-terminal: multi-line input, completion, a confirmation
//! prompt, Ctrl-C during an endless loop, meta-commands and history.

use std::process::Command;

use rexpect::session::{PtySession, spawn_command};

use crate::common;

fn repl(home: &std::path::Path) -> PtySession {
    let mut cmd = Command::new(common::bin());
    cmd.arg("repl").env("LMCP_HOME", home).env("TERM", "xterm");
    let mut p = spawn_command(cmd, Some(15_000)).expect("spawn the REPL");
    p.exp_string("lmcp> ").expect("the first prompt");
    p
}

/// What the line editor writes as it starts reading a line, before its prompt: bracketed paste
/// turned back on.
const READING: &str = "\u{1b}[?2004h";

/// Sends a line, waits for `expect` in the output, then for the next prompt, so nothing is
/// typed before the line editor reads again (it flushes typed-ahead input). The editor also
/// redraws the prompt with the line while it takes the line in (a long line wraps), so the
/// REPL's own prompts count only after [`READING`]: matching a redrawn one sent the next line
/// too early, and it was lost.
fn cmd(p: &mut PtySession, line: &str, expect: &str, prompt: &str) {
    p.send_line(line).unwrap();
    if !expect.is_empty() {
        p.exp_string(expect)
            .unwrap_or_else(|e| panic!("{line}: waiting for {expect:?}: {e}"));
    }
    if prompt == "lmcp> " || prompt == ">> " {
        p.exp_string(READING)
            .unwrap_or_else(|e| panic!("{line}: waiting for the editor to read again: {e}"));
    }
    p.exp_string(prompt)
        .unwrap_or_else(|e| panic!("{line}: waiting for the prompt: {e}"));
}

#[test]
fn a_session_end_to_end() {
    let home = tempfile::tempdir().unwrap();
    let mut p = repl(home.path());
    let main = "lmcp> ";

    // an expression prints its value
    cmd(
        &mut p,
        "tools.calculate{expression = '6*7'}",
        "value = 42",
        main,
    );

    // multi-line input continues on >>
    cmd(&mut p, "total = 0", "", main);
    cmd(&mut p, "for i = 1, 3 do", "", ">> ");
    cmd(&mut p, "total = total + i", "", ">> ");
    cmd(&mut p, "end", "", main);
    cmd(&mut p, "total * 100", "600", main);

    // completion of a tool name, then of an argument name
    p.send("tools.calcu\t").unwrap();
    p.flush().unwrap();
    p.exp_string("tools.calculate").unwrap();
    p.send("{expr\t").unwrap();
    p.flush().unwrap();
    p.exp_string("expression = ").unwrap();
    cmd(&mut p, "'2^8'}", "value = 256", main);

    // a state-changing call asks, default no
    cmd(
        &mut p,
        "tools.write_file{path = 'x.txt', content = 'hello'}",
        "",
        "Allow? [y/N]",
    );
    cmd(&mut p, "", "a person declined", main);
    assert!(!home.path().join("data/workspace/x.txt").exists());
    cmd(
        &mut p,
        "tools.write_file{path = 'x.txt', content = 'hello'}",
        "",
        "Allow? [y/N]",
    );
    cmd(&mut p, "y", "bytes = 5", main);
    assert_eq!(
        std::fs::read_to_string(home.path().join("data/workspace/x.txt")).unwrap(),
        "hello"
    );

    // Ctrl-C stops a running chunk and the session goes on
    // (the chunk prints first, so Ctrl-C is sent once it is surely running)
    p.send_line("print('spin' .. 'ning') while true do end")
        .unwrap();
    p.exp_string("spinning").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    p.send_control('c').unwrap();
    p.exp_string("cancelled").unwrap();
    p.exp_string(main).unwrap();
    cmd(&mut p, "total", "6", main);

    // meta-commands
    cmd(&mut p, "/confirm preview", "confirmation: preview", main);
    cmd(
        &mut p,
        "tools.write_file{path = 'y.txt', content = 'no'}",
        "previewed, not run: write_file",
        main,
    );
    cmd(&mut p, "/doc list_dir", "List a folder (read)", main);
    cmd(&mut p, "/nope", "unknown command `/nope`", main);

    // errors are shown and the session goes on
    cmd(&mut p, "error('boom')", "stdin:1: boom", main);

    // Ctrl-D leaves
    p.send_control('d').unwrap();
    p.exp_eof().unwrap();
    let history = std::fs::read_to_string(home.path().join("data/repl_history.txt")).unwrap();
    assert!(history.contains("total * 100"), "{history}");
}

/// `/confirm yes` confirms state-changing calls, but a grant that says ask still asks.
#[test]
fn confirm_yes_still_asks_under_an_ask_grant() {
    let home = tempfile::tempdir().unwrap();
    common::lmcp_ok(home.path(), &["grants", "ask", "write_file"]);
    let mut p = repl(home.path());
    let main = "lmcp> ";
    cmd(&mut p, "/confirm yes", "ask grants still ask", main);
    p.send_line("tools.write_file{path = 'a.txt', content = 'x'}")
        .unwrap();
    p.exp_string("Allow? [y/N]").expect("the ask grant asks");
    cmd(&mut p, "n", "declined", main);
    assert!(!home.path().join("data/workspace/a.txt").exists());
}

/// A coroutine stopped by Ctrl-C keeps its to-be-closed values unclosed: Lua would close them
/// with hooks off in that coroutine, where a looping `__close` could never be stopped. Closing
/// it on a later line (which has no deadline) is refused instead of hanging the session.
#[test]
fn a_stopped_coroutine_is_never_closed() {
    let home = tempfile::tempdir().unwrap();
    let mut p = repl(home.path());
    let main = "lmcp> ";
    cmd(
        &mut p,
        "co = coroutine.create(function() local x <close> = setmetatable({}, \
         {__close = function() while true do end end}) print('spin' .. 'ning') while true do end end)",
        "",
        main,
    );
    p.send_line("coroutine.resume(co)").unwrap();
    p.exp_string("spinning").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    p.send_control('c').unwrap();
    p.exp_string("cancelled").unwrap();
    p.exp_string(main).unwrap();
    cmd(
        &mut p,
        "coroutine.close(co)",
        "cannot close a coroutine stopped by its run's deadline or cancellation",
        main,
    );
    cmd(&mut p, "coroutine.status(co)", "dead", main);
    p.send_control('d').unwrap();
    p.exp_eof().unwrap();
}

/// Ctrl-C while a confirmation is open cancels the call and withdraws the question: the next
/// line typed is the REPL's, not swallowed by a reader the question left behind.
#[test]
fn ctrl_c_withdraws_an_open_question() {
    let home = tempfile::tempdir().unwrap();
    let mut p = repl(home.path());
    let main = "lmcp> ";
    cmd(
        &mut p,
        "tools.write_file{path = 'q.txt', content = 'x'}",
        "",
        "Allow? [y/N]",
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    p.send_control('c').unwrap();
    p.exp_string("cancelled").unwrap();
    p.exp_string(main).unwrap();
    cmd(&mut p, "6 * 7", "42", main);
    assert!(!home.path().join("data/workspace/q.txt").exists());
    p.send_control('d').unwrap();
    p.exp_eof().unwrap();
}

/// What a session tried becomes a recipe and a tool (`/history`, `/drop`, `/params`, `/save`),
/// shown before it is saved through the gate; both then run from the CLI and over MCP with the
/// session's result, and with a parameter changed.
#[test]
fn a_session_is_saved_as_a_recipe_and_a_tool() {
    let home = tempfile::tempdir().unwrap();
    let mut p = repl(home.path());
    let main = "lmcp> ";
    cmd(&mut p, "n = 6", "", main);
    cmd(&mut p, "n + 1", "7", main);
    cmd(&mut p, "error('not kept')", "not kept", main);
    cmd(&mut p, "local extra = 100", "", main);
    cmd(
        &mut p,
        "tools.calculate{expression = n .. '*7'}.value",
        "42",
        main,
    );
    cmd(
        &mut p,
        "/history",
        "[4] tools.calculate{expression = n .. '*7'}.value   -- calls calculate",
        main,
    );
    cmd(&mut p, "/drop 9", "there is no chunk 9", main);
    cmd(
        &mut p,
        "/drop 3",
        "dropped chunk 3: local extra = 100",
        main,
    );
    cmd(&mut p, "/params nope", "no chunk sets `nope`", main);
    cmd(&mut p, "/params n", "n integer=6 (chunk 1)", main);

    // -o writes the program instead of saving it
    let file = home.path().join("tried.lua");
    cmd(
        &mut p,
        &format!(
            "/save recipe tried_calc -o {} Multiplies n by seven",
            file.display()
        ),
        "wrote",
        main,
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.starts_with(
            "---@name tried_calc\n---@description Multiplies n by seven\n\
             ---@param n integer=6 Set to 6 in the session\n---@uses calculate\n"
        ),
        "{text}"
    );
    assert!(
        !text.contains("error("),
        "a failed chunk is not kept: {text}"
    );
    assert!(
        !text.contains("extra"),
        "a dropped chunk is left out: {text}"
    );
    assert!(
        text.ends_with("\nreturn tools.calculate{expression = n .. '*7'}.value\n"),
        "{text}"
    );
    cmd(
        &mut p,
        &format!("/save recipe again -o {} x", file.display()),
        "exists",
        main,
    );

    // in preview mode nothing is saved, and it says so
    cmd(&mut p, "/confirm preview", "confirmation: preview", main);
    cmd(
        &mut p,
        "/save recipe previewed Nothing",
        "previewed, not saved",
        main,
    );
    cmd(&mut p, "/confirm ask", "confirmation: ask", main);

    // saved as a recipe: the program is shown, then the gate asks
    cmd(
        &mut p,
        "/save recipe tried_calc Multiplies n by seven",
        "return tools.calculate",
        "Allow? [y/N]",
    );
    cmd(&mut p, "y", "saved the recipe \"tried_calc\"", main);
    // as a tool, the description asked for
    cmd(
        &mut p,
        "/save tool user_tried_calc",
        "Describe what the program does",
        "description> ",
    );
    cmd(
        &mut p,
        "Multiplies n by seven, as a tool",
        "",
        "Allow? [y/N]",
    );
    cmd(&mut p, "y", "saved the tool user_tried_calc", main);
    cmd(&mut p, "tools.user_tried_calc{n = 2}", "14", main);
    p.send_control('d').unwrap();
    p.exp_eof().unwrap();

    // the CLI: the session's result, and with the parameter given
    let h = home.path();
    let run = common::json_out(&common::lmcp_ok(
        h,
        &["--json", "recipe", "run", "tried_calc", "--yes"],
    ));
    assert_eq!(run["result"], 42, "{run}");
    let list = common::json_out(&common::lmcp_ok(h, &["--json", "recipe", "list"]));
    assert!(!list.to_string().contains("previewed"), "{list}");
    let run = common::json_out(&common::lmcp_ok(
        h,
        &[
            "--json",
            "recipe",
            "run",
            "tried_calc",
            "--yes",
            "--param",
            "n=3",
        ],
    ));
    assert_eq!(run["result"], 21, "{run}");
    let called = common::json_out(&common::lmcp_ok(
        h,
        &["--json", "call", "user_tried_calc", "{}"],
    ));
    assert_eq!(called["result"]["result"], 42, "{called}");
    let from_file = common::json_out(&common::lmcp_ok(
        h,
        &["--json", "run", file.to_str().unwrap(), "--yes"],
    ));
    assert_eq!(from_file["result"], 42, "{from_file}");

    // MCP: the same results
    use std::io::{BufRead, BufReader, Write};
    let mut child = common::spawn(h, &["serve", "--profile", "full"]);
    let mut stdin = child.stdin.take().unwrap();
    let call = |id: u32, name: &str, args: serde_json::Value| {
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args}})
    };
    let lines = [
        common::initialize(serde_json::json!(1)),
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        call(
            2,
            "recipe_run",
            serde_json::json!({"name": "tried_calc", "confirm": true}),
        ),
        call(3, "user_tried_calc", serde_json::json!({})),
    ];
    for l in lines {
        writeln!(stdin, "{l}").unwrap();
    }
    stdin.flush().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answers = std::collections::HashMap::new();
    while answers.len() < 3 {
        let line = out.next().expect("an answer").unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        if let Some(id) = v["id"].as_u64() {
            answers.insert(id, v);
        }
    }
    drop(stdin);
    let _ = child.wait();
    let recipe = &answers[&2]["result"]["structuredContent"];
    assert_eq!(recipe["result"], 42, "{}", answers[&2]);
    let tool = &answers[&3]["result"];
    assert_eq!(tool["isError"], false, "{tool}");
    assert!(tool.to_string().contains("42"), "{tool}");
}

/// The REPL's display of a value is lmcp's, so a string holding controls is shown escaped; what
/// the chunk `print`s is the person's own output and stays as written.
#[test]
fn a_shown_value_is_escaped_and_print_is_not() {
    let home = tempfile::tempdir().unwrap();
    let mut p = repl(home.path());
    cmd(
        &mut p,
        "'a' .. string.char(27) .. ']52;c;eA==' .. string.char(7) .. utf8.char(0x202e) .. 'z'",
        "a\\27]52;c;eA==\\7\\u{202e}z",
        "lmcp> ",
    );
    cmd(
        &mut p,
        "print('<' .. string.char(27) .. '[1m>')",
        "<\u{1b}[1m>",
        "lmcp> ",
    );
}

/// Completion offers only names Lua can spell after `.`: a key read from someone's file that
/// holds terminal controls is never drawn by the line editor.
#[test]
fn completion_never_draws_a_hostile_key() {
    let home = tempfile::tempdir().unwrap();
    let mut p = repl(home.path());
    cmd(
        &mut p,
        "x = {['a' .. string.char(27) .. ']0;PWNED' .. string.char(7)] = 1, ab = 2, ['a' .. utf8.char(0x202e) .. 'c'] = 3}",
        "",
        "lmcp> ",
    );
    p.send("x.a\t\t").unwrap();
    p.flush().unwrap();
    let drawn = p.exp_string("x.ab").unwrap();
    cmd(&mut p, "", "2", "lmcp> ");
    assert!(
        !drawn.contains("PWNED") && !drawn.contains('\u{202e}'),
        "{drawn:?}"
    );
}

/// The REPL as node and ipython feel (issue 34): locals carry from one prompt to the next,
/// Tab with several candidates lists them, `require("` completes module names, a result too
/// wide for the terminal is shown a line per entry, `/tools` is in columns, and `/save` asks
/// for its description on a line of its own, never taking the next command for it.
#[test]
fn locals_tab_lists_pretty_results_and_a_described_save() {
    let home = tempfile::tempdir().unwrap();
    let mut p = repl(home.path());
    let main = "lmcp> ";

    // locals across prompts, shadowed by a later local, a local function
    cmd(&mut p, "local n = 6", "", main);
    cmd(&mut p, "n * 7", "42", main);
    cmd(&mut p, "local function twice(x) return 2 * x end", "", main);
    cmd(&mut p, "local n = twice(n) + 1", "", main);
    cmd(&mut p, "n", "13", main);

    // Tab with several candidates: the first extends and beeps, the second lists them all
    p.send("string.r\t\t").unwrap();
    p.flush().unwrap();
    p.exp_string("string.rep").unwrap();
    p.exp_string("string.reverse").unwrap();
    // the line (extended to the common `string.re`) is still being typed: finish it
    cmd(&mut p, "p('ab', 2)", "\"abab\"", main);
    p.send("require(\"tb\t").unwrap();
    p.flush().unwrap();
    p.exp_string("tbl").unwrap();
    cmd(&mut p, "\") ~= nil", "true", main);

    // a result too wide for the terminal (80 columns here) goes a line per entry
    cmd(
        &mut p,
        "{name = 'a value long enough to need the whole line', list = {1, 2, 3}, nested = {deeper = {deepest = true}}}",
        "{\r\n  list = { 1, 2, 3 },\r\n  name = \"a value long enough to need the whole line\",\r\n  nested = { deeper = { deepest = true } }\r\n}",
        main,
    );
    // short ones stay on one line, cycles are shown
    cmd(&mut p, "local t = {k = 1} t.self = t", "", main);
    cmd(&mut p, "t", "{ k = 1, self = <cycle> }", main);

    // /tools in columns
    cmd(&mut p, "/tools", "NAME ", main);

    // /save: the description asked on a line of its own; an empty answer or a command cancels
    cmd(
        &mut p,
        "tools.calculate{expression = n .. '*2'}.value",
        "26",
        main,
    );
    cmd(
        &mut p,
        "/save recipe doubled",
        "Describe what the program does",
        "description> ",
    );
    cmd(&mut p, "/history", "is a command, not a description", main);
    cmd(&mut p, "/save recipe doubled", "", "description> ");
    cmd(&mut p, "", "nothing was saved", main);
    let file = home.path().join("doubled.lua");
    cmd(
        &mut p,
        &format!("/save recipe doubled -o {}", file.display()),
        "",
        "description> ",
    );
    cmd(&mut p, "Doubles thirteen", "wrote", main);
    p.send_control('d').unwrap();
    p.exp_eof().unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("---@description Doubles thirteen\n"),
        "{text}"
    );
    // the program means what the session did: its locals carry, and it returns 26
    let out = common::json_out(&common::lmcp_ok(
        home.path(),
        &["--json", "run", file.to_str().unwrap(), "--yes"],
    ));
    assert_eq!(out["result"], 26, "{text}\n{out}");
}

/// `/save` to a name that is taken asks whether to replace it (or takes `--replace`); it told
/// people to pass `"replace": true`, which `/save` had no way to do. A tool name `/save` cannot
/// use is said plainly, not as a schema error (#34).
#[test]
fn save_over_a_taken_name_asks_and_a_bad_tool_name_is_plain() {
    let home = tempfile::tempdir().unwrap();
    let mut p = repl(home.path());
    let main = "lmcp> ";
    cmd(&mut p, "n = 6", "", main);
    cmd(&mut p, "n + 1", "7", main);
    cmd(
        &mut p,
        "/save tool Sevens Adds one",
        "nothing was saved: `Sevens` cannot name a tool: the name must start with `user_`",
        main,
    );
    cmd(&mut p, "/save recipe twice Adds one", "", "Allow? [y/N]");
    cmd(&mut p, "y", "saved the recipe \"twice\"", main);
    // taken: asked; no keeps it and says how to replace
    cmd(
        &mut p,
        "/save recipe twice Adds one",
        "",
        "a recipe named \"twice\" exists; replace it? [y/N]",
    );
    cmd(
        &mut p,
        "",
        "nothing was saved: a recipe named \"twice\" exists; `/save recipe twice --replace` \
         replaces it",
        main,
    );
    cmd(
        &mut p,
        "/save recipe twice Adds one",
        "",
        "replace it? [y/N]",
    );
    cmd(&mut p, "y", "", "Allow? [y/N]");
    cmd(&mut p, "y", "saved the recipe \"twice\"", main);
    cmd(
        &mut p,
        "/save recipe twice --replace Adds one",
        "",
        "Allow? [y/N]",
    );
    cmd(&mut p, "y", "saved the recipe \"twice\"", main);
    // a tool too
    cmd(
        &mut p,
        "/save tool user_sevens Adds one",
        "",
        "Allow? [y/N]",
    );
    cmd(&mut p, "y", "saved the tool user_sevens", main);
    cmd(
        &mut p,
        "/save tool user_sevens Adds one",
        "",
        "the tool user_sevens exists; replace it? [y/N]",
    );
    cmd(&mut p, "yes", "", "Allow? [y/N]");
    cmd(&mut p, "y", "saved the tool user_sevens", main);
    p.send_control('d').unwrap();
    p.exp_eof().unwrap();
}
