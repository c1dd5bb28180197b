'use strict';
// memoryd-mcp end to end: the MCP SDK's own client over stdio and over
// Streamable HTTP against a real memoryd (tests/clients/memoryd_fixture):
// the tool list, every tool, the resources and a board subscription, a
// permission error, bad arguments, the HTTP transport's security rules
// (tokens vetted by memoryd, session caps), and the channel to memoryd:
// plaintext only to loopback unless allowed, TLS with a client certificate
// (against a grpc-js TLS stand-in for memoryd's Access service).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const http = require('http');
const os = require('os');
const path = require('path');
const { execFile, execFileSync, spawn } = require('child_process');
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
    r = await call(client, 'search_memories', { namespace_pattern: 'mcp:*:*', term: 'kind',
      exact: true });
    assert.equal(r.entries[0].value, 'terse and kind, and kind');
    assert.equal(r.entries[0].score, undefined);
    // Ranked by default: a question's words, any of them, in any form.
    r = await call(client, 'search_memories', { namespace_pattern: 'mcp:*:*',
      term: 'what style does the user prefer? kindness, terseness' });
    assert.equal(r.entries.length, 1);
    assert.equal(r.entries[0].key, 'user_style');
    assert.ok(r.entries[0].score > 0, `score ${r.entries[0].score}`);
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
    r = await call(client, 'query_entities', { text: 'who is living in London?' });
    assert.deepEqual(r.entities.map((e) => e.id), ['ada']);
    assert.ok(r.entities[0].score > 0);
    r = await call(client, 'query_entities', { text: 'who is living in London?', exact: true });
    assert.deepEqual(r.entities, []);
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
    // With an embedder: found by its words and by meaning, both ranks given.
    assert.deepEqual(r.results[0].found_by.map((p) => p.part).sort(), ['lexical', 'vector']);
    assert.ok(r.results[0].found_by.every((p) => p.rank >= 1));
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

