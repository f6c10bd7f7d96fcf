//! `report_friction`: an anonymous signal that a tool failed, that never leaks what the user did.
//!
//! The caller gives only categories from fixed lists (and a tool name). Everything else in the
//! payload the runtime takes from its own records: the named tool's last failed call from the
//! history ring (its error class, and each argument's declared name, JSON type and size bucket —
//! the history never held a value), the names and outcome classes of the last ten calls, whether
//! the tool is installed, available and granted, the lmcp version and the platform. Names of
//! user-made tools (`user_*`) are redacted: a person chose them, so they may say something about
//! that person. No request text, message, file name, path or account name is ever included; the
//! schema of the payload is `docs/friction-payload.schema.json`.
//!
//! Delivery: to the endpoint in the config (HTTPS, or plain HTTP on loopback only), POSTed as
//! JSON with a timeout. A report that cannot be delivered waits in a persistent outbox and is
//! retried with backoff by `lmcp friction flush`; with no endpoint it waits there too. Nothing is
//! sent or queued while anonymous signals are off (`lmcp signals off`) or in private mode (the
//! gate refuses send tools then).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use crate::config::check_endpoint;
use crate::error::{Error, Result};
use crate::gate::HistoryEntry;
use crate::host::Host;
use crate::registry::{Annotations, Effect, Handler, ToolSpec, handler};
use crate::store::{self, FileLock};

/// The payload schema's name and version.
pub const PAYLOAD_SCHEMA: &str = "lmcp-friction/1";
/// How long one delivery may take.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// The friction types a report may name (`friction_type` in docs/friction-payload.schema.json).
pub const FRICTION_TYPES: &[&str] = &[
    "repeated_failure",
    "task_abandoned",
    "workaround_needed",
    "cannot_complete",
    "other",
];
/// The error categories a report may name (`error_category` in
/// docs/friction-payload.schema.json).
pub const ERROR_CATEGORIES: &[&str] = &[
    "permission",
    "timeout",
    "empty",
    "not_found",
    "parse",
    "wrong_result",
    "missing_capability",
    "crash",
    "other",
];
/// The intent categories a report may name (`intent_category` in
/// docs/friction-payload.schema.json).
pub const INTENT_CATEGORIES: &[&str] = &[
    "find_email",
    "read_email",
    "send_email",
    "send_message",
    "read_messages",
    "schedule_event",
    "read_calendar",
    "manage_reminder",
    "manage_note",
    "manage_contact",
    "read_file",
    "write_file",
    "search_files",
    "document_work",
    "cloud_storage",
    "browse_web",
    "run_command",
    "other",
];

/// The tool's spec: its arguments are the categories above, a tool's name and a count, never
/// free text; effect send, no preview.
pub fn spec() -> ToolSpec {
    ToolSpec::new(
        "report_friction",
        "Report friction",
        "Send the lmcp team an anonymous signal that a tool failed, returned nothing useful or could \
         not do what the user asked, so it can be fixed. Offer it to the user after such a failure \
         and send it if they agree. It holds a category, the tool's name and facts lmcp gathers \
         itself: the failing call's error class, each argument's type and approximate size (never \
         its value), the names and outcomes of the last ten tool calls, and whether the tool is \
         installed, available and allowed. It never holds the request, messages, file contents, \
         account names or other personal data. It is sent when called (there is no preview), and \
         nothing is sent when the user has turned anonymous signals off.",
        json!({
            "type": "object",
            "properties": {
                "friction_type": {"type": "string", "enum": FRICTION_TYPES, "description": "What kind of friction you observed."},
                "error_category": {"type": "string", "enum": ERROR_CATEGORIES, "description": "Category of what went wrong (optional)."},
                "intent_category": {"type": "string", "enum": INTENT_CATEGORIES, "description": "What the user was trying to do, chosen from this list (optional). Pick the closest one; do not describe the request."},
                "tool_attempted": {"type": "string", "description": "Name of the LMCP tool involved (e.g. read_file). Optional."},
                "attempt_count": {"type": "integer", "minimum": 0, "description": "How many times this was attempted (optional)."}
            },
            "required": ["friction_type"],
            "additionalProperties": false
        }),
    )
    .effect(Effect::Send, Annotations::changing(false, false, true))
    .without_preview()
    .summary(|a| format!("send an anonymous friction report ({})", a["friction_type"].as_str().unwrap_or("?")))
    .output(json!({
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": ["sent", "queued", "not_sent"]},
            "reason": {"type": "string"},
            "payload": {"type": "object"}
        },
        "required": ["status"]
    }))
}

