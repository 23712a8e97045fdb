"""An MCP server that asks too much during a call (the MCP Python SDK, stdio).

Usage: hostile.py, with the SDK venv's python (tests/bridge/setup.sh).

Tool `ask {times, depth}`: elicits `times` forms one after the other during
the call, each with one field whose schema nests `depth` objects deep, then
answers the actions it got back as JSON text, in order.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from seed import json_text, obj, request_client, serve_stdio


def nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "string", "x-nested": schema}
    return schema


async def list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    schema = obj({"times": {"type": "integer"}, "depth": {"type": "integer"}}, ["times", "depth"])
    return types.ListToolsResult(tools=[types.Tool(name="ask", description="Asks too much.", input_schema=schema)])


async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
    raw = dict(ctx.params or {})
    args = raw.get("arguments") or {}
    form = obj({"name": nested(int(args["depth"]))}, ["name"])
    actions = []
    for _ in range(int(args["times"])):
        request = types.ElicitRequest(params=types.ElicitRequestFormParams(message="Again?", requested_schema=form))
        answer = await request_client(ctx, raw, "ask", request, types.ElicitResult)
        actions.append(answer.action)
    return json_text(actions)


if __name__ == "__main__":
    anyio.run(serve_stdio, Server("rlp-hostile", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool))
