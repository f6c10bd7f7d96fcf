//! One running server: its child process, lmcp's rmcp client of it, and calls to it.
//!
//! What the server sends is data: its messages are read through [`LineGuard`], which ends the
//! connection on a line over [`MAX_MESSAGE`] instead of holding it; its stderr goes to a log
//! file rotated at [`MAX_LOG`] (never to lmcp's own output), and its last lines are kept to
//! explain a crash; its questions (elicitation) are declined, never answered yes for the
//! person; its notifications cost a flag each, whatever their number.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientCapabilities, ClientConfig, ClientNotification, ClientRequest, ElicitRequestParams,
    ElicitResult, ElicitationAction, Implementation, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ServerResult,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, PeerRequestOptions, RequestContext,
    RunningService,
};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, ReadBuf};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::gate::{Answer, CallContext, ConfirmRequest};
use crate::registry::Effect;

/// Largest message a server may send (a tool's result included): 16 MiB.
pub const MAX_MESSAGE: usize = 16 << 20;
/// Most tools one server may list.
pub const MAX_TOOLS: usize = 1000;
/// Most pages of a tool list read before the server is refused.
const MAX_PAGES: usize = 200;
/// The stderr log is rotated past this size.
pub const MAX_LOG: u64 = 1 << 20;
/// How long a server may take to start and answer the handshake and its tool list.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Lines of stderr kept to explain a crash.
const TAIL_LINES: usize = 12;

/// How to reach a server, with its name (for messages and its log file).
#[derive(Debug, Clone)]
pub struct Launch {
    /// The server's name.
    pub server: String,
    /// A command or a URL.
    pub reach: Reach,
}

/// Where a server is: a command lmcp starts, or a URL it connects to.
#[derive(Debug, Clone)]
pub enum Reach {
    /// A program on this machine, spoken to over its stdin and stdout.
    Command {
        /// The program and its arguments.
        command: Vec<String>,
        /// Variables set for it on top of the person's own (secrets included, never shown).
        env: Vec<(String, String)>,
        /// Where its stderr goes.
        log: PathBuf,
        /// The forms of its secret values, masked in what it prints.
        secrets: Vec<String>,
    },
    /// A Streamable HTTP endpoint.
    Http {
        /// Its URL.
        url: String,
        /// Headers sent with every request (secrets included, never shown).
        headers: Vec<(String, String)>,
    },
}

/// What the connection learned that the rest of lmcp acts on: set by the client's handler,
/// read by the manager.
#[derive(Default)]
pub struct Signals {
    /// The server said its tool list changed.
    pub tools_changed: AtomicBool,
    /// Woken on every change worth acting on (a list change, a broken connection).
    pub notify: tokio::sync::Notify,
    /// Why the connection can no longer be used (an oversized message).
    pub broken: Mutex<Option<String>>,
}

/// A running server.
pub struct Connection {
    client: RunningService<RoleClient, UpstreamClient>,
    /// The server's process, for a server lmcp started (none over HTTP).
    child: Mutex<Option<tokio::process::Child>>,
    has_child: bool,
    tail: Arc<Mutex<VecDeque<String>>>,
    /// Shared with the client's handler and the message reader.
    pub signals: Arc<Signals>,
    server: String,
    /// Cancel notices still being sent (see [`CancelOnDrop`]).
    pending_cancels: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    /// The calls in progress, shared with the client's handler.
    active: Arc<ActiveCalls>,
}

