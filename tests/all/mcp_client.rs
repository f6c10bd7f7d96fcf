//! `lmcp serve` driven by rmcp's client (the official Rust MCP SDK), in both protocol
//! generations: the 2025-11-25 `initialize` handshake ("legacy") and 2026-07-28 discovery
//! (stateless; list changes only inside `subscriptions/listen`; elicitation through
//! input-required results, which rmcp's `call_tool` answers and retries).
//!
//! The same scenarios and checks as `tests/mcp/scenarios.py`, one test per scenario and
//! generation: listing (with and without output schemas, and with tools unavailable here left
//! out), calls with structured results, invalid arguments as isError (an unknown one with its
//! did-you-mean), an unknown tool as a protocol error, a custom tool created over MCP with its
//! list-changed notice, custom tools saved and deleted from the command line while the server
//! runs, cancelling a long Lua run,
//! progress from a recipe and from a PDF build, elicitation accepted, declined and impossible,
//! and one yes for a whole recipe. The Python SDK run (`tests/interop/mcp.rs`) stays as an interop
//! cross-check against a second client implementation.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig,
    ClientRequest, ElicitRequestParams, ElicitResult, ElicitationAction, Implementation,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, ServerNotification, ServerResult,
    SubscriptionFilter, Tool,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, PeerRequestOptions, RequestContext,
    RunningService, Subscription,
};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceError};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// How long one request may take before the test gives up on it (a PDF build in a debug build
/// included).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long to wait for a list-changed notice (the Python scenarios' `fail_after(10)`).
const NOTICE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Generation {
    /// 2025-11-25: `initialize` handshake.
    Legacy,
    /// 2026-07-28: `server/discover`, per-request metadata.
    Modern,
}

impl Generation {
    fn version(self) -> ProtocolVersion {
        match self {
            Generation::Legacy => ProtocolVersion::V_2025_11_25,
            Generation::Modern => ProtocolVersion::V_2026_07_28,
        }
    }

    /// The name the Python scenarios use for it (file names carry it).
    fn name(self) -> &'static str {
        match self {
            Generation::Legacy => "legacy",
            Generation::Modern => "2026-07-28",
        }
    }
}

/// How the client reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Door {
    /// `lmcp serve`, the client on its stdin and stdout.
    Stdio,
    /// `lmcp serve --http`, through rmcp's Streamable HTTP client with the bearer token.
    Http,
}

/// Who answers the server's questions (elicitation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Person {
    /// No elicitation capability declared.
    Absent,
    /// Accepts with `{"allow": true}`.
    Accepts,
    /// Declines.
    Declines,
    /// Dismisses the question (the "cancel" action).
    Dismisses,
    /// Answers the question with a JSON-RPC error.
    Fails,
    /// Never answers; records "withdrawn" when the server cancels the question.
    Hangs,
    /// Accepts, but with a form that holds no yes or no (`{"allow": "yes"}`).
    AcceptsGarbled,
    /// Declares URL elicitation only: it cannot answer a form.
    UrlOnly,
}

/// The client side: answers elicitation as `person` does, and records what it was asked, the
/// progress notifications it received and the tool-list-changed notices outside subscriptions.
struct Handler {
    generation: Generation,
    person: Person,
    asked: Arc<Mutex<Vec<String>>>,
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    list_changed: mpsc::UnboundedSender<()>,
    resource_updated: mpsc::UnboundedSender<String>,
    /// `prompts` or `resources` for each such `list_changed` outside a subscription.
    catalog_changed: mpsc::UnboundedSender<&'static str>,
}

impl ClientHandler for Handler {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let message = match &request {
            ElicitRequestParams::FormElicitationParams { message, .. }
            | ElicitRequestParams::UrlElicitationParams { message, .. } => message.clone(),
            other => format!("{other:?}"),
        };
        self.asked.lock().unwrap().push(message);
        Ok(match self.person {
            Person::Accepts => {
                ElicitResult::new(ElicitationAction::Accept).with_content(json!({"allow": true}))
            }
            // A client without the capability is never asked; decline if it were.
            Person::Declines | Person::Absent => ElicitResult::new(ElicitationAction::Decline),
            Person::Dismisses => ElicitResult::new(ElicitationAction::Cancel),
            Person::AcceptsGarbled => {
                ElicitResult::new(ElicitationAction::Accept).with_content(json!({"allow": "yes"}))
            }
            Person::UrlOnly => ElicitResult::new(ElicitationAction::Decline),
            Person::Fails => {
                return Err(ErrorData::internal_error("the dialog could not open", None));
            }
            Person::Hangs => {
                context.ct.cancelled().await;
                self.asked.lock().unwrap().push("withdrawn".into());
                ElicitResult::new(ElicitationAction::Cancel)
            }
        })
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.list_changed.send(());
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.resource_updated.send(params.uri);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.catalog_changed.send("prompts");
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.catalog_changed.send("resources");
    }

    fn get_info(&self) -> ClientConfig {
        let capabilities = if self.person == Person::Absent {
            ClientCapabilities::default()
        } else if self.person == Person::UrlOnly {
            let mut c = ClientCapabilities::default();
            c.elicitation = Some(
                rmcp::model::ElicitationCapability::new()
                    .with_url(rmcp::model::UrlElicitationCapability::new()),
            );
            c
        } else {
            ClientCapabilities::builder().enable_elicitation().build()
        };
        ClientConfig::new(capabilities, Implementation::new("lmcp-tests", "1"))
            .with_protocol_version(self.generation.version())
    }
}

/// An rmcp client connected to `lmcp serve --profile full`, over stdio or HTTP.
struct Session {
    client: RunningService<RoleClient, Handler>,
    /// The server this session started (none when it joined a shared one).
    child: Option<tokio::process::Child>,
    /// That server serves HTTP, so closing the session does not end it.
    http: bool,
    asked: Arc<Mutex<Vec<String>>>,
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    list_changed: mpsc::UnboundedReceiver<()>,
    /// `notifications/resources/updated` outside a subscription (legacy), by URI.
    resource_updated: mpsc::UnboundedReceiver<String>,
    /// Prompt and resource list changes outside a subscription (legacy).
    catalog_changed: mpsc::UnboundedReceiver<&'static str>,
}

