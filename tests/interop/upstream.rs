//! lmcp as the client of a real third-party MCP server: the reference "everything" server of
//! the MCP project (`@modelcontextprotocol/server-everything`, pinned in
//! `tests/interop/ts/package.json`, installed by `npm ci --prefix tests/interop/ts` as `.ci/run`
//! does), added with `lmcp servers add` and called through `lmcp call` and through `lmcp serve`.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::common::{json_out, lmcp_ok};

fn everything() -> PathBuf {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "tests/interop/ts/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    assert!(
        path.is_file(),
        "{} is missing: run `npm ci --prefix tests/interop/ts`",
        path.display()
    );
    path
}

#[test]
fn the_everything_server_behind_lmcp() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let server = everything();
    let added = json_out(&lmcp_ok(
        h,
        &[
            "servers",
            "add",
            "everything",
            "--yes",
            "--json",
            "--",
            "node",
            server.to_str().unwrap(),
            "stdio",
        ],
    ));
    let tools: Vec<&str> = added["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for t in ["mcp__everything__echo", "mcp__everything__get_sum"] {
        assert!(tools.contains(&t), "{t} missing from {added}");
    }
    // its tools ask until allowed; allowed, they run through lmcp call
    lmcp_ok(h, &["grants", "allow", "mcp__everything"]);
    let echo = json_out(&lmcp_ok(
        h,
        &["call", "mcp__everything__echo", "message=hello", "--json"],
    ));
    assert!(
        echo["result"]["text"].as_str().unwrap().contains("hello"),
        "{echo}"
    );
    let sum = json_out(&lmcp_ok(
        h,
        &["call", "mcp__everything__get_sum", "a=2", "b=40", "--json"],
    ));
    assert!(
        sum["result"]["text"].as_str().unwrap().contains("42"),
        "{sum}"
    );

    // and through lmcp serve, to an MCP client of lmcp
    let mut serve = crate::common::spawn(h, &["serve", "--profile", "full"]);
    let mut stdin = serve.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(serve.stdout.take().unwrap());
    let mut roundtrip = |msg: Value| -> Value {
        writeln!(stdin, "{msg}").unwrap();
        let id = msg["id"].clone();
        loop {
            let mut line = String::new();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "lmcp serve ended");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    };
    roundtrip(crate::common::initialize(json!(1)));
    let listed = roundtrip(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"mcp__everything__get_sum"), "{names:?}");
    let called = roundtrip(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "mcp__everything__get_sum", "arguments": {"a": 20, "b": 22}}}));
    assert_ne!(called["result"]["isError"], true, "{called}");
    assert!(called["result"].to_string().contains("42"), "{called}");
    let called = roundtrip(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "mcp__everything__echo", "arguments": {"message": "via serve"}}}));
    assert!(
        called["result"].to_string().contains("via serve"),
        "{called}"
    );
    drop(stdin);
    crate::common::exit_within_10s(&mut serve, "lmcp serve after stdin closed");
}
