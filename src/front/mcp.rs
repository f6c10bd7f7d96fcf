//! `lmcp serve`: every tool, recipe, custom tool and skill to any MCP client, over stdio.
//!
//! Built on the official Rust SDK (`rmcp`) with a hand-written [`ServerHandler`], because tools
//! are created at run time. Both protocol generations the SDK speaks are served: the `initialize`
//! handshake (2025-11-25 and earlier) and per-request discovery (2026-07-28). Where they differ:
//!
//! | | handshake era | 2026-07-28 |
//! |---|---|---|
//! | tool list changes | `notifications/tools/list_changed` to the peer | on `subscriptions/listen` streams |
//! | asking a person | `elicitation/create` sent during the call | an input-required result; the client retries |
//!
//! Calls go through [`Host::call`] with origin `mcp`, confirmed (a client's tool call is its own
//! action) and cancellable by `notifications/cancelled`. Tool failures, denials and invalid
//! arguments come back as `isError` results with a message a person can act on; only an unknown
//! tool is a protocol error (invalid params, as the spec names it). Nothing but protocol is
//! written to stdout: scripts' `print` is captured, logs go to stderr. Custom tools and skills
//! saved, changed or removed by other processes (the command line beside the server) are picked
//! up within two seconds ([`crate::library::sync`]) and announced like any other change.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ClientResult, ContentBlock, ElicitRequest, ElicitRequestParams, ElicitationAction,
    GetPromptRequestParams, GetPromptResponse, Implementation, InputRequiredResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, RequestId, ResourceUpdatedNotificationParam, ServerCapabilities,
    ServerConfig, ServerRequest, SubscribeRequestParams, SubscriptionFilter, Tool,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::prompts;
use super::resources::{self, Catalog, Subscriptions};
use crate::error::{Error, Result};
use crate::gate::{
    Answer, AnswerFuture, CallContext, CallRequest, ConfirmMode, ConfirmRequest, Confirmer,
    NoPerson, Origin, Outcome,
};
use crate::host::Host;
use crate::registry::Profile;
use crate::text::escape_controls;

/// The environment variable that adds output schemas to the tool list (`1` or `true`; without
/// it the list has none).
pub const OUTPUT_SCHEMAS_VAR: &str = "LMCP_OUTPUT_SCHEMAS";

/// The key of our one input request in an input-required result.
const CONFIRM_KEY: &str = "lmcp_confirm";

/// A person's pending decision in the 2026-07-28 flow: what they were asked about.
#[derive(Debug, Clone)]
struct Pending {
    tool: String,
    args_hash: String,
    asked: ConfirmRequest,
    /// When it was asked: unanswered questions expire.
    at: std::time::Instant,
}

/// Most unanswered questions kept (the oldest go first), and how long one is kept: a client
/// that never answers cannot grow the server.
const MAX_PENDING: usize = 256;
const PENDING_TTL: std::time::Duration = std::time::Duration::from_secs(600);

/// Drops expired questions, and the oldest ones beyond [`MAX_PENDING`] - 1 to make room.
fn prune_pending(pending: &mut HashMap<String, Pending>) {
    pending.retain(|_, p| p.at.elapsed() < PENDING_TTL);
    while pending.len() >= MAX_PENDING {
        let Some(oldest) = pending
            .iter()
            .min_by_key(|(_, p)| p.at)
            .map(|(k, _)| k.clone())
        else {
            break;
        };
        pending.remove(&oldest);
    }
}

/// The MCP server.
#[derive(Clone)]
pub struct McpServer {
    host: Arc<Host>,
    profile: Profile,
    output_schemas: bool,
    /// Confirmations asked through input-required results, by request state.
    pending: Arc<Mutex<HashMap<String, Pending>>>,
    /// This session's `resources/subscribe`s (handshake era; 2026-07-28 clients subscribe on
    /// their `subscriptions/listen` stream instead).
    subscriptions: Arc<Mutex<Subscriptions>>,
}

