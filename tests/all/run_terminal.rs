//! `lmcp run` with a person at a terminal, through a pseudo-terminal: one question before the
//! script runs, from its declared scope; a yes covers exactly that and the script runs once; a
//! per-tool `ask` grant still asks. With the script on stdin the question goes to the
//! controlling terminal; with no terminal at all the run is a dry run. And `lmcp run -e`.

use std::os::unix::process::CommandExt;
use std::process::Command;

use rexpect::session::{PtySession, spawn_command};

use crate::common;

/// A script that writes two files with the tool its `---@uses` declares.
const WRITES: &str = "\
---@uses write_file, get_datetime
tools.write_file{path = 'one.txt', content = '1'}
tools.write_file{path = 'two.txt', content = '2'}
print('wrote both')
";

/// `lmcp ARGS` on a pseudo-terminal, from folder `dir`.
fn on_terminal(home: &std::path::Path, dir: &std::path::Path, args: &[&str]) -> PtySession {
    let mut cmd = Command::new(common::bin());
    cmd.args(args)
        .current_dir(dir)
        .env("LMCP_HOME", home)
        .env("TERM", "dumb");
    spawn_command(cmd, Some(15_000)).expect("spawn lmcp on a pty")
}

fn workspace(home: &std::path::Path, name: &str) -> Option<String> {
    std::fs::read_to_string(home.join("data/workspace").join(name)).ok()
}

/// Waits for the end and returns everything shown since the last match.
fn rest(p: &mut PtySession) -> String {
    p.exp_eof().expect("lmcp ends")
}

#[test]
fn one_question_lists_the_tools_and_a_yes_runs_the_script_once() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    std::fs::write(h.join("writes.lua"), WRITES).unwrap();
    let mut p = on_terminal(h, h, &["run", "writes.lua"]);
    let shown = p
        .exp_string("Run writes.lua? [y/N] ")
        .expect("one question before the run");
    assert!(
        shown.contains("writes.lua may change state through these tools (its ---@uses):")
            && shown.contains("write_file (write, destructive)"),
        "{shown}"
    );
    // read-only tools are not listed, and nothing ran before the answer
    assert!(!shown.contains("get_datetime"), "{shown}");
    assert_eq!(workspace(h, "one.txt"), None);
    p.send_line("y").unwrap();
    let after = rest(&mut p);
    assert!(after.contains("wrote both"), "{after}");
    assert!(!after.contains("[y/N]"), "no further questions: {after}");
    assert_eq!(workspace(h, "one.txt").as_deref(), Some("1"));
    assert_eq!(workspace(h, "two.txt").as_deref(), Some("2"));
}

#[test]
fn a_no_runs_nothing() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    std::fs::write(h.join("writes.lua"), WRITES).unwrap();
    let mut p = on_terminal(h, h, &["run", "writes.lua"]);
    p.exp_string("Run writes.lua? [y/N] ").unwrap();
    p.send_line("").unwrap();
    let after = rest(&mut p);
    assert!(after.contains("a person declined the run"), "{after}");
    assert!(!after.contains("wrote both"), "{after}");
    assert_eq!(workspace(h, "one.txt"), None);
}

#[test]
fn without_uses_the_question_says_any_tool() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    std::fs::write(
        h.join("any.lua"),
        "tools.write_file{path = 'a.txt', content = 'a'}\nprint('done')\n",
    )
    .unwrap();
    let mut p = on_terminal(h, h, &["run", "any.lua"]);
    let shown = p.exp_string("Run any.lua? [y/N] ").unwrap();
    assert!(shown.contains("may call any tool"), "{shown}");
    p.send_line("y").unwrap();
    let after = rest(&mut p);
    assert!(
        after.contains("done") && !after.contains("[y/N]"),
        "{after}"
    );
    assert_eq!(workspace(h, "a.txt").as_deref(), Some("a"));
}

#[test]
fn a_per_tool_ask_grant_still_asks_each_time() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    common::lmcp_ok(h, &["grants", "ask", "write_file"]);
    std::fs::write(h.join("writes.lua"), WRITES).unwrap();
    let mut p = on_terminal(h, h, &["run", "writes.lua"]);
    p.exp_string("Run writes.lua? [y/N] ").unwrap();
    p.send_line("y").unwrap();
    let first = p.exp_string("Allow? [y/N] ").expect("the ask grant asks");
    assert!(
        first.contains("asks every time") && first.contains("one.txt"),
        "{first}"
    );
    p.send_line("y").unwrap();
    let second = p.exp_string("Allow? [y/N] ").expect("and asks again");
    assert!(second.contains("two.txt"), "{second}");
    p.send_line("n").unwrap();
    let after = rest(&mut p);
    assert!(after.contains("declined"), "{after}");
    assert_eq!(workspace(h, "one.txt").as_deref(), Some("1"));
    assert_eq!(workspace(h, "two.txt"), None);
}

#[test]
fn with_the_script_on_stdin_the_question_goes_to_the_controlling_terminal() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    std::fs::write(h.join("writes.lua"), WRITES).unwrap();
    // stdin is the script; the pty is the process's controlling terminal
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!(
            "exec '{}' run - < writes.lua",
            common::bin().display()
        ))
        .current_dir(h)
        .env("LMCP_HOME", h)
        .env("TERM", "dumb");
    let mut p = spawn_command(cmd, Some(15_000)).unwrap();
    let shown = p.exp_string("Run stdin? [y/N] ").unwrap();
    assert!(shown.contains("write_file (write, destructive)"), "{shown}");
    p.send_line("yes").unwrap();
    let after = rest(&mut p);
    assert!(after.contains("wrote both"), "{after}");
    assert_eq!(workspace(h, "two.txt").as_deref(), Some("2"));
}

/// `lmcp ARGS` with no terminal at all (a new session, stdin piped): nobody can be asked.
fn without_terminal(home: &std::path::Path, args: &[&str], stdin: &str) -> std::process::Output {
    use std::io::Write;
    let mut cmd = Command::new(common::bin());
    cmd.args(args)
        .env("LMCP_HOME", home)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // SAFETY: setsid is async-signal-safe; it leaves the child without a controlling terminal
    // (so /dev/tty cannot be opened), as under a service manager.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn with_no_terminal_a_script_on_stdin_is_a_dry_run_unless_yes() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let out = without_terminal(h, &["run", "-"], WRITES);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("previewed 2 state-changing call(s)"),
        "{stdout}"
    );
    assert_eq!(workspace(h, "one.txt"), None);
    let out = without_terminal(h, &["run", "-", "--yes"], WRITES);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(workspace(h, "one.txt").as_deref(), Some("1"));
}

#[test]
fn eval_runs_a_chunk_as_lua_e_does() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let out = common::lmcp_ok(h, &["run", "-e", "return 1+1"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "2");
    let out = common::lmcp_ok(
        h,
        &[
            "--json",
            "run",
            "-e",
            "return tools.calculate{expression = '6*7'}.value",
        ],
    );
    assert_eq!(common::json_out(&out)["result"], 42);
    let out = common::lmcp(h, &["run", "-e", "error('boom')"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("(command line):1: boom"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // a dry run without a terminal, as for a file
    let out = common::lmcp_ok(
        h,
        &[
            "run",
            "-e",
            "print(tools.write_file{path = 'e.txt', content = 'e'})",
        ],
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("preview of write_file (write), not run"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
