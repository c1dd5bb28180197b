"""The Python client's namespaced memory (clients/python: Memory) against a
real memoryd: dict-like reads that never write, explicit writes, namespace
override, wildcard key listing, and errors with memoryd's code and message.

    run_python_test.sh python_memory_test.py tests/clients/python_client_test.py \\
        clients/python/memoryd_client.py -- --fixture=tests/clients/memoryd_fixture

memoryd runs under memoryd_fixture (see python_client_test.py).
"""

import argparse
import os
import socket
import sys
import time
import unittest

import grpc

import python_client_test
from memory.v1 import entries_pb2
from memoryd_client import EntryKey, MemorydClient


class MemoryAgainstMemoryd(python_client_test.WithMemoryd):
    FIXTURE_ARGS = ("--scope=entries:*", "--token=readonly=entries:read")

    def client(self, token=None):
        c = MemorydClient(self.server.address, token=token or self.server.token, timeout=5.0)
        self.addCleanup(c.close)
        return c

    def test_dict_like_reads_explicit_writes_and_wildcard_listing(self):
        client = self.client()
        memory = client.memory("planner:trip:prefs")
        self.assertNotIn("user_style", memory)
        with self.assertRaises(KeyError):
            memory["user_style"]
        self.assertEqual("fallback", memory.get("user_style", "fallback"))
        memory.write("user_style", "terse", tags=["pref"], metadata={"n": 1})
        memory.write("user_langs", ["C", "Go"])
        memory.write("blob", b"\x00\x01")
        memory.write("user%x", "literal percent")
        memory.in_namespace("planner:trip:plan").write("user_goal", {"city": "Lyon"})
        memory.write("user_other", "x", namespace="coder:trip:prefs")
        self.assertEqual("terse", memory["user_style"])
        self.assertIn("user_style", memory)
        self.assertEqual(["C", "Go"], memory["user_langs"])
        self.assertEqual(b"\x00\x01", memory["blob"])
        self.assertEqual({"city": "Lyon"}, memory.get("user_goal", namespace="planner:trip:plan"))
        entry = memory.entry("user_style")
        self.assertEqual(["pref"], list(entry.tags))
        self.assertEqual(1, entry.metadata["n"])
        self.assertEqual("client-test", entry.meta.owner)
        # `_` and `%` match themselves; `*` is the only wildcard.
        self.assertEqual([EntryKey("planner:trip:prefs", "user_langs"),
                          EntryKey("planner:trip:prefs", "user_style")],
                         memory.list_keys("user_*"))
        self.assertEqual([EntryKey("planner:trip:plan", "user_goal"),
                          EntryKey("planner:trip:prefs", "user_langs"),
                          EntryKey("planner:trip:prefs", "user_style")],
                         memory.list_keys("user_*", namespace="planner:*:*"))
        self.assertEqual(6, len(memory.list_keys(namespace="*:trip:*")))
        self.assertEqual(2, len(memory.list_keys(namespace="*:*:*", limit=2)))
        # Reads never write.
        stats = lambda: client.entries.Stats(  # noqa: E731
            entries_pb2.EntriesStatsRequest(namespace_pattern="planner:*:*")).entry_count
        before = stats()
        self.assertIsNone(memory.get("never_written"))
        self.assertNotIn("never_written", memory)
        self.assertEqual(before, stats())
        self.assertTrue(memory.delete("user_style"))
        self.assertFalse(memory.delete("user_style"))
        with self.assertRaises(grpc.RpcError) as cm:
            memory.write("user_langs", "x", expected_version=0)
        self.assertEqual(grpc.StatusCode.ABORTED, cm.exception.code())

    def test_errors_carry_memoryds_code_and_message(self):
        cases = [
            (lambda: MemorydClient(self.server.address).memory("a:b:c").write("k", "v"),
             grpc.StatusCode.UNAUTHENTICATED, "token"),
            (lambda: self.client(self.server.tokens["readonly"]).memory("a:b:c").write("k", "v"),
             grpc.StatusCode.PERMISSION_DENIED, "entries:write"),
            (lambda: self.client().memory("not-a-namespace").write("k", "v"),
             grpc.StatusCode.INVALID_ARGUMENT, "namespace"),
        ]
        for call, code, words in cases:
            with self.subTest(code=code):
                with self.assertRaises(grpc.RpcError) as cm:
                    call()
                self.assertEqual(code, cm.exception.code())
                self.assertIn(words, cm.exception.details())
        # Reading with entries:read is allowed.
        self.assertIsNone(self.client(self.server.tokens["readonly"]).memory("a:b:c").get("k"))
        # A wrong type is refused before anything is sent.
        with self.assertRaises(TypeError):
            self.client().memory("a:b:c").write(7, "v")
        with self.assertRaises(TypeError):
            self.client().memory("a:b:c").write("k", object())

    def test_a_one_millisecond_deadline_never_hangs(self):
        with socket.socket() as silent:  # accepts, never answers
            silent.bind(("127.0.0.1", 0))
            silent.listen(1)
            start = time.monotonic()
            client = MemorydClient(f"127.0.0.1:{silent.getsockname()[1]}", token="t")
            self.addCleanup(client.close)
            with self.assertRaises(grpc.RpcError) as cm:
                client.memory("a:b:c").get("k", timeout=0.001)
            self.assertEqual(grpc.StatusCode.DEADLINE_EXCEEDED, cm.exception.code())
            self.assertLess(time.monotonic() - start, 5)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixture", required=True)
    args, rest = parser.parse_known_args()
    python_client_test.ARGS.fixture = os.path.abspath(args.fixture)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
