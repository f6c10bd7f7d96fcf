"""Sequential tools/call round trips to an upstream MCP server, directly and through lmcp.

The upstream is the bare rmcp echo server (`benches/rmcp_echo.rs`). The same lean JSON-RPC
client (`mcp_roundtrip.measure_raw`: buffered pipes, whole lines, the 2025-11-25 handshake)
calls its `echo` tool directly, and calls `mcp__echo__echo` through `lmcp serve`, which has
the server added (`lmcp servers add echo`) and allowed (`lmcp grants allow mcp__echo`): the
client -> lmcp -> upstream path, with lmcp's gate, history and one child per server. Rounds
alternate between the two; the figures are each one's median over the rounds.

Goal (the Connect issue): p50 through lmcp at most 1.3x the direct p50, and p99 at most
0.3 ms more than the direct p99. The official Python SDK client is measured too (calls per
second over the same two paths): what an agent's client sees, its own per-call cost included.

Usage: python3 benches/proxy_roundtrip.py LMCP_BINARY RMCP_ECHO_BINARY [CALLS] [ROUNDS]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_roundtrip import measure, measure_raw  # noqa: E402


def at(latencies: list[float], q: float) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main(lmcp: str, echo: str, calls: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as home:
        env = {"LMCP_HOME": home, "PATH": os.environ.get("PATH", "")}
        subprocess.run([lmcp, "servers", "add", "echo", "--yes", "--", echo, "--serve"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([lmcp, "grants", "allow", "mcp__echo"], env=env, check=True, stdout=subprocess.DEVNULL)
        paths = {
            "direct": ([echo, "--serve"], "echo"),
            # the least any proxy adds: a process copying bytes both ways (rmcp_echo --relay)
            "bare relay": ([echo, "--relay", echo, "--serve"], "echo"),
            # the least an MCP proxy on rmcp adds: its server and client, forwarding (--proxy)
            "rmcp proxy": ([echo, "--proxy", echo, "--serve"], "echo"),
            "through lmcp": ([lmcp, "serve"], "mcp__echo__echo"),
        }
        p50: dict[str, list[float]] = {k: [] for k in paths}
        p99: dict[str, list[float]] = {k: [] for k in paths}
        rates: dict[str, list[float]] = {k: [] for k in paths}
        for r in range(rounds):
            order = list(paths.items()) if r % 2 == 0 else list(reversed(list(paths.items())))
            for name, (argv, tool) in order:
                rate, latencies = measure_raw(argv, env, tool, {"text": "x"}, calls)
                p50[name].append(at(latencies, 0.5))
                p99[name].append(at(latencies, 0.99))
                rates[name].append(rate)
        med = statistics.median
        print(f"{calls} sequential calls per round, {rounds} alternating rounds (medians):")
        for name in paths:
            print(f"  {name:13} {med(rates[name]):7.0f} calls/s | p50 {med(p50[name]):.3f} ms, p99 {med(p99[name]):.3f} ms")
        ratio = med(p50["through lmcp"]) / med(p50["direct"])
        added = med(p99["through lmcp"]) - med(p99["direct"])
        print(f"through lmcp / direct at p50: {ratio:.2f}x (goal <= 1.3x); "
              f"added at p99: {added:.3f} ms (goal <= 0.3 ms)")
        relay = med(p50["bare relay"]) / med(p50["direct"])
        print(f"a bare relay / direct at p50: {relay:.2f}x (the floor of one more hop); "
              f"lmcp / bare relay at p50: {med(p50['through lmcp']) / med(p50['bare relay']):.2f}x")
        floor = med(p50["rmcp proxy"]) / med(p50["direct"])
        print(f"an rmcp proxy / direct at p50: {floor:.2f}x (rmcp's server and client forwarding, nothing "
              f"else); lmcp / rmcp proxy at p50: {med(p50['through lmcp']) / med(p50['rmcp proxy']):.2f}x")
        import anyio
        from mcp import StdioServerParameters

        sdk = {
            "direct": StdioServerParameters(command=echo, args=["--serve"], env=env),
            "through lmcp": StdioServerParameters(command=lmcp, args=["serve"], env=env),
        }
        tools = {"direct": "echo", "through lmcp": "mcp__echo__echo"}
        sdk_rates = {k: [] for k in sdk}
        sdk_calls = max(calls // 5, 200)
        for r in range(rounds):
            for name in (list(sdk) if r % 2 == 0 else list(reversed(list(sdk)))):
                sdk_rates[name].append(anyio.run(measure, sdk[name], tools[name], {"text": "x"}, sdk_calls))
        d, t = med(sdk_rates["direct"]), med(sdk_rates["through lmcp"])
        print(f"Python SDK client, {sdk_calls} calls per round: direct {d:.0f} calls/s, through lmcp {t:.0f} "
              f"calls/s: {d / t:.2f}x the time per call")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 5000,
         int(sys.argv[4]) if len(sys.argv) > 4 else 3)
