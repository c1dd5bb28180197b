'use strict';
// The MCP tools of memoryd-mcp: memoryd's entries, working memory,
// sessions, knowledge graph, blackboards and forget, with JSON Schemas (from zod) and descriptions
// written for a language model. Every tool calls memoryd through the
// session's MemorydClient, whose token came from the environment (stdio) or
// the HTTP session's Authorization header: no tool takes a token, and an
// argument a tool does not know is refused, so a call cannot widen what the
// token allows. memoryd's refusals come back as tool errors that carry its
// status code and message.

const { randomUUID } = require('crypto');
const { z } = require('zod');
const { MemorydError, duration, toDate } = require('memoryd-client');

const LABELS = ['public', 'internal', 'confidential', 'secret'];
const label = z.enum(LABELS).optional()
  .describe('Sensitivity label of the record (default: the token\'s write floor)');
const namespace = z.string().min(1)
  .describe('Namespace: three ":"-separated segments, e.g. "planner:trip:prefs" (agent:workflow:node)');
const namespacePattern = z.string().optional()
  .describe('Namespace pattern where "*" matches within a segment, e.g. "planner:*:*" (default "*:*:*")');
const key = z.string().min(1).describe('Key within the namespace (no "*")');
const expectedVersion = z.number().int().min(0).optional()
  .describe('Only change the record if its version is this (0 = only if absent); else ABORTED');
const json = z.any();

const toLabel = (l) => (l ? `LABEL_${l.toUpperCase()}` : undefined);

// Working memory: which memory of a node (its global one, or a thread's).
const memoryShape = {
  node: namespace.describe('The graph node whose memory this is: "agent:workflow:node"'),
  thread_id: z.string().min(1).optional()
    .describe('A thread\'s own memory; absent: the node\'s memory shared by all its threads'),
};
const memoryAddress = (a) => ({ node: a.node,
  scope: a.thread_id ? 'WORKING_MEMORY_SCOPE_PER_THREAD' : 'WORKING_MEMORY_SCOPE_GLOBAL',
  threadId: a.thread_id });
const docPath = z.string().describe('Document path, e.g. "/notes/plan" (segments of letters, ' +
  'digits, "_", "-" and spaces; no "." or "..")');

// A memory command's argument a model left out: a tool error naming it.
function requireArgs(a, command, names) {
  const missing = names.filter((n) => a[n] === undefined);
  if (missing.length)
    throw new ToolInputError(`${command} needs ${missing.join(' and ')}`);
}
class ToolInputError extends Error {}

// A session as a model reads it.
const sessionView = (s) => ({ session_id: s.sessionId, state: s.state.replace(/^SESSION_STATE_/, '')
  .toLowerCase(), durable: s.durable, expire_time: s.expireTime, purge_time: s.purgeTime });

// The commands of the `session` tool.
const SESSION_COMMANDS = {
  async start(c, a) {
    const r = await c.session.Start({ durable: a.durable || false,
      duration: a.duration_seconds !== undefined ? duration(a.duration_seconds) : undefined });
    return sessionView(r.session);
  },
  async set(c, a) {
    requireArgs(a, 'set', ['session_id', 'key', 'value']);
    const r = await c.session.Set({ sessionId: a.session_id, key: a.key, value: a.value,
      label: toLabel(a.label) });
    return { key: a.key, version: r.meta.version, session: sessionView(r.session) };
  },
  async get(c, a) {
    requireArgs(a, 'get', ['session_id', 'key']);
    const r = await c.session.Get({ sessionId: a.session_id, key: a.key });
    return { key: a.key, value: r.record.value.toString('utf8'), version: r.record.meta.version,
      session: sessionView(r.session) };
  },
  async list(c, a) {
    requireArgs(a, 'list', ['session_id']);
    const r = await c.session.List({ sessionId: a.session_id, withValues: true });
    return { items: Object.fromEntries(r.records.map((x) => [x.key, x.value.toString('utf8')])),
      session: sessionView(r.session) };
  },
  async end(c, a) {
    requireArgs(a, 'end', ['session_id']);
    const r = await c.session.End({ sessionId: a.session_id });
    return { record_count: r.recordCount, session: sessionView(r.session) };
  },
};

