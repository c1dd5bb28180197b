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

import grpc

import health_v1_pb2
import health_v1_pb2_grpc
from memory.v1 import access_pb2_grpc
from memory.v1 import audit_pb2_grpc
from memory.v1 import blackboard_pb2_grpc
from memory.v1 import cache_pb2_grpc
from memory.v1 import entries_pb2_grpc
from memory.v1 import episodic_memory_pb2_grpc
from memory.v1 import global_memory_pb2_grpc
from memory.v1 import privacy_pb2_grpc
from memory.v1 import router_pb2_grpc

__all__ = ["MemorydClient", "DEFAULT_TARGET", "SERVING", "NOT_SERVING"]

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
    entries, blackboard, router, audit, access, privacy (memory.v1) and
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
        self.health = health_v1_pb2_grpc.HealthStub(self.channel)

    def check_health(self, service="", timeout=None):
        """Health.Check for service ("" = the server as a whole, or e.g.
        "memory.v1.GlobalMemory"); returns the serving status (SERVING = 1,
        NOT_SERVING = 2). Raises grpc.RpcError (NOT_FOUND for an unknown
        service, UNAVAILABLE when memoryd cannot be reached)."""
        reply = self.health.Check(health_v1_pb2.HealthCheckRequest(service=service),
                                  timeout=timeout)
        return reply.status

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
