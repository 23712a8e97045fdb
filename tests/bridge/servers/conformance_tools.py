"""An MCP server of what the MCP conformance suite's server scenarios call
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
the five enum shapes of SEP-1330), json_schema_2020_12_tool {name, address}
(an input schema with $schema, $defs, $ref and additionalProperties; echoes
its arguments).

Resources: test://static-text (text/plain), test://static-binary (a PNG,
image/png blob), test://watched-resource (text/plain; subscribable). Resource
template test://template/{id}/data (application/json text naming the id).
resources/subscribe and resources/unsubscribe track each session's URIs (any
readable URI); subscribing sends one notifications/resources/updated for the
URI on the subscribe request's stream, before its (empty) result.

Prompts: test_simple_prompt, test_prompt_with_arguments {arg1, arg2},
test_prompt_with_embedded_resource {resourceUri}, test_prompt_with_image.

completion/complete: prefix matches for the arguments of
test_prompt_with_arguments and the id of the resource template.
logging/setLevel: accepted (the tools' log messages are sent at info).

Capabilities: tools, resources and prompts declare listChanged (their lists
never change, so no such notification is sent); resources declare subscribe.
"""

from __future__ import annotations

import argparse
import re
import warnings
from collections import defaultdict
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from seed import ClientRefused, ask_model, dumps, obj, request_client, serve_http, text

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
JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}

STATIC_TEXT = "test://static-text"
STATIC_BINARY = "test://static-binary"
WATCHED = "test://watched-resource"
TEMPLATE = "test://template/{id}/data"
TEMPLATE_URI = re.compile(r"test://template/([^/]+)/data")

# The values completion/complete offers, by (reference, argument name); a
# reference is a prompt's name or a resource template's URI template.
COMPLETIONS: dict[tuple[str, str], list[str]] = {
    ("test_prompt_with_arguments", "arg1"): ["hello", "help", "paris", "park", "party"],
    ("test_prompt_with_arguments", "arg2"): ["word", "work", "world"],
    (TEMPLATE, "id"): ["1", "2", "3", "123"],
}
MAX_COMPLETIONS = 100


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
    tool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", JSON_SCHEMA_2020_12),
]

RESOURCES = [
    types.Resource(
        uri=STATIC_TEXT,
        name="static-text",
        description="A fixed text resource.",
        mime_type="text/plain",
    ),
    types.Resource(
        uri=STATIC_BINARY,
        name="static-binary",
        description="A fixed binary resource: a 1x1 PNG.",
        mime_type="image/png",
    ),
    types.Resource(
        uri=WATCHED,
        name="watched-resource",
        description="A text resource to subscribe to for update notifications.",
        mime_type="text/plain",
    ),
]

TEMPLATES = [
    types.ResourceTemplate(
        uri_template=TEMPLATE,
        name="template-data",
        description="JSON data for the id in the URI.",
        mime_type="application/json",
    )
]


def argument(name: str, description: str) -> types.PromptArgument:
    """A required prompt argument."""
    return types.PromptArgument(name=name, description=description, required=True)


PROMPTS = [
    types.Prompt(name="test_simple_prompt", description="A prompt without arguments."),
    types.Prompt(
        name="test_prompt_with_arguments",
        description="A prompt with two arguments.",
        arguments=[argument("arg1", "First test argument"), argument("arg2", "Second test argument")],
    ),
    types.Prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt embedding a resource.",
        arguments=[argument("resourceUri", "URI of the resource to embed")],
    ),
    types.Prompt(name="test_prompt_with_image", description="A prompt with an image."),
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
    if name == "json_schema_2020_12_tool":
        return text(f"Received: {dumps(args)}")
    raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")


async def list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def set_level(ctx: ServerRequestContext, params: types.SetLevelRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


def text_contents(uri: str, mime_type: str, value: str) -> types.TextResourceContents:
    return types.TextResourceContents(uri=uri, mime_type=mime_type, text=value)


def read(uri: str) -> types.TextResourceContents | types.BlobResourceContents:
    """The contents of the resource at `uri`; an invalid-params error when there is none."""
    if uri == STATIC_TEXT:
        return text_contents(uri, "text/plain", "This is the content of the static text resource.")
    if uri == STATIC_BINARY:
        return types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG)
    if uri == WATCHED:
        return text_contents(uri, "text/plain", "This resource is watched: subscribe to hear of its updates.")
    match = TEMPLATE_URI.fullmatch(uri)
    if match:
        ident = match.group(1)
        data = {"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"}
        return text_contents(uri, "application/json", dumps(data))
    raise MCPError(code=types.INVALID_PARAMS, message=f"Resource not found: {uri}")


