//! `http_request`: the web, behind the gate.
//!
//! Effect `send` for every method: a GET's URL carries data out as surely as a POST's body, so
//! private and read-only modes make no request, and a plan previews each request without
//! making it. The gate grants it by host ([`ToolSpec::reaches`]): `lmcp hosts allow` lets a
//! host run without asking, `lmcp hosts deny` refuses it, any other host asks, and inside a
//! program only the hosts its `---@connect` lines (or its steps' literal URLs) name are reached.
//!
//! What this file adds to the gate's checks, hop by hop:
//! - the address: a name is resolved by [`crate::net::Checked`], which refuses loopback,
//!   private, link-local, metadata, multicast and reserved addresses at connect time (so DNS
//!   rebinding reaches nothing), and an IP literal is checked here; a `--private` grant that
//!   names the exact host lets it through;
//! - redirects (followed by default, at most [`MAX_REDIRECTS`]): each hop's host is checked
//!   again (the program's `---@connect`, the deny rules, and an allow: a hop to a host nobody
//!   allowed is refused, never asked about mid-request), and on a hop to another origin the
//!   headers that carry credentials (`Authorization`, cookies, any holding a skill's secret)
//!   are dropped, as curl does;
//! - bounds: the body at most `limits.http_response_mb` (charged to the run's host memory as
//!   it arrives), the time at most `timeout_secs` (30 by default) within the call's deadline.
//!
//! The URL, its host, the headers' values and the bodies reach no history and no friction
//! report: the gate records argument shapes only, and the errors here name the host only in
//! the result the caller gets.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::config::{HostDecision, HostPort};
use crate::error::{Error, Result};
use crate::gate::{CallContext, Caller};
use crate::registry::{Annotations, Effect, Handler, ToolSpec, handler};

/// Most redirects followed for one request.
pub const MAX_REDIRECTS: usize = 10;
/// The timeout when the call gives none, in seconds.
pub const DEFAULT_TIMEOUT_SECS: f64 = 30.0;
/// The longest timeout a call may ask for, in seconds.
pub const MAX_TIMEOUT_SECS: f64 = 300.0;

const TOOL: &str = "http_request";

/// The spec of `http_request`.
pub fn spec() -> ToolSpec {
    ToolSpec::new(
        TOOL,
        "Make an HTTP request",
        "Send an HTTP or HTTPS request and return the response: {status, headers, json} when \
         the body is JSON, else {status, headers, body}, and truncated. Effect send for every \
         method. A host must be allowed (`lmcp hosts allow HOST`) or a person asked, and a \
         program reaches only the hosts its `---@connect` lines name. Loopback, private, \
         link-local and metadata addresses are never reached without an exact `--private` \
         grant. Redirects are followed (at most 10), each hop checked again; credentials are \
         dropped on a hop to another host. The body read is at most limits.http_response_mb \
         (8 MiB).",
        json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "minLength": 1, "maxLength": 8192, "description": "http:// or https:// URL"},
                "method": {"type": "string", "enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"], "default": "GET", "description": "The HTTP method"},
                "headers": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 8192}, "maxProperties": 64, "description": "Request headers, by name"},
                "body": {"type": "string", "description": "A text body"},
                "json": {"description": "A JSON body (sent with Content-Type: application/json)"},
                "timeout_secs": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TIMEOUT_SECS, "default": DEFAULT_TIMEOUT_SECS, "description": "Give up after this many seconds (within the call's own deadline)"},
                "follow_redirects": {"type": "boolean", "default": true, "description": "Follow redirects, each hop's host checked again"},
                "max_bytes": {"type": "integer", "minimum": 0, "description": "Keep at most this many bytes of the body and mark it truncated, instead of failing past the limit"}
            },
            "required": ["url"],
            "not": {"required": ["body", "json"]},
            "additionalProperties": false
        }),
    )
    .effect(Effect::Send, Annotations::changing(false, false, true))
    .reaching(reaches)
    .prechecks(precheck)
    .summary(summary)
    .output(json!({
        "type": "object",
        "properties": {
            "status": {"type": "integer"},
            "headers": {"type": "object", "additionalProperties": {"type": "string"}},
            "body": {"type": "string"},
            "body_base64": {"type": "string"},
            "json": {},
            "truncated": {"type": "boolean"}
        },
        "required": ["status", "headers", "truncated"]
    }))
}

/// The host a call reaches: its URL's.
fn reaches(args: &Value) -> Result<HostPort> {
    let url = args["url"].as_str().unwrap_or_default();
    crate::net::target(url)
        .map(|(_, to)| to)
        .map_err(|m| Error::Usage(format!("{TOOL}: {m}")))
}

