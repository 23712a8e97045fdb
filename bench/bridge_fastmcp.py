"""The baseline gateway of bench/bridge.sh: a FastMCP proxy of one MCP server,
made with `fastmcp.server.create_proxy`, nothing else (no policy, no ledger).

    bridge_fastmcp.py [--session fresh|shared] [--http-port-file FILE] --url URL
    bridge_fastmcp.py [--session fresh|shared] [--http-port-file FILE] -- CMD ARG...

The proxied server is a stdio server started as CMD ARG... (FastMCP's
StdioTransport, which keeps its process between sessions) or a Streamable
HTTP server at URL.

--session fresh (the default) hands create_proxy the transport, as FastMCP's
documentation shows: FastMCP then opens a new client session to the server
for each request it proxies. --session shared connects one client first and
hands create_proxy that connected client: every request reuses its session
(FastMCP's fastest setting, which it warns may mix request contexts).

The proxy serves its client over stdio, or with --http-port-file over
Streamable HTTP at http://127.0.0.1:PORT/mcp on a port of its choosing,
written to FILE once the socket listens.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys

import anyio
from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from fastmcp.server import create_proxy


def transport_of(options: argparse.Namespace, command: list[str]):
    if options.url:
        return StreamableHttpTransport(options.url)
    return StdioTransport(command=command[0], args=command[1:], env=dict(os.environ), log_file=sys.stderr)


async def serve(options: argparse.Namespace, command: list[str]) -> None:
    backend = transport_of(options, command)
    if options.session == "shared":
        client = Client(backend)
        async with client:
            await run(create_proxy(client, name="bench-proxy"), options)
    else:
        await run(create_proxy(backend, name="bench-proxy"), options)


async def run(proxy, options: argparse.Namespace) -> None:
    if not options.http_port_file:
        await proxy.run_async(transport="stdio", show_banner=False)
        return
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on accepted sockets whose
    # proto is IPPROTO_TCP (proto 0 would leave Nagle on, and the end of each
    # SSE response would wait 40 ms for the client's delayed acknowledgement).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    port = listener.getsockname()[1]
    partial = f"{options.http_port_file}.partial"
    with open(partial, "w") as out:
        out.write(f"{port}\n")
    os.replace(partial, options.http_port_file)
    await proxy.run_async(
        transport="http", show_banner=False, host="127.0.0.1", port=port, path="/mcp", log_level="warning", sockets=[listener]
    )


def main() -> None:
    argv = sys.argv[1:]
    command: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="the proxied server's Streamable HTTP endpoint")
    parser.add_argument("--session", choices=["fresh", "shared"], default="fresh")
    parser.add_argument("--http-port-file", help="serve Streamable HTTP on 127.0.0.1 and write the port here")
    options = parser.parse_args(argv)
    if bool(options.url) == bool(command):
        parser.error("give either --url or a stdio server's command after --")
    logging.getLogger("fastmcp").setLevel(logging.WARNING)
    anyio.run(serve, options, command)


if __name__ == "__main__":
    main()
