// Regenerates bench/discovery/tools.json: starts each pinned MCP server of
// package.json over stdio (dummy credentials, no network needed), sends
// initialize + notifications/initialized + tools/list, and writes the tool
// definitions each server publishes, one tool per line.
//
// Usage: node bench/discovery/extract.mjs NODE_MODULES OUT
//   NODE_MODULES  where `npm ci` installed package.json beside this script
//   OUT           the tools.json to write
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** The servers, in the order a host would load them: package, entry script
 * (relative to the package), extra arguments, dummy environment. */
const scratch = mkdtempSync(join(tmpdir(), "discovery-"));
const SERVERS = [
  { pkg: "@modelcontextprotocol/server-filesystem", entry: "dist/index.js", args: [scratch], env: {} },
  { pkg: "@modelcontextprotocol/server-github", entry: "dist/index.js", args: [], env: { GITHUB_PERSONAL_ACCESS_TOKEN: "ghp_dummy" } },
  { pkg: "@modelcontextprotocol/server-slack", entry: "dist/index.js", args: [], env: { SLACK_BOT_TOKEN: "xoxb-dummy", SLACK_TEAM_ID: "T00000000" } },
  { pkg: "@modelcontextprotocol/server-memory", entry: "dist/index.js", args: [], env: { MEMORY_FILE_PATH: join(scratch, "memory.jsonl") } },
  { pkg: "@notionhq/notion-mcp-server", entry: "bin/cli.mjs", args: [], env: { NOTION_TOKEN: "ntn_dummy" } },
  { pkg: "@playwright/mcp", entry: "cli.js", args: ["--headless"], env: {} },
];

/** Sends `initialize`, `notifications/initialized` and `tools/list` to one
 * server and resolves with the `tools` array of its answer. */
function listTools(nodeModules, server) {
  const dir = join(nodeModules, server.pkg);
  const child = spawn(process.execPath, [join(dir, server.entry), ...server.args], {
    env: { PATH: process.env.PATH, HOME: scratch, ...server.env },
    stdio: ["pipe", "pipe", "ignore"],
  });
  const send = (msg) => child.stdin.write(JSON.stringify({ jsonrpc: "2.0", ...msg }) + "\n");
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${server.pkg}: no tools/list answer in 30 s`)), 30000);
    let buffered = "";
    child.on("error", reject);
    child.stdout.on("data", (chunk) => {
      buffered += chunk;
      let newline;
      while ((newline = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, newline).trim();
        buffered = buffered.slice(newline + 1);
        if (!line) continue;
        const msg = JSON.parse(line);
        if (msg.id === 1) {
          send({ method: "notifications/initialized" });
          send({ id: 2, method: "tools/list", params: {} });
        } else if (msg.id === 2) {
          clearTimeout(timer);
          child.kill();
          if (msg.error) reject(new Error(`${server.pkg}: ${JSON.stringify(msg.error)}`));
          else resolve(msg.result.tools);
        }
      }
    });
    send({
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "rlp-bench-extract", version: "1" } },
    });
  });
}

const [nodeModules, out] = process.argv.slice(2);
if (!nodeModules || !out) {
  console.error("usage: node extract.mjs NODE_MODULES OUT");
  process.exit(2);
}
const servers = [];
for (const server of SERVERS) {
  const { version } = JSON.parse(readFileSync(join(nodeModules, server.pkg, "package.json"), "utf8"));
  const tools = await listTools(nodeModules, server);
  servers.push({ package: server.pkg, version, tools });
  console.error(`${server.pkg}@${version}: ${tools.length} tools`);
}
const lines = servers.map(
  (s) =>
    `  {"package": ${JSON.stringify(s.package)}, "version": ${JSON.stringify(s.version)}, "tools": [\n` +
    s.tools.map((t) => "    " + JSON.stringify(t)).join(",\n") +
    "\n  ]}",
);
writeFileSync(out, `{"servers": [\n${lines.join(",\n")}\n]}\n`);