/// What is refused before anyone is asked: a header that cannot be sent, or one lmcp sets.
fn precheck(_caller: &dyn Caller, args: &Value) -> Result<()> {
    for name in args["headers"].as_object().into_iter().flat_map(Map::keys) {
        header_name(name)?;
    }
    Ok(())
}

fn header_name(name: &str) -> Result<reqwest::header::HeaderName> {
    let parsed = reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
        Error::Usage(format!(
            "{TOOL}: `{}` is not a header name",
            crate::text::escape_controls(name)
        ))
    })?;
    if matches!(
        parsed.as_str(),
        "host" | "content-length" | "transfer-encoding" | "connection" | "upgrade"
    ) {
        return Err(Error::Usage(format!(
            "{TOOL}: the `{parsed}` header is set by lmcp from the URL and the body; leave it out"
        )));
    }
    Ok(parsed)
}

/// "would send POST to https://hooks.example.org/x (120 bytes)".
fn summary(args: &Value) -> String {
    let method = args["method"].as_str().unwrap_or("GET");
    let url = args["url"].as_str().unwrap_or("?");
    let bytes = body_of(args).map_or(0, |(b, _)| b.len());
    let url = crate::gate::shorten(&json!(url));
    if bytes > 0 {
        format!("would send {method} to {url} ({bytes} bytes)")
    } else {
        format!("would send {method} to {url}")
    }
}

/// The request body and its content type, if the call gives one.
fn body_of(args: &Value) -> Option<(Vec<u8>, Option<&'static str>)> {
    if let Some(text) = args["body"].as_str() {
        return Some((text.as_bytes().to_vec(), None));
    }
    let v = args.get("json")?;
    Some((
        serde_json::to_vec(v).unwrap_or_default(),
        Some("application/json"),
    ))
}

/// The handler.
pub fn handler_fn() -> Handler {
    handler(|inv| async move {
        let config = inv.caller.config();
        let limit = (config.limits.http_response_mb.max(1) as usize) << 20;
        let secs = inv.args["timeout_secs"]
            .as_f64()
            .unwrap_or(DEFAULT_TIMEOUT_SECS)
            .clamp(0.001, MAX_TIMEOUT_SECS);
        let timeout = Duration::from_secs_f64(secs);
        let request = Request::of(&inv.args)?;
        let max_bytes = inv.args["max_bytes"].as_u64().map(|n| n as usize);
        let exchange = exchange(&config, &inv.ctx, request, timeout, limit, max_bytes);
        match tokio::time::timeout(timeout, exchange).await {
            Ok(r) => r,
            Err(_) => Err(Error::Timeout { after: timeout }),
        }
    })
}

/// One request as it goes out, hop by hop.
struct Request {
    method: reqwest::Method,
    url: String,
    headers: Vec<(reqwest::header::HeaderName, String)>,
    body: Option<(Vec<u8>, Option<&'static str>)>,
    follow: bool,
}

impl Request {
    fn of(args: &Value) -> Result<Request> {
        let method = args["method"].as_str().unwrap_or("GET");
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|_| Error::Usage(format!("{TOOL}: `{method}` is not a method")))?;
        let mut headers = Vec::new();
        for (k, v) in args["headers"].as_object().into_iter().flatten() {
            headers.push((header_name(k)?, v.as_str().unwrap_or_default().to_string()));
        }
        Ok(Request {
            method,
            url: args["url"].as_str().unwrap_or_default().to_string(),
            headers,
            body: body_of(args),
            follow: args["follow_redirects"].as_bool().unwrap_or(true),
        })
    }
}

