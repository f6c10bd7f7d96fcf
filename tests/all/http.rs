//! `lmcp serve --http`: MCP over Streamable HTTP in both protocol generations, behind the
//! Origin check and the bearer token, with local-file tools unavailable and the file tools kept
//! to the workspace. Driven with plain HTTP/1.0 requests, so every byte the server answers is
//! seen as a client would see it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;

use serde_json::{Value, json};

use crate::common::{self, lmcp, lmcp_ok, spawn};

/// A running `lmcp serve --http` on a free port; killed when dropped.
struct Server {
    child: std::process::Child,
    addr: String,
    token: String,
}

impl Server {
    fn start(home: &Path) -> Server {
        Server::start_at(home, "127.0.0.1:0")
    }

    fn start_at(home: &Path, addr: &str) -> Server {
        Server::start_with(home, &["serve", "--http", addr])
    }

    /// `lmcp ARGS`, which must start an HTTP server.
    fn start_with(home: &Path, args: &[&str]) -> Server {
        let token = String::from_utf8(lmcp_ok(home, &["serve", "--http", "--show-token"]).stdout)
            .unwrap()
            .trim()
            .to_string();
        let mut child = spawn(home, args);
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split("/mcp").next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        // keep reading stderr so the server never blocks on it
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut err, &mut std::io::sink());
        });
        Server { child, addr, token }
    }

    /// Sends one HTTP/1.0 request; the status, the headers (lower-case names) and the body.
    fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, Vec<(String, String)>, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        let mut req = format!(
            "{method} {path} HTTP/1.0\r\nHost: {}\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        s.write_all(req.as_bytes()).unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_string()))
            .collect();
        (status, headers, body.to_string())
    }

    /// Posts `message` in `session` and hands back the open connection, to read the answer's
    /// stream as it comes (read timeout: `secs`).
    fn post_open(&self, session: &str, message: &str, secs: u64) -> TcpStream {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        let req = format!(
            "POST /mcp HTTP/1.0\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: \
             application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: \
             {session}\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\n\r\n{message}",
            self.addr,
            self.token,
            message.len()
        );
        s.write_all(req.as_bytes()).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(secs)))
            .unwrap();
        s
    }

    /// Opens `session`'s own stream (GET), where notifications outside a request arrive.
    fn listen(&self, session: &str) -> TcpStream {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        let req = format!(
            "GET /mcp HTTP/1.0\r\nHost: {}\r\nAuthorization: Bearer {}\r\nAccept: \
             text/event-stream\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: \
             2025-11-25\r\n\r\n",
            self.addr, self.token
        );
        s.write_all(req.as_bytes()).unwrap();
        s
    }

    /// A JSON-RPC message posted with the token; the status, the session id if one was given,
    /// and the JSON-RPC answer (from a JSON body or the stream's `data:` lines).
    fn rpc(&self, message: &Value, extra: &[(&str, &str)]) -> (u16, Option<String>, Value) {
        let auth = format!("Bearer {}", self.token);
        let mut headers = vec![
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        headers.extend_from_slice(extra);
        let (status, headers, body) = self.send("POST", "/mcp", &headers, &message.to_string());
        let session = headers
            .iter()
            .find(|(k, _)| k == "mcp-session-id")
            .map(|(_, v)| v.clone());
        let answer = body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .chain(std::iter::once(body.as_str()))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|v| v.get("id").is_some())
            .unwrap_or(Value::Null);
        (status, session, answer)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const MODERN: &str = "2026-07-28";

/// A request of the session-less generation: its protocol signals in `_meta` and headers.
fn modern(server: &Server, id: u64, method: &str, params: Value) -> Value {
    modern_with(server, id, method, params, json!({}))
}

/// The same, from a client with these capabilities.
fn modern_with(
    server: &Server,
    id: u64,
    method: &str,
    mut params: Value,
    capabilities: Value,
) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities
    });
    let name = params["name"].as_str().unwrap_or_default().to_string();
    let mut extra = vec![("MCP-Protocol-Version", MODERN), ("Mcp-Method", method)];
    if !name.is_empty() {
        extra.push(("Mcp-Name", name.as_str()));
    }
    let (status, _, answer) = server.rpc(
        &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        &extra,
    );
    assert_eq!(status, 200, "{answer}");
    answer
}