impl McpServer {
    /// A server for this host and profile.
    pub fn new(host: Arc<Host>, profile: Profile) -> McpServer {
        let output_schemas = std::env::var(OUTPUT_SCHEMAS_VAR)
            .is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
        McpServer {
            host,
            profile,
            output_schemas,
            pending: Arc::default(),
            subscriptions: Arc::default(),
        }
    }

    /// The server for one more session: questions pending are shared (a 2026-07-28 answer may
    /// arrive on a request of its own), resource subscriptions are the session's own.
    pub fn for_session(&self) -> McpServer {
        McpServer {
            subscriptions: Arc::default(),
            ..self.clone()
        }
    }

    /// The same server, with output schemas listed or not (whatever the environment says).
    pub fn with_output_schemas(mut self, on: bool) -> McpServer {
        self.output_schemas = on;
        self
    }

    /// The tool list: the profile's available tools, sorted by name.
    pub fn tools(&self) -> Vec<Value> {
        self.host
            .tools(self.profile)
            .into_iter()
            .filter(|(_, a)| a.is_available())
            .map(|(t, _)| {
                let s = t.spec();
                let mut annotations = serde_json::to_value(s.annotations).unwrap_or_default();
                annotations["title"] = json!(s.title);
                let mut tool = json!({
                    "name": s.name,
                    "title": s.title,
                    "description": s.description,
                    "inputSchema": s.input_schema,
                    "annotations": annotations,
                });
                if self.output_schemas
                    && let Some(o) = &s.output_schema
                {
                    tool["outputSchema"] = o.clone();
                }
                tool
            })
            .collect()
    }
}

fn args_hash(tool: &str, args: &Value) -> String {
    format!("{:x}", Sha256::digest(format!("{tool}\n{args}").as_bytes()))
}

fn is_modern(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::NO_INITIALIZE.as_str())
}

/// Whether the client can answer a form question: it declares elicitation, with `form` or
/// with neither mode named (which the spec reads as form). A URL-only client cannot.
fn can_elicit(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities().is_some_and(|c| {
        c.elicitation
            .as_ref()
            .is_some_and(|e| e.form.is_some() || e.url.is_none())
    })
}

/// The question a person sees in the client, and the form it answers with.
fn elicitation_params(asked: &ConfirmRequest) -> Value {
    if let Some(who) = &asked.asked_by {
        return json!({
            "mode": "form",
            "message": format!(
                "{} asks (its words, not lmcp's): {} — {}",
                escape_controls(who),
                escape_controls(&asked.summary),
                escape_controls(&asked.why),
            ),
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "allow": {"type": "boolean", "title": "Accept", "description": format!("Accept what {who} asks")}
                },
                "required": ["allow"]
            }
        });
    }
    let calls = format!(
        "{}{}",
        crate::gate::calls_line(&asked.calls),
        crate::gate::hosts_line(&asked.hosts)
    );
    json!({
        "mode": "form",
        "message": format!(
            "Allow lmcp to run {} ({}{})? {} — {}{}",
            escape_controls(&asked.tool),
            asked.effect,
            if asked.destructive { ", destructive" } else { "" },
            escape_controls(&asked.summary),
            escape_controls(&asked.why),
            if calls.is_empty() { String::new() } else { format!(". {}", calls.trim().replace("\n  ", "; ")) }
        ),
        "requestedSchema": {
            "type": "object",
            "properties": {
                "allow": {"type": "boolean", "title": "Allow", "description": format!("Run {} now", asked.tool)}
            },
            "required": ["allow"]
        }
    })
}

/// Accept with `allow: true` is a yes; anything else is a no.
/// The person's answer in an elicitation result. An accept whose form does not hold a yes or
/// no in `allow` is the client's fault, not the person's, and is reported so.
fn answer_of(action: ElicitationAction, content: Option<&Value>) -> Answer {
    match action {
        ElicitationAction::Accept => match content.and_then(|c| c.get("allow")) {
            Some(Value::Bool(true)) => Answer::Yes,
            Some(Value::Bool(false)) => Answer::No,
            _ => Answer::Failed(
                "the client accepted without the form's yes-or-no `allow` field".into(),
            ),
        },
        ElicitationAction::Cancel => Answer::Dismissed,
        _ => Answer::No,
    }
}

