'use strict';
// memoryd-mcp end to end: the MCP SDK's own client over stdio and over
// Streamable HTTP against a real memoryd (tests/clients/memoryd_fixture):
// the tool list, every tool, the resources and a board subscription, a
// permission error, bad arguments, and the HTTP transport's security rules.

const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('http');
const path = require('path');
const { execFile, spawn } = require('child_process');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { StreamableHTTPClientTransport } =
  require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { ResourceUpdatedNotificationSchema } = require('@modelcontextprotocol/sdk/types.js');
// The Node client's test fixture (memoryd on a throw-away database).
const { startMemoryd } = require('memoryd-client/test/fixture');

const SERVER = path.join(__dirname, '..', 'server.js');
const SCOPES = 'entries:* working:* session:* global:read global:write blackboard:read:all ' +
  'blackboard:write privacy:forget episodic:read episodic:write router:query';
const TOOLS = ['save_memory', 'read_memory', 'search_memories', 'list_memories',
  'delete_memory', 'append_memory', 'replace_in_memory', 'memory_stats', 'put_entity',
  'get_entity', 'query_entities', 'relate', 'traverse', 'record_task', 'blackboard_post',
  'blackboard_read', 'forget', 'memory', 'render_memory', 'session', 'remember', 'recall'];

let memoryd;
test.before(async () => {
  // With the embedder contract stand-in, for remember and recall.
  memoryd = await startMemoryd([`--scope=${SCOPES}`, '--token=readonly=entries:read',
    '--embedder']);
});
test.after(async () => {
  if (memoryd) assert.equal(await memoryd.stop(), 0, 'memoryd exited cleanly');
});

async function stdioClient(token) {
  const client = new Client({ name: 'memoryd-mcp-test', version: '1' });
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [SERVER],
    env: { ...process.env, MEMORYD_TOKEN: token, MEMORYD_TARGET: memoryd.address },
    stderr: 'inherit' }));
  return client;
}

// A tool's result: its JSON text parsed (or, for a tool error, the text).
async function call(client, name, args) {
  const r = await client.callTool({ name, arguments: args });
  const text = r.content[0].text;
  return r.isError ? { error: text } : JSON.parse(text);
}