test('stdio: remember and recall without an embedder rank by the words', async () => {
  const plain = await startMemoryd([`--scope=${SCOPES}`]);
  const client = new Client({ name: 'memoryd-mcp-test', version: '1' });
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [SERVER],
    env: { ...process.env, MEMORYD_TOKEN: plain.token, MEMORYD_TARGET: plain.address },
    stderr: 'inherit' }));
  try {
    for (const text of ['the user is allergic to peanuts', 'the user flies to Porto in May',
      'the user painted the kitchen green'])
      await call(client, 'remember', { text });
    let r = await call(client, 'recall', { text: 'what is the user allergic to?' });
    assert.equal(r.results[0].kind, 'memory');
    assert.equal(r.results[0].text, 'the user is allergic to peanuts');
    assert.ok(r.results[0].score > 0);
    assert.deepEqual(r.results[0].found_by, [{ part: 'lexical', rank: 1 }]);
    r = await call(client, 'recall', { text: 'painting' });  // stemmed: "painted"
    assert.equal(r.results[0].text, 'the user painted the kitchen green');
    assert.equal(r.results.filter((x) => x.kind === 'memory').length, 1);
    const memories = (res) => res.results.filter((x) => x.kind === 'memory');
    const at = Date.parse(r.results[0].updated);
    assert.ok(Math.abs(at - Date.now()) < 600e3, `updated ${r.results[0].updated}`);
    // A time window, a recency boost and diversity pass through to memoryd.
    const later = new Date(at + 3600e3).toISOString();
    r = await call(client, 'recall', { text: 'painting', since: later });
    assert.equal(memories(r).length, 0);
    r = await call(client, 'recall', { text: 'painting', until: later });
    assert.equal(memories(r).length, 1);
    r = await call(client, 'recall', { text: 'the user', recency_half_life_hours: 1,
      diversity: 0.5 });
    assert.equal(memories(r).length, 3);
    assert.ok(memories(r).every((m) => m.score > 0));
  } finally {
    await client.close();
    assert.equal(await plain.stop(), 0, 'memoryd exited cleanly');
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

// memoryd-mcp over HTTP on a free port; resolves { url, log(), stop() }.
function startHttpServer(extra = [], target = memoryd.address) {
  const proc = spawn(process.execPath, [SERVER, '--transport=http', '--listen=127.0.0.1:0',
    `--target=${target}`, ...extra], { stdio: ['ignore', 'ignore', 'pipe'] });
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

// A raw request with node:http (fetch will not send a Host header it is
// given): resolves { status, headers, body } and closes the connection.
// With `bodyAfter` (a promise) the headers go at once, the body once it
// resolves.
function rawRequest(method, url, headers, body, bodyAfter = null) {
  return new Promise((resolve, reject) => {
    const length = body === undefined ? {} : { 'content-length': Buffer.byteLength(body) };
    const req = http.request(url, { method, agent: false,
      headers: { ...HEADERS, ...length, ...headers } }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    if (!bodyAfter) return req.end(body);
    req.flushHeaders();
    return bodyAfter.then(() => req.end(body));
  });
}

const rawPost = (url, headers, body = INIT) => rawRequest('POST', url, headers, body);

// n initializes with the token, all at once: every request's headers go
// first and the bodies 300 ms later, so the server has seen all n before
// any can become a session. Resolves their responses.
function initializes(url, token, n) {
  const bodies = new Promise((resolve) => setTimeout(resolve, 300));
  return Promise.all(Array.from({ length: n },
    () => rawRequest('POST', url, { authorization: `Bearer ${token}` }, INIT, bodies)));
}
const statuses = (responses) => responses.map((r) => r.status).sort();

// Resolves once check() holds (polled every 20 ms, for at most 5 s).
async function until(check) {
  for (const end = Date.now() + 5000; !check(); await new Promise((r) => setTimeout(r, 20)))
    if (Date.now() > end) throw new Error(`timed out waiting for ${check}`);
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

test('Streamable HTTP: memoryd vets the token at initialize; one it refuses gets 401, no session',
  async () => {
    const server = await startHttpServer(['--max-sessions=1']);
    try {
      // A made-up token, a JWT-shaped one, and 20 more: memoryd refuses them all.
      const bogus = ['x', 'eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJtZSJ9.AAAA'];
      for (let i = 0; i < 20; i++) bogus.push(`bogus-${i}`);
      for (const token of bogus) {
        const res = await rawPost(server.url, { authorization: `Bearer ${token}` });
        assert.equal(res.status, 401, `${token}: ${res.body}`);
        assert.match(res.headers['www-authenticate'],
          /^Bearer realm="memoryd-mcp", error="invalid_token", error_description="[^"\\]+"$/);
        const body = JSON.parse(res.body);
        assert.equal(body.jsonrpc, '2.0');
        assert.match(body.error.message, /^memoryd refused the token: /);
        assert.equal(res.headers['mcp-session-id'], undefined);
      }
      assert.doesNotMatch(server.log(), /session \S+ started/);
      // The one session slot is still free for a real token.
      const { client } = await httpClient(server.url, memoryd.token);
      assert.equal((await client.listTools()).tools.length, TOOLS.length);
      await client.close();
    } finally {
      assert.equal(await server.stop(), 0, server.log());
    }
  });

test('Streamable HTTP: concurrent initializes cannot overshoot --max-sessions', async () => {
  const server = await startHttpServer(['--max-sessions=3', '--max-sessions-per-token=100']);
  try {
    const responses = await initializes(server.url, memoryd.token, 12);
    assert.deepEqual(statuses(responses), [...Array(3).fill(200), ...Array(9).fill(503)]);
    for (const r of responses.filter((x) => x.status === 503))
      assert.match(JSON.parse(r.body).error.message, /too many sessions \(--max-sessions=3\)/);
    // Full, whatever the token.
    const ro = await rawPost(server.url, { authorization: `Bearer ${memoryd.tokens.readonly}` });
    assert.equal(ro.status, 503);
  } finally {
    assert.equal(await server.stop(), 0, server.log());
  }
});

test('Streamable HTTP: --max-sessions-per-token holds under concurrency; other tokens get in',
  async () => {
    const server = await startHttpServer(['--max-sessions=10', '--max-sessions-per-token=2']);
    try {
      const responses = await initializes(server.url, memoryd.token, 6);
      assert.deepEqual(statuses(responses), [200, 200, 429, 429, 429, 429]);
      for (const r of responses.filter((x) => x.status === 429))
        assert.match(JSON.parse(r.body).error.message, /--max-sessions-per-token=2/);
      const ro = await rawPost(server.url, { authorization: `Bearer ${memoryd.tokens.readonly}` });
      assert.equal(ro.status, 200, ro.body);
      // Ending one of the token's sessions gives its slot back.
      const sid = responses.find((r) => r.status === 200).headers['mcp-session-id'];
      const del = await rawRequest('DELETE', server.url, { authorization: `Bearer ${memoryd.token}`,
        'mcp-session-id': sid, 'mcp-protocol-version': '2025-06-18' });
      assert.equal(del.status, 200, del.body);
      await until(() => /ended \(closed by the client\)/.test(server.log()));
      assert.deepEqual(statuses(await initializes(server.url, memoryd.token, 2)), [200, 429]);
    } finally {
      assert.equal(await server.stop(), 0, server.log());
    }
  });

// memoryd-mcp run to its exit (it should not get past its flags): resolves
// { code, stderr }.
function runServer(args, env = {}) {
  return new Promise((resolve) => execFile(process.execPath, [SERVER, ...args],
    { timeout: 10000, env: { ...process.env, ...env } },
    (err, stdout, stderr) => resolve({ code: err ? err.code : 0, stderr })));
}

test('a plaintext --target that is not loopback is refused at startup, unless allowed',
  async () => {
    for (const transport of ['http', 'stdio']) {
      const r = await runServer([`--transport=${transport}`, '--listen=127.0.0.1:0',
        '--target=10.1.2.3:50051'], { MEMORYD_TOKEN: 't' });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /--target=10\.1\.2\.3:50051 is not a loopback address .*cleartext/);
      assert.match(r.stderr, /Give --tls-ca=FILE .*or --allow-insecure-target/);
    }
    let r = await runServer(['--target=127.0.0.1:50051', '--tls-cert=/dev/null']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--tls-cert and --tls-key go together/);
    r = await runServer(['--target=10.1.2.3:50051', '--tls-ca=/no/such/ca.pem']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--tls-ca=\/no\/such\/ca\.pem: ENOENT/);
    // Allowed: it starts, with a warning, and connects to nothing until a session.
    const server = await startHttpServer(['--allow-insecure-target'], '10.1.2.3:50051');
    try {
      assert.match(server.log(),
        /WARNING: plaintext to memoryd at 10\.1\.2\.3:50051, which is not loopback/);
    } finally {
      assert.equal(await server.stop(), 0, server.log());
    }
  });

// A CA, a server certificate for memoryd.test only and a client
// certificate, both signed by the CA, in a fresh directory.
function makeCertificates() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'memoryd-mcp-tls-'));
  const ssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  ssl('req', '-x509', ...key, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1',
    '-subj', '/CN=memoryd-mcp test CA');
  const leaves = { server: 'subjectAltName=DNS:memoryd.test',
    client: 'extendedKeyUsage=clientAuth' };
  for (const [name, ext] of Object.entries(leaves)) {
    fs.writeFileSync(path.join(dir, `${name}.ext`), `${ext}\n`);
    ssl('req', ...key, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
    ssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key',
      '-CAcreateserial', '-out', `${name}.pem`, '-days', '1', '-extfile', `${name}.ext`);
  }
  return dir;
}