/// Asks through `elicitation/create` during the call (handshake era).
struct ElicitingConfirmer {
    peer: Peer<RoleServer>,
}

impl Confirmer for ElicitingConfirmer {
    fn ask_for_another(&self, request: &ConfirmRequest) -> AnswerFuture<'_> {
        // the client's person answers; the question says whose it is
        self.confirm(request)
    }

    fn confirm(&self, request: &ConfirmRequest) -> AnswerFuture<'_> {
        let params = elicitation_params(request);
        Box::pin(async move {
            let params = match serde_json::from_value::<ElicitRequestParams>(params) {
                Ok(p) => p,
                Err(e) => return Answer::Failed(format!("the question could not be built: {e}")),
            };
            let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
            let handle = match self
                .peer
                .send_cancellable_request(request, PeerRequestOptions::no_options())
                .await
            {
                Ok(h) => h,
                Err(e) => return Answer::Failed(e.to_string()),
            };
            // Should the call be cancelled while the question is open, this future is dropped
            // and the guard withdraws the question, so the client closes its dialog.
            let mut withdraw = Withdraw {
                peer: self.peer.clone(),
                id: Some(handle.id.clone()),
            };
            let response = handle.await_response().await;
            withdraw.id = None;
            match response {
                Ok(ClientResult::ElicitResult(r)) => answer_of(r.action, r.content.as_ref()),
                Ok(_) => Answer::Failed("the client answered with something else".into()),
                Err(e) => {
                    tracing_stderr(&format!("elicitation failed: {e}"));
                    Answer::Failed(e.to_string())
                }
            }
        })
    }
}

/// Sends `notifications/cancelled` for a question still open when it is dropped.
struct Withdraw {
    peer: Peer<RoleServer>,
    id: Option<RequestId>,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let peer = self.peer.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let notice: Result<CancelledNotificationParam, _> = serde_json::from_value(json!({
                    "requestId": id,
                    "reason": "the call that asked was cancelled",
                }));
                if let Ok(notice) = notice {
                    let _ = peer.notify_cancelled(notice).await;
                }
            });
        }
    }
}

/// Records what would have been asked, to ask it through an input-required result instead
/// (2026-07-28); with `answered`, gives the person's answer to exactly that question.
///
/// A program is asked about once, before anything runs (the gate works out its calls first), so
/// the retry starts the program from the beginning with nothing done yet. A per-tool `ask`
/// grant on a step asks again on its own, by design.
struct DeferringConfirmer {
    asked: Mutex<Option<ConfirmRequest>>,
    answered: Option<(ConfirmRequest, Answer)>,
}

impl Confirmer for DeferringConfirmer {
    fn ask_for_another(&self, _request: &ConfirmRequest) -> AnswerFuture<'_> {
        // a stateless session's questions go back to the client with the call's retry, which
        // cannot carry another server's question: nobody is asked, and that server is declined
        Box::pin(std::future::ready(Answer::CannotAsk))
    }

    fn confirm(&self, request: &ConfirmRequest) -> AnswerFuture<'_> {
        let answer = match &self.answered {
            Some((a, answer)) if a.tool == request.tool && a.args == request.args => answer.clone(),
            _ => {
                let mut asked = self.asked.lock().unwrap_or_else(|p| p.into_inner());
                if asked.is_none() {
                    *asked = Some(request.clone());
                }
                Answer::CannotAsk
            }
        };
        Box::pin(std::future::ready(answer))
    }
}

pub(super) fn tracing_stderr(message: &str) {
    errln!("lmcp serve: {message}");
}