test('stdio: the tools, each tool, the resources and a board subscription', async () => {
  const client = await stdioClient(memoryd.token);
  try {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOLS].sort());
    for (const t of tools) {
      assert.ok(t.description.length > 20, `${t.name} has a description`);
      assert.equal(t.inputSchema.type, 'object');
      assert.equal(t.inputSchema.additionalProperties, false, `${t.name} refuses unknown args`);
      assert.equal(t.inputSchema.properties.token, undefined, `${t.name} takes no token`);
    }
    const ns = 'mcp:agent:notes';
    let r = await call(client, 'save_memory', { namespace: ns, key: 'user_style',
      value: 'terse and friendly', tags: ['pref'], metadata: { subject_id: 'subj-1' } });
    assert.deepEqual(r, { saved: `${ns}/user_style`, created: true, version: 1 });
    r = await call(client, 'read_memory', { namespace: ns, key: 'user_style' });
    assert.equal(r.value, 'terse and friendly');
    assert.deepEqual(r.tags, ['pref']);
    r = await call(client, 'append_memory', { namespace: ns, key: 'user_style', value: ', and friendly' });
    assert.equal(r.version, 2);
    r = await call(client, 'replace_in_memory', { namespace: ns, key: 'user_style',
      find: 'friendly', replacement: 'kind' });
    assert.equal(r.replacement_count, 2);
    r = await call(client, 'search_memories', { namespace_pattern: 'mcp:*:*', term: 'kind' });
    assert.equal(r.entries[0].value, 'terse and kind, and kind');
    await call(client, 'save_memory', { namespace: ns, key: 'topic', value: 'MCP' });
    r = await call(client, 'list_memories', { namespace_pattern: 'mcp:*:*', key_pattern: 'user_*' });
    assert.deepEqual(r.entries.map((e) => e.key), ['user_style']);
    r = await call(client, 'memory_stats', { namespace_pattern: 'mcp:*:*' });
    assert.equal(r.entry_count, 2);
    r = await call(client, 'delete_memory', { namespace: ns, key: 'topic' });
    assert.equal(r.deleted, `${ns}/topic`);
    r = await call(client, 'read_memory', { namespace: ns, key: 'topic' });
    assert.match(r.error, /^memoryd refused: NOT_FOUND: /);

    r = await call(client, 'put_entity', { id: 'ada', type: 'person', name: 'Ada',
      properties: { city: 'London', subject_id: 'subj-1' } });
    assert.equal(r.created, true);
    await call(client, 'put_entity', { id: 'engine', type: 'project', name: 'Engine' });
    r = await call(client, 'relate', { source_id: 'ada', type: 'works_on', target_id: 'engine' });
    assert.equal(r.relationship, 'ada -[works_on]-> engine');
    r = await call(client, 'get_entity', { id: 'ada' });
    assert.deepEqual(r.properties, { city: 'London', subject_id: 'subj-1' });
    r = await call(client, 'query_entities', { type: 'person',
      where: [{ path: 'city', op: 'eq', value: 'London' }] });
    assert.deepEqual(r.entities.map((e) => e.id), ['ada']);
    r = await call(client, 'traverse', { start_id: 'ada', max_depth: 2 });
    assert.deepEqual(r.nodes.map((n) => n.id).sort(), ['ada', 'engine']);
    assert.deepEqual(r.edges, ['ada -[works_on]-> engine']);
    r = await call(client, 'record_task', { id: 't1', type: 'research', status: 'succeeded',
      entity_ids: ['ada'], result: { found: 1 } });
    assert.equal(r.status, 'TASK_STATUS_SUCCEEDED');

    // A board resource, subscribed: a post is announced.
    const task = `mcp-${process.pid}-${Date.now()}`;
    await call(client, 'blackboard_post', { task_id: task, key: 'plan', value: { steps: 2 } });
    const uri = `memoryd://board/${task}`;
    const updated = new Promise((resolve) => client.setNotificationHandler(
      ResourceUpdatedNotificationSchema, (n) => resolve(n.params.uri)));
    await client.subscribeResource({ uri });
    r = await call(client, 'blackboard_post', { task_id: task, key: 'claim', value: 'me',
      expected_version: 0, lease_seconds: 30 });
    assert.ok(r.version > 0);
    assert.equal(await updated, uri);
    r = await call(client, 'blackboard_post', { task_id: task, key: 'claim', value: 'you',
      expected_version: 0 });
    assert.match(r.error, /ABORTED/);
    r = await call(client, 'blackboard_read', { task_id: task });
    assert.deepEqual(r.items.plan.value, { steps: 2 });
    assert.equal(r.items.claim.value, 'me');
    const board = JSON.parse((await client.readResource({ uri })).contents[0].text);
    assert.deepEqual(Object.keys(board.items).sort(), ['claim', 'plan']);
    await client.unsubscribeResource({ uri });
    const entries = JSON.parse((await client.readResource(
      { uri: `memoryd://entries/${ns}` })).contents[0].text);
    assert.deepEqual(entries.entries.map((e) => e.key), ['user_style']);
    await assert.rejects(client.subscribeResource({ uri: `memoryd://entries/${ns}` }),
      /only board resources/);

    r = await call(client, 'forget', { subject_id: 'subj-1', dry_run: true });
    assert.equal(r.dry_run, true);
    assert.equal(r.erased.global, 2, JSON.stringify(r)); // the entity and its edge
    assert.equal(r.erased.entries, 1);
    assert.match(r.signed_receipt, /^[\w-]+\.[\w-]+\.[\w-]+$/);
  } finally {
    await client.close();
  }
});

