'use strict';
// The Node.js client against a real memoryd: the wrapper (token, deadlines,
// errors, async iterators), the namespaced memory and the blackboard
// helpers, and the example agent.

const test = require('node:test');
const assert = require('node:assert/strict');
const net = require('net');
const path = require('path');
const { execFile } = require('child_process');
const { MemorydClient, MemorydError, status } = require('..');
const { startMemoryd } = require('./fixture');

const SCOPES = 'entries:* blackboard:read:all blackboard:write audit:read:all global:read ' +
  'global:write router:query';

let server;
let client;
test.before(async () => {
  server = await startMemoryd([`--scope=${SCOPES}`, '--token=readonly=entries:read']);
  client = new MemorydClient({ target: server.address, token: server.token });
});
test.after(async () => {
  client?.close();
  if (server) assert.equal(await server.stop(), 0, 'memoryd exited cleanly');
});

// Expects fn to reject with a MemorydError of code whose message has `has`.
async function rejects(fn, code, has) {
  await assert.rejects(fn, (err) => {
    assert.ok(err instanceof MemorydError, `a MemorydError, not ${err}`);
    assert.equal(err.codeName, code, err.message);
    if (has) assert.match(err.details, has);
    return true;
  });
}

test('health and a raw unary call', async () => {
  assert.equal(await client.checkHealth(), 'SERVING');
  assert.equal(await client.checkHealth('memory.v1.Entries'), 'SERVING');
  const r = await client.entries.Write({ namespace: 'raw:node:test', key: 'k',
    value: Buffer.from('v'), contentType: 'text/plain', metadata: { source: 'node', n: 2 } });
  assert.equal(r.created, true);
  assert.equal(r.meta.version, 1);
  assert.equal(r.meta.owner, 'client-test');
  const e = (await client.entries.Read({ namespace: 'raw:node:test', key: 'k' })).entry;
  assert.equal(e.value.toString(), 'v');
  assert.deepEqual(e.metadata, { source: 'node', n: 2 }); // Struct as plain JSON
});

test('namespaced memory: dict-like reads, explicit writes, wildcard listing', async () => {
  const memory = client.memory('planner:trip:prefs');
  assert.equal(await memory.get('user_style'), undefined);
  assert.equal(await memory.has('user_style'), false);
  await memory.write('user_style', 'terse');
  await memory.write('user_langs', ['C', 'Go']);
  await memory.write('blob', Buffer.from([0, 1, 2]));
  await memory.write('user%x', 'literal percent', { tags: ['t1'] });
  await memory.inNamespace('planner:trip:plan').write('user_goal', { city: 'Lyon' });
  await memory.write('user_elsewhere', 'other agent', { namespace: 'coder:trip:prefs' });
  assert.equal(await memory.get('user_style'), 'terse');
  assert.deepEqual(await memory.get('user_langs'), ['C', 'Go']);
  assert.deepEqual(await memory.get('blob'), Buffer.from([0, 1, 2]));
  assert.deepEqual(await memory.get('user_goal', { namespace: 'planner:trip:plan' }),
    { city: 'Lyon' });
  assert.equal((await memory.entry('user%x')).tags[0], 't1');
  // `_` and `%` match themselves; `*` is the only wildcard.
  assert.deepEqual((await memory.listKeys('user_*')).map((k) => k.key),
    ['user_langs', 'user_style']);
  assert.deepEqual(await memory.listKeys('user_*', { namespace: 'planner:*:*' }), [
    { namespace: 'planner:trip:plan', key: 'user_goal' },
    { namespace: 'planner:trip:prefs', key: 'user_langs' },
    { namespace: 'planner:trip:prefs', key: 'user_style' },
  ]);
  assert.equal((await memory.listKeys('*', { namespace: '*:trip:*' })).length, 6);
  assert.equal((await memory.listKeys('*', { namespace: '*:*:*', limit: 2 })).length, 2);
  // Reads never write: reading a missing key leaves nothing behind.
  const before = await client.entries.Stats({ namespacePattern: 'planner:*:*' });
  assert.equal(await memory.get('never_written'), undefined);
  const after = await client.entries.Stats({ namespacePattern: 'planner:*:*' });
  assert.equal(after.entryCount, before.entryCount);
  assert.equal(await memory.delete('user_style'), true);
  assert.equal(await memory.delete('user_style'), false);
  assert.equal(await memory.get('user_style'), undefined);
  // Compare-and-set on write: 0 = only if absent.
  await rejects(() => memory.write('user_langs', 'x', { expectedVersion: 0 }), 'ABORTED');
});

test('errors carry the gRPC code and memoryd message; bad input is refused', async () => {
  const anon = new MemorydClient({ target: server.address });
  try {
    await rejects(() => anon.memory('a:b:c').get('k'), 'UNAUTHENTICATED', /token/i);
  } finally {
    anon.close();
  }
  const ro = new MemorydClient({ target: server.address, token: server.tokens.readonly });
  try {
    await rejects(() => ro.memory('a:b:c').write('k', 'v'), 'PERMISSION_DENIED',
      /entries:write/);
    assert.equal(await ro.memory('a:b:c').get('k'), undefined); // reading is allowed
  } finally {
    ro.close();
  }
  await rejects(() => client.memory('not-a-namespace').write('k', 'v'), 'INVALID_ARGUMENT',
    /namespace/);
  // Wrong types never reach the wire.
  await rejects(() => client.entries.Write({ namespace: 7, key: 'k' }), 'INVALID_ARGUMENT',
    /request\.namespace: a string expected, got number 7/);
  await rejects(() => client.entries.Read({ namespace: 'a:b:c', kee: 'k' }), 'INVALID_ARGUMENT',
    /no field "kee"/);
  await rejects(() => client.memory('a:b:c').write('k', 'v', { label: 'LABEL_TOP' }),
    'INVALID_ARGUMENT', /one of LABEL_UNSPECIFIED/);
  await rejects(() => client.board('t').post('k', () => 1), 'INVALID_ARGUMENT',
    /not a JSON value/);
});