/// Turns an outcome into a tool result: structured content plus the same JSON as text, or an
/// `isError` result whose first text is the message and whose second is the error as JSON.
///
/// An error result carries structured content only when the client was not given an output
/// schema for the tool (`schema_listed` false): clients validate structured content against
/// the declared schema even on errors, and SDK 1.x clients then threw the real message away.
///
/// A preview is never a tool's `structuredContent` (#37): MCP calls run confirmed, asking
/// through the client, so the gate has no preview to give here; were one to arrive, it is not
/// the tool's declared result, so it goes as text only (the preview's JSON), and a client
/// validating output schemas never sees it as a result. The previews a program's run makes
/// are inside its result (`lua_run`'s and `recipe_run`'s), where their shape is declared.
fn to_result(outcome: Outcome, schema_listed: bool) -> CallToolResult {
    match outcome {
        Outcome::Done(v) => {
            let structured = if v.is_object() {
                v
            } else {
                json!({"result": v})
            };
            CallToolResult::structured(structured)
        }
        Outcome::Preview(p) => CallToolResult::success(vec![ContentBlock::text(
            json!({"outcome": "preview", "preview": p.to_json()}).to_string(),
        )]),
        other => {
            let j = other.to_json();
            let message = match &other {
                Outcome::Denied { tool, reason } => format!("`{tool}` was denied: {reason}"),
                Outcome::NeedsConfirmation { tool, reason } => {
                    format!("`{tool}` was not run: it needs a person's yes ({reason})")
                }
                Outcome::Failed(e) => e.to_string(),
                _ => String::new(),
            };
            let mut r = match &other {
                // a failure the tool described in its own declared shape fits its output schema
                Outcome::Failed(Error::Reported { result, .. }) if schema_listed => {
                    CallToolResult::structured_error((**result).clone())
                }
                _ if schema_listed => CallToolResult::error(vec![]),
                _ => CallToolResult::structured_error(j.clone()),
            };
            r.content = vec![
                ContentBlock::text(message),
                ContentBlock::text(j.to_string()),
            ];
            r
        }
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        let mut info = ServerConfig::new(capabilities);
        info.server_info = Implementation::new("lmcp", env!("CARGO_PKG_VERSION"));
        let mut instructions = String::from(
            "lmcp hosts local tools behind one grant and confirmation gate. Discover tools before \
             adding one; save repeated sequences with custom_tool_create or recipe_save.",
        );
        if let Some(p) = self.host.config_problem() {
            instructions.push_str(&format!(
                " WARNING: {}. Tell the user; calls that change anything are refused until it \
                 is fixed.",
                escape_controls(&p)
            ));
        }
        info.instructions = Some(instructions);
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, McpError> {
        let tools: Vec<Tool> = self
            .tools()
            .into_iter()
            .map(serde_json::from_value)
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| {
                McpError::internal_error(format!("a tool description does not fit MCP: {e}"), None)
            })?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        let Some(tool) = self
            .host
            .registry()
            .get(&name)
            .filter(|t| self.profile.includes(t.spec().profile))
        else {
            if let Some(t) = self.host.registry().get(&name) {
                return Err(McpError::invalid_params(
                    format!(
                        "`{name}` is not offered in the {} profile; start the server with \
                         `lmcp serve --profile {}` to use it",
                        self.profile,
                        t.spec().profile
                    ),
                    None,
                ));
            }
            let in_profile = |n: &String| {
                self.host
                    .registry()
                    .get(n)
                    .is_some_and(|t| self.profile.includes(t.spec().profile))
            };
            let e = Error::UnknownTool {
                suggestions: self
                    .host
                    .registry()
                    .closest(&name)
                    .into_iter()
                    .filter(in_profile)
                    .collect(),
                name,
            };
            return Err(McpError::invalid_params(e.to_string(), None));
        };
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let modern = is_modern(&context);
        let elicit = can_elicit(&context);

        // A retry carrying a person's answer to our input-required result.
        let mut answered = None;
        if let Some(state) = &request.request_state {
            let pending = self
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(state);
            let pending = pending.filter(|p| p.at.elapsed() < PENDING_TTL);
            let Some(p) = pending else {
                return Err(McpError::invalid_params(
                    "unknown, expired or reused requestState; call the tool again",
                    None,
                ));
            };
            if p.tool != tool.spec().name || p.args_hash != args_hash(&p.tool, &args) {
                return Err(McpError::invalid_params(
                    "requestState belongs to a different call",
                    None,
                ));
            }
            let response = request
                .input_responses
                .as_ref()
                .and_then(|r| r.get(CONFIRM_KEY))
                .cloned()
                .unwrap_or(Value::Null);
            let answer =
                match serde_json::from_value::<ElicitationAction>(response["action"].clone()) {
                    Ok(action) => answer_of(action, response.get("content")),
                    Err(_) => Answer::Failed(format!(
                        "the retry's inputResponses hold no answer to `{CONFIRM_KEY}`"
                    )),
                };
            answered = Some((p.asked, answer));
        }

        let deferring = Arc::new(DeferringConfirmer {
            asked: Mutex::new(None),
            answered,
        });
        let confirmer: Arc<dyn Confirmer> = if modern && elicit {
            deferring.clone()
        } else if elicit {
            Arc::new(ElicitingConfirmer {
                peer: context.peer.clone(),
            })
        } else {
            Arc::new(NoPerson)
        };
        let mut ctx = CallContext::root(Origin::Mcp, ConfirmMode::Confirmed)
            .with_confirmer(confirmer)
            .with_cancel(context.ct.child_token());
        let token = request
            .meta
            .as_ref()
            .and_then(|m| m.get_progress_token())
            .or_else(|| context.meta.get_progress_token());
        let mut forwarder = None;
        if let Some(token) = token {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<crate::gate::Progress>();
            let peer = context.peer.clone();
            forwarder = Some(tokio::spawn(async move {
                while let Some(p) = rx.recv().await {
                    let param: ProgressNotificationParam = match serde_json::from_value(json!({
                        "progressToken": token,
                        "progress": p.done as f64,
                        "total": p.total.map(|t| t as f64),
                        "message": p.message,
                    })) {
                        Ok(param) => param,
                        Err(_) => break,
                    };
                    if peer.notify_progress(param).await.is_err() {
                        break;
                    }
                }
            }));
            ctx = ctx.with_progress(Arc::new(move |p| {
                let _ = tx.send(p);
            }));
        }
        let outcome = self
            .host
            .call(CallRequest::new(
                tool.spec().name.clone(),
                args.clone(),
                ctx,
            ))
            .await;
        // Progress notifications go out before the result, never after it.
        if let Some(f) = forwarder {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), f).await;
        }
        for w in self.host.take_warnings() {
            tracing_stderr(&w);
        }

        // 2026-07-28: ask through an input-required result, then the client retries.
        let asked = deferring
            .asked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let (Outcome::NeedsConfirmation { .. }, Some(asked), true) =
            (&outcome, asked, modern && elicit)
        {
            let state = uuid::Uuid::new_v4().to_string();
            let tool_name = tool.spec().name.clone();
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            prune_pending(&mut pending);
            pending.insert(
                state.clone(),
                Pending {
                    args_hash: args_hash(&tool_name, &args),
                    tool: tool_name,
                    asked: asked.clone(),
                    at: std::time::Instant::now(),
                },
            );
            drop(pending);
            let result: InputRequiredResult = serde_json::from_value(json!({
                "resultType": "input_required",
                "inputRequests": {CONFIRM_KEY: {"method": "elicitation/create", "params": elicitation_params(&asked)}},
                "requestState": state,
            }))
            .map_err(|e| McpError::internal_error(format!("cannot build the confirmation request: {e}"), None))?;
            return Ok(result.into());
        }
        let schema_listed = self.output_schemas && tool.spec().output_schema.is_some();
        Ok(to_result(outcome, schema_listed).into())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListResourcesResult, McpError> {
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let (items, next) = resources::page(&self.host, cursor)?;
        let mut page = ListResourcesResult::with_all_items(items);
        page.next_cursor = next;
        Ok(page)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(prompts::list(&self.host)))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<GetPromptResponse, McpError> {
        prompts::get(&self.host, &request.name).map(Into::into)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ReadResourceResponse, McpError> {
        resources::read(&self.host, &request.uri).map(Into::into)
    }

    #[allow(deprecated)] // the handshake era's way; 2026-07-28 clients use `listen`
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<(), McpError> {
        let mut subscriptions = self.subscriptions.lock().unwrap_or_else(|p| p.into_inner());
        subscriptions.subscribe(&self.host, &request.uri)
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<(), McpError> {
        self.subscriptions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unsubscribe(&request.uri);
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Handshake era: announce tool list changes, and updates of the resources the client
        // subscribed to, to the peer directly.
        let mut changes = self.host.registry().subscribe();
        let peer = context.peer.clone();
        let host = Arc::clone(&self.host);
        let subscriptions = Arc::clone(&self.subscriptions);
        let mut catalog = Catalog::of(&self.host).subscribe();
        catalog.borrow_and_update();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    r = changes.changed() => {
                        if r.is_err() || peer.notify_tool_list_changed().await.is_err() {
                            break;
                        }
                        let updated = subscriptions
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .updates(&host);
                        for uri in updated {
                            let param = ResourceUpdatedNotificationParam::new(uri);
                            if peer.notify_resource_updated(param).await.is_err() {
                                return;
                            }
                        }
                    }
                    r = catalog.changed() => {
                        if r.is_err()
                            || peer.notify_prompt_list_changed().await.is_err()
                            || peer.notify_resource_list_changed().await.is_err()
                        {
                            break;
                        }
                    }
                }
            }
        });
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed.filter(|b| *b);
        accepted.prompts_list_changed = requested.prompts_list_changed.filter(|b| *b);
        accepted.resources_list_changed = requested.resources_list_changed.filter(|b| *b);
        accepted.resource_subscriptions = requested.resource_subscriptions.as_ref().map(|uris| {
            uris.iter()
                .filter(|u| resources::is_watchable(u))
                .cloned()
                .collect()
        });
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> std::result::Result<(), McpError> {
        // 2026-07-28: tool list changes and resource updates ride the client's subscription
        // stream.
        let tools = context.accepted().tools_list_changed == Some(true);
        let wanted = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        let mut subscriptions = Subscriptions::to(&self.host, &wanted);
        let prompts = context.accepted().prompts_list_changed == Some(true);
        let listed = context.accepted().resources_list_changed == Some(true);
        if !tools && !prompts && !listed && subscriptions.is_empty() {
            context.cancelled().await;
            return Ok(());
        }
        let mut changes = self.host.registry().subscribe();
        changes.borrow_and_update();
        let mut catalog = Catalog::of(&self.host).subscribe();
        catalog.borrow_and_update();
        loop {
            tokio::select! {
                r = catalog.changed() => {
                    if r.is_err() {
                        break;
                    }
                    let sink = context.sink();
                    if (prompts && sink.notify_prompt_list_changed().await.is_err())
                        || (listed && sink.notify_resource_list_changed().await.is_err())
                    {
                        break;
                    }
                }
                r = changes.changed() => {
                    if r.is_err() {
                        break;
                    }
                    let sink = context.sink();
                    if tools && sink.notify_tool_list_changed().await.is_err() {
                        break;
                    }
                    for uri in subscriptions.updates(&self.host) {
                        if sink.notify_resource_updated(uri).await.is_err() {
                            return Ok(());
                        }
                    }
                }
                _ = context.cancelled() => break,
            }
        }
        Ok(())
    }
}

