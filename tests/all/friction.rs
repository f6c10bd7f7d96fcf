//! report_friction: payloads hold no argument values (a property test), delivery to a real HTTP
//! server on loopback, the outbox and flush, the off switch and private mode, and the last ten
//! calls after a mix of outcomes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lmcp::CallRequest;
use lmcp::config::Grant;
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::common::{TestHost, call_yes, ctx, json_out, lmcp};

/// A loopback HTTP server that records request bodies and answers 200.
struct Sink {
    port: u16,
    bodies: Arc<Mutex<Vec<Value>>>,
    stop: Arc<AtomicBool>,
}

impl Sink {
    fn start(port: u16) -> Sink {
        Sink::answering(
            port,
            "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".into(),
        )
    }

    /// A sink that answers every request with `response` (a whole HTTP response).
    fn answering(port: u16, response: String) -> Sink {
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (b, s) = (Arc::clone(&bodies), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let Ok((stream, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                stream.set_nonblocking(false).unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0u8; length];
                reader.read_exact(&mut body).unwrap();
                b.lock()
                    .unwrap()
                    .push(serde_json::from_slice(&body).unwrap_or(Value::Null));
                let mut stream = stream;
                let _ = stream.write_all(response.as_bytes());
            }
        });
        Sink { port, bodies, stop }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/signals", self.port)
    }

    fn received(&self) -> Vec<Value> {
        self.bodies.lock().unwrap().clone()
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

async fn report(t: &TestHost, args: Value) -> Value {
    let o = t
        .host
        .call(CallRequest::new("report_friction", args, ctx()))
        .await;
    o.into_result().unwrap()
}

fn schema_check(payload: &Value) {
    let schema: Value =
        serde_json::from_str(include_str!("../../docs/friction-payload.schema.json")).unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = v.iter_errors(payload).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?} in {payload}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivered_queued_then_flushed() {
    let t = TestHost::new();
    // no endpoint: queued
    let r = report(&t, json!({"friction_type": "cannot_complete"})).await;
    assert_eq!(r["status"], "queued");
    assert!(r["reason"].as_str().unwrap().contains("no endpoint"));
    // delivered to a live server
    let sink = Sink::start(0);
    t.host
        .update_config(|c| {
            c.signals.endpoint = Some(sink.url());
            Ok(())
        })
        .unwrap();
    let r = report(
        &t,
        json!({"friction_type": "repeated_failure", "tool_attempted": "calculate"}),
    )
    .await;
    assert_eq!(r["status"], "sent", "{r}");
    assert_eq!(sink.received().len(), 1);
    assert_eq!(sink.received()[0], r["payload"]);
    schema_check(&r["payload"]);
    // server down: queued, then flushed when it is back
    let port = sink.port;
    drop(sink);
    std::thread::sleep(Duration::from_millis(50));
    let r = report(&t, json!({"friction_type": "other"})).await;
    assert_eq!(r["status"], "queued", "{r}");
    assert!(
        r["reason"]
            .as_str()
            .unwrap()
            .contains("could not be reached")
    );
    let sink = Sink::start(port);
    let host = Arc::clone(&t.host);
    let flushed = tokio::task::spawn_blocking(move || lmcp::tools::friction::flush(&host, true))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((flushed.sent, flushed.waiting), (2, 0), "{flushed:?}");
    assert_eq!(sink.received().len(), 2);
    let log = lmcp::tools::friction::log(&t.host).unwrap();
    assert_eq!(log["sent"].as_array().unwrap().len(), 3);
    assert_eq!(log["waiting"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_and_private_send_and_keep_nothing() {
    let t = TestHost::new();
    let sink = Sink::start(0);
    t.host
        .update_config(|c| {
            c.signals.endpoint = Some(sink.url());
            c.signals.enabled = false;
            Ok(())
        })
        .unwrap();
    let r = report(&t, json!({"friction_type": "other"})).await;
    assert_eq!(r["status"], "not_sent");
    assert!(r["reason"].as_str().unwrap().contains("signals are off"));
    t.host
        .update_config(|c| {
            c.signals.enabled = true;
            c.modes.private = true;
            Ok(())
        })
        .unwrap();
    let o = t
        .host
        .call(CallRequest::new(
            "report_friction",
            json!({"friction_type": "other"}),
            ctx(),
        ))
        .await;
    assert_eq!(o.class(), "denied");
    assert!(o.to_json().to_string().contains("private mode"));
    std::thread::sleep(Duration::from_millis(100));
    assert!(sink.received().is_empty(), "the server received nothing");
    let log = lmcp::tools::friction::log(&t.host).unwrap();
    assert_eq!(
        log,
        json!({"sent": [], "waiting": []}),
        "nothing was queued"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_ten_calls_and_the_failed_call() {
    let t = TestHost::new();
    t.set_grant("probe_write", Grant::Deny);
    let calls = [
        ("calculate", json!({"expression": "1"})),   // done
        ("probe_write", json!({"n": 1})),            // denied
        ("calculate", json!({"expression": "1/0"})), // failed:tool_error
        ("nope_tool", json!({})),                    // failed:unknown_tool
        ("probe_read", json!({"n": "x"})),           // failed:invalid_args
    ];
    for _ in 0..3 {
        for (tool, args) in &calls {
            t.host
                .call(CallRequest::new(*tool, args.clone(), ctx()))
                .await;
        }
    }
    t.host
        .call(CallRequest::new("user_secret_mail", json!({}), ctx()))
        .await;
    let r = report(&t, json!({"friction_type": "repeated_failure", "tool_attempted": "probe_read", "error_category": "parse", "attempt_count": 3})).await;
    let p = &r["payload"];
    let recent: Vec<(String, String)> = p["recent_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["tool"].as_str().unwrap().to_string(),
                c["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    // 16 calls were made: the ten newest are the second round without its first call, the whole
    // third round, and the user-made tool (unknown, so shown as such), oldest first.
    let expected: Vec<(String, String)> = [
        ("probe_write", "denied"),
        ("calculate", "failed:tool_error"),
        ("(unknown)", "failed:unknown_tool"),
        ("probe_read", "failed:invalid_args"),
        ("calculate", "done"),
        ("probe_write", "denied"),
        ("calculate", "failed:tool_error"),
        ("(unknown)", "failed:unknown_tool"),
        ("probe_read", "failed:invalid_args"),
        ("(unknown)", "failed:unknown_tool"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(recent, expected);
    assert_eq!(p["tool"]["name"], "probe_read");
    assert_eq!(p["tool"]["installed"], true);
    assert_eq!(p["tool"]["grant"], "allow");
    assert_eq!(
        p["tool"]["last_failed_call"],
        json!({"outcome": "failed:invalid_args", "args": [{"name": "n", "type": "string", "size": "1-15"}]})
    );
    assert_eq!(p["attempt_count"], 3);
    assert!(
        !p.to_string().contains("secret_mail"),
        "user-made tool names are redacted"
    );
    schema_check(p);
}

// Values carry two capital letters, which no payload ever contains, so a match can only be a leak
// (a three-letter lowercase string could match the payload's own words, like "ool" in "tool").
fn arg_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        "[A-Z]{2}[a-zA-Z0-9 ./@_-]{1,22}".prop_map(Value::String),
        (1000i64..1_000_000_000).prop_map(|n| json!(n)),
        any::<bool>().prop_map(|b| json!(b)),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[A-Z]{2}[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every string of three or more characters and every number inside a value.
fn secrets(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(a) => a.iter().for_each(|x| secrets(x, out)),
        Value::Object(m) => m.iter().for_each(|(k, x)| {
            out.push(k.clone());
            secrets(x, out)
        }),
        Value::Bool(_) | Value::Null => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn no_argument_value_ever_reaches_the_payload(args in prop::collection::btree_map("[A-Z]{2}[a-z]{1,8}", arg_value(), 1..5), text in "[A-Z]{2}[a-zA-Z0-9 ./@_-]{1,30}") {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let t = TestHost::new();
        let mut object: serde_json::Map<String, Value> = args.into_iter().collect();
        object.insert("text".into(), json!(text));
        let args = Value::Object(object);
        rt.block_on(async {
            // a successful call, then the same values in a failing one (extra properties are refused)
            t.host.call(CallRequest::new("probe_read", json!({"text": text}), ctx())).await;
            let failed = t.host.call(CallRequest::new("probe_read", args.clone(), ctx())).await;
            prop_assert!(failed.class().starts_with("failed"));
            let r = report(&t, json!({"friction_type": "cannot_complete", "tool_attempted": "probe_read"})).await;
            let bytes = serde_json::to_string(&r["payload"]).unwrap();
            let mut values = vec![text.clone()];
            for (k, v) in args.as_object().unwrap() {
                if k != "text" {
                    values.push(k.clone()); // "text" is the schema's own argument name
                }
                secrets(v, &mut values);
            }
            for s in values.iter().filter(|s| s.chars().count() >= 3) {
                prop_assert!(!bytes.contains(s.as_str()), "`{}` leaked into {}", s, bytes);
            }
            Ok(())
        })?;
    }
}

#[test]
fn signals_and_friction_from_the_cli() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    assert_eq!(
        json_out(&lmcp(h, &["signals", "--json"])),
        json!({"enabled": true, "endpoint": null})
    );
    assert_eq!(
        lmcp(h, &["signals", "endpoint", "http://example.com/x"])
            .status
            .code(),
        Some(2)
    );
    let sink = Sink::start(0);
    assert_eq!(
        lmcp(h, &["signals", "endpoint", &sink.url()]).status.code(),
        Some(0)
    );
    let report = || {
        lmcp(
            h,
            &[
                "call",
                "report_friction",
                r#"{"friction_type": "other"}"#,
                "--yes",
                "--json",
            ],
        )
    };
    let out = report();
    assert_eq!(json_out(&out)["result"]["status"], "sent");
    // without --yes and no terminal, a send tool (grant ask) is not run
    let out = lmcp(
        h,
        &["call", "report_friction", r#"{"friction_type": "other"}"#],
    );
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(lmcp(h, &["signals", "off"]).status.code(), Some(0));
    let out = report();
    assert_eq!(json_out(&out)["result"]["status"], "not_sent");
    assert_eq!(sink.received().len(), 1);
    let log = json_out(&lmcp(h, &["friction", "log", "--json"]));
    assert_eq!(log["sent"].as_array().unwrap().len(), 1);
    let flushed = json_out(&lmcp(h, &["friction", "flush", "--json", "--yes"]));
    assert_eq!(flushed["sent"], 0);
    assert!(
        flushed["problems"][0]
            .as_str()
            .unwrap()
            .contains("signals are off")
    );
}

/// A 302 from the endpoint is not followed: the report waits, and nothing reaches the place the
/// redirect named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_not_followed() {
    let t = TestHost::new();
    let elsewhere = Sink::start(0);
    let redirect = format!(
        "HTTP/1.1 302 Found\r\nlocation: {}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        elsewhere.url()
    );
    let sink = Sink::answering(0, redirect);
    let url = sink.url();
    t.host
        .update_config(|c| {
            c.signals.endpoint = Some(url.clone());
            c.grants.insert("report_friction".into(), Grant::Allow);
            Ok(())
        })
        .unwrap();
    let r = report(&t, json!({"friction_type": "other"})).await;
    assert_eq!(r["status"], "queued", "{r}");
    assert!(r["reason"].as_str().unwrap().contains("redirect"), "{r}");
    assert_eq!(sink.received().len(), 1);
    assert!(elsewhere.received().is_empty(), "the redirect was followed");
}

/// `signals off` keeps nothing: reports waiting to be sent are discarded.
#[test]
fn signals_off_empties_the_outbox() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let out = lmcp(
        h,
        &[
            "call",
            "report_friction",
            r#"{"friction_type": "other"}"#,
            "--yes",
            "--json",
        ],
    );
    assert_eq!(json_out(&out)["result"]["status"], "queued");
    assert!(h.join("data/friction/outbox.json").exists());
    // it says how many it discarded (#34)
    let off = lmcp(h, &["signals", "off"]);
    assert_eq!(off.status.code(), Some(0));
    let said = String::from_utf8_lossy(&off.stdout);
    assert!(said.contains("discarded 1 waiting report\n"), "{said}");
    assert!(!h.join("data/friction/outbox.json").exists());
    assert_eq!(
        json_out(&lmcp(h, &["signals", "off", "--json"]))["discarded"],
        0
    );
    let log = json_out(&lmcp(h, &["friction", "log", "--json"]));
    assert_eq!(log["waiting"], json!([]));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, failure_persistence: None, ..ProptestConfig::default() })]
    /// Names people and agents choose (a custom tool's, its parameters', a skill's) never reach a
    /// payload: such tools appear only as their kind.
    #[test]
    fn no_user_chosen_name_ever_reaches_the_payload(tool in "zq[a-z]{3,8}", param in "zq[a-z]{3,8}", skill in "zq[a-z]{3,8}") {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let t = TestHost::new();
        let user = format!("user_{tool}");
        rt.block_on(async {
            let def = json!({"name": user, "description": "d",
                "parameters": [{"name": param, "type": "string", "required": true}],
                "steps": [{"id": "a", "tool": "calculate", "arguments": {"expression": {"$input": param}}}]});
            call_yes(&t.host, "custom_tool_create", def).await.unwrap();
            let md = format!("---\nname: {skill}\ndescription: d\n---\nx\n");
            let code = format!("---@param {param} string\nreturn 1");
            call_yes(&t.host, "skill_install", json!({"skill_md": md, "scripts": [{"name": "go.lua", "code": code}]})).await.unwrap();
            let skill_tool = format!("skill__{skill}__go");
            let failed = t.host.call(CallRequest::new(&user, json!({param.clone(): "1/0"}), ctx())).await;
            prop_assert!(failed.class().starts_with("failed"), "{}", failed.to_json());
            let failed = t.host.call(CallRequest::new(&skill_tool, json!({param.clone(): 5}), ctx())).await;
            prop_assert!(failed.class().starts_with("failed"), "{}", failed.to_json());
            for attempted in [&user, &skill_tool] {
                let r = report(&t, json!({"friction_type": "cannot_complete", "tool_attempted": attempted})).await;
                let bytes = serde_json::to_string(&r["payload"]).unwrap();
                for name in [&tool, &param, &skill] {
                    prop_assert!(!bytes.contains(name.as_str()), "`{}` leaked into {}", name, bytes);
                }
                schema_check(&r["payload"]);
            }
            Ok(())
        })?;
    }
}
