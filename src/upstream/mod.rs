//! Other MCP servers' tools, behind the same gate: lmcp is their client, and each of their
//! tools is an lmcp tool named `mcp__SERVER__TOOL`, a leaf like any built-in, callable from every
//! door and every program.
//!
//! What comes from a server is data. Its annotations only lower trust (`trust`): they decide
//! how a tool is shown and previewed, and no upstream tool runs without a person's yes until it
//! is allowed by name or by server, an allow pinned to the definition it was given for (the
//! gate checks the pin: `Config::pin`). Its descriptions and results are shown escaped like any
//! text lmcp did not write. Its messages, tool lists, logs and notifications are bounded
//! (`connection`).
//!
//! A server starts on first need (a call of one of its tools), never at lmcp's start: its tool
//! list is kept, sealed, from the last time it gave it (`catalog`), so listings start nothing.
//! One child per server per lmcp process, shared by every session of `serve --http`.
//!
//! | file            | its part                                                           |
//! |-----------------|--------------------------------------------------------------------|
//! | `mod.rs`        | [`Upstreams`]: the servers of one host, started when needed; calls |
//! | `names.rs`      | server names, and tool names made Lua identifiers                   |
//! | `trust.rs`      | effects from claims, and the definition hash grants are pinned to   |
//! | `tools.rs`      | a server's definitions as lmcp tools, and the ones refused          |
//! | `catalog.rs`    | each server's last tool list, sealed, so listings start nothing     |
//! | `connection.rs` | one running server: its process, lmcp's rmcp client, a call        |

pub mod catalog;
mod connection;
pub mod names;
pub mod tools;
pub mod trust;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::config::Server;
use crate::error::{Error, Result};
use crate::host::Host;
use crate::registry::{Invocation, handler};

pub use catalog::Catalog;
use connection::{Connection, Launch, Reach};
pub use connection::{MAX_MESSAGE, MAX_TOOLS, START_TIMEOUT};

/// The servers of one host: each started on first need, once per process.
pub struct Upstreams {
    host: Weak<Host>,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

/// One server's running connection, if any, and what it listed when it started.
#[derive(Default)]
struct Slot {
    running: tokio::sync::Mutex<Option<Arc<Connection>>>,
    /// Its tools' definition hashes as it listed them this run, by their names on the server.
    live: Mutex<Option<HashMap<String, String>>>,
}

/// Makes the host's [`Upstreams`] (attached to it); the tools of every enabled server are
/// registered from their last tool lists by [`load_all`], when the registry first needs them.
pub fn attach(host: &Arc<Host>) {
    host.attach(Arc::new(Upstreams {
        host: Arc::downgrade(host),
        slots: Mutex::default(),
    }));
}

/// Registers the tools of every enabled server from its catalog (run with the library's
/// deferred load: a script that calls only built-in tools reads none of this).
pub fn load_all(host: &Host) {
    let config = host.config();
    for (name, server) in &config.servers {
        if server.disabled {
            continue;
        }
        if let Some(catalog) = catalog::load(host, name)
            && catalog.launch == catalog::launch_key(server)
        {
            register(host, name, &catalog.tools);
        }
    }
}

/// Makes the registry hold exactly the tools `definitions` offer for `server`: new ones added,
/// changed ones replaced, vanished ones removed. Returns the refusals.
pub fn register(host: &Host, server: &str, definitions: &[Value]) -> Vec<tools::Refused> {
    let (mut offered, refused) = tools::offered(server, definitions);
    // a server reached over the network: every call leaves this machine, whatever it claims
    if host
        .config()
        .servers
        .get(server)
        .is_some_and(|s| s.url.is_some())
    {
        for o in &mut offered {
            o.spec.annotations.open_world_hint = true;
        }
    }
    let prefix = names::tool_name(server, "");
    let keep: Vec<&str> = offered.iter().map(|o| o.spec.name.as_str()).collect();
    for t in host.registry().all() {
        let name = &t.spec().name;
        if name.starts_with(&prefix) && !keep.contains(&name.as_str()) {
            host.registry().unregister(name);
        }
    }
    for o in offered {
        let same = host
            .registry()
            .get(&o.spec.name)
            .is_some_and(|t| t.spec().definition == o.spec.definition);
        if same {
            continue;
        }
        let spec_name = o.spec.name.clone();
        let call = call_handler(Target {
            server: server.to_string(),
            name: o.spec.name.clone(),
            hash: o.spec.definition.clone().unwrap_or_default(),
            effect: o.spec.effect,
            has_output_schema: o.spec.output_schema.is_some(),
            upstream: o.upstream,
        });
        if let Err(e) = host.registry().register_or_replace(o.spec, call) {
            host.warn(format!("the tool `{spec_name}` is not offered: {e}"));
        }
    }
    refused
}

/// Removes every tool of `server` from the registry.
pub fn unregister(host: &Host, server: &str) {
    let prefix = names::tool_name(server, "");
    for t in host.registry().all() {
        if t.spec().name.starts_with(&prefix) {
            host.registry().unregister(&t.spec().name);
        }
    }
}

/// The `(tool, definition hash)` pairs an allow of `key` pins: the tool itself, or every tool
/// of the server `mcp__SERVER` names, as registered now. Empty for any other key.
pub fn pins_for(host: &Host, key: &str) -> Vec<(String, String)> {
    let whole_server = names::server_of(key).is_none() && key.starts_with(names::PREFIX);
    host.registry()
        .all()
        .iter()
        .filter_map(|t| {
            let s = t.spec();
            let hash = s.definition.clone()?;
            let ours = if whole_server {
                names::server_of(&s.name).is_some_and(|srv| names::server_key(srv) == key)
            } else {
                s.name == key
            };
            ours.then(|| (s.name.clone(), hash))
        })
        .collect()
}

/// What one upstream tool's handler knows of it, fixed when it is registered (a changed
/// definition registers a new handler).
struct Target {
    server: String,
    /// Its name on the server.
    upstream: String,
    /// Its lmcp name.
    name: String,
    /// The hash of the definition the gate decides on.
    hash: String,
    effect: crate::registry::Effect,
    has_output_schema: bool,
}

/// The handler of one upstream tool: calls it on its server, started if need be.
fn call_handler(target: Target) -> crate::registry::Handler {
    let target = Arc::new(target);
    handler(move |inv: Invocation| {
        let target = Arc::clone(&target);
        async move {
            let upstreams = Host::of(inv.caller.as_ref())
                .attached::<Upstreams>()
                .ok_or_else(|| Error::Tool {
                    tool: target.name.clone(),
                    message: "this host has no connections to other MCP servers".into(),
                })?;
            upstreams.call(&target, inv).await
        }
    })
}

impl Upstreams {
    fn host(&self) -> Result<Arc<Host>> {
        self.host.upgrade().ok_or(Error::Cancelled)
    }