impl Connection {
    /// Starts the server (or connects to it) and completes the handshake, within
    /// [`START_TIMEOUT`].
    pub async fn start(launch: &Launch) -> Result<Arc<Connection>> {
        let failed = |message: String| Error::Tool {
            tool: format!("mcp__{}", launch.server),
            message: format!("the MCP server `{}`: {message}", launch.server),
        };
        let signals = Arc::new(Signals::default());
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let active = Arc::new(ActiveCalls::default());
        let handler = UpstreamClient {
            signals: Arc::clone(&signals),
            server: launch.server.clone(),
            active: Arc::clone(&active),
        };
        let mut child = None;
        let started = match &launch.reach {
            Reach::Command {
                command,
                env,
                log,
                secrets,
            } => {
                let (program, args) = command
                    .split_first()
                    .ok_or_else(|| failed("it has no command".into()))?;
                let mut cmd = tokio::process::Command::new(program);
                cmd.args(args)
                    .envs(env.iter().map(|(k, v)| (k, v)))
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .kill_on_drop(true);
                let spawned = child.insert(cmd.spawn().map_err(|e| {
                    failed(format!(
                        "could not start `{}`: {e}",
                        crate::text::escape_controls(program)
                    ))
                })?);
                if let Some(stderr) = spawned.stderr.take() {
                    tokio::spawn(keep_stderr(
                        stderr,
                        log.clone(),
                        Arc::clone(&tail),
                        secrets.clone(),
                    ));
                }
                let (Some(stdout), Some(stdin)) = (spawned.stdout.take(), spawned.stdin.take())
                else {
                    return Err(failed(
                        "its standard input and output could not be opened".into(),
                    ));
                };
                let reader = LineGuard {
                    inner: stdout,
                    line: 0,
                    signals: Arc::clone(&signals),
                };
                tokio::time::timeout(
                    START_TIMEOUT,
                    handler.serve_with_lifecycle((reader, stdin), ClientLifecycleMode::Initialize),
                )
                .await
            }
            Reach::Http { url, headers } => {
                let transport = http_transport(url, headers).map_err(failed)?;
                tokio::time::timeout(
                    START_TIMEOUT,
                    handler.serve_with_lifecycle(transport, ClientLifecycleMode::Initialize),
                )
                .await
            }
        };
        let client = match started {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => {
                // give its stderr a moment to say why
                tokio::time::sleep(Duration::from_millis(100)).await;
                return Err(failed(format!(
                    "it did not complete the MCP handshake: {e}{}",
                    last_lines(&tail)
                )));
            }
            Err(_) => {
                return Err(failed(format!(
                    "it did not answer the MCP handshake within {} s{}",
                    START_TIMEOUT.as_secs(),
                    last_lines(&tail)
                )));
            }
        };
        Ok(Arc::new(Connection {
            client,
            has_child: child.is_some(),
            child: Mutex::new(child),
            tail,
            signals,
            server: launch.server.clone(),
            pending_cancels: Arc::default(),
            active,
        }))
    }

    /// Whether the connection still works: its process runs, its client runs and no bound
    /// was broken.
    pub fn is_alive(&self) -> bool {
        let running = !self.has_child
            || self
                .child
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_mut()
                .is_some_and(|c| matches!(c.try_wait(), Ok(None)));
        running && !self.client.is_closed() && self.broken_reason().is_none()
    }

    /// Marks the connection unusable (the server's end closed): the next call starts it again.
    fn mark_broken(&self, why: &str) {
        let mut broken = self
            .signals
            .broken
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if broken.is_none() {
            *broken = Some(why.to_string());
        }
    }

    /// The server's tool definitions, as JSON, at most [`MAX_TOOLS`] of them.
    pub async fn list_tools(&self) -> Result<Vec<Value>> {
        let mut out = Vec::new();
        let mut cursor = None;
        let mut bytes = 0usize;
        // one bound for the whole list, however many pages it comes in
        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        for _ in 0..MAX_PAGES {
            let params = cursor
                .take()
                .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let page = tokio::time::timeout_at(deadline, self.client.list_tools(params))
                .await
                .map_err(|_| {
                    self.failure(format!(
                        "it did not list its tools within {} s",
                        START_TIMEOUT.as_secs()
                    ))
                })?
                .map_err(|e| self.failure(format!("it could not list its tools: {e}")))?;
            for tool in page.tools {
                if out.len() == MAX_TOOLS {
                    return Err(Error::Limit {
                        what: format!(
                            "the MCP server `{}` lists more than {MAX_TOOLS} tools",
                            self.server
                        ),
                        limit: format!("{MAX_TOOLS} tools per server"),
                    });
                }
                let definition = serde_json::to_value(&tool).unwrap_or(Value::Null);
                bytes += crate::gate::json_cost(&definition);
                if bytes > MAX_MESSAGE {
                    return Err(Error::Limit {
                        what: format!(
                            "the tool list of the MCP server `{}` is over {} MiB",
                            self.server,
                            MAX_MESSAGE >> 20
                        ),
                        limit: format!("{} MiB of tool definitions per server", MAX_MESSAGE >> 20),
                    });
                }
                out.push(definition);
            }
            match page.next_cursor {
                Some(c) if !c.is_empty() => cursor = Some(c),
                _ => return Ok(out),
            }
        }
        Err(Error::Limit {
            what: format!(
                "the MCP server `{}` lists its tools in more than {MAX_PAGES} pages",
                self.server
            ),
            limit: format!("{MAX_PAGES} pages"),
        })
    }