// A stand-in for a memoryd started with --tls-cert/--tls-key/--tls-client-ca
// (the fixture takes no TLS flags): grpc-js, TLS that requires a client
// certificate from the CA, memory.v1.Access.WhoAmI accepting the token
// "good-token" (every other method: UNIMPLEMENTED). Resolves { address,
// tokens: the authorization headers seen, stop() }.
async function startTlsStandIn(dir) {
  // grpc-js and the proto loader are the Node client's dependencies.
  const from = { paths: [path.dirname(require.resolve('memoryd-client/package.json'))] };
  const grpc = require(require.resolve('@grpc/grpc-js', from));
  const loader = require(require.resolve('@grpc/proto-loader', from));
  const def = loader.loadSync('memory/v1/access.proto',
    { includeDirs: [path.join(__dirname, '..', '..', '..', 'protos')] });
  const server = new grpc.Server();
  const tokens = [];
  server.addService(grpc.loadPackageDefinition(def).memory.v1.Access.service, {
    WhoAmI(call, done) {
      const auth = call.metadata.get('authorization')[0];
      tokens.push(auth);
      if (auth === 'Bearer good-token') done(null, { claims: { principal: 'tls-test' } });
      else done({ code: grpc.status.UNAUTHENTICATED, details: 'token signature does not verify' });
    },
  });
  const read = (f) => fs.readFileSync(path.join(dir, f));
  const creds = grpc.ServerCredentials.createSsl(read('ca.pem'),
    [{ cert_chain: read('server.pem'), private_key: read('server.key') }], true);
  const port = await new Promise((resolve, reject) => server.bindAsync('127.0.0.1:0', creds,
    (err, p) => (err ? reject(err) : resolve(p))));
  return { address: `127.0.0.1:${port}`, tokens, stop: () => server.forceShutdown() };
}