    fn slot(&self, server: &str) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = slots.get(server) {
            return Arc::clone(slot);
        }
        Arc::clone(slots.entry(server.to_string()).or_default())
    }

    /// Calls the tool on its server, refusing when the server's definition of it is no longer
    /// the one the gate decided on.
    async fn call(&self, target: &Target, inv: Invocation) -> Result<Value> {
        let (server, lmcp_name) = (target.server.as_str(), target.name.as_str());
        let slot = self.slot(server);
        let conn = self.connection(server, &slot).await?;
        let live = slot
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|l| l.get(&target.upstream).map(|h| h == &target.hash));
        match live {
            Some(Some(true)) => {}
            Some(Some(false)) => {
                return Err(Error::Refused(format!(
                    "the MCP server `{server}` changed its tool `{lmcp_name}` since lmcp listed \
                     it, so nothing was run under what was shown or allowed before; the next call \
                     asks about it as it is now (`lmcp servers show {server}` shows it)"
                )));
            }
            _ => {
                return Err(Error::Refused(format!(
                    "the MCP server `{server}` no longer lists the tool `{lmcp_name}`; nothing was \
                     run"
                )));
            }
        }
        let args = match inv.args {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let on_behalf = connection::Active {
            ctx: inv.ctx,
            tool: target.name.clone(),
            effect: target.effect,
        };
        let result = conn.call(&target.upstream, args, on_behalf).await;
        if !conn.is_alive() {
            // a server that died is started again at the next call
            self.forget(&slot, &conn).await;
        }
        result_value(lmcp_name, result?, target.has_output_schema)
    }

