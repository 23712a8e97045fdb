"""An MCP server that floods its client with requests (standard library only).

Usage: flood.py COUNT

It answers `initialize` and `tools/list` (one tool, `pings`). A call of
`pings` is answered with COUNT `ping` requests, written at once without
reading the client's answers, and never with a result.
"""

from __future__ import annotations

import json
import sys


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    count = int(sys.argv[1])
    for line in sys.stdin:
        message = json.loads(line)
        method, ident = message.get("method"), message.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": ident, "result": {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "flood", "version": "1"},
            }})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": ident, "result": {"tools": [
                {"name": "pings", "description": "Floods.", "inputSchema": {"type": "object"}},
            ]}})
        elif method == "tools/call":
            pings = "".join(
                json.dumps({"jsonrpc": "2.0", "id": f"p{n}", "method": "ping"}) + "\n" for n in range(count)
            )
            sys.stdout.write(pings)
            sys.stdout.flush()
            # Never read again: the answers pile up on the client's side.
            for _ in iter(sys.stdin.readline, ""):
                pass


if __name__ == "__main__":
    main()
