#!/usr/bin/env python3
"""Generates benchmark bundles: one with N tools (inline schemas), and a
folder of M small bundles. Digests are filled afterwards by `rlp digest`."""
import json
import os
import sys


def tool(i):
    http = i % 2 == 0
    transport = (
        {"kind": "http", "method": "POST", "url": f"https://api{i % 10}.example.com/v1/items/{{item_id}}",
         "headers": {"Authorization": "Bearer ${secret:runloop/bench/api_key}"}}
        if http else
        {"kind": "exec", "command": "/usr/local/bin/bench-tool", "args": ["--mode", str(i)]}
    )
    return {
        "id": f"bench.tool_{i}",
        "description": f"Benchmark tool number {i}: does nothing, described at some length.",
        "transport": transport,
        "input_schema": {
            "type": "object",
            "required": ["item_id", "count"],
            "properties": {
                "item_id": {"type": "string", "pattern": "^[a-z0-9-]+$", "maxLength": 64},
                "count": {"type": "integer", "minimum": 0, "maximum": 1000},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 16},
                "options": {"$ref": "#/$defs/options"},
            },
            "$defs": {"options": {"type": "object", "additionalProperties": {"type": "boolean"}}},
            "additionalProperties": False,
        },
        "result_schema": {
            "type": "object",
            "properties": {"ok": {"type": "boolean"}, "items": {"type": "array", "items": {"type": "object"}}},
        },
        "capabilities": [f"net:api{i % 10}.example.com"] if http else ["exec"],
        "secrets": ["runloop/bench/api_key"] if http else [],
        "requires_confirmation": http,
        "timeout_ms": 10000,
        "observability": {"tags": ["bench"]},
    }


def write_bundle(path, name, tools):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "manifest.toml"), "w") as f:
        f.write(f'[agent]\nname = "{name}"\nversion = "1.0.0"\ndescription = "benchmark bundle"\n\n[caps]\nfile = "policy.caps"\n')
    hosts = sorted({f"api{i % 10}.example.com" for i in range(10)})
    with open(os.path.join(path, "policy.caps"), "w") as f:
        f.write("[capabilities]\nexec = true\nsecrets = [\"runloop/bench/api_key\"]\nnet = [%s]\n" % ", ".join(f'"{h}"' for h in hosts))
    with open(os.path.join(path, "tools.json"), "w") as f:
        json.dump({"version": 1, "tools": tools}, f, indent=2)


def main():
    out, n_tools, n_bundles = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    write_bundle(os.path.join(out, "big", "big"), "big", [tool(i) for i in range(n_tools)])
    for b in range(n_bundles):
        write_bundle(os.path.join(out, "many", f"agent_{b:03d}"), f"agent_{b:03d}", [tool(b * 5 + i) for i in range(5)])


if __name__ == "__main__":
    main()
