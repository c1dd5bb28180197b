'use strict';
// The Streamable HTTP transport of memoryd-mcp, under the MCP
// specification's security rules:
//  - it listens on loopback unless told otherwise (--listen);
//  - Host must be one this server answers as, and Origin (sent by
//    browsers) one allowed, against DNS rebinding: 403 otherwise;
//  - every request carries `Authorization: Bearer <memoryd token>` (401
//    otherwise); a session is created by an initialize request and bound to
//    its token: a request naming the session with another token gets 403,
//    so a leaked session id is no use without the token;
//  - initialize asks memoryd (Access.WhoAmI) whether the token is valid
//    before creating the session: a token memoryd refuses gets 401 and no
//    session, so made-up tokens cannot fill the session table;
//  - sessions are bounded in number (--max-sessions: 503 beyond) and per
//    token (--max-sessions-per-token: 429 beyond), counted from the moment
//    an initialize arrives so concurrent ones cannot overshoot, and end
//    after --session-idle-ms without a request, closing their memoryd
//    streams.

const crypto = require('crypto');
const http = require('http');
const { StreamableHTTPServerTransport } =
  require('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { status: grpcStatus } = require('memoryd-client');
const { createSession } = require('./session');

const sha256 = (s) => crypto.createHash('sha256').update(s).digest();

function reply(res, status, message, headers = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
}

// Session slots, overall and per token. take() is synchronous and runs
// before anything is awaited, so concurrent initializes cannot all pass the
// check; a slot is given back when its initialize fails or its session ends.
function sessionSlots(max, maxPerToken) {
  let total = 0;
  const held = new Map(); // token hash (hex) -> slots it holds
  return {
    // null when a slot was taken, else the refusal: [status, message].
    take(key) {
      const mine = held.get(key) || 0;
      if (mine >= maxPerToken) {
        return [429, 'too many sessions for this token ' +
          `(--max-sessions-per-token=${maxPerToken}): end one (DELETE with its Mcp-Session-Id) ` +
          'or wait for one to idle out'];
      }
      if (total >= max) return [503, `too many sessions (--max-sessions=${max}): try again later`];
      total++;
      held.set(key, mine + 1);
      return null;
    },
    give(key) {
      total--;
      const mine = held.get(key) - 1;
      if (mine > 0) held.set(key, mine);
      else held.delete(key);
    },
  };
}

// A header quoted-string can hold neither quotes nor backslashes nor
// control characters; memoryd's message is kept short too.
const quoted = (s) => String(s).replace(/[^\x20-\x7e]|["\\]/g, ' ').slice(0, 200);

// Asks memoryd whose token this is: null when it is valid, else the
// refusal [status, message, headers].
async function verifyToken(client, target) {
  try {
    await client.access.WhoAmI({});
    return null;
  } catch (err) {
    if (typeof err.code !== 'number') throw err;
    if (err.code === grpcStatus.UNAUTHENTICATED) {
      const challenge = 'Bearer realm="memoryd-mcp", error="invalid_token", ' +
        `error_description="${quoted(err.details)}"`;
      return [401, `memoryd refused the token: ${err.details}`, { 'www-authenticate': challenge }];
    }
    if (err.code === grpcStatus.PERMISSION_DENIED)
      return [403, `memoryd refused the token: ${err.message}`];
    return [503, `could not verify the token with memoryd at ${target}: ${err.message}`];
  }
}

// The Host values a server listening on host:port answers as.
function defaultHosts(host, port) {
  const loopback = ['127.0.0.1', 'localhost', '[::1]', '::1'];
  const names = loopback.includes(host) ? ['127.0.0.1', 'localhost', '[::1]'] : [host];
  return names.map((n) => `${n}:${port}`);
}

// options: listenHost, listenPort, path, target, timeoutMs, tls (the
// MemorydClient option, null = plaintext), allowedHosts (null =
// defaultHosts), allowedOrigins, maxSessions, maxSessionsPerToken,
// sessionIdleMs, log.
// Resolves the listening http.Server (server.address() has the port) with
// closeAll() to end every session.
function startHttp(options) {
  const sessions = new Map(); // id -> { session, transport, tokenHash, slotKey, lastUsed }
  const slots = sessionSlots(options.maxSessions, options.maxSessionsPerToken);
  let hosts = options.allowedHosts;
  const origins = new Set(options.allowedOrigins || []);
  const log = options.log;

  async function end(id, why) {
    const s = sessions.get(id);
    if (!s) return;
    sessions.delete(id);
    slots.give(s.slotKey);
    log(`session ${id.slice(0, 8)} ended (${why})`);
    await s.session.close();
  }

  async function handle(req, res) {
    const url = new URL(req.url, 'http://x');
    if (url.pathname !== options.path) return reply(res, 404, `not found: MCP is at ${options.path}`);
    if (!hosts.includes(req.headers.host))
      return reply(res, 403, `Host ${req.headers.host} is not allowed (--allowed-hosts)`);
    const origin = req.headers.origin;
    if (origin !== undefined && !origins.has(origin))
      return reply(res, 403, `Origin ${origin} is not allowed (--allowed-origins)`);
    const auth = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization || '');
    if (!auth) {
      return reply(res, 401, 'a memoryd capability token is required: Authorization: Bearer <token>',
        { 'www-authenticate': 'Bearer realm="memoryd-mcp"' });
    }
    const tokenHash = sha256(auth[1]);
    const id = req.headers['mcp-session-id'];
    if (id !== undefined) {
      const s = sessions.get(id);
      if (!s) return reply(res, 404, 'session not found (ended or never created): initialize again');
      if (!crypto.timingSafeEqual(s.tokenHash, tokenHash))
        return reply(res, 403, 'this session belongs to another token');
      s.lastUsed = Date.now();
      await s.transport.handleRequest(req, res);
      if (req.method === 'DELETE' && res.statusCode < 300) await end(id, 'closed by the client');
      return undefined;
    }
    if (req.method !== 'POST')
      return reply(res, 400, 'no Mcp-Session-Id: start a session with an initialize POST');
    return initialize(req, res, auth[1], tokenHash);
  }

  // An initialize request (a POST without Mcp-Session-Id): a slot first,
  // then memoryd's word on the token, then the session. The slot passes to
  // the session once it exists; if it never does, it is given back.
  async function initialize(req, res, token, tokenHash) {
    const slot = { key: tokenHash.toString('hex'), pending: true };
    const refused = slots.take(slot.key);
    if (refused) return reply(res, ...refused);
    try {
      await startSession(req, res, token, tokenHash, slot);
    } finally {
      if (slot.pending) slots.give(slot.key);
    }
    return undefined;
  }

  async function startSession(req, res, token, tokenHash, slot) {
    const session = createSession({ target: options.target, token, timeoutMs: options.timeoutMs,
      tls: options.tls });
    try {
      const refused = await verifyToken(session.client, options.target);
      if (refused) {
        if (refused[0] !== 401) log(`initialize refused: ${refused[1]}`);
        return reply(res, ...refused);
      }
      const entry = { session, tokenHash, slotKey: slot.key, lastUsed: Date.now(),
        transport: null };
      entry.transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => crypto.randomUUID(),
        onsessioninitialized: (sid) => {
          slot.pending = false; // the session's now, given back by end()
          sessions.set(sid, entry);
          log(`session ${sid.slice(0, 8)} started`);
        },
      });
      await session.mcp.connect(entry.transport);
      // Not an initialize request: the transport refuses it, no session.
      return await entry.transport.handleRequest(req, res);
    } finally {
      if (slot.pending) await session.close();
    }
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err) => {
      log(`request failed: ${err.stack || err}`);
      if (!res.headersSent) reply(res, 500, 'internal error');
      else res.end();
    });
  });
  const sweep = setInterval(() => {
    const cutoff = Date.now() - options.sessionIdleMs;
    for (const [id, s] of sessions) if (s.lastUsed < cutoff) end(id, 'idle');
  }, Math.min(60000, options.sessionIdleMs)).unref();
  server.closeAll = async () => {
    clearInterval(sweep);
    await Promise.all([...sessions.keys()].map((id) => end(id, 'shutdown')));
  };
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.listenPort, options.listenHost, () => {
      const port = server.address().port;
      if (!hosts) hosts = defaultHosts(options.listenHost, port);
      resolve(server);
    });
  });
}

module.exports = { startHttp, defaultHosts };
