//! Shared helpers for the integration tests: a host in a temporary `LMCP_HOME`, probe tools
//! that record whether their handler was entered, and a runner for the `lmcp` binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use lmcp::Host;
use lmcp::registry::{Annotations, Effect, ToolSpec, handler, sync_handler};
use lmcp::store::Paths;
use serde_json::{Value, json};

/// A host whose files live in a temporary directory, removed on drop.
pub struct TestHost {
    pub dir: tempfile::TempDir,
    pub host: Arc<Host>,
    /// How many times each probe's handler was entered, by probe name.
    pub entered: Arc<Probes>,
}

/// Counters of handler entries.
#[derive(Default)]
pub struct Probes {
    counts: std::sync::Mutex<std::collections::BTreeMap<String, Arc<AtomicUsize>>>,
}

impl Probes {
    fn counter(&self, name: &str) -> Arc<AtomicUsize> {
        self.counts
            .lock()
            .unwrap()
            .entry(name.to_string())
            .or_default()
            .clone()
    }

    /// How many times the named probe's handler ran.
    pub fn count(&self, name: &str) -> usize {
        self.counter(name).load(Ordering::SeqCst)
    }
}

fn annotations(effect: Effect, destructive: bool) -> Annotations {
    Annotations {
        read_only_hint: effect == Effect::Read,
        destructive_hint: destructive,
        idempotent_hint: false,
        open_world_hint: effect == Effect::Send,
    }
}

impl TestHost {
    /// A host with the built-ins and the probe tools registered.
    pub fn new() -> TestHost {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::open(Paths::under(dir.path())).unwrap();
        let entered = Arc::new(Probes::default());
        let schema = json!({
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 0}, "text": {"type": "string"}},
            "additionalProperties": false
        });
        for (name, effect, destructive) in [
            ("probe_read", Effect::Read, false),
            ("probe_write", Effect::Write, false),
            ("probe_send", Effect::Send, false),
            ("probe_destructive", Effect::Write, true),
        ] {
            let counter = entered.counter(name);
            let spec = ToolSpec::new(name, name, "a probe", schema.clone())
                .effect(effect, annotations(effect, destructive));
            host.registry()
                .register(
                    spec,
                    sync_handler(move |args| {
                        counter.fetch_add(1, Ordering::SeqCst);
                        Ok(json!({"echo": args}))
                    }),
                )
                .unwrap();
        }
        let counter = entered.counter("probe_nopreview");
        let spec = ToolSpec::new(
            "probe_nopreview",
            "p",
            "a probe without preview",
            schema.clone(),
        )
        .effect(Effect::Send, annotations(Effect::Send, false))
        .without_preview();
        host.registry()
            .register(
                spec,
                sync_handler(move |_| {
                    counter.fetch_add(1, Ordering::SeqCst);
                    Ok(json!("sent"))
                }),
            )
            .unwrap();
        let counter = entered.counter("probe_slow");
        let spec = ToolSpec::new(
            "probe_slow",
            "p",
            "sleeps for n milliseconds",
            schema.clone(),
        );
        host.registry()
            .register(
                spec,
                handler(move |inv| {
                    let counter = counter.clone();
                    async move {
                        counter.fetch_add(1, Ordering::SeqCst);
                        let ms = inv.args["n"].as_u64().unwrap_or(10_000);
                        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                        Ok(json!("slept"))
                    }
                }),
            )
            .unwrap();
        // Calls itself through the gate, n more times: nesting depth grows by one per call.
        let spec = ToolSpec::new("probe_nest", "p", "calls itself n levels deep", schema);
        host.registry()
            .register(
                spec,
                handler(|inv| async move {
                    let n = inv.args["n"].as_u64().unwrap_or(0);
                    if n == 0 {
                        return Ok(json!(inv.ctx.depth()));
                    }
                    let req =
                        lmcp::CallRequest::new("probe_nest", json!({"n": n - 1}), inv.ctx.child());
                    inv.caller.call(req).await.into_result()
                }),
            )
            .unwrap();
        TestHost { dir, host, entered }
    }

    /// The temporary `LMCP_HOME`.
    pub fn home(&self) -> &Path {
        self.dir.path()
    }

    /// Sets one tool's grant in the saved config.
    pub fn set_grant(&self, tool: &str, grant: lmcp::config::Grant) {
        self.host
            .update_config(|c| {
                c.grants.insert(tool.into(), grant);
                Ok(())
            })
            .unwrap();
    }
}

/// Runs the `lmcp` binary with `LMCP_HOME=home` and no stdin.
pub fn lmcp(home: &Path, args: &[&str]) -> Output {
    lmcp_with_stdin(home, args, None)
}

/// Runs the `lmcp` binary and insists it succeeds (exit 0), showing its output if not.
pub fn lmcp_ok(home: &Path, args: &[&str]) -> Output {
    let o = lmcp(home, args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "lmcp {args:?}\n--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// Runs the `lmcp` binary with `LMCP_HOME=home`, feeding `stdin` if given.
pub fn lmcp_with_stdin(home: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .env("LMCP_HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdin(if stdin.is_some() {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        });
    let mut child = cmd.spawn().expect("run lmcp");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    child.wait_with_output().unwrap()
}

/// Starts the `lmcp` binary with `LMCP_HOME=home` and stdin, stdout and stderr piped, for tests
/// that talk to it while it runs (a server, a reader that goes away, an input cut short).
pub fn spawn(home: &Path, args: &[&str]) -> std::process::Child {
    Command::new(bin())
        .args(args)
        .env("LMCP_HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run lmcp")
}

/// An MCP `initialize` request (the 2025-11-25 handshake) with this id.
pub fn initialize(id: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}})
}

