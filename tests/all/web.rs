//! `http_request` and the host grants (#36), against HTTP servers this test starts on loopback:
//! allowed and asked hosts, every blocked range, connect-time checks (a name that resolves to
//! loopback), redirects checked hop by hop, bounds (size, time), `---@connect` and the literal
//! hosts of recipes (in their plans and plan hashes), skill secrets in headers, and HTTPS with
//! a certificate made here and trusted through the debug-only test root setting.
//!
//! The servers run on a thread of their own, so a test may drive them from the `lmcp` binary
//! (a blocking child) or in-process alike. Every request a server gets is logged, so a test can
//! say that nothing was sent.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use lmcp::gate::{Answer, Scripted};
use lmcp::{CallContext, CallRequest, ConfirmMode, Origin, Outcome};
use serde_json::{Value, json};

use crate::common::{self, TestHost, json_out, lmcp, lmcp_ok};

/// One request a test server got: method, path and query, headers, body.
#[derive(Debug, Clone)]
struct Got {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: String,
}

/// A test server on 127.0.0.1: its port and what it got.
struct Server {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<Got>>>,
}

impl Server {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn host(&self) -> String {
        self.addr.to_string()
    }

    fn got(&self) -> Vec<Got> {
        self.log.lock().unwrap().clone()
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn full(status: u16, content_type: &str, body: impl Into<Bytes>) -> hyper::Response<Body> {
    hyper::Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(body.into()).boxed())
        .unwrap()
}

/// The routes: `/json`, `/echo` (what it got, as JSON), `/go?to=URL` (a 302 there),
/// `/big` (50 MiB), `/slow` (answers after 20 s).
async fn route(got: Got) -> hyper::Response<Body> {
    let path = got.target.split('?').next().unwrap_or("").to_string();
    match path.as_str() {
        "/json" => full(200, "application/json", r#"{"hello":"world","n":3}"#),
        "/echo" => {
            let headers: serde_json::Map<String, Value> = got
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect();
            let body = json!({"method": got.method, "headers": headers, "body": got.body});
            full(200, "application/json", body.to_string())
        }
        "/go" => {
            let to = got.target.split_once("to=").map_or("", |(_, t)| t);
            hyper::Response::builder()
                .status(302)
                .header("location", to)
                .body(Full::new(Bytes::new()).boxed())
                .unwrap()
        }
        "/big" => {
            let chunk = Bytes::from(vec![b'x'; 1 << 20]);
            let stream = futures_lite_stream(chunk, 50);
            hyper::Response::builder()
                .status(200)
                .header("content-type", "text/plain")
                .body(BodyExt::boxed(StreamBody::new(stream)))
                .unwrap()
        }
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(20)).await;
            full(200, "text/plain", "late")
        }
        _ => full(404, "text/plain", "no such page"),
    }
}

/// `n` frames of `chunk`, made as they are read (the server never holds 50 MiB).
fn futures_lite_stream(
    chunk: Bytes,
    n: usize,
) -> impl futures_core::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send {
    struct Frames(Bytes, usize);
    impl futures_core::Stream for Frames {
        type Item = Result<Frame<Bytes>, Infallible>;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            _cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Self::Item>> {
            if self.1 == 0 {
                return std::task::Poll::Ready(None);
            }
            self.1 -= 1;
            std::task::Poll::Ready(Some(Ok(Frame::data(self.0.clone()))))
        }
    }
    Frames(chunk, n)
}

/// Serves one connection, logging each request.
async fn serve_conn<S>(io: S, log: Arc<Mutex<Vec<Got>>>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let log = Arc::clone(&log);
        async move {
            let method = req.method().to_string();
            let target = req
                .uri()
                .path_and_query()
                .map_or("/".into(), |p| p.to_string());
            let headers = req
                .headers()
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
                .collect();
            let body = req.into_body().collect().await.unwrap().to_bytes();
            let got = Got {
                method,
                target,
                headers,
                body: String::from_utf8_lossy(&body).into_owned(),
            };
            log.lock().unwrap().push(got.clone());
            Ok::<_, Infallible>(route(got).await)
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(hyper_util::rt::TokioIo::new(io), service)
        .await;
}

/// Starts a test server on 127.0.0.1, on a thread of its own; with `tls`, HTTPS with that
/// certificate and key.
fn start(tls: Option<tokio_rustls::TlsAcceptor>) -> Server {
    let log = Arc::new(Mutex::new(Vec::new()));
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let addr = std_listener.local_addr().unwrap();
    let served = Arc::clone(&log);
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let log = Arc::clone(&served);
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        None => serve_conn(stream, log).await,
                        Some(acceptor) => {
                            if let Ok(s) = acceptor.accept(stream).await {
                                serve_conn(s, log).await;
                            }
                        }
                    }
                });
            }
        });
    });
    Server { addr, log }
}