async def list_resources(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=RESOURCES)


async def list_templates(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(resource_templates=TEMPLATES)


async def read_resource(ctx: ServerRequestContext, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    return types.ReadResourceResult(contents=[read(params.uri)])


class Subscriptions:
    """The resource URIs each session subscribed to, by Mcp-Session-Id."""

    def __init__(self) -> None:
        self.uris: defaultdict[str, set[str]] = defaultdict(set)

    @staticmethod
    def session(ctx: ServerRequestContext) -> str:
        """The session of a request: its Mcp-Session-Id header ("" without one)."""
        headers = getattr(ctx.request, "headers", None)
        return (headers.get("mcp-session-id") if headers is not None else None) or ""

    async def subscribe(self, ctx: ServerRequestContext, params: types.SubscribeRequestParams) -> types.EmptyResult:
        """Subscribes the session to a readable URI, then tells it the resource was updated
        (on the subscribe request's stream, so it is delivered whether or not the client
        listens on a standalone stream)."""
        read(params.uri)
        self.uris[self.session(ctx)].add(params.uri)
        notice = types.ResourceUpdatedNotification(params=types.ResourceUpdatedNotificationParams(uri=params.uri))
        await ctx.session.send_notification(notice, related_request_id=ctx.request_id)
        return types.EmptyResult()

    async def unsubscribe(self, ctx: ServerRequestContext, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        """Forgets the session's subscription to the URI (none is not an error)."""
        self.uris[self.session(ctx)].discard(params.uri)
        return types.EmptyResult()


def user(content: types.ContentBlock) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=content)


def required(arguments: dict[str, str], name: str) -> str:
    """A required prompt argument's value; an invalid-params error when it is missing."""
    if name not in arguments:
        raise MCPError(code=types.INVALID_PARAMS, message=f"Missing required argument: {name}")
    return arguments[name]


async def get_prompt(ctx: ServerRequestContext, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    name = params.name
    args = params.arguments or {}
    if name == "test_simple_prompt":
        return types.GetPromptResult(messages=[user(types.TextContent(text="This is a simple prompt for testing."))])
    if name == "test_prompt_with_arguments":
        said = f"Prompt with arguments: arg1='{required(args, 'arg1')}', arg2='{required(args, 'arg2')}'"
        return types.GetPromptResult(messages=[user(types.TextContent(text=said))])
    if name == "test_prompt_with_embedded_resource":
        contents = text_contents(required(args, "resourceUri"), "text/plain", "Embedded resource content for testing.")
        return types.GetPromptResult(
            messages=[
                user(types.EmbeddedResource(resource=contents)),
                user(types.TextContent(text="Please process the embedded resource above.")),
            ]
        )
    if name == "test_prompt_with_image":
        return types.GetPromptResult(
            messages=[user(image()), user(types.TextContent(text="Please analyze the image above."))]
        )
    raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {name}")


async def list_prompts(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=PROMPTS)


async def complete(ctx: ServerRequestContext, params: types.CompleteRequestParams) -> types.CompleteResult:
    """The known values of the argument that start with what was typed (case-insensitive)."""
    ref = params.ref
    if isinstance(ref, types.PromptReference):
        key = ref.name
        if key not in {prompt.name for prompt in PROMPTS}:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {key}")
    else:
        key = ref.uri
        if key not in {template.uri_template for template in TEMPLATES}:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown resource template: {key}")
    typed = params.argument.value.lower()
    values = [value for value in COMPLETIONS.get((key, params.argument.name), []) if value.lower().startswith(typed)]
    return types.CompleteResult(
        completion=types.Completion(
            values=values[:MAX_COMPLETIONS], total=len(values), has_more=len(values) > MAX_COMPLETIONS
        )
    )


class ConformanceServer(Server[Any]):
    """A `Server` whose tools, resources and prompts declare listChanged."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        changed = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
        return super().create_initialization_options(
            notification_options or changed, experimental_capabilities, extensions
        )


def main() -> None:
    parser = argparse.ArgumentParser(description="What the conformance suite's server scenarios call, over MCP.")
    parser.add_argument("--http", type=int, required=True, metavar="PORT", help="serve on 127.0.0.1:PORT/mcp")
    parser.add_argument("--port-file", help="where to write the port once listening")
    options = parser.parse_args()
    subscriptions = Subscriptions()
    server = ConformanceServer(
        "rlp-conformance-tools",
        version="1.0.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscriptions.subscribe,
        on_unsubscribe_resource=subscriptions.unsubscribe,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
        on_set_logging_level=set_level,
    )
    anyio.run(serve_http, server, options.http, options.port_file)


if __name__ == "__main__":
    main()
