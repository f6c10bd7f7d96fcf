//! The MCP Inspector's CLI (`@modelcontextprotocol/inspector`, pinned in
//! `tests/interop/ts/package.json`) against `lmcp serve`: `--method prompts/list` shows an
//! installed skill as a prompt, and `--method resources/list` its reference beside the typed
//! API (issue #38).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{self, lmcp_ok};

fn inspector() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/interop/ts/node_modules/.bin/mcp-inspector");
    assert!(
        path.exists(),
        "{} is missing: run `npm ci --prefix tests/interop/ts`",
        path.display()
    );
    path
}

/// `mcp-inspector --cli ... --method METHOD` on `lmcp serve` in `home`, as JSON.
fn inspect(home: &Path, method: &str) -> Value {
    // the Inspector starts the server with a minimal environment: LMCP_HOME is passed with -e
    let out = Command::new(inspector())
        .arg("--cli")
        .arg("-e")
        .arg(format!("LMCP_HOME={}", home.display()))
        .arg(common::bin())
        .arg("serve")
        .args(["--method", method])
        .env("LMCP_HOME", home)
        .output()
        .expect("run the MCP Inspector (Node.js)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "mcp-inspector --method {method} failed\n--- stdout\n{stdout}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("JSON from the Inspector: {e}\n{stdout}"))
}

#[test]
fn the_inspector_lists_a_skill_as_a_prompt_and_its_references() {
    let home = tempfile::tempdir().unwrap();
    let skill = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/skills/word-stats");
    lmcp_ok(
        home.path(),
        &["skill", "install", skill.to_str().unwrap(), "--yes"],
    );
    let prompts = inspect(home.path(), "prompts/list");
    let listed = prompts["prompts"].as_array().expect("a prompts list");
    assert_eq!(listed.len(), 1, "{prompts}");
    assert_eq!(listed[0]["name"], "word-stats");
    assert!(
        listed[0]["description"]
            .as_str()
            .is_some_and(|d| d.starts_with("Count the words")),
        "{prompts}"
    );
    let resources = inspect(home.path(), "resources/list");
    let uris: Vec<&str> = resources["resources"]
        .as_array()
        .expect("a resources list")
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    assert_eq!(
        uris,
        [
            "lmcp://types/lmcp.lua",
            "lmcp://skills/word-stats/references/reading-the-counts.md"
        ],
        "{resources}"
    );
}