test('stdio: working memory, its five commands and its rendering', async () => {
  const client = await stdioClient(memoryd.token);
  try {
    const node = 'mcp:agent:planner';
    let r = await call(client, 'memory', { command: 'append', node, path: 'plan//steps/',
      text: '1. book flight\n' });
    assert.deepEqual(r, { path: 'plan//steps/', created: true, chars: 15, version: 1 });
    r = await call(client, 'memory', { command: 'append', node, path: '/plan/steps',
      text: '2. book hotel\n' });
    assert.equal(r.version, 2);
    r = await call(client, 'memory', { command: 'update', node, path: '/plan/steps',
      old_text: 'book', new_text: 'reserve' });
    assert.equal(r.replacement_count, 2);
    r = await call(client, 'memory', { command: 'read', node, path: '/plan/steps' });
    assert.equal(r.content, '1. reserve flight\n2. reserve hotel\n');
    await call(client, 'memory', { command: 'append', node, thread_id: 'th-1', path: '/scratch',
      text: 'only this thread' });
    r = await call(client, 'memory', { command: 'list', node });
    assert.deepEqual(r.documents.map((d) => d.path), ['/plan/steps']);

    r = await call(client, 'render_memory', { node });
    assert.equal(r.text, '## /plan/steps\n1. reserve flight\n2. reserve hotel\n');
    assert.equal(r.content, 'full');
    r = await call(client, 'render_memory', { node, max_chars: 20 });
    assert.deepEqual([r.text, r.content, r.tree_fallback], ['plan/\n  steps\n', 'tree', true]);
    r = await call(client, 'render_memory', { node, thread_id: 'th-1' });
    assert.deepEqual([r.text, r.scope, r.global_fallback],
      ['## /scratch\nonly this thread\n', 'thread', false]);
    r = await call(client, 'render_memory', { node, thread_id: 'th-2', content: 'tree' });
    assert.deepEqual([r.text, r.scope, r.global_fallback], ['plan/\n  steps\n', 'node', true]);

    // A command without what it needs, and a path memoryd refuses: tool errors.
    r = await call(client, 'memory', { command: 'update', node, path: '/plan/steps' });
    assert.equal(r.error, 'update needs old_text and new_text');
    r = await call(client, 'memory', { command: 'read', node, path: '/a/../b' });
    assert.match(r.error, /^memoryd refused: INVALID_ARGUMENT: path: .*"\.\."/);
    r = await call(client, 'memory', { command: 'delete', node, path: '/', recursive: true });
    assert.equal(r.deleted_count, 1);
  } finally {
    await client.close();
  }
});

test('stdio: remember and recall by text', async () => {
  const client = await stdioClient(memoryd.token);
  try {
    let r = await call(client, 'remember', { text: 'the user is allergic to peanuts' });
    assert.equal(r.collection, 'memories');
    assert.match(r.remembered, /^[0-9a-f-]{36}$/);
    await call(client, 'remember', { text: 'the user flies to Porto in May',
      entity_id: 'trip-porto', payload: { source: 'chat' } });
    await call(client, 'put_entity', { id: 'trip-porto', type: 'trip', name: 'Porto trip' });
    r = await call(client, 'recall', { text: 'peanuts allergy' });
    assert.equal(r.results[0].kind, 'memory');
    assert.equal(r.results[0].text, 'the user is allergic to peanuts');
    assert.deepEqual(r.skipped, []);
    // The entity and the memory naming it merge into one result.
    r = await call(client, 'recall', { text: 'Porto trip' });
    const trip = r.results.find((x) => x.kind === 'entity');
    assert.equal(trip.id, 'trip-porto');
    assert.equal(trip.memory, 'the user flies to Porto in May');
    r = await call(client, 'recall', { text: 'x', collection: 'no_such' });
    assert.match(r.error, /^memoryd refused: NOT_FOUND: /);
  } finally {
    await client.close();
  }
});