fn names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// `lmcp serve --http` ends on SIGTERM or SIGINT at once, exit 0, with no client and with a
/// session open (#34).
#[cfg(target_os = "linux")]
#[test]
fn a_signal_ends_the_http_server() {
    for (name, signal) in [("SIGTERM", libc::SIGTERM), ("SIGINT", libc::SIGINT)] {
        for with_session in [false, true] {
            let home = tempfile::tempdir().unwrap();
            let mut server = Server::start(home.path());
            if with_session {
                open_session(&server);
            }
            common::wait_until_signals_caught(server.child.id());
            // SAFETY: kill(2) on our own child's pid, which it still is (not yet waited for)
            unsafe { libc::kill(server.child.id() as i32, signal) };
            let what = format!("{name}, session open: {with_session}");
            let status = common::exit_within_10s(&mut server.child, &what);
            assert_eq!(status.code(), Some(0), "{what}: {status:?}");
        }
    }
}

#[test]
fn both_generations_list_and_call_over_http() {
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(home.path());

    // the handshake generation: initialize, a session, then list and call in it
    let (status, session, init) = server.rpc(&common::initialize(json!(1)), &[]);
    assert_eq!(status, 200, "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "lmcp", "{init}");
    let session = session.expect("a session id");
    let in_session = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let (status, _, _) = server.rpc(
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        &in_session,
    );
    assert_eq!(status, 202);
    let (_, _, list) = server.rpc(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        &in_session,
    );
    let listed = names(&list);
    assert!(listed.contains(&"calculate".to_string()), "{listed:?}");
    let (_, _, called) = server.rpc(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "calculate", "arguments": {"expression": "6*7"}}}),
        &in_session,
    );
    assert_eq!(
        called["result"]["structuredContent"]["value"], 42,
        "{called}"
    );

    // the session-less generation: the same list, the same answer
    let list = modern(&server, 4, "tools/list", json!({}));
    assert_eq!(names(&list), listed);
    let called = modern(
        &server,
        5,
        "tools/call",
        json!({"name": "calculate", "arguments": {"expression": "6*7"}}),
    );
    assert_eq!(
        called["result"]["structuredContent"]["value"], 42,
        "{called}"
    );

    // the calls are in the history like any other (written within a few ms of each call)
    let mut history = Value::Null;
    for _ in 0..100 {
        history = common::json_out(&lmcp_ok(home.path(), &["--json", "history"]));
        let calls = history
            .as_array()
            .map_or(0, |h| h.iter().filter(|e| e["tool"] == "calculate").count());
        if calls == 2 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("two calculate calls expected in the history: {history}");
}

#[test]
fn a_missing_or_wrong_token_is_401_and_a_foreign_origin_403() {
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(home.path());
    let init = common::initialize(json!(1)).to_string();
    let json_headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];

    let (status, headers, body) = server.send("POST", "/mcp", &json_headers, &init);
    assert_eq!(status, 401, "{body}");
    assert!(
        headers
            .iter()
            .any(|(k, v)| k == "www-authenticate" && v.starts_with("Bearer")),
        "{headers:?}"
    );
    assert!(body.contains("--show-token"), "{body}");

    let wrong = format!("Bearer {}", "0".repeat(64));
    let mut with_wrong = json_headers.to_vec();
    with_wrong.push(("Authorization", &wrong));
    let (status, _, body) = server.send("POST", "/mcp", &with_wrong, &init);
    assert_eq!(status, 401, "{body}");

    // the scheme's name is case-insensitive
    let lower = format!("bearer {}", server.token);
    let mut with_lower = json_headers.to_vec();
    with_lower.push(("Authorization", &lower));
    let (status, _, body) = server.send("POST", "/mcp", &with_lower, &init);
    assert_eq!(status, 200, "{body}");

    // a page from elsewhere is refused even with the token; one on this machine passes
    let (status, _, body) = server.rpc(
        &common::initialize(json!(1)),
        &[("Origin", "http://evil.example")],
    );
    assert_eq!(status, 403, "{body}");
    let (status, _, body) = server.rpc(
        &common::initialize(json!(1)),
        &[("Origin", "http://localhost:6274")],
    );
    assert_eq!(status, 200, "{body}");

    // another path, and a Host that is not this machine (DNS rebinding)
    let auth = format!("Bearer {}", server.token);
    let mut with_token = json_headers.to_vec();
    with_token.push(("Authorization", &auth));
    let (status, _, _) = server.send("POST", "/other", &with_token, &init);
    assert_eq!(status, 404);
    let mut rebound = with_token.clone();
    rebound.push(("Host", "attacker.example"));
    let mut s = TcpStream::connect(&server.addr).unwrap();
    let req = format!(
        "POST /mcp HTTP/1.0\r\nHost: attacker.example\r\nAuthorization: {auth}\r\nContent-Type: \
         application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: \
         {}\r\n\r\n{init}",
        init.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.0 403"), "{answer}");
}