/// An allow of `key` in `t`'s config, as `lmcp hosts allow` writes it.
fn allow(t: &TestHost, key: &str, private: bool) {
    t.host
        .update_config(|c| {
            c.hosts.insert(
                key.to_string(),
                lmcp::config::HostRule {
                    grant: lmcp::config::Grant::Allow,
                    private,
                },
            );
            Ok(())
        })
        .unwrap();
}

/// `lmcp hosts allow HOST --private` in `home`.
fn allow_private(home: &std::path::Path, host: &str) {
    lmcp_ok(home, &["hosts", "allow", host, "--private"]);
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes a Lua script into `home` and returns its path.
fn script(home: &std::path::Path, name: &str, text: &str) -> String {
    let path = home.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn an_allowed_get_returns_json_to_lua_as_a_table() {
    let server = start(None);
    let home = tempfile::tempdir().unwrap();
    allow_private(home.path(), &server.host());
    let file = script(
        home.path(),
        "get.lua",
        &format!(
            "---@uses http_request\n---@connect {}\nlocal r = tools.http_request{{url = '{}'}}\n\
             return {{hello = r.json.hello, n = r.json.n + 1, status = r.status}}\n",
            server.host(),
            server.url("/json")
        ),
    );
    let out = lmcp_ok(home.path(), &["--json", "run", &file, "--yes"]);
    let v = json_out(&out);
    assert_eq!(
        v["result"],
        json!({"hello": "world", "n": 4, "status": 200}),
        "{v}"
    );
    assert_eq!(server.got().len(), 1);
}

#[test]
fn a_post_previews_then_runs_with_yes() {
    let server = start(None);
    let home = tempfile::tempdir().unwrap();
    allow_private(home.path(), &server.host());
    let file = script(
        home.path(),
        "post.lua",
        &format!(
            "---@uses http_request\n---@connect {}\n\
             return tools.http_request{{url = '{}', method = 'POST', json = {{text = 'hi'}}}}\n",
            server.host(),
            server.url("/echo")
        ),
    );
    // no terminal, no --yes: a dry run, which previews the request and sends nothing
    let out = lmcp(home.path(), &["--json", "run", &file]);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(text.contains("would send POST to"), "{text}");
    assert!(server.got().is_empty(), "a preview sent {:?}", server.got());
    let out = lmcp_ok(home.path(), &["--json", "run", &file, "--yes"]);
    let v = json_out(&out);
    assert_eq!(v["result"]["json"]["method"], "POST", "{v}");
    assert_eq!(v["result"]["json"]["body"], r#"{"text":"hi"}"#, "{v}");
    assert_eq!(
        v["result"]["json"]["headers"]["content-type"],
        "application/json"
    );
    assert_eq!(server.got().len(), 1);
}

#[test]
fn a_host_not_allowed_is_refused_without_a_terminal() {
    let server = start(None);
    let home = tempfile::tempdir().unwrap();
    let args = json!({"url": server.url("/json")}).to_string();
    // an allow of the tool itself allows no host: the hosts are the grant
    lmcp_ok(home.path(), &["grants", "allow", "http_request"]);
    let out = lmcp(home.path(), &["call", "http_request", &args]);
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(
        e.contains(&format!("lmcp hosts allow {}", server.host())),
        "{e}"
    );
    assert!(server.got().is_empty());
    // a deny wins over `*`, with the command that removes it
    lmcp_ok(home.path(), &["hosts", "allow", "*"]);
    lmcp_ok(home.path(), &["hosts", "deny", &server.host()]);
    let out = lmcp(home.path(), &["call", "http_request", &args, "--yes"]);
    let e = stderr(&out);
    assert!(e.contains("(a deny wins)"), "{e}");
    assert!(
        e.contains(&format!("lmcp hosts remove {}", server.host())),
        "{e}"
    );
    let list = json_out(&lmcp_ok(home.path(), &["--json", "hosts"]));
    assert_eq!(list["hosts"].as_array().unwrap().len(), 2, "{list}");
    assert!(server.got().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_not_allowed_is_asked_about_on_a_terminal() {
    let t = TestHost::new();
    let url = "https://api.example.org/v1/items";
    for answer in [Answer::No, Answer::Yes] {
        let person = Arc::new(Scripted::new([answer.clone()]));
        let ctx = CallContext::root(Origin::Repl, ConfirmMode::Ask).with_confirmer(person.clone());
        let started = Instant::now();
        let outcome = t
            .host
            .call(CallRequest::new(
                "http_request",
                json!({"url": url, "method": "GET", "timeout_secs": 2}),
                ctx,
            ))
            .await;
        let asked = person.asked();
        assert_eq!(asked.len(), 1, "{answer:?}");
        assert!(
            asked[0].why.contains("the host `api.example.org`"),
            "{}",
            asked[0].why
        );
        assert!(asked[0].why.contains("lmcp hosts allow api.example.org"));
        assert!(asked[0].summary.contains(url), "{}", asked[0].summary);
        match answer {
            Answer::No => assert!(matches!(outcome, Outcome::Denied { .. }), "{outcome:?}"),
            // a yes lets the request go; on this offline machine it fails, or succeeds where
            // there is a network, but it was made
            _ => assert!(
                !matches!(
                    outcome,
                    Outcome::Denied { .. } | Outcome::NeedsConfirmation { .. }
                ),
                "{outcome:?} after {:?}",
                started.elapsed()
            ),
        }
    }
}

#[test]
fn a_redirect_to_a_host_not_allowed_is_refused() {
    let a = start(None);
    let b = start(None);
    let home = tempfile::tempdir().unwrap();
    allow_private(home.path(), &a.host());
    let args = json!({"url": a.url(&format!("/go?to={}", b.url("/echo")))}).to_string();
    let out = lmcp(home.path(), &["call", "http_request", &args, "--yes"]);
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(
        e.contains(&format!("a redirect to `{}` was refused", b.host())),
        "{e}"
    );
    assert!(e.contains(&format!("lmcp hosts allow {}", b.host())), "{e}");
    assert_eq!(a.got().len(), 1);
    assert!(b.got().is_empty(), "nothing reaches the other host");
    // without following, the redirect itself is the answer
    let args =
        json!({"url": a.url(&format!("/go?to={}", b.url("/echo"))), "follow_redirects": false})
            .to_string();
    let v = json_out(&lmcp_ok(
        home.path(),
        &["--json", "call", "http_request", &args, "--yes"],
    ));
    assert_eq!(v["result"]["status"], 302, "{v}");
}

/// One address from every range that is never reached by default, in each spelling: even
/// with every public host allowed (`*`), the request is refused before any connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_blocked_range_is_refused_even_under_star() {
    let t = TestHost::new();
    t.host
        .update_config(|c| {
            c.hosts.insert(
                "*".into(),
                lmcp::config::HostRule {
                    grant: lmcp::config::Grant::Allow,
                    private: false,
                },
            );
            Ok(())
        })
        .unwrap();
    let cases = [
        ("0.0.0.1", "0.0.0.0/8"),
        ("10.1.2.3", "10.0.0.0/8"),
        ("100.64.0.1", "100.64.0.0/10"),
        ("127.0.0.1", "127.0.0.0/8"),
        ("169.254.169.254", "169.254.0.0/16"),
        ("172.16.0.1", "172.16.0.0/12"),
        ("192.168.0.1", "192.168.0.0/16"),
        ("224.0.0.1", "224.0.0.0/4"),
        ("240.0.0.1", "240.0.0.0/4"),
        ("255.255.255.255", "240.0.0.0/4"),
        ("[::]", ":: (unspecified)"),
        ("[::1]", "::1 (loopback)"),
        ("[fc00::1]", "fc00::/7"),
        ("[fd00:ec2::254]", "fc00::/7"),
        ("[fe80::1]", "fe80::/10"),
        ("[ff02::1]", "ff00::/8"),
        ("[::ffff:127.0.0.1]", "127.0.0.0/8"),
        ("[::ffff:169.254.169.254]", "169.254.0.0/16"),
        ("[::ffff:10.0.0.1]", "10.0.0.0/8"),
        ("[::192.168.1.1]", "192.168.0.0/16"),
    ];
    for (host, range) in cases {
        let started = Instant::now();
        let e = common::call_yes(
            &t.host,
            "http_request",
            json!({"url": format!("http://{host}/latest/meta-data"), "timeout_secs": 5}),
        )
        .await
        .expect_err(host);
        assert!(e.contains(range), "{host}: {e}");
        assert!(e.contains("--private"), "{host}: {e}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{host} was tried"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exact_private_grant_reaches_a_loopback_server() {
    let server = start(None);
    let t = TestHost::new();
    let allow = |private: bool, key: String| {
        t.host
            .update_config(|c| {
                c.hosts.insert(
                    key,
                    lmcp::config::HostRule {
                        grant: lmcp::config::Grant::Allow,
                        private,
                    },
                );
                Ok(())
            })
            .unwrap();
    };
    let get = || common::call_yes(&t.host, "http_request", json!({"url": server.url("/json")}));
    // an allow without --private stays out of loopback
    allow(false, server.host());
    let e = get().await.unwrap_err();
    assert!(e.contains("127.0.0.0/8"), "{e}");
    // a private allow of another port does not reach this one
    allow(true, format!("127.0.0.1:{}", server.addr.port() ^ 1));
    assert!(get().await.is_err());
    assert!(server.got().is_empty());
    allow(true, server.host());
    let v = get().await.unwrap();
    assert_eq!(v["json"]["hello"], "world", "{v}");
    assert_eq!(v["truncated"], false);
    // the command line refuses --private for anything but one exact host
    let out = lmcp(t.home(), &["hosts", "allow", "*.example.org", "--private"]);
    assert!(stderr(&out).contains("one exact host"), "{}", stderr(&out));
}

/// `localhost` resolves to 127.0.0.1: the address is checked where the connection is made,
/// so neither `*` nor an allow of the name without `--private` reaches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_resolves_to_loopback_is_refused() {
    let server = start(None);
    let t = TestHost::new();
    let name = format!("localhost:{}", server.addr.port());
    for key in ["*".to_string(), name.clone()] {
        t.host
            .update_config(|c| {
                c.hosts.insert(
                    key,
                    lmcp::config::HostRule {
                        grant: lmcp::config::Grant::Allow,
                        private: false,
                    },
                );
                Ok(())
            })
            .unwrap();
        let e = common::call_yes(
            &t.host,
            "http_request",
            json!({"url": format!("http://{name}/json")}),
        )
        .await
        .unwrap_err();
        assert!(e.contains("`localhost` resolves to"), "{e}");
        assert!(e.contains("--private"), "{e}");
    }
    assert!(server.got().is_empty(), "nothing reached the server");
}

#[cfg(target_os = "linux")]
#[test]
fn a_50_mib_response_is_refused_at_the_bound_with_memory_bounded() {
    let server = start(None);
    let home = tempfile::tempdir().unwrap();
    allow_private(home.path(), &server.host());
    let args = json!({"url": server.url("/big")}).to_string();
    let peak = common::peak_rss(home.path(), &["call", "http_request", &args, "--yes"]);
    assert_ne!(peak.code, Some(0));
    assert!(
        peak.stderr.contains("limits.http_response_mb = 8 MiB"),
        "{}",
        peak.stderr
    );
    assert!(
        peak.rss < 96 << 20,
        "peak RSS {} MiB for a 50 MiB response",
        peak.rss >> 20
    );
    // a Lua run keeps only the beginning when it asks for it
    let file = script(
        home.path(),
        "head.lua",
        &format!(
            "---@uses http_request\n---@connect {}\n\
             local r = tools.http_request{{url = '{}', max_bytes = 10}}\n\
             return {{n = #r.body, truncated = r.truncated}}\n",
            server.host(),
            server.url("/big")
        ),
    );
    let v = json_out(&lmcp_ok(home.path(), &["--json", "run", &file, "--yes"]));
    assert_eq!(v["result"], json!({"n": 10, "truncated": true}), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_server_is_stopped_at_the_deadline() {
    let server = start(None);
    let t = TestHost::new();
    t.host
        .update_config(|c| {
            c.hosts.insert(
                server.host(),
                lmcp::config::HostRule {
                    grant: lmcp::config::Grant::Allow,
                    private: true,
                },
            );
            Ok(())
        })
        .unwrap();
    // the call's deadline
    let started = Instant::now();
    let ctx = common::confirmed(Origin::Cli).with_timeout(Duration::from_millis(700));
    let outcome = t
        .host
        .call(CallRequest::new(
            "http_request",
            json!({"url": server.url("/slow")}),
            ctx,
        ))
        .await;
    let e = outcome.into_result().unwrap_err();
    assert!(matches!(e, lmcp::Error::Timeout { .. }), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // the request's own timeout
    let started = Instant::now();
    let e = common::call_yes(
        &t.host,
        "http_request",
        json!({"url": server.url("/slow"), "timeout_secs": 0.5}),
    )
    .await
    .unwrap_err();
    assert!(e.contains("timed out"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_lua_program_without_connect_is_refused() {
    let server = start(None);
    let home = tempfile::tempdir().unwrap();
    allow_private(home.path(), &server.host());
    let url = server.url("/json");
    for (header, expected) in [
        ("---@uses http_request\n", "declares no host"),
        ("", "declares no host"),
        (
            "---@uses http_request\n---@connect other.example.org\n",
            "may reach other.example.org",
        ),
    ] {
        let file = script(
            home.path(),
            "no_connect.lua",
            &format!("{header}return tools.http_request{{url = '{url}'}}\n"),
        );
        let out = lmcp(home.path(), &["run", &file, "--yes"]);
        assert!(!out.status.success(), "{header}");
        let e = stderr(&out);
        assert!(e.contains(expected), "{header}: {e}");
    }
    assert!(server.got().is_empty());
}

/// A program's hosts bound every program it starts: a Lua program that declared one host cannot
/// reach another through a recipe it runs, with the host built at run time.
#[test]
fn a_nested_program_reaches_no_host_its_outer_program_did_not_declare() {
    let server = start(None);
    let home = tempfile::tempdir().unwrap();
    allow_private(home.path(), &server.host());
    let url = server.url("/json");
    let file = script(
        home.path(),
        "nested.lua",
        &format!(
            "---@uses http_request recipe_run\n---@connect hooks.example.org\n\
             local url = '{url}'\n\
             return tools.recipe_run{{confirm = true, manifest = {{name = 'inner',\n\
               lua = '---@uses http_request\\n---@connect {host}\\nreturn tools.http_request{{url = \"' .. url .. '\"}}'}}}}\n",
            host = server.host()
        ),
    );
    let out = lmcp(home.path(), &["run", &file, "--yes"]);
    assert!(!out.status.success(), "{}", stdout(&out));
    let e = format!("{}{}", stdout(&out), stderr(&out));
    assert!(e.contains("may reach hooks.example.org"), "{e}");
    assert!(
        server.got().is_empty(),
        "the nested program reached the server"
    );
}

/// A deny names a host however the URL spells it: a trailing dot, or an IPv4 address written as
/// IPv6; and `*.` patterns match names, never addresses.
#[test]
fn a_deny_holds_for_every_spelling_of_its_host() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    lmcp_ok(h, &["hosts", "allow", "*"]);
    lmcp_ok(h, &["hosts", "deny", "ads.example.org"]);
    lmcp_ok(h, &["hosts", "deny", "203.0.113.9"]);
    for url in [
        "http://ads.example.org./x",
        "http://ADS.example.org/x",
        "http://[::ffff:203.0.113.9]:8080/x",
        "http://[64:ff9b::cb00:7109]/x",
    ] {
        let out = lmcp(h, &["call", "http_request", &format!("url={url}"), "--yes"]);
        assert_eq!(out.status.code(), Some(3), "{url}: {}", stderr(&out));
        assert!(stderr(&out).contains("deny"), "{url}: {}", stderr(&out));
    }
    // documentation ranges are never reachable by default, even under `*`
    for url in ["http://192.0.2.2:18080/", "http://[2001:db8::1]/"] {
        let out = lmcp(h, &["call", "http_request", &format!("url={url}"), "--yes"]);
        assert!(!out.status.success(), "{url}");
        assert!(
            stderr(&out).contains("documentation"),
            "{url}: {}",
            stderr(&out)
        );
    }
    // a wildcard of labels does not match an address ending in them
    let home = tempfile::tempdir().unwrap();
    lmcp_ok(home.path(), &["hosts", "allow", "*.113.9"]);
    let out = lmcp(
        home.path(),
        &["call", "http_request", "url=http://203.0.113.9/", "--yes"],
    );
    assert!(!stderr(&out).contains("Allowed"), "{}", stderr(&out));
    assert!(!out.status.success());
}

fn recipe(name: &str, url: &str) -> Value {
    json!({
        "name": name,
        "params": [{"name": "q", "type": "string", "default": "x"}],
        "steps": [{"tool": "http_request", "args": {"url": url, "method": "POST", "body": "${q}"}}]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recipe_plan_lists_its_hosts_and_its_hash_covers_them() {
    let a = start(None);
    let b = start(None);
    let t = TestHost::new();
    for s in [&a, &b] {
        t.host
            .update_config(|c| {
                c.hosts.insert(
                    s.host(),
                    lmcp::config::HostRule {
                        grant: lmcp::config::Grant::Allow,
                        private: true,
                    },
                );
                Ok(())
            })
            .unwrap();
    }
    let ok = |tool: &'static str, args: Value| {
        let host = Arc::clone(&t.host);
        async move { common::call(&host, tool, args).await.into_result() }
    };
    ok(
        "recipe_save",
        json!({"manifest": recipe("hook", &a.url("/echo?q=${q}"))}),
    )
    .await
    .unwrap();
    let plan = ok("recipe_run", json!({"name": "hook"})).await.unwrap();
    assert_eq!(plan["hosts"], json!([a.host()]), "{plan}");
    assert_eq!(plan["confirmed"], false);
    assert!(a.got().is_empty(), "a plan sends nothing");
    let hash = plan["plan_hash"].as_str().unwrap().to_string();
    // the hash covers the hosts, beyond the calls' arguments
    assert_ne!(
        hash,
        lmcp::gate::plan_hash(plan["calls"].as_array().unwrap())
    );
    // the same recipe aimed at another host has another plan, and the approved hash refuses it
    ok(
        "recipe_save",
        json!({"manifest": recipe("hook", &b.url("/echo?q=${q}")), "replace": true}),
    )
    .await
    .unwrap();
    let e = ok(
        "recipe_run",
        json!({"name": "hook", "confirm": true, "plan_hash": hash}),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("the plan changed"), "{e}");
    assert!(a.got().is_empty() && b.got().is_empty());
    let plan = ok("recipe_run", json!({"name": "hook"})).await.unwrap();
    let hash = plan["plan_hash"].as_str().unwrap().to_string();
    let done = ok(
        "recipe_run",
        json!({"name": "hook", "confirm": true, "plan_hash": hash}),
    )
    .await
    .unwrap();
    assert_eq!(b.got().len(), 1, "{done}");
    assert_eq!(b.got()[0].body, "x");
    // a host a parameter fills is refused at save, before anything runs
    for url in ["${q}/x", "http://${q}/x", "https://example.org${q}"] {
        let e = ok("recipe_save", json!({"manifest": recipe("bad", url)}))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("must be literal"), "{url}: {e}");
    }
}

const SKILL_MD: &str = "---\nname: hooker\ndescription: Posts to a hook.\nconfig:\n  token:\n    title: Token\n    type: text\n    secret: true\n---\n# Hooker\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_secret_in_a_header_is_masked_and_dropped_on_a_cross_host_redirect() {
    let secret = "tok-VERY-SECRET-77";
    let a = start(None);
    let b = start(None);
    let t = TestHost::new();
    for s in [&a, &b] {
        allow(&t, &s.host(), true);
    }
    let code = format!(
        "---@uses http_request\n---@connect {}\n---@connect {}\n\
         return tools.http_request{{url = '{}', method = 'POST', body = 'standup',\n\
           headers = {{Authorization = 'Bearer ' .. config.token, ['X-Trace'] = 'plain'}}}}\n",
        a.host(),
        b.host(),
        a.url(&format!("/go?to={}", b.url("/echo")))
    );
    let install = json!({"skill_md": SKILL_MD, "scripts": [{"name": "post.lua", "code": code}]});
    common::call(&t.host, "skill_install", install)
        .await
        .into_result()
        .unwrap();
    common::call(
        &t.host,
        "skill_config",
        json!({"name": "hooker", "values": {"token": secret}}),
    )
    .await
    .into_result()
    .unwrap();
    // a preview masks the secret
    let preview = t
        .host
        .call(CallRequest::new(
            "skill_call",
            json!({"skill": "hooker", "script": "post"}),
            CallContext::root(Origin::Cli, ConfirmMode::Preview),
        ))
        .await
        .into_result()
        .unwrap();
    let shown = preview.to_string();
    assert!(shown.contains("would send POST"), "{shown}");
    assert!(
        !shown.contains(secret),
        "the preview shows the secret: {shown}"
    );
    assert!(a.got().is_empty());
    // run: A gets the token, B (another host, after a 302 that turns the POST into a GET)
    // gets no Authorization, and the plain header still
    let done = common::call(
        &t.host,
        "skill_call",
        json!({"skill": "hooker", "script": "post"}),
    )
    .await
    .into_result()
    .unwrap();
    let got_a = a.got();
    assert_eq!(got_a.len(), 1);
    assert!(
        got_a[0]
            .headers
            .iter()
            .any(|(k, v)| k == "authorization" && v.contains(secret))
    );
    let got_b = b.got();
    assert_eq!(got_b.len(), 1, "{done}");
    assert!(
        !got_b[0].headers.iter().any(|(k, _)| k == "authorization"),
        "{:?}",
        got_b[0].headers
    );
    assert!(
        got_b[0]
            .headers
            .iter()
            .any(|(k, v)| k == "x-trace" && v == "plain")
    );
    assert!(!done.to_string().contains(secret), "{done}");
    // the history holds shapes: no secret, no URL, no host
    let history = stdout(&lmcp_ok(t.home(), &["--json", "history", "-n", "50"]));
    for never in [secret, &a.host(), &b.host(), "/echo", "standup"] {
        assert!(!history.contains(never), "history holds {never}: {history}");
    }
}

/// The history and a friction report after failed requests name no URL, host or header value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_and_friction_carry_no_url_host_or_header_values() {
    let t = TestHost::new();
    let marker = "hdr-value-5150";
    for url in [
        "http://10.9.8.7/private-path",
        "https://unlisted.example.org/q?key=v",
    ] {
        let _ = t
            .host
            .call(CallRequest::new(
                "http_request",
                json!({"url": url, "headers": {"X-Key": marker}}),
                CallContext::root(Origin::Cli, ConfirmMode::Confirmed),
            ))
            .await;
    }
    // the history is written behind the calls: what they recorded goes out before it is read
    t.host.history().flush().unwrap();
    let history = stdout(&lmcp_ok(t.home(), &["--json", "history"]));
    assert!(history.contains("http_request"), "{history}");
    let report = common::call(
        &t.host,
        "report_friction",
        json!({"friction_type": "repeated_failure", "tool_attempted": "http_request"}),
    )
    .await
    .into_result();
    let log = stdout(&lmcp_ok(t.home(), &["--json", "friction", "log"]));
    for text in [history, log, format!("{report:?}")] {
        for never in [
            "10.9.8.7",
            "private-path",
            "unlisted.example.org",
            "key=v",
            marker,
        ] {
            assert!(!text.contains(never), "{never} in {text}");
        }
    }
}

/// HTTPS on the same stack, against a server whose certificate this test made: trusted only
/// through the debug-only test root setting.
#[test]
fn https_against_a_local_test_server() {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert_pem = made.cert.pem();
    let cert_der = made.cert.der().clone();
    let key_der = rustls::pki_types::PrivateKeyDer::Pkcs8(
        rustls::pki_types::PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()),
    );
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert_der], key_der)
        .unwrap();
    let server = start(Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))));
    let home = tempfile::tempdir().unwrap();
    let name = format!("localhost:{}", server.addr.port());
    allow_private(home.path(), &name);
    let root = home.path().join("root.pem");
    std::fs::write(&root, cert_pem).unwrap();
    let args = json!({"url": format!("https://{name}/json")}).to_string();
    let run = |with_root: bool| {
        let mut cmd = std::process::Command::new(common::bin());
        cmd.args(["--json", "call", "http_request", &args, "--yes"])
            .env("LMCP_HOME", home.path())
            .env_remove(lmcp::net::TEST_ROOT_VAR)
            .stdin(std::process::Stdio::null());
        if with_root {
            cmd.env(lmcp::net::TEST_ROOT_VAR, &root);
        }
        cmd.output().unwrap()
    };
    // without the test root the certificate is nobody's: refused
    let out = run(false);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(server.got().is_empty());
    let out = run(true);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json_out(&out);
    assert_eq!(v["result"]["json"]["hello"], "world", "{v}");
    assert_eq!(server.got().len(), 1);
}

/// The example skill posts its note to its webhook on the one host its script names, with the
/// path and the token from its config: shown in a dry run (nothing reaches the network here),
/// the token masked; a path that tries to lead to another host is refused before any request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_team_standup_example_posts_to_its_webhook() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/skills/team-standup");
    let read = |p: &str| std::fs::read_to_string(dir.join(p)).unwrap();
    let token = "tok-STANDUP-9001";
    let t = TestHost::new();
    let install = json!({
        "skill_md": read("SKILL.md"),
        "scripts": [
            {"name": "write_standup.lua", "code": read("scripts/write_standup.lua")},
            {"name": "post_standup.lua", "code": read("scripts/post_standup.lua")},
        ],
    });
    let installed = common::call(&t.host, "skill_install", install)
        .await
        .into_result()
        .unwrap();
    assert!(
        installed
            .to_string()
            .contains(r#""may_reach":["hooks.example.org"]"#),
        "{installed}"
    );
    let config = |values: Value| {
        let host = Arc::clone(&t.host);
        async move {
            common::call(
                &host,
                "skill_config",
                json!({"name": "team-standup", "values": values}),
            )
            .await
            .into_result()
            .unwrap()
        }
    };
    config(json!({"team": "Core", "webhook_token": token})).await;
    common::call(
        &t.host,
        "skill_call",
        json!({"skill": "team-standup", "script": "write_standup", "params": {"yesterday": "a", "today": "b"}}),
    )
    .await
    .into_result()
    .unwrap();
    let post = |mode: ConfirmMode| {
        let host = Arc::clone(&t.host);
        async move {
            host.call(CallRequest::new(
                "skill_call",
                json!({"skill": "team-standup", "script": "post_standup"}),
                CallContext::root(Origin::Cli, mode)
                    .with_confirmer(Arc::new(lmcp::gate::AlwaysYes)),
            ))
            .await
            .into_result()
        }
    };
    let preview = post(ConfirmMode::Preview).await.unwrap();
    let shown = preview.to_string();
    assert!(
        shown.contains("https://hooks.example.org/hooks/standup"),
        "{shown}"
    );
    assert!(shown.contains("would send POST"), "{shown}");
    assert!(
        shown.contains("## Yesterday"),
        "the note is the body: {shown}"
    );
    assert!(!shown.contains(token), "{shown}");
    assert_eq!(preview["result"]["posted"], false, "{preview}");
    // a path that would lead to another host: refused before any request, even confirmed
    for path in ["@evil.example.net/x", ".evil.example.net/x"] {
        config(json!({"webhook_path": path})).await;
        let e = post(ConfirmMode::Confirmed).await.unwrap_err().to_string();
        assert!(!e.contains(token), "{e}");
        assert!(
            e.contains("must begin with `/`") || e.contains("user name") || e.contains("may reach"),
            "{path}: {e}"
        );
    }
}
