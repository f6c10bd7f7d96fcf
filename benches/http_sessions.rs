//! Many clients at once over HTTP: `lmcp serve --http` against a bare rmcp Streamable HTTP
//! echo server (`benches/rmcp_echo.rs --http`: the same SDK, transport and HTTP stack, no gate,
//! no token, no history), with 1, 8 and 50 concurrent sessions each making sequential calls,
//! in 3 alternating rounds. Each session keeps one HTTP/1.1 connection (as SDK clients do).
//! Reports the medians of calls/s over all sessions, the p50 and p99 latency of a call as its
//! client sees it, and the CPU the clients and the server used (a share of one core: the
//! clients share the machine's cores with the server).
//!
//! Run with `cargo bench --bench rmcp_echo --no-run && cargo bench --bench http_sessions`
//! (calls per session: `-- 400`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
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

struct Figures {
    per_second: f64,
    p50: Duration,
    p99: Duration,
    /// CPU time of this process (the clients) and of the server, each as a share of one
    /// core over the wall time of the run.
    client_cpu: f64,
    server_cpu: f64,
}

/// User plus system CPU time of this process so far.
fn own_cpu() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// User plus system CPU time of process `pid` so far (Linux: /proc/PID/stat, in clock ticks).
fn cpu_of(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // the fields after the command name, which is in parentheses and may hold spaces
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name and state
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_nanos((ticks(11) + ticks(12)) * 1_000_000_000 / hz)
}

/// Runs `sessions` clients making `calls` calls each against the server `pid`; `open` opens
/// one session, `call_one` makes call `id` and says whether the answer is right.
fn load<S: Send + 'static>(
    sessions: usize,
    calls: u64,
    pid: u32,
    open: impl Fn() -> S + Send + Sync + 'static,
    call_one: fn(&mut S, u64) -> bool,
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
                    assert!(call_one(&mut s, id), "a wrong answer to call {id}");
                    took.push(t.elapsed());
                }
                took
            })
        })
        .collect();
    start.wait();
    let (client0, server0) = (own_cpu(), cpu_of(pid));
    let t = Instant::now();
    let mut all: Vec<Duration> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    let wall = t.elapsed();
    let (client, server) = (own_cpu() - client0, cpu_of(pid) - server0);
    all.sort();
    let at = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)];
    Figures {
        per_second: all.len() as f64 / wall.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
        client_cpu: client.as_secs_f64() / wall.as_secs_f64(),
        server_cpu: server.as_secs_f64() / wall.as_secs_f64(),
    }
}

/// The bare rmcp HTTP echo (`benches/rmcp_echo.rs --http`): `RMCP_ECHO`, or the newest one
/// cargo built beside this bench.
fn echo_binary() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("RMCP_ECHO") {
        return p.into();
    }
    let deps = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    std::fs::read_dir(&deps)
        .unwrap()
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("rmcp_echo-") && !name.contains('.')
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .map(|e| e.path())
        .expect("no rmcp_echo bench binary: `cargo bench --no-run --bench rmcp_echo` first")
}

/// A server started for one run: the address it says it serves on, and its process.
struct Server {
    child: std::process::Child,
    addr: String,
}

impl Server {
    fn start(mut cmd: Command) -> Server {
        let mut child = cmd.stderr(Stdio::piped()).spawn().unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|r| r.split("/mcp").next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        Server { child, addr }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `lmcp serve --http` with history on, its token, and the figures of one run.
fn lmcp_run(sessions: usize, calls: u64) -> Figures {
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
    let mut cmd = lmcp();
    cmd.args(["serve", "--http", "127.0.0.1:0"])
        .env("LMCP_HOME", home.path());
    let server = Server::start(cmd);
    let addr = server.addr.clone();
    load(
        sessions,
        calls,
        server.child.id(),
        move || HttpSession::open(&addr, &token),
        |s, id| s.post(&call(id)).contains(&format!("\"value\":{}", id * 2)),
    )
}

/// The bare rmcp echo over HTTP, the same clients calling `echo`.
fn echo_run(sessions: usize, calls: u64) -> Figures {
    let mut cmd = Command::new(echo_binary());
    cmd.args(["--http", "127.0.0.1:0"]);
    let server = Server::start(cmd);
    let addr = server.addr.clone();
    load(
        sessions,
        calls,
        server.child.id(),
        move || HttpSession::open(&addr, "none"),
        |s, id| {
            let text = format!("{id}");
            s.post(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": text}}}))
                .contains(&format!("\"text\":\"{id}\""))
        },
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let calls: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(200);
    const ROUNDS: usize = 3;
    println!(
        "{calls} sequential calls per session; medians of {ROUNDS} alternating rounds \
         (lmcp: calculate through the gate, history on; echo: bare rmcp Streamable HTTP)"
    );
    println!(
        "{:>8}  {:>6}  {:>9}  {:>8}  {:>8}  {:>10}  {:>10}",
        "sessions", "server", "calls/s", "p50 ms", "p99 ms", "client cpu", "server cpu"
    );
    let mut per_second = std::collections::BTreeMap::new();
    for sessions in [1usize, 8, 50] {
        let (mut ours, mut echo) = (Vec::new(), Vec::new());
        // HTTP_SESSIONS_ONLY=lmcp (or echo) runs one side alone, for a profiler
        let only = std::env::var("HTTP_SESSIONS_ONLY").unwrap_or_default();
        if !only.is_empty() {
            let f = if only == "echo" {
                echo_run(sessions, calls)
            } else {
                lmcp_run(sessions, calls)
            };
            println!("{sessions:>8}  {only:>6}  {:>9.0}", f.per_second);
            continue;
        }
        for round in 0..ROUNDS {
            // alternating which goes first, so a drift of the machine falls on both
            if round % 2 == 0 {
                ours.push(lmcp_run(sessions, calls));
                echo.push(echo_run(sessions, calls));
            } else {
                echo.push(echo_run(sessions, calls));
                ours.push(lmcp_run(sessions, calls));
            }
        }
        let summary = |runs: &[Figures]| {
            (
                median(runs.iter().map(|f| f.per_second).collect()),
                median(runs.iter().map(|f| f.p50.as_secs_f64() * 1e3).collect()),
                median(runs.iter().map(|f| f.p99.as_secs_f64() * 1e3).collect()),
                median(runs.iter().map(|f| f.client_cpu).collect()),
                median(runs.iter().map(|f| f.server_cpu).collect()),
            )
        };
        let (o, e) = (summary(&ours), summary(&echo));
        for (name, f) in [("lmcp", o), ("echo", e)] {
            println!(
                "{sessions:>8}  {name:>6}  {:>9.0}  {:>8.3}  {:>8.3}  {:>9.0}%  {:>9.0}%",
                f.0,
                f.1,
                f.2,
                f.3 * 100.0,
                f.4 * 100.0
            );
        }
        println!(
            "{sessions:>8}  ratio   {:>8.2}x  {:>7.2}x  {:>7.2}x   (calls/s goal >= 1.0x, p99 goal <= 2x)",
            o.0 / e.0,
            o.1 / e.1,
            o.2 / e.2
        );
        per_second.insert(sessions, (o.0, e.0));
    }
    if per_second.is_empty() {
        return;
    }
    let (o8, e8) = per_second[&8];
    let (o50, e50) = per_second[&50];
    println!(
        "50 sessions against 8: lmcp {:.2}x, echo {:.2}x (goal for lmcp >= 0.9x)",
        o50 / o8,
        e50 / e8
    );
}
