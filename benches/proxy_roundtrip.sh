#!/usr/bin/env bash
# An MCP client calling an upstream server through lmcp serve, against calling it directly (see
# the .py file), in one run.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
echo_server=$(cargo bench --no-run --bench rmcp_echo --message-format=json 2>/dev/null \
  | python3 -c 'import json, sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "rmcp_echo"][0])')
python3 benches/proxy_roundtrip.py target/release/lmcp "$echo_server" "${1:-5000}" "${2:-3}"