#[test]
fn local_file_tools_are_unavailable_and_file_tools_keep_to_the_workspace() {
    let home = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("notes.txt"), "private").unwrap();
    std::fs::write(outside.path().join("photo.png"), b"not really").unwrap();
    let dir = outside.path().to_str().unwrap();
    lmcp_ok(home.path(), &["roots", "add", dir]);
    let file = format!("{dir}/notes.txt");
    // from the command line the added root is reachable
    let args = json!({"path": file}).to_string();
    let read = lmcp_ok(home.path(), &["--json", "call", "read_file", &args]);
    assert!(String::from_utf8_lossy(&read.stdout).contains("private"));

    let server = Server::start(home.path());
    let list = modern(&server, 1, "tools/list", json!({}));
    let listed = names(&list);
    assert!(!listed.contains(&"asset_import".to_string()), "{listed:?}");
    assert!(listed.contains(&"read_file".to_string()), "{listed:?}");

    let import = modern(
        &server,
        2,
        "tools/call",
        json!({"name": "asset_import", "arguments": {"path": format!("{dir}/photo.png"), "workspace": "w"}}),
    );
    let text = import.to_string();
    assert_eq!(import["result"]["isError"], true, "{text}");
    assert!(
        text.contains("unavailable") && text.contains("local files"),
        "{text}"
    );

    let read = modern(
        &server,
        3,
        "tools/call",
        json!({"name": "read_file", "arguments": {"path": file}}),
    );
    let text = read.to_string();
    assert_eq!(read["result"]["isError"], true, "{text}");
    assert!(!text.contains("private"), "{text}");
    assert!(text.contains("outside the lmcp workspace"), "{text}");

    // inside the workspace the file tools work as ever
    let wrote = modern(
        &server,
        4,
        "tools/call",
        json!({"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi"}}),
    );
    // writing asks first: this client cannot answer, so it is not run, and says how to allow it
    let text = wrote.to_string();
    assert_eq!(
        wrote["result"]["structuredContent"]["outcome"], "needs_confirmation",
        "{text}"
    );
    assert!(text.contains("lmcp grants allow write_file"), "{text}");
    lmcp_ok(home.path(), &["grants", "allow", "write_file"]);
    // a running server sees a grant changed elsewhere within a short, bounded time
    let mut wrote = Value::Null;
    for id in 5..105 {
        wrote = modern(
            &server,
            id,
            "tools/call",
            json!({"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi"}}),
        );
        if wrote["result"]["isError"] == false {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(wrote["result"]["isError"], false, "{wrote}");
    let read = modern(
        &server,
        200,
        "tools/call",
        json!({"name": "read_file", "arguments": {"path": "hello.txt"}}),
    );
    assert!(read.to_string().contains("hi"), "{read}");
}