/// `LMCP_HOME` and `PATH`, nothing else (as the Python scenarios start the server).
fn clean_env(cmd: &mut tokio::process::Command, home: &Path) {
    cmd.env_clear()
        .env("LMCP_HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
}

/// An `lmcp serve --http --profile full` child on a free loopback port, and its token.
struct HttpServer {
    child: tokio::process::Child,
    url: String,
    token: String,
}

impl HttpServer {
    async fn start(home: &Path, env: &[(&str, &str)]) -> HttpServer {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_lmcp"));
        cmd.args(["serve", "--http", "--show-token"]);
        clean_env(&mut cmd, home);
        let shown = cmd.output().await.expect("lmcp serve --http --show-token");
        let token = String::from_utf8(shown.stdout).unwrap().trim().to_string();
        assert!(
            !token.is_empty(),
            "{}",
            String::from_utf8_lossy(&shown.stderr)
        );

        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_lmcp"));
        cmd.args(["serve", "--http", "127.0.0.1:0", "--profile", "full"]);
        clean_env(&mut cmd, home);
        cmd.envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("start lmcp serve --http");
        let mut err = tokio::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        tokio::io::AsyncBufReadExt::read_line(&mut err, &mut line)
            .await
            .unwrap();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .trim_end_matches(|c: char| !c.is_alphanumeric())
            .to_string();
        // keep reading stderr so the server never blocks on it
        tokio::spawn(async move {
            let _ = tokio::io::copy(&mut err, &mut tokio::io::sink()).await;
        });
        HttpServer { child, url, token }
    }

    /// A new session with this server.
    async fn connect(&self, generation: Generation, person: Person) -> Session {
        // rmcp's HTTP client is reqwest without a crypto provider of its own
        lmcp::net::install_crypto();
        let config = StreamableHttpClientTransportConfig::with_uri(self.url.as_str())
            .auth_header(&self.token);
        let transport = StreamableHttpClientTransport::from_config(config);
        Session::connect(transport, generation, person).await
    }
}

impl Session {
    async fn start(home: &Path, generation: Generation, door: Door, person: Person) -> Session {
        Session::start_with(home, generation, door, person, &[]).await
    }

    async fn start_with(
        home: &Path,
        generation: Generation,
        door: Door,
        person: Person,
        env: &[(&str, &str)],
    ) -> Session {
        match door {
            Door::Stdio => Session::over_stdio(home, generation, person, env, "full").await,
            Door::Http => {
                let server = HttpServer::start(home, env).await;
                let mut s = server.connect(generation, person).await;
                s.child = Some(server.child);
                s.http = true;
                s
            }
        }
    }

    /// `lmcp serve --profile PROFILE` on stdio.
    async fn over_stdio(
        home: &Path,
        generation: Generation,
        person: Person,
        env: &[(&str, &str)],
        profile: &str,
    ) -> Session {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_lmcp"));
        cmd.args(["serve", "--profile", profile]);
        clean_env(&mut cmd, home);
        cmd.envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("start lmcp serve");
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut s = Session::connect((stdout, stdin), generation, person).await;
        s.child = Some(child);
        s
    }

    /// An rmcp client of `generation` over `transport`, answering as `person` does.
    async fn connect<T, E, A>(transport: T, generation: Generation, person: Person) -> Session
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let asked = Arc::default();
        let progress = Arc::default();
        let (tx, list_changed) = mpsc::unbounded_channel();
        let (updated_tx, resource_updated) = mpsc::unbounded_channel();
        let (catalog_tx, catalog_changed) = mpsc::unbounded_channel();
        let handler = Handler {
            generation,
            person,
            asked: Arc::clone(&asked),
            progress: Arc::clone(&progress),
            list_changed: tx,
            resource_updated: updated_tx,
            catalog_changed: catalog_tx,
        };
        let started = match generation {
            Generation::Legacy => {
                handler
                    .serve_with_lifecycle(transport, ClientLifecycleMode::Initialize)
                    .await
            }
            Generation::Modern => {
                handler
                    .serve_with_lifecycle(
                        transport,
                        ClientLifecycleMode::Discover {
                            preferred_versions: vec![generation.version()],
                        },
                    )
                    .await
            }
        };
        let client =
            started.unwrap_or_else(|e| panic!("{generation:?}: the client could not start: {e}"));
        let negotiated = client.peer_info().map(|info| info.protocol_version.clone());
        assert_eq!(
            negotiated,
            Some(generation.version()),
            "{generation:?}: the negotiated protocol version"
        );
        Session {
            client,
            child: None,
            http: false,
            asked,
            progress,
            list_changed,
            resource_updated,
            catalog_changed,
        }
    }

    async fn tools(&self) -> Vec<Tool> {
        tokio::time::timeout(CALL_TIMEOUT, self.client.list_all_tools())
            .await
            .expect("tools/list timed out")
            .expect("tools/list")
    }

    async fn names(&self) -> Vec<String> {
        self.tools()
            .await
            .into_iter()
            .map(|t| t.name.to_string())
            .collect()
    }

    /// `tools/call` through rmcp's high-level helper (which answers input-required results).
    async fn try_call(&self, tool: &str, args: Value) -> Result<CallToolResult, ServiceError> {
        tokio::time::timeout(CALL_TIMEOUT, self.client.call_tool(params(tool, args)))
            .await
            .unwrap_or_else(|_| panic!("calling {tool} timed out"))
    }

    async fn call(&self, tool: &str, args: Value) -> CallToolResult {
        self.try_call(tool, args)
            .await
            .unwrap_or_else(|e| panic!("calling {tool}: a protocol error: {e}"))
    }

    /// A call whose progress notifications are kept apart (the Python `progress_callback`): the
    /// result and the progress token rmcp sent with it.
    async fn call_with_progress(&self, tool: &str, args: Value) -> (CallToolResult, ProgressToken) {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params(tool, args)));
        let handle = self
            .client
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .unwrap_or_else(|e| panic!("sending {tool}: {e}"));
        let token = handle.progress_token.clone();
        let response = tokio::time::timeout(CALL_TIMEOUT, handle.await_response())
            .await
            .unwrap_or_else(|_| panic!("calling {tool} timed out"))
            .unwrap_or_else(|e| panic!("calling {tool}: a protocol error: {e}"));
        let ServerResult::CallToolResult(result) = response else {
            panic!("calling {tool}: not a tool result: {response:?}");
        };
        (result, token)
    }

    /// The progress notifications received for one call: (progress, total, message).
    fn progress_of(&self, token: &ProgressToken) -> Vec<(f64, Option<f64>, Option<String>)> {
        self.progress
            .lock()
            .unwrap()
            .iter()
            .filter(|p| &p.progress_token == token)
            .map(|p| (p.progress, p.total, p.message.clone()))
            .collect()
    }

    /// Waits until the progress seen for `token` satisfies `done`. rmcp runs notification
    /// handlers as tasks of their own, so one sent before the result may be recorded just
    /// after the result is returned; lmcp sends them all before the result.
    async fn progress_until(
        &self,
        token: &ProgressToken,
        done: impl Fn(&[(f64, Option<f64>, Option<String>)]) -> bool,
    ) -> Vec<(f64, Option<f64>, Option<String>)> {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let seen = self.progress_of(token);
            if done(&seen) || Instant::now() > deadline {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The next `notifications/tools/list_changed` outside a subscription (legacy).
    async fn list_changed(&mut self) {
        tokio::time::timeout(NOTICE_TIMEOUT, self.list_changed.recv())
            .await
            .expect("no notifications/tools/list_changed within 10 s")
            .expect("the client stopped");
    }

    /// No further list-changed notice arrives within `quiet` (one notice per change).
    async fn no_more_list_changes(&mut self, quiet: Duration) {
        let more = tokio::time::timeout(quiet, self.list_changed.recv()).await;
        assert!(
            more.is_err(),
            "a second notifications/tools/list_changed for one change"
        );
    }

    /// `subscriptions/listen` for tool list changes (2026-07-28).
    async fn listen(&self) -> Subscription {
        let mut filter = SubscriptionFilter::new();
        filter.tools_list_changed = Some(true);
        let sub = tokio::time::timeout(CALL_TIMEOUT, self.client.listen(filter))
            .await
            .expect("subscriptions/listen timed out")
            .expect("subscriptions/listen");
        assert_eq!(
            sub.acknowledged().tools_list_changed,
            Some(true),
            "the server accepted tool list changes: {:?}",
            sub.acknowledged()
        );
        sub
    }

    /// Closes the client (stdin, or the HTTP session) and waits for a server it started to go
    /// (an HTTP server is stopped: it serves until told to).
    async fn close(mut self) {
        let _ = self.client.close_with_timeout(Duration::from_secs(5)).await;
        drop(self.client);
        let Some(mut child) = self.child else {
            return;
        };
        if let (true, Some(pid)) = (self.http, child.id()) {
            // SIGTERM: the server writes its history and ends
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        }
        if tokio::time::timeout(Duration::from_secs(5), child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
    }
}

/// The next notification on a subscription, which must be a tool list change.
/// How long to listen for a repeated notice: longer than the server's library poll (2 s), which
/// once announced the server's own writes a second time.
const REPEAT_WINDOW: Duration = Duration::from_secs(3);

/// Nothing more arrives on the subscription within `quiet`.
async fn no_more_on(sub: &mut Subscription, quiet: Duration) {
    let more = tokio::time::timeout(quiet, sub.next()).await;
    assert!(
        more.is_err(),
        "a second tool list change for one change: {more:?}"
    );
}

async fn next_list_change(sub: &mut Subscription) {
    let next = tokio::time::timeout(NOTICE_TIMEOUT, sub.next())
        .await
        .expect("no tool list change on the subscription within 10 s");
    assert!(
        matches!(
            next,
            Ok(Some(ServerNotification::ToolListChangedNotification(_)))
        ),
        "a tool list change on the subscription: {next:?} (end: {:?})",
        sub.end()
    );
}

fn params(tool: &str, args: Value) -> CallToolRequestParams {
    let Value::Object(args) = args else {
        panic!("arguments must be an object: {args}");
    };
    CallToolRequestParams::new(tool.to_string()).with_arguments(args)
}

/// The first content block's text.
fn text(r: &CallToolResult) -> &str {
    r.content
        .first()
        .and_then(|c| c.as_text())
        .map_or("", |t| t.text.as_str())
}

fn is_error(r: &CallToolResult) -> bool {
    r.is_error == Some(true)
}

fn structured(r: &CallToolResult) -> &Value {
    r.structured_content
        .as_ref()
        .unwrap_or_else(|| panic!("no structuredContent: {r:?}"))
}

fn tool<'a>(tools: &'a [Tool], name: &str) -> &'a Tool {
    tools
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("{name} is not listed"))
}