/// The tool's handler.
pub fn handler_fn() -> Handler {
    handler(|inv| async move {
        let host = inv.host();
        let config = host.config();
        if !config.signals.enabled {
            return Ok(json!({
                "status": "not_sent",
                "reason": "anonymous signals are off; nothing was sent or kept (`lmcp signals on` turns them on)",
            }));
        }
        let payload = build_payload(&host, &inv.args)?;
        let endpoint = config.signals.endpoint.clone();
        let report = Queued {
            id: uuid::Uuid::new_v4().to_string(),
            attempts: 0,
            next_attempt_unix: 0,
            payload,
        };
        let Some(endpoint) = endpoint else {
            enqueue(&host, report.clone())?;
            return Ok(json!({
                "status": "queued",
                "reason": "no endpoint is set; the report waits in the outbox (set one in a terminal with `lmcp signals endpoint URL`; friction_flush then sends it)",
                "payload": report.payload,
            }));
        };
        let body = report.payload.clone();
        let sent = tokio::task::spawn_blocking(move || deliver(&endpoint, &body))
            .await
            .map_err(|e| Error::tool("report_friction", e.to_string()))?;
        match sent {
            Ok(()) => {
                log_sent(&host, &report.payload)?;
                Ok(json!({"status": "sent", "payload": report.payload}))
            }
            Err(why) => {
                let mut r = report;
                r.attempts = 1;
                r.next_attempt_unix = now_unix() + backoff_secs(1);
                let payload = r.payload.clone();
                enqueue(&host, r)?;
                Ok(json!({
                    "status": "queued",
                    "reason": format!(
                        "the endpoint could not be reached ({why}); {} retries",
                        crate::text::arg_words::tool("friction_flush", "lmcp friction flush")
                    ),
                    "payload": payload,
                }))
            }
        }
    })
}

/// A tool's name as reports may carry it: built-in names as they are, tools people and agents
/// made, and other servers' tools, only as their kind (`user_tool`, `skill_tool`,
/// `upstream_tool`), anything else as `(unknown)`.
fn public_name(host: &Host, name: &str) -> String {
    match host.registry().get(name) {
        _ if name.starts_with("user_") => "user_tool".to_string(),
        _ if name.starts_with("skill__") => "skill_tool".to_string(),
        // another server's tool: its name was chosen by that server and the person
        _ if crate::config::upstream_server(name).is_some() => "upstream_tool".to_string(),
        Some(t) if t.spec().kind != crate::registry::Kind::Workflow => name.to_string(),
        _ => "(unknown)".to_string(),
    }
}

/// Whether a tool's parameter names are its maker's words (a user, skill or upstream tool) and so are
/// never reported.
fn made_by_someone(name: &str) -> bool {
    name.starts_with("user_")
        || name.starts_with("skill__")
        || crate::config::upstream_server(name).is_some()
}