#[test]
fn tokens_are_kept_private_shown_again_and_rotated() {
    let home = tempfile::tempdir().unwrap();
    // made once, however many ask for it first at the same time
    let askers: Vec<_> = (0..12)
        .map(|_| {
            let home = home.path().to_path_buf();
            std::thread::spawn(move || {
                String::from_utf8(lmcp_ok(&home, &["serve", "--http", "--show-token"]).stdout)
                    .unwrap()
            })
        })
        .collect();
    let mut told: Vec<String> = askers.into_iter().map(|a| a.join().unwrap()).collect();
    told.dedup();
    assert_eq!(told.len(), 1, "{told:?}");
    let show = || {
        String::from_utf8(lmcp_ok(home.path(), &["serve", "--http", "--show-token"]).stdout)
            .unwrap()
    };
    let first = show();
    assert_eq!(first, told[0]);
    assert_eq!(first.trim().len(), 64);
    assert_eq!(show(), first, "shown again, not made again");
    let rotated =
        String::from_utf8(lmcp_ok(home.path(), &["serve", "--http", "--rotate-token"]).stdout)
            .unwrap();
    assert_ne!(rotated, first);
    assert_eq!(show(), rotated);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let path = home.path().join("config").join("http-token");
        let found = walk(home.path(), "http-token").unwrap_or(path);
        let mode = std::fs::metadata(&found).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{found:?} is {mode:o}");
    }
    // an address other machines reach needs --allow-remote
    let out = lmcp(home.path(), &["serve", "--http", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--allow-remote"), "{err}");
    let out = lmcp(home.path(), &["serve", "--http", "nowhere"]);
    assert_eq!(out.status.code(), Some(2));
}

/// The first file named `name` under `dir`.
fn walk(dir: &Path, name: &str) -> Option<std::path::PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.file_name().is_some_and(|n| n == name) {
            return Some(path);
        }
        if path.is_dir()
            && let Some(found) = walk(&path, name)
        {
            return Some(found);
        }
    }
    None
}

