'use strict';
// MemorydClient: one channel to memoryd, the token on every call, a default
// deadline on every call with one response, and per service an object whose
// methods are the service's RPCs: unary ones return Promises, server streams
// are async iterables (with cancel()).

const fs = require('fs');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const { Codec } = require('./codec');
const { MemorydError } = require('./errors');
const { Memory } = require('./memory');
const { Board } = require('./board');

const DEFAULT_TARGET = '127.0.0.1:50051';
const API_PROTOS = ['access', 'audit', 'blackboard', 'cache', 'entries', 'episodic_memory',
  'global_memory', 'privacy', 'router', 'session', 'working_memory'];
// Property name on the client -> service of memory.v1.
const SERVICES = {
  global: 'GlobalMemory', episodic: 'EpisodicMemory', cache: 'Cache', entries: 'Entries',
  blackboard: 'Blackboard', router: 'Router', audit: 'Audit', access: 'Access', privacy: 'Privacy',
  working: 'WorkingMemory', session: 'Session',
};
const HEALTH_PROTO_DIR = '/usr/share/grpc-proto'; // Debian's grpc-proto package

const LOAD_OPTIONS = { keepCase: false, longs: Number, enums: String, defaults: true, oneofs: true };

// The API's definitions, loaded once per proto directory.
const loaded = new Map();
function loadApi(protoDir, healthProtoDir) {
  const key = `${protoDir}\0${healthProtoDir}`;
  if (!loaded.has(key)) {
    const files = API_PROTOS.map((p) => `memory/v1/${p}.proto`);
    const includeDirs = [protoDir];
    const health = path.join(healthProtoDir, 'grpc/health/v1/health.proto');
    const withHealth = fs.existsSync(health);
    if (withHealth) {
      files.push('grpc/health/v1/health.proto');
      includeDirs.push(healthProtoDir);
    }
    const def = protoLoader.loadSync(files, { ...LOAD_OPTIONS, includeDirs });
    loaded.set(key, { def, grpcObject: grpc.loadPackageDefinition(def), codec: new Codec(def),
      withHealth });
  }
  return loaded.get(key);
}

// The channel credentials of the `tls` option (undefined without it).
function tlsCredentials(tls) {
  if (!tls) return undefined;
  const pem = (v) => (v == null ? null : Buffer.from(v));
  if (!tls.cert !== !tls.key)
    throw new Error('tls: a client certificate needs its key and a key its certificate');
  return grpc.credentials.createSsl(pem(tls.ca), pem(tls.key), pem(tls.cert));
}

class MemorydClient {
  // options:
  //   target      "host:port" (default 127.0.0.1:50051)
  //   token       capability token (JWT), sent as `authorization: Bearer`
  //               on every call; without it memory.v1 calls fail
  //               UNAUTHENTICATED
  //   timeoutMs   default deadline of calls with one response (5000;
  //               0 = none); a call's own { timeoutMs } wins. Streams have
  //               none unless the call gives one.
  //   credentials grpc.credentials.createSsl(...) for a TLS memoryd;
  //               default plaintext (loopback only: the token travels in it)
  //   tls         { ca, cert, key, serverName } instead of credentials, for
  //               callers without grpc-js of their own: PEM roots (Buffer or
  //               string; omitted = the system's), a client certificate and
  //               key for mutual TLS (both or neither), and the name the
  //               server's certificate must carry when the target's host
  //               is not it
  //   protoDir    directory holding memory/v1/*.proto (default: the
  //               repository's protos/, or $MEMORYD_PROTO_DIR)
  //   channelOptions  extra grpc-js channel options
  constructor(options = {}) {
    this.target = options.target || DEFAULT_TARGET;
    this.token = options.token || '';
    this.timeoutMs = options.timeoutMs ?? 5000;
    const protoDir = options.protoDir || process.env.MEMORYD_PROTO_DIR ||
      path.join(__dirname, '..', '..', '..', 'protos');
    const api = loadApi(protoDir, options.healthProtoDir || HEALTH_PROTO_DIR);
    this.codec = api.codec;
    const creds = options.credentials || tlsCredentials(options.tls) ||
      grpc.credentials.createInsecure();
    const channelOptions = { ...options.channelOptions };
    if (options.tls?.serverName)
      channelOptions['grpc.ssl_target_name_override'] = options.tls.serverName;
    const v1 = api.grpcObject.memory.v1;
    // One channel for every stub: the first stub's, shared with the rest.
    const first = new v1.GlobalMemory(this.target, creds, channelOptions);
    this.channel = first.getChannel();
    const shared = { channelOverride: this.channel };
    for (const [prop, service] of Object.entries(SERVICES)) {
      const stub = prop === 'global' ? first : new v1[service](this.target, creds, shared);
      this[prop] = this.wrapService(stub, api.def[`memory.v1.${service}`]);
    }
    if (api.withHealth) {
      const stub = new api.grpcObject.grpc.health.v1.Health(this.target, creds, shared);
      this.health = this.wrapService(stub, api.def['grpc.health.v1.Health']);
    }
  }

