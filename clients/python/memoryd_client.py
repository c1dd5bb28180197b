"""memoryd_client: a thin Python client for memoryd.

One gRPC channel with a stub per service of the memory.v1 API plus
grpc.health.v1, a default deadline for every unary call, and an optional
capability token sent with every call::

    from memoryd_client import MemorydClient
    from memory.v1 import global_memory_pb2

    with MemorydClient("localhost:50051", token=jwt) as client:
        print(client.check_health())            # 1 = SERVING
        reply = client.global_memory.GetEntity(
            global_memory_pb2.GetEntityRequest(id="e1"))

The stubs are the ones grpc_python_plugin generates (`memory.v1.*_pb2_grpc`
and `health_v1_pb2_grpc`); calls take and return the generated messages and
raise grpc.RpcError with .code() and .details() when the status is not OK.

Needs grpcio and protobuf: Debian's python3-grpcio and python3-protobuf, so
run it with /usr/bin/python3 (another python3 first on PATH may lack them).
On PYTHONPATH: this directory and the generated stubs
(bazel-bin/clients/python after `bazel build //clients/python:stubs`).
"""

import collections
import json
import random
import threading
import time

import grpc
from google.protobuf import duration_pb2
from google.protobuf import json_format
from google.protobuf import struct_pb2

import health_v1_pb2
import health_v1_pb2_grpc
from memory.v1 import access_pb2_grpc
from memory.v1 import audit_pb2_grpc
from memory.v1 import blackboard_pb2
from memory.v1 import blackboard_pb2_grpc
from memory.v1 import cache_pb2_grpc
from memory.v1 import entries_pb2
from memory.v1 import entries_pb2_grpc
from memory.v1 import episodic_memory_pb2_grpc
from memory.v1 import global_memory_pb2_grpc
from memory.v1 import privacy_pb2_grpc
from memory.v1 import router_pb2_grpc
from memory.v1 import session_pb2_grpc
from memory.v1 import working_memory_pb2_grpc

__all__ = ["MemorydClient", "Memory", "EntryKey", "Board", "DEFAULT_TARGET", "SERVING",
           "NOT_SERVING"]

DEFAULT_TARGET = "localhost:50051"
SERVING = health_v1_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_v1_pb2.HealthCheckResponse.NOT_SERVING


class _CallDetails(
        collections.namedtuple("_CallDetails", ("method", "timeout", "metadata", "credentials",
                                                "wait_for_ready", "compression")),
        grpc.ClientCallDetails):
    pass


