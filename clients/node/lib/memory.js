'use strict';
// Memory: the key-value memory of one namespace (Entries), shaped the way
// agents use key-value memory: reads never write, writes are explicit.
//
//   const memory = client.memory('planner:trip:prefs');
//   await memory.write('user_style', 'terse');          // text/plain
//   await memory.get('user_style');                     // 'terse'
//   await memory.get('nothing');                        // undefined
//   await memory.listKeys('user_*');                    // [{ namespace, key }]
//   await memory.listKeys('*', { namespace: 'planner:*:*' });
//   await memory.inNamespace('planner:trip:plan').write('goal', { city: 'Lyon' });
//
// Values: a string is stored as text/plain, a Buffer as
// application/octet-stream, anything else as application/json; get()
// gives back a string for text/*, parsed JSON for application/json and a
// Buffer otherwise. Every method takes { namespace } to use another
// namespace for one call.

const { MemorydError, status } = require('./errors');
const { duration } = require('./values');

const LIST_LIMIT = 10000;

function encodeValue(value, contentType) {
  if (typeof value === 'string') return [Buffer.from(value, 'utf8'), contentType || 'text/plain'];
  if (value instanceof Uint8Array) return [value, contentType || 'application/octet-stream'];
  return [Buffer.from(JSON.stringify(value), 'utf8'), contentType || 'application/json'];
}

// An entry's value as get() returns it.
function decodeValue(entry) {
  const type = (entry.contentType || '').split(';')[0].trim().toLowerCase();
  if (type === 'application/json') return JSON.parse(entry.value.toString('utf8'));
  if (type.startsWith('text/')) return entry.value.toString('utf8');
  return entry.value;
}

class Memory {
  constructor(client, namespace) {
    this.client = client;
    this.namespace = namespace;
  }

  // The same memory under another namespace.
  inNamespace(namespace) {
    return new Memory(this.client, namespace);
  }

  // The whole Entry (value, content type, metadata, tags, meta), or
  // undefined when it is absent, expired or hidden from the caller.
  async entry(key, options = {}) {
    try {
      const r = await this.client.entries.Read(
        { namespace: options.namespace || this.namespace, key }, options);
      return r.entry;
    } catch (err) {
      if (err instanceof MemorydError && err.code === status.NOT_FOUND) return undefined;
      throw err;
    }
  }

  // The value of key (see above), or undefined.
  async get(key, options = {}) {
    const e = await this.entry(key, options);
    return e === undefined ? undefined : decodeValue(e);
  }

  async has(key, options = {}) {
    return (await this.entry(key, options)) !== undefined;
  }

  // Creates or replaces key. options: contentType, metadata (JSON object),
  // tags, ttlSeconds, expectedVersion (0 = only if absent), label. Returns
  // { meta, created }.
  async write(key, value, options = {}) {
    const [bytes, contentType] = encodeValue(value, options.contentType);
    const req = { namespace: options.namespace || this.namespace, key, value: bytes, contentType,
      metadata: options.metadata, tags: options.tags, label: options.label,
      expectedVersion: options.expectedVersion };
    if (options.ttlSeconds !== undefined) req.ttl = duration(options.ttlSeconds);
    return this.client.entries.Write(req, options);
  }

  // Deletes key: true, or false when there was nothing to delete.
  async delete(key, options = {}) {
    try {
      await this.client.entries.DeleteEntry(
        { namespace: options.namespace || this.namespace, key,
          expectedVersion: options.expectedVersion }, options);
      return true;
    } catch (err) {
      if (err instanceof MemorydError && err.code === status.NOT_FOUND) return false;
      throw err;
    }
  }

  // Keys matching keyPattern (`*` matches any run of characters) in this
  // namespace, or in every namespace matching options.namespace (a pattern
  // such as 'planner:*:*'), as [{ namespace, key }] in order; at most
  // options.limit (10000).
  async listKeys(keyPattern = '*', options = {}) {
    const limit = options.limit ?? LIST_LIMIT;
    const out = [];
    let pageToken = '';
    do {
      const r = await this.client.entries.List({
        namespacePattern: options.namespace || this.namespace, keyPattern,
        pageSize: Math.min(1000, limit - out.length), pageToken }, options);
      for (const e of r.entries) out.push({ namespace: e.namespace, key: e.key });
      pageToken = r.nextPageToken;
    } while (pageToken && out.length < limit);
    return out.slice(0, limit);
  }
}

module.exports = { Memory, encodeValue, decodeValue };