  metadata(options) {
    const md = new grpc.Metadata();
    const token = options.token ?? this.token;
    if (token) md.set('authorization', `Bearer ${token}`);
    for (const [k, v] of Object.entries(options.headers || {})) md.set(k, v);
    return md;
  }

  callOptions(options, unary) {
    const ms = options.timeoutMs ?? (unary ? this.timeoutMs : 0);
    return ms > 0 ? { deadline: new Date(Date.now() + ms) } : {};
  }

  // Each RPC of the service as a method (request, { timeoutMs, token,
  // headers, signal }).
  wrapService(stub, methods) {
    const out = {};
    for (const [name, m] of Object.entries(methods)) {
      // Request and response types live in the service's package.
      const pkg = m.path.split('/')[1].replace(/\.[^.]+$/, '');
      const reqType = `${pkg}.${m.requestType.type.name}`;
      const respType = `${pkg}.${m.responseType.type.name}`;
      const call = stub[name].bind(stub);
      if (m.responseStream) {
        out[name] = (request = {}, options = {}) => {
          const req = this.codec.encode(reqType, request);
          return new ResponseStream(call(req, this.metadata(options),
            this.callOptions(options, false)), this.codec, respType, options.signal);
        };
      } else {
        out[name] = (request = {}, options = {}) => new Promise((resolve, reject) => {
          const req = this.codec.encode(reqType, request);
          const c = call(req, this.metadata(options), this.callOptions(options, true),
            (err, resp) => {
              options.signal?.removeEventListener('abort', abort);
              if (err) reject(MemorydError.from(err));
              else resolve(this.codec.decode(respType, resp));
            });
          const abort = () => c.cancel();
          options.signal?.addEventListener('abort', abort, { once: true });
        });
      }
    }
    return out;
  }

  // Health.Check: 'SERVING', 'NOT_SERVING', ... for service ('' = the server).
  async checkHealth(service = '', options = {}) {
    if (!this.health)
      throw new Error(`no health.proto under ${HEALTH_PROTO_DIR} (apt-get install grpc-proto)`);
    return (await this.health.Check({ service }, options)).status;
  }

  // The namespaced memory of `namespace` (see Memory).
  memory(namespace) {
    return new Memory(this, namespace);
  }

  // The blackboard of task `taskId` (see Board).
  board(taskId) {
    return new Board(this, taskId);
  }

  close() {
    this.channel.close();
  }
}

// A server stream as an async iterable of decoded responses; a failed stream
// throws MemorydError from the loop. cancel() ends it (the loop then ends
// quietly).
class ResponseStream {
  constructor(call, codec, respType, signal) {
    this.call = call;
    this.codec = codec;
    this.respType = respType;
    this.cancelled = false;
    if (signal) {
      if (signal.aborted) this.cancel();
      else signal.addEventListener('abort', () => this.cancel(), { once: true });
    }
  }

  cancel() {
    this.cancelled = true;
    this.call.cancel();
  }

  async* [Symbol.asyncIterator]() {
    try {
      for await (const resp of this.call) yield this.codec.decode(this.respType, resp);
    } catch (err) {
      if (this.cancelled && err.code === grpc.status.CANCELLED) return;
      throw MemorydError.from(err);
    } finally {
      if (!this.cancelled) this.call.cancel();
    }
  }
}

module.exports = { MemorydClient, DEFAULT_TARGET };
