"""Calls one tool of an MCP server N times over one connection, and times it.

The baseline of the bridge benchmark: what the same calls cost straight from
the official Python SDK, with no rlp in between. Run with SDK_PYTHON from
ROOT/servers.env (tests/bridge/setup.sh):

    direct_client.py --stdio [--mode MODE] --tool NAME [--args JSON] [--calls N] -- CMD ARG...
    direct_client.py --http URL [--mode MODE] --tool NAME [--args JSON] [--calls N]

It connects once (not timed), then makes the N tools/call requests one after
the other and prints one line:

    calls=N total_s=SECONDS per_call_us=MICROSECONDS

--mode is the SDK's connect mode: `legacy` (the initialize handshake,
2025-11-25; the default), `auto` (server/discover, falling back to the
handshake) or a modern version such as `2026-07-28`. A call that fails, or
whose result has isError, stops the run with exit status 1, the error on
stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


async def run(options: argparse.Namespace, command: list[str], arguments: dict[str, Any]) -> str:
    if options.stdio:
        transport = stdio_client(StdioServerParameters(command=command[0], args=command[1:]))
    else:
        transport = streamable_http_client(options.http)
    async with Client(transport, mode=options.mode, cache=None) as client:
        start = time.perf_counter()
        for i in range(options.calls):
            result = await client.call_tool(options.tool, arguments)
            if result.is_error:
                dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
                raise RuntimeError(f"call {i + 1} of {options.tool} returned isError: {json.dumps(dumped)[:1000]}")
        total = time.perf_counter() - start
    per_call_us = total / options.calls * 1e6 if options.calls else 0.0
    return f"calls={options.calls} total_s={total:.6f} per_call_us={per_call_us:.1f}"


def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside `error`'s exception groups (or `error` itself)."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def main() -> int:
    argv = sys.argv[1:]
    command: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--stdio", action="store_true", help="start the server given after `--` and speak over its stdio")
    where.add_argument("--http", metavar="URL", help="the server's Streamable HTTP endpoint")
    parser.add_argument("--tool", required=True, help="the tool to call")
    parser.add_argument("--args", default="{}", help="the call's arguments, a JSON object (default {})")
    parser.add_argument("--calls", type=int, default=1, help="how many calls to make (default 1)")
    parser.add_argument("--mode", default="legacy", help="the SDK's connect mode (default legacy)")
    options = parser.parse_args(argv)
    if options.stdio and not command:
        parser.error("--stdio needs the server's command after --")
    if options.http and command:
        parser.error("a command after -- goes with --stdio, not --http")
    if options.calls < 1:
        parser.error("--calls must be at least 1")
    arguments = json.loads(options.args)
    if not isinstance(arguments, dict):
        parser.error("--args must be a JSON object")
    try:
        line = anyio.run(run, options, command, arguments)
    except BaseException as error:
        for leaf in leaves(error):
            sys.stderr.write(f"direct_client.py: {type(leaf).__name__}: {leaf}\n")
        return 1
    print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