    /// The server's running connection, started (and its tools listed again) if it has none
    /// or the one it had died.
    async fn connection(&self, server: &str, slot: &Slot) -> Result<Arc<Connection>> {
        let mut running = slot.running.lock().await;
        if let Some(c) = running.as_ref()
            && c.is_alive()
        {
            return Ok(Arc::clone(c));
        }
        if let Some(old) = running.take() {
            old.stop().await;
        }
        let host = self.host()?;
        let entry = host.config().servers.get(server).cloned().ok_or_else(|| {
            Error::Usage(format!(
                "there is no MCP server `{server}`; see `lmcp servers`"
            ))
        })?;
        if entry.disabled {
            return Err(Error::Unavailable {
                tool: names::server_key(server),
                reason: format!(
                    "the MCP server `{server}` is disabled; enable it with `lmcp servers enable \
                     {server}`"
                ),
            });
        }
        let conn = match start_and_list(&host, server, &entry).await {
            Ok((conn, definitions)) => {
                self.relisted(server, &definitions);
                register(&host, server, &definitions);
                conn
            }
            Err(e) => {
                record_failure(&host, server, &e.to_string());
                return Err(e);
            }
        };
        watch_list_changes(
            Arc::downgrade(&conn),
            Weak::clone(&self.host),
            server.to_string(),
        );
        *running = Some(Arc::clone(&conn));
        Ok(conn)
    }

    /// Keeps the definition hashes a server just listed, which its calls are checked against.
    fn relisted(&self, server: &str, definitions: &[Value]) {
        let live = definitions
            .iter()
            .filter_map(|d| {
                Some((
                    d.get("name")?.as_str()?.to_string(),
                    trust::definition_hash(d),
                ))
            })
            .collect();
        *self
            .slot(server)
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(live);
    }

    async fn forget(&self, slot: &Slot, conn: &Arc<Connection>) {
        let mut running = slot.running.lock().await;
        if running.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
            running.take();
        }
        drop(running);
        conn.stop().await;
    }

    /// Ends every server this host started (`lmcp serve` as it ends).
    pub async fn stop_all(&self) {
        let slots: Vec<Arc<Slot>> = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        for slot in slots {
            if let Some(c) = slot.running.lock().await.take() {
                c.stop().await;
            }
        }
    }

    /// The process id of the server's child while it runs.
    pub fn pid(&self, server: &str) -> Option<u32> {
        let slot = self.slot(server);
        let running = slot.running.try_lock().ok()?;
        running
            .as_ref()
            .filter(|c| c.is_alive())
            .and_then(|c| c.pid())
    }
}

/// Starts a server, lists its tools and keeps them in its catalog: `lmcp servers add` and
/// `refresh`, and every first call.
async fn start_and_list(
    host: &Host,
    server: &str,
    entry: &Server,
) -> Result<(Arc<Connection>, Vec<Value>)> {
    let launch = Launch {
        server: server.to_string(),
        reach: reach(host, server, entry)?,
    };
    let conn = Connection::start(&launch).await?;
    let definitions = match conn.list_tools().await {
        Ok(d) => d,
        Err(e) => {
            conn.stop().await;
            return Err(e);
        }
    };
    catalog::store(
        host,
        server,
        &Catalog::listed(catalog::launch_key(entry), definitions.clone()),
    )?;
    Ok((conn, definitions))
}

/// Starts a server only to list its tools (kept in its catalog), then ends it: `lmcp servers
/// add` and `refresh`.
pub async fn list_once(host: &Host, server: &str, entry: &Server) -> Result<Vec<Value>> {
    let (conn, definitions) = match start_and_list(host, server, entry).await {
        Ok(x) => x,
        Err(e) => {
            record_failure(host, server, &e.to_string());
            return Err(e);
        }
    };
    conn.stop().await;
    Ok(definitions)
}

/// How to reach a server: its command with its variables, or its URL with its headers (the
/// secret ones read from where they are kept).
fn reach(host: &Host, server: &str, entry: &Server) -> Result<Reach> {
    let secrets = if entry.secret_env.is_empty() && entry.secret_headers.is_empty() {
        Map::new()
    } else {
        secrets(host, server)?
    };
    let secret = |key: &str, flag: &str, name: &str| -> Result<String> {
        secrets
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| {
                Error::Usage(format!(
                    "the secret `{name}` of the MCP server `{server}` is not set; add the server \
                     again with {flag} {name}"
                ))
            })
    };
    if let Some(url) = &entry.url {
        let mut headers: Vec<(String, String)> = entry
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for name in &entry.secret_headers {
            headers.push((
                name.clone(),
                secret(&secret_header_key(name), "--secret-header", name)?,
            ));
        }
        return Ok(Reach::Http {
            url: url.clone(),
            headers,
        });
    }
    let mut env: Vec<(String, String)> = entry
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut masked = Vec::new();
    for key in &entry.secret_env {
        let value = secret(key, "--secret-env", key)?;
        masked.extend(crate::text::secret_forms(&value));
        env.push((key.clone(), value));
    }
    Ok(Reach::Command {
        command: entry.command.clone(),
        env,
        log: catalog::log_path(host, server),
        secrets: masked,
    })
}