    /// Calls one of the server's tools by its own name. `cancel` sends
    /// `notifications/cancelled` upstream and ends the call; so does dropping the future (a
    /// deadline).
    pub async fn call(
        &self,
        tool: &str,
        args: serde_json::Map<String, Value>,
        on_behalf: Active,
    ) -> Result<rmcp::model::CallToolResult> {
        let cancel = on_behalf.ctx.cancel_token().clone();
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new(tool.to_string()).with_arguments(args),
        ));
        let mut handle = self
            .client
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .map_err(|e| {
                self.mark_broken("the connection closed");
                self.failure(format!("the call could not be sent: {e}"))
            })?;
        // the server's questions and progress during this call go to its caller
        let _active = self.active.enter(handle.progress_token.clone(), on_behalf);
        // a call whose future is dropped (its deadline passed) is cancelled upstream too
        let mut guard = CancelOnDrop {
            peer: Some(handle.peer.clone()),
            id: handle.id.clone(),
            pending: Arc::clone(&self.pending_cancels),
        };
        let response = tokio::select! {
            r = &mut handle.rx => r,
            _ = cancel.cancelled() => {
                if let Some(peer) = guard.peer.take() {
                    let _ = peer
                        .send_notification(cancelled(&guard.id, "cancelled by lmcp"))
                        .await;
                }
                return Err(Error::Cancelled);
            }
            _ = self.broken() => {
                guard.peer = None;
                let why = self.broken_reason().unwrap_or_default();
                return Err(Error::Limit { what: why, limit: format!("{} MiB per message", MAX_MESSAGE >> 20) });
            }
        };
        guard.peer = None;
        match response {
            Ok(Ok(ServerResult::CallToolResult(result))) => Ok(result),
            Ok(Ok(_)) => {
                Err(self
                    .failure("it answered the call with something else than a tool result".into()))
            }
            Ok(Err(e)) => Err(self.failure(format!("the call failed: {e}"))),
            Err(_) => {
                if let Some(why) = self.broken_reason() {
                    return Err(Error::Limit {
                        what: why,
                        limit: format!("{} MiB per message", MAX_MESSAGE >> 20),
                    });
                }
                self.mark_broken("the server stopped");
                tokio::time::sleep(Duration::from_millis(100)).await;
                Err(self.failure(format!(
                    "the server stopped during the call{}",
                    last_lines(&self.tail)
                )))
            }
        }
    }

    async fn broken(&self) {
        loop {
            let notified = self.signals.notify.notified();
            if self.broken_reason().is_some() {
                return;
            }
            notified.await;
        }
    }

    fn broken_reason(&self) -> Option<String> {
        self.signals
            .broken
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn failure(&self, message: String) -> Error {
        Error::Tool {
            tool: format!("mcp__{}", self.server),
            message: format!("the MCP server `{}`: {message}", self.server),
        }
    }

    /// Ends the server: its input is closed, then it is killed if it has not ended.
    pub async fn stop(&self) {
        // the cancel notices of calls that timed out go first, within a second
        let pending = std::mem::take(
            &mut *self
                .pending_cancels
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        for task in pending {
            let _ = tokio::time::timeout(Duration::from_secs(1), task).await;
        }
        let child = self.child.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.client.cancellation_token().cancel();
        if let Some(mut child) = child
            && tokio::time::timeout(Duration::from_millis(500), child.wait())
                .await
                .is_err()
        {
            let _ = child.kill().await;
        }
    }

    /// The child's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .and_then(|c| c.id())
    }
}

/// `notifications/cancelled` for a request.
fn cancelled(id: &rmcp::model::RequestId, reason: &str) -> ClientNotification {
    ClientNotification::CancelledNotification(CancelledNotification::new(
        CancelledNotificationParam::new(Some(id.clone()), Some(reason.to_string())),
    ))
}

