"""Sequential tools/call round trips per second: `lmcp serve` against a Python SDK echo server.

The same Python SDK client (legacy handshake, stdio) drives both, in one run. Usage:
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


async def main(binary: str, calls: int) -> None:
    from mcp import StdioServerParameters

    with tempfile.TemporaryDirectory() as home:
        env = {"LMCP_HOME": home, "PATH": os.environ.get("PATH", "")}
        ours = StdioServerParameters(command=binary, args=["serve"], env=env)
        theirs = StdioServerParameters(command=sys.executable, args=[__file__, "--echo-server"], env=dict(os.environ))
        lmcp_rate = await measure(ours, "calculate", {"expression": "1+1"}, calls)
        python_rate = await measure(theirs, "echo", {"text": "x"}, calls)
    print(f"lmcp serve: {lmcp_rate:.0f} calls/s; python SDK echo server: {python_rate:.0f} calls/s; ratio {lmcp_rate / python_rate:.1f}x")


if __name__ == "__main__":
    if sys.argv[1:] == ["--echo-server"]:
        echo_server()
    else:
        anyio.run(main, sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2000)
