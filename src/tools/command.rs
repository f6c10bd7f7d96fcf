//! `run_command`: run a program with arguments (never through a shell) in a workspace folder.
//!
//! It is the one built-in tool that can do anything the user can, so it is destructive and open
//! world (default grant: ask), in the full profile only, and unavailable when the host has no
//! terminal access (no-terminal mode, or a platform without processes): it is a tool for a
//! desktop, never for a host that only serves. Output is capped, the run has a timeout, and cancelling the call kills the child.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::error::{Error, Result};
use crate::registry::{Annotations, Effect, Handler, Profile, Requirements, ToolSpec, handler};
use crate::tools::beneath::Roots;

/// Bytes of stdout and of stderr kept; the rest is drained and counted.
pub const MAX_OUTPUT: usize = 256 * 1024;
/// Default timeout in seconds.
pub const DEFAULT_TIMEOUT: u64 = 30;

/// The tool's spec.
pub fn spec() -> ToolSpec {
    ToolSpec::new(
        "run_command",
        "Run a program",
        "Run a program with arguments (no shell: no pipes, globs or variables) in a folder inside \
         the allowed roots (default: the workspace). Returns exit code, stdout and stderr (each \
         capped at 256 KiB), and whether it timed out. Desktop only: unavailable without terminal \
         access.",
        json!({
            "type": "object",
            "properties": {
                "program": {"type": "string", "minLength": 1, "description": "Program name (looked up in PATH) or path"},
                "args": {"type": "array", "items": {"type": "string"}, "default": [], "description": "Arguments, passed as they are"},
                "cwd": {"type": "string", "description": "Working folder inside a root; default: the workspace"},
                "stdin": {"type": "string", "description": "Text sent to the program's standard input"},
                "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 600, "default": DEFAULT_TIMEOUT}
            },
            "required": ["program"],
            "additionalProperties": false
        }),
    )
    .effect(
        Effect::Write,
        Annotations::changing(true, false, true),
    )
    .profile(Profile::Full)
    .requires(Requirements { terminal: true, local_files: false })
    .prechecks(crate::tools::beneath::cwd_precheck)
    .summary(|args| {
        let mut line = args["program"].as_str().unwrap_or("?").to_string();
        for a in args["args"].as_array().into_iter().flatten() {
            line.push(' ');
            line.push_str(a.as_str().unwrap_or("?"));
        }
        format!("run `{line}`")
    })
    .output(json!({
        "type": "object",
        "properties": {
            "exit_code": {"type": "integer", "description": "Absent when the program did not exit by itself (it timed out or was killed by a signal)"},
            "stdout": {"type": "string"},
            "stderr": {"type": "string"},
            "stdout_truncated": {"type": "boolean"},
            "stderr_truncated": {"type": "boolean"},
            "timed_out": {"type": "boolean"},
            "duration_ms": {"type": "integer"}
        },
        "required": ["stdout", "stderr", "stdout_truncated", "stderr_truncated", "timed_out", "duration_ms"]
    }))
}

