"""Drives `lmcp serve` with the official Python MCP SDK client, in one protocol generation.

Usage: python3 scenarios.py MODE        (MODE: legacy | 2026-07-28)
Needs LMCP (the binary) and LMCP_HOME (an empty temporary directory) in the environment.
Prints one line per scenario and exits non-zero on the first failure.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import mcp_types as types
from mcp import Client, MCPError, StdioServerParameters

MODE = sys.argv[1]
LMCP = os.environ["LMCP"]
HOME = Path(os.environ["LMCP_HOME"])


def server(**env: str) -> StdioServerParameters:
    full = {"LMCP_HOME": str(HOME), "PATH": os.environ.get("PATH", "")}
    full.update(env)
    return StdioServerParameters(command=LMCP, args=["serve", "--profile", "full"], env=full)


def check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)


async def accept(_ctx, params):
    return types.ElicitResult(action="accept", content={"allow": True})


async def decline(_ctx, params):
    return types.ElicitResult(action="decline")


async def listing() -> None:
    async with Client(server(), mode=MODE) as client:
        tools = (await client.list_tools()).tools
        names = [t.name for t in tools]
        check(names == sorted(names), f"deterministic order: {names}")
        for expected in ["calculate", "read_file", "write_file", "custom_tool_create", "recipe_run", "run_command"]:
            check(expected in names, f"{expected} listed: {names}")
        calc = next(t for t in tools if t.name == "calculate")
        check(calc.input_schema["required"] == ["expression"], str(calc.input_schema))
        check(calc.annotations.read_only_hint is True and calc.annotations.destructive_hint is False, str(calc.annotations))
        write = next(t for t in tools if t.name == "write_file")
        check(write.annotations.destructive_hint is True and write.annotations.open_world_hint is False, str(write.annotations))
        check(all(t.output_schema is None for t in tools), "no output schemas unless asked")
        check(all(t.title for t in tools), "every tool has a title")
    async with Client(server(LMCP_OUTPUT_SCHEMAS="1"), mode=MODE) as client:
        tools = (await client.list_tools()).tools
        calc = next(t for t in tools if t.name == "calculate")
        check(calc.output_schema is not None and "value" in calc.output_schema["properties"], str(calc.output_schema))
        # the client validates structured content against the output schema
        r = await client.call_tool("calculate", {"expression": "2^10"})
        check(r.structured_content == {"expression": "2^10", "value": 1024}, str(r))
        r = await client.call_tool("get_datetime", {})
        check(not r.is_error and "weekday" in r.structured_content, str(r))
    # tools unavailable here are left out, consistently
    config = HOME / "config" / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"modes": {"no_terminal": True}}))
    try:
        async with Client(server(), mode=MODE) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            check("run_command" not in names and "calculate" in names, str(names))
            r = await client.call_tool("run_command", {"program": "true"})
            check(r.is_error and "no terminal access" in r.content[0].text, str(r))
    finally:
        config.unlink()
    print("list ok")


async def calls() -> None:
    async with Client(server(), mode=MODE) as client:
        r = await client.call_tool("calculate", {"expression": "6*7"})
        check(r.is_error is False or r.is_error is None, str(r))
        check(r.structured_content == {"expression": "6*7", "value": 42}, str(r))
        check(json.loads(r.content[0].text) == r.structured_content, str(r.content))
        r = await client.call_tool("calculate", {"expression": 5})
        check(r.is_error is True, str(r))
        check("/expression" in r.content[0].text and "rule `type`" in r.content[0].text, r.content[0].text)
        r = await client.call_tool("calculate", {"expression": "1/0"})
        check(r.is_error is True and "division by zero" in r.content[0].text, str(r))
        try:
            await client.call_tool("no_such_tool", {})
        except MCPError as e:
            check("unknown tool" in str(e), str(e))
        else:
            raise AssertionError("an unknown tool must be a protocol error")
    print("call ok")


async def custom_tools() -> None:
    changed = anyio.Event()

    async def on_message(message) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    definition = {
        "name": "user_double",
        "description": "Double a number with calculate",
        "parameters": [{"name": "n", "type": "string", "required": True}],
        "steps": [{"id": "calc", "tool": "calculate", "arguments": {"expression": {"$input": "n"}}}],
    }
    async with Client(server(), mode=MODE, message_handler=on_message) as client:
        if MODE == "legacy":
            r = await client.call_tool("custom_tool_create", definition)
            check(not r.is_error, str(r))
            with anyio.fail_after(10):
                await changed.wait()
        else:
            async with client.listen(tools_list_changed=True) as sub:
                r = await client.call_tool("custom_tool_create", definition)
                check(not r.is_error, str(r))
                with anyio.fail_after(10):
                    async for event in sub:
                        break
        names = [t.name for t in (await client.list_tools()).tools]
        check("user_double" in names, f"the new tool is listed: {names}")
        r = await client.call_tool("user_double", {"n": "21*2"})
        check(r.structured_content["result"]["value"] == 42, str(r))
        r = await client.call_tool("custom_tool_delete", {"name": "user_double"})
        check(r.is_error and "needs a person" in r.content[0].text, "deleting asks, and this client cannot answer")
    print("custom tools ok")


async def saved_elsewhere() -> None:
    """A custom tool saved and deleted from the command line while the server runs."""
    events = anyio.create_memory_object_stream(16)
    send, receive = events

    async def on_message(message) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            await send.send(message)

    definition = {
        "name": "user_triple",
        "description": "Triple a number with calculate",
        "parameters": [{"name": "n", "type": "string", "required": True}],
        "steps": [{"id": "calc", "tool": "calculate", "arguments": {"expression": {"$input": "n"}}}],
    }
    env = {"LMCP_HOME": str(HOME), "PATH": os.environ.get("PATH", "")}

    async def cli(*args: str) -> None:
        done = await anyio.run_process([LMCP, *args], env=env, check=False)
        check(done.returncode == 0, f"lmcp {args}: {done.stderr.decode()}")

    async def listed() -> list[str]:
        return [t.name for t in (await client.list_tools()).tools]

    async with Client(server(), mode=MODE, message_handler=on_message) as client:
        if MODE == "legacy":
            await cli("call", "custom_tool_create", json.dumps(definition), "--yes")
            with anyio.fail_after(10):
                await receive.receive()
            check("user_triple" in await listed(), "saved from the command line, listed by the server")
            await cli("call", "custom_tool_delete", '{"name": "user_triple"}', "--yes")
            with anyio.fail_after(10):
                await receive.receive()
        else:
            async with client.listen(tools_list_changed=True) as sub:
                await cli("call", "custom_tool_create", json.dumps(definition), "--yes")
                with anyio.fail_after(10):
                    async for event in sub:
                        break
                check("user_triple" in await listed(), "saved from the command line, listed by the server")
                await cli("call", "custom_tool_delete", '{"name": "user_triple"}', "--yes")
                with anyio.fail_after(10):
                    async for event in sub:
                        break
        check("user_triple" not in await listed(), "deleted from the command line, gone")
    print("tools saved elsewhere ok")


async def cancel() -> None:
    spin = {"name": "user_spin", "description": "loops until cancelled", "lua": "---@timeout 600\nwhile true do end"}
    async with Client(server(), mode=MODE) as client:
        r = await client.call_tool("custom_tool_create", spin)
        check(not r.is_error, str(r))
        started = anyio.current_time()
        with anyio.move_on_after(0.5):
            await client.call_tool("user_spin", {})
        r = await client.call_tool("calculate", {"expression": "1+1"})
        check(r.structured_content["value"] == 2, "the server still answers")
        check(anyio.current_time() - started < 10, "cancelled promptly")
    # the cancelled run was recorded as such
    for _ in range(50):
        history = (HOME / "data" / "history.jsonl").read_text()
        if '"tool":"user_spin"' in history:
            break
        await anyio.sleep(0.1)
    check('"outcome":"failed:cancelled"' in history, history[-500:])
    print("cancel ok")


async def progress() -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        seen.append((p, total, message))

    recipe = {"name": "three steps", "steps": [{"tool": "calculate", "args": {"expression": "1"}}] * 3}
    async with Client(server(), mode=MODE) as client:
        r = await client.call_tool("recipe_save", {"manifest": recipe, "replace": True})
        check(not r.is_error, str(r))
        r = await client.call_tool("recipe_run", {"name": "three steps"}, progress_callback=on_progress)
        check(not r.is_error and len(r.structured_content["steps"]) == 3, str(r))
    check(len(seen) >= 3, f"progress notifications: {seen}")
    check(any(m and "step 2 of 3" in m for _, _, m in seen), str(seen))

    # and from a PDF build: one report per page
    seen.clear()
    (HOME / "data" / "workspace").mkdir(parents=True, exist_ok=True)
    (HOME / "data" / "workspace" / "page.png").write_bytes(tiny_png())
    async with Client(server(), mode=MODE) as client:
        ws = (await client.call_tool("workspace_create", {"name": "album"})).structured_content["workspace_id"]
        r = await client.call_tool("asset_import", {"workspace_id": ws, "path": "page.png"})
        check(not r.is_error, str(r))
        args = {"workspace_id": ws, "source_asset_ids": [1, 1, 1], "title": "Album", "preset": "square"}
        r = await client.call_tool("build_image_pdf", args, progress_callback=on_progress)
        check(not r.is_error and r.structured_content["stage"] == "ready", str(r))
    check(any(m and "page 3 of 3" in m for _, _, m in seen), f"PDF progress: {seen}")
    print("progress ok")


def tiny_png() -> bytes:
    import struct
    import zlib

    w, h = 4, 3
    raw = b"".join(b"\x00" + b"".join(bytes([x * 60, y * 80, 200]) for x in range(w)) for y in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


async def elicitation() -> None:
    target = HOME / "data" / "workspace" / f"elicited-{MODE}.txt"
    args = {"path": target.name, "content": "asked first"}
    async with Client(server(), mode=MODE, elicitation_callback=decline) as client:
        r = await client.call_tool("write_file", args)
        check(r.is_error and "declined" in r.content[0].text, str(r))
    check(not target.exists(), "declined: nothing written")
    async with Client(server(), mode=MODE) as client:
        r = await client.call_tool("write_file", args)
        check(r.is_error and "lmcp grants allow write_file" in r.content[0].text, str(r))
    check(not target.exists(), "nobody to ask: nothing written")
    async with Client(server(), mode=MODE, elicitation_callback=accept) as client:
        r = await client.call_tool("write_file", args)
        check(not r.is_error, str(r))
    check(target.read_text() == "asked first", "accepted: written")
    print("elicitation ok")


async def one_yes_for_a_recipe() -> None:
    # A recipe with two steps that each need a yes (destructive: the default grant asks). The
    # question is asked once, up front, listing both; then each step runs exactly once.
    counter = HOME / f"steps-{MODE}.txt"
    step = {"tool": "run_command", "args": {"program": "sh", "args": ["-c", f"echo x >> '{counter}'"]}}
    manifest = {"name": f"two asks {MODE}", "steps": [step, step]}
    asked: list[str] = []

    async def count(_ctx, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"allow": True})

    async with Client(server(), mode=MODE, elicitation_callback=count) as client:
        r = await client.call_tool("recipe_run", {"manifest": manifest, "confirm": True})
        check(not r.is_error, str(r))
    check(len(asked) == 1, f"asked once, up front: {asked}")
    check("run_command" in asked[0], f"the question lists the calls: {asked[0]}")
    check(counter.read_text() == "x\nx\n", f"each step ran once: {counter.read_text()!r}")
    print("one yes for a recipe ok")


async def main() -> None:
    for scenario in [listing, calls, custom_tools, saved_elsewhere, cancel, progress, elicitation,
                     one_yes_for_a_recipe]:
        await scenario()


anyio.run(main)
