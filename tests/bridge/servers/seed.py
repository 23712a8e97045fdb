"""The bridge tests' own MCP server, written with the official Python SDK.

Usage (with the SDK venv's python, see tests/bridge/setup.sh):

    seed.py [--description-file PATH] [--http PORT [--port-file PATH]]

On stdio by default; with `--http PORT`, Streamable HTTP on 127.0.0.1:PORT at
path /mcp (PORT 0 picks a free port). Once listening it prints
`seed: listening on http://127.0.0.1:PORT/mcp` to stderr and, with
`--port-file`, writes PORT to that file (written whole: a file that exists is
complete). Nothing but the protocol goes to stdout; errors go to stderr.

`--description-file PATH`: the description of `echo_meta` is read from PATH at
every tools/list (so a test can change a tool definition between calls); the
default description is used while the file does not exist.

Tools (each result a CallToolResult; JSON texts are compact, keys in the order
given):

    echo_meta {text}        one text: {"text": text, "meta": the request's _meta
                            as received, or null}
    structured {n}          structuredContent {"doubled": 2n} + one text of it;
                            declares an outputSchema
    outcome {kind}          one text holding an outcome envelope, per kind:
                            success, error, transient, success_but_is_error
                            (success's text with isError), two_contents (success's
                            text, then "more"), plain_text ("hello, world")
    needs_input {topic}     success once _meta["dev.runloop/tool"]["answers"] (or
                            "computer.jp/tool") has "colour", else a needs_input
                            envelope asking for it
    flaky {key}             a transient error the first 2 calls with a key, then
                            success {"calls": count} (counted in process memory)
    ask {}                  elicitation/create during the call, then
                            {"action": ..., "content": ... or null}
    sample {prompt}         sampling/createMessage during the call, then
                            {"sampled": text}; isError "sampling refused: MSG"
                            when the client answers with an error
    roots {}                roots/list during the call, then {"roots": [uri, ...]};
                            isError with the message when the client refuses
    progress {steps}        `steps` progress notifications (i of steps) when the
                            request has a progressToken, then {"done": steps}
    crash {}                the whole process exits (status 3) during the call
    hang {}                 never answers (until cancelled)
    secret_env {name}       {"value": os.environ.get(name)}
    read_file {path}        the file's text; isError with the exception message

The requests to the client (ask, sample, roots) are sent during the call, as a
JSON-RPC request tied to it, on a handshake-era connection (2025-11-25 and
before). A client that speaks the 2026-07-28 revision instead gets an
`input_required` result embedding the request (the multi-round-trip flow that
replaces server-to-client requests there) and retries the call with its answer;
the final result is the same.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import warnings
from collections import Counter
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

# Roots and sampling are deprecated at 2026-07-28; this server still serves
# them on purpose, so the SDK's warnings would only be noise on stderr.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

DEFAULT_ECHO_DESCRIPTION = "Echoes its text and the request's _meta, as JSON text."

OUTCOME_KINDS = ["success", "error", "transient", "success_but_is_error", "two_contents", "plain_text"]
SUCCESS = {"outcome": "success", "result": {"ok": True}}
OUTCOME_TEXTS = {
    "error": {"outcome": "error", "message": "it broke"},
    "transient": {"outcome": "error", "message": "try later", "transient": True, "retry_after_ms": 10},
}
NEEDS_COLOUR = {
    "outcome": "needs_input",
    "questions": [
        {"id": "colour", "text": "Which colour?", "schema": {"type": "string", "enum": ["red", "green"]}}
    ],
}
ANSWER_KEYS = ("dev.runloop/tool", "computer.jp/tool")
FLAKY_FAILURES = 2
ASK_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
STRUCTURED_OUTPUT = {"type": "object", "properties": {"doubled": {"type": "integer"}}, "required": ["doubled"]}


def obj(properties: dict[str, Any] | None = None, required: list[str] | None = None) -> dict[str, Any]:
    """An object input schema."""
    schema: dict[str, Any] = {"type": "object", "properties": properties or {}}
    if required:
        schema["required"] = required
    return schema


def tool_list(description_file: str | None) -> list[types.Tool]:
    """The tools, `echo_meta`'s description read now from `description_file`."""
    echo_description = DEFAULT_ECHO_DESCRIPTION
    if description_file is not None:
        try:
            with open(description_file) as f:
                echo_description = f.read()
        except FileNotFoundError:
            pass
    string = {"type": "string"}
    integer = {"type": "integer"}
    return [
        types.Tool(name="echo_meta", description=echo_description, input_schema=obj({"text": string}, ["text"])),
        types.Tool(
            name="structured",
            description="Doubles n, as structuredContent (and its JSON as text).",
            input_schema=obj({"n": integer}, ["n"]),
            output_schema=STRUCTURED_OUTPUT,
        ),
        types.Tool(
            name="outcome",
            description="Returns the outcome envelope of the given kind.",
            input_schema=obj({"kind": {"type": "string", "enum": OUTCOME_KINDS}}, ["kind"]),
        ),
        types.Tool(
            name="needs_input",
            description="Asks which colour, unless the answer came in _meta.",
            input_schema=obj({"topic": string}, ["topic"]),
        ),
        types.Tool(
            name="flaky",
            description="Fails transiently the first two calls with a key, then succeeds.",
            input_schema=obj({"key": string}, ["key"]),
        ),
        types.Tool(name="ask", description="Elicits a name from the user during the call.", input_schema=obj()),
        types.Tool(
            name="sample",
            description="Asks the client's model to complete the prompt during the call.",
            input_schema=obj({"prompt": string}, ["prompt"]),
        ),
        types.Tool(name="roots", description="Lists the client's roots during the call.", input_schema=obj()),
        types.Tool(
            name="progress",
            description="Reports progress `steps` times, then returns.",
            input_schema=obj({"steps": integer}, ["steps"]),
        ),
        types.Tool(
            name="crash",
            description="Exits the server process during the call.",
            input_schema=obj(),
            annotations=types.ToolAnnotations(destructive_hint=True),
        ),
        types.Tool(name="hang", description="Never answers.", input_schema=obj()),
        types.Tool(
            name="secret_env",
            description="Returns the value of an environment variable of the server.",
            input_schema=obj({"name": string}, ["name"]),
        ),
        types.Tool(
            name="read_file",
            description="Returns the text of a file.",
            input_schema=obj({"path": string}, ["path"]),
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
    ]


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def text(value: str, *, is_error: bool = False) -> types.CallToolResult:
    """A result of one text content."""
    return types.CallToolResult(content=[types.TextContent(text=value)], is_error=is_error)


def json_text(value: Any, *, is_error: bool = False) -> types.CallToolResult:
    """A result of one text content holding `value` as JSON."""
    return text(dumps(value), is_error=is_error)


class Seed:
    def __init__(self, description_file: str | None) -> None:
        self.description_file = description_file
        self.flaky_calls: Counter[str] = Counter()

    async def list_tools(
        self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list(self.description_file))

    async def call_tool(
        self, ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        raw = dict(ctx.params or {})
        args = raw.get("arguments") or {}
        name = params.name
        if name == "echo_meta":
            return json_text({"text": args.get("text"), "meta": raw.get("_meta")})
        if name == "structured":
            doubled = {"doubled": 2 * int(args["n"])}
            return types.CallToolResult(content=[types.TextContent(text=dumps(doubled))], structured_content=doubled)
        if name == "outcome":
            return outcome(args.get("kind"))
        if name == "needs_input":
            return needs_input(raw.get("_meta"), args.get("topic"))
        if name == "flaky":
            key = str(args.get("key"))
            self.flaky_calls[key] += 1
            count = self.flaky_calls[key]
            if count <= FLAKY_FAILURES:
                return json_text({"outcome": "error", "message": "busy", "transient": True, "retry_after_ms": 5})
            return json_text({"outcome": "success", "result": {"calls": count}})
        if name == "ask":
            return await ask(ctx, raw)
        if name == "sample":
            return await sample(ctx, raw, str(args.get("prompt", "")))
        if name == "roots":
            return await roots(ctx, raw)
        if name == "progress":
            steps = int(args.get("steps", 0))
            for i in range(1, steps + 1):
                # A no-op when the request carries no progressToken.
                await ctx.session.report_progress(i, steps)
            return json_text({"done": steps})
        if name == "crash":
            sys.stderr.write("seed: crash tool called, exiting with status 3\n")
            sys.stderr.flush()
            os._exit(3)
        if name == "hang":
            await anyio.sleep_forever()
        if name == "secret_env":
            return json_text({"value": os.environ.get(str(args.get("name")))})
        if name == "read_file":
            try:
                with open(str(args.get("path"))) as f:
                    return text(f.read())
            except Exception as error:  # the test reads the message
                return text(str(error), is_error=True)
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")


def outcome(kind: Any) -> types.CallToolResult:
    if kind == "success":
        return json_text(SUCCESS)
    if kind in OUTCOME_TEXTS:
        return json_text(OUTCOME_TEXTS[kind])
    if kind == "success_but_is_error":
        return json_text(SUCCESS, is_error=True)
    if kind == "two_contents":
        return types.CallToolResult(content=[types.TextContent(text=dumps(SUCCESS)), types.TextContent(text="more")])
    if kind == "plain_text":
        return text("hello, world")
    raise MCPError(code=types.INVALID_PARAMS, message=f"unknown kind {kind!r}")


def needs_input(meta: Any, topic: Any) -> types.CallToolResult:
    answers: Any = None
    if isinstance(meta, dict):
        for key in ANSWER_KEYS:
            entry = meta.get(key)
            if isinstance(entry, dict) and isinstance(entry.get("answers"), dict):
                answers = entry["answers"]
                break
    if isinstance(answers, dict) and "colour" in answers:
        return json_text({"outcome": "success", "result": {"topic": topic, "colour": answers["colour"]}})
    return json_text(NEEDS_COLOUR)


class ClientRefused(Exception):
    """The client answered a request of the server with an error."""


async def request_client(
    ctx: ServerRequestContext, raw: dict[str, Any], key: str, request: types.ServerRequest, result_type: Any
) -> Any:
    """Sends `request` to the client during this call and returns its answer.

    On a handshake-era connection: a JSON-RPC request tied to this call (so on
    Streamable HTTP it rides the call's response stream). On 2026-07-28: the
    answer the client sent in the call's `inputResponses` under `key`, or, when
    it sent none, an `InputRequiredResult` asking for it (returned as is).
    Raises `ClientRefused` when the client answers with an error.
    """
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        responses = raw.get("inputResponses") or {}
        if key in responses:
            return result_type.model_validate(responses[key], by_name=False)
        return types.InputRequiredResult(input_requests={key: request})
    try:
        return await ctx.session.send_request(
            request, result_type, metadata=ServerMessageMetadata(related_request_id=ctx.request_id)
        )
    except MCPError as error:
        raise ClientRefused(error.message) from error


async def ask(ctx: ServerRequestContext, raw: dict[str, Any]) -> types.CallToolResult | types.InputRequiredResult:
    request = types.ElicitRequest(
        params=types.ElicitRequestFormParams(message="Your name?", requested_schema=ASK_SCHEMA)
    )
    try:
        answer = await request_client(ctx, raw, "ask", request, types.ElicitResult)
    except ClientRefused as error:
        return text(f"elicitation refused: {error}", is_error=True)
    if isinstance(answer, types.InputRequiredResult):
        return answer
    return json_text({"action": answer.action, "content": answer.content})


async def ask_model(
    ctx: ServerRequestContext, raw: dict[str, Any], prompt: str, max_tokens: int
) -> str | types.CallToolResult | types.InputRequiredResult:
    """The text the client's model completes `prompt` with (sampling/createMessage
    during this call), or the result that ends the call instead: an error when
    the client refuses, the input request on 2026-07-28."""
    request = types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(
            messages=[types.SamplingMessage(role="user", content=types.TextContent(text=prompt))],
            max_tokens=max_tokens,
        )
    )
    try:
        answer = await request_client(ctx, raw, "sample", request, types.CreateMessageResult)
    except ClientRefused as error:
        return text(f"sampling refused: {error}", is_error=True)
    if isinstance(answer, types.InputRequiredResult):
        return answer
    blocks = answer.content if isinstance(answer.content, list) else [answer.content]
    return "".join(block.text for block in blocks if isinstance(block, types.TextContent))


async def sample(
    ctx: ServerRequestContext, raw: dict[str, Any], prompt: str
) -> types.CallToolResult | types.InputRequiredResult:
    sampled = await ask_model(ctx, raw, prompt, 50)
    return json_text({"sampled": sampled}) if isinstance(sampled, str) else sampled


async def roots(ctx: ServerRequestContext, raw: dict[str, Any]) -> types.CallToolResult | types.InputRequiredResult:
    try:
        answer = await request_client(ctx, raw, "roots", types.ListRootsRequest(), types.ListRootsResult)
    except ClientRefused as error:
        return text(str(error), is_error=True)
    if isinstance(answer, types.InputRequiredResult):
        return answer
    return json_text({"roots": [str(root.uri) for root in answer.roots]})


def build_server(description_file: str | None) -> Server:
    seed = Seed(description_file)
    return Server("rlp-bridge-seed", version="1.0.0", on_list_tools=seed.list_tools, on_call_tool=seed.call_tool)


async def serve_stdio(server: Server) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(server: Server, port: int, port_file: str | None) -> None:
    import uvicorn

    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    bound = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", log_config=None)
    web = uvicorn.Server(config)

    async def announce() -> None:
        while not web.started:
            await anyio.sleep(0.01)
        if port_file is not None:
            partial = f"{port_file}.partial.{os.getpid()}"
            with open(partial, "w") as f:
                f.write(f"{bound}\n")
            os.replace(partial, port_file)
        sys.stderr.write(f"seed: listening on http://127.0.0.1:{bound}/mcp\n")
        sys.stderr.flush()

    async with anyio.create_task_group() as group:
        group.start_soon(announce)
        await web.serve(sockets=[sock])
        group.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description="The bridge tests' MCP server.")
    parser.add_argument("--description-file", help="file holding the description of echo_meta, read at every tools/list")
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on 127.0.0.1:PORT/mcp")
    parser.add_argument("--port-file", help="with --http, where to write the port once listening")
    parser.add_argument("--counter-file", help="accepted and ignored: flaky counts in process memory")
    options = parser.parse_args()
    server = build_server(options.description_file)
    if options.http is None:
        anyio.run(serve_stdio, server)
    else:
        anyio.run(serve_http, server, options.http, options.port_file)


if __name__ == "__main__":
    main()