/// What the Python client does for every non-error result of a tool with an output schema:
/// the structured content must match the schema.
fn check_output_schema(tools: &[Tool], name: &str, r: &CallToolResult) {
    let Some(schema) = &tool(tools, name).output_schema else {
        return;
    };
    // an error may leave structured content out; what is there must match
    if is_error(r) && r.structured_content.is_none() {
        return;
    }
    let schema = Value::Object((**schema).clone());
    let validator = jsonschema::validator_for(&schema)
        .unwrap_or_else(|e| panic!("{name}: the output schema does not compile: {e}\n{schema}"));
    let content = structured(r);
    let problems: Vec<String> = validator
        .iter_errors(content)
        .map(|e| e.to_string())
        .collect();
    assert!(
        problems.is_empty(),
        "{name}: structured content does not match the output schema: {problems:?}\n{content}"
    );
}

/// A 4×3 RGB PNG.
fn tiny_png() -> Vec<u8> {
    let img = image::RgbImage::from_fn(4, 3, |x, y| image::Rgb([x as u8 * 60, y as u8 * 80, 200]));
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png)
        .expect("encode a PNG");
    out.into_inner()
}

fn custom_definition(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "description": description,
        "parameters": [{"name": "n", "type": "string", "required": true}],
        "steps": [{"id": "calc", "tool": "calculate", "arguments": {"expression": {"$input": "n"}}}],
    })
}