/// Opens a session of the handshake generation; its id.
fn open_session(server: &Server) -> String {
    let (status, session, init) = server.rpc(&common::initialize(json!(0)), &[]);
    assert_eq!(status, 200, "{init}");
    let session = session.expect("a session id");
    let (status, _, _) = server.rpc(
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        &[
            ("Mcp-Session-Id", session.as_str()),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
    );
    assert_eq!(status, 202);
    session
}

#[test]
fn fifty_sessions_call_in_parallel_and_the_history_counts_every_call() {
    const SESSIONS: u64 = 50;
    const CALLS: u64 = 200;
    let home = tempfile::tempdir().unwrap();
    // a history long enough to hold every call
    lmcp_ok(home.path(), &["grants", "allow", "calculate"]);
    let config = walk(home.path(), "config.json").expect("config.json");
    let mut c: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    c["limits"]["history_size"] = json!(SESSIONS * CALLS + 100);
    std::fs::write(&config, c.to_string()).unwrap();

    let server = std::sync::Arc::new(Server::start(home.path()));
    let workers: Vec<_> = (0..SESSIONS)
        .map(|s| {
            let server = std::sync::Arc::clone(&server);
            std::thread::spawn(move || {
                let session = open_session(&server);
                let headers = [
                    ("Mcp-Session-Id", session.as_str()),
                    ("MCP-Protocol-Version", "2025-11-25"),
                ];
                for i in 0..CALLS {
                    let (status, _, answer) = server.rpc(
                        &json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                                "params": {"name": "calculate",
                                           "arguments": {"expression": format!("{s} * 1000 + {i}")}}}),
                        &headers,
                    );
                    assert_eq!(status, 200, "{answer}");
                    assert_eq!(
                        answer["result"]["structuredContent"]["value"],
                        json!(s * 1000 + i),
                        "session {s} call {i}: {answer}"
                    );
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let n = (SESSIONS * CALLS + 100).to_string();
    let mut counted = 0;
    for _ in 0..100 {
        let history = common::json_out(&lmcp_ok(home.path(), &["--json", "history", "-n", &n]));
        counted = history
            .as_array()
            .map_or(0, |h| h.iter().filter(|e| e["tool"] == "calculate").count());
        if counted as u64 == SESSIONS * CALLS {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{counted} calls in the history, not {}", SESSIONS * CALLS);
}

#[test]
fn two_sessions_hear_of_a_tool_a_third_creates() {
    let home = tempfile::tempdir().unwrap();
    lmcp_ok(home.path(), &["grants", "allow", "custom_tool_create"]);
    let server = Server::start(home.path());
    let (heard, told) = std::sync::mpsc::channel();
    for listener in 0..2 {
        let session = open_session(&server);
        let s = server.listen(&session);
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        let heard = heard.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(s).lines() {
                let Ok(line) = line else { break };
                if line.contains("notifications/tools/list_changed") {
                    let _ = heard.send(listener);
                    break;
                }
            }
        });
    }
    // give both streams a moment to be open before the change
    std::thread::sleep(std::time::Duration::from_millis(300));
    let created = modern(
        &server,
        1,
        "tools/call",
        json!({"name": "custom_tool_create", "arguments": {
            "name": "user_twice", "description": "Doubles a number",
            "lua": "---@param n number the number\nreturn params.n * 2"}}),
    );
    assert_eq!(created["result"]["isError"], false, "{created}");
    let mut listeners: Vec<i32> = (0..2)
        .map(|_| {
            told.recv_timeout(std::time::Duration::from_secs(30))
                .expect("a session heard no list_changed")
        })
        .collect();
    listeners.sort();
    assert_eq!(listeners, [0, 1]);
    let list = modern(&server, 2, "tools/list", json!({}));
    assert!(names(&list).contains(&"user_twice".to_string()));
}

#[test]
fn a_write_is_confirmed_through_elicitation_over_the_stream() {
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(home.path());
    let mut init = common::initialize(json!(0));
    init["params"]["capabilities"] = json!({"elicitation": {"form": {}}});
    let (status, session, answer) = server.rpc(&init, &[]);
    assert_eq!(status, 200, "{answer}");
    let session = session.unwrap();
    let in_session = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    server.rpc(
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        &in_session,
    );
    // the call's own stream carries the question, then the result
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "write_file", "arguments": {"path": "asked.txt", "content": "yes"}}})
    .to_string();
    let s = server.post_open(&session, &call, 30);
    let mut lines = BufReader::new(s).lines();
    let mut messages = std::iter::from_fn(move || {
        lines.by_ref().map_while(Result::ok).find_map(|l| {
            l.strip_prefix("data:")
                .and_then(|d| serde_json::from_str::<Value>(d.trim()).ok())
        })
    });
    let asked = messages.next().expect("a question");
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    let message = asked["params"]["message"].as_str().unwrap();
    assert!(message.contains("write_file"), "{message}");
    let (status, _, _) = server.rpc(
        &json!({"jsonrpc": "2.0", "id": asked["id"],
                "result": {"action": "accept", "content": {"allow": true}}}),
        &in_session,
    );
    assert_eq!(status, 202);
    let result = messages.next().expect("the call's result");
    assert_eq!(result["id"], 7, "{result}");
    assert_eq!(result["result"]["isError"], false, "{result}");
    let written = walk(home.path(), "asked.txt").expect("the file written");
    assert_eq!(std::fs::read_to_string(written).unwrap(), "yes");
}

/// How a test stops a long call: the client's `notifications/cancelled`, or its `DELETE` of
/// the whole session.
#[derive(Clone, Copy)]
enum Stop {
    Cancel,
    CloseSession,
}

/// Starts a call that spins for ever, stops it as `stop` says, and checks that its stream ends
/// without a result long before the run's own time limit, that the history records it as
/// cancelled, and that the server goes on.
fn a_spinning_call_stops(stop: Stop) {
    let home = tempfile::tempdir().unwrap();
    let def = json!({"name": "user_spin", "description": "Spins until stopped",
                     "lua": "---@timeout 600\nlocal n = 0 while true do n = n + 1 end"});
    lmcp_ok(
        home.path(),
        &["call", "custom_tool_create", &def.to_string(), "--yes"],
    );
    let server = Server::start(home.path());
    let session = open_session(&server);
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "user_spin", "arguments": {}}})
    .to_string();
    let mut s = server.post_open(&session, &call, 20);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let started = std::time::Instant::now();
    let status = match stop {
        Stop::Cancel => {
            server
                .rpc(
                    &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                            "params": {"requestId": 9, "reason": "the person stopped it"}}),
                    &[
                        ("Mcp-Session-Id", session.as_str()),
                        ("MCP-Protocol-Version", "2025-11-25"),
                    ],
                )
                .0
        }
        Stop::CloseSession => {
            server
                .send(
                    "DELETE",
                    "/mcp",
                    &[
                        ("Authorization", &format!("Bearer {}", server.token)),
                        ("Mcp-Session-Id", session.as_str()),
                    ],
                    "",
                )
                .0
        }
    };
    assert_eq!(
        status,
        match stop {
            Stop::Cancel => 202,
            Stop::CloseSession => 204,
        }
    );
    let mut rest = String::new();
    let read = s.read_to_string(&mut rest);
    assert!(read.is_ok(), "the stream did not end: {read:?}");
    assert!(!rest.contains("\"id\":9,\"result\""), "{rest}");
    let mut history = Value::Null;
    for _ in 0..200 {
        history = common::json_out(&lmcp_ok(home.path(), &["--json", "history"]));
        if history.to_string().contains("cancel") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(history.to_string().contains("cancel"), "{history}");
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    let called = modern(
        &server,
        10,
        "tools/call",
        json!({"name": "calculate", "arguments": {"expression": "1+1"}}),
    );
    assert_eq!(called["result"]["structuredContent"]["value"], 2);
}

