#!/usr/bin/env bash
# Sequential MCP tools/call round trips: lmcp serve vs a Python SDK echo server, same client.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check "mcp==2.3.0"
cargo build --release --quiet
python3 benches/mcp_roundtrip.py target/release/lmcp "${1:-2000}"
