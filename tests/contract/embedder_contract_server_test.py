#!/usr/bin/python3
"""Tests of the embedder contract stand-in (embedder_contract_server.py)
itself: the request contract it enforces, the answer and error shapes it
gives, its vectors, its control endpoints. Expectations are computed by
hand from the OpenAI embeddings API's documented shapes, not from the
stand-in's code.

Usage: embedder_contract_server_test.py [--server PATH] [unittest arguments]
"""

import argparse
import http.client
import json
import math
import os
import select
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
OPTIONS = argparse.Namespace(server=os.path.join(HERE, "embedder_contract_server.py"))


class StandIn:
    def __init__(self, *extra_args):
        self.proc = subprocess.Popen(
            [sys.executable, OPTIONS.server, "--port", "0", *extra_args],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"stand-in did not start (first line {line!r})")
        self.port = int(line.split()[1])

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.proc.stdout.close()

    def call(self, method, path, body=None, headers=None, raw=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None
                                            else None)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        text = r.read()
        conn.close()
        return r.status, (json.loads(text) if text else None)

    def embed(self, inputs, model="m8", **extra):
        return self.call("POST", "/v1/embeddings", dict(model=model, input=inputs, **extra))


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b))


class EmbedderStandInTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = StandIn("--models", "m8=8,m32=32", "--max-input-chars", "100")

    @classmethod
    def tearDownClass(cls):
        cls.s.stop()

    def setUp(self):
        self.s.call("DELETE", "/__standin/violations")
        self.s.call("DELETE", "/__standin/faults")

    def violations(self):
        return self.s.call("GET", "/__standin/violations")[1]

    def error(self, answer):
        status, body = answer
        self.assertEqual(set(body["error"]), {"message", "type", "param", "code"})
        return status, body["error"]

    def test_answer_shape_and_vectors(self):
        status, body = self.s.embed(["the red fox", "a red fox", "tax law"],
                                    encoding_format="float")
        self.assertEqual(200, status)
        self.assertEqual("list", body["object"])
        self.assertEqual("m8", body["model"])
        self.assertEqual([0, 1, 2], [d["index"] for d in body["data"]])
        self.assertTrue(all(d["object"] == "embedding" for d in body["data"]))
        vecs = [d["embedding"] for d in body["data"]]
        self.assertTrue(all(len(v) == 8 for v in vecs))
        for v in vecs:
            self.assertAlmostEqual(1.0, math.sqrt(sum(x * x for x in v)), places=5)
        self.assertEqual(8, body["usage"]["prompt_tokens"])  # 3 + 3 + 2 words
        # Deterministic, and sharing words brings texts together.
        again = self.s.embed(["a red fox"])[1]["data"][0]["embedding"]
        self.assertEqual(vecs[1], again)
        self.assertGreater(cosine(vecs[0], vecs[1]), cosine(vecs[0], vecs[2]))
        self.assertEqual(32, len(self.s.embed("one string", model="m32")[1]["data"][0]
                                 ["embedding"]))
        self.assertEqual([], self.violations())

    def test_contract_violations(self):
        cases = [
            {"model": "m8"},                                   # no input
            {"input": ["a"]},                                  # no model
            {"model": "m8", "input": []},                      # empty array
            {"model": "m8", "input": [""]},                    # empty string
            {"model": "m8", "input": ["a"], "encoding": "f"},  # unknown property
            {"model": "m8", "input": ["a"], "encoding_format": "hex"},
            {"model": "m8", "input": ["a"] * 2049},            # too many
        ]
        for body in cases:
            status, err = self.error(self.s.call("POST", "/v1/embeddings", body))
            self.assertEqual(400, status, body)
            self.assertIn("contract violation", err["message"])
        self.assertEqual(len(cases), len(self.violations()))
        self.assertEqual(404, self.s.call("POST", "/embeddings", {"model": "m8", "input": "a"})[0])
        self.assertEqual(400, self.s.call("POST", "/v1/embeddings", raw=b"{not json")[0])
        status, _ = self.s.call("POST", "/v1/embeddings", {"model": "m8", "input": "a"},
                                headers={"Content-Type": "text/plain"})
        self.assertEqual(400, status)

    def test_api_errors(self):
        status, err = self.error(self.s.embed(["a"], model="nope"))
        self.assertEqual((404, "model_not_found"), (status, err["code"]))
        status, err = self.error(self.s.embed(["x" * 101]))
        self.assertEqual((400, "context_length_exceeded"), (status, err["code"]))
        self.assertEqual([], self.violations())

    def test_api_key(self):
        s = StandIn("--models", "m8=8", "--api-key", "sekret")
        try:
            status, err = self.error(s.embed(["a"]))
            self.assertEqual((401, "invalid_api_key"), (status, err["code"]))
            ok = s.call("POST", "/v1/embeddings", {"model": "m8", "input": ["a"]},
                        headers={"Authorization": "Bearer sekret"})
            self.assertEqual(200, ok[0])
        finally:
            s.stop()

    def test_faults(self):
        self.s.call("POST", "/__standin/faults", {"status": 503, "count": 2})
        for _ in range(2):
            status, err = self.error(self.s.embed(["a"]))
            self.assertEqual(503, status)
        self.assertEqual(200, self.s.embed(["a"])[0])
        self.s.call("POST", "/__standin/faults", {"delay_ms": 300})
        started = time.monotonic()
        self.assertEqual(200, self.s.embed(["a"])[0])
        self.assertGreaterEqual(time.monotonic() - started, 0.3)
        log = self.s.call("GET", "/__standin/requests")[1]
        self.assertEqual({"model": "m8", "input": ["a"]}, log[-1]["body"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--server", default=OPTIONS.server)
    OPTIONS, rest = parser.parse_known_args(namespace=OPTIONS)
    unittest.main(argv=[sys.argv[0], *rest])