#[test]
fn a_long_call_is_cancelled_by_its_client() {
    a_spinning_call_stops(Stop::Cancel);
}

/// A session its client closes (`DELETE`) cancels the calls it still has running: they do
/// not run on to their own time limit for a client that is gone. (rmcp cancels a closed
/// session's requests; this holds the server to it.)
#[test]
fn closing_a_session_cancels_its_running_calls() {
    a_spinning_call_stops(Stop::CloseSession);
}

#[test]
fn a_write_is_confirmed_through_an_input_required_result_and_a_retry() {
    // the 2026-07-28 generation: the question comes back as the result, and the answer as a
    // request of its own, which may reach the server on another connection
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(home.path());
    let caps = json!({"elicitation": {"form": {}}});
    let call = json!({"name": "write_file", "arguments": {"path": "retried.txt", "content": "ok"}});
    let asked = modern_with(&server, 1, "tools/call", call.clone(), caps.clone());
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state = asked["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    let mut retry = call.clone();
    retry["requestState"] = json!(state);
    retry["inputResponses"] =
        json!({"lmcp_confirm": {"action": "accept", "content": {"allow": true}}});
    let done = modern_with(&server, 2, "tools/call", retry.clone(), caps.clone());
    assert_eq!(done["result"]["isError"], false, "{done}");
    let written = walk(home.path(), "retried.txt").expect("the file written");
    assert_eq!(std::fs::read_to_string(written).unwrap(), "ok");
    // an answer is used once
    let again = modern_with(&server, 3, "tools/call", retry, caps);
    assert!(again.to_string().contains("requestState"), "{again}");
}

#[test]
fn another_loopback_address_answers_to_its_own_name() {
    let home = tempfile::tempdir().unwrap();
    let server = Server::start_at(home.path(), "127.0.0.2:0");
    assert!(server.addr.starts_with("127.0.0.2:"), "{}", server.addr);
    let (status, _, answer) = server.rpc(&common::initialize(json!(1)), &[]);
    assert_eq!(status, 200, "{answer}");
}

/// A body past the limit is refused with 413 before it is read whole, and the server goes on.
#[test]
fn a_body_past_the_limit_is_413() {
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(home.path());
    let session = open_session(&server);
    let big = "x".repeat(4 << 20);
    let message = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "calculate", "arguments": {"expression": big}}});
    let (status, _, answer) = server.rpc(
        &message,
        &[
            ("Mcp-Session-Id", session.as_str()),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
    );
    assert_eq!(status, 413, "{answer}");
    // just under the limit is taken (and answered: calculate refuses the expression)
    let under = "1+".repeat(1 << 20) + "1";
    let message = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "calculate", "arguments": {"expression": under}}});
    let (status, _, answer) = server.rpc(
        &message,
        &[
            ("Mcp-Session-Id", session.as_str()),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
    );
    assert_eq!(status, 200, "{answer}");
    assert!(answer.get("result").is_some(), "{answer}");
}

