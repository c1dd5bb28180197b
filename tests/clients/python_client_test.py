"""The Python client (clients/python: MemorydClient over the generated
memory.v1 and health stubs) against a real memoryd, plus what it sends,
checked on a small in-test grpc server.

    run_python_test.sh python_client_test.py clients/python/memoryd_client.py -- \
        --fixture=tests/clients/memoryd_fixture --example=clients/python/example.py

memoryd runs under memoryd_fixture (the C++ tests' harness: a throw-away
database, memoryd on a free port, both gone when the fixture's stdin
closes; it also mints the token the tests send, as it holds the key). Needs MEMORYD_TEST_PG_URL (and optionally MEMORYD_TEST_REDIS_URL),
as `make test` passes them; without it the memoryd tests fail, never skip.
"""

import argparse
import os
import socket
import subprocess
import sys
import threading
import unittest
from concurrent import futures

import grpc
from google.protobuf import struct_pb2

import health_v1_pb2
import memoryd_client
from memory.v1 import access_pb2
from memory.v1 import audit_pb2
from memory.v1 import blackboard_pb2
from memory.v1 import cache_pb2
from memory.v1 import entries_pb2
from memory.v1 import episodic_memory_pb2
from memory.v1 import global_memory_pb2
from memory.v1 import privacy_pb2
from memory.v1 import router_pb2
from memory.v1 import session_pb2
from memory.v1 import working_memory_pb2
from memoryd_client import MemorydClient

ARGS = argparse.Namespace(fixture=None, example=None)
TIMEOUT = 5.0


def closed_port():
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_example(target, token=""):
    """Runs the example against target; token "" (default) = no MEMORYD_TOKEN,
    whatever this process's environment holds."""
    return subprocess.run([sys.executable, "-s", ARGS.example, target], capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, MEMORYD_TOKEN=token))


