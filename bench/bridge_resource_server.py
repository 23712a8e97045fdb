"""The resource server of bench/bridge.sh: a small MCP server made with the
MCP Python SDK (`mcp.server.mcpserver.MCPServer`), served over Streamable
HTTP (the SDK's defaults: a session per client, answers as SSE) at
http://127.0.0.1:PORT/mcp on a port of its choosing, written to FILE once
the socket listens.

    bridge_resource_server.py --port-file FILE [--size BYTES]

It offers
  - `bench://blob`, a binary resource of BYTES bytes (1 MiB by default:
    a `blob`, base64 on the wire), `application/octet-stream`;
  - `bench://text`, a text resource of BYTES characters (ASCII),
    `text/plain`;
  - the tool `echo` ({"message": str} -> "Echo: <message>"), as the
    everything server's, so that `rlp tools import` has a tool to pin and
    the throughput series have one to call (read-only, as the everything
    server's: rlp asks no confirmation before calling it).
The contents are made once at start; every read returns the same bytes.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations


def make_server(size: int) -> MCPServer:
    server = MCPServer("bench-resources", version="1.0.0", log_level="WARNING")
    blob = bytes(i % 251 for i in range(size))
    text = ("0123456789abcdef" * (size // 16 + 1))[:size]

    @server.resource("bench://blob", name="blob", mime_type="application/octet-stream")
    def read_blob() -> bytes:
        """BYTES bytes of binary content."""
        return blob

    @server.resource("bench://text", name="text", mime_type="text/plain")
    def read_text() -> str:
        """BYTES characters of text."""
        return text

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
    def echo(message: str) -> str:
        """Echoes back the input."""
        return f"Echo: {message}"

    return server


async def serve(options: argparse.Namespace) -> None:
    server = make_server(options.size)
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on accepted sockets whose
    # proto is IPPROTO_TCP (proto 0 would leave Nagle on, and the end of each
    # SSE response would wait 40 ms for the client's delayed acknowledgement).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    port = listener.getsockname()[1]
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                            timeout_keep_alive=600)
    partial = f"{options.port_file}.partial"
    with open(partial, "w") as out:
        out.write(f"{port}\n")
    os.replace(partial, options.port_file)
    await uvicorn.Server(config).serve(sockets=[listener])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port-file", required=True, help="write the port here once listening")
    parser.add_argument("--size", type=int, default=1 << 20, help="bytes of each resource (default 1 MiB)")
    options = parser.parse_args()
    logging.getLogger("mcp").setLevel(logging.WARNING)
    anyio.run(serve, options)


if __name__ == "__main__":
    main()
