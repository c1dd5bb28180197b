'use strict';
// How memoryd-mcp reaches memoryd: every session's token travels on that
// channel, so it is TLS (--tls-ca, --tls-cert/--tls-key for mutual TLS) or
// stays on this machine (a loopback or unix-socket target); plaintext to
// anything else needs the operator to say so (--allow-insecure-target).

const fs = require('fs');
const net = require('net');
const tls = require('tls');

const LOOPBACK = new net.BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6'); // ::ffff:127.x.x.x matches the IPv4 rule

function isLoopbackHost(host) {
  if (host.toLowerCase() === 'localhost') return true;
  const family = net.isIP(host);
  return family !== 0 && LOOPBACK.check(host, family === 4 ? 'ipv4' : 'ipv6');
}

// Whether a gRPC target ("host:port", "[v6]:port", "dns:///host:port",
// "ipv4:a:p,b:p", "unix:path", ...) only ever reaches this machine. A name
// other than localhost is not: it resolves to wherever DNS says.
function isLocalTarget(target) {
  if (/^unix(-abstract)?:/.test(target)) return true;
  const rest = target.replace(/^dns:(\/\/[^/]*\/)?/, '').replace(/^ipv[46]:/, '');
  return rest.split(',').every((addr) => {
    const m = /^\[([^\]]+)\](?::\d+)?$/.exec(addr) || /^([^:]+)(?::\d+)?$/.exec(addr);
    return m !== null && isLoopbackHost(m[1]);
  });
}

function readPem(flag, file, what) {
  let pem;
  try {
    pem = fs.readFileSync(file);
  } catch (err) {
    throw new Error(`--${flag}=${file}: ${err.message}`);
  }
  if (!new RegExp(`-----BEGIN [A-Z ]*${what}-----`).test(pem.toString('latin1')))
    throw new Error(`--${flag}=${file}: no PEM ${what} in it`);
  return pem;
}

// The MemorydClient `tls` option from the flags, or null for plaintext (no
// --tls* flag). Throws, naming the flag, when a file is missing or does not
// load, so the server refuses to start rather than fail every session.
function tlsFromFlags(opts) {
  const flags = ['tls-ca', 'tls-cert', 'tls-key', 'tls-server-name'];
  if (!opts.tls && flags.every((f) => opts[f] === undefined)) return null;
  if ((opts['tls-cert'] === undefined) !== (opts['tls-key'] === undefined))
    throw new Error('--tls-cert and --tls-key go together: the client certificate for mutual ' +
      'TLS and its private key');
  const out = { serverName: opts['tls-server-name'] };
  if (opts['tls-ca'] !== undefined) out.ca = readPem('tls-ca', opts['tls-ca'], 'CERTIFICATE');
  if (opts['tls-cert'] !== undefined) {
    out.cert = readPem('tls-cert', opts['tls-cert'], 'CERTIFICATE');
    out.key = readPem('tls-key', opts['tls-key'], 'PRIVATE KEY');
    try {
      tls.createSecureContext({ cert: out.cert, key: out.key }); // the key is the cert's
    } catch (err) {
      throw new Error(`--tls-cert=${opts['tls-cert']} with --tls-key=${opts['tls-key']}: ` +
        err.message);
    }
  }
  return out;
}

module.exports = { isLocalTarget, tlsFromFlags };