class _Defaults(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds the token header to every call and the default timeout to calls
    with a single response (streams of responses -- Watch, Subscribe,
    QueryStream -- run until cancelled unless the caller gives a timeout)."""

    def __init__(self, token, timeout):
        self._auth = ("authorization", "Bearer " + token) if token else None
        self._timeout = timeout

    def _details(self, d, single_response):
        metadata = list(d.metadata or ())
        # A caller's own authorization header (e.g. a narrower token for one
        # call) wins over the client's.
        if self._auth and not any(k.lower() == "authorization" for k, _ in metadata):
            metadata.append(self._auth)
        timeout = d.timeout
        if timeout is None and single_response:
            timeout = self._timeout
        return _CallDetails(d.method, timeout, metadata or None, d.credentials,
                            getattr(d, "wait_for_ready", None), getattr(d, "compression", None))

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details, True), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details, False), request)

    def intercept_stream_unary(self, continuation, details, request_iterator):
        return continuation(self._details(details, True), request_iterator)

    def intercept_stream_stream(self, continuation, details, request_iterator):
        return continuation(self._details(details, False), request_iterator)


class MemorydClient:
    """A connection to one memoryd.

    target       "host:port" (any gRPC target string).
    token        a capability token (JWT, e.g. the contents of
                 .local/dev-token after `make run`), sent as
                 `authorization: Bearer <token>` metadata on every call.
                 Every memory.v1 method needs one with the method's scope
                 (global:read for GetEntity, global:write for PutEntity,
                 ...; DESIGN.md §5): without it calls fail UNAUTHENTICATED,
                 without the scope PERMISSION_DENIED. Health needs none
                 (unless memoryd runs with --open-health=false).
                 Over anything but loopback, use TLS (credentials=) so the
                 token is not sent in clear.
    timeout      default deadline in seconds for calls with one response;
                 a call's own timeout= wins. None: no default deadline.
    credentials  grpc.ssl_channel_credentials(...) for a memoryd started
                 with --tls-cert/--tls-key; None (default): plaintext.
    options      extra channel options, [(key, value), ...].

    Attributes: one stub per service -- global_memory, episodic, cache,
    entries, blackboard, router, audit, access, privacy, working, session (memory.v1) and
    health (grpc.health.v1) -- and `channel`, the intercepted channel they
    share. close() (or leaving a `with` block) closes the channel; calls
    after that raise ValueError.
    """

    def __init__(self, target=DEFAULT_TARGET, token=None, timeout=5.0, credentials=None,
                 options=None):
        self.target = target
        self.timeout = timeout
        if credentials is not None:
            self._raw_channel = grpc.secure_channel(target, credentials, options=options)
        else:
            self._raw_channel = grpc.insecure_channel(target, options=options)
        self.channel = grpc.intercept_channel(self._raw_channel, _Defaults(token, timeout))
        self._closed = False

        self.global_memory = global_memory_pb2_grpc.GlobalMemoryStub(self.channel)
        self.episodic = episodic_memory_pb2_grpc.EpisodicMemoryStub(self.channel)
        self.cache = cache_pb2_grpc.CacheStub(self.channel)
        self.entries = entries_pb2_grpc.EntriesStub(self.channel)
        self.blackboard = blackboard_pb2_grpc.BlackboardStub(self.channel)
        self.router = router_pb2_grpc.RouterStub(self.channel)
        self.audit = audit_pb2_grpc.AuditStub(self.channel)
        self.access = access_pb2_grpc.AccessStub(self.channel)
        self.privacy = privacy_pb2_grpc.PrivacyStub(self.channel)
        self.working = working_memory_pb2_grpc.WorkingMemoryStub(self.channel)
        self.session = session_pb2_grpc.SessionStub(self.channel)
        self.health = health_v1_pb2_grpc.HealthStub(self.channel)

    def check_health(self, service="", timeout=None):
        """Health.Check for service ("" = the server as a whole, or e.g.
        "memory.v1.GlobalMemory"); returns the serving status (SERVING = 1,
        NOT_SERVING = 2). Raises grpc.RpcError (NOT_FOUND for an unknown
        service, UNAVAILABLE when memoryd cannot be reached)."""
        reply = self.health.Check(health_v1_pb2.HealthCheckRequest(service=service),
                                  timeout=timeout)
        return reply.status

    def memory(self, namespace):
        """The key-value memory of namespace (a Memory: dict-like reads,
        explicit writes, wildcard list_keys)."""
        return Memory(self, namespace)

    def board(self, task_id):
        """The blackboard of task_id (a Board: post with compare-and-set
        retry, leases, a subscription that resumes by itself)."""
        return Board(self, task_id)

    @property
    def closed(self):
        return self._closed

    def close(self):
        """Closes the channel, cancelling calls in flight. Idempotent."""
        if not self._closed:
            self._closed = True
            self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"MemorydClient({self.target!r}{', closed' if self._closed else ''})"


def to_value(obj):
    """A JSON-shaped Python value (dict, list, str, int, float, bool, None)
    as a google.protobuf.Value."""
    return json_format.ParseDict(obj, struct_pb2.Value())


def from_value(value):
    """A google.protobuf.Value as a Python value (numbers come back as
    float, as JSON has one number type)."""
    return json_format.MessageToDict(value)


def _duration(seconds):
    d = duration_pb2.Duration()
    d.FromNanoseconds(int(seconds * 1e9))
    return d


EntryKey = collections.namedtuple("EntryKey", ("namespace", "key"))


def encode_value(value, content_type=None):
    """How Memory.write stores a value: (bytes, content type). A str is
    text/plain, bytes application/octet-stream, anything else JSON."""
    if isinstance(value, str):
        return value.encode("utf-8"), content_type or "text/plain"
    if isinstance(value, (bytes, bytearray)):
        return bytes(value), content_type or "application/octet-stream"
    return json.dumps(value).encode("utf-8"), content_type or "application/json"


def decode_value(entry):
    """An Entry's value as Memory reads give it: str for text/*, parsed
    JSON for application/json, bytes otherwise."""
    kind = entry.content_type.split(";")[0].strip().lower()
    if kind == "application/json":
        return json.loads(entry.value)
    if kind.startswith("text/"):
        return entry.value.decode("utf-8")
    return entry.value


class Memory:
    """The key-value memory of one namespace (memory.v1.Entries), shaped the
    way agents use key-value memory: reads never write, writes are
    explicit.

        memory = client.memory("planner:trip:prefs")
        memory.write("user_style", "terse")           # text/plain
        memory["user_style"]                          # 'terse'; KeyError when absent
        memory.get("nothing", "default")              # 'default'
        "user_style" in memory                        # True
        memory.list_keys("user_*")                    # [EntryKey(namespace, key)]
        memory.list_keys("*", namespace="planner:*:*")
        memory.in_namespace("planner:trip:plan").write("goal", {"city": "Lyon"})

    A str is stored as text/plain, bytes as application/octet-stream,
    anything else as JSON; reads give back str, parsed JSON or bytes by the
    content type. Every method takes namespace= to use another namespace
    for one call. Errors are grpc.RpcError with memoryd's code and message
    (an absent key is KeyError for [], None/default for get()).
    """

    def __init__(self, client, namespace):
        self.client = client
        self.namespace = namespace

    def in_namespace(self, namespace):
        """The same memory under another namespace."""
        return Memory(self.client, namespace)

    def entry(self, key, namespace=None, timeout=None):
        """The whole Entry, or None when it is absent, expired or hidden."""
        try:
            return self.client.entries.Read(entries_pb2.EntriesReadRequest(
                namespace=namespace or self.namespace, key=key), timeout=timeout).entry
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise

    def get(self, key, default=None, namespace=None, timeout=None):
        """key's value, or default when it is absent."""
        entry = self.entry(key, namespace, timeout)
        return default if entry is None else decode_value(entry)

    def __getitem__(self, key):
        entry = self.entry(key)
        if entry is None:
            raise KeyError(key)
        return decode_value(entry)

    def __contains__(self, key):
        return self.entry(key) is not None

    def write(self, key, value, content_type=None, metadata=None, tags=None, ttl=None,
              expected_version=None, label=None, namespace=None, timeout=None):
        """Creates or replaces key. metadata: a JSON object; ttl: seconds;
        expected_version: compare-and-set (0 = only if absent). Returns the
        EntriesWriteResponse (.meta.version, .created)."""
        data, kind = encode_value(value, content_type)
        req = entries_pb2.EntriesWriteRequest(namespace=namespace or self.namespace, key=key,
                                              value=data, content_type=kind, tags=tags or ())
        if metadata is not None:
            req.metadata.update(metadata)
        if ttl is not None:
            req.ttl.CopyFrom(_duration(ttl))
        if expected_version is not None:
            req.expected_version = expected_version
        if label is not None:
            req.label = label
        return self.client.entries.Write(req, timeout=timeout)

    def delete(self, key, namespace=None, timeout=None):
        """Deletes key: True, or False when there was nothing to delete."""
        try:
            self.client.entries.DeleteEntry(entries_pb2.EntriesDeleteEntryRequest(
                namespace=namespace or self.namespace, key=key), timeout=timeout)
            return True
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.NOT_FOUND:
                return False
            raise

    def list_keys(self, pattern="*", namespace=None, limit=10000, timeout=None):
        """Keys matching pattern (`*` matches any run of characters; nothing
        else is special) in this namespace, or in every namespace matching
        the pattern namespace= (e.g. "planner:*:*"), as EntryKey(namespace,
        key) ordered by namespace then key; at most limit."""
        out = []
        token = ""
        while len(out) < limit:
            reply = self.client.entries.List(entries_pb2.EntriesListRequest(
                namespace_pattern=namespace or self.namespace, key_pattern=pattern,
                page_size=min(1000, limit - len(out)), page_token=token), timeout=timeout)
            out.extend(EntryKey(e.namespace, e.key) for e in reply.entries)
            token = reply.next_page_token
            if not token:
                break
        return out[:limit]

    def __repr__(self):
        return f"Memory({self.namespace!r})"


_EVENT = blackboard_pb2.BlackboardEventKind
# Statuses after which a subscription reconnects (and resumes) by itself.
_RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
              grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INTERNAL)