// The five commands of the `memory` tool.
const MEMORY_COMMANDS = {
  async read(c, a) {
    requireArgs(a, 'read', ['path']);
    const d = (await c.working.Read({ memory: memoryAddress(a), path: a.path })).document;
    return { path: d.path, content: d.content, chars: d.chars, version: d.meta.version };
  },
  async list(c, a) {
    const r = await c.working.List({ memory: memoryAddress(a), path: a.path ?? '/',
      pageSize: a.page_size, pageToken: a.page_token });
    return { documents: r.documents.map((d) => ({ path: d.path, chars: d.chars,
      version: d.meta.version })), next_page_token: r.nextPageToken || undefined };
  },
  async append(c, a) {
    requireArgs(a, 'append', ['path', 'text']);
    const r = await c.working.Append({ memory: memoryAddress(a), path: a.path, text: a.text,
      label: toLabel(a.label), expectedVersion: a.expected_version });
    return { path: a.path, created: r.created, chars: r.chars, version: r.meta.version };
  },
  async update(c, a) {
    requireArgs(a, 'update', ['path', 'old_text', 'new_text']);
    const r = await c.working.Update({ memory: memoryAddress(a), path: a.path,
      oldText: a.old_text, newText: a.new_text, maxReplacements: a.max_replacements,
      expectedVersion: a.expected_version });
    return { replacement_count: r.replacementCount, chars: r.chars, version: r.meta?.version };
  },
  async delete(c, a) {
    requireArgs(a, 'delete', ['path']);
    const r = await c.working.DeleteDocument({ memory: memoryAddress(a), path: a.path,
      recursive: a.recursive || false, expectedVersion: a.expected_version });
    return { deleted_count: r.deletedCount };
  },
};

// Long-term memory by text: the collection remember writes and recall reads.
const DEFAULT_COLLECTION = 'memories';
const collectionArg = z.string().min(1).max(64).optional()
  .describe(`Collection of memories (default "${DEFAULT_COLLECTION}", created on first use)`);

// Upserts one text point, creating the collection when it does not exist
// yet (dims 0: sized by memoryd's embedder, or text only without one).
async function upsertText(c, collection, point) {
  try {
    await c.episodic.Upsert({ collection, points: [point] });
  } catch (err) {
    if (!(err instanceof MemorydError) || err.codeName !== 'NOT_FOUND') throw err;
    try {
      await c.episodic.CreateCollection({ name: collection, dims: 0,
        distance: 'DISTANCE_COSINE' });
    } catch (e) {
      if (!(e instanceof MemorydError) || e.codeName !== 'ALREADY_EXISTS') throw e;
    }
    await c.episodic.Upsert({ collection, points: [point] });
  }
}

// A time given as ISO 8601 text as a google.protobuf.Timestamp.
function timestamp(iso) {
  const ms = Date.parse(iso);
  return { seconds: Math.floor(ms / 1000), nanos: (((ms % 1000) + 1000) % 1000) * 1e6 };
}

// recall's time window, recency boost and diversity as RecallOptions
// (undefined: none).
function recallOptions(a) {
  if (a.since === undefined && a.until === undefined && a.recency_half_life_hours === undefined &&
    a.diversity === undefined) return undefined;
  const timeRange = a.since !== undefined || a.until !== undefined ? {
    startTime: a.since !== undefined ? timestamp(a.since) : undefined,
    endTime: a.until !== undefined ? timestamp(a.until) : undefined } : undefined;
  return { timeRange, diversity: a.diversity,
    recencyHalfLife: a.recency_half_life_hours !== undefined
      ? duration(Math.round(a.recency_half_life_hours * 3600)) : undefined };
}

