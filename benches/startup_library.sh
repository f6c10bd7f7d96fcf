#!/usr/bin/env bash
# Start-up against library size (see the .py file): installs hyperfine and lua5.4 when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/common/need.sh
need hyperfine hyperfine
need lua5.4 lua5.4
cargo build --release --quiet
python3 benches/startup_library.py target/release/lmcp
