//! What the benches share: a host in a temporary directory with one trivial read tool.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use lmcp::Host;
use lmcp::registry::{Handler, ToolSpec, sync_handler};
use lmcp::store::Paths;
use serde_json::json;

/// A host under `dir` with `echo` (`{text}` in, `{echo}` out, a read) registered; also returns
/// the handler, for calling it directly.
pub fn echo_host(dir: &Path) -> (Arc<Host>, Handler) {
    let host = Host::open(Paths::under(dir)).unwrap();
    let handler = sync_handler(|args| Ok(json!({"echo": args["text"]})));
    let schema = json!({
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": false
    });
    host.registry()
        .register(
            ToolSpec::new("echo", "Echo", "returns its text", schema),
            handler.clone(),
        )
        .unwrap();
    (host, handler)
}

/// Turns on private mode: calls write no history (the gate's fast path).
pub fn private(host: &Host) {
    host.update_config(|c| {
        c.modes.private = true;
        Ok(())
    })
    .unwrap();
}

/// The runtime the benches drive the host on: two workers, like the machines they run on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