// A recall result as a model reads it.
function recallView(r) {
  // The point's text; memories remembered before points kept one have it
  // in the payload.
  const textOf = (p) => p.text || p.payload?.text;
  // Which searches found it ("lexical" by its words, "vector" by meaning)
  // and its rank in each.
  const foundBy = (r.searchParts || []).map((p) =>
    ({ part: p.part.replace(/^SEARCH_PART_/, '').toLowerCase(), rank: p.rank }));
  const found_by = foundBy.length ? foundBy : undefined;
  if (r.record === 'entity')
    return { kind: 'entity', score: r.score, ...entityView(r.entity),
      memory: r.entityPoint ? textOf(r.entityPoint) : undefined, found_by };
  const { text, ...rest } = r.point.payload || {};
  const updated = toDate(r.point.meta?.updateTime);
  return { kind: 'memory', score: r.score, id: r.point.id.uuid || String(r.point.id.num),
    text: r.point.text || text, payload: Object.keys(rest).length ? rest : undefined,
    label: r.point.meta?.label, updated: updated ? updated.toISOString() : undefined, found_by };
}

// An Entry as a model reads it: text as text, other bytes as base64.
function entryView(e, withValue = true) {
  const out = { namespace: e.namespace, key: e.key, content_type: e.contentType,
    size_bytes: e.sizeBytes, tags: e.tags, metadata: e.metadata, version: e.meta?.version,
    label: e.meta?.label, owner: e.meta?.owner };
  if (withValue && e.value && (e.value.length > 0 || e.sizeBytes === 0)) {
    const type = (e.contentType || '').split(';')[0].trim();
    if (type.startsWith('text/') || type === 'application/json' || type === '') {
      out.value = e.value.toString('utf8');
    } else {
      out.value_base64 = e.value.toString('base64');
    }
  }
  return out;
}

const result = (obj) => ({ content: [{ type: 'text', text: JSON.stringify(obj, null, 1) }] });

// memoryd's refusal as an MCP tool error a model can read.
function toolError(err) {
  if (!(err instanceof MemorydError)) throw err;
  return { isError: true,
    content: [{ type: 'text', text: `memoryd refused: ${err.codeName}: ${err.details}` }] };
}