async fn listing(g: Generation, door: Door) {
    let home = tempfile::tempdir().unwrap();
    let s = Session::start(home.path(), g, door, Person::Absent).await;
    let tools = s.tools().await;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "deterministic order: {names:?}");
    for expected in [
        "calculate",
        "read_file",
        "write_file",
        "custom_tool_create",
        "recipe_run",
        "run_command",
    ] {
        assert!(names.contains(&expected), "{expected} listed: {names:?}");
    }
    // importing a file the client names needs stdio
    assert_eq!(
        names.contains(&"asset_import"),
        door == Door::Stdio,
        "{door:?}: {names:?}"
    );
    let calc = tool(&tools, "calculate");
    assert_eq!(
        calc.input_schema.get("required"),
        Some(&json!(["expression"])),
        "{:?}",
        calc.input_schema
    );
    let a = calc.annotations.as_ref();
    assert!(
        a.and_then(|a| a.read_only_hint) == Some(true)
            && a.and_then(|a| a.destructive_hint) == Some(false),
        "{a:?}"
    );
    let write = tool(&tools, "write_file");
    let a = write.annotations.as_ref();
    assert!(
        a.and_then(|a| a.destructive_hint) == Some(true)
            && a.and_then(|a| a.open_world_hint) == Some(false),
        "{a:?}"
    );
    assert!(
        tools.iter().all(|t| t.output_schema.is_none()),
        "no output schemas unless asked"
    );
    assert!(
        tools
            .iter()
            .all(|t| t.title.as_deref().is_some_and(|t| !t.is_empty())),
        "every tool has a title"
    );
    s.close().await;

    let s = Session::start_with(
        home.path(),
        g,
        door,
        Person::Absent,
        &[("LMCP_OUTPUT_SCHEMAS", "1")],
    )
    .await;
    let tools = s.tools().await;
    let calc = tool(&tools, "calculate");
    assert!(
        calc.output_schema
            .as_ref()
            .and_then(|o| o.get("properties"))
            .and_then(|p| p.get("value"))
            .is_some(),
        "{:?}",
        calc.output_schema
    );
    // the structured content matches the output schema (the Python client validates it)
    let r = s.call("calculate", json!({"expression": "2^10"})).await;
    check_output_schema(&tools, "calculate", &r);
    assert_eq!(
        r.structured_content,
        Some(json!({"expression": "2^10", "value": 1024})),
        "{r:?}"
    );
    let r = s.call("get_datetime", json!({})).await;
    check_output_schema(&tools, "get_datetime", &r);
    assert!(
        !is_error(&r) && structured(&r).get("weekday").is_some(),
        "{r:?}"
    );
    // a failed PDF build is an error whose structured content is still the tool's own shape
    let r = s.call("workspace_create", json!({"name": "empty"})).await;
    let ws = structured(&r).get("workspace_id").cloned().unwrap();
    let args =
        json!({"workspace_id": ws, "source_asset_ids": [9], "title": "T", "preset": "square"});
    let r = s.call("build_image_pdf", args).await;
    assert!(is_error(&r), "{r:?}");
    check_output_schema(&tools, "build_image_pdf", &r);
    assert_eq!(structured(&r).get("stage"), Some(&json!("failed")), "{r:?}");
    assert_eq!(
        structured(&r).get("retryable"),
        Some(&json!(false)),
        "{r:?}"
    );
    s.close().await;

    // tools unavailable here are left out, consistently
    let config = home.path().join("config").join("config.json");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, json!({"modes": {"no_terminal": true}}).to_string()).unwrap();
    let s = Session::start(home.path(), g, door, Person::Absent).await;
    let names = s.names().await;
    assert!(
        !names.iter().any(|n| n == "run_command") && names.iter().any(|n| n == "calculate"),
        "{names:?}"
    );
    let r = s.call("run_command", json!({"program": "true"})).await;
    assert!(
        is_error(&r) && text(&r).contains("no terminal access"),
        "{r:?}"
    );
    s.close().await;
    std::fs::remove_file(&config).unwrap();
}

async fn calls(g: Generation, door: Door) {
    let home = tempfile::tempdir().unwrap();
    let s = Session::start(home.path(), g, door, Person::Absent).await;
    let r = s.call("calculate", json!({"expression": "6*7"})).await;
    assert!(r.is_error != Some(true), "{r:?}");
    assert_eq!(
        r.structured_content,
        Some(json!({"expression": "6*7", "value": 42})),
        "{r:?}"
    );
    let from_text: Option<Value> = serde_json::from_str(text(&r)).ok();
    assert_eq!(from_text, r.structured_content, "{:?}", r.content);

    let r = s.call("calculate", json!({"expression": 5})).await;
    assert!(is_error(&r), "{r:?}");
    assert!(
        text(&r).contains("/expression") && text(&r).contains("rule `type`"),
        "{}",
        text(&r)
    );

    // the skill contract's camelCase name gets the snake_case one (#38)
    let r = s
        .call("skill_install", json!({"skillMd": "---\nname: x\n---\n"}))
        .await;
    assert!(
        is_error(&r) && text(&r).contains("('skillMd' was unexpected); did you mean `skill_md`?"),
        "{}",
        text(&r)
    );

    let r = s.call("calculate", json!({"expression": "1/0"})).await;
    assert!(
        is_error(&r) && text(&r).contains("division by zero"),
        "{r:?}"
    );

    match s.try_call("no_such_tool", json!({})).await {
        Err(ServiceError::McpError(e)) => {
            assert!(e.message.contains("unknown tool"), "{e:?}")
        }
        other => panic!("an unknown tool must be a protocol error: {other:?}"),
    }
    s.close().await;
}

async fn custom_tools(g: Generation, door: Door) {
    let home = tempfile::tempdir().unwrap();
    let definition = custom_definition("user_double", "Double a number with calculate");
    let mut s = Session::start(home.path(), g, door, Person::Absent).await;
    match g {
        Generation::Legacy => {
            let r = s.call("custom_tool_create", definition).await;
            assert!(!is_error(&r), "{r:?}");
            s.list_changed().await;
            s.no_more_list_changes(REPEAT_WINDOW).await;
        }
        Generation::Modern => {
            let mut sub = s.listen().await;
            let r = s.call("custom_tool_create", definition).await;
            assert!(!is_error(&r), "{r:?}");
            next_list_change(&mut sub).await;
            no_more_on(&mut sub, REPEAT_WINDOW).await;
        }
    }
    let names = s.names().await;
    assert!(
        names.iter().any(|n| n == "user_double"),
        "the new tool is listed: {names:?}"
    );
    let r = s.call("user_double", json!({"n": "21*2"})).await;
    assert_eq!(
        structured(&r).pointer("/result/value"),
        Some(&json!(42)),
        "{r:?}"
    );
    let r = s
        .call("custom_tool_delete", json!({"name": "user_double"}))
        .await;
    assert!(
        is_error(&r) && text(&r).contains("needs a person"),
        "deleting asks, and this client cannot answer: {r:?}"
    );
    s.close().await;
}

/// `lmcp ARGS` beside the server, with the same `LMCP_HOME`; it must succeed.
async fn cli(home: &Path, args: &[&str]) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_lmcp"));
    cmd.args(args).stdin(Stdio::null());
    clean_env(&mut cmd, home);
    let done = cmd.output().await.expect("run lmcp");
    assert!(
        done.status.success(),
        "lmcp {args:?}: {}",
        String::from_utf8_lossy(&done.stderr)
    );
}