/// Past 128 open sessions a new handshake gets 503 with what to do; the sessions already open
/// and the session-less generation still work.
#[test]
fn sessions_past_the_bound_are_503() {
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(home.path());
    let sessions: Vec<String> = (0..128).map(|_| open_session(&server)).collect();
    let (status, session, answer) = server.rpc(&common::initialize(json!(1)), &[]);
    assert_eq!((status, session), (503, None), "{answer}");
    let (_, _, body) = server.send(
        "POST",
        "/mcp",
        &[
            ("Authorization", &format!("Bearer {}", server.token)),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ],
        &common::initialize(json!(2)).to_string(),
    );
    assert!(body.contains("128 sessions are open"), "{body}");
    let (_, _, list) = server.rpc(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
        &[
            ("Mcp-Session-Id", sessions[127].as_str()),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
    );
    assert!(!names(&list).is_empty(), "{list}");
    let list = modern(&server, 4, "tools/list", json!({}));
    assert!(!names(&list).is_empty(), "{list}");
    // a handshake dressed as the session-less generation opens no session past the bound
    for version in [MODERN, "2099-01-01", "zzz"] {
        for method in ["initialize", "tools/list", "INITIALIZE "] {
            let (status, session, answer) = server.rpc(
                &common::initialize(json!(5)),
                &[("MCP-Protocol-Version", version), ("Mcp-Method", method)],
            );
            assert_eq!(session, None, "{version} {method}: {status}: {answer}");
        }
    }
    // closing one makes room for one
    let (status, _, _) = server.send(
        "DELETE",
        "/mcp",
        &[
            ("Authorization", &format!("Bearer {}", server.token)),
            ("Mcp-Session-Id", sessions[0].as_str()),
        ],
        "",
    );
    assert_eq!(status, 204);
    open_session(&server);
}

/// A session unused for `--idle-timeout` seconds is closed: its id is no longer known, and a
/// new session can be opened.
#[test]
fn an_idle_session_expires() {
    let home = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        home.path(),
        &["serve", "--http", "127.0.0.1:0", "--idle-timeout", "1"],
    );
    let session = open_session(&server);
    let in_session = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    // used within the time: still open
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (status, _, list) = server.rpc(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        &in_session,
    );
    assert_eq!(status, 200, "{list}");
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let (status, _, answer) = server.rpc(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
        &in_session,
    );
    assert_eq!(status, 404, "an expired session: {answer}");
    open_session(&server);
    // the setting is checked
    let out = lmcp(home.path(), &["serve", "--http", "--idle-timeout", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

/// A client that sends its headers too slowly is cut off (after 10 s; here after the 1 s of the
/// hidden `--header-timeout`), so idle connections cannot hold the server's connection slots.
#[test]
fn headers_sent_too_slowly_are_cut_off() {
    let home = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        home.path(),
        &["serve", "--http", "127.0.0.1:0", "--header-timeout", "1"],
    );
    let mut s = TcpStream::connect(&server.addr).unwrap();
    s.write_all(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n")
        .unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(8)))
        .unwrap();
    let started = std::time::Instant::now();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    let waited = started.elapsed();
    assert!(
        waited >= std::time::Duration::from_millis(500)
            && waited < std::time::Duration::from_secs(6),
        "closed after {waited:?}: {:?}",
        String::from_utf8_lossy(&rest)
    );
    // the server still answers others
    let (status, _, _) = server.rpc(&common::initialize(json!(1)), &[]);
    assert_eq!(status, 200);
    // the setting is checked
    for bad in ["0", "soon", "3601"] {
        let out = lmcp(home.path(), &["serve", "--http", "--header-timeout", bad]);
        assert_eq!(out.status.code(), Some(2), "--header-timeout {bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("invalid value") && err.contains("--header-timeout"),
            "{err}"
        );
    }
}

/// Handshakes whose headers all arrive before their bodies pass the check in front together;
/// the bound still holds where sessions are made.
#[test]
fn handshakes_sent_together_stay_within_the_bound() {
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(home.path());
    let body = common::initialize(json!(1)).to_string();
    let head = format!(
        "POST /mcp HTTP/1.0\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: \
         application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: \
         {}\r\n\r\n",
        server.addr,
        server.token,
        body.len()
    );
    let mut streams: Vec<TcpStream> = (0..160)
        .map(|_| {
            let mut s = TcpStream::connect(&server.addr).unwrap();
            s.write_all(head.as_bytes()).unwrap();
            s
        })
        .collect();
    // every head has been read before any body comes
    std::thread::sleep(std::time::Duration::from_millis(500));
    for s in &mut streams {
        s.write_all(body.as_bytes()).unwrap();
    }
    let (mut opened, mut refused) = (0, 0);
    for mut s in streams {
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        if answer.to_lowercase().contains("mcp-session-id:") {
            opened += 1;
        } else if answer.starts_with("HTTP/1.0 503") || answer.starts_with("HTTP/1.1 503") {
            refused += 1;
        }
    }
    assert_eq!((opened, refused), (128, 32));
}

/// A session is idle only when nothing of it is in progress: a call that runs longer than
/// `--idle-timeout` and a stream left open both keep it; once they end, it expires.
#[test]
fn a_session_in_use_does_not_expire() {
    let home = tempfile::tempdir().unwrap();
    lmcp_ok(home.path(), &["grants", "allow", "run_command"]);
    let server = Server::start_with(
        home.path(),
        &[
            "serve",
            "--http",
            "127.0.0.1:0",
            "--profile",
            "full",
            "--idle-timeout",
            "1",
        ],
    );
    let session = open_session(&server);
    let in_session = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    // a call of 3 s: answered in full, and the session is still there after it
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "run_command", "arguments": {"program": "sleep", "args": ["3"]}}});
    let mut s = server.post_open(&session, &call.to_string(), 30);
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(
        answer.contains("\"result\"") && !answer.contains("\"isError\":true"),
        "{answer}"
    );
    let (status, _, list) = server.rpc(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
        &in_session,
    );
    assert_eq!(status, 200, "{list}");
    // a stream left open for 3 s keeps it too
    let stream = server.listen(&session);
    std::thread::sleep(std::time::Duration::from_secs(3));
    let (status, _, list) = server.rpc(
        &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}),
        &in_session,
    );
    assert_eq!(status, 200, "{list}");
    drop(stream);
    // nothing in progress: it expires
    std::thread::sleep(std::time::Duration::from_secs(3));
    let (status, _, answer) = server.rpc(
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}),
        &in_session,
    );
    assert_eq!(status, 404, "{answer}");
}

