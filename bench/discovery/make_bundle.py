#!/usr/bin/env python3
"""Writes the discovery benchmark bundle OUT/discovery/ from the published
tool definitions in tools.json (bench/discovery/extract.mjs): every tool of
every server becomes an exec tool of one bundle, as a host that loads all
those servers at once would see them. Digests are filled afterwards by
`rlp digest`.

Usage: make_bundle.py TOOLS_JSON OUT

Per tool: the id is the server's prefix, a dot, and the published name
lowercased with `-` made `_`; the description and the input schema are kept
verbatim, except that a draft-07 `$schema` is dropped (rlp reads JSON Schema
2020-12, and these schemas use nothing that differs between the two); the
category is the server's. Every tool runs the same script,
which prints `{}`, and declares the permissive result schema `{}` (so no
`outputSchema` is listed: the published output schemas of the filesystem and
memory servers are left out, which makes the full list a little smaller than
theirs). No tool asks for confirmation, so calls run unattended.
"""
import json
import os
import re
import stat
import sys

NAME = "discovery"

# Package → (id prefix, category).
SERVERS = {
    "@modelcontextprotocol/server-filesystem": ("fs", "files"),
    "@modelcontextprotocol/server-github": ("github", "github"),
    "@modelcontextprotocol/server-slack": ("slack", "slack"),
    "@modelcontextprotocol/server-memory": ("memory", "memory"),
    "@notionhq/notion-mcp-server": ("notion", "notion"),
    "@playwright/mcp": ("browser", "browser"),
}

# The tools offered up front under `--expose core`: what a general assistant
# reaches for in most conversations — reading, writing, editing and finding
# local files, reading a repository file, and opening and reading a web page.
# Everything else (issues, pull requests, chat, notes, memory, the rest of
# the browser) is found with rlp.search_tools when a task needs it.
CORE = {
    "fs.read_text_file",
    "fs.write_file",
    "fs.edit_file",
    "fs.list_directory",
    "fs.search_files",
    "github.get_file_contents",
    "browser.browser_navigate",
    "browser.browser_snapshot",
}

ID = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")

DRAFT_07 = "http://json-schema.org/draft-07/schema#"

SCRIPT = "#!/bin/sh\n# Every tool of the benchmark bundle: an empty result.\necho '{}'\n"


def tool_id(prefix, name):
    """The rlp id of a published tool name."""
    ident = f"{prefix}.{name.lower().replace('-', '_')}"
    if not ID.match(ident):
        sys.exit(f"make_bundle: `{name}` gives the invalid id `{ident}`")
    return ident


def input_schema(published):
    """The published input schema, without a draft-07 `$schema`."""
    schema = dict(published["inputSchema"])
    if schema.get("$schema") == DRAFT_07:
        del schema["$schema"]
    return schema


def tools(servers, command):
    """The tools.json entries of every published tool, in published order."""
    out = []
    for server in servers:
        prefix, category = SERVERS[server["package"]]
        for published in server["tools"]:
            ident = tool_id(prefix, published["name"])
            entry = {
                "id": ident,
                "description": published["description"],
                "transport": {"kind": "exec", "command": command},
                "input_schema": input_schema(published),
                "result_schema": {},
                "requires_confirmation": False,
                "category": category,
            }
            if ident in CORE:
                entry["discoverability"] = "core"
            out.append(entry)
    missing = CORE - {t["id"] for t in out}
    if missing:
        sys.exit(f"make_bundle: core tools not published: {', '.join(sorted(missing))}")
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: make_bundle.py TOOLS_JSON OUT")
    with open(sys.argv[1], encoding="utf-8") as f:
        servers = json.load(f)["servers"]
    bundle = os.path.abspath(os.path.join(sys.argv[2], NAME))
    os.makedirs(os.path.join(bundle, "bin"), exist_ok=True)
    script = os.path.join(bundle, "bin", "empty.sh")
    with open(script, "w") as f:
        f.write(SCRIPT)
    os.chmod(script, os.stat(script).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    with open(os.path.join(bundle, "manifest.toml"), "w") as f:
        f.write(f'[agent]\nname = "{NAME}"\nversion = "1.0.0"\n'
                'description = "Tools of six public MCP servers, for the discovery benchmark"\n')
    with open(os.path.join(bundle, "policy.caps"), "w") as f:
        f.write("[capabilities]\nexec = true\n")
    with open(os.path.join(bundle, "tools.json"), "w", encoding="utf-8") as f:
        json.dump({"version": 1, "tools": tools(servers, script)}, f, indent=1, ensure_ascii=False)
    print(bundle)


if __name__ == "__main__":
    main()