class Board:
    """One task's blackboard (memory.v1.Blackboard) through a MemorydClient.

    Values are JSON-shaped Python values. Errors are grpc.RpcError with the
    status code and memoryd's message as they came (.code(), .details()).

        board = client.board("task-42")
        board.post("plan", {"steps": 3})
        if board.claim("subtask/7", "agent-1", lease=30):   # ours for 30 s
            ...
            board.claim("subtask/7", "agent-1", lease=30, renew=True)
        board.update("done", lambda n: (n or 0) + 1)        # CAS, retried
        for event in board.subscribe():                     # resumes by itself
            ...
    """

    def __init__(self, client, task_id):
        self.client = client
        self.task_id = task_id

    def read(self, timeout=None):
        """The board as visible to the caller: (items, version, board_id),
        items a dict key -> BlackboardItem (the value: from_value(item.value))."""
        reply = self.client.blackboard.Read(
            blackboard_pb2.BlackboardReadRequest(task_id=self.task_id), timeout=timeout)
        return {it.key: it for it in reply.items}, reply.version, reply.board_id

    def get(self, key, default=None):
        """One key's value, or default when it is absent or hidden."""
        items, _, _ = self.read()
        return from_value(items[key].value) if key in items else default

    def post(self, key, value, expected_version=None, ttl=None, lease=None, label=None,
             timeout=None):
        """Sets key to value. expected_version: compare-and-set (0 = only if
        absent; ABORTED otherwise). ttl: the board's life in seconds (extends
        it only). lease: seconds the key lives unless posted again. Returns
        the BlackboardPostResponse (meta.version: the new version)."""
        req = blackboard_pb2.BlackboardPostRequest(task_id=self.task_id, key=key,
                                                   value=to_value(value))
        if expected_version is not None:
            req.expected_version = expected_version
        if ttl is not None:
            req.ttl.CopyFrom(_duration(ttl))
        if lease is not None:
            req.lease_ttl.CopyFrom(_duration(lease))
        if label is not None:
            req.label = label
        return self.client.blackboard.Post(req, timeout=timeout)

    def delete(self, key, expected_version=None, timeout=None):
        """Deletes key (NOT_FOUND when absent); with expected_version, only
        at that version."""
        req = blackboard_pb2.BlackboardPostRequest(task_id=self.task_id, key=key,
                                                   delete_key=True)
        if expected_version is not None:
            req.expected_version = expected_version
        return self.client.blackboard.Post(req, timeout=timeout)

    def update(self, key, fn, attempts=32, lease=None):
        """Read-modify-write with compare-and-set: sets key to fn(current
        value, or None when absent), retrying (with jittered backoff) when
        another writer got there first. Returns the value written; raises
        the last ABORTED after `attempts` tries."""
        for attempt in range(attempts):
            items, _, _ = self.read()
            item = items.get(key)
            current = from_value(item.value) if item is not None else None
            new = fn(current)
            try:
                self.post(key, new, expected_version=item.meta.version if item else 0,
                          lease=lease)
                return new
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.ABORTED or attempt == attempts - 1:
                    raise
            time.sleep(random.uniform(0, 0.002 * (attempt + 1)))
        raise AssertionError("unreachable")

    def claim(self, key, value, lease, renew=False):
        """Claims key for `lease` seconds: True when it was free (or, with
        renew, already ours: the lease starts again), False when another
        holds it. An agent that dies loses its claims when their leases run
        out."""
        try:
            if renew:
                self.post(key, value, lease=lease)
            else:
                self.post(key, value, expected_version=0, lease=lease)
            return True
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.ABORTED, grpc.StatusCode.PERMISSION_DENIED):
                return False
            raise

    def subscribe(self, after_version=None, board_id=None, reconnect=True, backoff=0.1,
                  max_backoff=2.0):
        """A Subscription: iterate it for BlackboardSubscribeResponse events
        (a SNAPSHOT first unless resuming). When the stream breaks
        (UNAVAILABLE: a replica shut down, Redis away too long, the network)
        it reconnects with after_version/board_id of the last event, so
        nothing is missed and no full board is downloaded when the server's
        change log still reaches back. It ends after an EXPIRED event, on
        cancel(), or with the error that is not worth retrying."""
        return Subscription(self, after_version, board_id, reconnect, backoff, max_backoff)


