'use strict';
// Board: one task's blackboard (Blackboard) for agents that coordinate:
// compare-and-set updates retried on conflict, claims with leases, and a
// subscription that reconnects and resumes where it stopped.
//
//   const board = client.board('task-42');
//   await board.post('plan', { steps: 3 });
//   if (await board.claim('subtask/7', 'agent-1', { leaseSeconds: 30 })) { ... }
//   await board.update('done', (n) => (n || 0) + 1);
//   for await (const ev of board.subscribe()) { ... }   // resumes by itself

const { MemorydError, status } = require('./errors');
const { duration } = require('./values');

// Statuses after which a subscription reconnects (and resumes) by itself.
const RETRYABLE = new Set([status.UNAVAILABLE, status.DEADLINE_EXCEEDED,
  status.RESOURCE_EXHAUSTED, status.INTERNAL]);

const sleep = (ms, signal) => new Promise((resolve) => {
  const t = setTimeout(resolve, ms);
  signal?.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
});

class Board {
  constructor(client, taskId) {
    this.client = client;
    this.taskId = taskId;
  }

  // { items: Map key -> BlackboardItem (item.value is JSON), version,
  //   boardId } as visible to the caller.
  async read(options = {}) {
    const r = await this.client.blackboard.Read({ taskId: this.taskId }, options);
    return { items: new Map(r.items.map((it) => [it.key, it])), version: r.version,
      boardId: r.boardId };
  }

  // One key's value, or undefined when it is absent or hidden.
  async get(key, options = {}) {
    return (await this.read(options)).items.get(key)?.value;
  }

  // Sets key to a JSON value. options: expectedVersion (compare-and-set; 0 =
  // only if absent; ABORTED otherwise), ttlSeconds (the board's life; only
  // extends it), leaseSeconds (the key lives that long unless posted
  // again), label. Returns the BlackboardPostResponse.
  post(key, value, options = {}) {
    const req = { taskId: this.taskId, key, value, expectedVersion: options.expectedVersion,
      label: options.label };
    if (options.ttlSeconds !== undefined) req.ttl = duration(options.ttlSeconds);
    if (options.leaseSeconds !== undefined) req.leaseTtl = duration(options.leaseSeconds);
    return this.client.blackboard.Post(req, options);
  }

  // Deletes key (NOT_FOUND when absent); with expectedVersion only at it.
  delete(key, options = {}) {
    return this.client.blackboard.Post({ taskId: this.taskId, key, deleteKey: true,
      expectedVersion: options.expectedVersion }, options);
  }

  // Read-modify-write: sets key to fn(current value or undefined) with
  // compare-and-set, retrying with jittered backoff while another writer
  // gets there first. Returns the value written; throws the last ABORTED
  // after options.attempts (32) tries.
  async update(key, fn, options = {}) {
    const attempts = options.attempts ?? 32;
    for (let attempt = 0; ; attempt++) {
      const item = (await this.read(options)).items.get(key);
      const next = await fn(item?.value);
      try {
        await this.post(key, next, { ...options, expectedVersion: item ? item.meta.version : 0 });
        return next;
      } catch (err) {
        if (!(err instanceof MemorydError) || err.code !== status.ABORTED ||
          attempt === attempts - 1) throw err;
      }
      await sleep(Math.random() * 2 * (attempt + 1));
    }
  }

  // Claims key for options.leaseSeconds: true when it was free (or, with
  // renew, already ours: the lease starts again), false when another holds
  // it. A dead agent's claims free themselves when their leases run out.
  async claim(key, value, options = {}) {
    try {
      await this.post(key, value, { ...options,
        expectedVersion: options.renew ? undefined : 0 });
      return true;
    } catch (err) {
      if (err instanceof MemorydError &&
        (err.code === status.ABORTED || err.code === status.PERMISSION_DENIED)) return false;
      throw err;
    }
  }

  // An async iterable of BlackboardSubscribeResponse events: a SNAPSHOT
  // first (unless resuming from options.afterVersion + options.boardId),
  // then PUT and DELETE in revision order. When the stream breaks
  // (UNAVAILABLE: a replica shut down, Redis away, the network) it
  // reconnects after the last event it gave, so nothing is missed. It ends
  // after an EXPIRED event, on cancel() or options.signal, or throws the
  // error not worth retrying. options.reconnect = false: never reconnect;
  // options.timeoutMs: a deadline for each connection (none by default).
  subscribe(options = {}) {
    return new Subscription(this, options);
  }
}

class Subscription {
  constructor(board, options) {
    this.board = board;
    this.version = options.afterVersion;
    this.boardId = options.boardId || '';
    this.reconnect = options.reconnect ?? true;
    this.timeoutMs = options.timeoutMs; // of each connection; none by default
    this.reconnects = 0;
    this.backoffMs = options.backoffMs ?? 100;
    this.maxBackoffMs = options.maxBackoffMs ?? 2000;
    this.controller = new AbortController();
    options.signal?.addEventListener('abort', () => this.cancel(), { once: true });
  }

  cancel() {
    this.controller.abort();
  }

  async* [Symbol.asyncIterator]() {
    const signal = this.controller.signal;
    let delay = this.backoffMs;
    while (!signal.aborted) {
      const req = { taskId: this.board.taskId };
      if (this.version !== undefined) {
        req.afterVersion = this.version;
        req.boardId = this.boardId;
      }
      try {
        for await (const ev of this.board.client.blackboard.Subscribe(req,
          { signal, timeoutMs: this.timeoutMs })) {
          delay = this.backoffMs;
          if (ev.kind === 'BLACKBOARD_EVENT_KIND_EXPIRED') {
            yield ev;
            return;
          }
          this.version = ev.version;
          this.boardId = ev.boardId;
          yield ev;
        }
        return; // the server ended the stream OK
      } catch (err) {
        if (signal.aborted || err.code === status.CANCELLED) return;
        if (!this.reconnect || !RETRYABLE.has(err.code)) throw err;
      }
      this.reconnects++;
      await sleep(delay, signal);
      delay = Math.min(delay * 2, this.maxBackoffMs);
    }
  }
}

module.exports = { Board, Subscription };
