"""Proves each MCP server of the bridge tests starts and answers.

Usage: SDK_PYTHON check.py ROOT/servers.env     (run by tests/bridge/setup.sh)

Connects to every server that servers.env names, with the official Python SDK
and the initialize handshake: the reference filesystem, memory and everything
servers from npm, the time server from PyPI, and the tests' own seed.py over
stdio and over Streamable HTTP. For each: initialize, tools/list (which must
hold the tools named below), and one harmless tools/call. Prints one line per
server that answers; any that does not is named on stderr with what went wrong
and the tail of its stderr, and the exit status is 1.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client

# A guard against a hang, not a timing assertion: a cold Node.js or Python
# start on a busy 2-core machine takes seconds.
PATIENCE_S = 90

SEED_TOOLS = {
    "echo_meta", "structured", "outcome", "needs_input", "flaky", "ask", "sample", "roots",
    "progress", "crash", "hang", "secret_env", "read_file",
}  # fmt: skip


def read_env(path: str) -> dict[str, str]:
    """The KEY=VALUE lines of servers.env."""
    env: dict[str, str] = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, value = line.partition("=")
                env[key] = value
    return env


def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside `error`'s exception groups (or `error` itself)."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


class Check:
    """One server: how to reach it, which tools it must list, one call to make."""

    def __init__(
        self,
        name: str,
        tools: set[str],
        call: tuple[str, dict[str, Any]],
        expect: Callable[[str], bool],
        command: list[str] | None = None,
        env: dict[str, str] | None = None,
        url: str | None = None,
    ) -> None:
        self.name, self.tools, self.call, self.expect = name, tools, call, expect
        self.command, self.env, self.url = command, env, url


async def probe(check: Check, errlog) -> str:
    """Connects, lists and calls; returns a one-line summary or raises."""
    if check.command is not None:
        params = StdioServerParameters(
            command=check.command[0], args=check.command[1:], env={**get_default_environment(), **(check.env or {})}
        )
        transport = stdio_client(params, errlog=errlog)
    else:
        transport = streamable_http_client(check.url)
    with anyio.fail_after(PATIENCE_S):
        async with Client(transport, mode="legacy", cache=None) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            missing = check.tools - listed
            if missing:
                raise AssertionError(f"tools/list lacks {sorted(missing)}; it has {sorted(listed)}")
            tool, arguments = check.call
            result = await client.call_tool(tool, arguments)
            answer = text_of(result)
            if result.is_error or not check.expect(answer):
                raise AssertionError(f"tools/call {tool} answered isError={result.is_error}: {answer[:500]}")
            info = client.server_info
            server = f"{info.name} {info.version}" if info is not None else "?"
            return f"{server}, protocol {client.protocol_version}, {len(listed)} tools, {tool} ok"


def start_seed_http(env: dict[str, str], work: str, errlog) -> tuple[subprocess.Popen, str]:
    """seed.py on Streamable HTTP at a port of its choosing; the process and its URL."""
    port_file = os.path.join(work, "seed.port")
    process = subprocess.Popen(
        [env["SDK_PYTHON"], os.path.join(env["SERVERS_DIR"], "seed.py"), "--http", "0", "--port-file", port_file],
        stdin=subprocess.DEVNULL,
        stdout=errlog,
        stderr=errlog,
    )
    deadline = time.monotonic() + PATIENCE_S
    while not os.path.exists(port_file):
        if process.poll() is not None:
            raise RuntimeError(f"seed.py --http exited with status {process.returncode} before listening")
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"seed.py --http did not listen within {PATIENCE_S} s")
        time.sleep(0.02)
    with open(port_file) as f:
        port = f.read().strip()
    return process, f"http://127.0.0.1:{port}/mcp"


def main() -> int:
    env = read_env(sys.argv[1])
    work = tempfile.mkdtemp(prefix="bridge-check-")
    try:
        return check_all(env, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def check_all(env: dict[str, str], work: str) -> int:
    node = env["NODE"]
    seed = os.path.join(env["SERVERS_DIR"], "seed.py")
    echo_ok = lambda answer: json.loads(answer) == {"text": "check", "meta": None}  # noqa: E731
    checks = [
        Check(
            "filesystem (npm @modelcontextprotocol/server-filesystem)",
            {"read_text_file", "list_directory", "list_allowed_directories"},
            ("list_allowed_directories", {}),
            lambda answer: os.path.realpath(work) in answer,
            command=[node, env["FILESYSTEM_JS"], work],
        ),
        Check(
            "memory (npm @modelcontextprotocol/server-memory)",
            {"create_entities", "read_graph"},
            ("read_graph", {}),
            lambda answer: "entities" in answer,
            command=[node, env["MEMORY_JS"]],
            # Else it keeps its graph inside its own package folder.
            env={"MEMORY_FILE_PATH": os.path.join(work, "memory.jsonl")},
        ),
        Check(
            "everything (npm @modelcontextprotocol/server-everything)",
            {"echo"},
            ("echo", {"message": "check"}),
            lambda answer: "check" in answer,
            command=[node, env["EVERYTHING_JS"]],
        ),
        Check(
            "time (PyPI mcp-server-time)",
            {"get_current_time", "convert_time"},
            ("get_current_time", {"timezone": "UTC"}),
            lambda answer: "UTC" in answer,
            command=[env["TIME_PYTHON"], "-m", "mcp_server_time"],
        ),
        Check("seed.py on stdio", SEED_TOOLS, ("echo_meta", {"text": "check"}), echo_ok, command=[env["SDK_PYTHON"], seed]),
    ]
    failed = []
    log_path = os.path.join(work, "server.stderr")
    http_seed: subprocess.Popen | None = None
    for check in checks + ["seed.py on Streamable HTTP"]:
        name = check if isinstance(check, str) else check.name
        with open(log_path, "w") as errlog:
            try:
                if isinstance(check, str):
                    http_seed, url = start_seed_http(env, work, errlog)
                    check = Check(name, SEED_TOOLS, ("echo_meta", {"text": "check"}), echo_ok, url=url)
                summary = anyio.run(probe, check, errlog)
                print(f"ok {name}: {summary}", flush=True)
            except BaseException as error:  # reported with the server named
                failed.append(name)
                errlog.flush()
                with open(log_path) as f:
                    tail = f.read()[-3000:]
                detail = "".join(f"  {type(leaf).__name__}: {leaf}\n" for leaf in leaves(error))
                sys.stderr.write(f"check.py: the {name} MCP server did not answer as expected:\n{detail}")
                sys.stderr.write(f"--- its stderr (tail):\n{tail}\n---\n")
            finally:
                if http_seed is not None:
                    http_seed.send_signal(signal.SIGTERM)
                    try:
                        http_seed.wait(10)
                    except subprocess.TimeoutExpired:
                        http_seed.kill()
                        http_seed.wait()
                    http_seed = None
    if failed:
        sys.stderr.write(f"check.py: FAILED: {', '.join(failed)}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