/// Makes the request, following redirects, and reads the response within the bounds.
async fn exchange(
    config: &crate::config::Config,
    ctx: &CallContext,
    mut request: Request,
    timeout: Duration,
    limit: usize,
    max_bytes: Option<usize>,
) -> Result<Value> {
    let first = reaches(&json!({"url": request.url}))?;
    let mut hops = 0;
    let response = loop {
        let (url, to) = crate::net::target(&request.url)
            .map_err(|m| Error::Refused(format!("{TOOL}: a redirect led to a bad URL: {m}")))?;
        if hops > 0 {
            hop_allowed(config, ctx, &first, &to)?;
        }
        let private = matches!(
            config.host_decision(&to),
            HostDecision::Allowed { private: true }
        );
        if !private
            && let Some(ip) = crate::net::literal_ip(&to.host)
            && let Some(range) = crate::net::blocked(ip)
        {
            return Err(Error::Refused(format!(
                "{TOOL}: {ip} is in {range}, which no request reaches unless that exact host is \
                 allowed with `lmcp hosts allow {to} --private`"
            )));
        }
        let client = crate::net::checked_client(timeout, private).map_err(|e| failed(&e))?;
        let mut builder = client.request(request.method.clone(), url.clone());
        for (k, v) in &request.headers {
            builder = builder.header(k, v);
        }
        if let Some((bytes, content_type)) = &request.body {
            if let Some(t) = content_type
                && !request.headers.iter().any(|(k, _)| k == "content-type")
            {
                builder = builder.header("content-type", *t);
            }
            builder = builder.body(bytes.clone());
        }
        let response = builder.send().await.map_err(|e| failed(&e))?;
        let status = response.status();
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .map(str::to_string);
        let Some(location) = location.filter(|_| request.follow && status.is_redirection()) else {
            break response;
        };
        if hops == MAX_REDIRECTS {
            return Err(Error::Limit {
                what: format!("{TOOL} was redirected more than {MAX_REDIRECTS} times"),
                limit: format!("{MAX_REDIRECTS} redirects"),
            });
        }
        let next = url.join(&location).map_err(|_| {
            Error::Refused(format!(
                "{TOOL}: a redirect gave a Location that is not a URL"
            ))
        })?;
        let (_, next_to) = crate::net::target(next.as_str())
            .map_err(|m| Error::Refused(format!("{TOOL}: a redirect led to a bad URL: {m}")))?;
        if next.scheme() != url.scheme() || next_to != to {
            // another origin: credentials stay with the one they were given for
            request
                .headers
                .retain(|(k, v)| !carries_credentials(k.as_str(), v, ctx.secrets()));
        }
        let keeps_method = matches!(status.as_u16(), 307 | 308);
        let to_get = status.as_u16() == 303
            || (matches!(status.as_u16(), 301 | 302) && request.method == reqwest::Method::POST);
        if !keeps_method && to_get && request.method != reqwest::Method::HEAD {
            request.method = reqwest::Method::GET;
            request.body = None;
            request
                .headers
                .retain(|(k, _)| !k.as_str().starts_with("content-"));
        }
        request.url = next.to_string();
        hops += 1;
    };
    read_response(ctx, response, limit, max_bytes).await
}

/// Whether a redirect may go on to `to`: the program's `---@connect` names it, no deny rule
/// matches it, and it is the host the request began at or one allowed by a rule. Nobody is
/// asked in the middle of a request: a hop to a host nobody allowed is refused.
fn hop_allowed(
    config: &crate::config::Config,
    ctx: &CallContext,
    first: &HostPort,
    to: &HostPort,
) -> Result<()> {
    if let Some(why) = ctx.connect_refusal(to) {
        return Err(Error::Refused(format!(
            "{TOOL}: a redirect to `{to}` was refused: {why}"
        )));
    }
    match config.host_decision(to) {
        HostDecision::Denied(pattern) => Err(Error::Refused(format!(
            "{TOOL}: a redirect to `{to}` was refused: the hosts rule `{pattern}` denies it"
        ))),
        HostDecision::Allowed { .. } => Ok(()),
        HostDecision::Unlisted if to.host == first.host && to.port == first.port => Ok(()),
        HostDecision::Unlisted => {
            // an address no request reaches by default needs the exact grant with --private
            let private = crate::net::literal_ip(&to.host)
                .and_then(crate::net::blocked)
                .map_or("", |_| " --private");
            Err(Error::Refused(format!(
                "{TOOL}: a redirect to `{to}` was refused: that host is not among the allowed \
                 hosts, and a redirect is never asked about (`lmcp hosts allow {to}{private}` \
                 allows it); nothing was sent there"
            )))
        }
    }
}

/// Whether a header may carry credentials, and so is dropped on a hop to another origin:
/// `Authorization`, cookies, names that say token, key, secret, session or auth, and any whose
/// value holds a skill's secret.
fn carries_credentials(name: &str, value: &str, secrets: &[String]) -> bool {
    let name = name.to_ascii_lowercase();
    let by_name = [
        "auth", "cookie", "token", "secret", "key", "session", "password",
    ]
    .iter()
    .any(|w| name.contains(w));
    by_name
        || secrets
            .iter()
            .any(|s| !s.is_empty() && value.contains(s.as_str()))
}

