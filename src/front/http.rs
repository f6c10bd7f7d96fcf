//! `lmcp serve --http`: the same MCP server as over stdio — one registry, one gate, the same
//! tool list rules — for many clients at once over MCP's Streamable HTTP transport (rmcp's
//! service, served by hyper on a multi-thread runtime).
//!
//! What stands in front of it, in order: the path (`/mcp` only), the `Origin` (a browser page
//! from anywhere but this machine is refused: DNS rebinding), the bearer token (made on first
//! use, kept 0600 in the config folder), and a bound on open sessions; rmcp then checks the
//! `Host` header and bounds the request body, and idle sessions expire. The host runs with the
//! remote transport: tools that read local files the client names are unavailable, and the
//! file tools reach only lmcp's workspace.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;

use super::http_sessions::{Sessions, tracked};
use super::mcp::McpServer;
use crate::error::{Error, Result};
use crate::host::Host;
use crate::registry::Profile;
use crate::store;

/// Where `lmcp serve --http` listens when given no address.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8765";

/// The one path the server answers on.
pub const MCP_PATH: &str = "/mcp";

/// Largest request body taken (a tool call's arguments; an image goes as an asset, not inline).
pub const MAX_BODY_BYTES: usize = 4 << 20;

/// Most sessions open at once; a client past it is told to close one or wait.
pub const MAX_SESSIONS: usize = 128;

/// Most connections open at once (each an open file); past it new ones are closed at once.
pub const MAX_CONNECTIONS: usize = 1024;

/// How long a client has to send a request's headers (the hidden `--header-timeout` changes it,
/// so tests need not wait this long).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// A session with no request being answered and no stream open for this long is closed
/// (`--idle-timeout` changes it).
pub const IDLE_AFTER: Duration = Duration::from_secs(300);

/// Where and how `lmcp serve --http` serves.
#[derive(Debug, Clone)]
pub struct Options {
    /// The address listened on.
    pub addr: SocketAddr,
    /// A non-loopback address is served only when this is set (`--allow-remote`).
    pub allow_remote: bool,
    /// How long a session may go unused before it is closed.
    pub idle: Duration,
    /// How long a client has to send a request's headers.
    pub header_timeout: Duration,
}

/// The file the bearer token is kept in, readable by the user only.
pub fn token_path(host: &Host) -> PathBuf {
    host.paths().config_dir.join("http-token")
}