test('a 1 ms deadline ends a call DEADLINE_EXCEEDED, never a hang', async () => {
  // A stream that would run forever, with 1 ms to live.
  const started = Date.now();
  await rejects(async () => {
    for await (const ev of client.board('deadline').subscribe({ reconnect: false,
      timeoutMs: 1 })) void ev;
  }, 'DEADLINE_EXCEEDED');
  // A unary call to a server that accepts the connection and never answers.
  const silent = net.createServer(() => {});
  await new Promise((r) => silent.listen(0, '127.0.0.1', r));
  const c = new MemorydClient({ target: `127.0.0.1:${silent.address().port}`, token: 'x' });
  try {
    await rejects(() => c.memory('a:b:c').get('k', { timeoutMs: 1 }), 'DEADLINE_EXCEEDED');
  } finally {
    c.close();
    silent.close();
  }
  assert.ok(Date.now() - started < 5000);
});

test('blackboard: compare-and-set retry, claims, a subscription that resumes', async () => {
  const board = client.board(`node-${process.pid}-${Date.now()}`);
  await board.post('plan', { steps: 3 });
  assert.deepEqual(await board.get('plan'), { steps: 3 });
  // Eight concurrent read-modify-writes: none is lost.
  await Promise.all(Array.from({ length: 8 }, () => board.update('count', (n) => (n || 0) + 1)));
  assert.equal(await board.get('count'), 8);
  assert.equal(await board.claim('subtask/1', 'a', { leaseSeconds: 30 }), true);
  assert.equal(await board.claim('subtask/1', 'b', { leaseSeconds: 30 }), false);
  assert.equal(await board.claim('subtask/1', 'a', { leaseSeconds: 30, renew: true }), true);

  const sub = board.subscribe();
  const it = sub[Symbol.asyncIterator]();
  const snap = (await it.next()).value;
  assert.equal(snap.kind, 'BLACKBOARD_EVENT_KIND_SNAPSHOT');
  assert.deepEqual(snap.items.find((i) => i.key === 'plan').value, { steps: 3 });
  await board.post('step', 1);
  const put = (await it.next()).value;
  assert.equal(put.kind, 'BLACKBOARD_EVENT_KIND_PUT');
  assert.equal(put.items[0].value, 1);
  sub.cancel();
  assert.equal((await it.next()).done, true);
  // Two changes while away; resuming gets exactly them, no snapshot.
  await board.post('step', 2);
  await board.delete('plan');
  const resumed = board.subscribe({ afterVersion: sub.version, boardId: sub.boardId });
  const kinds = [];
  for await (const ev of resumed) {
    kinds.push(ev.kind);
    if (kinds.length === 2) resumed.cancel();
  }
  assert.deepEqual(kinds, ['BLACKBOARD_EVENT_KIND_PUT', 'BLACKBOARD_EVENT_KIND_DELETE']);
});

test('Audit.Watch and Router.QueryStream as async iterators', async () => {
  const watch = client.audit.Watch({});
  const it = watch[Symbol.asyncIterator]();
  const first = it.next();
  await new Promise((r) => setTimeout(r, 300)); // registered
  await client.memory('audit:node:test').write('watched', 'v');
  let rec;
  for (let r = await first; !r.done; r = await it.next()) {
    if (r.value.record?.method === '/memory.v1.Entries/Write') { rec = r.value.record; break; }
  }
  watch.cancel();
  assert.ok(rec, 'the write was seen on the audit stream');
  assert.equal(rec.principal, 'client-test');

  await client.memory('route:node:test').write('fact', 'routed');
  const reports = [];
  const results = [];
  for await (const part of client.router.QueryStream({
    recentLookup: { namespace: 'route:node:test', key: 'fact' }, limit: 5 })) {
    if (part.report) reports.push(part.report);
    results.push(...part.results);
  }
  assert.ok(reports.length > 0, 'tier reports streamed');
  assert.ok(results.length > 0, 'the entry came back');
});

test('the example agent runs', async () => {
  // Boards live in the Redis every test shares: the count goes on from there.
  const runs = ((await client.board('example-task').get('runs')) || 0) + 1;
  const out = await new Promise((resolve, reject) => {
    execFile(process.execPath, [path.join(__dirname, '..', 'example.js'), server.address],
      { env: { ...process.env, MEMORYD_TOKEN: server.token }, timeout: 30000 },
      (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`))
        : resolve(stdout)));
  });
  assert.match(out, /health: SERVING/);
  assert.match(out, /user_style: terse, with examples/);
  assert.match(out, /board: claimed subtask\/summary/);
  assert.match(out, new RegExp(`board: runs = ${runs}\n`));
  const noToken = await new Promise((resolve) => {
    execFile(process.execPath, [path.join(__dirname, '..', 'example.js'), server.address],
      { env: { ...process.env, MEMORYD_TOKEN: '' }, timeout: 30000 },
      (err, stdout, stderr) => resolve({ code: err ? err.code : 0, stderr }));
  });
  assert.equal(noToken.code, 1);
  assert.match(noToken.stderr, /UNAUTHENTICATED/);
});
