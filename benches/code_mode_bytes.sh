#!/usr/bin/env bash
# JSON-RPC bytes for one task done with direct tool calls and with one lua_run (see the .py file).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
python3 benches/code_mode_bytes.py target/release/lmcp