const hasOpenssl = (() => {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

test('TLS to memoryd: a client certificate for mutual TLS, and clear failures without it',
  { skip: !hasOpenssl && 'openssl is not installed' }, async () => {
    const dir = makeCertificates();
    const standIn = await startTlsStandIn(dir);
    const file = (f) => path.join(dir, f);
    const tlsFlags = [`--tls-ca=${file('ca.pem')}`, `--tls-cert=${file('client.pem')}`,
      `--tls-key=${file('client.key')}`, '--tls-server-name=memoryd.test', '--timeout-ms=3000'];
    try {
      const server = await startHttpServer(tlsFlags, standIn.address);
      try {
        assert.match(server.log(), /for memoryd at 127\.0\.0\.1:\d+ \(TLS\)/);
        const res = await rawPost(server.url, { authorization: 'Bearer good-token' });
        assert.equal(res.status, 200, res.body);
        assert.ok(res.headers['mcp-session-id']);
        const bad = await rawPost(server.url, { authorization: 'Bearer bad-token' });
        assert.equal(bad.status, 401);
        assert.match(bad.headers['www-authenticate'],
          /error="invalid_token", error_description="token signature does not verify"/);
        assert.deepEqual(standIn.tokens, ['Bearer good-token', 'Bearer bad-token']);
        // The session's own calls take the same TLS channel.
        const { client } = await httpClient(server.url, 'good-token');
        const r = await call(client, 'memory_stats', { namespace_pattern: 'a:*:*' });
        assert.match(r.error, /^memoryd refused: UNIMPLEMENTED/);
        await client.close();
      } finally {
        assert.equal(await server.stop(), 0, server.log());
      }
      // Plaintext, no client certificate, or a certificate name other than
      // the target's without --tls-server-name: memoryd is unreachable
      // (503), and the message says why.
      const without = {
        plaintext: [[], /Failed to connect/],
        'no client certificate': [[`--tls-ca=${file('ca.pem')}`, '--tls-server-name=memoryd.test'],
          /certificate required/],
        'wrong server name': [tlsFlags.filter((f) => !f.startsWith('--tls-server-name')),
          /does not match certificate's altnames/],
      };
      for (const [what, [flags, why]] of Object.entries(without)) {
        const s = await startHttpServer([...flags, '--timeout-ms=3000'], standIn.address);
        try {
          const r = await rawPost(s.url, { authorization: 'Bearer good-token' });
          assert.equal(r.status, 503, `${what}: ${r.body}`);
          const { message } = JSON.parse(r.body).error;
          assert.match(message,
            /^could not verify the token with memoryd at 127\.0\.0\.1:\d+: UNAVAILABLE: /, what);
          assert.match(message, why, what);
          assert.match(s.log(), /initialize refused: could not verify the token/);
        } finally {
          assert.equal(await s.stop(), 0, s.log());
        }
      }
    } finally {
      standIn.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
