"""An MCP server of the tools the MCP conformance suite's tool scenarios call
(@modelcontextprotocol/conformance 0.1.16, `conformance server`), written with
the official Python SDK from each scenario's stated requirements.

Usage (with the SDK venv's python, see tests/bridge/setup.sh):

    conformance_tools.py --http PORT [--port-file PATH]

Streamable HTTP on 127.0.0.1:PORT at /mcp, as seed.py serves it. The gateway
test (tests/conformance/gateway.sh) runs the suite against this server
directly and through `rlp serve`, and compares.

Tools: test_simple_text, test_image_content, test_audio_content,
test_embedded_resource, test_multiple_content_types, test_tool_with_logging
(three info log messages ~50 ms apart), test_tool_with_progress (0, 50, 100 of
100), test_error_handling (isError), test_sampling {prompt},
test_elicitation {message}, test_elicitation_sep1034_defaults (a form with a
default for each primitive type), test_elicitation_sep1330_enums (a form with
the five enum shapes of SEP-1330).
"""

from __future__ import annotations

import argparse
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from seed import ClientRefused, ask_model, obj, request_client, serve_http, text

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

# A 1x1 PNG and a 44-byte silent WAV header, base64.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA="

DEFAULTS_SCHEMA = obj(
    {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
    }
)
ENUMS_SCHEMA = obj(
    {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    }
)
USER_SCHEMA = obj(
    {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    ["username", "email"],
)


def tool(name: str, description: str, schema: dict[str, Any] | None = None) -> types.Tool:
    return types.Tool(name=name, description=description, input_schema=schema or obj())


TOOLS = [
    tool("test_simple_text", "Returns one text block."),
    tool("test_image_content", "Returns one PNG image block."),
    tool("test_audio_content", "Returns one WAV audio block."),
    tool("test_embedded_resource", "Returns one embedded text resource."),
    tool("test_multiple_content_types", "Returns text, an image and an embedded resource."),
    tool("test_tool_with_logging", "Sends three info log messages while it runs."),
    tool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100."),
    tool("test_error_handling", "Always fails (isError)."),
    tool("test_sampling", "Asks the client's model.", obj({"prompt": {"type": "string"}}, ["prompt"])),
    tool("test_elicitation", "Asks the user for a name and email.", obj({"message": {"type": "string"}}, ["message"])),
    tool("test_elicitation_sep1034_defaults", "Asks a form with a default for each primitive type."),
    tool("test_elicitation_sep1330_enums", "Asks a form with the five enum shapes."),
]


def image() -> types.ImageContent:
    return types.ImageContent(data=PNG, mime_type="image/png")


def resource() -> types.EmbeddedResource:
    contents = types.TextResourceContents(uri="test://embedded", mime_type="text/plain", text="embedded text")
    return types.EmbeddedResource(resource=contents)


async def elicit(ctx: ServerRequestContext, raw: dict[str, Any], message: str, schema: dict[str, Any]) -> Any:
    request = types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))
    try:
        answer = await request_client(ctx, raw, "elicit", request, types.ElicitResult)
    except ClientRefused as error:
        return text(f"elicitation refused: {error}", is_error=True)
    if isinstance(answer, types.InputRequiredResult):
        return answer
    return text(f"Elicitation completed: action={answer.action}, content={answer.content}")


async def call_tool(
    ctx: ServerRequestContext, params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    raw = dict(ctx.params or {})
    args = raw.get("arguments") or {}
    name = params.name
    if name == "test_simple_text":
        return text("This is a simple text response for testing.")
    if name == "test_image_content":
        return types.CallToolResult(content=[image()])
    if name == "test_audio_content":
        return types.CallToolResult(content=[types.AudioContent(data=WAV, mime_type="audio/wav")])
    if name == "test_embedded_resource":
        return types.CallToolResult(content=[resource()])
    if name == "test_multiple_content_types":
        return types.CallToolResult(content=[types.TextContent(text="Multiple content types:"), image(), resource()])
    if name == "test_tool_with_logging":
        for i, said in enumerate(["Tool execution started", "Tool processing data", "Tool execution completed"]):
            if i:
                await anyio.sleep(0.05)
            await ctx.session.send_log_message(level="info", data=said, related_request_id=ctx.request_id)
        return text("Logging done")
    if name == "test_tool_with_progress":
        for i, done in enumerate([0, 50, 100]):
            if i:
                await anyio.sleep(0.05)
            await ctx.session.report_progress(done, 100)
        return text("Progress done")
    if name == "test_error_handling":
        return text("This tool always fails", is_error=True)
    if name == "test_sampling":
        said = await ask_model(ctx, raw, str(args.get("prompt")), 100)
        return text(f"LLM response: {said}") if isinstance(said, str) else said
    if name == "test_elicitation":
        return await elicit(ctx, raw, str(args.get("message")), USER_SCHEMA)
    if name == "test_elicitation_sep1034_defaults":
        return await elicit(ctx, raw, "Please review your information", DEFAULTS_SCHEMA)
    if name == "test_elicitation_sep1330_enums":
        return await elicit(ctx, raw, "Please choose", ENUMS_SCHEMA)
    raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")


async def list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def set_level(ctx: ServerRequestContext, params: types.SetLevelRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


def main() -> None:
    parser = argparse.ArgumentParser(description="The conformance suite's tools, as an MCP server.")
    parser.add_argument("--http", type=int, required=True, metavar="PORT", help="serve on 127.0.0.1:PORT/mcp")
    parser.add_argument("--port-file", help="where to write the port once listening")
    options = parser.parse_args()
    server = Server(
        "rlp-conformance-tools",
        version="1.0.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_set_logging_level=set_level,
    )
    anyio.run(serve_http, server, options.http, options.port_file)


if __name__ == "__main__":
    main()
