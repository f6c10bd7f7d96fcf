#!/usr/bin/env bash
# Whole-process start-up and run: `lmcp run hello.lua` against `lua5.4 hello.lua`, in one run,
# with hyperfine. Installs hyperfine and lua5.4 from Debian's packages when missing.
#
#   benches/run_vs_lua.sh            # prints hyperfine's table and the ratio
set -euo pipefail
cd "$(dirname "$0")/.."

source benches/common/need.sh
need hyperfine hyperfine
need lua5.4 lua5.4

cargo build --release --quiet
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/hello.lua" <<'LUA'
local t = {}
for i = 1, 1000 do t[#t + 1] = ("hello %d"):format(i) end
print(t[1000])
LUA
export LMCP_HOME="$work/home"
hyperfine --warmup 5 --runs 50 -N --export-json "$work/result.json" \
  "target/release/lmcp run $work/hello.lua" \
  "lua5.4 $work/hello.lua"
python3 - "$work/result.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
ours, ref = r[0]["mean"], r[1]["mean"]
print(f"lmcp run: {ours*1000:.2f} ms, lua5.4: {ref*1000:.2f} ms, ratio {ours/ref:.1f}x")
PY
