// Drives `rlp serve` over stdio with the official TypeScript SDK's
// experimental tasks client (2025-11-25): a call run as a task, streamed to
// its result, then the session's tasks listed. Prints one JSON line per
// message. Usage: node ts_client.mjs NODE_MODULES RLP BUNDLE TOOL
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';

const [modules, rlp, bundle, tool] = process.argv.slice(2);
const sdk = (path) => import(pathToFileURL(join(modules, '@modelcontextprotocol/sdk/dist/esm', path)).href);
const { Client } = await sdk('client/index.js');
const { StdioClientTransport } = await sdk('client/stdio.js');

const transport = new StdioClientTransport({ command: rlp, args: ['serve', bundle], env: { ...process.env }, stderr: 'ignore' });
const client = new Client({ name: 'rlp-tasks-test', version: '1' }, { capabilities: {} });
await client.connect(transport);
const say = (message) => console.log(JSON.stringify(message));
say({ type: 'capabilities', tasks: client.getServerCapabilities().tasks });
const listed = await client.listTools();
say({ type: 'tool', execution: listed.tools.find((t) => t.name === tool).execution });
const stream = client.experimental.tasks.callToolStream({ name: tool, arguments: {} }, undefined, { task: { ttl: 60000 } });
for await (const message of stream) {
  say({ type: message.type, status: message.task?.status, result: message.result, error: message.error?.message });
}
const tasks = await client.experimental.tasks.listTasks();
say({ type: 'list', statuses: tasks.tasks.map((t) => t.status) });
await client.close();
