#!/usr/bin/env bash
# Sequential MCP tools/call round trips (see the .py file): lmcp serve, a bare rmcp echo server
# and a Python SDK echo server, with the same clients, in one run.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check "mcp==2.3.0"
cargo build --release --quiet
echo_server=$(cargo bench --no-run --bench rmcp_echo --message-format=json 2>/dev/null \
  | python3 -c 'import json, sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "rmcp_echo"][0])')
python3 benches/mcp_roundtrip.py target/release/lmcp "$echo_server" "${1:-5000}"
