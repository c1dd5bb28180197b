// Type declarations of memoryd-client (the Node.js client of memoryd).
//
// The raw service methods (client.entries.Write, ...) take and return the
// messages of protos/memory/v1/*.proto as plain objects with camelCase
// field names, int64 as number, enums as their names, bytes as Buffer,
// google.protobuf.Value / Struct fields as plain JSON; they are typed
// loosely here (a field of the wrong type or an unknown field is refused
// with INVALID_ARGUMENT before sending). The helpers are typed exactly.

import type { ChannelCredentials, ChannelOptions, Metadata } from '@grpc/grpc-js';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export interface CallOptions {
  /** Deadline in ms; default: the client's timeoutMs for calls with one response, none for streams. */
  timeoutMs?: number;
  /** Another token for this call only. */
  token?: string;
  /** Extra request metadata (gRPC headers). */
  headers?: Record<string, string>;
  /** Cancels the call. */
  signal?: AbortSignal;
}

export type Message = Record<string, any>;
export type UnaryMethod = (request?: Message, options?: CallOptions) => Promise<Message>;
export type StreamMethod = (request?: Message, options?: CallOptions) => ResponseStream;

/** A server stream: iterate it with for await; cancel() ends it quietly. */
export interface ResponseStream extends AsyncIterable<Message> {
  cancel(): void;
}

/** A service's RPCs by name: unary ones are UnaryMethod, server streams StreamMethod. */
export type Service = Record<string, (request?: Message, options?: CallOptions) => any>;

export interface ClientOptions {
  /** "host:port"; default 127.0.0.1:50051. */
  target?: string;
  /** Capability token (JWT), sent as `authorization: Bearer` on every call. */
  token?: string;
  /** Default deadline of calls with one response (5000; 0 = none). */
  timeoutMs?: number;
  /** TLS credentials; default plaintext. */
  credentials?: ChannelCredentials;
  /**
   * TLS without grpc-js of your own (ignored when credentials is given): PEM roots (default the
   * system's), a client certificate and key for mutual TLS (both or neither), and the name the
   * server's certificate must carry when it is not the target's host.
   */
  tls?: { ca?: Buffer | string; cert?: Buffer | string; key?: Buffer | string; serverName?: string };
  /** Directory holding memory/v1/*.proto; default the repository's protos/ or $MEMORYD_PROTO_DIR. */
  protoDir?: string;
  /** Directory holding grpc/health/v1/health.proto; default /usr/share/grpc-proto. */
  healthProtoDir?: string;
  channelOptions?: ChannelOptions;
}

export class MemorydClient {
  constructor(options?: ClientOptions);
  readonly target: string;
  readonly global: Service;
  readonly episodic: Service;
  readonly cache: Service;
  readonly entries: Service;
  readonly blackboard: Service;
  readonly router: Service;
  readonly audit: Service;
  readonly access: Service;
  readonly privacy: Service;
  readonly working: Service;
  readonly session: Service;
  readonly health?: Service;
  /** Health.Check: 'SERVING', 'NOT_SERVING', ... ('' = the server as a whole). */
  checkHealth(service?: string, options?: CallOptions): Promise<string>;
  memory(namespace: string): Memory;
  board(taskId: string): Board;
  close(): void;
}

/** Every failed call: the gRPC status code and memoryd's message, unchanged. */
export class MemorydError extends Error {
  readonly code: number;
  /** 'NOT_FOUND', 'PERMISSION_DENIED', ... */
  readonly codeName: string;
  /** memoryd's message. */
  readonly details: string;
  readonly metadata?: Metadata;
}

export interface MemoryOptions extends CallOptions {
  /** Another namespace for this call (for listKeys: a pattern such as 'planner:*:*'). */
  namespace?: string;
}

export interface WriteOptions extends MemoryOptions {
  contentType?: string;
  metadata?: { [key: string]: Json };
  tags?: string[];
  ttlSeconds?: number;
  /** Compare-and-set: 0 = only if absent. */
  expectedVersion?: number;
  label?: string;
}

export interface EntryKey {
  namespace: string;
  key: string;
}

/** Key-value memory of one namespace: reads never write, writes are explicit. */
export class Memory {
  readonly namespace: string;
  inNamespace(namespace: string): Memory;
  /** string for text/*, parsed JSON for application/json, Buffer otherwise; undefined when absent. */
  get(key: string, options?: MemoryOptions): Promise<Json | Buffer | undefined>;
  has(key: string, options?: MemoryOptions): Promise<boolean>;
  entry(key: string, options?: MemoryOptions): Promise<Message | undefined>;
  /** A string is stored as text/plain, a Buffer as octet-stream, other values as JSON. */
  write(key: string, value: Json | Buffer, options?: WriteOptions): Promise<Message>;
  /** true when deleted, false when there was nothing to delete. */
  delete(key: string, options?: MemoryOptions & { expectedVersion?: number }): Promise<boolean>;
  /** `*` matches any run of characters; at most options.limit (10000) keys. */
  listKeys(keyPattern?: string, options?: MemoryOptions & { limit?: number }): Promise<EntryKey[]>;
}

export interface PostOptions extends CallOptions {
  expectedVersion?: number;
  ttlSeconds?: number;
  leaseSeconds?: number;
  label?: string;
}

export interface BoardItem {
  key: string;
  value: Json;
  meta: Message;
  leaseExpireTime: Message | null;
}

export class Board {
  readonly taskId: string;
  read(options?: CallOptions): Promise<{ items: Map<string, BoardItem>; version: number; boardId: string }>;
  get(key: string, options?: CallOptions): Promise<Json | undefined>;
  post(key: string, value: Json, options?: PostOptions): Promise<Message>;
  delete(key: string, options?: CallOptions & { expectedVersion?: number }): Promise<Message>;
  update<T extends Json>(key: string, fn: (current: Json | undefined) => T | Promise<T>,
    options?: PostOptions & { attempts?: number }): Promise<T>;
  claim(key: string, value: Json, options: PostOptions & { renew?: boolean }): Promise<boolean>;
  subscribe(options?: SubscribeOptions): Subscription;
}

export interface SubscribeOptions {
  afterVersion?: number;
  boardId?: string;
  reconnect?: boolean;
  backoffMs?: number;
  maxBackoffMs?: number;
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface BoardEvent {
  kind: 'BLACKBOARD_EVENT_KIND_SNAPSHOT' | 'BLACKBOARD_EVENT_KIND_PUT' |
    'BLACKBOARD_EVENT_KIND_DELETE' | 'BLACKBOARD_EVENT_KIND_EXPIRED';
  version: number;
  items: BoardItem[];
  boardId: string;
  cause: string;
  eventTime: Message | null;
  expireTime: Message | null;
}

/** Resumes after the last event it gave when the stream breaks. */
export class Subscription implements AsyncIterable<BoardEvent> {
  /** Where it would resume. */
  readonly version: number | undefined;
  readonly boardId: string;
  readonly reconnects: number;
  cancel(): void;
  [Symbol.asyncIterator](): AsyncIterator<BoardEvent>;
}

export const status: typeof import('@grpc/grpc-js').status;
export const DEFAULT_TARGET: string;
export function toValue(v: Json): Message;
export function fromValue(v: Message): Json;
export function toStruct(obj: { [key: string]: Json }): Message;
export function fromStruct(s: Message): { [key: string]: Json };
export function duration(seconds: number): { seconds: number; nanos: number };
export function toDate(ts: Message | null): Date | null;
