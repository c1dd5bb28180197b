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
//  - sessions are bounded in number (--max-sessions: 503 beyond) and end
//    after --session-idle-ms without a request, closing their memoryd
//    streams.

const crypto = require('crypto');
const http = require('http');
const { StreamableHTTPServerTransport } =
  require('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { createSession } = require('./session');

const sha256 = (s) => crypto.createHash('sha256').update(s).digest();

function reply(res, status, message, headers = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
}

// The Host values a server listening on host:port answers as.
function defaultHosts(host, port) {
  const loopback = ['127.0.0.1', 'localhost', '[::1]', '::1'];
  const names = loopback.includes(host) ? ['127.0.0.1', 'localhost', '[::1]'] : [host];
  return names.map((n) => `${n}:${port}`);
}

// options: listenHost, listenPort, path, target, timeoutMs, allowedHosts
// (null = defaultHosts), allowedOrigins, maxSessions, sessionIdleMs, log.
// Resolves the listening http.Server (server.address() has the port) with
// closeAll() to end every session.
function startHttp(options) {
  const sessions = new Map(); // id -> { session, transport, tokenHash, lastUsed }
  let hosts = options.allowedHosts;
  const origins = new Set(options.allowedOrigins || []);
  const log = options.log;

  async function end(id, why) {
    const s = sessions.get(id);
    if (!s) return;
    sessions.delete(id);
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
    if (sessions.size >= options.maxSessions)
      return reply(res, 503, `too many sessions (--max-sessions=${options.maxSessions})`);
    const session = createSession({ target: options.target, token: auth[1],
      timeoutMs: options.timeoutMs });
    const entry = { session, tokenHash, lastUsed: Date.now(), transport: null };
    entry.transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => crypto.randomUUID(),
      onsessioninitialized: (sid) => {
        sessions.set(sid, entry);
        log(`session ${sid.slice(0, 8)} started`);
      },
    });
    await session.mcp.connect(entry.transport);
    await entry.transport.handleRequest(req, res);
    // Not an initialize request: the transport refused it, no session.
    if (!entry.transport.sessionId) await session.close();
    return undefined;
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