class Memoryd:
    """memoryd under memoryd_fixture: .address, and .token, a capability
    token for it with global:read global:write blackboard:read:all
    blackboard:write (tenant "clients", principal
    "client-test"). close() stops it and returns the fixture's exit code (0:
    memoryd exited 0 on SIGTERM)."""

    def __init__(self, args=()):
        # The fixture's stderr (why it failed, memoryd's log on a bad exit)
        # goes to the test log. args: the fixture's (--scope=..., and
        # --token=NAME=SCOPES, whose tokens land in .tokens[NAME]).
        self.proc = subprocess.Popen([ARGS.fixture, *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("address "):
            self.proc.stdin.close()
            rc = self.proc.wait(timeout=60)
            self.proc.stdout.close()
            raise RuntimeError(f"memoryd_fixture could not start memoryd (exit {rc}); "
                               "its message is above")
        self.address = line.split()[1]
        line = self.proc.stdout.readline()
        if not line.startswith("token "):
            self.close()
            raise RuntimeError(f"memoryd_fixture printed {line!r}, not a token")
        self.token = line.split()[1]
        self.tokens = {}
        for _ in (a for a in args if a.startswith("--token=")):
            name, token = self.proc.stdout.readline().split()
            self.tokens[name[len("token-"):]] = token

    def close(self):
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=60)
        finally:
            self.proc.stdout.close()


class WithMemoryd(unittest.TestCase):
    """One memoryd on a throw-away database for the whole class (a test
    class of this file or another client test derives from it);
    FIXTURE_ARGS are memoryd_fixture's arguments. tearDownClass fails when
    memoryd did not stop cleanly on SIGTERM."""

    FIXTURE_ARGS = ()
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = Memoryd(cls.FIXTURE_ARGS)

    @classmethod
    def tearDownClass(cls):
        if cls.server:
            code = cls.server.close()
            cls.server = None
            if code != 0:
                raise AssertionError(f"memoryd_fixture exited with {code}: memoryd did not "
                                     "stop cleanly on SIGTERM")


class AgainstMemoryd(WithMemoryd):
    """The client against memoryd."""

    def setUp(self):
        self.client = MemorydClient(self.server.address, timeout=TIMEOUT)
        self.addCleanup(self.client.close)

    def test_health_is_serving(self):
        self.assertEqual(memoryd_client.SERVING, self.client.check_health())
        self.assertEqual(memoryd_client.SERVING,
                         self.client.check_health("memory.v1.GlobalMemory"))
        reply = self.client.health.Check(health_v1_pb2.HealthCheckRequest())
        self.assertEqual(health_v1_pb2.HealthCheckResponse.SERVING, reply.status)

    def test_health_of_unknown_service_is_not_found(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.client.check_health("no.such.Service")
        self.assertEqual(grpc.StatusCode.NOT_FOUND, cm.exception.code())

    def test_get_entity_without_a_token_is_unauthenticated(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.client.global_memory.GetEntity(global_memory_pb2.GetEntityRequest(id="e1"))
        self.assertEqual(grpc.StatusCode.UNAUTHENTICATED, cm.exception.code())
        self.assertIn("authorization: Bearer", cm.exception.details())

    def test_with_a_token_an_entity_is_written_and_read_back(self):
        properties = struct_pb2.Struct()
        properties.update({"written_in": "Python", "n": 2.5})
        with MemorydClient(self.server.address, token=self.server.token,
                           timeout=TIMEOUT) as client:
            put = client.global_memory.PutEntity(global_memory_pb2.PutEntityRequest(
                id="py-entity", type="test", name="from the Python client",
                properties=properties))
            self.assertTrue(put.created)
            reply = client.global_memory.GetEntity(
                global_memory_pb2.GetEntityRequest(id="py-entity"))
        e = reply.entity
        self.assertEqual("py-entity", e.id)
        self.assertEqual("test", e.type)
        self.assertEqual("from the Python client", e.name)
        self.assertEqual("Python", e.properties["written_in"])
        self.assertEqual(2.5, e.properties["n"])
        self.assertEqual(1, e.meta.version)
        self.assertEqual("client-test", e.meta.owner)  # from the token

    def test_every_service_attribute_reaches_its_service(self):
        # One unary method per memory.v1 service, called without a token:
        # built services answer UNAUTHENTICATED, the others UNIMPLEMENTED
        # naming the method. As each tier lands, its row changes.
        c = self.client
        unimpl, unauth = grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.UNAUTHENTICATED
        cases = [
            (c.global_memory.GetEntity, global_memory_pb2.GetEntityRequest(),
             "memory.v1.GlobalMemory/GetEntity", unauth),
            (c.episodic.GetCollection, episodic_memory_pb2.GetCollectionRequest(),
             "memory.v1.EpisodicMemory/GetCollection", unauth),
            (c.cache.Get, cache_pb2.CacheGetRequest(), "memory.v1.Cache/Get", unauth),
            (c.entries.Read, entries_pb2.EntriesReadRequest(), "memory.v1.Entries/Read", unauth),
            (c.blackboard.Read, blackboard_pb2.BlackboardReadRequest(),
             "memory.v1.Blackboard/Read", unauth),
            (c.router.Query, router_pb2.RouterQueryRequest(), "memory.v1.Router/Query", unauth),
            (c.audit.List, audit_pb2.AuditListRequest(), "memory.v1.Audit/List", unauth),
            (c.access.WhoAmI, access_pb2.AccessWhoAmIRequest(), "memory.v1.Access/WhoAmI",
             unauth),
            (c.privacy.Forget, privacy_pb2.PrivacyForgetRequest(), "memory.v1.Privacy/Forget",
             unauth),
            (c.working.Render, working_memory_pb2.WorkingMemoryRenderRequest(),
             "memory.v1.WorkingMemory/Render", unauth),
            (c.session.Get, session_pb2.SessionGetRequest(), "memory.v1.Session/Get", unauth),
        ]
        self.assertEqual(11, len(cases))
        for method, request, path, want in cases:
            with self.subTest(path=path):
                with self.assertRaises(grpc.RpcError) as cm:
                    method(request)
                self.assertEqual(want, cm.exception.code())
                if want == unimpl:
                    self.assertIn(path, cm.exception.details())
                else:
                    self.assertIn("authorization: Bearer", cm.exception.details())

    def test_context_manager_closes_the_channel(self):
        with MemorydClient(self.server.address) as client:
            self.assertFalse(client.closed)
            self.assertEqual(memoryd_client.SERVING, client.check_health())
        self.assertTrue(client.closed)
        # grpc refuses calls on a closed channel.
        with self.assertRaises(ValueError):
            client.check_health()
        client.close()  # idempotent

    def test_example_without_a_token_shows_get_entity_unauthenticated(self):
        r = run_example(self.server.address)
        self.assertEqual(0, r.returncode, r.stdout + r.stderr)
        self.assertIn("health: SERVING", r.stdout)
        self.assertNotIn("PutEntity", r.stdout)
        self.assertIn("GetEntity: UNAUTHENTICATED: missing capability token", r.stdout)

    def test_example_with_a_token_writes_and_reads_its_entity(self):
        r = run_example(self.server.address, token=self.server.token)
        self.assertEqual(0, r.returncode, r.stdout + r.stderr)
        self.assertIn("health: SERVING", r.stdout)
        self.assertIn("PutEntity: OK: ", r.stdout)
        self.assertIn('GetEntity: OK: id=example-entity name="written by the Python example"',
                      r.stdout)


class Unreachable(unittest.TestCase):

    def test_unreachable_server_is_unavailable(self):
        with MemorydClient(f"127.0.0.1:{closed_port()}", timeout=3.0) as client:
            with self.assertRaises(grpc.RpcError) as cm:
                client.check_health()
            self.assertEqual(grpc.StatusCode.UNAVAILABLE, cm.exception.code())

    def test_example_exits_non_zero_when_memoryd_is_unreachable(self):
        target = f"127.0.0.1:{closed_port()}"
        r = run_example(target)
        self.assertEqual(1, r.returncode, r.stdout + r.stderr)
        self.assertIn(f"cannot reach memoryd at {target}: UNAVAILABLE", r.stderr)


class _Recorder(grpc.GenericRpcHandler):
    """Answers every method with an empty message (a stream of none for
    the server-streaming ones), recording path, metadata and deadline."""

    STREAMING = {"/memory.v1.Audit/Watch", "/memory.v1.Blackboard/Subscribe"}

    def __init__(self):
        self.calls = []
        self._lock = threading.Lock()

    def _record(self, path, context):
        with self._lock:
            self.calls.append({"path": path, "metadata": tuple(context.invocation_metadata()),
                               "remaining": context.time_remaining()})

    def service(self, details):
        path = details.method
        if path in self.STREAMING:
            def stream(request, context):
                self._record(path, context)
                return iter(())
            return grpc.unary_stream_rpc_method_handler(stream)

        def unary(request, context):
            self._record(path, context)
            return b""
        return grpc.unary_unary_rpc_method_handler(unary)


class WhatTheClientSends(unittest.TestCase):
    """No memoryd: a grpc server in the test records each call."""

    def setUp(self):
        self.recorder = _Recorder()
        self.grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.grpc_server.add_generic_rpc_handlers((self.recorder,))
        port = self.grpc_server.add_insecure_port("127.0.0.1:0")
        self.grpc_server.start()
        self.addCleanup(self.grpc_server.stop, None)
        self.target = f"127.0.0.1:{port}"

    def last_call(self):
        self.assertTrue(self.recorder.calls)
        return self.recorder.calls[-1]

    def authorization(self, call):
        return [v for k, v in call["metadata"] if k == "authorization"]

    def test_token_is_sent_as_bearer_authorization(self):
        with MemorydClient(self.target, token="tok.en-123") as client:
            client.global_memory.GetEntity(global_memory_pb2.GetEntityRequest(id="e1"))
            client.check_health()
        self.assertEqual(2, len(self.recorder.calls))
        for call in self.recorder.calls:
            self.assertEqual(["Bearer tok.en-123"], self.authorization(call), call)
        self.assertEqual("/memory.v1.GlobalMemory/GetEntity", self.recorder.calls[0]["path"])
        self.assertEqual("/grpc.health.v1.Health/Check", self.recorder.calls[1]["path"])

    def test_token_is_sent_on_server_streams_too(self):
        with MemorydClient(self.target, token="t1") as client:
            self.assertEqual([], list(client.audit.Watch(audit_pb2.AuditWatchRequest())))
        self.assertEqual(["Bearer t1"], self.authorization(self.last_call()))

    def test_no_token_no_authorization_header(self):
        with MemorydClient(self.target) as client:
            client.cache.Get(cache_pb2.CacheGetRequest(key="k"))
        self.assertEqual([], self.authorization(self.last_call()))

    def test_callers_own_authorization_wins_and_other_metadata_passes(self):
        with MemorydClient(self.target, token="wide") as client:
            client.cache.Get(cache_pb2.CacheGetRequest(key="k"),
                             metadata=(("authorization", "Bearer narrow"),
                                       ("x-request-id", "req-1")))
        call = self.last_call()
        self.assertEqual(["Bearer narrow"], self.authorization(call))
        self.assertIn(("x-request-id", "req-1"), call["metadata"])

    def test_default_timeout_applies_to_unary_calls_and_a_calls_own_wins(self):
        with MemorydClient(self.target, timeout=7.0) as client:
            client.check_health()
            default = self.last_call()["remaining"]
            client.check_health(timeout=30.0)
            own = self.last_call()["remaining"]
        # The grpc-timeout header rounds up, so allow a little over.
        self.assertTrue(0 < default <= 7.5, default)
        self.assertTrue(7.5 < own <= 30.5, own)

    def test_server_streams_get_no_default_deadline(self):
        with MemorydClient(self.target, timeout=7.0) as client:
            list(client.blackboard.Subscribe(blackboard_pb2.BlackboardSubscribeRequest()))
        # grpcio reports "no deadline" as a huge time_remaining().
        remaining = self.last_call()["remaining"]
        self.assertTrue(remaining is None or remaining > 1e6, remaining)

    def test_stubs_are_not_a_top_level_grpc_package(self):
        # health_v1_pb2 is generated from a renamed copy of health.proto; a
        # generated grpc/ directory would shadow the grpc library.
        stub_dir = os.path.dirname(os.path.abspath(health_v1_pb2.__file__))
        self.assertFalse(os.path.exists(os.path.join(stub_dir, "grpc")))
        self.assertFalse(os.path.abspath(grpc.__file__).startswith(stub_dir + os.sep),
                         grpc.__file__)
        self.assertEqual("grpc.health.v1.Health",
                         health_v1_pb2.DESCRIPTOR.services_by_name["Health"].full_name)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixture", required=True, help="tests/clients/memoryd_fixture")
    parser.add_argument("--example", required=True, help="clients/python/example.py")
    args, rest = parser.parse_known_args()
    ARGS.fixture = os.path.abspath(args.fixture)
    ARGS.example = os.path.abspath(args.example)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