/// The key a secret header's value is kept under, apart from the variables'.
pub fn secret_header_key(name: &str) -> String {
    format!("header:{}", name.to_ascii_lowercase())
}

/// Where a server's secret values are kept (readable by the person only).
pub fn secrets_path(host: &Host, server: &str) -> std::path::PathBuf {
    host.paths()
        .config_dir
        .join("servers")
        .join(format!("{server}.secrets.json"))
}

/// A server's secret values, by name.
pub fn secrets(host: &Host, server: &str) -> Result<Map<String, Value>> {
    Ok(crate::store::read_json(&secrets_path(host, server))?.unwrap_or_default())
}

/// Keeps a server's secret values (0600, atomically).
pub fn store_secrets(host: &Host, server: &str, values: &Map<String, Value>) -> Result<()> {
    let path = secrets_path(host, server);
    if let Some(dir) = path.parent() {
        crate::store::ensure_dir(dir)?;
    }
    let mut text = serde_json::to_vec_pretty(values).unwrap_or_default();
    text.push(b'\n');
    crate::store::atomic_write_private(&path, &text)
}

/// Records why a server failed, keeping the tools it last listed.
fn record_failure(host: &Host, server: &str, why: &str) {
    let mut catalog = catalog::load(host, server).unwrap_or_default();
    catalog.failure = Some((chrono::Utc::now().timestamp_millis(), why.to_string()));
    if let Err(e) = catalog::store(host, server, &catalog) {
        host.warn(format!(
            "could not record the failure of the MCP server `{server}`: {e}"
        ));
    }
}

/// Lists the server's tools again whenever it says they changed (at most once a second, however
/// many notices it sends), until the connection ends; the registry's change reaches lmcp's own
/// clients as their `list_changed`.
fn watch_list_changes(conn: Weak<Connection>, host: Weak<Host>, server: String) {
    tokio::spawn(async move {
        loop {
            let Some(c) = conn.upgrade() else { return };
            let signals = Arc::clone(&c.signals);
            drop(c);
            tokio::select! {
                _ = signals.notify.notified() => {}
                _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            }
            let Some(c) = conn.upgrade().filter(|c| c.is_alive()) else {
                return;
            };
            // a server switched off or removed while it runs is ended
            if let Some(h) = host.upgrade()
                && h.config().servers.get(&server).is_none_or(|s| s.disabled)
            {
                if let Some(ups) = h.attached::<Upstreams>() {
                    ups.forget(&ups.slot(&server), &c).await;
                }
                return;
            }
            if !signals
                .tools_changed
                .swap(false, std::sync::atomic::Ordering::AcqRel)
            {
                continue;
            }
            let Some(h) = host.upgrade() else { return };
            if let Ok(definitions) = c.list_tools().await
                && let Some(entry) = h.config().servers.get(&server).cloned()
            {
                let listed = Catalog::listed(catalog::launch_key(&entry), definitions.clone());
                if let Err(e) = catalog::store(&h, &server, &listed) {
                    h.warn(format!("could not keep the tools of `{server}`: {e}"));
                }
                if let Some(ups) = h.attached::<Upstreams>() {
                    ups.relisted(&server, &definitions);
                }
                register(&h, &server, &definitions);
            }
            drop(c);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
}

/// A tool result as lmcp gives it on: the structured result when the server gave one (it must,
/// for a tool with an output schema), else `{text, content}`. An error result is a failed call
/// whose message is the server's text, cut at 4 KiB.
fn result_value(
    tool: &str,
    r: rmcp::model::CallToolResult,
    has_output_schema: bool,
) -> Result<Value> {
    let mut text = String::new();
    for block in &r.content {
        if let Some(t) = block.as_text() {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&t.text);
        }
    }
    if r.is_error == Some(true) {
        let mut message = text;
        if message.len() > 4096 {
            let mut cut = 4096;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push('…');
        }
        return Err(Error::Tool {
            tool: tool.to_string(),
            message: format!("the server says: {message}"),
        });
    }
    match r.structured_content {
        Some(v) => Ok(v),
        None if has_output_schema => Err(Error::Tool {
            tool: tool.to_string(),
            message: "the server declares an output schema for this tool but gave no structured \
                      result"
                .into(),
        }),
        None => Ok(json!({
            "text": text,
            "content": serde_json::to_value(&r.content).unwrap_or(Value::Null),
        })),
    }
}