/// The tool's handler.
pub fn handler_fn() -> Handler {
    handler(|inv| async move {
        let args = &inv.args;
        let cwd = Roots::of(&inv.host())?
            .place(args.get("cwd").and_then(Value::as_str).unwrap_or("."))?
            .shown();
        let program = args["program"].as_str().unwrap_or_default().to_string();
        let argv: Vec<String> = args["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect();
        let timeout =
            Duration::from_secs(args["timeout_seconds"].as_u64().unwrap_or(DEFAULT_TIMEOUT));
        let stdin = args
            .get("stdin")
            .and_then(Value::as_str)
            .map(str::to_string);
        run(&program, &argv, &cwd, stdin, timeout).await
    })
}

async fn run(
    program: &str,
    argv: &[String],
    cwd: &std::path::Path,
    stdin: Option<String>,
    timeout: Duration,
) -> Result<Value> {
    let started = Instant::now();
    let mut command = Command::new(program);
    // Its own process group, so whatever it starts in the background ends with it.
    #[cfg(unix)]
    command.process_group(0);
    let mut child = command
        .args(argv)
        .current_dir(cwd)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::tool(
                "run_command",
                format!("program `{program}` was not found; give its full path or check PATH"),
            ),
            _ => Error::tool("run_command", format!("could not start `{program}`: {e}")),
        })?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        tokio::spawn(async move {
            let _ = pipe.write_all(text.as_bytes()).await;
        });
    }
    let out = tokio::spawn(capped(child.stdout.take()));
    let err = tokio::spawn(capped(child.stderr.take()));
    let group = child.id();
    let (status, timed_out) = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(status) => (
            Some(status.map_err(|e| Error::tool("run_command", e.to_string()))?),
            false,
        ),
        Err(_) => {
            let _ = child.kill().await;
            (None, true)
        }
    };
    // What it left running in the background (`sleep 7 &`) would hold the pipes open and
    // outlive the call: the whole group ends with the program.
    #[cfg(unix)]
    if let Some(pgid) = group.and_then(|id| i32::try_from(id).ok()) {
        // SAFETY: killpg only sends a signal; the group is the one this call created.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
    #[cfg(not(unix))]
    let _ = group;
    // A grandchild that left the group may still hold the pipes: wait for them only briefly.
    let drain = Duration::from_secs(2);
    let (stdout, stdout_truncated) = tokio::time::timeout(drain, out)
        .await
        .ok()
        .and_then(|r| r.ok())
        .unwrap_or_default();
    let (stderr, stderr_truncated) = tokio::time::timeout(drain, err)
        .await
        .ok()
        .and_then(|r| r.ok())
        .unwrap_or_default();
    let mut result = json!({
        "stdout": stdout,
        "stderr": stderr,
        "stdout_truncated": stdout_truncated,
        "stderr_truncated": stderr_truncated,
        "timed_out": timed_out,
        "duration_ms": started.elapsed().as_millis() as u64,
    });
    // Absent rather than null: a nullable type is not portable JSON Schema.
    if let Some(code) = status.and_then(|s| s.code()) {
        result["exit_code"] = json!(code);
    }
    Ok(result)
}

/// Reads a pipe to its end, keeping the first [`MAX_OUTPUT`] bytes (as lossy UTF-8).
async fn capped(pipe: Option<impl AsyncRead + Unpin>) -> (String, bool) {
    let Some(mut pipe) = pipe else {
        return (String::new(), false);
    };
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    let mut truncated = false;
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = MAX_OUTPUT.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                truncated |= n > room;
            }
        }
    }
    (String::from_utf8_lossy(&kept).into_owned(), truncated)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_without_a_shell_and_caps_output() {
        let dir = tempfile::tempdir().unwrap();
        let v = run(
            "echo",
            &["a b".into(), "$HOME".into()],
            dir.path(),
            None,
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        assert_eq!(v["stdout"], "a b $HOME\n");
        assert_eq!(v["exit_code"], 0);
        let v = run(
            "cat",
            &[],
            dir.path(),
            Some("piped".into()),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        assert_eq!(v["stdout"], "piped");
        let v = run(
            "head",
            &["-c".into(), "300000".into(), "/dev/zero".into()],
            dir.path(),
            None,
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        assert_eq!(v["stdout_truncated"], true);
        assert_eq!(v["stdout"].as_str().unwrap().len(), MAX_OUTPUT);
    }

    /// What a program leaves running in the background ends with it, and its output is kept.
    #[tokio::test]
    async fn background_children_end_with_the_program() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("still-running");
        let script = format!("(sleep 3; touch '{}') & echo hi", marker.display());
        let started = Instant::now();
        let v = run(
            "sh",
            &["-c".into(), script],
            dir.path(),
            None,
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        assert_eq!(v["stdout"], "hi\n", "{v}");
        assert_eq!(v["timed_out"], false, "{v}");
        assert!(started.elapsed() < Duration::from_secs(2), "{v}");
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert!(!marker.exists(), "the background child outlived the call");
    }

    #[tokio::test]
    async fn times_out_and_reports_missing_programs() {
        let dir = tempfile::tempdir().unwrap();
        let v = run(
            "sleep",
            &["5".into()],
            dir.path(),
            None,
            Duration::from_millis(100),
        )
        .await
        .unwrap();
        assert_eq!(v["timed_out"], true);
        assert!(v.get("exit_code").is_none(), "{v}");
        let e = run(
            "no-such-program-xyz",
            &[],
            dir.path(),
            None,
            Duration::from_secs(1),
        )
        .await
        .unwrap_err();
        assert!(e.to_string().contains("was not found"), "{e}");
    }
}