/// Builds the payload from the arguments' categories and the runtime's own records.
pub fn build_payload(host: &Host, args: &Value) -> Result<Value> {
    let recent = host.history().recent(200)?.entries;
    let last_ten: Vec<Value> = recent
        .iter()
        .rev()
        .take(10)
        .rev()
        .map(|e| json!({"tool": public_name(host, &e.tool), "outcome": e.outcome}))
        .collect();
    let mut payload = json!({
        "schema": PAYLOAD_SCHEMA,
        "friction_type": args["friction_type"],
        "lmcp_version": env!("CARGO_PKG_VERSION"),
        "platform": format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH),
        "recent_calls": last_ten,
    });
    for key in ["error_category", "intent_category", "attempt_count"] {
        if let Some(v) = args.get(key) {
            payload[key] = v.clone();
        }
    }
    if let Some(name) = args.get("tool_attempted").and_then(Value::as_str) {
        let config = host.config();
        let tool = host.registry().get(name);
        let mut t = json!({
            "name": public_name(host, name),
            "installed": tool.is_some(),
        });
        if let Some(tool) = &tool {
            let s = tool.spec();
            t["available"] = json!(s.availability(&config, host.transport()).is_available());
            t["grant"] = json!(
                config
                    .grant_for(&s.name, s.effect, s.annotations.destructive_hint)
                    .0
            );
        }
        let failed: Option<&HistoryEntry> = recent
            .iter()
            .rev()
            .find(|e| e.tool == name && e.outcome != "done" && e.outcome != "preview");
        if let Some(f) = failed {
            let named = !made_by_someone(name);
            let args: Vec<Value> = f
                .args
                .iter()
                .map(|a| {
                    if named {
                        json!({"name": a.name, "type": a.kind, "size": a.size})
                    } else {
                        json!({"type": a.kind, "size": a.size})
                    }
                })
                .collect();
            t["last_failed_call"] = json!({"outcome": f.outcome, "args": args});
        }
        payload["tool"] = t;
    }
    Ok(payload)
}

/// POSTs one payload; the reason on failure. Called from blocking threads (the outbox is files):
/// the request runs on the runtime they belong to.
fn deliver(endpoint: &str, payload: &Value) -> std::result::Result<(), String> {
    check_endpoint(endpoint).map_err(|e| e.to_string())?;
    let body = serde_json::to_vec(payload).map_err(|e| e.to_string())?;
    let post = async {
        // A redirect is not followed: the report goes to the endpoint set, or nowhere.
        let client = crate::net::client(Some(SEND_TIMEOUT))
            .build()
            .map_err(|e| e.to_string())?;
        client
            .post(endpoint)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| e.to_string())
    };
    let response = match tokio::runtime::Handle::try_current() {
        Ok(rt) => rt.block_on(post),
        Err(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?
            .block_on(post),
    }?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else if status.is_redirection() {
        Err(format!(
            "the endpoint answered HTTP {} (a redirect, not followed; set the final URL with \
             `lmcp signals endpoint URL`)",
            status.as_u16()
        ))
    } else {
        Err(format!("the endpoint answered HTTP {}", status.as_u16()))
    }
}

/// A report waiting to be sent.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Queued {
    /// A random id (not derived from anything the user did).
    pub id: String,
    /// Delivery attempts so far.
    pub attempts: u32,
    /// Not before this unix time.
    pub next_attempt_unix: i64,
    /// Exactly what will be sent.
    pub payload: Value,
}

fn dir(host: &Host) -> PathBuf {
    host.paths().data_dir.join("friction")
}

fn outbox_path(host: &Host) -> PathBuf {
    host.paths().friction_outbox()
}

fn sent_path(host: &Host) -> PathBuf {
    dir(host).join("sent.jsonl")
}

fn now_unix() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Seconds to wait after `attempts` failures: 1, 2, 4... minutes, at most a day.
pub fn backoff_secs(attempts: u32) -> i64 {
    (60i64 << attempts.saturating_sub(1).min(16)).min(86_400)
}

/// The waiting reports. An outbox that cannot be read is kept aside (under a name of its own)
/// and a new one started, so one broken file never stops every report.
fn read_outbox(host: &Host) -> Result<Vec<Queued>> {
    let path = outbox_path(host);
    match store::read_json(&path) {
        Ok(q) => Ok(q.unwrap_or_default()),
        Err(Error::Corrupt { .. }) => {
            let aside = store::quarantine(&path)?;
            host.warn(format!(
                "{} could not be read; kept it as {} and started a new outbox",
                path.display(),
                aside.display()
            ));
            Ok(Vec::new())
        }
        Err(e) => Err(e),
    }
}

