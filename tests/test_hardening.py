"""Hostile input on the control channel (issue 12): the server answers and keeps serving."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from pytest_hud.rpc import Connection, serve_rpc

pytestmark = pytest.mark.anyio


async def _echo(conn: Connection, method: str, params: dict[str, Any]) -> Any:
    return {"method": method, "params": params}


async def _reply(reader: asyncio.StreamReader) -> dict[str, Any]:
    async with asyncio.timeout(10):
        return dict(json.loads(await reader.readline()))


async def test_deeply_nested_json_gets_a_protocol_error_and_the_connection_keeps_serving() -> None:
    """Issue 12 #11: RecursionError escaped the parser; the connection dropped unanswered."""
    server = await serve_rpc(_echo, "127.0.0.1", 0)
    port = next(iter(server.sockets)).getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        depth = 200_000
        writer.write(b"[" * depth + b"]" * depth + b"\n")
        writer.write(b'{"id": 1, "params": ' + b"[" * depth + b"]" * depth + b"}\n")
        writer.write(json.dumps({"id": 2, "method": "ping", "params": {}}).encode() + b"\n")
        await writer.drain()
        first, second, third = await _reply(reader), await _reply(reader), await _reply(reader)
        for err in (first, second):
            assert err["error"]["type"] == "ProtocolError"
            assert "nested too deeply" in err["error"]["message"]
        assert third == {"id": 2, "result": {"method": "ping", "params": {}}}
    finally:
        writer.close()
        server.close()
        await server.wait_closed()
