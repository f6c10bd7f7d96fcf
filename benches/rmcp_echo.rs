//! A bare rmcp stdio server with one `echo` tool: the floor `benches/mcp_roundtrip.py` measures
//! `lmcp serve` against (the same SDK and transport, no gate, no history, no registry).
//!
//! Built by `cargo bench --no-run --bench rmcp_echo`; serves MCP on stdin/stdout when run with
//! `--serve` (a plain `cargo bench` run only says so and ends).
//!
//! With `--http ADDR` it serves the same `echo` over Streamable HTTP instead: rmcp's
//! `StreamableHttpService` with its own session manager on hyper's HTTP/1.1, one task per
//! connection, no token, no gate, no history — the floor `benches/http_sessions.rs` measures
//! `lmcp serve --http` against. It says `serving on http://ADDR/mcp` on stderr once listening.
//!
//! With `--relay PROGRAM [ARGS]...` it is instead the least any proxy can be: it starts PROGRAM
//! and copies bytes between its own stdin/stdout and the child's, one thread each way, doing
//! nothing else. `benches/proxy_roundtrip.py` measures it as the floor of an extra hop. With
//! `--proxy PROGRAM [ARGS]...` it is the least an MCP proxy built on rmcp can be: an rmcp server
//! whose `tools/list` and `tools/call` are forwarded, as they are, by an rmcp client of PROGRAM
//! (no gate, no history, no checks): what the SDK itself costs on both sides of a proxy.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};

struct Echo;

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"]
        });
        let serde_json::Value::Object(schema) = schema else {
            unreachable!("an object literal")
        };
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "echo",
            "Return the text.",
            Arc::new(schema),
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("text"))
            .and_then(|t| t.as_str())
            .unwrap_or_default()
            .to_string();
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// An rmcp server that forwards every tool call to an rmcp client of a child server.
struct Forward {
    upstream: rmcp::service::RunningService<rmcp::RoleClient, ()>,
}

impl ServerHandler for Forward {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.upstream
            .list_tools(request)
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.upstream
            .call_tool(request)
            .await
            .map(Into::into)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }
}

/// Serves [`Forward`] on stdio, its client talking to `program`.
fn proxy(program: &str, args: &[String]) {
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the upstream");
        let io = (
            child.stdout.take().expect("piped"),
            child.stdin.take().expect("piped"),
        );
        let upstream =
            ().serve_with_lifecycle(io, ClientLifecycleMode::Initialize)
                .await
                .expect("the upstream's handshake");
        let running = Forward { upstream }
            .serve(rmcp::transport::stdio())
            .await
            .expect("the handshake");
        let _ = running.waiting().await;
    });
}

/// Copies bytes both ways between this process's stdio and a child's, until either side ends.
fn relay(program: &str, args: &[String]) {
    use std::io::{Read, Write};
    let mut child = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the relayed program");
    let mut to_child = child.stdin.take().expect("piped");
    let mut from_child = child.stdout.take().expect("piped");
    std::thread::spawn(move || {
        let mut out = std::io::stdout().lock();
        let mut buf = vec![0u8; 1 << 16];
        while let Ok(n) = from_child.read(&mut buf) {
            if n == 0 || out.write_all(&buf[..n]).and_then(|()| out.flush()).is_err() {
                break;
            }
        }
    });
    let mut input = std::io::stdin().lock();
    let mut buf = vec![0u8; 1 << 16];
    while let Ok(n) = input.read(&mut buf) {
        if n == 0
            || to_child
                .write_all(&buf[..n])
                .and_then(|()| to_child.flush())
                .is_err()
        {
            break;
        }
    }
    drop(to_child);
    let _ = child.wait();
}

/// Serves [`Echo`] over Streamable HTTP on `addr`, as `lmcp serve --http` serves (a
/// multi-threaded runtime, hyper HTTP/1.1, no delay on sockets), with nothing in front.
fn http(addr: &str) {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr).await.expect("listen");
        let local = listener.local_addr().expect("an address");
        let service = StreamableHttpService::new(
            || Ok(Echo),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default().disable_allowed_hosts(),
        );
        eprintln!("serving on http://{local}/mcp");
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let service = service.clone();
            tokio::spawn(async move {
                let handle = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let mut service = service.clone();
                        async move { tower_service::Service::call(&mut service, req).await }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), handle)
                    .await;
            });
        }
    });
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--http") {
        http(&args[at + 1]);
        return;
    }
    if let Some(at) = args.iter().position(|a| a == "--relay") {
        relay(&args[at + 1], &args[at + 2..]);
        return;
    }
    if let Some(at) = args.iter().position(|a| a == "--proxy") {
        proxy(&args[at + 1], &args[at + 2..]);
        return;
    }
    if !std::env::args().any(|a| a == "--serve") {
        println!("rmcp_echo: run with --serve to serve MCP on stdin/stdout");
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let running = Echo
            .serve(rmcp::transport::stdio())
            .await
            .expect("the handshake");
        let _ = running.waiting().await;
    });
}
