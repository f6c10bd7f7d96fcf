"""Sequential tools/call round trips per second: `lmcp serve` against a Python SDK echo server.

Two clients drive both servers in one run: the official Python SDK client (whose own per-call
cost is shared by both and caps the ratio), and a lean JSON-RPC client over the same pipes
(newline-delimited JSON, the 2025-11-25 handshake), which measures the servers themselves.
Usage:
    python3 benches/mcp_roundtrip.py LMCP_BINARY [CALLS]
or `python3 benches/mcp_roundtrip.py --echo-server` to be the Python server itself.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import anyio


def echo_server() -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("echo")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text."""
        return text

    server.run()


async def measure(params, tool: str, args: dict, calls: int) -> float:
    from mcp import Client

    async with Client(params, mode="legacy") as client:
        for _ in range(20):  # warm up
            await client.call_tool(tool, args)
        started = time.perf_counter()
        for _ in range(calls):
            r = await client.call_tool(tool, args)
            assert not r.is_error, r
        return calls / (time.perf_counter() - started)


def measure_raw(argv: list[str], env: dict, tool: str, args: dict, calls: int) -> float:
    import json
    import subprocess

    # Buffered pipes (an unbuffered readline reads one byte per system call), flushed per message.
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout

    def send(msg: dict) -> None:
        proc.stdin.write((json.dumps(msg) + "\n").encode())
        proc.stdin.flush()

    def wait_for(i: int) -> dict:
        while True:
            line = out.readline()
            if not line:
                raise RuntimeError("server closed the pipe")
            msg = json.loads(line)
            if msg.get("id") == i:
                return msg

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
    wait_for(0)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    request = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": tool, "arguments": args}}
    for i in range(1, 21):
        send({**request, "id": i})
        wait_for(i)
    started = time.perf_counter()
    for i in range(21, 21 + calls):
        send({**request, "id": i})
        r = wait_for(i)
        assert "result" in r and not r["result"].get("isError"), r
    rate = calls / (time.perf_counter() - started)
    proc.stdin.close()
    proc.wait(timeout=10)
    return rate


async def main(binary: str, calls: int) -> None:
    from mcp import StdioServerParameters

    with tempfile.TemporaryDirectory() as home:
        env = {"LMCP_HOME": home, "PATH": os.environ.get("PATH", "")}
        ours = StdioServerParameters(command=binary, args=["serve"], env=env)
        theirs = StdioServerParameters(command=sys.executable, args=[__file__, "--echo-server"], env=dict(os.environ))
        lmcp_rate = await measure(ours, "calculate", {"expression": "1+1"}, calls)
        python_rate = await measure(theirs, "echo", {"text": "x"}, calls)
        print(f"SDK client:  lmcp serve {lmcp_rate:.0f} calls/s; python SDK echo server {python_rate:.0f} calls/s; ratio {lmcp_rate / python_rate:.1f}x")
        lmcp_raw = measure_raw([binary, "serve"], env, "calculate", {"expression": "1+1"}, calls)
        python_raw = measure_raw([sys.executable, __file__, "--echo-server"], dict(os.environ), "echo", {"text": "x"}, calls)
        print(f"lean client: lmcp serve {lmcp_raw:.0f} calls/s; python SDK echo server {python_raw:.0f} calls/s; ratio {lmcp_raw / python_raw:.1f}x")


if __name__ == "__main__":
    if sys.argv[1:] == ["--echo-server"]:
        echo_server()
    else:
        anyio.run(main, sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2000)