class Subscription:
    """See Board.subscribe. .version and .board_id: where it would resume;
    .reconnects: how many times it did."""

    def __init__(self, board, after_version, board_id, reconnect, backoff, max_backoff):
        self.board = board
        self.version = after_version
        self.board_id = board_id or ""
        self.reconnect = reconnect
        self.reconnects = 0
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._call = None
        self._cancelled = threading.Event()

    def cancel(self):
        """Ends the subscription (from any thread)."""
        self._cancelled.set()
        call = self._call
        if call is not None:
            call.cancel()

    def _open(self):
        req = blackboard_pb2.BlackboardSubscribeRequest(task_id=self.board.task_id)
        if self.version is not None:
            req.after_version = self.version
            req.board_id = self.board_id
        self._call = self.board.client.blackboard.Subscribe(req)
        if self._cancelled.is_set():
            self._call.cancel()
        return self._call

    def __iter__(self):
        delay = self._backoff
        while not self._cancelled.is_set():
            try:
                for event in self._open():
                    delay = self._backoff
                    if event.kind == _EVENT.BLACKBOARD_EVENT_KIND_EXPIRED:
                        yield event
                        return
                    self.version = event.version
                    self.board_id = event.board_id
                    yield event
                return  # the server ended the stream OK
            except grpc.RpcError as e:
                if self._cancelled.is_set() or e.code() == grpc.StatusCode.CANCELLED:
                    return
                if not self.reconnect or e.code() not in _RETRYABLE:
                    raise
            self.reconnects += 1
            if self._cancelled.wait(delay):
                return
            delay = min(delay * 2, self._max_backoff)
