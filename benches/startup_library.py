"""Start-up against library size: `lmcp run` of a one-line script with an empty library and with
1,000 saved custom tools and 100 installed skills, against `lua5.4` running the same line, in
one run (hyperfine, -N; medians of 200 runs per command, taken in 5 rounds that alternate the
libraries, lua5.4 beside each library's round).

The library is written the way lmcp stores it (definition files in data/tools/, skill folders in
data/skills/ with SKILL.md, scripts/ and meta.json), half the custom tools JSON steps and half
Lua, each skill with two scripts.

Usage: python3 benches/startup_library.py LMCP_BINARY
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROUNDS = 5
RUNS = 200  # per command and library, over all rounds

STEPS = {
    "format": 1,
    "description": "Evaluates an arithmetic expression with calculate, as a saved step.",
    "parameters": [{"name": "expression", "type": "string", "required": True, "description": "What to evaluate"}],
    "steps": [{"id": "calc", "tool": "calculate", "arguments": {"expression": {"$input": "expression"}}}],
}
LUA = "---@param a number\n---@param b number\n---@uses calculate\nreturn tools.calculate{expression = a .. ' + ' .. b}"
SKILL_MD = """---
name: {name}
description: Counts things for the bench (skill {i}); nothing more.
version: 1.0.0
config:
  min_length:
    title: Shortest word counted
    type: number
    default: 3
---
# Bench skill {i}

Use `{prefix}_count` to count, `{prefix}_echo` to echo.
"""
SCRIPT = """---@description {what} for bench skill {i}.
---@param text string The text
---@timeout 20
return {{n = #params.text}}
"""


def library(home: Path, tools: int, skills: int) -> None:
    data = home / "data"
    (data / "tools").mkdir(parents=True)
    (data / "skills").mkdir(parents=True)
    stamp = "2026-12-01T00:00:00Z"
    for i in range(tools):
        name = f"user_bench_{i:04}"
        if i % 2:
            d = {"format": 1, "name": name, "description": f"Adds two numbers (bench tool {i}).", "parameters": [], "lua": LUA}
        else:
            d = dict(STEPS, name=name)
        d.update(created=stamp, updated=stamp)
        (data / "tools" / f"{name}.json").write_text(json.dumps(d, indent=2))
    for i in range(skills):
        name, prefix = f"bench-skill-{i:03}", f"bench{i:03}"
        root = data / "skills" / name
        (root / "scripts").mkdir(parents=True)
        (root / "references").mkdir()
        (root / "SKILL.md").write_text(SKILL_MD.format(name=name, i=i, prefix=prefix))
        for what in ["count", "echo"]:
            (root / "scripts" / f"{prefix}_{what}.lua").write_text(SCRIPT.format(what=what.title(), i=i))
        (root / "meta.json").write_text(json.dumps({"installtime": 1, "updatetime": 1, "enabled": True}))


def main(binary: str) -> None:
    for tool in ["hyperfine", "lua5.4"]:
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is missing: apt-get install hyperfine lua5.4")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        script = root / "one.lua"
        script.write_text("print(1 + 1)\n")
        empty, full = root / "empty", root / "full"
        library(full, 1000, 100)
        empty.mkdir()
        # the full library must load: every tool listed, nothing warned
        env = dict(os.environ, LMCP_HOME=str(full))
        out = subprocess.run([binary, "tools", "--json"], env=env, capture_output=True, text=True, check=True)
        listed = sum(1 for t in json.loads(out.stdout) if t["name"].startswith(("user_bench_", "skill__bench")))
        if listed != 1000 + 200 or out.stderr.strip():
            sys.exit(f"the library did not load whole: {listed} tools listed; {out.stderr[-500:]}")
        # No `env` wrapper (its exec would count against lmcp only): each library gets its own
        # hyperfine run with LMCP_HOME in the environment, lua5.4 measured in both. The machine's
        # speed drifts over seconds, so the runs come in rounds that take turns (empty, full,
        # empty, ...), each with lua5.4 beside it, and the medians are over every round's runs.
        times: dict[str, list[float]] = {}
        ratios = []
        for turn in range(ROUNDS):
            for name, home in [("empty", empty), ("full", full)]:
                result = root / f"{name}-{turn}.json"
                subprocess.run(
                    ["hyperfine", "-N", "--warmup", "5", "--runs", str(RUNS // ROUNDS), "--export-json", str(result),
                     "-n", name, f"{binary} run {script}", "-n", "lua5.4", f"lua5.4 {script}"],
                    check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, LMCP_HOME=str(home)),
                )
                r = {x["command"]: x["times"] for x in json.loads(result.read_text())["results"]}
                times.setdefault(name, []).extend(r[name])
                times.setdefault(f"lua5.4 ({name})", []).extend(r["lua5.4"])
                if name == "full":
                    ratios.append(statistics.median(r[name]) / statistics.median(r["lua5.4"]))
        med = {k: statistics.median(v) * 1000 for k, v in times.items()}
        lua = min(med["lua5.4 (empty)"], med["lua5.4 (full)"])
        print(f"lmcp run, empty library: {med['empty']:.2f} ms; 1,000 tools + 100 skills: {med['full']:.2f} ms; "
              f"lua5.4: {med['lua5.4 (empty)']:.2f} / {med['lua5.4 (full)']:.2f} ms "
              f"(medians of {RUNS} runs each, in {ROUNDS} rounds)")
        print(f"full / empty {med['full'] / med['empty']:.2f}x (goal <= 1.5x), "
              f"full / lua5.4 {med['full'] / med['lua5.4 (full)']:.2f}x (goal <= 2.5x; the faster lua5.4 run: "
              f"{med['full'] / lua:.2f}x)")
        print("full / lua5.4 round by round: " + ", ".join(f"{r:.2f}x" for r in ratios))


if __name__ == "__main__":
    main(sys.argv[1])