/// rmcp's Streamable HTTP client on lmcp's HTTP stack (`crate::net`), with the server's headers
/// and lmcp's bound on messages. `Authorization: Bearer TOKEN` goes as rmcp's auth header.
fn http_transport(
    url: &str,
    headers: &[(String, String)],
) -> std::result::Result<StreamableHttpClientTransport<reqwest::Client>, String> {
    let client = crate::net::client(None)
        // rmcp's own choice: a pooled connection whose last body was not read stalls ~40 ms
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| format!("the HTTP client could not be made: {e}"))?;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("authorization")
            && let Some(token) = value.strip_prefix("Bearer ")
        {
            config = config.auth_header(token.to_string());
            continue;
        }
        let name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            format!(
                "`{}` is not a header name",
                crate::text::escape_controls(name)
            )
        })?;
        let value = http::HeaderValue::from_str(value)
            .map_err(|_| format!("the value of the header `{name}` is not a header value"))?;
        config.custom_headers.insert(name, value);
    }
    config.max_sse_event_size = MAX_MESSAGE;
    config.max_json_response_size = MAX_MESSAGE;
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

/// Sends `notifications/cancelled` for a request when dropped (a call whose deadline passed),
/// unless disarmed (`peer` taken). The sending runs as a task of its own, kept with the
/// connection so that [`Connection::stop`] lets it finish before the server's input closes.
struct CancelOnDrop {
    peer: Option<rmcp::service::Peer<RoleClient>>,
    id: rmcp::model::RequestId,
    pending: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else { return };
        let notification = cancelled(&self.id, "the call's deadline passed");
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let task = rt.spawn(async move {
                let _ = peer.send_notification(notification).await;
            });
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            pending.retain(|t| !t.is_finished());
            pending.push(task);
        }
    }
}

/// The stderr lines kept, as a suffix for an error message.
fn last_lines(tail: &Arc<Mutex<VecDeque<String>>>) -> String {
    let tail = tail.lock().unwrap_or_else(|p| p.into_inner());
    if tail.is_empty() {
        return String::new();
    }
    let mut out = String::from("; its last words on stderr:");
    for line in tail.iter() {
        out.push_str("\n  ");
        out.push_str(&crate::text::escape_controls(line));
    }
    out
}

/// Copies a server's stderr to its log file (readable by the person only, rotated past
/// [`MAX_LOG`] to `NAME.log.1`), keeping the last lines in memory; lines are cut at 1 KiB. The
/// server's secret values are masked before either: a server that prints its token shows
/// `********` in errors, listings and the log.
async fn keep_stderr(
    stderr: tokio::process::ChildStderr,
    log: PathBuf,
    tail: Arc<Mutex<VecDeque<String>>>,
    secrets: Vec<String>,
) {
    let mut lines = tokio::io::BufReader::new(stderr);
    let mut file = open_log(&log).await;
    let mut size = match &file {
        Some(f) => f.metadata().await.map(|m| m.len()).unwrap_or(0),
        None => 0,
    };
    let mut buf = Vec::new();
    loop {
        buf.clear();
        // bounded: a line without an end is taken 4 KiB at a time
        let n = match read_bounded_line(&mut lines, &mut buf, 4096).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let line = String::from_utf8_lossy(&buf[..n]);
        let masked = crate::text::redact(&line, &secrets).into_owned();
        let mut text: String = masked.trim_end().chars().take(1024).collect();
        text.truncate(text.trim_end().len());
        {
            let mut tail = tail.lock().unwrap_or_else(|p| p.into_inner());
            if tail.len() == TAIL_LINES {
                tail.pop_front();
            }
            tail.push_back(text);
        }
        let n = masked.len();
        if size + n as u64 > MAX_LOG {
            let _ = tokio::fs::rename(&log, log.with_extension("log.1")).await;
            file = open_log(&log).await;
            size = 0;
        }
        if let Some(f) = file.as_mut()
            && f.write_all(masked.as_bytes()).await.is_ok()
        {
            size += n as u64;
        }
    }
}

async fn open_log(path: &std::path::Path) -> Option<tokio::fs::File> {
    if let Some(dir) = path.parent() {
        let _ = tokio::fs::create_dir_all(dir).await;
    }
    let mut options = tokio::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    options.mode(0o600);
    options.open(path).await.ok()
}