/// A custom tool saved and deleted from the command line while the server runs.
async fn saved_elsewhere(g: Generation, door: Door) {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let definition = custom_definition("user_triple", "Triple a number with calculate").to_string();
    let create = ["call", "custom_tool_create", definition.as_str(), "--yes"];
    let delete = [
        "call",
        "custom_tool_delete",
        r#"{"name": "user_triple"}"#,
        "--yes",
    ];
    let mut s = Session::start(home, g, door, Person::Absent).await;
    match g {
        Generation::Legacy => {
            cli(home, &create).await;
            s.list_changed().await;
            assert!(
                s.names().await.iter().any(|n| n == "user_triple"),
                "saved from the command line, listed by the server"
            );
            cli(home, &delete).await;
            s.list_changed().await;
            s.no_more_list_changes(REPEAT_WINDOW).await;
            // a tool switched off and on from the command line: announced once each time
            cli(home, &["tool", "disable", "read_file"]).await;
            s.list_changed().await;
            assert!(!s.names().await.iter().any(|n| n == "read_file"));
            s.no_more_list_changes(REPEAT_WINDOW).await;
            cli(home, &["tool", "enable", "read_file"]).await;
            s.list_changed().await;
            assert!(s.names().await.iter().any(|n| n == "read_file"));
        }
        Generation::Modern => {
            let mut sub = s.listen().await;
            cli(home, &create).await;
            next_list_change(&mut sub).await;
            assert!(
                s.names().await.iter().any(|n| n == "user_triple"),
                "saved from the command line, listed by the server"
            );
            cli(home, &delete).await;
            next_list_change(&mut sub).await;
            no_more_on(&mut sub, REPEAT_WINDOW).await;
            cli(home, &["tool", "disable", "read_file"]).await;
            next_list_change(&mut sub).await;
            assert!(!s.names().await.iter().any(|n| n == "read_file"));
            cli(home, &["tool", "enable", "read_file"]).await;
            next_list_change(&mut sub).await;
        }
    }
    assert!(
        !s.names().await.iter().any(|n| n == "user_triple"),
        "deleted from the command line, gone"
    );
    s.close().await;
}

