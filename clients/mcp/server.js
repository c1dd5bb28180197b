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
// The channel to memoryd is TLS (--tls-ca, ...) or stays on this machine:
// plaintext to another host needs --allow-insecure-target.

const { parseArgs } = require('util');
const { StdioServerTransport } = require('@modelcontextprotocol/sdk/server/stdio.js');
const { createSession } = require('./lib/session');
const { startHttp } = require('./lib/http');
const { isLocalTarget, tlsFromFlags } = require('./lib/target');

const USAGE = `usage: memoryd-mcp [options]

  --transport=stdio|http     stdio (default): one session for the host that started
                             this process, token from $MEMORYD_TOKEN; http: Streamable
                             HTTP, a session per client, token from each session's
                             Authorization: Bearer header
  --target=HOST:PORT         memoryd's address ($MEMORYD_TARGET, default 127.0.0.1:50051)
  --timeout-ms=N             deadline of each memoryd call (default 5000)
  --tls-ca=FILE              TLS to memoryd, trusting the PEM certificates in FILE
                             (default plaintext)
  --tls-cert=FILE            with --tls-key: the client certificate (PEM) for a memoryd
                             that requires one (its --tls-client-ca); turns TLS on
  --tls-key=FILE             the client certificate's private key (PEM)
  --tls-server-name=NAME     the name memoryd's certificate must carry, when not the
                             target's host; turns TLS on
  --tls                      TLS to memoryd trusting the system's roots (implied by
                             any --tls-* flag)
  --allow-insecure-target    allow plaintext to a --target that is not loopback
                             (127.0.0.0/8, localhost, [::1]) or unix:, with a warning:
                             every token then crosses the network in cleartext.
                             Without it such a target is refused at startup
  --listen=HOST:PORT         http: where to listen (default 127.0.0.1:8765; port 0 =
                             any). Anything but loopback exposes the server: put TLS in
                             front of it, and set --allowed-hosts
  --path=PATH                http: the MCP endpoint (default /mcp)
  --allowed-hosts=H:P,...    http: Host header values accepted (default: the listen
                             address, and localhost / 127.0.0.1 / [::1] on loopback)
  --allowed-origins=O,...    http: Origin header values accepted (default none: a
                             request with an Origin, i.e. from a web page, gets 403)
  --max-sessions=N           http: sessions at once (default 64; 503 beyond)
  --max-sessions-per-token=N http: sessions at once of one token (default 8; 429
                             beyond). Every initialize has memoryd check its token
                             (Access.WhoAmI): one memoryd refuses gets 401, no session
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

// The TLS options of the channel to memoryd (null: plaintext). Refuses to
// start, before any connection, when the tokens would cross the network in
// cleartext and the operator has not said so (--allow-insecure-target).
function memorydTls(opts, log) {
  let tls;
  try {
    tls = tlsFromFlags(opts);
  } catch (err) {
    fail(err.message);
  }
  if (tls || isLocalTarget(opts.target)) return tls;
  if (!opts['allow-insecure-target']) {
    fail(`--target=${opts.target} is not a loopback address and the channel to it is plaintext: ` +
      'every session\'s memoryd token would cross the network in cleartext. Give --tls-ca=FILE ' +
      '(and --tls-cert/--tls-key if memoryd requires a client certificate), or ' +
      '--allow-insecure-target to accept that');
  }
  log(`WARNING: plaintext to memoryd at ${opts.target}, which is not loopback: every session's ` +
    'token crosses the network in cleartext (--allow-insecure-target)');
  return null;
}

async function main() {
  let opts;
  try {
    opts = parseArgs({ options: {
      transport: { type: 'string', default: 'stdio' },
      target: { type: 'string', default: process.env.MEMORYD_TARGET || '127.0.0.1:50051' },
      'timeout-ms': { type: 'string', default: '5000' },
      tls: { type: 'boolean', default: false },
      'tls-ca': { type: 'string' },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      'tls-server-name': { type: 'string' },
      'allow-insecure-target': { type: 'boolean', default: false },
      listen: { type: 'string', default: '127.0.0.1:8765' },
      path: { type: 'string', default: '/mcp' },
      'allowed-hosts': { type: 'string' },
      'allowed-origins': { type: 'string' },
      'max-sessions': { type: 'string', default: '64' },
      'max-sessions-per-token': { type: 'string', default: '8' },
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
  const tls = memorydTls(opts, log);

  if (opts.transport === 'stdio') {
    const token = process.env.MEMORYD_TOKEN;
    if (!token) fail('MEMORYD_TOKEN is not set: the stdio transport takes memoryd\'s token from it');
    const session = createSession({ target: opts.target, token, timeoutMs, tls });
    const transport = new StdioServerTransport();
    transport.onclose = () => session.close().then(() => process.exit(0));
    await session.mcp.connect(transport);
    log(`serving MCP on stdio for memoryd at ${opts.target}${tls ? ' (TLS)' : ''}`);
    return;
  }
  if (opts.transport !== 'http') fail(`--transport must be stdio or http, not ${opts.transport}`);
  const [host, port] = hostPort('listen', opts.listen);
  const list = (s) => (s ? s.split(',').map((x) => x.trim()).filter(Boolean) : null);
  const server = await startHttp({
    listenHost: host, listenPort: port, path: opts.path, target: opts.target, timeoutMs, tls,
    allowedHosts: list(opts['allowed-hosts']), allowedOrigins: list(opts['allowed-origins']),
    maxSessions: positiveInt('max-sessions', opts['max-sessions']),
    maxSessionsPerToken: positiveInt('max-sessions-per-token', opts['max-sessions-per-token']),
    sessionIdleMs: positiveInt('session-idle-ms', opts['session-idle-ms']), log,
  });
  // On SIGTERM/SIGINT: end the sessions (their memoryd streams), stop
  // listening, and exit once connections close, or after 2 s regardless.
  // Installed before the line below, which tells a supervisor (or a test)
  // that it may now signal us.
  const stop = async () => {
    setTimeout(() => process.exit(0), 2000).unref();
    await server.closeAll();
    server.close(() => process.exit(0));
    server.closeAllConnections?.();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  const where = host.includes(':') ? `[${host}]` : host;
  log(`serving MCP on http://${where}:${server.address().port}${opts.path} for memoryd at ` +
    `${opts.target}${tls ? ' (TLS)' : ''}`);
}

main().catch((err) => fail(err.stack || String(err)));
