"""Code mode against direct calls: the JSON-RPC bytes an agent exchanges with `lmcp serve` to do
one task both ways over stdio (issue #37).

The task, on 20 generated files of about 2 KB each in the workspace's `notes/` folder: read the
folder listing; read each file and compute a figure (the sum of its `amount=` values); write one
summary with a line per file and the total.

- Direct: `lmcp serve --profile core`; `initialize`, `tools/list`, one `list_dir`, twenty
  `read_file`s, one `write_file`. The agent (this script) computes the figures between calls,
  as a model would with each result in its context.
- Code mode: `lmcp serve --profile code`; `initialize`, `tools/list`, `resources/read` of
  `lmcp://types/lmcp.lua` (the typed API, read in full), and one `lua_run` whose chunk does the
  same work inside lmcp.
- Code mode by tool: the same, but reading only the types of the three tools the chunk calls
  (`lmcp://types/tools/NAME.lua`), found with one `tool_search`.

Every byte on both pipes is counted (requests, responses and notifications, newline included).
The client answers elicitation with yes: `write_file` may replace a file, so it asks by default,
once in each way (for the `write_file` call, or for the chunk's declared scope).
Both summaries must be equal, byte for byte, or the run fails. Usage:
    python3 benches/code_mode_bytes.py LMCP_BINARY
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile

FILES = 20
TYPES_URI = "lmcp://types/lmcp.lua"

CHUNK = """---@uses list_dir, read_file, write_file
local listing = tools.list_dir{path = "notes"}
local lines, total = {}, 0
for _, entry in ipairs(listing.entries) do
  local text = tools.read_file{path = "notes/" .. entry.name}.content
  local sum = 0
  for v in text:gmatch("amount=(%d+)") do sum = sum + tonumber(v) end
  total = total + sum
  lines[#lines + 1] = entry.name .. ": " .. sum
end
lines[#lines + 1] = "total: " .. total
tools.write_file{path = "summary.txt", content = table.concat(lines, "\\n") .. "\\n"}
return {files = #listing.entries, total = total}
"""


def make_files(workspace: str) -> None:
    """Twenty notes of about 2 KB, each with some `amount=N` lines among prose."""
    rng = random.Random(37)
    words = "the of and to in ledger entry account balance carried forward noted checked by".split()
    notes = os.path.join(workspace, "notes")
    os.makedirs(notes)
    for i in range(FILES):
        lines = []
        size = 0
        while size < 2000:
            if rng.random() < 0.3:
                line = f"amount={rng.randint(1, 999)} ref={rng.randint(1000, 9999)}"
            else:
                line = " ".join(rng.choice(words) for _ in range(rng.randint(6, 14)))
            lines.append(line)
            size += len(line) + 1
        with open(os.path.join(notes, f"note-{i:02}.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")


class Session:
    """A JSON-RPC client on `lmcp serve`'s pipes that counts every byte each way."""

    def __init__(self, binary: str, home: str, profile: str) -> None:
        env = {"LMCP_HOME": home, "PATH": os.environ.get("PATH", "")}
        self.proc = subprocess.Popen(
            [binary, "serve", "--profile", profile],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.sent = 0
        self.received = 0
        self.next_id = 0
        self.questions = 0

    def send(self, msg: dict) -> None:
        line = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
        self.sent += len(line)
        self.proc.stdin.write(line)
        self.proc.stdin.flush()

    def request(self, method: str, params: dict | None = None) -> dict:
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit(f"the server ended during {method}")
            self.received += len(line)
            reply = json.loads(line)
            if reply.get("method") == "elicitation/create":
                # the person says yes (write_file may replace a file, so it asks by default)
                self.questions += 1
                self.send({"jsonrpc": "2.0", "id": reply["id"], "result": {"action": "accept", "content": {"allow": True}}})
                continue
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise SystemExit(f"{method}: {reply['error']}")
                return reply["result"]

    def start(self) -> None:
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {"form": {}}},
                "clientInfo": {"name": "code-mode-bench", "version": "1"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, tool: str, args: dict) -> dict:
        r = self.request("tools/call", {"name": tool, "arguments": args})
        if r.get("isError"):
            raise SystemExit(f"{tool}: {r['content'][0]['text']}")
        return r["structuredContent"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)

    @property
    def total(self) -> int:
        return self.sent + self.received


def figure(text: str) -> int:
    return sum(int(line.split("=")[1].split()[0]) for line in text.splitlines() if line.startswith("amount="))


def direct(binary: str, home: str) -> tuple[Session, str]:
    s = Session(binary, home, "core")
    s.start()
    s.request("tools/list")
    listing = s.call("list_dir", {"path": "notes"})
    lines, total = [], 0
    for entry in listing["entries"]:
        text = s.call("read_file", {"path": "notes/" + entry["name"]})["content"]
        n = figure(text)
        total += n
        lines.append(f"{entry['name']}: {n}")
    lines.append(f"total: {total}")
    s.call("write_file", {"path": "summary.txt", "content": "\n".join(lines) + "\n"})
    assert s.questions == 1, "one question, for the write"
    s.close()
    return s, "\n".join(lines) + "\n"


def code_mode(binary: str, home: str) -> Session:
    s = Session(binary, home, "code")
    s.start()
    s.request("tools/list")
    types = s.request("resources/read", {"uri": TYPES_URI})["contents"][0]["text"]
    assert "function tools.read_file" in types, "the types resource holds the tools"
    r = s.call("lua_run", {"code": CHUNK, "confirm": True})
    assert r["result"]["files"] == FILES, r
    assert s.questions == 1, "one question for the whole chunk"
    s.close()
    return s


def code_mode_by_tool(binary: str, home: str) -> Session:
    """Code mode reading only the types of the tools the chunk calls, found with tool_search."""
    s = Session(binary, home, "code")
    s.start()
    s.request("tools/list")
    found = s.call("tool_search", {"query": "file"})["tools"]
    names = {t["name"] for t in found}
    assert {"list_dir", "read_file", "write_file"} <= names, names
    for name in ("list_dir", "read_file", "write_file"):
        s.request("resources/read", {"uri": f"lmcp://types/tools/{name}.lua"})
    r = s.call("lua_run", {"code": CHUNK, "confirm": True})
    assert r["result"]["files"] == FILES, r
    s.close()
    return s


def main() -> None:
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b, tempfile.TemporaryDirectory() as e:
        for home in (a, b, e):
            make_files(os.path.join(home, "data", "workspace"))
        d, expected = direct(binary, a)
        c = code_mode(binary, b)
        t = code_mode_by_tool(binary, e)
        for home in (b, e):
            got = open(os.path.join(home, "data", "workspace", "summary.txt")).read()
            if got != expected:
                raise SystemExit(f"the summaries differ:\n{expected}\n---\n{got}")
    print(f"task: {FILES} files of ~2 KB: list, read each and sum its amounts, write one summary")
    print(f"{'':10} {'sent':>9} {'received':>9} {'total':>9}")
    print(f"{'direct':10} {d.sent:>9} {d.received:>9} {d.total:>9}")
    print(f"{'code mode':10} {c.sent:>9} {c.received:>9} {c.total:>9}   (reads all of {TYPES_URI})")
    print(f"{'by tool':10} {t.sent:>9} {t.received:>9} {t.total:>9}   (tool_search, then the three tools' types)")
    print(f"code mode exchanges {d.total / c.total:.1f}x fewer bytes reading the whole API, "
          f"{d.total / t.total:.1f}x reading the types of the tools it calls (goal: at least 10x)")


if __name__ == "__main__":
    main()