test('stdio: a session from start to end', async () => {
  const client = await stdioClient(memoryd.token);
  try {
    const s = await call(client, 'session', { command: 'start', duration_seconds: 600 });
    assert.equal(s.state, 'active');
    assert.equal(s.durable, false);
    let r = await call(client, 'session', { command: 'set', session_id: s.session_id,
      key: 'goal', value: 'find a hotel' });
    assert.equal(r.version, 1);
    r = await call(client, 'session', { command: 'get', session_id: s.session_id, key: 'goal' });
    assert.equal(r.value, 'find a hotel');
    await call(client, 'session', { command: 'set', session_id: s.session_id, key: 'city',
      value: 'Porto' });
    r = await call(client, 'session', { command: 'list', session_id: s.session_id });
    assert.deepEqual(r.items, { city: 'Porto', goal: 'find a hotel' });
    r = await call(client, 'session', { command: 'end', session_id: s.session_id });
    assert.deepEqual([r.record_count, r.session.state], [2, 'ended']);
    r = await call(client, 'session', { command: 'set', session_id: s.session_id, key: 'x',
      value: 'y' });
    assert.match(r.error, /^memoryd refused: FAILED_PRECONDITION: .*ended/);
    r = await call(client, 'session', { command: 'get', session_id: s.session_id });
    assert.equal(r.error, 'get needs key');
  } finally {
    await client.close();
  }
});

test('stdio: a permission error and bad arguments are tool errors, not crashes', async () => {
  const client = await stdioClient(memoryd.tokens.readonly);
  try {
    let r = await call(client, 'save_memory', { namespace: 'a:b:c', key: 'k', value: 'v' });
    assert.match(r.error, /^memoryd refused: PERMISSION_DENIED: .*entries:write/);
    r = await call(client, 'read_memory', { namespace: 'a:b:c', key: 'k' });
    assert.match(r.error, /NOT_FOUND/); // reading is allowed
    // A token in the arguments is refused, never used.
    r = await client.callTool({ name: 'read_memory', arguments: { namespace: 'a:b:c', key: 'k',
      token: memoryd.token } });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /token/);
    r = await client.callTool({ name: 'save_memory', arguments: { namespace: 'a:b:c' } });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /key/);
    r = await client.callTool({ name: 'memory_stats', arguments: { namespace_pattern: 7 } });
    assert.equal(r.isError, true);
    r = await call(client, 'read_memory', { namespace: 'no-colons', key: 'k' });
    assert.match(r.error, /INVALID_ARGUMENT: .*namespace/);
    // The server is still there.
    assert.equal((await client.listTools()).tools.length, TOOLS.length);
  } finally {
    await client.close();
  }
});

