"""Sequential tools/call round trips: `lmcp serve` (history on, as installed) against a bare rmcp
echo server (`benches/rmcp_echo.rs`: the same SDK, no gate) and a Python SDK echo server.

Two clients drive the servers in one run: the official Python SDK client (whose own per-call
cost is shared by all and caps the ratio), and a lean JSON-RPC client over the same pipes
(buffered, whole lines, newline-delimited JSON, the 2025-11-25 handshake), which measures the
servers themselves: calls per second and the latency of each call (p50, p99, p99.9, max).
Usage:
    python3 benches/mcp_roundtrip.py LMCP_BINARY RMCP_ECHO_BINARY [CALLS]
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


def measure_raw(argv: list[str], env: dict, tool: str, args: dict, calls: int) -> tuple[float, list[float]]:
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
    latencies = []
    started = time.perf_counter()
    for i in range(21, 21 + calls):
        sent = time.perf_counter()
        send({**request, "id": i})
        r = wait_for(i)
        latencies.append(time.perf_counter() - sent)
        assert "result" in r and not r["result"].get("isError"), r
    rate = calls / (time.perf_counter() - started)
    proc.stdin.close()
    proc.wait(timeout=10)
    return rate, latencies


def percentiles(latencies: list[float]) -> str:
    ordered = sorted(latencies)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return f"p50 {at(0.5):.3f} ms, p99 {at(0.99):.3f} ms, p99.9 {at(0.999):.3f} ms, max {ordered[-1] * 1000:.3f} ms"


async def main(binary: str, echo: str, calls: int) -> None:
    from mcp import StdioServerParameters

    with tempfile.TemporaryDirectory() as home:
        env = {"LMCP_HOME": home, "PATH": os.environ.get("PATH", "")}
        ours = StdioServerParameters(command=binary, args=["serve"], env=env)
        python = StdioServerParameters(command=sys.executable, args=[__file__, "--echo-server"], env=dict(os.environ))
        bare = StdioServerParameters(command=echo, args=["--serve"], env=env)
        rates = {
            "lmcp serve": await measure(ours, "calculate", {"expression": "1+1"}, calls),
            "rmcp echo": await measure(bare, "echo", {"text": "x"}, calls),
            "python SDK echo": await measure(python, "echo", {"text": "x"}, calls),
        }
        print("SDK client:  " + "; ".join(f"{k} {v:.0f} calls/s" for k, v in rates.items()))
        servers = {
            "lmcp serve": ([binary, "serve"], env, "calculate", {"expression": "1+1"}),
            "rmcp echo": ([echo, "--serve"], env, "echo", {"text": "x"}),
            "python SDK echo": ([sys.executable, __file__, "--echo-server"], dict(os.environ), "echo", {"text": "x"}),
        }
        print(f"lean client, {calls} sequential calls each:")
        raw = {}
        for name, (argv, server_env, tool, args) in servers.items():
            rate, latencies = measure_raw(argv, server_env, tool, args, calls)
            raw[name] = rate
            print(f"  {name:16} {rate:7.0f} calls/s | {percentiles(latencies)}")
        entries = 0
        for name in ("history.1.jsonl", "history.jsonl"):
            history = os.path.join(home, "data", name)
            entries += sum(1 for _ in open(history)) if os.path.exists(history) else 0
        print(f"lmcp / rmcp echo {raw['lmcp serve'] / raw['rmcp echo']:.2f}x, lmcp / python SDK {raw['lmcp serve'] / raw['python SDK echo']:.1f}x "
              f"(calls/s); lmcp's history holds {entries} entries")


if __name__ == "__main__":
    if sys.argv[1:] == ["--echo-server"]:
        echo_server()
    else:
        anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 5000)
