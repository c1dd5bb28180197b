#!/usr/bin/python3
"""Tests of the Qdrant contract stand-in (qdrant_contract_server.py) itself.

Each test class starts the stand-in as a subprocess on port 0 (optionally
posing as another Qdrant version or requiring an API key) and talks HTTP/1.1
to it with http.client. Expectations are hand-computed from Qdrant's
semantics as README.md documents them, not from the stand-in's code.

Usage: qdrant_contract_server_test.py [--server PATH] [--spec-dir DIR]
                                      [unittest arguments]
Only the standard library is needed here; the server needs python3-jsonschema.
"""

import argparse
import http.client
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
OPTIONS = argparse.Namespace(server=os.path.join(HERE, "qdrant_contract_server.py"),
                             spec_dir=os.path.join(HERE, "spec"))
UUID_A = "8c5a6f3e-1d2b-4c3a-9e8f-7a6b5c4d3e2f"


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def json(self):
        return json.loads(self.body)

    @property
    def result(self):
        return self.json["result"]

    @property
    def error(self):
        return self.json["status"]["error"]


class StandIn:
    """A running stand-in process and a kept-alive connection to it."""

    def __init__(self, *extra_args):
        # Under Bazel the log is kept with the test outputs; otherwise it is
        # removed when the server stops.
        self.keep_log = "TEST_UNDECLARED_OUTPUTS_DIR" in os.environ
        log_dir = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR") or tempfile.gettempdir()
        self.log_path = os.path.join(log_dir, f"standin-{os.getpid()}-{time.monotonic_ns()}.log")
        self.proc = subprocess.Popen(
            [sys.executable, OPTIONS.server, "--port", "0", "--spec-dir", OPTIONS.spec_dir,
             "--log", self.log_path, *extra_args],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"stand-in did not start (first line {line!r}); log:\n"
                               + self.log())
        self.port = int(line.split()[1])
        self.conn = None

    def log(self):
        try:
            with open(self.log_path, encoding="utf-8") as f:
                return f.read()
        except OSError:
            return ""

    def stop(self):
        if self.conn is not None:
            self.conn.close()
        self.proc.terminate()
        self.proc.wait(10)
        self.proc.stdout.close()
        if not self.keep_log and os.path.exists(self.log_path):
            os.remove(self.log_path)

    def call(self, method, path, body=None, headers=None, timeout=30):
        """One request on the kept-alive connection; body is JSON-encoded
        unless it is bytes."""
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        self.conn.timeout = timeout
        if self.conn.sock is not None:
            self.conn.sock.settimeout(timeout)
        all_headers = {"Content-Type": "application/json"} if body is not None else {}
        all_headers.update(headers or {})
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
        try:
            self.conn.request(method, path, body=body, headers=all_headers)
            r = self.conn.getresponse()
            return Response(r.status, r.headers, r.read())
        except Exception:
            self.conn.close()
            self.conn = None
            raise

    def raw(self, data, timeout=10):
        """Send raw bytes on a new connection; (head, body) of the answer."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
            s.sendall(data)
            return read_http_answer(s)


def read_http_answer(sock):
    """(head, body) of one HTTP answer, its body delimited by Content-Length."""
    data = b""
    while True:
        if b"\r\n\r\n" in data:
            head, rest = data.split(b"\r\n\r\n", 1)
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(rest) >= length:
                return head.decode(), rest[:length]
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"connection closed after {data!r}")
        data += chunk


class StandInTest(unittest.TestCase):
    """Starts one stand-in per class; every test starts from empty state and
    must leave no violations behind unless it sets expect_violations."""

    server_args = ()

    @classmethod
    def setUpClass(cls):
        cls.server = StandIn(*cls.server_args)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def setUp(self):
        for path in ("state", "violations", "faults", "requests"):
            self.assertEqual(self.call("DELETE", f"/__standin/{path}").status, 200)
        self.expect_violations = False

    def tearDown(self):
        violations = self.violations()
        own_bugs = [v for v in violations if v["kind"] in ("response", "standin-error")]
        self.assertEqual(own_bugs, [], "the stand-in broke its own contract")
        if not self.expect_violations:
            self.assertEqual(violations, [])

    def call(self, method, path, body=None, **kwargs):
        return self.server.call(method, path, body, **kwargs)

    def ok(self, method, path, body=None, **kwargs):
        r = self.call(method, path, body, **kwargs)
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.json["status"], "ok")
        self.assertIsInstance(r.json["time"], float)
        return r.result

    def violations(self):
        return self.call("GET", "/__standin/violations").json

    def assert_error(self, r, status, text):
        self.assertEqual(r.status, status, r.body)
        self.assertEqual(r.headers["Content-Type"], "application/json")
        self.assertNotIn("result", r.json)
        self.assertEqual(r.error, text)

    def create(self, name="c", size=4, distance="Cosine"):
        self.assertIs(self.ok("PUT", f"/collections/{name}",
                              {"vectors": {"size": size, "distance": distance}}), True)

    def upsert(self, points, name="c"):
        return self.ok("PUT", f"/collections/{name}/points?wait=true", {"points": points})


class HappyPathTest(StandInTest):
    def test_root_has_no_envelope(self):
        r = self.call("GET", "/")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.json["title"], "qdrant - vector search engine")
        self.assertEqual(r.json["version"], "1.19.0")
        self.assertNotIn("result", r.json)

    def test_collection_lifecycle(self):
        self.assertEqual(self.ok("GET", "/collections"), {"collections": []})
        self.create("docs", size=3, distance="Dot")
        self.assertEqual(self.ok("GET", "/collections/docs/exists"), {"exists": True})
        self.assertEqual(self.ok("GET", "/collections"), {"collections": [{"name": "docs"}]})
        info = self.ok("GET", "/collections/docs")
        self.assertEqual(info["status"], "green")
        self.assertEqual(info["points_count"], 0)
        self.assertEqual(info["config"]["params"]["vectors"], {"size": 3, "distance": "Dot"})
        self.assert_error(self.call("PUT", "/collections/docs",
                                    {"vectors": {"size": 3, "distance": "Dot"}}),
                          409, "Wrong input: Collection `docs` already exists!")
        self.assertIs(self.ok("DELETE", "/collections/docs"), True)
        self.assertIs(self.ok("DELETE", "/collections/docs"), False)
        self.assertEqual(self.ok("GET", "/collections/docs/exists"), {"exists": False})
        self.assert_error(self.call("GET", "/collections/docs"), 404,
                          "Not found: Collection `docs` doesn't exist!")

    def test_points_sequence(self):
        self.create()
        self.assertEqual(self.ok("PUT", "/collections/c/index?wait=true",
                                 {"field_name": "tenant",
                                  "field_schema": {"type": "keyword", "is_tenant": True}}),
                         {"operation_id": 0, "status": "completed"})
        result = self.upsert([
            {"id": 1, "vector": [1, 0, 0, 0], "payload": {"tenant": "t1", "text": "a"}},
            {"id": UUID_A.upper(), "vector": [0, 3, 0, 4], "payload": {"tenant": "t1"}},
            {"id": 2, "vector": [0.5, 0.5, 0.5, 0.5], "payload": {"tenant": "t2"}},
        ])
        self.assertEqual(result, {"operation_id": 1, "status": "completed"})
        result = self.ok("PUT", "/collections/c/points", {"batch": {
            "ids": [3, 4], "vectors": [[0, 0, 1, 0], [0, 0, 0, 2]],
            "payloads": [{"tenant": "t1"}, None]}})
        self.assertEqual(result["status"], "acknowledged")  # no wait=true

        info = self.ok("GET", "/collections/c")
        self.assertEqual(info["points_count"], 5)
        self.assertEqual(info["payload_schema"]["tenant"]["data_type"], "keyword")
        self.assertEqual(info["payload_schema"]["tenant"]["params"],
                         {"type": "keyword", "is_tenant": True})

        # Retrieve: request order, unknown ids skipped, no payload by default.
        got = self.ok("POST", "/collections/c/points",
                      {"ids": [UUID_A.replace("-", ""), 99, 1], "with_vector": True})
        self.assertEqual(got, [{"id": UUID_A, "vector": [0.0, 0.6, 0.0, 0.8]},
                               {"id": 1, "vector": [1.0, 0.0, 0.0, 0.0]}])
        got = self.ok("POST", "/collections/c/points",
                      {"ids": [1], "with_payload": {"exclude": ["text"]}})
        self.assertEqual(got, [{"id": 1, "payload": {"tenant": "t1"}}])

        # Query: tenant filter, best first, cosine scores of normalised vectors.
        query = {"query": [1, 1, 0, 0], "with_payload": ["tenant"],
                 "filter": {"must": [{"key": "tenant", "match": {"value": "t1"}}]}}
        points = self.ok("POST", "/collections/c/points/query", query)["points"]
        self.assertEqual([p["id"] for p in points], [1, UUID_A, 3])
        self.assertEqual([p["score"] for p in points], [0.70710677, 0.42426407, 0.0])
        self.assertEqual(points[0]["payload"], {"tenant": "t1"})
        self.assertIsInstance(points[0]["version"], int)
        self.assertNotIn("vector", points[0])
        nearest = self.ok("POST", "/collections/c/points/query",
                          dict(query, query={"nearest": [1, 1, 0, 0]}))["points"]
        self.assertEqual(nearest, points)

        # Scroll: id order (integers, then UUIDs), pages joined by next_page_offset.
        page = self.ok("POST", "/collections/c/points/scroll", {"limit": 3})
        self.assertEqual([p["id"] for p in page["points"]], [1, 2, 3])
        self.assertEqual(page["points"][2], {"id": 3, "payload": {"tenant": "t1"}})
        self.assertEqual(page["next_page_offset"], 4)
        page = self.ok("POST", "/collections/c/points/scroll",
                       {"limit": 3, "offset": 4, "with_payload": False})
        self.assertEqual(page, {"points": [{"id": 4}, {"id": UUID_A}], "next_page_offset": None})

        self.assertEqual(self.ok("POST", "/collections/c/points/count", {"exact": True}),
                         {"count": 5})
        self.ok("POST", "/collections/c/points/delete?wait=true", {"points": [1, UUID_A]})
        self.ok("POST", "/collections/c/points/delete?wait=true",
                {"filter": {"must": [{"key": "tenant", "match": {"value": "t2"}}]}})
        remaining = self.ok("POST", "/collections/c/points/scroll", {})["points"]
        self.assertEqual([p["id"] for p in remaining], [3, 4])

        # The request log shows what was sent.
        log = self.call("GET", "/__standin/requests").json
        queries = [r for r in log if r["path"] == "/collections/c/points/query"]
        self.assertEqual(len(queries), 2)
        self.assertEqual(queries[0]["body"]["filter"]["must"][0]["key"], "tenant")
        self.assertEqual(queries[0]["headers"]["content-type"], "application/json")
        [index] = [r for r in log if r["path"] == "/collections/c/index"]
        self.assertEqual(index["query"], {"wait": "true"})

    def test_upsert_replaces_the_whole_point(self):
        self.create()
        self.upsert([{"id": 5, "vector": [1, 0, 0, 0], "payload": {"a": 1, "b": 2}}])
        self.upsert([{"id": 5, "vector": [0, 1, 0, 0], "payload": {"a": 3}}])
        self.assertEqual(self.ok("POST", "/collections/c/points",
                                 {"ids": [5], "with_payload": True, "with_vector": True}),
                         [{"id": 5, "payload": {"a": 3}, "vector": [0.0, 1.0, 0.0, 0.0]}])

    def test_vectors_come_back_as_f32(self):
        self.create(size=3, distance="Dot")
        self.upsert([{"id": 1, "vector": [0.1, 0.123456789, 1e-45]}])
        r = self.call("POST", "/collections/c/points", {"ids": [1], "with_vector": True})
        self.assertIn(b'"vector":[0.1,0.12345679,1e-45]', r.body)

    def test_scores_and_threshold_per_distance(self):
        # Query [1, 0]; points 1: [1, 0], 2: [0, 1], 3: [3, 4], 4: [0, 1] (a tie with 2).
        vectors = {1: [1, 0], 2: [0, 1], 3: [3, 4], 4: [0, 1]}
        expected = {
            # distance: ([(id, score)] best first, threshold, ids kept by the threshold)
            "Cosine": ([(1, 1.0), (3, 0.6), (2, 0.0), (4, 0.0)], 0.6, [1]),
            "Dot": ([(3, 3.0), (1, 1.0), (2, 0.0), (4, 0.0)], 1.0, [3]),
            "Euclid": ([(1, 0.0), (2, 1.4142135), (4, 1.4142135), (3, 4.472136)],
                       1.4142135, [1]),
            "Manhattan": ([(1, 0.0), (2, 2.0), (4, 2.0), (3, 6.0)], 2.0, [1]),
        }
        for distance, (ranking, threshold, kept) in expected.items():
            with self.subTest(distance=distance):
                name = distance.lower()
                self.create(name, size=2, distance=distance)
                self.upsert([{"id": i, "vector": v} for i, v in vectors.items()], name=name)
                path = f"/collections/{name}/points/query"
                points = self.ok("POST", path, {"query": [1, 0]})["points"]
                self.assertEqual([(p["id"], p["score"]) for p in points], ranking)
                points = self.ok("POST", path, {"query": [1, 0], "score_threshold": threshold})
                self.assertEqual([p["id"] for p in points["points"]], kept)
                points = self.ok("POST", path, {"query": [1, 0], "limit": 2, "offset": 1})
                self.assertEqual([p["id"] for p in points["points"]],
                                 [i for i, _ in ranking[1:3]])


class FilterTest(StandInTest):
    """Each filter kind against hand-computed results on a fixed data set."""

    POINTS = {
        1: {"tenant": "a", "n": 1, "tags": ["x", "y"], "flag": True, "meta": {"lang": "en"},
            "items": [{"k": "p", "v": 1}, {"k": "q", "v": 2}], "text": "hello brave new world"},
        2: {"tenant": "a", "n": 1.0, "tags": [], "flag": False, "meta": {"lang": "de"},
            "items": [{"k": "p", "v": 3}]},
        3: {"tenant": "b", "n": 2.5, "tags": ["y"], "meta": [{"lang": "en"}], "nul": None},
        4: {"tenant": "b", "n": "7", "tags": [None], "nul": [None], "deep": [[1, 2]]},
        5: {"tenant": ["a", "b"], "n": [3, 10], "flag": 1},
        6: {},
        UUID_A: {"tenant": "c", "n": -4, "items": [{"k": "q", "v": 9}]},
    }
    ALL = {1, 2, 3, 4, 5, 6, UUID_A}

    def setUp(self):
        super().setUp()
        self.create(size=2)
        self.upsert([{"id": i, "vector": [1, 0], "payload": p} for i, p in self.POINTS.items()])

    def ids(self, flt):
        """The ids a filter selects, by scroll; count must agree."""
        points = self.ok("POST", "/collections/c/points/scroll",
                         {"filter": flt, "limit": 100, "with_payload": False})["points"]
        count = self.ok("POST", "/collections/c/points/count", {"filter": flt})["count"]
        self.assertEqual(count, len(points))
        return {p["id"] for p in points}

    def check(self, cases):
        for flt, expected in cases:
            with self.subTest(filter=flt):
                self.assertEqual(self.ids(flt), set(expected))

    @staticmethod
    def field(key, **condition):
        return {"must": [dict(key=key, **condition)]}

    def test_match_value(self):
        f = self.field
        self.check([
            # A leaf array matches if any element does.
            (f("tenant", match={"value": "a"}), {1, 2, 5}),
            # Integers compare as i64: 1.0 is not 1; a bool is not an integer.
            (f("n", match={"value": 1}), {1}),
            (f("n", match={"value": 10}), {5}),
            (f("flag", match={"value": True}), {1}),
            (f("flag", match={"value": 1}), {5}),
            (f("n", match={"value": "7"}), {4}),
        ])

    def test_match_any_and_except(self):
        f = self.field
        self.check([
            (f("tenant", match={"any": ["b", "c"]}), {3, 4, 5, UUID_A}),
            (f("n", match={"any": [1, 3]}), {1, 5}),
            # except: a missing field never matches, null never matches.
            (f("tenant", match={"except": ["a"]}), {3, 4, 5, UUID_A}),
            (f("nul", match={"except": ["x"]}), set()),
            # except integers: floats and other types always match.
            (f("n", match={"except": [1]}), {2, 3, 4, 5, UUID_A}),
            # [] has no elements to match; [null] only null.
            (f("tags", match={"except": ["x"]}), {1, 3}),
            # An array inside the array matches except.
            (f("deep", match={"except": ["x"]}), {4}),
        ])

    def test_range(self):
        f = self.field
        self.check([
            (f("n", range={"gte": 1, "lte": 2.5}), {1, 2, 3}),
            # gt/lt are strict; a leaf array matches if any element does.
            (f("n", range={"gt": 1, "lt": 10}), {3, 5}),
            # Only numbers: no bools, no numeric strings.
            (f("flag", range={"gte": 0}), {5}),
            (f("n", range={"lt": 0}), {UUID_A}),
            (f("n", range={}), {1, 2, 3, 5, UUID_A}),
        ])

    def test_is_empty_and_is_null(self):
        self.check([
            # Missing, null and [] are empty; [null] is not.
            ({"must": [{"is_empty": {"key": "tags"}}]}, {2, 5, 6, UUID_A}),
            ({"must": [{"is_empty": {"key": "nul"}}]}, {1, 2, 3, 5, 6, UUID_A}),
            # Only a null value is null: not [null], not a missing field.
            ({"must": [{"is_null": {"key": "nul"}}]}, {3}),
            ({"must": [{"is_null": {"key": "tags"}}]}, set()),
            # The field-condition spelling of is_null does count [null].
            (self.field("tags", is_null=True), {4}),
            (self.field("tags", is_empty=True), {2, 5, 6, UUID_A}),
        ])

    def test_values_count_and_text(self):
        f = self.field
        self.check([
            (f("tags", values_count={"gte": 2}), {1}),
            # A missing field counts 0 values.
            (f("tags", values_count={"lt": 1}), {2, 5, 6, UUID_A}),
            (f("text", match={"text": "brave"}), {1}),
            (f("text", match={"text_any": "zebra world"}), {1}),
            (f("text", match={"prefix": "hell"}), {1}),
        ])

    def test_has_id(self):
        self.check([({"must": [{"has_id": [1, UUID_A.upper(), 77]}]}, {1, UUID_A})])

    def test_paths(self):
        f = self.field
        self.check([
            (f("meta.lang", match={"value": "en"}), {1}),
            # Without [] a path does not enter an intermediate array.
            (f("meta[].lang", match={"value": "en"}), {3}),
            (f("items[].k", match={"value": "q"}), {1, UUID_A}),
            (f("items[0].k", match={"value": "q"}), {UUID_A}),
            (f("items", match={"value": "q"}), set()),
        ])

    def test_nested(self):
        both = [{"key": "k", "match": {"value": "p"}}, {"key": "v", "range": {"gte": 2}}]
        self.check([
            # nested: one array element must satisfy the whole filter...
            ({"must": [{"nested": {"key": "items", "filter": {"must": both}}}]}, {2}),
            # ...while [] paths match each condition on any element.
            ({"must": [dict(c, key=f"items[].{c['key']}") for c in both]}, {1, 2}),
            # Inside nested, an empty should list matches nothing and has_id never matches.
            ({"must": [{"nested": {"key": "items", "filter": {"should": []}}}]}, set()),
            ({"must": [{"nested": {"key": "items", "filter": {"must": [{"has_id": [1]}]}}}]},
             set()),
        ])

    def test_clauses(self):
        a = {"key": "tenant", "match": {"value": "a"}}
        c = {"key": "tenant", "match": {"value": "c"}}
        n1 = {"key": "n", "match": {"value": 1}}
        flag = {"key": "flag", "match": {"value": True}}
        self.check([
            ({"should": [c, n1]}, {1, UUID_A}),
            # An empty should is no constraint at the top level.
            ({"should": []}, self.ALL),
            ({"must": [a], "should": [flag, {"key": "n", "match": {"any": [3]}}]}, {1, 5}),
            ({"must_not": [a]}, {3, 4, 6, UUID_A}),
            # One condition instead of a list.
            ({"must": a}, {1, 2, 5}),
            ({"min_should": {"conditions": [a, n1, flag], "min_count": 2}}, {1}),
            # 1.19: an empty min_should with min_count > 0 matches nothing.
            ({"min_should": {"conditions": [], "min_count": 1}}, set()),
            # A filter as a condition.
            ({"must": [{"should": [c, {"has_id": [3]}]}]}, {3, UUID_A}),
            ({"must": [], "must_not": []}, self.ALL),
        ])

    def test_filters_apply_to_query_and_delete(self):
        flt = self.field("tenant", match={"value": "b"})
        points = self.ok("POST", "/collections/c/points/query",
                         {"query": [1, 0], "filter": flt})["points"]
        self.assertEqual({p["id"] for p in points}, {3, 4, 5})
        self.ok("POST", "/collections/c/points/delete", {"filter": flt})
        self.assertEqual(self.ids({}), {1, 2, 6, UUID_A})


class ViolationTest(StandInTest):
    def setUp(self):
        super().setUp()
        self.expect_violations = True
        self.create()

    def assert_violation(self, r, at, *fragments):
        """A 422 contract violation, recorded once with these fragments."""
        self.assertEqual(r.status, 422, r.body)
        self.assertTrue(r.error.startswith("contract violation: "), r.error)
        [v] = self.violations()
        self.assertEqual(v["kind"], "request")
        self.assertEqual(v["at"], at)
        for fragment in fragments:
            self.assertIn(fragment, v["error"])
        self.call("DELETE", "/__standin/violations")
        return v

    def test_bad_create_collection_body(self):
        r = self.call("PUT", "/collections/d", {"vectors": {"size": "four", "distance": "Cosine"}})
        v = self.assert_violation(r, "$.vectors", "'four' is not of type 'integer'")
        self.assertEqual((v["method"], v["path"], v["operation"]),
                         ("PUT", "/collections/d", "create_collection"))
        self.assertIn('"four"', v["body_excerpt"])
        self.assertEqual(self.ok("GET", "/collections/d/exists"), {"exists": False})

    def test_unknown_condition_shape(self):
        r = self.call("POST", "/collections/c/points/scroll",
                      {"filter": {"must": [{"tenant": "a"}]}})
        self.assert_violation(r, "$.filter.must[0]", "FieldCondition: 'key' is a required")

    def test_bad_match(self):
        r = self.call("POST", "/collections/c/points/count",
                      {"filter": {"must": [{"key": "n", "match": {"value": 1.5}}]}})
        self.assert_violation(r, "$.filter.must[0].match.value", "1.5")

    def test_field_condition_without_condition(self):
        r = self.call("POST", "/collections/c/points/count",
                      {"filter": {"must": [{"key": "n"}]}})
        self.assert_violation(r, "", "At least one field condition must be specified")

    def test_unknown_property(self):
        r = self.call("POST", "/collections/c/points/query",
                      {"query": [1, 0, 0, 0], "with_vectors": True})
        self.assert_violation(r, "$", "'with_vectors' was unexpected")

    def test_query_parameters(self):
        r = self.call("PUT", "/collections/c/points?wait=yes",
                      {"points": [{"id": 1, "vector": [1, 0, 0, 0]}]})
        self.assert_violation(r, "", "wait=yes")
        r = self.call("POST", "/collections/c/points/query?wait=true", {"query": [1, 0, 0, 0]})
        self.assert_violation(r, "", "`wait` is not declared for query_points")
        r = self.call("POST", "/collections/c/points/query?timeout=0", {"query": [1, 0, 0, 0]})
        self.assert_violation(r, "", "timeout=0")
        self.ok("POST", "/collections/c/points/query?timeout=5", {"query": [1, 0, 0, 0]})

    def test_unknown_route(self):
        self.assert_violation(self.call("GET", "/collection/c"), "", "GET /collection/c")
        r = self.call("DELETE", "/collections/c/points/scroll")
        v = self.assert_violation(r, "", "is not an operation")
        self.assertIsNone(v["operation"])

    def test_body_where_none_is_taken(self):
        r = self.call("DELETE", "/collections/c", {"force": True})
        self.assert_violation(r, "", "delete_collection takes no request body")

    def test_not_json(self):
        r = self.call("POST", "/collections/c/points/scroll", b"{limit: 1}")
        self.assertEqual(r.status, 400)
        self.assertTrue(r.error.startswith("Format error in JSON body: "), r.error)
        r = self.call("POST", "/collections/c/points/scroll", b"{}",
                      headers={"Content-Type": "text/plain"})
        self.assert_error(r, 400, "Content type error")
        r = self.call("POST", "/collections/c/points/scroll", b"NaN")
        self.assertEqual(r.status, 400)
        self.assertEqual(len(self.violations()), 3)


class ErrorTest(StandInTest):
    def setUp(self):
        super().setUp()
        self.create()

    def test_wrong_dimension(self):
        text = "Wrong input: Vector dimension error: expected dim: 4, got 3"
        self.assert_error(self.call("PUT", "/collections/c/points",
                                    {"points": [{"id": 1, "vector": [1, 0, 0]}]}), 400, text)
        self.assert_error(self.call("PUT", "/collections/c/points",
                                    {"batch": {"ids": [1], "vectors": [[1, 0, 0]]}}), 400, text)
        self.assert_error(self.call("POST", "/collections/c/points/query",
                                    {"query": [1, 0, 0]}), 400, text)
        self.assertEqual(self.ok("POST", "/collections/c/points/count", {}), {"count": 0})

    def test_missing_collection(self):
        text = "Not found: Collection `nope` doesn't exist!"
        for method, path, body in [
            ("PUT", "/collections/nope/points", {"points": [{"id": 1, "vector": [1, 0, 0, 0]}]}),
            ("POST", "/collections/nope/points/query", {"query": [1, 0, 0, 0]}),
            ("POST", "/collections/nope/points/scroll", {}),
            ("POST", "/collections/nope/points/count", {}),
            ("POST", "/collections/nope/points/delete", {"points": [1]}),
            ("PUT", "/collections/nope/index", {"field_name": "a", "field_schema": "keyword"}),
        ]:
            with self.subTest(path=path):
                self.assert_error(self.call(method, path, body), 404, text)

    def test_invalid_point_id(self):
        text = ("Format error in JSON body: value not-a-uuid is not a valid point ID, "
                "valid values are either an unsigned integer or a UUID")
        self.assert_error(self.call("PUT", "/collections/c/points",
                                    {"points": [{"id": "not-a-uuid", "vector": [1, 0, 0, 0]}]}),
                          400, text)
        self.assert_error(self.call("POST", "/collections/c/points/count",
                                    {"filter": {"must": [{"has_id": ["not-a-uuid"]}]}}),
                          400, text)

    def test_unknown_vector_name(self):
        self.assert_error(self.call("PUT", "/collections/c/points",
                                    {"points": [{"id": 1, "vector": {"img": [1, 0, 0, 0]}}]}),
                          400, "Wrong input: Not existing vector name error: img")

    def test_batch_lengths(self):
        self.expect_violations = True
        r = self.call("PUT", "/collections/c/points",
                      {"batch": {"ids": [1, 2], "vectors": [[1, 0, 0, 0]]}})
        self.assert_error(r, 422, "contract violation: Validation error in JSON body: "
                                  "[batch: number of ids and vectors must be equal (2 != 1)]")

    def test_unsupported_is_loud(self):
        self.expect_violations = True
        r = self.call("POST", "/collections/c/points/count", {"filter": {"must": [
            {"key": "loc", "geo_radius": {"center": {"lon": 0, "lat": 0}, "radius": 1}}]}})
        self.assertEqual(r.status, 501)
        r = self.call("GET", "/cluster")
        self.assertEqual(r.status, 501)
        self.assertEqual([v["kind"] for v in self.violations()], ["unsupported"] * 2)


class ApiKeyTest(StandInTest):
    server_args = ("--api-key", "s3cret")

    def call(self, method, path, body=None, headers=None, **kwargs):
        if path.startswith("/collections"):
            headers = {"api-key": "s3cret", **(headers or {})}
        return super().call(method, path, body, headers=headers, **kwargs)

    def assert_refused(self, headers, text):
        r = self.server.call("GET", "/collections", headers=headers)
        self.assertEqual(r.status, 401)
        self.assertTrue(r.headers["Content-Type"].startswith("text/plain"))
        self.assertEqual(r.body.decode(), text)

    def test_keys(self):
        self.assert_refused({}, "Must provide an API key or an Authorization bearer token")
        # Qdrant answers a wrong key with 401 as well (no 403 without JWT RBAC).
        self.assert_refused({"api-key": "wrong"}, "Invalid API key or JWT")
        self.assert_refused({"Authorization": "Bearer wrong"}, "Invalid API key or JWT")
        self.assert_refused({"Authorization": "Basic s3cret"},
                            "Must provide an API key or an Authorization bearer token")
        for headers in ({"api-key": "s3cret"}, {"Authorization": "Bearer s3cret"}):
            r = self.server.call("GET", "/collections", headers=headers)
            self.assertEqual(r.status, 200, headers)
        self.assertEqual(self.server.call("GET", "/").status, 200)  # whitelisted
        self.assertEqual(self.server.call("GET", "/healthz").body, b"healthz check passed")


class FaultTest(StandInTest):
    def setUp(self):
        super().setUp()
        self.create()

    def fault(self, **spec):
        self.assertEqual(self.call("POST", "/__standin/faults", spec).status, 200)

    def test_status_faults(self):
        self.fault(status=503, count=2, path_regex="/points/count$")
        for _ in range(2):
            r = self.call("POST", "/collections/c/points/count", {})
            self.assert_error(r, 503, "injected fault")
        self.assertEqual(self.ok("POST", "/collections/c/points/count", {}), {"count": 0})

        self.fault(status=500, body="boom", content_type="text/plain", method="GET")
        self.ok("POST", "/collections/c/points/count", {})  # method does not match
        r = self.call("GET", "/collections/c")
        self.assertEqual((r.status, r.body, r.headers["Content-Type"]),
                         (500, b"boom", "text/plain"))

        self.fault(status=429, body={"status": {"error": "slow down"}, "time": 0})
        self.assert_error(self.call("GET", "/collections"), 429, "slow down")

    def test_close(self):
        self.fault(close=True)
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionResetError)):
            self.call("GET", "/collections")
        self.ok("GET", "/collections")

    def test_delays(self):
        self.fault(delay_ms=300)
        started = time.monotonic()
        self.ok("GET", "/collections")
        self.assertGreaterEqual(time.monotonic() - started, 0.3)
        self.fault(delay_ms=2000)
        with self.assertRaises(socket.timeout):
            self.call("GET", "/collections", timeout=0.3)
        self.ok("GET", "/collections")

    def test_clear_and_bad_faults(self):
        self.fault(status=503, count=5)
        self.call("DELETE", "/__standin/faults")
        self.ok("GET", "/collections")
        for spec in ({}, {"status": 503, "close": True}, {"status": "503"}, {"delay": 1}):
            with self.subTest(spec=spec):
                self.assertEqual(self.call("POST", "/__standin/faults", spec).status, 400)

    def test_faulted_requests_are_still_checked(self):
        self.expect_violations = True
        self.fault(status=503)
        r = self.call("POST", "/collections/c/points/count", {"filter": {"bogus": []}})
        self.assertEqual(r.status, 503)
        self.assertEqual(len(self.violations()), 1)


class OldServerTest(StandInTest):
    """Posing as 1.9: no /points/query, /points/search instead, the 1.10 spec."""

    server_args = ("--version", "1.9.0")

    def setUp(self):
        super().setUp()
        self.create()
        self.upsert([{"id": 1, "vector": [1, 0, 0, 0], "payload": {"t": "a"}},
                     {"id": 2, "vector": [0, 1, 0, 0], "payload": {"t": "b"}}])

    def test_routes(self):
        self.assertEqual(self.call("GET", "/").json["version"], "1.9.0")
        r = self.call("POST", "/collections/c/points/query", {"query": [1, 0, 0, 0]})
        self.assertEqual((r.status, r.body), (404, b""))
        hits = self.ok("POST", "/collections/c/points/search",
                       {"vector": [1, 0, 0, 0], "limit": 5, "with_payload": True,
                        "filter": {"must": [{"key": "t", "match": {"value": "a"}}]}})
        self.assertEqual(hits, [{"id": 1, "version": 0, "score": 1.0, "payload": {"t": "a"}}])

    def test_old_spec(self):
        self.expect_violations = True
        r = self.call("PUT", "/collections/c/index",
                      {"field_name": "t", "field_schema": {"type": "keyword", "is_tenant": True}})
        self.assertEqual(r.status, 422)
        r = self.call("POST", "/collections/c/points/count?timeout=5", {})
        self.assertEqual(r.status, 422)
        self.assertEqual(len(self.violations()), 2)


class AncientServerTest(StandInTest):
    """Posing as 1.7: no /exists, 400 for duplicates, explicit nulls."""

    server_args = ("--version", "1.7.4")

    def test_differences(self):
        self.create()
        self.assertEqual(self.call("GET", "/collections/c/exists").status, 404)
        self.assert_error(self.call("PUT", "/collections/c",
                                    {"vectors": {"size": 4, "distance": "Cosine"}}),
                          400, "Wrong input: Collection `c` already exists!")
        self.upsert([{"id": 1, "vector": [1, 0, 0, 0]}])
        hits = self.ok("POST", "/collections/c/points/search", {"vector": [1, 0, 0, 0], "limit": 1})
        self.assertEqual(hits, [{"id": 1, "version": 0, "score": 1.0, "payload": None,
                                 "vector": None}])


class Pre119FilterTest(StandInTest):
    server_args = ("--version", "1.18.2")

    def test_empty_min_should_matches_all_before_1_19(self):
        self.create(size=2)
        self.upsert([{"id": 1, "vector": [1, 0]}])
        self.assertEqual(self.ok("POST", "/collections/c/points/count", {"filter": {
            "min_should": {"conditions": [], "min_count": 1}}}), {"count": 1})


class HttpTest(StandInTest):
    def test_keep_alive(self):
        self.ok("GET", "/collections")
        sock = self.server.conn.sock
        for _ in range(5):
            self.ok("GET", "/collections")
        self.assertIs(self.server.conn.sock, sock)

    def test_expect_continue_and_chunked(self):
        body = json.dumps({"vectors": {"size": 2, "distance": "Dot"}}).encode()
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=10) as s:
            s.sendall(b"PUT /collections/x HTTP/1.1\r\nHost: t\r\n"
                      b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(body))
            self.assertTrue(s.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n"))
            s.sendall(body)
            head, answer = read_http_answer(s)
        self.assertTrue(head.startswith("HTTP/1.1 200"), head)
        self.assertEqual(json.loads(answer)["result"], True)

        chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
        head, answer = self.server.raw(
            b"PUT /collections/y HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + chunked)
        self.assertTrue(head.startswith("HTTP/1.1 200"), head)

    def test_trailing_slash(self):
        self.ok("GET", "/collections/")

    def test_a_few_thousand_points(self):
        self.create("big", size=8, distance="Euclid")
        for start in range(0, 3000, 1000):
            self.ok("PUT", "/collections/big/points", {"batch": {
                "ids": list(range(start, start + 1000)),
                "vectors": [[(i * k) % 7 for k in range(8)] for i in range(start, start + 1000)],
                "payloads": [{"tenant": f"t{i % 10}"} for i in range(start, start + 1000)]}})
        for i in range(100):
            points = self.ok("POST", "/collections/big/points/query", {
                "query": [i % 7] * 8, "limit": 5,
                "filter": {"must": [{"key": "tenant", "match": {"value": f"t{i % 10}"}}]}})
            self.assertEqual(len(points["points"]), 5)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default=OPTIONS.server)
    parser.add_argument("--spec-dir", default=OPTIONS.spec_dir)
    args, rest = parser.parse_known_args()
    OPTIONS.server = os.path.abspath(args.server)
    OPTIONS.spec_dir = os.path.abspath(args.spec_dir)
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)


if __name__ == "__main__":
    main()