/// Serves MCP on stdin/stdout until the client leaves. The host must have been opened with the
/// local (stdio) transport.
pub async fn serve(host: Arc<Host>, profile: Profile) -> Result<u8> {
    for w in host.take_warnings() {
        tracing_stderr(&w);
    }
    host.registry().load_builtins();
    // a person who started it by hand sees why nothing happens, and how to leave
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        tracing_stderr(
            "speaking MCP on stdin and stdout, for an MCP client to start (see the README); \
             Ctrl-C or Ctrl-D ends it",
        );
    }
    let watcher = tokio::spawn(watch_library(Arc::clone(&host), profile));
    let served = serve_session(host, profile).await;
    watcher.abort();
    served
}

/// How often a running server looks for programs saved or removed by other processes.
const LIBRARY_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// Keeps the registry in line with the program stores while the server runs: a custom tool
/// saved from the command line appears (and clients get `tools/list_changed`) within
/// [`LIBRARY_POLL`], and one deleted there goes.
pub(super) async fn watch_library(host: Arc<Host>, profile: Profile) {
    // What clients can call also changes with the config (`lmcp tool disable`, no-terminal
    // mode): the names available are compared on each look, and a change is announced.
    let available = |host: &Host| -> Vec<String> {
        host.tools(profile)
            .into_iter()
            .filter(|(_, a)| a.is_available())
            .map(|(t, _)| t.spec().name.clone())
            .collect()
    };
    let mut offered = available(&host);
    // changes the registry announced itself (a saved tool), so they are not announced twice
    let mut announced = host.registry().subscribe();
    let h = Arc::clone(&host);
    if tokio::task::spawn_blocking(move || {
        crate::library::watch(&h);
        Catalog::of(&h).look(&h);
    })
    .await
    .is_err()
    {
        return;
    }
    let catalog = Catalog::of(&host);
    let mut tick = tokio::time::interval(LIBRARY_POLL);
    tick.tick().await;
    loop {
        tick.tick().await;
        let h = Arc::clone(&host);
        let c = Arc::clone(&catalog);
        // skills installed, removed or switched on or off, here or elsewhere, change the
        // prompts and references clients see
        if tokio::task::spawn_blocking(move || {
            crate::library::sync(&h);
            c.look(&h);
        })
        .await
        .is_err()
        {
            return;
        }
        let now = available(&host);
        let registry_said = announced.has_changed().unwrap_or(false);
        announced.mark_unchanged();
        if now != offered {
            offered = now;
            if !registry_said {
                host.registry().announce_change();
                announced.mark_unchanged();
            }
        }
        for w in host.take_warnings() {
            tracing_stderr(&w);
        }
    }
}

