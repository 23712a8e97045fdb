"""The baseline MCP server of bench/serve.sh: FastMCP over stdio, with one
tool `ok` that does what rlp's exec transport does at its simplest — write
the call blob to a private temporary folder, run the tool with subprocess,
parse its stdout as JSON — and nothing more (no sandbox, no ledger).

Usage: serve_fastmcp.py TOOL"""
import json
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from fastmcp import FastMCP

TOOL = sys.argv[1]
server = FastMCP("bench")


@server.tool
def ok() -> dict:
    """Runs the trivial tool once and returns its result."""
    with tempfile.TemporaryDirectory() as folder:
        blob = Path(folder) / "blob.json"
        blob.write_text(json.dumps({"v": 1, "action": "run", "invocation_id": str(uuid.uuid4()), "tool": {"id": "ok", "arguments": {}}}))
        done = subprocess.run([TOOL, str(blob)], stdin=subprocess.DEVNULL, capture_output=True, cwd=folder, check=True)
    return json.loads(done.stdout)


if __name__ == "__main__":
    server.run(show_banner=False)