async fn cancel(g: Generation, door: Door) {
    let home = tempfile::tempdir().unwrap();
    let spin = json!({"name": "user_spin", "description": "loops until cancelled", "lua": "---@timeout 600\nwhile true do end"});
    let s = Session::start(home.path(), g, door, Person::Absent).await;
    let r = s.call("custom_tool_create", spin).await;
    assert!(!is_error(&r), "{r:?}");
    let started = Instant::now();
    // Dropping rmcp's call future sends `notifications/cancelled` for it.
    let spun = tokio::time::timeout(
        Duration::from_millis(500),
        s.client.call_tool(params("user_spin", json!({}))),
    )
    .await;
    assert!(
        spun.is_err(),
        "the spin was still running after 0.5 s: {spun:?}"
    );
    let r = s.call("calculate", json!({"expression": "1+1"})).await;
    assert_eq!(
        structured(&r).get("value"),
        Some(&json!(2)),
        "the server still answers"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "cancelled promptly"
    );

    // the cancelled run was recorded as such, before the session closes: the client sends
    // its cancel behind the dropped call, and a close first could overtake it
    let path = home.path().join("data").join("history.jsonl");
    let mut history = String::new();
    for _ in 0..50 {
        history = std::fs::read_to_string(&path).unwrap_or_default();
        if history.contains(r#""tool":"user_spin""#) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let tail = &history[history.len().saturating_sub(500)..];
    assert!(
        history.contains(r#""outcome":"failed:cancelled""#),
        "{tail}"
    );
    s.close().await;
}

async fn progress(g: Generation, door: Door) {
    let home = tempfile::tempdir().unwrap();
    let step = json!({"tool": "calculate", "args": {"expression": "1"}});
    let recipe = json!({"name": "three steps", "steps": [step, step, step]});
    let s = Session::start(home.path(), g, door, Person::Absent).await;
    let r = s
        .call("recipe_save", json!({"manifest": recipe, "replace": true}))
        .await;
    assert!(!is_error(&r), "{r:?}");
    let (r, token) = s
        .call_with_progress("recipe_run", json!({"name": "three steps"}))
        .await;
    assert!(
        !is_error(&r)
            && structured(&r)
                .get("steps")
                .and_then(Value::as_array)
                .is_some_and(|s| s.len() == 3),
        "{r:?}"
    );
    let step_2 = |seen: &[(f64, Option<f64>, Option<String>)]| {
        seen.iter()
            .any(|(_, _, m)| m.as_deref().is_some_and(|m| m.contains("step 2 of 3")))
    };
    let seen = s
        .progress_until(&token, |seen| seen.len() >= 3 && step_2(seen))
        .await;
    assert!(seen.len() >= 3, "progress notifications: {seen:?}");
    assert!(step_2(&seen), "{seen:?}");
    assert_increasing(&seen);
    // a recipe whose step is itself a program: only the outer run's steps are reported
    let r = s
        .call(
            "custom_tool_create",
            custom_definition("user_inner", "Three steps inside another run"),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    let step = json!({"tool": "calculate", "args": {"expression": "1"}});
    let inner = json!({"tool": "user_inner", "args": {"n": "2"}});
    let manifest = json!({"name": "outer", "steps": [step, inner, step]});
    let (r, token) = s
        .call_with_progress("recipe_run", json!({"manifest": manifest}))
        .await;
    assert!(!is_error(&r), "{r:?}");
    let three = |seen: &[(f64, Option<f64>, Option<String>)]| {
        seen.iter()
            .any(|(_, _, m)| m.as_deref().is_some_and(|m| m.contains("step 3 of 3")))
    };
    let seen = s.progress_until(&token, three).await;
    assert_increasing(&seen);
    s.close().await;

    // and from a PDF build: one report per page (its images come in from files: stdio only)
    if door == Door::Http {
        return;
    }
    let workspace = home.path().join("data").join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("page.png"), tiny_png()).unwrap();
    let s = Session::start(home.path(), g, door, Person::Absent).await;
    let r = s.call("workspace_create", json!({"name": "album"})).await;
    let ws = structured(&r)
        .get("workspace_id")
        .cloned()
        .unwrap_or_else(|| panic!("no workspace_id: {r:?}"));
    let r = s
        .call(
            "asset_import",
            json!({"workspace_id": ws, "path": "page.png"}),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    let args = json!({"workspace_id": ws, "source_asset_ids": [1, 1, 1], "title": "Album", "preset": "square"});
    let (r, token) = s.call_with_progress("build_image_pdf", args).await;
    assert!(
        !is_error(&r) && structured(&r).get("stage") == Some(&json!("ready")),
        "{r:?}"
    );
    let page_3 = |seen: &[(f64, Option<f64>, Option<String>)]| {
        seen.iter()
            .any(|(_, _, m)| m.as_deref().is_some_and(|m| m.contains("page 3 of 3")))
    };
    let done = |seen: &[(f64, Option<f64>, Option<String>)]| {
        page_3(seen) && seen.iter().any(|(_, _, m)| m.as_deref() == Some("done"))
    };
    let seen = s.progress_until(&token, done).await;
    assert!(page_3(&seen), "PDF progress: {seen:?}");
    assert_increasing(&seen);
    s.close().await;
}

/// MCP: progress values increase with each notification (rmcp may record them out of order, so
/// they are compared sorted: no value twice), and none passes the total.
fn assert_increasing(seen: &[(f64, Option<f64>, Option<String>)]) {
    let mut values: Vec<f64> = seen.iter().map(|(p, _, _)| *p).collect();
    values.sort_by(f64::total_cmp);
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "a progress value repeats: {seen:?}"
    );
    assert!(
        seen.iter().all(|(p, t, _)| t.is_none_or(|t| *p <= t)),
        "progress past its total: {seen:?}"
    );
}

async fn elicitation(g: Generation, door: Door) {
    let home = tempfile::tempdir().unwrap();
    let target = home
        .path()
        .join("data")
        .join("workspace")
        .join(format!("elicited-{}.txt", g.name()));
    let name = target.file_name().unwrap().to_str().unwrap().to_string();
    let args = json!({"path": name, "content": "asked first"});

    let s = Session::start(home.path(), g, door, Person::Declines).await;
    let r = s.call("write_file", args.clone()).await;
    assert!(is_error(&r) && text(&r).contains("declined"), "{r:?}");
    s.close().await;
    assert!(!target.exists(), "declined: nothing written");

    let s = Session::start(home.path(), g, door, Person::Absent).await;
    let r = s.call("write_file", args.clone()).await;
    assert!(
        is_error(&r) && text(&r).contains("lmcp grants allow write_file"),
        "{r:?}"
    );
    s.close().await;
    assert!(!target.exists(), "nobody to ask: nothing written");

    let s = Session::start(home.path(), g, door, Person::Accepts).await;
    let r = s.call("write_file", args).await;
    assert!(!is_error(&r), "{r:?}");
    s.close().await;
    assert_eq!(
        std::fs::read_to_string(&target).ok().as_deref(),
        Some("asked first"),
        "accepted: written"
    );
}

/// A recipe with two steps that each need a yes (destructive: the default grant asks). The
/// question is asked once, up front, listing both; then each step runs exactly once.
async fn one_yes_for_a_recipe(g: Generation, door: Door) {
    let home = tempfile::tempdir().unwrap();
    let counter = home.path().join(format!("steps-{}.txt", g.name()));
    let step = json!({"tool": "run_command", "args": {"program": "sh", "args": ["-c", format!("echo x >> '{}'", counter.display())]}});
    let manifest = json!({"name": format!("two asks {}", g.name()), "steps": [step, step]});
    let s = Session::start(home.path(), g, door, Person::Accepts).await;
    let r = s
        .call("recipe_run", json!({"manifest": manifest, "confirm": true}))
        .await;
    assert!(!is_error(&r), "{r:?}");
    let asked = s.asked.lock().unwrap().clone();
    s.close().await;
    assert_eq!(asked.len(), 1, "asked once, up front: {asked:?}");
    assert!(
        asked[0].contains("run_command"),
        "the question lists the calls: {}",
        asked[0]
    );
    let ran = std::fs::read_to_string(&counter).unwrap_or_default();
    assert_eq!(ran, "x\nx\n", "each step ran once: {ran:?}");
}

/// Each way a question can end is told in its own words, and none tells an MCP client to use a
/// command-line flag: no elicitation (how to allow it here), declined, dismissed, and (legacy,
/// where the server asks during the call) a client whose dialog fails.
async fn answers_are_told_apart(g: Generation, door: Door) {
    let home = tempfile::tempdir().unwrap();
    let args = json!({"path": "answers.txt", "content": "x"});
    let mut cases = vec![
        (Person::Absent, "cannot ask a person"),
        (Person::UrlOnly, "cannot ask a person"),
        (Person::Declines, "a person declined"),
        (Person::Dismisses, "dismissed the question"),
        (Person::AcceptsGarbled, "the client failed to ask a person"),
    ];
    if g == Generation::Legacy {
        cases.push((Person::Fails, "the client failed to ask a person"));
    }
    for (person, expected) in cases {
        let s = Session::start(home.path(), g, door, person).await;
        let r = s.call("write_file", args.clone()).await;
        let message = text(&r).to_string();
        assert!(is_error(&r), "{person:?}: {r:?}");
        assert!(message.contains(expected), "{person:?}: {message}");
        assert!(
            !message.contains("--yes"),
            "{person:?}: a CLI flag over MCP: {message}"
        );
        if person == Person::Dismisses {
            assert!(!message.contains("declined"), "{message}");
        }
        if person == Person::Absent {
            assert!(
                message.contains("lmcp grants allow write_file"),
                "{message}"
            );
        }
        s.close().await;
    }
    assert!(!home.path().join("data/workspace/answers.txt").exists());
}

/// A call cancelled while its question is open withdraws the question: the client gets
/// `notifications/cancelled` for the elicitation request, so it can close its dialog; nothing
/// runs. (Legacy only: in 2026-07-28 the server asks no questions of its own during a call.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_withdraws_its_question() {
    let home = tempfile::tempdir().unwrap();
    let s = Session::start(home.path(), Generation::Legacy, Door::Stdio, Person::Hangs).await;
    let asked = Arc::clone(&s.asked);
    let call = s.client.call_tool(params(
        "write_file",
        json!({"path": "withdrawn.txt", "content": "x"}),
    ));
    // dropping the call's future sends notifications/cancelled for it
    let _ = tokio::time::timeout(Duration::from_millis(800), call).await;
    let deadline = Instant::now() + NOTICE_TIMEOUT;
    while !asked.lock().unwrap().iter().any(|a| a == "withdrawn") {
        assert!(
            Instant::now() < deadline,
            "the question was not withdrawn: {:?}",
            asked.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(asked.lock().unwrap().len(), 2, "asked once, then withdrawn");
    let r = s.call("calculate", json!({"expression": "1+1"})).await;
    assert!(!is_error(&r), "the server still answers: {r:?}");
    assert!(!home.path().join("data/workspace/withdrawn.txt").exists());
    s.close().await;
}

/// Calls `name` over MCP, which must succeed, and checks its structured content against the
/// output schema `tools` lists for it (as the Python client does); notes the call in `called`.
async fn typed_call(
    s: &Session,
    tools: &[Tool],
    called: &mut std::collections::BTreeSet<String>,
    name: &str,
    args: Value,
) -> Value {
    let r = s.call(name, args.clone()).await;
    assert!(!is_error(&r), "{name} {args}: {r:?}");
    assert!(
        tool(tools, name).output_schema.is_some(),
        "{name}: listed without an output schema"
    );
    check_output_schema(tools, name, &r);
    called.insert(name.to_string());
    structured(&r).clone()
}

/// Under `LMCP_OUTPUT_SCHEMAS=1` every tool lists an output schema and every tool's
/// `structuredContent` validates against it (#37): each listed tool is called here (a person
/// says yes to what asks), the example custom tool and skill tool too, and a listed tool that
/// is not called fails the test. MCP calls run confirmed, so none of these is a preview.
async fn every_result_meets_its_schema(g: Generation, door: Door) {
    let home = tempfile::tempdir().unwrap();
    let workspace = home.path().join("data/workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("red.png"), tiny_png()).unwrap();
    let web = crate::registry::tiny_server(&[("application/json", "{\"a\":[1,2]}")]);
    cli(
        home.path(),
        &["hosts", "allow", "--private", &web.to_string()],
    )
    .await;
    let s = Session::start_with(
        home.path(),
        g,
        door,
        Person::Accepts,
        &[("LMCP_OUTPUT_SCHEMAS", "1")],
    )
    .await;
    let tools = s.tools().await;
    let mut called = std::collections::BTreeSet::new();
    let c = &mut called;
    for (name, args) in [
        ("calculate", json!({"expression": "6*7"})),
        ("get_datetime", json!({})),
        (
            "write_file",
            json!({"path": "n/a.txt", "content": "a cat, a hat"}),
        ),
        ("read_file", json!({"path": "n/a.txt"})),
        ("list_dir", json!({"path": "n"})),
        ("run_command", json!({"program": "echo", "args": ["hi"]})),
        ("http_request", json!({"url": format!("http://{web}/a")})),
        ("tool_search", json!({"query": "recipe"})),
        (
            "lua_run",
            json!({"code": "---@uses write_file\nreturn tools.write_file{path = 'n/l.txt', content = 'x'}", "confirm": true}),
        ),
        (
            "lua_run",
            json!({"code": "local n = 0\nfor i = 1, 3 do n = n + tools.calculate{expression = i .. '*2'}.value end\nreturn {n = n}"}),
        ),
        ("report_friction", json!({"friction_type": "other"})),
        ("friction_log", json!({})),
        ("friction_flush", json!({"force": true})),
        ("workspace_list", json!({})),
    ] {
        typed_call(&s, &tools, c, name, args).await;
    }
    let ws = typed_call(&s, &tools, c, "workspace_create", json!({"name": "typed"})).await
        ["workspace_id"]
        .clone();
    let other = typed_call(&s, &tools, c, "workspace_create", json!({"name": "gone"})).await
        ["workspace_id"]
        .clone();
    for (name, args) in [
        (
            "asset_import",
            json!({"workspace_id": ws, "path": "red.png"}),
        ),
        ("asset_list", json!({"workspace_id": ws})),
        ("asset_get", json!({"workspace_id": ws, "asset_id": 1})),
        (
            "build_image_pdf",
            json!({"workspace_id": ws, "source_asset_ids": [1], "title": "T", "preset": "square"}),
        ),
        ("workspace_delete", json!({"workspace_id": other})),
    ] {
        typed_call(&s, &tools, c, name, args).await;
    }
    // the recipe tools, on the example recipe
    let daily: Value =
        serde_json::from_str(&crate::registry::example("recipes/daily_note.json")).unwrap();
    for (name, args) in [
        ("recipe_save", json!({"manifest": daily})),
        ("recipe_list", json!({})),
        ("recipe_get", json!({"name": "Daily note"})),
        ("recipe_run", json!({"name": "Daily note"})),
        ("recipe_run", json!({"name": "Daily note", "confirm": true})),
    ] {
        typed_call(&s, &tools, c, name, args).await;
    }
    let bundle = typed_call(
        &s,
        &tools,
        c,
        "recipe_export",
        json!({"name": "Daily note"}),
    )
    .await;
    for (name, args) in [
        ("recipe_import", json!({"bundle": bundle, "replace": true})),
        ("recipe_delete", json!({"name": "Daily note"})),
        // the example Lua custom tool (typed by its ---@return) and the example skill
        (
            "custom_tool_create",
            json!({"name": "user_sum_squares", "description": "Sum squares", "lua": crate::registry::example("tools/user_sum_squares.lua")}),
        ),
        ("custom_tool_list", json!({})),
        (
            "skill_install",
            crate::registry::example_skill("word-stats"),
        ),
        ("skill_list", json!({})),
        ("skill_get", json!({"name": "word-stats"})),
        ("skill_get", json!({"name": "no-such-skill"})),
        (
            "skill_config",
            json!({"name": "word-stats", "values": {"min_length": 2}}),
        ),
        (
            "skill_enable",
            json!({"name": "word-stats", "enabled": true}),
        ),
        (
            "skill_call",
            json!({"skill": "word-stats", "script": "count_words", "params": {"path": "n/a.txt"}}),
        ),
    ] {
        typed_call(&s, &tools, c, name, args).await;
    }
    // the tools made above, as the list now shows them
    let now = s.tools().await;
    let r = typed_call(&s, &now, c, "user_sum_squares", json!({"n": 3})).await;
    assert_eq!(r["result"], json!({"total": 14, "numbers_used": 3}), "{r}");
    let r = typed_call(
        &s,
        &now,
        c,
        "skill__word_stats__count_words",
        json!({"text": "a cat, a hat, a cat"}),
    )
    .await;
    assert_eq!(
        r["result"]["top"][0],
        json!({"word": "cat", "count": 2}),
        "{r}"
    );
    for (name, args) in [
        ("custom_tool_delete", json!({"name": "user_sum_squares"})),
        ("skill_remove", json!({"name": "word-stats"})),
    ] {
        typed_call(&s, &now, c, name, args).await;
    }
    let listed: std::collections::BTreeSet<String> =
        tools.iter().map(|t| t.name.to_string()).collect();
    assert!(
        ["run_command", "asset_import", "skill_call", "lua_run"]
            .iter()
            .all(|n| listed.contains(*n)),
        "the full profile on stdio: {listed:?}"
    );
    let missed: Vec<&String> = listed.difference(&called).collect();
    assert!(missed.is_empty(), "listed but not called here: {missed:?}");
    s.close().await;
}

/// One test per scenario and generation, so a failure names both.
macro_rules! in_both_generations {
    ($($scenario:ident => $legacy:ident, $modern:ident;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $legacy() {
            $scenario(Generation::Legacy, Door::Stdio).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $modern() {
            $scenario(Generation::Modern, Door::Stdio).await;
        }
    )*};
}

in_both_generations! {
    listing => list_legacy, list_2026;
    calls => call_legacy, call_2026;
    custom_tools => custom_tools_legacy, custom_tools_2026;
    saved_elsewhere => tools_saved_elsewhere_legacy, tools_saved_elsewhere_2026;
    cancel => cancel_legacy, cancel_2026;
    progress => progress_legacy, progress_2026;
    elicitation => elicitation_legacy, elicitation_2026;
    one_yes_for_a_recipe => one_yes_for_a_recipe_legacy, one_yes_for_a_recipe_2026;
    answers_are_told_apart => answers_are_told_apart_legacy, answers_are_told_apart_2026;
    every_result_meets_its_schema => typed_results_legacy, typed_results_2026;
}

/// One test per generation of a scenario that takes only the generation (stdio, the scenario
/// starting its own server), so a failure names both: used by the submodules below.
macro_rules! per_generation {
    ($($scenario:ident => $legacy:ident, $modern:ident;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $legacy() {
            $scenario(Generation::Legacy).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $modern() {
            $scenario(Generation::Modern).await;
        }
    )*};
}

/// The same scenarios through rmcp's Streamable HTTP client against `lmcp serve --http`.
macro_rules! over_http {
    ($($scenario:ident => $legacy:ident, $modern:ident;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $legacy() {
            $scenario(Generation::Legacy, Door::Http).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $modern() {
            $scenario(Generation::Modern, Door::Http).await;
        }
    )*};
}

over_http! {
    listing => http_list_legacy, http_list_2026;
    calls => http_call_legacy, http_call_2026;
    custom_tools => http_custom_tools_legacy, http_custom_tools_2026;
    saved_elsewhere => http_tools_saved_elsewhere_legacy, http_tools_saved_elsewhere_2026;
    cancel => http_cancel_legacy, http_cancel_2026;
    progress => http_progress_legacy, http_progress_2026;
    elicitation => http_elicitation_legacy, http_elicitation_2026;
    one_yes_for_a_recipe => http_one_yes_for_a_recipe_legacy, http_one_yes_for_a_recipe_2026;
    answers_are_told_apart => http_answers_are_told_apart_legacy, http_answers_are_told_apart_2026;
}

/// Two sessions hear of a tool a third session creates, in both generations at once (legacy
/// sessions by notification, 2026-07-28 ones on their subscription).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_two_sessions_hear_of_a_tool_a_third_creates() {
    let home = tempfile::tempdir().unwrap();
    let server = HttpServer::start(home.path(), &[]).await;
    let mut legacy = server.connect(Generation::Legacy, Person::Absent).await;
    let modern = server.connect(Generation::Modern, Person::Absent).await;
    let mut sub = modern.listen().await;
    let maker = server.connect(Generation::Legacy, Person::Absent).await;
    let r = maker
        .call(
            "custom_tool_create",
            custom_definition("user_shared", "Made by one session, seen by all"),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    legacy.list_changed().await;
    next_list_change(&mut sub).await;
    for s in [&legacy, &modern] {
        let r = s.call("user_shared", json!({"n": "2+3"})).await;
        assert_eq!(
            structured(&r).pointer("/result/value"),
            Some(&json!(5)),
            "{r:?}"
        );
    }
    drop(sub);
    for s in [legacy, modern, maker] {
        s.close().await;
    }
    let mut child = server.child;
    let _ = child.kill().await;
}

/// rmcp's client without the token, or with a wrong one, is turned away (401) before any
/// session starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_a_client_without_the_token_is_turned_away() {
    let home = tempfile::tempdir().unwrap();
    let server = HttpServer::start(home.path(), &[]).await;
    for token in [None, Some("not-the-token")] {
        let mut config = StreamableHttpClientTransportConfig::with_uri(server.url.as_str());
        if let Some(t) = token {
            config = config.auth_header(t);
        }
        lmcp::net::install_crypto();
        let transport = StreamableHttpClientTransport::from_config(config);
        let handler = Handler {
            generation: Generation::Legacy,
            person: Person::Absent,
            asked: Arc::default(),
            progress: Arc::default(),
            list_changed: mpsc::unbounded_channel().0,
            resource_updated: mpsc::unbounded_channel().0,
            catalog_changed: mpsc::unbounded_channel().0,
        };
        let started = tokio::time::timeout(
            CALL_TIMEOUT,
            handler.serve_with_lifecycle(transport, ClientLifecycleMode::Initialize),
        )
        .await
        .expect("the refusal came at once");
        let e = match started {
            Ok(_) => panic!("{token:?}: a session started without the right token"),
            Err(e) => format!("{e:?}"),
        };
        assert!(
            e.contains("401") || e.to_lowercase().contains("auth"),
            "{token:?}: {e}"
        );
    }
    let mut child = server.child;
    let _ = child.kill().await;
}

/// 50 sessions of rmcp's HTTP client call at once, 200 calls each: every call answered
/// right, and the history counts every one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_fifty_sessions_call_in_parallel() {
    const SESSIONS: usize = 50;
    const CALLS: usize = 200;
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config").join("config.json");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let limits = json!({"limits": {"history_size": SESSIONS * CALLS + 100}});
    std::fs::write(&config, limits.to_string()).unwrap();
    let server = HttpServer::start(home.path(), &[]).await;
    let mut sessions = Vec::new();
    for i in 0..SESSIONS {
        let g = if i % 2 == 0 {
            Generation::Legacy
        } else {
            Generation::Modern
        };
        sessions.push(server.connect(g, Person::Absent).await);
    }
    let mut runs = tokio::task::JoinSet::new();
    for (i, s) in sessions.into_iter().enumerate() {
        runs.spawn(async move {
            for j in 0..CALLS {
                let r = s
                    .call("calculate", json!({"expression": format!("{i}*1000+{j}")}))
                    .await;
                let want = (i * 1000 + j) as u64;
                assert_eq!(
                    structured(&r).get("value").and_then(Value::as_u64),
                    Some(want),
                    "{r:?}"
                );
            }
            s.close().await;
        });
    }
    while let Some(done) = runs.join_next().await {
        done.expect("a session failed");
    }
    // SIGTERM: the server writes its history and ends
    let mut child = server.child;
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) };
    let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_lmcp"));
    let n = (SESSIONS * CALLS + 100).to_string();
    cmd.args(["--json", "history", "-n", &n]);
    clean_env(&mut cmd, home.path());
    let out = cmd.output().await.unwrap();
    let history: Value = serde_json::from_slice(&out.stdout).unwrap();
    let calls = history
        .as_array()
        .or_else(|| history.get("entries").and_then(Value::as_array))
        .unwrap_or_else(|| panic!("no entries: {history}"))
        .iter()
        .filter(|e| e["tool"] == "calculate" && e["outcome"] == "done")
        .count();
    assert_eq!(calls, SESSIONS * CALLS);
}

/// `lua_run` (issue #37's code mode) over MCP, in the `core` profile.
mod code_mode;
mod skills;