/// Removes every waiting report (signals are off: nothing is kept); how many there were.
pub fn discard_waiting(host: &Host) -> Result<usize> {
    let path = outbox_path(host);
    let _lock = FileLock::acquire(&path)?;
    let discarded = read_outbox(host)?.len();
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(&path, e)),
        _ => Ok(discarded),
    }
}

fn enqueue(host: &Host, report: Queued) -> Result<()> {
    let path = outbox_path(host);
    let _lock = FileLock::acquire(&path)?;
    let mut all = read_outbox(host)?;
    all.push(report);
    store::write_json(&path, &all)
}

fn log_sent(host: &Host, payload: &Value) -> Result<()> {
    use std::io::Write;
    let path = sent_path(host);
    let _lock = FileLock::acquire(&path)?;
    store::ensure_dir(&dir(host))?;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    let line = json!({"sent_at": store::timestamp(), "payload": payload});
    f.write_all(format!("{line}\n").as_bytes())
        .map_err(|e| Error::io(&path, e))
}

/// What `lmcp friction flush` did.
#[derive(Debug, Clone, Serialize)]
pub struct FlushReport {
    /// Reports delivered now.
    pub sent: usize,
    /// Reports still waiting, and why.
    pub waiting: usize,
    /// Why nothing or not everything went out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// Sends the reports that are due (all of them with `force`), keeping the rest with backoff.
pub fn flush(host: &Host, force: bool) -> Result<FlushReport> {
    let config = host.config();
    if !config.signals.enabled {
        // off means nothing is kept either: whatever waits (a config edited by hand) goes
        let discarded = discard_waiting(host)?;
        return Ok(FlushReport {
            sent: 0,
            waiting: 0,
            problems: vec![format!(
                "anonymous signals are off; nothing was sent ({discarded} waiting report(s) discarded)"
            )],
        });
    }
    if config.modes.private {
        let waiting = read_outbox(host)?.len();
        return Ok(FlushReport {
            sent: 0,
            waiting,
            problems: vec!["private mode is on; nothing was sent".into()],
        });
    }
    let Some(endpoint) = config.signals.endpoint.clone() else {
        let waiting = read_outbox(host)?.len();
        return Ok(FlushReport {
            sent: 0,
            waiting,
            problems: vec!["no endpoint is set (`lmcp signals endpoint URL`)".into()],
        });
    };
    let path = outbox_path(host);
    let _lock = FileLock::acquire(&path)?;
    let all = read_outbox(host)?;
    let now = now_unix();
    let mut keep = Vec::new();
    let mut report = FlushReport {
        sent: 0,
        waiting: 0,
        problems: Vec::new(),
    };
    for mut q in all {
        if !force && q.next_attempt_unix > now {
            keep.push(q);
            continue;
        }
        match deliver(&endpoint, &q.payload) {
            Ok(()) => {
                log_sent(host, &q.payload)?;
                report.sent += 1;
            }
            Err(why) => {
                q.attempts += 1;
                q.next_attempt_unix = now + backoff_secs(q.attempts);
                report.problems.push(why);
                keep.push(q);
            }
        }
    }
    report.waiting = keep.len();
    store::write_json(&path, &keep)?;
    report.problems.dedup();
    Ok(report)
}

/// `friction_flush`: sends the waiting reports through the gate's send grant, like any send.
pub fn flush_spec() -> ToolSpec {
    ToolSpec::new(
        "friction_flush",
        "Send waiting friction reports",
        "Send the anonymous friction reports that are due (all of them with force: true); reports \
         that cannot be sent wait with backoff. Nothing is sent when anonymous signals are off. \
         Returns {sent, waiting, problems}.",
        json!({
            "type": "object",
            "properties": {"force": {"type": "boolean", "default": false, "description": "Ignore the backoff and try every waiting report now"}},
            "additionalProperties": false
        }),
    )
    .effect(Effect::Send, Annotations::changing(false, false, true))
    .profile(crate::registry::Profile::Full)
    .summary(|a| format!("send the waiting friction reports{}", if a["force"] == json!(true) { " (all of them)" } else { "" }))
    .output(json!({"type": "object", "properties": {
        "sent": {"type": "integer", "description": "Reports delivered now"},
        "waiting": {"type": "integer", "description": "Reports still waiting"},
        "problems": {"type": "array", "items": {"type": "string"}, "description": "Why nothing or not everything went out"}
    }, "required": ["sent", "waiting"]}))
}

/// The `friction_flush` handler.
pub fn flush_handler() -> Handler {
    handler(|inv| async move {
        let force = inv.args["force"].as_bool().unwrap_or(false);
        let host = inv.host();
        let report = tokio::task::spawn_blocking(move || flush(&host, force))
            .await
            .map_err(|e| Error::tool("friction_flush", e.to_string()))??;
        Ok(serde_json::to_value(report).unwrap_or_default())
    })
}

/// `friction_log`: every payload sent or waiting, as a read tool.
pub fn log_spec() -> ToolSpec {
    ToolSpec::new(
        "friction_log",
        "Show friction reports",
        "Every anonymous friction report sent or waiting, exactly as sent or to be sent: {sent, waiting}.",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
    )
    .profile(crate::registry::Profile::Full)
    .output(json!({"type": "object", "properties": {
        "sent": {"type": "array", "items": {"type": "object", "properties": {
            "sent_at": {"type": "string", "description": "When it was sent (RFC 3339)"},
            "payload": {"type": "object", "description": "Exactly what was sent (docs/friction-payload.schema.json)"}
        }, "required": ["sent_at", "payload"]}},
        "waiting": {"type": "array", "items": {"type": "object", "properties": {
            "attempts": {"type": "integer"},
            "next_attempt_unix": {"type": "integer", "description": "Not before this unix time"},
            "payload": {"type": "object", "description": "Exactly what will be sent (docs/friction-payload.schema.json)"}
        }, "required": ["attempts", "next_attempt_unix", "payload"]}}
    }, "required": ["sent", "waiting"]}))
}

/// The `friction_log` handler.
pub fn log_handler() -> Handler {
    handler(|inv| async move { log(&inv.host()) })
}

/// Every payload sent or waiting, exactly as sent or to be sent.
pub fn log(host: &Host) -> Result<Value> {
    let waiting: Vec<Value> = read_outbox(host)?
        .into_iter()
        .map(|q| json!({"attempts": q.attempts, "next_attempt_unix": q.next_attempt_unix, "payload": q.payload}))
        .collect();
    let mut sent = Vec::new();
    if let Ok(text) = std::fs::read_to_string(sent_path(host)) {
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            match serde_json::from_str::<Value>(line) {
                Ok(v) => sent.push(v),
                Err(_) => host.warn(format!(
                    "skipped an unreadable line in {}",
                    sent_path(host).display()
                )),
            }
        }
    }
    Ok(json!({"sent": sent, "waiting": waiting}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_https_or_loopback() {
        for ok in [
            "https://signals.example/v1",
            "http://127.0.0.1:8080/x",
            "http://localhost/x",
            "http://[::1]:9/x",
        ] {
            check_endpoint(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in [
            "http://example.com/x",
            "ftp://x",
            "http://10.0.0.1/x",
            "https://",
            "http://127.0.0.1.evil.com/x",
        ] {
            assert!(check_endpoint(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn backoff_grows_and_caps() {
        assert_eq!(backoff_secs(1), 60);
        assert_eq!(backoff_secs(2), 120);
        assert_eq!(backoff_secs(30), 86_400);
    }
}
