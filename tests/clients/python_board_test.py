"""The Python client's blackboard helpers (clients/python: Board, and the
board_agents.py example) against a real memoryd on the Redis `make test`
runs: compare-and-set updates from racing threads, claims with leases, a
subscription that resumes by itself after the connection drops (cut by a
TCP proxy in the test: a network blip, not a server restart), and two agent
processes sharing one task's sub-tasks.

    run_python_test.sh python_board_test.py tests/clients/python_client_test.py \
        clients/python/memoryd_client.py -- --fixture=tests/clients/memoryd_fixture \
        --agents=clients/python/board_agents.py

memoryd runs under memoryd_fixture (see python_client_test.py); without
MEMORYD_TEST_PG_URL and MEMORYD_TEST_REDIS_URL the tests fail, never skip.
"""

import argparse
import ast
import os
import socket
import subprocess
import sys
import threading
import time
import unittest
import uuid

import grpc

import python_client_test
from memory.v1 import blackboard_pb2
from memoryd_client import MemorydClient, from_value

AGENTS = None
KIND = blackboard_pb2.BlackboardEventKind


def task(name):
    """Task ids unique to this run: the shared Redis outlives test runs."""
    return f"{name}-{uuid.uuid4().hex[:12]}"


class Proxy:
    """A TCP forwarder on loopback whose connections the test can cut."""

    def __init__(self, target):
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.conns = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            with self.lock:
                self.conns += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        """Drops every connection (new ones are still accepted)."""
        with self.lock:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass

    def close(self):
        self.listener.close()
        self.cut()


class BoardAgainstMemoryd(python_client_test.WithMemoryd):

    def client(self, target=None):
        c = MemorydClient(target or self.server.address, token=self.server.token, timeout=5.0)
        self.addCleanup(c.close)
        return c

    def test_post_read_update_and_claim(self):
        board = self.client().board(task("helpers"))
        reply = board.post("plan", {"steps": [1, 2, 3]})
        self.assertTrue(reply.board_created)
        self.assertEqual({"steps": [1.0, 2.0, 3.0]}, board.get("plan"))
        items, version, board_id = board.read()
        self.assertEqual(1, version)
        self.assertEqual(16, len(board_id))
        # Compare-and-set increments from racing threads: none is lost.
        errors = []

        def bump():
            try:
                for _ in range(10):
                    board.update("count", lambda n: (n or 0) + 1)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=bump) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual([], errors)
        self.assertEqual(40, board.get("count"))
        # A claim is exclusive until its lease runs out.
        self.assertTrue(board.claim("subtask/1", "me", lease=1))
        self.assertFalse(board.claim("subtask/1", "someone else", lease=1))
        self.assertTrue(board.claim("subtask/1", "me", lease=1, renew=True))
        time.sleep(2.5)
        self.assertIsNone(board.get("subtask/1"))
        self.assertTrue(board.claim("subtask/1", "someone else", lease=1))
        # Errors keep memoryd's status and message.
        with self.assertRaises(grpc.RpcError) as cm:
            board.delete("never-there")
        self.assertEqual(grpc.StatusCode.NOT_FOUND, cm.exception.code())
        self.assertIn("does not exist", cm.exception.details())

    def test_subscription_resumes_after_the_connection_drops(self):
        proxy = Proxy(self.server.address)
        self.addCleanup(proxy.close)
        name = task("resume")
        writer = self.client().board(name)
        writer.post("a", 1)
        sub = self.client(proxy.address).board(name).subscribe(backoff=0.05)
        events = []
        got = threading.Event()

        def read():
            for ev in sub:
                events.append(ev)
                got.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        self.assertTrue(got.wait(10))
        self.assertEqual(KIND.BLACKBOARD_EVENT_KIND_SNAPSHOT, events[0].kind)
        writer.post("b", 2)
        deadline = time.monotonic() + 10
        while len(events) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertEqual(2, len(events))
        # The network drops; three changes happen before it is back.
        proxy.cut()
        writer.post("c", 3)
        writer.post("a", 4)
        writer.delete("b")
        deadline = time.monotonic() + 15
        while len(events) < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        sub.cancel()
        reader.join(10)
        self.assertGreaterEqual(sub.reconnects, 1)
        kinds = [KIND.Name(e.kind) for e in events]
        # The missed changes came, not a second SNAPSHOT.
        self.assertEqual(["BLACKBOARD_EVENT_KIND_SNAPSHOT", "BLACKBOARD_EVENT_KIND_PUT",
                          "BLACKBOARD_EVENT_KIND_PUT", "BLACKBOARD_EVENT_KIND_PUT",
                          "BLACKBOARD_EVENT_KIND_DELETE"], kinds)
        self.assertEqual([1, 2, 3, 4, 5], [e.version for e in events])
        self.assertEqual(4.0, from_value(events[3].items[0].value))

    def test_two_agents_share_the_work_through_leases(self):
        name = task("agents")
        env = dict(os.environ, MEMORYD_TOKEN=self.server.token)
        procs = [subprocess.Popen([sys.executable, "-s", AGENTS, self.server.address, name,
                                   f"agent-{i}", "8", "0.1"], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, env=env)
                 for i in (1, 2)]
        outputs = [p.communicate(timeout=150)[0] for p in procs]
        for p, out in zip(procs, outputs):
            self.assertEqual(0, p.returncode, out)
        did = []
        for out in outputs:
            line = [ln for ln in out.splitlines() if ": did [" in ln][0]
            did.append(ast.literal_eval(line.split(": did ", 1)[1].split(";")[0]))
        self.assertEqual(list(range(8)), sorted(did[0] + did[1]), outputs)
        items, _, _ = self.client().board(name).read()
        results = {k: from_value(v.value) for k, v in items.items() if k.startswith("result/")}
        self.assertEqual(8, len(results))
        self.assertFalse([k for k in items if k.startswith("subtask/")])


def main():
    global AGENTS
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixture", required=True)
    parser.add_argument("--agents", required=True)
    args, rest = parser.parse_known_args()
    python_client_test.ARGS.fixture = os.path.abspath(args.fixture)
    AGENTS = os.path.abspath(args.agents)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