// memoryd-mcp over HTTP on a free port; resolves { url, stop() }.
function startHttpServer(extra = []) {
  const proc = spawn(process.execPath, [SERVER, '--transport=http', '--listen=127.0.0.1:0',
    `--target=${memoryd.address}`, ...extra], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  let started = false;
  return new Promise((resolve, reject) => {
    proc.on('exit', (code) => reject(new Error(`memoryd-mcp exited ${code}: ${log}`)));
    proc.stderr.on('data', (d) => {
      log += d;
      const m = /serving MCP on (http:\/\/\S+)/.exec(log);
      if (m && !started) {
        started = true;
        proc.removeAllListeners('exit');
        const exited = new Promise((done) => proc.on('exit', (code, signal) => done(code ?? signal)));
        // SIGTERM ends the sessions and exits within 2 s: resolves its exit code.
        const stop = async () => {
          proc.kill('SIGTERM');
          const t = setTimeout(() => proc.kill('SIGKILL'), 10000);
          const code = await exited;
          clearTimeout(t);
          return code;
        };
        resolve({ url: m[1], log: () => log, stop });
      }
    });
  });
}

async function httpClient(url, token) {
  const client = new Client({ name: 'memoryd-mcp-test', version: '1' });
  const transport = new StreamableHTTPClientTransport(new URL(url),
    { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  await client.connect(transport);
  return { client, transport };
}

const INIT = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
  protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

// A raw POST with node:http (fetch will not send a Host header it is given):
// resolves { status, headers, body } and closes the connection.
function rawPost(url, headers, body = INIT) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent: false,
      headers: { ...HEADERS, ...headers } }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('Streamable HTTP: tools per session token, and the transport\'s security rules', async () => {
  const server = await startHttpServer();
  try {
    const { client, transport } = await httpClient(server.url, memoryd.token);
    const { tools } = await client.listTools();
    assert.equal(tools.length, TOOLS.length);
    let r = await call(client, 'save_memory', { namespace: 'mcp:http:s', key: 'k', value: 'v' });
    assert.equal(r.created, true);
    r = await call(client, 'read_memory', { namespace: 'mcp:http:s', key: 'k' });
    assert.equal(r.value, 'v');
    const bad = await client.callTool({ name: 'read_memory', arguments: { namespace: 'mcp:http:s' } });
    assert.equal(bad.isError, true);
    assert.match(bad.content[0].text, /key/);
    // Another session with the read-only token is held to it.
    const ro = await httpClient(server.url, memoryd.tokens.readonly);
    r = await call(ro.client, 'save_memory', { namespace: 'mcp:http:s', key: 'k', value: 'w' });
    assert.match(r.error, /PERMISSION_DENIED/);
    await ro.client.close();

    const post = (headers, body = INIT) => rawPost(server.url, headers, body);
    const auth = { authorization: `Bearer ${memoryd.token}` };
    // No token.
    let res = await post({});
    assert.equal(res.status, 401);
    assert.match(res.headers['www-authenticate'], /Bearer/);
    // DNS rebinding: a foreign Host, or a web page's Origin.
    res = await post({ ...auth, host: 'evil.example:80' });
    assert.equal(res.status, 403);
    res = await post({ ...auth, origin: 'http://evil.example' });
    assert.equal(res.status, 403);
    // A session id is no use with another token, nor an unknown one.
    const listTools = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
    const sid = transport.sessionId;
    assert.ok(sid);
    res = await post({ authorization: `Bearer ${memoryd.tokens.readonly}`, 'mcp-session-id': sid,
      'mcp-protocol-version': '2025-06-18' }, listTools);
    assert.equal(res.status, 403);
    assert.match(res.body, /another token/);
    res = await post({ ...auth, 'mcp-session-id': 'no-such-session',
      'mcp-protocol-version': '2025-06-18' }, listTools);
    assert.equal(res.status, 404);
    // Still served for its own token.
    assert.equal((await client.listTools()).tools.length, TOOLS.length);
    await client.close();
  } finally {
    assert.equal(await server.stop(), 0, server.log());
  }
});

test('Streamable HTTP: sessions are bounded', async () => {
  const server = await startHttpServer(['--max-sessions=1']);
  try {
    const first = await httpClient(server.url, memoryd.token);
    const res = await rawPost(server.url, { authorization: `Bearer ${memoryd.token}` });
    assert.equal(res.status, 503);
    assert.match(res.body, /--max-sessions=1/);
    await first.transport.terminateSession();
    await first.client.close();
    const again = await httpClient(server.url, memoryd.token); // room again
    await again.client.close();
  } finally {
    assert.equal(await server.stop(), 0, server.log());
  }
});

test('the README\'s example: the MCP inspector\'s CLI against memoryd-mcp on stdio', async () => {
  const inspector = path.join(__dirname, '..', 'node_modules', '.bin', 'mcp-inspector');
  const run = (...args) => new Promise((resolve, reject) => execFile(inspector, ['--cli',
    '-e', `MEMORYD_TOKEN=${memoryd.token}`, '-e', `MEMORYD_TARGET=${memoryd.address}`,
    process.execPath, SERVER, ...args], { timeout: 60000 },
  (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`))
    : resolve(JSON.parse(stdout)))));
  const listed = await run('--method', 'tools/list');
  assert.equal(listed.tools.length, TOOLS.length);
  const saved = await run('--method', 'tools/call', '--tool-name', 'save_memory',
    '--tool-arg', 'namespace=demo:mcp:notes', '--tool-arg', 'key=user_style',
    '--tool-arg', 'value=terse');
  assert.match(saved.content[0].text, /"saved": "demo:mcp:notes\/user_style"/);
  const read = await run('--method', 'resources/read', '--uri', 'memoryd://entries/demo:mcp:notes');
  assert.equal(JSON.parse(read.contents[0].text).entries[0].value, 'terse');
});
