// Drives `rlp serve` with the official TypeScript SDK's experimental tasks
// client (2025-11-25): a call run as a task, streamed to its result, then
// the session's tasks listed. Prints one JSON line per message. The client
// takes elicitations: it accepts each form, every boolean field true (an
// approval), and prints the form's first line.
// Usage: node ts_client.mjs NODE_MODULES RLP BUNDLE TOOL   (stdio: starts `RLP serve BUNDLE`)
//        node ts_client.mjs NODE_MODULES - URL TOOL       (Streamable HTTP to a running `rlp serve --http`)
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';

const [modules, rlp, bundle, tool] = process.argv.slice(2);
const sdk = (path) => import(pathToFileURL(join(modules, '@modelcontextprotocol/sdk/dist/esm', path)).href);
const { Client } = await sdk('client/index.js');
const { StdioClientTransport } = await sdk('client/stdio.js');

const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const transport = bundle.startsWith('http')
  ? new StreamableHTTPClientTransport(new URL(bundle))
  : new StdioClientTransport({ command: rlp, args: ['serve', bundle], env: { ...process.env }, stderr: 'ignore' });
const { ElicitRequestSchema } = await sdk('types.js');
const client = new Client({ name: 'rlp-tasks-test', version: '1' }, { capabilities: { elicitation: { form: {} } } });
const say = (message) => console.log(JSON.stringify(message));
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  const fields = Object.entries(request.params.requestedSchema?.properties ?? {});
  const content = Object.fromEntries(fields.filter(([, field]) => field.type === 'boolean').map(([name]) => [name, true]));
  const task = request.params._meta?.['io.modelcontextprotocol/related-task']?.taskId;
  say({ type: 'elicit', message: request.params.message.split('\n')[0], related: Boolean(task) });
  return { action: 'accept', content };
});
await client.connect(transport);
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
