//! Interop cross-check (the `interop` feature, run by `.ci/run` after `cargo test`): `lmcp serve`
//! driven by the official Python MCP SDK client (`pip install mcp`, as `.ci/run` does), in both
//! protocol generations — the same scenarios `tests/all/mcp_client.rs` drives with rmcp's client: listing (with and without output schemas), calls with
//! structured results, invalid arguments as isError, an unknown tool as a protocol error, a
//! custom tool created over MCP with its list-changed notice, cancelling a long Lua run,
//! progress from a recipe and from a PDF build, and elicitation accepted and declined. See `tests/mcp/scenarios.py`.
//! Also `lmcp serve --http` with the SDK's Streamable HTTP client (`tests/mcp/http_scenarios.py`).

use std::process::Command;

use crate::common;

fn python_has_mcp() -> bool {
    Command::new("python3")
        .args(["-c", "import mcp, mcp_types"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run_scenarios(mode: &str) {
    run_script(
        "scenarios.py",
        mode,
        &[
            "list",
            "call",
            "custom tools",
            "tools saved elsewhere",
            "cancel",
            "progress",
            "elicitation",
            "one yes for a recipe",
        ],
    );
}

/// Runs `tests/mcp/SCRIPT MODE` with the Python SDK and checks every scenario said `ok`.
fn run_script(script: &str, mode: &str, scenarios: &[&str]) {
    assert!(
        python_has_mcp(),
        "the MCP tests need the Python MCP SDK: `pip install mcp==2.3.0` (the .ci/run script installs it)"
    );
    let home = tempfile::tempdir().unwrap();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp")
        .join(script);
    let out = Command::new("python3")
        .arg(&path)
        .arg(mode)
        .env("LMCP", common::bin())
        .env("LMCP_HOME", home.path())
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{script} {mode} failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    for scenario in scenarios {
        assert!(
            stdout.contains(&format!("{scenario} ok")),
            "{script} {mode}: `{scenario}` did not run\n{stdout}"
        );
    }
}

#[test]
fn handshake_era_2025_11_25() {
    run_scenarios("legacy");
}

/// `lmcp serve --http` driven by the Python SDK's Streamable HTTP client: listing (without
/// `asset_import`), a call, a write confirmed through elicitation, 401 without the token and 403
/// for a foreign Origin. See `tests/mcp/http_scenarios.py`.
fn run_http_scenarios(mode: &str) {
    run_script(
        "http_scenarios.py",
        mode,
        &["list", "call", "elicitation", "auth"],
    );
}

#[test]
fn over_http_handshake_era() {
    run_http_scenarios("legacy");
}

#[test]
fn over_http_discovery_era() {
    run_http_scenarios("2026-07-28");
}

#[test]
fn discovery_era_2026_07_28() {
    run_scenarios("2026-07-28");
}

/// The official TypeScript SDK clients (1.x, and v2 in both generations), with and without
/// output schemas: `tests/interop/ts/scenarios.mjs`, installed by `npm ci --prefix
/// tests/interop/ts` (as `.ci/run` does).
#[test]
fn typescript_sdk_clients() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/ts");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir()
            && dir
                .join("node_modules/@modelcontextprotocol/client")
                .is_dir(),
        "the TypeScript interop tests need their packages: `npm ci --prefix tests/interop/ts` \
         (the .ci/run script runs it)"
    );
    let home = tempfile::tempdir().unwrap();
    let out = Command::new("node")
        .arg(dir.join("scenarios.mjs"))
        .env("LMCP", common::bin())
        .env("LMCP_HOME", home.path())
        .output()
        .expect("run node (Node.js 18 or later)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "TypeScript scenarios failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    for client in [
        "sdk1 2025-11-25",
        "v2-legacy 2025-11-25",
        "v2-modern 2026-07-28",
    ] {
        for schemas in ["schemas=off", "schemas=on"] {
            for scenario in ["error results", "list_changed", "results meet schemas"] {
                let line = format!("{client} {schemas} {scenario} ok");
                assert!(stdout.contains(&line), "missing `{line}`\n{stdout}");
            }
        }
    }
}
