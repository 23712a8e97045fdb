"""Calls one tool of an MCP server as a client that samples, and reports it.

Usage: SDK_PYTHON sampling_client.py < request.json     (the bridge tests)

The request (JSON on stdin):

    {
      "transport": {"kind": "stdio", "command": ..., "args": [...], "env": {...},
                    "cwd": ..., "stderr": "file for its stderr"},
      "tool": ..., "arguments": {...},
      "reply": "the text the client's model answers"
    }

The transport is the one tests/mcp/drive.py takes (stdio only). The client
speaks the initialize handshake (2025-11-25), declares sampling and answers
every sampling/createMessage request with `reply` as an assistant text. It
prints one JSON document: the call's result as sent (or its JSON-RPC error's
code and message) and the params of each sampling request it was sent. A
failure outside the call (cannot connect) is reported as `fatal` with exit
status 1.
"""

import json
import sys
import traceback
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError


def wire(model: Any) -> Any:
    """A model as it went over the wire (fields not sent left out)."""
    return model.model_dump(by_alias=True, mode="json", exclude_unset=True)


async def run(request: dict, report: dict) -> None:
    spec = request["transport"]
    params = StdioServerParameters(
        command=spec["command"], args=spec.get("args", []), env=spec.get("env"), cwd=spec.get("cwd")
    )
    errlog = open(spec["stderr"], "w") if spec.get("stderr") else sys.stderr
    requests: list[Any] = []
    report["sampling_requests"] = requests

    async def sample(_context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        requests.append(wire(params))
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text=request["reply"]), model="test-model"
        )

    async with Client(stdio_client(params, errlog=errlog), mode="legacy", sampling_callback=sample, cache=None) as client:
        try:
            result = await client.call_tool(request["tool"], request.get("arguments"))
            report["result"] = wire(result)
        except MCPError as error:
            report["error"] = {"code": error.code, "message": error.message}


def main() -> int:
    request = json.load(sys.stdin)
    report: dict[str, Any] = {}
    code = 0
    try:
        anyio.run(run, request, report)
    except BaseException as error:  # reported, never lost: the test shows it
        report["fatal"] = "".join(traceback.format_exception(error))
        code = 1
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