// The tools, as [name, description, input shape, handler(client, args)].
const TOOLS = [
  ['save_memory', 'Save a memory entry (create or replace) under namespace/key. Use for facts, ' +
    'preferences and notes worth keeping. Returns its version.', {
    namespace, key,
    value: z.string().describe('The content to remember (text; JSON as a string is fine)'),
    content_type: z.string().optional().describe('MIME type of value (default text/plain)'),
    metadata: z.record(z.string(), json).optional().describe('JSON object stored beside the value'),
    tags: z.array(z.string()).optional().describe('Tags to find the entry by'),
    ttl_seconds: z.number().positive().optional().describe('Forget the entry after this many seconds'),
    expected_version: expectedVersion, label,
  }, async (c, a) => {
    const r = await c.entries.Write({ namespace: a.namespace, key: a.key, value: a.value,
      contentType: a.content_type || 'text/plain', metadata: a.metadata, tags: a.tags,
      ttl: a.ttl_seconds !== undefined ? duration(a.ttl_seconds) : undefined,
      expectedVersion: a.expected_version, label: toLabel(a.label) });
    return { saved: `${a.namespace}/${a.key}`, created: r.created, version: r.meta.version };
  }],
  ['read_memory', 'Read one memory entry by namespace and key (value, tags, metadata, version).', {
    namespace, key,
  }, async (c, a) => entryView((await c.entries.Read({ namespace: a.namespace, key: a.key })).entry)],
  ['search_memories', 'Find memory entries by a term (a question or words: entries sharing any ' +
    'of its words in any form, best match first, each with its score; or with exact, the term ' +
    'as written, most recently updated first), tags and content type.', {
    namespace_pattern: namespacePattern,
    term: z.string().optional().describe('What to look for in the key or value'),
    exact: z.boolean().optional()
      .describe('Match the term as written (a case-insensitive substring) instead of ranking'),
    tags: z.array(z.string()).optional().describe('Entries must carry all these tags'),
    content_type: z.string().optional(),
    limit: z.number().int().min(1).max(1000).optional().describe('At most this many (default 20)'),
    with_values: z.boolean().optional().describe('Include values (default true)'),
  }, async (c, a) => {
    const withValues = a.with_values ?? true;
    const ranked = !!a.term && !a.exact;
    const r = await c.entries.Search({ namespacePattern: a.namespace_pattern, term: a.term,
      tags: a.tags, contentType: a.content_type, limit: a.limit ?? 20, withValues,
      match: ranked ? 'TEXT_MATCH_RANKED' : 'TEXT_MATCH_STRICT' });
    return { entries: r.entries.map((e, i) => ({ ...entryView(e, withValues),
      score: ranked ? r.scores[i] : undefined })) };
  }],
  ['list_memories', 'List memory entries whose namespace and key match patterns ("*" is the ' +
    'wildcard), ordered by namespace then key, a page at a time.', {
    namespace_pattern: namespacePattern,
    key_pattern: z.string().optional().describe('Key pattern, e.g. "user_*" (default "*")'),
    with_values: z.boolean().optional().describe('Include values (default false)'),
    page_size: z.number().int().min(1).max(1000).optional(),
    page_token: z.string().optional().describe('next_page_token of the previous page'),
  }, async (c, a) => {
    const r = await c.entries.List({ namespacePattern: a.namespace_pattern,
      keyPattern: a.key_pattern, withValues: a.with_values ?? false, pageSize: a.page_size,
      pageToken: a.page_token });
    return { entries: r.entries.map((e) => entryView(e, a.with_values ?? false)),
      next_page_token: r.nextPageToken || undefined };
  }],
  ['delete_memory', 'Delete one memory entry.', { namespace, key,
    expected_version: expectedVersion }, async (c, a) => {
    await c.entries.DeleteEntry({ namespace: a.namespace, key: a.key,
      expectedVersion: a.expected_version });
    return { deleted: `${a.namespace}/${a.key}` };
  }],
  ['append_memory', 'Append text to the end of an existing memory entry.', {
    namespace, key, value: z.string().describe('Text to append'), expected_version: expectedVersion,
  }, async (c, a) => {
    const r = await c.entries.Append({ namespace: a.namespace, key: a.key, value: a.value,
      expectedVersion: a.expected_version });
    return { version: r.meta.version, size_bytes: r.sizeBytes };
  }],
  ['replace_in_memory', 'Replace occurrences of a text inside a memory entry; returns how many ' +
    'were replaced (0 changes nothing).', {
    namespace, key, find: z.string().min(1).describe('Text to find'),
    replacement: z.string().describe('Text to put in its place'),
    max_replacements: z.number().int().min(0).optional().describe('0 or absent = all'),
    expected_version: expectedVersion,
  }, async (c, a) => {
    const r = await c.entries.Replace({ namespace: a.namespace, key: a.key, find: a.find,
      replacement: a.replacement, maxReplacements: a.max_replacements,
      expectedVersion: a.expected_version });
    return { replacement_count: r.replacementCount, version: r.meta?.version };
  }],
  ['memory_stats', 'Count and size the memory entries visible to you under a namespace pattern.', {
    namespace_pattern: namespacePattern,
  }, async (c, a) => {
    const r = await c.entries.Stats({ namespacePattern: a.namespace_pattern });
    return { entry_count: r.entryCount, namespace_count: r.namespaceCount,
      value_bytes: r.valueBytes };
  }],
  ['memory', 'Working memory: short text documents you keep at paths for a graph node (shared ' +
    'by its threads, or one thread\'s own). Commands: read (a document), list (paths under ' +
    'path, default "/"), append (text to a document, creating it), update (replace old_text ' +
    'with new_text, returns the count) and delete (a document, or with recursive everything ' +
    'under path).', {
    command: z.enum(Object.keys(MEMORY_COMMANDS)), ...memoryShape,
    path: docPath.optional(),
    text: z.string().optional().describe('append: the text to add'),
    old_text: z.string().min(1).optional().describe('update: the text to find'),
    new_text: z.string().optional().describe('update: what replaces it'),
    max_replacements: z.number().int().min(0).optional().describe('update: 0 or absent = all'),
    recursive: z.boolean().optional().describe('delete: also every document under path'),
    page_size: z.number().int().min(1).max(1000).optional().describe('list: paths per page'),
    page_token: z.string().optional().describe('list: next_page_token of the previous page'),
    expected_version: expectedVersion, label,
  }, (c, a) => MEMORY_COMMANDS[a.command](c, a)],
  ['render_memory', 'Render a working memory as text for your prompt, within max_chars: every ' +
    'document ("full"), or only the paths ("tree"). A thread\'s empty memory falls back to the ' +
    'node\'s shared one, and a "full" text too long falls back to the tree; the result says ' +
    'which.', {
    ...memoryShape,
    content: z.enum(['full', 'tree']).optional().describe('Default full'),
    max_chars: z.number().int().min(1).max(500000).optional().describe('Default 4000'),
  }, async (c, a) => {
    const r = await c.working.Render({ memory: memoryAddress(a),
      content: a.content ? `WORKING_MEMORY_CONTENT_${a.content.toUpperCase()}` : undefined,
      maxChars: a.max_chars });
    return { text: r.text, content: r.content.replace(/^WORKING_MEMORY_CONTENT_/, '').toLowerCase(),
      scope: r.scope === 'WORKING_MEMORY_SCOPE_GLOBAL' ? 'node' : 'thread',
      tree_fallback: r.treeFallback, global_fallback: r.globalFallback, truncated: r.truncated,
      document_count: r.documentCount, chars: r.chars };
  }],
  ['session', 'Session memory: a key-value scratchpad that lives while it is used and then ' +
    'expires. Commands: start (returns session_id; durable keeps it in PostgreSQL too), set ' +
    '(a value under a key), get (one key), list (every key) and end (the whole session).', {
    command: z.enum(Object.keys(SESSION_COMMANDS)),
    session_id: z.string().min(1).optional().describe('get, set, list, end: the session'),
    key: z.string().min(1).optional().describe('get, set: the key'),
    value: z.string().optional().describe('set: the value (text)'),
    duration_seconds: z.number().int().min(1).max(604800).optional()
      .describe('start: how long it lives unused (default 1800)'),
    durable: z.boolean().optional().describe('start: write it through to PostgreSQL'),
    label,
  }, (c, a) => SESSION_COMMANDS[a.command](c, a)],
  ['remember', 'Remember a text in long-term memory, to be found again with recall (by its ' +
    'words, and by meaning when memoryd has an embedder). Returns its id.', {
    text: z.string().min(1).max(32768).describe('What to remember, in plain words'),
    collection: collectionArg,
    entity_id: z.string().min(1).optional()
      .describe('The knowledge-graph entity this memory is about (recall then merges them)'),
    payload: z.record(z.string(), json).optional().describe('JSON kept with the memory'),
    label,
  }, async (c, a) => {
    const id = randomUUID();
    const payload = { ...(a.payload || {}) };
    if (a.entity_id) payload.entity_id = a.entity_id;
    const collection = a.collection || DEFAULT_COLLECTION;
    await upsertText(c, collection, { id: { uuid: id }, text: a.text, payload,
      label: toLabel(a.label) });
    return { remembered: id, collection };
  }],
  ['recall', 'Recall what is remembered about a text: the memories that best match it (ranked ' +
    'by its words; by meaning too when memoryd has an embedder) and the knowledge-graph ' +
    'entities sharing its words, best first, from your own memory (or a user\'s, with the ' +
    ':all read scopes).', {
    text: z.string().min(1).max(32768).describe('What to recall, e.g. a question'),
    collection: collectionArg,
    user: z.string().min(1).optional().describe('Whose memory (default: yours)'),
    limit: z.number().int().min(1).max(1000).optional().describe('At most this many (default 10)'),
    since: z.string().datetime({ offset: true }).optional()
      .describe('Only memories remembered (or last changed) at or after this time, ISO 8601'),
    until: z.string().datetime({ offset: true }).optional()
      .describe('Only memories remembered (or last changed) before this time, ISO 8601'),
    recency_half_life_hours: z.number().min(1 / 3600).max(87600).optional()
      .describe('Favour recent memories: one this many hours old counts half as much'),
    diversity: z.number().min(0).max(1).optional()
      .describe('0 to 1: let near-duplicate memories give way to different ones (0.5 to 0.7 ' +
        'typical; default 0, none)'),
  }, async (c, a) => {
    const r = await c.router.Query({ recall: { text: a.text,
      collection: a.collection || DEFAULT_COLLECTION, user: a.user, options: recallOptions(a) },
    limit: a.limit });
    return { results: r.results.map(recallView), partial: r.partial || undefined,
      skipped: r.tiers.filter((t) => t.outcome !== 'TIER_OUTCOME_ANSWERED')
        .map((t) => `${t.tier.replace(/^TIER_/, '').toLowerCase()}: ${t.detail}`) };
  }],
  ['put_entity', 'Create or replace an entity of the knowledge graph (a person, project, ' +
    'document, ...).', {
    id: z.string().min(1), type: z.string().min(1).describe('Entity type, e.g. "person"'),
    name: z.string().optional(), properties: z.record(z.string(), json).optional(),
    expected_version: expectedVersion, label,
  }, async (c, a) => {
    const r = await c.global.PutEntity({ id: a.id, type: a.type, name: a.name,
      properties: a.properties, expectedVersion: a.expected_version, label: toLabel(a.label) });
    return { entity: entityView(r.entity), created: r.created };
  }],
  ['get_entity', 'Get one entity of the knowledge graph by id.', { id: z.string().min(1) },
    async (c, a) => entityView((await c.global.GetEntity({ id: a.id })).entity)],
  ['query_entities', 'Find entities by type, text and property predicates.', {
    type: z.string().optional(),
    text: z.string().optional().describe('What to look for in the name and properties: ' +
      'entities sharing any of its words in any form, best match first, with scores'),
    exact: z.boolean().optional().describe('Require every word of text, in web-search syntax ' +
      '("quoted phrase", or, -excluded), instead of ranking'),
    where: z.array(z.object({ path: z.string().describe('Property path, e.g. "city"'),
      op: z.enum(['eq', 'ne', 'lt', 'le', 'gt', 'ge', 'contains']), value: json }).strict())
      .optional(),
    page_size: z.number().int().min(1).max(1000).optional(),
    page_token: z.string().optional(),
  }, async (c, a) => {
    const ranked = !!a.text && !a.exact;
    const r = await c.global.QueryEntities({ type: a.type, textQuery: a.text,
      predicates: (a.where || []).map((p) => ({ path: p.path,
        op: `PREDICATE_OP_${p.op.toUpperCase()}`, value: p.value })),
      pageSize: a.page_size, pageToken: a.page_token,
      textMatch: ranked ? 'TEXT_MATCH_RANKED' : 'TEXT_MATCH_STRICT' });
    return { entities: r.entities.map((e, i) => ({ ...entityView(e),
      score: a.text ? r.scores[i] : undefined })),
    next_page_token: r.nextPageToken || undefined };
  }],
  ['relate', 'Create or replace a relationship source -[type]-> target between two entities.', {
    source_id: z.string().min(1), type: z.string().min(1).describe('e.g. "works_on"'),
    target_id: z.string().min(1), properties: z.record(z.string(), json).optional(), label,
  }, async (c, a) => {
    const r = await c.global.PutRelationship({ sourceId: a.source_id, type: a.type,
      targetId: a.target_id, properties: a.properties, label: toLabel(a.label) });
    return { relationship: `${a.source_id} -[${a.type}]-> ${a.target_id}`, created: r.created,
      version: r.relationship.meta.version };
  }],
  ['traverse', 'Walk the knowledge graph from an entity: the entities reached and the edges.', {
    start_id: z.string().min(1),
    relationship_types: z.array(z.string()).optional().describe('Only these edge types'),
    direction: z.enum(['out', 'in', 'both']).optional().describe('Default out'),
    max_depth: z.number().int().min(1).max(16).optional(),
    limit: z.number().int().min(1).max(10000).optional(),
  }, async (c, a) => {
    const r = await c.global.Traverse({ startId: a.start_id,
      relationshipTypes: a.relationship_types,
      direction: a.direction ? `EDGE_DIRECTION_${a.direction.toUpperCase()}` : undefined,
      maxDepth: a.max_depth, limit: a.limit });
    return { nodes: r.nodes.map((n) => ({ depth: n.depth, ...entityView(n.entity) })),
      edges: r.edges.map((e) => `${e.sourceId} -[${e.type}]-> ${e.targetId}`),
      truncated: r.truncated };
  }],
  ['record_task', 'Record (create or update) a task an agent worked on, with its status, ' +
    'provenance, result and the entities it touched.', {
    id: z.string().min(1), type: z.string().min(1), description: z.string().optional(),
    status: z.enum(['pending', 'running', 'succeeded', 'failed', 'cancelled']),
    provenance: z.record(z.string(), json).optional(), result: z.record(z.string(), json).optional(),
    entity_ids: z.array(z.string()).optional(), label,
  }, async (c, a) => {
    const r = await c.global.RecordTask({ id: a.id, type: a.type, description: a.description,
      status: `TASK_STATUS_${a.status.toUpperCase()}`, provenance: a.provenance,
      result: a.result, entityIds: a.entity_ids, label: toLabel(a.label) });
    return { task: a.id, status: r.task.status, created: r.created, version: r.task.meta.version };
  }],
  ['blackboard_post', 'Post a JSON value under a key of a task\'s shared blackboard (other ' +
    'agents see it at once), or delete the key. expected_version 0 claims a key only if free.', {
    task_id: z.string().min(1), key, value: json.describe('Any JSON value'),
    delete: z.boolean().optional().describe('Delete the key instead'),
    expected_version: expectedVersion,
    lease_seconds: z.number().positive().optional()
      .describe('The key disappears after this unless posted again (claims)'),
    ttl_seconds: z.number().positive().optional().describe('Keep the board at least this long'),
    label,
  }, async (c, a) => {
    const r = await c.blackboard.Post({ taskId: a.task_id, key: a.key,
      value: a.delete ? undefined : a.value ?? null, deleteKey: a.delete || false,
      expectedVersion: a.expected_version, label: toLabel(a.label),
      leaseTtl: a.lease_seconds !== undefined ? duration(a.lease_seconds) : undefined,
      ttl: a.ttl_seconds !== undefined ? duration(a.ttl_seconds) : undefined });
    return { key: a.key, deleted: a.delete || false, version: r.meta?.version,
      board_created: r.boardCreated };
  }],
  ['blackboard_read', 'Read every key of a task\'s shared blackboard visible to you.', {
    task_id: z.string().min(1),
  }, async (c, a) => boardView(await c.blackboard.Read({ taskId: a.task_id }))],
  ['forget', 'Erase, from every memoryd store, the records of a data subject (records whose ' +
    'content carries subject_id) or of a principal, and return the signed receipt. dry_run ' +
    'only counts. Irreversible.', {
    subject_id: z.string().min(1).optional().describe('Erase records about this subject'),
    principal: z.string().min(1).optional()
      .describe('Erase every record this principal owns (default: none; give one of the two)'),
    dry_run: z.boolean().optional().describe('Count what would be erased, erase nothing'),
    reason: z.string().optional().describe('Why, for the audit trail'),
  }, async (c, a) => {
    const r = (await c.privacy.Forget({ subjectId: a.subject_id, principal: a.principal,
      dryRun: a.dry_run || false, reason: a.reason })).receipt;
    return { receipt_id: r.receiptId, dry_run: r.dryRun,
      erased: Object.fromEntries(r.counts.map((t) =>
        [t.tier.replace(/^TIER_/, '').toLowerCase(), t.erasedCount])),
      signed_receipt: r.signedReceipt };
  }],
];

function entityView(e) {
  return { id: e.id, type: e.type, name: e.name, properties: e.properties,
    version: e.meta?.version, label: e.meta?.label };
}

function boardView(r) {
  return { version: r.version, board_id: r.boardId,
    items: Object.fromEntries(r.items.map((it) => [it.key, { value: it.value,
      version: it.meta.version, owner: it.meta.owner }])) };
}

// Registers every tool on server; clientOf() is the session's MemorydClient.
function registerTools(server, clientOf) {
  for (const [name, description, shape, handler] of TOOLS) {
    server.registerTool(name, { description, inputSchema: z.object(shape).strict() },
      async (args) => {
        try {
          return result(await handler(clientOf(), args));
        } catch (err) {
          if (err instanceof ToolInputError)
            return { isError: true, content: [{ type: 'text', text: err.message }] };
          return toolError(err);
        }
      });
  }
}

module.exports = { registerTools, toolError, entryView, boardView, TOOL_NAMES: TOOLS.map((t) => t[0]) };