/// The path of the `lmcp` binary cargo built for these tests.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_lmcp"))
}

/// stdout as one JSON value (for `--json` output).
pub fn json_out(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "not one JSON value ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Runs Lua source in a fresh sandbox on `host`, capturing output; the outcome or the error.
pub async fn run_lua(
    host: &Arc<Host>,
    source: &str,
    mode: lmcp::ConfirmMode,
    timeout: std::time::Duration,
) -> lmcp::Result<lmcp::script::ScriptOutcome> {
    let ctx = lmcp::CallContext::root(lmcp::Origin::Cli, mode).with_timeout(timeout);
    let options = lmcp::script::VmOptions {
        output: lmcp::script::Output::Capture,
        ..Default::default()
    };
    let script = lmcp::script::Script {
        source: source.to_string(),
        name: "test.lua".into(),
    };
    lmcp::script::run(&host.caller(), script, ctx, options)
        .await
        .map_err(|f| {
            if f.output.is_empty() {
                f.error
            } else {
                lmcp::Error::Script {
                    message: format!("{}\n--- output ---\n{}", f.error, f.output),
                }
            }
        })
}

/// The context of a call from `origin` whose person said yes up front: confirmed, and every
/// question answered yes.
pub fn confirmed(origin: lmcp::Origin) -> lmcp::CallContext {
    lmcp::CallContext::root(origin, lmcp::ConfirmMode::Confirmed)
        .with_confirmer(Arc::new(lmcp::gate::AlwaysYes))
}

/// The context of a call from an MCP client whose person says yes to everything.
pub fn ctx() -> lmcp::CallContext {
    confirmed(lmcp::Origin::Mcp)
}

/// Calls a tool on `host` as an MCP client whose person says yes ([`ctx`]); the whole outcome.
pub async fn call(host: &Arc<Host>, tool: &str, args: Value) -> lmcp::Outcome {
    host.call(lmcp::CallRequest::new(tool, args, ctx())).await
}

/// Calls a tool as a person who said yes up front (`--yes`), from the CLI; the result or the
/// error's message.
pub async fn call_yes(host: &Arc<Host>, tool: &str, args: Value) -> Result<Value, String> {
    host.call(lmcp::CallRequest::new(
        tool,
        args,
        confirmed(lmcp::Origin::Cli),
    ))
    .await
    .into_result()
    .map_err(|e| e.to_string())
}

/// What a child `lmcp` did, with its peak resident memory.
pub struct Peak {
    /// Its exit code (`None` when a signal ended it).
    pub code: Option<i32>,
    /// What it wrote to stderr.
    pub stderr: String,
    /// Its peak resident set, in bytes (its own `VmHWM`).
    pub rss: u64,
}

/// Runs `lmcp args` with `LMCP_HOME=home` and no stdin, and reads the peak of its resident
/// memory: a bound on memory that holds on a noisy machine, unlike a timing. lmcp writes its own
/// peak (Linux's `VmHWM`) to the file `LMCP_PEAK_FILE` names as it ends; `wait4`'s `ru_maxrss`
/// would count the memory this test process had when it started the child (Linux records the
/// peak of the memory a child leaves at `exec`, for a vfork child its parent's).
#[cfg(unix)]
pub fn peak_rss(home: &Path, args: &[&str]) -> Peak {
    let err_file = tempfile::NamedTempFile::new().unwrap();
    let peak_file = tempfile::NamedTempFile::new().unwrap();
    let status = Command::new(bin())
        .args(args)
        .env("LMCP_HOME", home)
        .env("LMCP_PEAK_FILE", peak_file.path())
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(err_file.reopen().unwrap())
        .status()
        .expect("run lmcp");
    let stderr = std::fs::read_to_string(err_file.path()).unwrap_or_default();
    let rss = std::fs::read_to_string(peak_file.path())
        .unwrap_or_default()
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("lmcp wrote no peak (exit {:?}): {stderr}", status.code()));
    Peak {
        code: status.code(),
        stderr,
        rss,
    }
}

/// Waits (up to 10 s) until process `pid` catches SIGTERM and SIGINT, read from its
/// `/proc/PID/status`: a signal sent before is handled the default way (the process killed),
/// which would say nothing about how lmcp answers it.
#[cfg(target_os = "linux")]
pub fn wait_until_signals_caught(pid: u32) {
    let wanted = (1u64 << (libc::SIGTERM - 1)) | (1u64 << (libc::SIGINT - 1));
    let start = std::time::Instant::now();
    loop {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let caught = status
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
            .unwrap_or(0);
        if caught & wanted == wanted {
            return;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "process {pid} never caught SIGTERM and SIGINT"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The child's exit status, waiting at most 10 s; kills it and fails the test past that. A
/// bound, not a timing claim: a process that ends on its own ends far sooner.
pub fn exit_within_10s(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > std::time::Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running 10 s later");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