/// Reads up to a newline or `max` bytes, whichever comes first.
async fn read_bounded_line<R: tokio::io::AsyncBufRead + Unpin>(
    r: &mut R,
    out: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<usize> {
    loop {
        let available = r.fill_buf().await?;
        if available.is_empty() {
            return Ok(out.len());
        }
        let room = max - out.len();
        let take = available.len().min(room);
        if let Some(i) = memchr::memchr(b'\n', &available[..take]) {
            out.extend_from_slice(&available[..=i]);
            r.consume(i + 1);
            return Ok(out.len());
        }
        out.extend_from_slice(&available[..take]);
        r.consume(take);
        if out.len() == max {
            return Ok(out.len());
        }
    }
}

/// The server's stdout as rmcp reads it, ended (as if the server had closed it) at the first
/// line longer than [`MAX_MESSAGE`]: such a message is never held, and the calls waiting on it
/// fail with the limit named.
struct LineGuard<R> {
    inner: R,
    /// Bytes since the last newline.
    line: usize,
    signals: Arc<Signals>,
}

impl<R: AsyncRead + Unpin> AsyncRead for LineGuard<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self
            .signals
            .broken
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
        {
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let new = &buf.filled()[before..];
                // the longest line this chunk shows: the one it ends (begun before it), or the
                // one it leaves open; lines wholly inside a chunk are shorter than the chunk
                let longest = match (memchr::memchr(b'\n', new), memchr::memrchr(b'\n', new)) {
                    (Some(first), Some(last)) => {
                        let ended = this.line + first;
                        this.line = new.len() - last - 1;
                        ended.max(this.line)
                    }
                    _ => {
                        this.line += new.len();
                        this.line
                    }
                };
                if longest >= MAX_MESSAGE {
                    *this
                        .signals
                        .broken
                        .lock()
                        .unwrap_or_else(|p| p.into_inner()) = Some(format!(
                        "the MCP server sent a message over {} MiB; it was stopped",
                        MAX_MESSAGE >> 20
                    ));
                    this.signals.notify.notify_waiters();
                    buf.set_filled(before);
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

/// A call in progress on a server, for what the server does during it: its questions go to the
/// call's person, labelled as the server's, and its progress to the call's progress sink.
pub struct Active {
    /// The call's context (its confirmer, progress sink and cancellation).
    pub ctx: CallContext,
    /// The tool's lmcp name.
    pub tool: String,
    /// The tool's effect, as shown.
    pub effect: Effect,
}

/// The calls in progress on one connection, by their progress tokens.
#[derive(Default)]
struct ActiveCalls {
    calls: Mutex<Vec<InProgress>>,
}

/// One call in progress: its progress token, what it is, and when its progress was last passed
/// on.
type InProgress = (ProgressToken, Arc<Active>, Mutex<Option<Instant>>);

/// Removes a call from [`ActiveCalls`] when dropped.
struct Entered<'a> {
    calls: &'a ActiveCalls,
    token: ProgressToken,
}

impl ActiveCalls {
    fn enter(&self, token: ProgressToken, active: Active) -> Entered<'_> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).push((
            token.clone(),
            Arc::new(active),
            Mutex::new(None),
        ));
        Entered { calls: self, token }
    }

    /// The one call in progress, which a server's question can only be about. MCP does not
    /// say which call a question belongs to: with two or more in progress (sessions of
    /// `serve --http` share a server) it cannot be told whose it is, and is asked of nobody.
    fn only(&self) -> Option<Arc<Active>> {
        let calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        match calls.as_slice() {
            [(_, a, _)] => Some(Arc::clone(a)),
            _ => None,
        }
    }

    /// Passes progress on to the call it is for, at most ten reports a second (and always the
    /// last, when the server says the total is reached).
    fn progress(&self, p: &ProgressNotificationParam) {
        let calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        let Some((_, active, last)) = calls.iter().find(|(t, _, _)| t == &p.progress_token) else {
            return;
        };
        let done = p.total.is_some_and(|t| p.progress >= t);
        let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
        if !done && last.is_some_and(|l| l.elapsed() < Duration::from_millis(100)) {
            return;
        }
        *last = Some(Instant::now());
        let message: String = p
            .message
            .as_deref()
            .unwrap_or_default()
            .chars()
            .take(200)
            .collect();
        active.ctx.progress(
            p.progress.max(0.0) as u64,
            p.total.map(|t| t.max(0.0) as u64),
            message,
        );
    }
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.calls
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(t, _, _)| t != &self.token);
    }
}

/// Longest question from a server shown, in characters.
const MAX_QUESTION: usize = 2000;

