// The server configuration an MCPB host derives from an installed MCP
// Bundle, computed by the reference implementation hosts share
// (getMcpConfigForManifest of @anthropic-ai/mcpb, installed by setup.sh):
//
//   node tests/mcpb/host_config.mjs PACKAGE_DIR EXTENSION_DIR < user_config.json
//
// PACKAGE_DIR is the folder setup.sh printed, EXTENSION_DIR the unpacked
// bundle, and standard input the values the user entered, by user_config
// key. Prints {"command", "args", "env"} with ${__dirname}, ${HOME} and
// ${user_config.<key>} replaced; exits 1 when the host would not start the
// server (a required value missing).
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [packageDir, extensionDir] = process.argv.slice(2);
const entry = join(packageDir, "node_modules", "@anthropic-ai", "mcpb", "dist", "index.js");
const { getMcpConfigForManifest } = await import(pathToFileURL(entry).href);
const manifest = JSON.parse(readFileSync(join(extensionDir, "manifest.json"), "utf8"));
const userConfig = JSON.parse(readFileSync(0, "utf8"));
const config = await getMcpConfigForManifest({
  manifest,
  extensionPath: extensionDir,
  systemDirs: { HOME: homedir() },
  userConfig,
  pathSeparator: "/",
});
if (config === undefined) {
  console.error("host_config.mjs: the host would not start this server (a required user_config value is missing)");
  process.exit(1);
}
process.stdout.write(JSON.stringify(config) + "\n");