async fn serve_session(host: Arc<Host>, profile: Profile) -> Result<u8> {
    // listened for before the session starts: a client stopping the server with SIGTERM (or a
    // person with Ctrl-C) ends it like closing stdin does, so what it recorded is written. The
    // handshake waits on it too: a server nobody has spoken to yet (a terminal, a process
    // manager's idle child) ends at once, not when a client finally sends `initialize` (#34).
    let stopped = stop_signals();
    tokio::pin!(stopped);
    let server = McpServer::new(host, profile);
    let (input, output) = rmcp::transport::stdio_pipes();
    let handshake = server.serve(super::lines::filtered(input, output));
    let started = tokio::select! {
        started = handshake => started,
        () = &mut stopped => return Ok(0),
    };
    let running = match started {
        Ok(r) => r,
        // A client that connects and leaves before its first request is not an error.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(0),
        Err(e) => {
            return Err(Error::Usage(format!(
                "the MCP session could not start: {e}"
            )));
        }
    };
    tokio::select! {
        done = running.waiting() => {
            done.map_err(|e| Error::Usage(format!("the MCP session failed: {e}")))?;
        }
        () = &mut stopped => {}
    }
    Ok(0)
}

/// Resolves at the first SIGTERM or SIGINT (never where there are no such signals).
pub(super) fn stop_signals() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate()).ok();
        let int = signal(SignalKind::interrupt()).ok();
        async move {
            let wait = |s: Option<tokio::signal::unix::Signal>| async move {
                match s {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = wait(term) => {}
                () = wait(int) => {}
            }
        }
    }
    #[cfg(not(unix))]
    std::future::pending::<()>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::ShownCall;
    use crate::registry::Effect;

    /// Error results carry no structured content when the tool's output schema was listed
    /// (clients would validate it against the schema), and keep it otherwise; the message is
    /// the first text either way, and the error's JSON the second.
    #[test]
    fn error_results_meet_declared_schemas() {
        let errors = || {
            vec![
                Outcome::Failed(Error::tool("calculate", "division by zero")),
                Outcome::Denied {
                    tool: "write_file".into(),
                    reason: "a person declined the call".into(),
                },
                Outcome::NeedsConfirmation {
                    tool: "write_file".into(),
                    reason: "nobody could be asked".into(),
                },
                Outcome::Failed(Error::Cancelled),
            ]
        };
        for (outcome, again) in errors().into_iter().zip(errors()) {
            let listed = to_result(outcome, true);
            assert_eq!(listed.is_error, Some(true), "{again:?}");
            assert!(listed.structured_content.is_none(), "{again:?}");
            let texts: Vec<String> = listed
                .content
                .iter()
                .filter_map(|c| c.as_text().map(|t| t.text.clone()))
                .collect();
            assert_eq!(texts.len(), 2, "{again:?}");
            assert!(
                !texts[0].is_empty() && !texts[0].starts_with('{'),
                "{texts:?}"
            );
            let j: Value = serde_json::from_str(&texts[1]).unwrap();
            assert!(j.get("outcome").is_some(), "{j}");
            let unlisted = to_result(again, false);
            assert!(unlisted.structured_content.is_some());
        }
        let done = to_result(Outcome::Done(json!({"value": 1})), true);
        assert_eq!(done.structured_content, Some(json!({"value": 1})));
        // a preview is not the tool's result: text only, listed schema or not
        for listed in [true, false] {
            let preview = to_result(
                Outcome::Preview(crate::gate::Preview {
                    tool: "write_file".into(),
                    args: json!({"path": "a"}),
                    effect: Effect::Write,
                    summary: "write a".into(),
                }),
                listed,
            );
            assert!(preview.structured_content.is_none());
            assert_ne!(preview.is_error, Some(true));
            let text = preview.content[0].as_text().unwrap().text.clone();
            assert!(text.contains("\"preview\":true"), "{text}");
        }
    }

    #[test]
    fn the_elicitation_message_shows_controls_escaped_and_every_call() {
        let asked = ConfirmRequest {
            tool: "recipe_run".into(),
            effect: Effect::Send,
            destructive: true,
            args: json!({"name": "x"}),
            summary: "run the recipe \"a\u{1b}[2Kb\"\n".into(),
            why: "the grant for destructive tools is ask".into(),
            calls: vec![ShownCall {
                tool: "write_file".into(),
                effect: Effect::Write,
                destructive: true,
            }],
            hosts: Vec::new(),
            every_time: false,
            asked_by: None,
        };
        let message = elicitation_params(&asked)["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            !message.contains('\u{1b}') && !message.contains('\n'),
            "{message:?}"
        );
        assert!(message.contains("a\\e[2Kb"), "{message}");
        assert!(
            message.contains("write_file (write, destructive)"),
            "{message}"
        );
    }

    #[test]
    fn unanswered_questions_are_bounded() {
        let asked = ConfirmRequest {
            tool: "t".into(),
            effect: Effect::Write,
            destructive: false,
            args: json!({}),
            summary: String::new(),
            why: String::new(),
            calls: Vec::new(),
            hosts: Vec::new(),
            every_time: false,
            asked_by: None,
        };
        let mut pending = HashMap::new();
        for i in 0..2000 {
            prune_pending(&mut pending);
            pending.insert(
                i.to_string(),
                Pending {
                    tool: "t".into(),
                    args_hash: String::new(),
                    asked: asked.clone(),
                    at: std::time::Instant::now(),
                },
            );
        }
        assert!(pending.len() <= MAX_PENDING);
        assert!(pending.contains_key("1999"), "the newest is kept");
    }

    #[test]
    fn a_broken_config_is_in_the_server_instructions() {
        let dir = tempfile::tempdir().unwrap();
        let paths = crate::store::Paths::under(dir.path());
        std::fs::create_dir_all(&paths.config_dir).unwrap();
        std::fs::write(paths.config_file(), "{nope").unwrap();
        let host = Host::open(paths).unwrap();
        let info = McpServer::new(host, Profile::Core).get_info();
        let text = info.instructions.unwrap_or_default();
        assert!(
            text.contains("WARNING") && text.contains("config repair"),
            "{text}"
        );
    }
}