/// The bearer token HTTP clients must send, made on first use.
pub fn token(host: &Host) -> Result<String> {
    let path = token_path(host);
    match std::fs::read_to_string(&path) {
        Ok(text) if is_token(text.trim()) => Ok(text.trim().to_string()),
        Ok(_) => Err(Error::Corrupt {
            path,
            message: "not an lmcp HTTP token (64 hex digits); make a new one with `lmcp serve \
                      --http --rotate-token`"
                .into(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => first_token(host),
        Err(e) => Err(Error::io(&path, e)),
    }
}

/// Makes the first token, unless another process made one meanwhile (then that one is the
/// token): written whole beside the file, then linked into place, which fails if it exists.
fn first_token(host: &Host) -> Result<String> {
    let path = token_path(host);
    let token = new_token();
    let dir = &host.paths().config_dir;
    store::ensure_dir(dir)?;
    let staged = dir.join(format!(".http-token.{}.tmp", uuid::Uuid::new_v4().simple()));
    store::atomic_write_private(&staged, token.as_bytes())?;
    let linked = std::fs::hard_link(&staged, &path);
    let _ = std::fs::remove_file(&staged);
    match linked {
        Ok(()) => {
            store::sync_dir(dir);
            Ok(token)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
            if is_token(text.trim()) {
                Ok(text.trim().to_string())
            } else {
                Err(Error::Corrupt {
                    path,
                    message: "not an lmcp HTTP token (64 hex digits); make a new one with \
                              `lmcp serve --http --rotate-token`"
                        .into(),
                })
            }
        }
        Err(e) => Err(Error::io(&path, e)),
    }
}

fn new_token() -> String {
    let random = [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()];
    random
        .iter()
        .flat_map(|u| *u.as_bytes())
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Makes a new bearer token (the old one stops working for servers started after) and
/// returns it.
pub fn rotate_token(host: &Host) -> Result<String> {
    let token = new_token();
    store::ensure_dir(&host.paths().config_dir)?;
    store::atomic_write_private(&token_path(host), token.as_bytes())?;
    Ok(token)
}

fn is_token(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Reads the address to listen on: `HOST:PORT`, or a port alone (on 127.0.0.1).
pub fn parse_addr(text: &str) -> Result<SocketAddr> {
    let text = text.trim();
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    let text = text
        .strip_prefix("localhost:")
        .map_or_else(|| text.to_string(), |port| format!("127.0.0.1:{port}"));
    text.parse().map_err(|_| {
        Error::Usage(format!(
            "`{text}` is not an address to listen on; give IP:PORT (e.g. {DEFAULT_ADDR}) or a \
             port"
        ))
    })
}

/// Whether a browser `Origin` is this machine's (any port): a page served from elsewhere may
/// not drive the server through the person's browser.
fn local_origin(origin: &str) -> bool {
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let host = match rest.strip_prefix('[') {
        Some(v6) => v6.split(']').next().map(|h| format!("[{h}]")),
        None => rest.split(':').next().map(str::to_string),
    };
    matches!(host.as_deref(), Some("localhost" | "127.0.0.1" | "[::1]")) && !rest.contains('/')
}

/// Compares two byte strings in time that does not depend on where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

type Body = BoxBody<Bytes, Infallible>;

/// A refusal: `status`, with a JSON body saying why and what to do.
fn refusal(status: StatusCode, message: &str) -> Response<Body> {
    let body = json!({"error": message}).to_string();
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer realm=\"lmcp\""),
        );
    }
    response
}

/// Whether `req` may open a session: a POST without a session id, unless it names a method
/// other than `initialize` (rmcp refuses an `initialize` body under another method's name).
/// The count is enforced again where sessions are made ([`Sessions`]).
fn opens_session<B>(req: &Request<B>) -> bool {
    let method = req
        .headers()
        .get("mcp-method")
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    req.method() == http::Method::POST
        && !req.headers().contains_key("mcp-session-id")
        && method.is_none_or(|m| m.eq_ignore_ascii_case("initialize"))
}

/// What the checks in front of the MCP service need.
struct Front {
    token: String,
    sessions: Arc<Sessions>,
    /// Told to a client turned away for want of a free session.
    idle: Duration,
}

impl Front {
    /// The refusal for a handshake past the bound on sessions.
    fn full(&self) -> Response<Body> {
        refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!(
                "{MAX_SESSIONS} sessions are open, the most lmcp keeps; close one (or wait {} s \
                 for idle ones to expire)",
                self.idle.as_secs()
            ),
        )
    }

    /// The refusal for a request that may not reach the MCP service, if any.
    async fn check<B>(&self, req: &Request<B>) -> Option<Response<Body>> {
        if req.uri().path() != MCP_PATH {
            return Some(refusal(
                StatusCode::NOT_FOUND,
                &format!("lmcp serves MCP on {MCP_PATH} only"),
            ));
        }
        if let Some(origin) = req.headers().get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or_default();
            if !local_origin(origin) {
                return Some(refusal(
                    StatusCode::FORBIDDEN,
                    "requests from a web page served by another origin are refused (only \
                     pages on this machine may call lmcp)",
                ));
            }
        }
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            // the scheme's name is case-insensitive (RFC 9110)
            .and_then(|v| {
                v.split_once(' ')
                    .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            })
            .map(|(_, t)| t.trim());
        match given {
            Some(t) if same_secret(t.as_bytes(), self.token.as_bytes()) => {}
            Some(_) => {
                return Some(refusal(
                    StatusCode::UNAUTHORIZED,
                    "the bearer token is wrong; `lmcp serve --http --show-token` shows the \
                     current one",
                ));
            }
            None => {
                return Some(refusal(
                    StatusCode::UNAUTHORIZED,
                    "a bearer token is needed (Authorization: Bearer TOKEN); `lmcp serve \
                     --http --show-token` shows it",
                ));
            }
        }
        if opens_session(req) && self.sessions.full().await {
            return Some(self.full());
        }
        None
    }
}