/// A failure of the exchange in words, without the URL (reqwest's messages name it): the
/// refusal at connect time when that is what it was.
fn failed(e: &reqwest::Error) -> Error {
    let mut source: Option<&dyn std::error::Error> = Some(e);
    while let Some(s) = source {
        if let Some(blocked) = s.downcast_ref::<crate::net::BlockedAddress>() {
            return Error::Refused(format!("{TOOL}: {blocked}"));
        }
        source = s.source();
    }
    let what = if e.is_timeout() {
        return Error::Refused(format!("{TOOL}: the server did not answer in time"));
    } else if e.is_connect() {
        "could not connect"
    } else if e.is_redirect() {
        "a redirect failed"
    } else if e.is_body() || e.is_decode() {
        "the response could not be read"
    } else if e.is_request() {
        "the request could not be sent"
    } else {
        "the request failed"
    };
    let mut detail = String::new();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        detail = s.to_string();
        source = s.source();
    }
    Error::Tool {
        tool: TOOL.to_string(),
        message: if detail.is_empty() {
            what.to_string()
        } else {
            format!("{what}: {}", crate::text::escape_controls(&detail))
        },
    }
}

/// Reads the response: status, headers, and the body within the bounds (charged to the run's
/// host memory as it arrives), as JSON when it says it is and parses, else text or base64.
async fn read_response(
    ctx: &CallContext,
    mut response: reqwest::Response,
    limit: usize,
    max_bytes: Option<usize>,
) -> Result<Value> {
    let status = response.status().as_u16();
    let mut headers = Map::new();
    for (k, v) in response.headers() {
        // a value that is not ASCII is kept as text (UTF-8, or lossy), never dropped: what a
        // server sends is shown (escaped on a terminal), not hidden
        let v = String::from_utf8_lossy(v.as_bytes());
        // repeated headers joined as HTTP joins them; Set-Cookie values hold commas of their
        // own, so they are joined with a newline instead
        let join = if k == reqwest::header::SET_COOKIE {
            "\n"
        } else {
            ", "
        };
        match headers.get_mut(k.as_str()) {
            Some(Value::String(s)) => {
                s.push_str(join);
                s.push_str(&v);
            }
            _ => {
                headers.insert(k.as_str().to_string(), Value::String(v.into_owned()));
            }
        }
    }
    let is_json = headers
        .get("content-type")
        .and_then(Value::as_str)
        .map(|t| {
            t.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .is_some_and(|t| t == "application/json" || t.ends_with("+json"));
    let keep = max_bytes.map_or(limit, |m| m.min(limit));
    let mut held = ctx.host_memory().map(|m| m.hold_nothing());
    let mut body: Vec<u8> = Vec::new();
    let mut truncated = false;
    while let Some(chunk) = response.chunk().await.map_err(|e| failed(&e))? {
        let room = keep - body.len();
        if chunk.len() > room {
            if max_bytes.is_some_and(|m| m <= limit) {
                if let Some(h) = &mut held {
                    h.grow(room, "an http_request response body")?;
                }
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            return Err(Error::Limit {
                what: format!("the response body of {TOOL} is more than {limit} bytes"),
                limit: format!(
                    "limits.http_response_mb = {} MiB; `max_bytes` keeps only the beginning",
                    limit >> 20
                ),
            });
        }
        if let Some(h) = &mut held {
            h.grow(chunk.len(), "an http_request response body")?;
        }
        body.extend_from_slice(&chunk);
    }
    let mut out = json!({"status": status, "headers": headers, "truncated": truncated});
    if is_json
        && !truncated
        && let Ok(v) = serde_json::from_slice::<Value>(&body)
    {
        out["json"] = v;
    } else {
        match String::from_utf8(body) {
            Ok(text) => out["body"] = Value::String(text),
            Err(e) => {
                use base64::Engine;
                out["body_base64"] =
                    Value::String(base64::engine::general_purpose::STANDARD.encode(e.into_bytes()));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_known_by_name_and_by_secret() {
        for name in [
            "Authorization",
            "cookie",
            "X-Api-Key",
            "x-auth-token",
            "Session-Id",
        ] {
            assert!(carries_credentials(name, "v", &[]), "{name}");
        }
        assert!(!carries_credentials("accept", "text/plain", &[]));
        assert!(carries_credentials(
            "x-custom",
            "Bearer s3cr3t",
            &["s3cr3t".to_string()]
        ));
    }

    #[test]
    fn the_host_is_checked_before_anyone_is_asked() {
        assert!(reaches(&json!({"url": "ftp://example.org/"})).is_err());
        assert!(reaches(&json!({"url": "https://user:pw@example.org/"})).is_err());
        let to = reaches(&json!({"url": "https://API.example.org:8443/x"})).unwrap();
        assert_eq!(to.to_string(), "api.example.org:8443");
        let to = reaches(&json!({"url": "http://[::1]/"})).unwrap();
        assert_eq!(to.to_string(), "[::1]");
        assert!(header_name("Host").is_err());
        assert!(header_name("bad header").is_err());
        assert!(header_name("X-Ok").is_ok());
    }
}
