"""An MCP server that asks too much during a call (the MCP Python SDK, stdio).

Usage: hostile.py, with the SDK venv's python (tests/bridge/setup.sh).

Tools (each answers JSON text):

    ask {times, depth}   elicits `times` forms one after the other during the
                         call, each with one field whose schema nests `depth`
                         objects deep; the actions it got back, in order
    sample {times}       asks the client's model `times` times during the
                         call; "ok" or "refused" for each, in order
    log {size}           sends an info log message of `size` characters, then
                         one that says "done"; answers "logged"

It also lists a tool under a name no tool can have (with an escape
sequence), which it never answers.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from seed import ask_model, json_text, obj, request_client, serve_stdio


def nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "string", "x-nested": schema}
    return schema


async def list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    times = {"type": "integer"}
    ask = obj({"times": times, "depth": {"type": "integer"}}, ["times", "depth"])
    sample = obj({"times": times}, ["times"])
    return types.ListToolsResult(
        tools=[
            types.Tool(name="ask", description="Elicits too much.", input_schema=ask),
            types.Tool(name="sample", description="Samples too much.", input_schema=sample),
            types.Tool(name="log", description="Logs too much.", input_schema=obj({"size": times}, ["size"])),
            types.Tool(name="bad\x1b[31mname", description="Named to break a bundle.", input_schema=obj()),
        ]
    )


async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
    raw = dict(ctx.params or {})
    args = raw.get("arguments") or {}
    if params.name == "log":
        for data in ["x" * int(args["size"]), "done"]:
            await ctx.session.send_log_message(level="info", data=data, related_request_id=ctx.request_id)
        return json_text("logged")
    if params.name == "sample":
        said = [await ask_model(ctx, raw, "again", 10) for _ in range(int(args["times"]))]
        return json_text(["ok" if isinstance(answer, str) else "refused" for answer in said])
    form = obj({"name": nested(int(args["depth"]))}, ["name"])
    actions = []
    for _ in range(int(args["times"])):
        request = types.ElicitRequest(params=types.ElicitRequestFormParams(message="Again?", requested_schema=form))
        answer = await request_client(ctx, raw, "ask", request, types.ElicitResult)
        actions.append(answer.action)
    return json_text(actions)


if __name__ == "__main__":
    anyio.run(serve_stdio, Server("rlp-hostile", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool))