/// Serves MCP over Streamable HTTP on `addr` until SIGTERM or SIGINT. The host must have been
/// opened with the remote transport.
pub async fn serve(host: Arc<Host>, profile: Profile, options: Options) -> Result<u8> {
    let Options {
        addr,
        allow_remote,
        idle,
        header_timeout,
    } = options;
    if !addr.ip().is_loopback() && !allow_remote {
        return Err(Error::Usage(format!(
            "{addr} can be reached from other machines; add --allow-remote to serve there (the \
             bearer token is then all that stands in front of your tools), or listen on \
             127.0.0.1"
        )));
    }
    let token = token(&host)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::Usage(format!("cannot listen on {addr}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| Error::Usage(format!("cannot listen on {addr}: {e}")))?;
    let sessions = Arc::new(Sessions::new(MAX_SESSIONS));
    let reaper = tokio::spawn(Arc::clone(&sessions).reap(idle));
    let cancel = tokio_util::sync::CancellationToken::new();
    // the address listened on is a name clients use too (127.0.0.2, say)
    let mut loopback = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    loopback.push(local.ip().to_string());
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_origins(["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"])
        .enforce_origin_validation()
        .with_max_request_body_bytes(MAX_BODY_BYTES)
        .with_cancellation_token(cancel.clone());
    config = if allow_remote {
        // clients name this machine however they reach it; the token guards it
        config.disable_allowed_hosts()
    } else {
        config.with_allowed_hosts(loopback)
    };
    // one server for every session: a question asked through an input-required result is
    // answered by a retry that may arrive as a request of its own (the 2026-07-28 generation)
    host.registry().load_builtins();
    let server = McpServer::new(Arc::clone(&host), profile);
    let service = StreamableHttpService::new(
        move || Ok(server.for_session()),
        Arc::clone(&sessions),
        config,
    );
    let front = Arc::new(Front {
        token,
        sessions,
        idle,
    });
    // listened for before the line that says how to stop it: a signal sent once the line is
    // out ends the server, never the default way (killed, the history unwritten)
    let stopped = super::mcp::stop_signals();
    tokio::pin!(stopped);
    for w in host.take_warnings() {
        super::mcp::tracing_stderr(&w);
    }
    super::mcp::tracing_stderr(&format!(
        "serving MCP on http://{local}{MCP_PATH} (bearer token: `lmcp serve --http \
         --show-token`); stop with Ctrl-C"
    ));
    let watcher = tokio::spawn(super::mcp::watch_library(Arc::clone(&host), profile));
    let connections = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                // out of file descriptors and the like: wait, then take the next
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut stopped => break,
        };
        // an answer goes out in a few small writes (headers, then stream events): without this,
        // Nagle's algorithm holds the last one back for the client's delayed ACK (~40 ms)
        let _ = stream.set_nodelay(true);
        // past the bound a connection is closed at once: a flood cannot starve the others
        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let front = Arc::clone(&front);
        let service = service.clone();
        tokio::spawn(async move {
            let handle = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let front = Arc::clone(&front);
                let mut service = service.clone();
                async move {
                    if let Some(refused) = front.check(&req).await {
                        return Ok::<_, Infallible>(refused);
                    }
                    let ends_session = req.method() == http::Method::DELETE;
                    let opens = opens_session(&req);
                    // the session is in use while its answer (a stream, maybe) is being sent
                    let in_use = req
                        .headers()
                        .get("mcp-session-id")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|id| front.sessions.enter(id));
                    let mut response = tower_service::Service::call(&mut service, req).await?;
                    // handshakes that raced past the check in front were stopped where
                    // sessions are made
                    if opens
                        && response.status() == StatusCode::INTERNAL_SERVER_ERROR
                        && front.sessions.full().await
                    {
                        return Ok(front.full());
                    }
                    // a session ended is answered 204, as clients expect (rmcp says 202)
                    if ends_session && response.status() == StatusCode::ACCEPTED {
                        *response.status_mut() = StatusCode::NO_CONTENT;
                    }
                    Ok(match in_use {
                        Some(in_use) => response.map(|body| tracked(body, in_use)),
                        None => response,
                    })
                }
            });
            // a client that does not finish its headers in time is let go
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), handle)
                .await;
            drop(permit);
        });
    }
    cancel.cancel();
    watcher.abort();
    reaper.abort();
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_machines_origins_pass() {
        for ok in [
            "http://localhost:6274",
            "http://127.0.0.1",
            "https://localhost:8443",
            "http://[::1]:3000",
        ] {
            assert!(local_origin(ok), "{ok}");
        }
        for bad in [
            "http://evil.example",
            "http://localhost.evil.example:80",
            "http://127.0.0.1.nip.io",
            "null",
            "file://",
            "http://localhost/x",
            "",
        ] {
            assert!(!local_origin(bad), "{bad}");
        }
    }

    #[test]
    fn addresses_read_as_people_write_them() {
        assert_eq!(
            parse_addr("9000").unwrap(),
            "127.0.0.1:9000".parse().unwrap()
        );
        assert_eq!(
            parse_addr("localhost:9000").unwrap(),
            "127.0.0.1:9000".parse().unwrap()
        );
        assert_eq!(parse_addr("[::1]:80").unwrap(), "[::1]:80".parse().unwrap());
        let e = parse_addr("nowhere").unwrap_err().to_string();
        assert!(e.contains("`nowhere`") && e.contains("IP:PORT"), "{e}");
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"ab"));
    }
}
