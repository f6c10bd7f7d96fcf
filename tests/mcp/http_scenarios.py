"""Drives `lmcp serve --http` with the official Python MCP SDK's Streamable HTTP client, in one
protocol generation.

Usage: python3 http_scenarios.py MODE        (MODE: legacy | 2026-07-28)
Needs LMCP (the binary) and LMCP_HOME (an empty temporary directory) in the environment.
Prints one line per scenario and exits non-zero on the first failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

MODE = sys.argv[1]
LMCP = os.environ["LMCP"]
HOME = Path(os.environ["LMCP_HOME"])
ENV = {"LMCP_HOME": str(HOME), "PATH": os.environ.get("PATH", "")}


def check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)


async def accept(_ctx, params):
    return types.ElicitResult(action="accept", content={"allow": True})


def connect(url: str, token: str) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http), mode=MODE, elicitation_callback=accept)


async def scenarios(url: str, token: str) -> None:
    async with connect(url, token) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        check("calculate" in names and "read_file" in names, f"listed: {names}")
        check("asset_import" not in names, f"asset_import needs stdio: {names}")
        print("list ok")
        r = await client.call_tool("calculate", {"expression": "6*7"})
        check(r.structured_content == {"expression": "6*7", "value": 42}, str(r))
        print("call ok")
        r = await client.call_tool("write_file", {"path": f"http-{MODE}.txt", "content": "asked"})
        check(not r.is_error, str(r))
        written = list(HOME.rglob(f"http-{MODE}.txt"))
        check(len(written) == 1 and written[0].read_text() == "asked", str(written))
        print("elicitation ok")
    async with httpx2.AsyncClient() as raw:
        r = await raw.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        check(r.status_code == 401, f"no token: {r.status_code}")
        r = await raw.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Authorization": f"Bearer {token}", "Origin": "http://evil.example"},
        )
        check(r.status_code == 403, f"foreign origin: {r.status_code}")
    print("auth ok")


def main() -> None:
    token = subprocess.run(
        [LMCP, "serve", "--http", "--show-token"], env=ENV, capture_output=True, text=True, check=True
    ).stdout.strip()
    server = subprocess.Popen(
        [LMCP, "serve", "--http", "127.0.0.1:0"], env=ENV, stderr=subprocess.PIPE, text=True
    )
    try:
        line = server.stderr.readline()
        url = "http://" + line.split("http://", 1)[1].split(" ", 1)[0]
        anyio.run(scenarios, url, token)
    finally:
        server.terminate()
        server.wait(timeout=10)


main()