/// A hard link names the file it links with another path: one in the workspace to lmcp's HTTP
/// token or config, or to a file in an added root, reads nothing over HTTP; from the command
/// line, lmcp's own files stay out of reach by any name, and a link to the person's own file
/// in a root is theirs to read.
#[test]
fn hard_links_reach_neither_lmcp_own_files_nor_other_roots() {
    let home = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("notes.txt"), "private notes").unwrap();
    lmcp_ok(
        home.path(),
        &["roots", "add", outside.path().to_str().unwrap()],
    );
    let server = Server::start(home.path());
    let workspace = home.path().join("data/workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let token = home.path().join("config/http-token");
    assert!(token.exists(), "the server made its token");
    let secret = std::fs::read_to_string(&token).unwrap();
    let config = home.path().join("config/config.json");
    lmcp_ok(home.path(), &["grants", "allow", "calculate"]);
    std::fs::hard_link(&token, workspace.join("token.txt")).unwrap();
    std::fs::hard_link(&config, workspace.join("settings.txt")).unwrap();
    std::fs::hard_link(
        outside.path().join("notes.txt"),
        workspace.join("notes.txt"),
    )
    .unwrap();
    for (id, name) in [(1, "token.txt"), (2, "settings.txt"), (3, "notes.txt")] {
        let read = modern(
            &server,
            id,
            "tools/call",
            json!({"name": "read_file", "arguments": {"path": name}}),
        );
        let text = read.to_string();
        assert_eq!(read["result"]["isError"], true, "{name}: {text}");
        assert!(text.contains("hard links"), "{name}: {text}");
        assert!(
            !text.contains(secret.trim()) && !text.contains("private notes"),
            "{text}"
        );
    }
    // from the command line: lmcp's own files by no name, the person's own as ever
    for name in ["token.txt", "settings.txt"] {
        let args = json!({"path": name}).to_string();
        let out = crate::common::lmcp(home.path(), &["call", "read_file", &args]);
        let both = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_ne!(out.status.code(), Some(0), "{name}: {both}");
        assert!(both.contains("lmcp's own settings or data"), "{both}");
        assert!(!both.contains(secret.trim()), "{both}");
    }
    let args = json!({"path": "notes.txt"}).to_string();
    let out = lmcp_ok(home.path(), &["call", "read_file", &args]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("private notes"));
}