/// lmcp as the server's client.
struct UpstreamClient {
    signals: Arc<Signals>,
    server: String,
    active: Arc<ActiveCalls>,
}

impl UpstreamClient {
    /// The server's question, put to the person of the call in progress, labelled as the
    /// server's and never as lmcp's. Forms that a yes or no answers (no fields, or one yes/no
    /// field) are asked; any other form, and a question with no call in progress or nobody to
    /// ask, is declined. A yes given up front (`--yes`) is never taken as the answer.
    async fn ask(&self, request: ElicitRequestParams, ct: CancellationToken) -> ElicitResult {
        let decline = ElicitResult::new(ElicitationAction::Decline);
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = request
        else {
            return decline;
        };
        let fields: Vec<(&String, Value)> = requested_schema
            .properties
            .iter()
            .map(|(k, v)| (k, serde_json::to_value(v).unwrap_or(Value::Null)))
            .collect();
        let content = match fields.as_slice() {
            [] => serde_json::json!({}),
            [(name, schema)] if schema.get("type") == Some(&Value::from("boolean")) => {
                serde_json::json!({ name.as_str(): true })
            }
            _ => return decline,
        };
        let Some(call) = self.active.only() else {
            return decline;
        };
        let said: String = message.chars().take(MAX_QUESTION).collect();
        let question = ConfirmRequest {
            tool: call.tool.clone(),
            effect: call.effect,
            destructive: false,
            args: Value::Object(Default::default()),
            summary: said,
            why: format!(
                "it asks this during `{}`, not lmcp; a yes accepts what it asks",
                call.tool
            ),
            calls: Vec::new(),
            hosts: Vec::new(),
            every_time: true,
            asked_by: Some(format!("the MCP server `{}`", self.server)),
        };
        // a question nobody answers ends with the call's deadline, declined
        let deadline = call.ctx.deadline();
        let answer = tokio::select! {
            a = call.ctx.confirmer().ask_for_another(&question) => a,
            _ = ct.cancelled() => return ElicitResult::new(ElicitationAction::Cancel),
            _ = call.ctx.cancel_token().cancelled() => return ElicitResult::new(ElicitationAction::Cancel),
            _ = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            } => return decline,
        };
        match answer {
            Answer::Yes => ElicitResult::new(ElicitationAction::Accept).with_content(content),
            Answer::Dismissed => ElicitResult::new(ElicitationAction::Cancel),
            Answer::No | Answer::CannotAsk | Answer::Failed(_) => decline,
        }
    }
}

impl ClientHandler for UpstreamClient {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> std::result::Result<ElicitResult, ErrorData> {
        Ok(self.ask(request, context.ct.clone()).await)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.active.progress(&params);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.signals.tools_changed.store(true, Ordering::Release);
        self.signals.notify.notify_waiters();
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            // forms only: a yes or no is all lmcp puts to the person for another server
            ClientCapabilities::builder().enable_elicitation().build(),
            Implementation::new(
                format!("lmcp (for {})", self.server),
                env!("CARGO_PKG_VERSION"),
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// Reads `data` through a guard, 64 KiB at a time; whether the guard broke the connection.
    async fn guarded(data: &[u8]) -> (bool, usize) {
        let signals = Arc::new(Signals::default());
        let mut guard = LineGuard {
            inner: data,
            line: 0,
            signals: Arc::clone(&signals),
        };
        let mut seen = 0;
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = guard.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            seen += n;
        }
        let broken = signals.broken.lock().unwrap().is_some();
        (broken, seen)
    }

    #[tokio::test]
    async fn a_line_over_the_bound_ends_the_connection_wherever_its_newline_falls() {
        // the newline in the same chunk as the line's last bytes (it once reset the count)
        for over in [1, 5_000, 60_000] {
            let mut data = vec![b'x'; MAX_MESSAGE + over];
            data.push(b'\n');
            let (broken, seen) = guarded(&data).await;
            assert!(broken, "a line {over} bytes over was let through");
            assert!(seen <= MAX_MESSAGE, "{seen} bytes passed on");
        }
        // many lines under the bound pass untouched
        let mut data = Vec::new();
        for _ in 0..40 {
            data.extend(std::iter::repeat_n(b'y', 1 << 20));
            data.push(b'\n');
        }
        let (broken, seen) = guarded(&data).await;
        assert!(!broken);
        assert_eq!(seen, data.len());
    }
}
