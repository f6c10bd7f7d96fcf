//! Many clients at once: `lmcp serve --http` against `lmcp serve` over stdio, with 1, 8 and 50
//! concurrent sessions each making sequential `calculate` calls, in one run. Over HTTP each
//! session keeps one HTTP/1.1 connection (as SDK clients do); over stdio each session is a
//! server process of its own (stdio serves one client). Reports calls/s over all sessions and
//! the p50 and p99 latency of a call as its client sees it. History is on for both.
//!
//! Run with `cargo bench --bench http_sessions` (calls per session: `-- 400`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn lmcp() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lmcp"));
    c.env_remove("XDG_CONFIG_HOME").env_remove("XDG_DATA_HOME");
    c
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}})
}

fn call(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "calculate", "arguments": {"expression": format!("{id} * 2")}}})
}

/// One HTTP/1.1 connection of one session.
struct HttpSession {
    conn: BufReader<TcpStream>,
    addr: String,
    token: String,
    session: Option<String>,
}

impl HttpSession {
    fn open(addr: &str, token: &str) -> HttpSession {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        let mut s = HttpSession {
            conn: BufReader::new(stream),
            addr: addr.to_string(),
            token: token.to_string(),
            session: None,
        };
        s.post(&initialize());
        s.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    /// Posts a message; the body of the answer.
    fn post(&mut self, message: &Value) -> String {
        let body = message.to_string();
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: \
             application/json\r\nAccept: application/json, text/event-stream\r\n\
             MCP-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\n",
            self.addr,
            self.token,
            body.len()
        );
        if let Some(id) = &self.session {
            req.push_str(&format!("Mcp-Session-Id: {id}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        self.conn.get_mut().write_all(req.as_bytes()).unwrap();
        let (mut length, mut chunked) = (None, false);
        let mut line = String::new();
        loop {
            line.clear();
            self.conn.read_line(&mut line).unwrap();
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
                match k.as_str() {
                    "content-length" => length = v.parse::<usize>().ok(),
                    "transfer-encoding" => chunked = v.contains("chunked"),
                    "mcp-session-id" => self.session = Some(v.to_string()),
                    _ => {}
                }
            }
        }
        let mut out = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.conn.read_line(&mut line).unwrap();
                let size = usize::from_str_radix(line.trim(), 16).unwrap();
                let mut chunk = vec![0; size + 2];
                self.conn.read_exact(&mut chunk).unwrap();
                if size == 0 {
                    break;
                }
                out.extend_from_slice(&chunk[..size]);
            }
        } else if let Some(n) = length {
            out.resize(n, 0);
            self.conn.read_exact(&mut out).unwrap();
        }
        String::from_utf8(out).unwrap()
    }
}

/// One stdio session: a server process of its own.
struct StdioSession {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
}

impl StdioSession {
    fn open(home: &Path) -> StdioSession {
        let mut child = lmcp()
            .args(["serve"])
            .env("LMCP_HOME", home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut s = StdioSession { child, out };
        s.send(&initialize());
        s.answer();
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(format!("{message}\n").as_bytes()).unwrap();
    }

    /// The next answer to a request (notifications skipped).
    fn answer(&mut self) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            self.out.read_line(&mut line).unwrap();
            if line.contains("\"id\"") {
                return line.clone();
            }
        }
    }
}

impl Drop for StdioSession {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

struct Figures {
    per_second: f64,
    p50: Duration,
    p99: Duration,
}

/// Runs `sessions` clients making `calls` calls each; `make` opens one and returns a caller.
fn load<S: Send + 'static>(
    sessions: usize,
    calls: u64,
    open: impl Fn() -> S + Send + Sync + 'static,
    call_one: fn(&mut S, u64) -> String,
) -> Figures {
    let open = std::sync::Arc::new(open);
    let start = std::sync::Arc::new(std::sync::Barrier::new(sessions + 1));
    let workers: Vec<_> = (0..sessions)
        .map(|_| {
            let (open, start) = (std::sync::Arc::clone(&open), std::sync::Arc::clone(&start));
            std::thread::spawn(move || {
                let mut s = open();
                start.wait();
                let mut took = Vec::with_capacity(calls as usize);
                for id in 1..=calls {
                    let t = Instant::now();
                    let answer = call_one(&mut s, id);
                    took.push(t.elapsed());
                    assert!(
                        answer.contains(&format!("\"value\":{}", id * 2)),
                        "{answer}"
                    );
                }
                took
            })
        })
        .collect();
    start.wait();
    let t = Instant::now();
    let mut all: Vec<Duration> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    let wall = t.elapsed();
    all.sort();
    let at = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)];
    Figures {
        per_second: all.len() as f64 / wall.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
    }
}

fn main() {
    let calls: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(200);
    println!("{calls} sequential calculate calls per session");
    println!(
        "{:>8}  {:>6}  {:>10}  {:>9}  {:>9}",
        "sessions", "door", "calls/s", "p50 ms", "p99 ms"
    );
    for sessions in [1usize, 8, 50] {
        // over HTTP: one server
        let home = tempfile::tempdir().unwrap();
        let token = String::from_utf8(
            lmcp()
                .args(["serve", "--http", "--show-token"])
                .env("LMCP_HOME", home.path())
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim()
        .to_string();
        let mut server = lmcp()
            .args(["serve", "--http", "127.0.0.1:0"])
            .env("LMCP_HOME", home.path())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(server.stderr.take().unwrap());
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|r| r.split("/mcp").next())
            .unwrap()
            .to_string();
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        let http = load(
            sessions,
            calls,
            move || HttpSession::open(&addr, &token),
            |s, id| s.post(&call(id)),
        );
        let _ = server.kill();
        let _ = server.wait();
        // over stdio: a server per session, one history between them
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().to_path_buf();
        let stdio = load(
            sessions,
            calls,
            move || StdioSession::open(&dir),
            |s, id| {
                s.send(&call(id));
                s.answer()
            },
        );
        for (door, f) in [("http", http), ("stdio", stdio)] {
            println!(
                "{sessions:>8}  {door:>6}  {:>10.0}  {:>9.3}  {:>9.3}",
                f.per_second,
                f.p50.as_secs_f64() * 1e3,
                f.p99.as_secs_f64() * 1e3
            );
        }
    }
}
