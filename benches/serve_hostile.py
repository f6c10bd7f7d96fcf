#!/usr/bin/env python3
"""`lmcp serve` under hostile load: a YAML alias bomb, a Lua run trying to outlive its deadline,
and 2,000 calls whose confirmations are never answered. Prints the server's peak RSS and whether
it still answers. Run: python3 benches/serve_hostile.py target/release/lmcp
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

LMCP = sys.argv[1] if len(sys.argv) > 1 else "target/release/lmcp"
home = tempfile.mkdtemp()
proc = subprocess.Popen([LMCP, "serve", "--profile", "full"], stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                        env={"LMCP_HOME": home, "PATH": os.environ.get("PATH", "")})
answers = {}
lock = threading.Condition()


def reader():
    for line in proc.stdout:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        with lock:
            if "id" in msg and ("result" in msg or "error" in msg):
                answers[msg["id"]] = msg
                lock.notify_all()


threading.Thread(target=reader, daemon=True).start()


def send(msg):
    proc.stdin.write((json.dumps(msg) + "\n").encode())
    proc.stdin.flush()


def wait(i, timeout=30):
    end = time.time() + timeout
    with lock:
        while i not in answers and time.time() < end:
            lock.wait(0.1)
        return answers.get(i)


def rss_mb():
    with open(f"/proc/{proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
    "clientInfo": {"name": "hostile", "version": "1"}}})
assert wait(0), "no answer to initialize"
send({"jsonrpc": "2.0", "method": "notifications/initialized"})

front = "name: bomb\ndescription: d\nversion: &a0 [x, x, x, x, x, x, x, x, x]\n"
for i in range(1, 9):
    front += f"l{i}: &a{i} [" + ", ".join([f"*a{i-1}"] * 9) + "]\n"
t0 = time.time()
send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
      "params": {"name": "skill_install", "arguments": {"skill_md": f"---\n{front}---\nx\n"}}})
bomb = wait(1)
print(f"yaml bomb: answered in {time.time() - t0:.2f} s, isError={bomb['result'].get('isError')}")

hang = ("local mt = {} local c = setmetatable({}, mt) "
        "mt.__close = function() while true do end end "
        "coroutine.wrap(function() for _ in function() while true do end end, nil, nil, c do end end)()")
send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "custom_tool_create",
      "arguments": {"name": "user_hang", "description": "d", "lua": hang}}})
assert wait(2), "no answer to custom_tool_create"
t0 = time.time()
send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "user_hang", "arguments": {}}})
hung = wait(3)
print(f"lua hang: answered in {time.time() - t0:.2f} s: {hung['result']['content'][0]['text'][:90]}")

# 2,000 calls that each need a person's yes (send: ask), never answered
for i in range(2000):
    send({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
          "params": {"name": "report_friction", "arguments": {"friction_type": "other"}}})
time.sleep(3)
send({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}})
alive = wait(9, 15) is not None
print(f"after 2,000 unanswered confirmations: still answers={alive}, peak RSS={rss_mb():.1f} MB")
proc.kill()
