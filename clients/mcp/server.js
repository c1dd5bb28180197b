#!/usr/bin/env node
'use strict';
// memoryd-mcp: memoryd as an MCP (Model Context Protocol) server, so agent
// hosts that speak MCP rather than gRPC can use its entries, knowledge
// graph, blackboards and forget. See README.md ("MCP server").
//
//   MEMORYD_TOKEN=$(cat .local/dev-token) node clients/mcp/server.js          # stdio
//   node clients/mcp/server.js --transport=http --listen=127.0.0.1:8765      # HTTP
//
// Over stdio the memoryd token comes from $MEMORYD_TOKEN; over HTTP from
// each session's `Authorization: Bearer` header. Never from tool arguments.

const { parseArgs } = require('util');
const { StdioServerTransport } = require('@modelcontextprotocol/sdk/server/stdio.js');
const { createSession } = require('./lib/session');
const { startHttp } = require('./lib/http');

const USAGE = `usage: memoryd-mcp [options]

  --transport=stdio|http     stdio (default): one session for the host that started
                             this process, token from $MEMORYD_TOKEN; http: Streamable
                             HTTP, a session per client, token from each session's
                             Authorization: Bearer header
  --target=HOST:PORT         memoryd's address ($MEMORYD_TARGET, default 127.0.0.1:50051)
  --timeout-ms=N             deadline of each memoryd call (default 5000)
  --listen=HOST:PORT         http: where to listen (default 127.0.0.1:8765; port 0 =
                             any). Anything but loopback exposes the server: put TLS in
                             front of it, and set --allowed-hosts
  --path=PATH                http: the MCP endpoint (default /mcp)
  --allowed-hosts=H:P,...    http: Host header values accepted (default: the listen
                             address, and localhost / 127.0.0.1 / [::1] on loopback)
  --allowed-origins=O,...    http: Origin header values accepted (default none: a
                             request with an Origin, i.e. from a web page, gets 403)
  --max-sessions=N           http: sessions at once (default 64)
  --session-idle-ms=N        http: a session ends after this long without a request
                             (default 1800000, 30 min)
  --help                     this text
`;

function fail(message) {
  process.stderr.write(`memoryd-mcp: ${message}\n`);
  process.exit(2);
}

function positiveInt(name, value) {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0) fail(`--${name} must be a positive integer, not ${value}`);
  return n;
}

function hostPort(name, value) {
  const m = /^(\[[^\]]+\]|[^:]+):(\d+)$/.exec(value);
  if (!m || Number(m[2]) > 65535) fail(`--${name} must be HOST:PORT, not ${value}`);
  return [m[1].replace(/^\[(.*)\]$/, '$1'), Number(m[2])];
}

async function main() {
  let opts;
  try {
    opts = parseArgs({ options: {
      transport: { type: 'string', default: 'stdio' },
      target: { type: 'string', default: process.env.MEMORYD_TARGET || '127.0.0.1:50051' },
      'timeout-ms': { type: 'string', default: '5000' },
      listen: { type: 'string', default: '127.0.0.1:8765' },
      path: { type: 'string', default: '/mcp' },
      'allowed-hosts': { type: 'string' },
      'allowed-origins': { type: 'string' },
      'max-sessions': { type: 'string', default: '64' },
      'session-idle-ms': { type: 'string', default: '1800000' },
      help: { type: 'boolean', default: false },
    } }).values;
  } catch (err) {
    fail(`${err.message}\n${USAGE}`);
  }
  if (opts.help) {
    process.stdout.write(USAGE);
    return;
  }
  const timeoutMs = positiveInt('timeout-ms', opts['timeout-ms']);
  const log = (m) => process.stderr.write(`memoryd-mcp: ${m}\n`);

  if (opts.transport === 'stdio') {
    const token = process.env.MEMORYD_TOKEN;
    if (!token) fail('MEMORYD_TOKEN is not set: the stdio transport takes memoryd\'s token from it');
    const session = createSession({ target: opts.target, token, timeoutMs });
    const transport = new StdioServerTransport();
    transport.onclose = () => session.close().then(() => process.exit(0));
    await session.mcp.connect(transport);
    log(`serving MCP on stdio for memoryd at ${opts.target}`);
    return;
  }
  if (opts.transport !== 'http') fail(`--transport must be stdio or http, not ${opts.transport}`);
  const [host, port] = hostPort('listen', opts.listen);
  const list = (s) => (s ? s.split(',').map((x) => x.trim()).filter(Boolean) : null);
  const server = await startHttp({
    listenHost: host, listenPort: port, path: opts.path, target: opts.target, timeoutMs,
    allowedHosts: list(opts['allowed-hosts']), allowedOrigins: list(opts['allowed-origins']),
    maxSessions: positiveInt('max-sessions', opts['max-sessions']),
    sessionIdleMs: positiveInt('session-idle-ms', opts['session-idle-ms']), log,
  });
  const where = host.includes(':') ? `[${host}]` : host;
  log(`serving MCP on http://${where}:${server.address().port}${opts.path} for memoryd at ` +
    `${opts.target}`);
  // On SIGTERM/SIGINT: end the sessions (their memoryd streams), stop
  // listening, and exit once connections close, or after 2 s regardless.
  const stop = async () => {
    setTimeout(() => process.exit(0), 2000).unref();
    await server.closeAll();
    server.close(() => process.exit(0));
    server.closeAllConnections?.();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((err) => fail(err.stack || String(err)));
