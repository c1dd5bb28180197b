#!/usr/bin/python3
"""Qdrant contract stand-in: an HTTP server for memoryd's tests. It is a
contract stand-in, not Qdrant.

No real Qdrant server can run on the test machines, so memoryd's Qdrant REST
client is tested against this server. It has two jobs.

1. Contract check. Every request is checked against Qdrant's published OpenAPI
   spec (spec/openapi-v1.19.json; spec/openapi-v1.10.json when --version is
   below 1.11): the method and path must be an operation of the spec, the
   query parameters must be declared by it and match their schemas, and the
   JSON body must validate against the operation's request schema. The check
   is stricter than Qdrant in one way: object properties the spec does not list
   are violations (Qdrant silently ignores most of them, which hides typos such
   as `with_vectors`). A few rules Qdrant enforces outside its schema (its
   `validator` annotations, e.g. a field condition must have a condition) are
   checked too. Every violation is recorded (GET /__standin/violations) and
   answered with HTTP 422 and Qdrant's error shape
   `{"status": {"error": "contract violation: ..."}, "time": ...}`; a body that
   is not JSON or lacks `Content-Type: application/json` is recorded too but
   gets Qdrant's own 400 answer. The stand-in validates its own JSON answers
   against the spec's response schemas as well: a mismatch is a bug here and
   is recorded as a violation of kind "response".

2. Qdrant behaviour, in memory, for the operations memoryd uses: collections
   (list, get, create, delete, exists), payload indexes, points (upsert in
   both forms, retrieve, delete by ids or filter, scroll, count, query; search
   when posing as a server older than 1.10). Answers use Qdrant's envelope and
   error texts; filters follow Qdrant's semantics, which README.md next to this
   file documents with the Qdrant source each rule comes from. Operations of
   the spec it does not implement (and unimplemented features of implemented
   ones, e.g. named vectors or geo conditions) are answered with HTTP 501 and
   recorded as kind "unsupported", so a test cannot pass by accident.

Control endpoints, outside the spec, never validated, never faulted, no API
key needed:
  POST   /__standin/faults      inject a fault, JSON object:
           status, body (string or JSON), content_type, delay_ms, close,
           count (default 1), path_regex (re.search on the path), method.
           The next `count` matching requests get the answer; `delay_ms` alone
           delays them and then handles them normally; `close` drops the
           connection without answering.
  DELETE /__standin/faults      forget all faults
  GET    /__standin/violations  recorded violations, a JSON list
  DELETE /__standin/violations  forget them
  GET    /__standin/requests    the last 1000 requests: method, path, query
                                (name -> value), headers (lower-case names),
                                body (parsed JSON, or the text if not JSON)
  DELETE /__standin/requests    forget them
  DELETE /__standin/state       drop all collections

Usage: qdrant_contract_server.py [--host 127.0.0.1] [--port 0]
       [--version 1.19.0] [--api-key KEY] [--spec-dir DIR] [--log FILE]
Once listening it prints `PORT <n>` as its first line on stdout. Run it with
Debian's /usr/bin/python3 (needs python3-jsonschema).
"""

import argparse
import collections
import json
import math
import operator
import os
import re
import signal
import struct
import sys
import threading
import time
import traceback
import urllib.parse
import uuid
from array import array
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jsonschema
from jsonschema.exceptions import best_match

DEFAULT_VERSION = "1.19.0"
DEFAULT_SPEC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spec")
REQUEST_LOG_SIZE = 1000
BODY_EXCERPT = 500
MAX_ERROR_TEXT = 2000
MAX_MESSAGE = 200

# Versions where observable behaviour changed (checked in Qdrant's git history).
V_EXPLICIT_NULLS_UNTIL = (1, 9)    # before 1.9 Record/ScoredPoint had "payload": null
V_CONFLICT_409 = (1, 8)            # "already exists" was a 400 before 1.8
V_SPEC_1_19 = (1, 11)              # 1.10.x is closer to the 1.10 spec (no is_tenant)
V_EMPTY_MIN_SHOULD_FIX = (1, 19)   # qdrant#9401: empty min_should stopped matching all
# Operations the 1.10 spec lists that older servers do not route (actix: 404).
INTRODUCED = {
    "collection_exists": (1, 8),
    "query_points": (1, 10),
    "query_batch_points": (1, 10),
    "query_points_groups": (1, 10),
}
# Qdrant's api-key middleware lets these through (src/actix/mod.rs).
AUTH_WHITELIST_EXACT = ("/", "/healthz")
AUTH_WHITELIST_PREFIX = ("/readyz", "/livez")
# Filesystem-unsafe characters Qdrant rejects in new collection names
# (lib/common/common/src/validation.rs).
INVALID_NAME_CHARS = '<>:"/\\|?*\0\x1f'


class ApiError(Exception):
    """An error answer in Qdrant's shape: {"status": {"error": message}}."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


class Violation(Exception):
    """A request Qdrant's contract does not allow (recorded, answered 422)."""


class Unsupported(Exception):
    """Valid for Qdrant but not implemented here (recorded, answered 501)."""


def parse_version(text):
    parts = text.split(".")
    if not all(p.isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"not a version: {text!r}")
    return tuple(int(p) for p in parts)


def version_argument(text):
    parse_version(text)
    return text


# ---------------------------------------------------------------- numbers

_F32 = struct.Struct("<f")
I64_MIN, I64_MAX, U64_MAX = -(2**63), 2**63 - 1, 2**64 - 1


def to_f32(values):
    """Round floats to float32 (Qdrant stores vectors as f32); inf beyond range."""
    return array("f", values).tolist()


def f32(x):
    """x rounded to float32, as the shortest decimal that rounds back to it.

    Qdrant computes in f32 and serde_json prints an f32 as its shortest
    decimal (0.1, not 0.10000000149011612); returning that decimal as a
    Python float makes json.dumps print the same text. Used for what goes out
    (scores, vectors). Raises OverflowError beyond the f32 range.
    """
    y = _F32.unpack(_F32.pack(x))[0]
    # 9 significant digits always round-trip an f32, and if d digits do,
    # d + 1 do too (the nearest d+1-digit decimal is no farther away), so a
    # binary search finds the shortest length.
    low, high = 1, 9
    while low < high:
        mid = (low + high) // 2
        if _F32.unpack(_F32.pack(float(f"{y:.{mid}g}")))[0] == y:
            high = mid
        else:
            low = mid + 1
    return float(f"{y:.{low}g}")


def as_i64(value):
    """serde_json's Number::as_i64: the integer if it is one in i64 range."""
    if isinstance(value, int) and not isinstance(value, bool) and I64_MIN <= value <= I64_MAX:
        return value
    return None


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_int(text):
    # serde_json reads integers beyond i64/u64 as f64, like any other number.
    value = int(text)
    return value if I64_MIN <= value <= U64_MAX else _json_float(text)


def _json_float(text):
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number out of range: {text}")
    return value


def _json_constant(name):
    raise ValueError(f"expected value, got {name}")  # NaN/Infinity are not JSON


def parse_json(data):
    """Strict JSON (UTF-8, finite numbers) as serde_json reads it."""
    return json.loads(data.decode("utf-8"), parse_int=_json_int, parse_float=_json_float,
                      parse_constant=_json_constant)


def dump_json(value):
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


# ---------------------------------------------------------------- the spec

# Schema keywords holding sub-schemas; everything else is a leaf value.
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf")
_SCHEMA_SINGLE = ("items", "additionalProperties", "not")
# Keywords that do not constrain a value.
_ANNOTATIONS = {"description", "example", "deprecated", "default", "title", "format",
                "nullable"}


def to_json_schema(node):
    """Translate an OpenAPI 3.0 schema into JSON Schema draft 4.

    `nullable: true` becomes a "null" type: added to `type` when there is
    one; a bare {"nullable": true} (how the spec spells Option<T>, as the
    second branch of an anyOf) becomes {"type": "null"}; anything else is
    wrapped in anyOf with null. Objects listing `properties` without saying
    otherwise get additionalProperties: false (see the module docstring).
    """
    if not isinstance(node, dict):
        return node  # additionalProperties: true/false
    out = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS:
            out[key] = [to_json_schema(sub) for sub in value]
        elif key in _SCHEMA_SINGLE:
            out[key] = to_json_schema(value)
        elif key not in _ANNOTATIONS:
            out[key] = value
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    if node.get("nullable") is True:
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
            if "enum" in out:
                out["enum"] = out["enum"] + [None]
        elif out:
            out = {"anyOf": [out, {"type": "null"}]}
        else:
            out = {"type": "null"}
    return out


_draft4_items = jsonschema.Draft4Validator.VALIDATORS["items"]
_NUMBER_ITEMS = {"type": "number"}


def _items(validator, items, instance, schema):
    """Draft 4 `items`, with a shortcut for vectors: checking a list of
    numbers element by element costs jsonschema a few microseconds each,
    which made a batch of 384-dimensional points take seconds."""
    if (items == _NUMBER_ITEMS and isinstance(instance, list)
            and all(type(x) is float or type(x) is int for x in instance)):
        return
    yield from _draft4_items(validator, items, instance, schema)


Validator = jsonschema.validators.extend(jsonschema.Draft4Validator, {"items": _items})


class Operation:
    """One method + path of the spec, with its compiled validators."""

    def __init__(self, method, template, op, make_validator):
        self.method = method
        self.op_id = op.get("operationId", f"{method} {template}")
        # Literal segments match before {parameters}: /collections/aliases
        # is not the collection "aliases" (actix registers it first too).
        self.n_params = template.count("{")
        pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template))
        self.regex = re.compile(pattern + r"\Z")
        body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
        self.body_validator = make_validator(body["schema"]) if "schema" in body else None
        self.query_params = {
            p["name"]: make_validator(p.get("schema", {}))
            for p in op.get("parameters", []) if p.get("in") == "query"
        }
        self.response_validators = {}
        for status, response in op.get("responses", {}).items():
            schema = response.get("content", {}).get("application/json", {}).get("schema")
            if schema is not None:
                self.response_validators[status] = make_validator(schema)
        if self.op_id == "root":
            # The 1.10 spec wraps GET / in the {"result": ...} envelope, but
            # the server has always sent VersionInfo bare (src/actix/mod.rs,
            # index()); the 1.19 spec says so.
            self.response_validators["200"] = make_validator(
                {"$ref": "#/components/schemas/VersionInfo"})

    def response_validator(self, status):
        for key in (str(status), f"{status // 100}XX", "default"):
            if key in self.response_validators:
                return self.response_validators[key]
        return None


class Spec:
    """The operations of one OpenAPI document, validators compiled once."""

    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        self.name = os.path.basename(path)
        schemas = {name: to_json_schema(s) for name, s in doc["components"]["schemas"].items()}
        # Every $ref of the spec is local (#/components/schemas/...).
        resolver = jsonschema.RefResolver("", {"components": {"schemas": schemas}})

        def make_validator(schema):
            return Validator(to_json_schema(schema), resolver=resolver)

        self.operations = []
        for template, item in doc["paths"].items():
            for method, op in item.items():
                if method in ("get", "put", "post", "delete", "patch"):
                    self.operations.append(
                        Operation(method.upper(), template, op, make_validator))
        self.operations.sort(key=lambda o: o.n_params)

    def route(self, method, path):
        """(operation, path parameters) for a request, or (None, None)."""
        for op in self.operations:
            if op.method == method:
                m = op.regex.match(path)
                if m:
                    return op, {k: urllib.parse.unquote(v) for k, v in m.groupdict().items()}
        return None, None


def format_instance_path(path):
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def explain(error, depth=0):
    """An error's message; for anyOf/oneOf (the spec's unions) the best error
    of each alternative, named by its $ref, since "is not valid under any of
    the given schemas" alone does not say what is wrong."""
    if error.validator not in ("anyOf", "oneOf") or not error.context or depth >= 2:
        # Messages quote the instance; a vector can make that very long.
        return (error.message if len(error.message) <= MAX_MESSAGE
                else error.message[:MAX_MESSAGE] + "...")
    alternatives = error.schema[error.validator]
    by_branch = collections.defaultdict(list)
    for sub in error.context:
        by_branch[sub.schema_path[0]].append(sub)
    parts = []
    for index, errors in sorted(by_branch.items()):
        sub = best_match(errors)
        label = alternatives[index].get("$ref", f"#{index}").rsplit("/", 1)[-1]
        where = format_instance_path(sub.relative_path)
        parts.append(f"{label}: {where[1:] + ': ' if len(where) > 1 else ''}"
                     f"{explain(sub, depth + 1)}")
    return f"matches none of {error.validator} [{'; '.join(parts)}]"


def schema_error(validator, instance):
    """(message, where) of the most relevant schema error, or None if valid."""
    error = best_match(validator.iter_errors(instance))
    if error is None:
        return None
    message = explain(error)
    if len(message) > MAX_ERROR_TEXT:
        message = message[:MAX_ERROR_TEXT] + "..."
    return message, format_instance_path(error.absolute_path)


def query_value_matches(validator, raw):
    """Whether a query string value fits its schema, read the way serde does
    (booleans are exactly true/false, integers are decimal digits)."""
    candidates = [raw]
    if raw in ("true", "false"):
        candidates.append(raw == "true")
    if re.fullmatch(r"-?[0-9]+", raw):
        candidates.append(int(raw))
    return any(validator.is_valid(c) for c in candidates)


# ---------------------------------------------------------------- point ids

_UUID_HYPHENATED = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# The forms the uuid crate parses: simple, hyphenated, braced, urn.
_UUID_FORMS = re.compile(
    rf"[0-9a-fA-F]{{32}}|{_UUID_HYPHENATED}|\{{{_UUID_HYPHENATED}\}}|urn:uuid:{_UUID_HYPHENATED}")


def parse_point_id(value):
    """An unsigned 64-bit integer, or a UUID normalised to lower-case hyphenated
    form as Qdrant answers it. Anything else is a 400 like Qdrant's."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= U64_MAX:
        return value
    if isinstance(value, str) and _UUID_FORMS.fullmatch(value):
        return str(uuid.UUID(value.removeprefix("urn:uuid:")))
    shown = value if isinstance(value, str) else json.dumps(value)
    raise ApiError(400, f"Format error in JSON body: value {shown} is not a valid point ID, "
                        "valid values are either an unsigned integer or a UUID")


def id_order(point_id):
    """Qdrant's ExtendedPointId order: all integers, then UUIDs by their bytes."""
    return (1, point_id) if isinstance(point_id, str) else (0, point_id)


# ---------------------------------------------------------------- JSON paths

_RAW_KEY = re.compile(r"[\w-]+")
_QUOTED_KEY = re.compile(r'"([^"\\]*)"')
_INDEX = re.compile(r"\[([0-9]+)\]")
WILDCARD = ("[]",)


def parse_json_path(text):
    """Qdrant's payload key syntax (lib/segment/src/json_path/parse.rs):
    key, then .key, ."quoted key", [n] or [] any number of times.
    Returns (first key, tuple of items); an item is ("key", name),
    ("index", n) or WILDCARD."""
    m = _RAW_KEY.match(text) or _QUOTED_KEY.match(text)
    if not m:
        raise ApiError(400, f"Format error in JSON body: Invalid json path: '{text}'")
    first = m.group(1) if m.re is _QUOTED_KEY else m.group(0)
    pos, rest = m.end(), []
    while pos < len(text):
        if text.startswith("[]", pos):
            rest.append(WILDCARD)
            pos += 2
        elif (m := _INDEX.match(text, pos)):
            rest.append(("index", int(m.group(1))))
            pos = m.end()
        elif text.startswith(".", pos) and (m := (_RAW_KEY.match(text, pos + 1)
                                                   or _QUOTED_KEY.match(text, pos + 1))):
            rest.append(("key", m.group(1) if m.re is _QUOTED_KEY else m.group(0)))
            pos = m.end()
        else:
            raise ApiError(400, f"Format error in JSON body: Invalid json path: '{text}'")
    return first, tuple(rest)


def path_values(payload, path):
    """The values a path selects (JsonPath::value_get): keys descend into
    objects only, [n] and [] into arrays only, so a path without [] does not
    look inside an intermediate array. A leaf array is one value; callers
    that match values flatten it themselves."""
    first, rest = path
    if first not in payload:
        return []
    out = []

    def walk(value, items):
        if not items:
            out.append(value)
            return
        head, tail = items[0], items[1:]
        if head == WILDCARD:
            if isinstance(value, list):
                for element in value:
                    walk(element, tail)
        elif head[0] == "key":
            if isinstance(value, dict) and head[1] in value:
                walk(value[head[1]], tail)
        elif isinstance(value, list) and head[1] < len(value):
            walk(value[head[1]], tail)

    walk(payload[first], rest)
    return out


def select_payload(payload, selector):
    """PayloadSelector::process: include keeps paths compatible with a
    pattern (either is a prefix of the other), exclude drops paths a pattern
    is a prefix of. Array elements are addressed as [] (JsonPath::value_filter)."""
    kind, patterns = selector

    def keep(first, rest):
        if kind == "include":
            return any(p[0] == first and all(a == b for a, b in zip(p[1], rest))
                       for p in patterns)
        return not any(p[0] == first and rest[:len(p[1])] == p[1] for p in patterns)

    def run(first, rest, value):
        if isinstance(value, list):
            inner = rest + (WILDCARD,)
            return [run(first, inner, v) for v in value if keep(first, inner)]
        if isinstance(value, dict):
            out = {}
            for key, v in value.items():
                inner = rest + (("key", key),)
                if keep(first, inner):
                    out[key] = run(first, inner, v)
            return out
        return value

    return {key: run(key, (), value) for key, value in payload.items() if keep(key, ())}


# ---------------------------------------------------------------- filters
#
# A Filter is compiled once per request into a function (point id, payload)
# -> bool. Compiling walks the whole filter, so bad paths, bad ids and
# unsupported conditions are reported even when no point is tested.


def _conditions(value):
    """must/should/must_not take one condition or a list (MaybeOneOrMany)."""
    if value is None:
        return None
    return value if isinstance(value, list) else [value]


class FilterCompiler:
    def __init__(self, version):
        self.empty_min_should_matches_all = version < V_EMPTY_MIN_SHOULD_FIX

    def compile(self, flt, nested=False):
        """nested: inside a `nested` condition Qdrant checks the filter with
        query_checker::check_payload, not the optimized filter of the top
        level. There an empty `should` list matches nothing (any() of
        nothing) and has_id never matches (no id tracker)."""
        should = _conditions(flt.get("should"))
        should = None if should is None else [self.condition(c, nested) for c in should]
        must = [self.condition(c, nested) for c in _conditions(flt.get("must")) or []]
        must_not = [self.condition(c, nested) for c in _conditions(flt.get("must_not")) or []]
        min_should = flt.get("min_should")
        if min_should is not None:
            min_conditions = [self.condition(c, nested) for c in min_should["conditions"]]
            min_count = min_should["min_count"]
            if not min_conditions and not nested and self.empty_min_should_matches_all:
                min_should = None
        # The optimized (top level) filter treats an empty `should` as "no
        # constraint"; check_payload's any() over it is false.
        empty_should_result = not nested

        def check(pid, payload):
            if should is not None:
                if should:
                    if not any(c(pid, payload) for c in should):
                        return False
                elif not empty_should_result:
                    return False
            if min_should is not None:
                matched = 0
                for c in min_conditions:
                    if matched >= min_count:
                        break
                    matched += c(pid, payload)
                if matched < min_count:
                    return False
            if not all(c(pid, payload) for c in must):
                return False
            return not any(c(pid, payload) for c in must_not)

        return check

    def condition(self, cond, nested):
        # Qdrant tries the untagged variants in this order; the (strict) schema
        # already made sure each condition has exactly one shape.
        if "key" in cond:
            return self.field_condition(cond)
        if "is_empty" in cond:
            path = parse_json_path(cond["is_empty"]["key"])
            # common/utils.rs check_is_empty: every value null or [] (true if none)
            return lambda pid, payload: all(
                v is None or v == [] for v in path_values(payload, path))
        if "is_null" in cond:
            path = parse_json_path(cond["is_null"]["key"])
            # common/utils.rs check_is_null: some value is null ([null] is not)
            return lambda pid, payload: any(v is None for v in path_values(payload, path))
        if "has_id" in cond:
            ids = {parse_point_id(i) for i in cond["has_id"]}
            if nested:
                return lambda pid, payload: False
            return lambda pid, payload: pid in ids
        if "nested" in cond:
            first, rest = parse_json_path(cond["nested"]["key"])
            path = (first, rest if rest[-1:] == (WILDCARD,) else rest + (WILDCARD,))
            inner = self.compile(cond["nested"]["filter"], nested=True)
            return lambda pid, payload: any(
                isinstance(o, dict) and inner(pid, o) for o in path_values(payload, path))
        for kind in ("has_vector", "slice"):
            if kind in cond:
                raise Unsupported(f"`{kind}` conditions")
        return self.compile(cond, nested)

    def field_condition(self, cond):
        """FieldCondition (payload_storage/condition_checker.rs + query_checker.rs)."""
        path = parse_json_path(cond["key"])
        for kind in ("geo_bounding_box", "geo_radius", "geo_polygon"):
            if cond.get(kind) is not None:
                raise Unsupported(f"`{kind}` conditions")
        kinds = ("match", "range", "values_count", "is_empty", "is_null")
        if all(cond.get(k) is None for k in kinds):
            raise Violation("Validation error in JSON body: "
                            "[At least one field condition must be specified]")
        matchers = [self.match(cond["match"])] if cond.get("match") is not None else []
        if cond.get("range") is not None:
            matchers.append(self.range(cond["range"]))

        def check_match(value):
            # `match` and `range` of one condition are OR-ed (check_match).
            return any(m(value) for m in matchers)

        values_count, is_empty, is_null = (cond.get(k) for k in kinds[2:])
        if values_count is not None:
            # ValuesCount::check_count_from: null counts 0, an array its length
            in_bounds = self.bounds(values_count)
            per_value = lambda v: in_bounds(
                0 if v is None else len(v) if isinstance(v, list) else 1)
            if_missing = in_bounds(0)
        elif is_empty is not None:
            # condition_checker.rs check_is_empty: null and [] are empty
            per_value = lambda v: (v is None or v == []) == is_empty
            if_missing = is_empty
        elif is_null is not None:
            # condition_checker.rs check_is_null: null, or an array holding one
            per_value = lambda v: (v is None or (isinstance(v, list) and None in v)) == is_null
            if_missing = not is_null
        else:
            # A leaf array matches if any element does (one level only).
            per_value = lambda v: (any(check_match(x) for x in v) if isinstance(v, list)
                                   else check_match(v))
            if_missing = False

        def check(pid, payload):
            values = path_values(payload, path)
            if not values:
                return if_missing
            return any(per_value(v) for v in values)

        return check

    @staticmethod
    def match(m):
        if "value" in m:
            expected = m["value"]
            if isinstance(expected, bool):
                return lambda v: isinstance(v, bool) and v == expected
            if isinstance(expected, str):
                return lambda v: isinstance(v, str) and v == expected
            # Integer against as_i64(): payload 1.0 does not match 1.
            return lambda v: as_i64(v) == expected
        if "text" in m or "phrase" in m:
            # Substring match; with a full-text index Qdrant tokenizes instead.
            text = m.get("text", m.get("phrase"))
            return lambda v: isinstance(v, str) and text in v
        if "text_any" in m:
            tokens = m["text_any"].split()
            return lambda v: isinstance(v, str) and any(t in v for t in tokens)
        if "prefix" in m:
            prefix = m["prefix"]
            return lambda v: isinstance(v, str) and v.startswith(prefix)
        if "any" in m:
            values = m["any"]
            # AnyVariants is untagged, strings first: [] is a string list.
            if all(isinstance(x, str) for x in values):
                strings = set(values)
                return lambda v: isinstance(v, str) and v in strings
            integers = set(values)
            return lambda v: as_i64(v) in integers
        values = m["except"]
        if all(isinstance(x, str) for x in values):
            strings = set(values)
            return lambda v: v is not None and (v not in strings if isinstance(v, str) else True)
        integers = set(values)

        def not_in_integers(v):
            # null never matches; other types and non-i64 numbers always do.
            if v is None:
                return False
            i = as_i64(v) if is_number(v) else None
            return i is None or i not in integers

        return not_in_integers

    def range(self, r):
        if any(isinstance(r.get(b), str) for b in ("lt", "gt", "gte", "lte")):
            raise Unsupported("datetime ranges")
        # Numbers only, compared as f64 (bounds too); no bools, strings or
        # nested arrays.
        in_bounds = self.bounds({b: float(x) for b, x in r.items() if x is not None})
        return lambda v: is_number(v) and in_bounds(float(v))

    @staticmethod
    def bounds(r):
        lt, gt, gte, lte = (r.get(b) for b in ("lt", "gt", "gte", "lte"))
        return lambda x: ((lt is None or x < lt) and (gt is None or x > gt)
                          and (gte is None or x >= gte) and (lte is None or x <= lte))


# ---------------------------------------------------------------- collections

DISTANCES = {
    # name: (score function, larger is better)
    "Cosine": (lambda q, v: sum(map(operator.mul, q, v)), True),
    "Dot": (lambda q, v: sum(map(operator.mul, q, v)), True),
    "Euclid": (math.dist, False),
    "Manhattan": (lambda q, v: sum(map(abs, map(operator.sub, q, v))), False),
}


class Point:
    __slots__ = ("vector", "payload", "version", "_printed_vector")

    def __init__(self, vector, payload, version):
        self.vector = vector  # f32 values
        self.payload = payload
        self.version = version
        self._printed_vector = None

    def printed_vector(self):
        """The vector as Qdrant prints it; computed once, it is not cheap."""
        if self._printed_vector is None:
            self._printed_vector = [f32(x) for x in self.vector]
        return self._printed_vector


class Collection:
    def __init__(self, vectors):
        self.vectors = vectors  # the VectorParams it was created with
        self.size = vectors["size"]
        self.distance = vectors["distance"]
        self.points = {}  # point id -> Point
        self.indexes = {}  # field name -> field_schema as given
        self.next_operation = 0

    def operation(self):
        number = self.next_operation
        self.next_operation += 1
        return number

    def vector(self, raw):
        """A request vector as stored: f32, normalised for Cosine."""
        if isinstance(raw, dict):
            if "indices" in raw:
                raise ApiError(400, "Wrong input: Conversion between sparse and regular "
                                    "vectors failed")
            raise Unsupported("inference objects (Document/Image/InferenceObject) as vectors")
        if raw and isinstance(raw[0], list):
            raise ApiError(400, "Wrong input: Conversion between multi and regular vectors failed")
        if len(raw) != self.size:
            raise ApiError(400, f"Wrong input: Vector dimension error: expected dim: {self.size}, "
                                f"got {len(raw)}")
        vector = to_f32(raw)
        if any(math.isinf(x) for x in vector):
            raise Unsupported("vector components beyond the f32 range")
        if self.distance == "Cosine":
            # spaces/simple.rs cosine_preprocess: leave zero and (nearly)
            # unit vectors alone, otherwise divide by the length.
            squares = sum(x * x for x in vector)
            if squares >= 1.1920929e-07 and abs(squares - 1.0) > 1e-6:
                length = math.sqrt(squares)
                vector = to_f32([x / length for x in vector])
        return vector

    def named_vector(self, raw):
        """VectorStruct of a point: a plain vector, or {"": vector}."""
        # Not a sparse vector, nor an inference object (they all name a model).
        if isinstance(raw, dict) and "indices" not in raw and "model" not in raw:
            for name in raw:
                if name != "":
                    raise ApiError(400, f"Wrong input: Not existing vector name error: {name}")
            if "" not in raw:
                raise Unsupported("points without the default vector")
            raw = raw[""]
        return self.vector(raw)

    def score(self, query, vector):
        return DISTANCES[self.distance][0](query, vector)


# ---------------------------------------------------------------- the server

class StandIn:
    """State and request handling; one instance per server."""

    def __init__(self, spec_dir, version, api_key, log):
        self.version_text = version
        self.version = parse_version(version)
        spec_file = "openapi-v1.19.json" if self.version >= V_SPEC_1_19 else "openapi-v1.10.json"
        self.spec = Spec(os.path.join(spec_dir, spec_file))
        self.api_key = api_key
        self.explicit_nulls = self.version < V_EXPLICIT_NULLS_UNTIL
        self.filters = FilterCompiler(self.version)
        self.log_file = log
        # One lock for everything shared: collections, faults, logs, and the
        # jsonschema RefResolver (it keeps a scope stack while validating).
        self.lock = threading.Lock()
        self.collections = {}
        self.faults = []
        self.violations = []
        self.requests = collections.deque(maxlen=REQUEST_LOG_SIZE)
        self.handlers = {
            "root": self.root,
            "healthz": self.healthz,
            "livez": self.healthz,
            "readyz": self.readyz,
            "get_collections": self.get_collections,
            "get_collection": self.get_collection,
            "create_collection": self.create_collection,
            "delete_collection": self.delete_collection,
            "collection_exists": self.collection_exists,
            "create_field_index": self.create_field_index,
            "upsert_points": self.upsert_points,
            "get_points": self.get_points,
            "delete_points": self.delete_points,
            "scroll_points": self.scroll_points,
            "count_points": self.count_points,
            "query_points": self.query_points,
            "search_points": self.search_points,
        }

    def log(self, line):
        print(time.strftime("%H:%M:%S ") + line, file=self.log_file, flush=True)

    # ------------------------------------------------------------ dispatch

    def handle(self, h):
        started = time.monotonic()
        try:
            body = read_body(h)
        except ValueError:
            h.close_connection = True
            send(h, 400, b"bad chunked request body", "text/plain")
            return
        url = urllib.parse.urlsplit(h.path)
        if url.path.startswith("/__standin/"):
            self.control(h, url.path, body)
            return
        # actix NormalizePath::trim: merge slashes, drop a trailing one.
        path = re.sub("/+", "/", url.path)
        if len(path) > 1:
            path = path.rstrip("/")
        query = urllib.parse.parse_qsl(url.query, keep_blank_values=True)
        req = Request(h.command, path, url.query, query, h.headers, body)
        with self.lock:
            self.requests.append(req.log_entry())

        op, params = self.spec.route(req.method, path)
        if op is not None and self.version < INTRODUCED.get(op.op_id, (0,)):
            op = None  # the simulated server has no such route: not a violation
            problems = []
        else:
            problems = self.check_request(req, op)

        fault = self.take_fault(req)
        if fault is not None:
            if fault.get("delay_ms"):
                time.sleep(fault["delay_ms"] / 1000)
            if fault.get("close"):
                h.close_connection = True
                self.log(f"{req.method} {h.path} -> connection dropped (fault)")
                return
            if "status" in fault:
                send(h, fault["status"], fault["body"], fault["content_type"])
                return

        auth = self.check_api_key(req)
        if auth is not None:
            send(h, auth[0], auth[1].encode(), "text/plain; charset=utf-8")
            return
        if problems:
            status, message = problems[0]
            self.answer_error(h, op, req, status, message, started)
            return
        if op is None:
            send(h, 404, b"", None)  # actix's answer to an unknown route
            return

        handler = self.handlers.get(op.op_id)
        try:
            if handler is None:
                raise Unsupported(f"operation {op.op_id}")
            status, result = handler(req, params)
        except ApiError as e:
            self.answer_error(h, op, req, e.status, e.message, started)
        except Violation as e:
            self.record("request", req, str(e), "", op)
            self.answer_error(h, op, req, 422, f"contract violation: {e}", started)
        except Unsupported as e:
            message = f"the Qdrant stand-in does not implement {e}"
            self.record("unsupported", req, message, "", op)
            self.answer_error(h, op, req, 501, message, started)
        except Exception:  # a bug here; answer like a Qdrant service error
            self.record("standin-error", req, traceback.format_exc(), "", op)
            self.answer_error(h, op, req, 500, "Service internal error: stand-in bug, see its log",
                              started)
        else:
            if isinstance(result, PlainText):
                send(h, status, result.text.encode(), "text/plain; charset=utf-8")
            elif isinstance(result, Bare):
                self.answer(h, op, req, status, result.value)
            else:
                envelope = {"result": result, "status": "ok",
                            "time": time.monotonic() - started}
                self.answer(h, op, req, status, envelope)

    def check_request(self, req, op):
        """Contract problems of a request as (HTTP status, message); all recorded."""
        problems = []

        def problem(status, message, at=""):
            self.record("request", req, message, at, op)
            problems.append((status, f"contract violation: {message}" if status == 422
                             else message))

        if op is None:
            problem(422, f"{req.method} {req.path} is not an operation of {self.spec.name}")
            return problems
        seen = set()
        for name, value in req.query:
            validator = op.query_params.get(name)
            if validator is None:
                problem(422, f"query parameter `{name}` is not declared for {op.op_id}")
            elif name in seen:
                problem(422, f"query parameter `{name}` given twice")
            elif not query_value_matches(validator, value):
                problem(422, f"query parameter {name}={value} does not match "
                             f"{json.dumps(validator.schema)}")
            seen.add(name)

        if op.body_validator is None:
            if req.body:
                problem(422, f"{op.op_id} takes no request body")
            return problems
        content_type = (req.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if content_type != "application/json" and not content_type.endswith("+json"):
            problem(400, "Content type error")  # actix JsonConfig, content type required
            return problems
        if req.json_error is not None:
            problem(400, f"Format error in JSON body: {req.json_error}")
            return problems
        with self.lock:
            error = schema_error(op.body_validator, req.json)
        if error is not None:
            message, at = error
            problem(422, f"{at}: {message}", at)
        return problems

    def check_api_key(self, req):
        """(status, text/plain body) when Qdrant's auth middleware refuses
        (src/common/auth/mod.rs: validate_request), else None."""
        if self.api_key is None or req.path in AUTH_WHITELIST_EXACT or \
                req.path.startswith(AUTH_WHITELIST_PREFIX):
            return None
        key = req.headers.get("api-key")
        if key is None:
            authorization = req.headers.get("Authorization") or ""
            if authorization.startswith("Bearer "):
                key = authorization[len("Bearer "):]
        if key is None:
            return 401, "Must provide an API key or an Authorization bearer token"
        if key != self.api_key:
            return 401, "Invalid API key or JWT"
        return None

    def take_fault(self, req):
        with self.lock:
            for fault in self.faults:
                if fault.get("method", req.method).upper() != req.method:
                    continue
                if "path_regex" in fault and not re.search(fault["path_regex"], req.path):
                    continue
                fault["count"] -= 1
                if fault["count"] <= 0:
                    self.faults.remove(fault)
                return fault
        return None

    def record(self, kind, req, error, at, op):
        entry = {
            "kind": kind,
            "method": req.method,
            "path": req.path,
            "query": req.raw_query,
            "operation": op.op_id if op else None,
            "error": error,
            "at": at,
            "body_excerpt": req.body[:BODY_EXCERPT].decode("utf-8", "replace"),
        }
        with self.lock:
            self.violations.append(entry)
        self.log(f"VIOLATION {kind} {req.method} {req.path}: {error}")

    def answer_error(self, h, op, req, status, message, started):
        self.answer(h, op, req, status,
                    {"status": {"error": message}, "time": time.monotonic() - started})

    def answer(self, h, op, req, status, value):
        """Send a JSON answer, checking it against the spec first."""
        validator = op.response_validator(status) if op else None
        if validator is not None:
            with self.lock:
                error = schema_error(validator, value)
            if error is not None:
                message, at = error
                self.record("response", req,
                            f"{status} answer does not match the spec: {at}: {message}", at, op)
        send(h, status, dump_json(value), "application/json")

    # ------------------------------------------------------------ control

    # The control endpoints every stand-in shares (the embedder's takes this
    # method); new_fault and reset_state are what differ between them.
    def control(self, h, path, body):
        status, value = 200, []
        with self.lock:
            key = (h.command, path)
            if key == ("POST", "/__standin/faults"):
                try:
                    self.faults.append(self.new_fault(parse_json(body)))
                    value = {"faults": len(self.faults)}
                except ValueError as e:
                    status, value = 400, {"error": f"bad fault: {e}"}
            elif key == ("DELETE", "/__standin/faults"):
                self.faults.clear()
                value = {"faults": 0}
            elif key == ("GET", "/__standin/violations"):
                value = dump_json(self.violations)
            elif key == ("DELETE", "/__standin/violations"):
                self.violations.clear()
            elif key == ("GET", "/__standin/requests"):
                value = dump_json(list(self.requests))
            elif key == ("DELETE", "/__standin/requests"):
                self.requests.clear()
            elif key == ("DELETE", "/__standin/state"):
                value = self.reset_state()
            else:
                status, value = 404, {"error": f"no control endpoint {h.command} {path}"}
        # The logs are encoded under the lock: other threads append to them.
        send(h, status, value if isinstance(value, bytes) else dump_json(value),
             "application/json")

    def new_fault(self, spec):
        """A fault from its control request (a faulted answer's default body
        is Qdrant's error envelope)."""
        return make_fault(spec)

    def reset_state(self):
        """DELETE /__standin/state: drop all collections (lock held)."""
        self.collections.clear()
        return {"collections": 0}

    # ------------------------------------------------------------ operations
    #
    # Each takes (request, path parameters) and returns (HTTP status, result)
    # where result goes into the {"result": ...} envelope, unless it is Bare
    # (sent as is) or PlainText.

    def root(self, req, params):
        return 200, Bare({"title": "qdrant - vector search engine",
                          "version": self.version_text, "commit": "0" * 40})

    def healthz(self, req, params):
        return 200, PlainText("healthz check passed")

    def readyz(self, req, params):
        return 200, PlainText("all shards are ready")

    def get_collections(self, req, params):
        with self.lock:
            names = sorted(self.collections)
        return 200, {"collections": [{"name": n} for n in names]}

    def collection(self, name):
        """The collection; call with the lock held."""
        coll = self.collections.get(name)
        if coll is None:
            raise ApiError(404, f"Not found: Collection `{name}` doesn't exist!")
        return coll

    def get_collection(self, req, params):
        with self.lock:
            coll = self.collection(params["collection_name"])
            payload_schema = {}
            for field, schema in coll.indexes.items():
                path = parse_json_path(field)
                info = {"data_type": schema if isinstance(schema, str) else schema["type"]}
                if isinstance(schema, dict):
                    info["params"] = schema
                info["points"] = sum(1 for p in coll.points.values()
                                     if any(v is not None and v != []
                                            for v in path_values(p.payload, path)))
                payload_schema[field] = info
            return 200, {
                "status": "green",
                "optimizer_status": "ok",
                "indexed_vectors_count": 0,
                "points_count": len(coll.points),
                "segments_count": 1,
                "config": {
                    "params": {"vectors": coll.vectors, "shard_number": 1,
                               "replication_factor": 1, "write_consistency_factor": 1,
                               "on_disk_payload": True},
                    "hnsw_config": {"m": 16, "ef_construct": 100, "full_scan_threshold": 10000,
                                    "max_indexing_threads": 0, "on_disk": False},
                    "optimizer_config": {"deleted_threshold": 0.2,
                                         "vacuum_min_vector_number": 1000,
                                         "default_segment_number": 0,
                                         "max_segment_size": None, "memmap_threshold": None,
                                         "indexing_threshold": 10000, "flush_interval_sec": 5,
                                         "max_optimization_threads": None},
                    "wal_config": {"wal_capacity_mb": 32, "wal_segments_ahead": 0},
                    "quantization_config": None,
                },
                "payload_schema": payload_schema,
            }

    def create_collection(self, req, params):
        name = params["collection_name"]
        if not 1 <= len(name) <= 255:
            raise Violation("Validation error in path parameters: "
                            "[collection_name: must be from 1 to 255 characters]")
        bad = next((c for c in INVALID_NAME_CHARS if c in name), None)
        if bad is not None:
            raise Violation("Validation error in path parameters: "
                            f"[collection_name: collection name cannot contain \"{bad}\" char]")
        vectors = req.json.get("vectors")
        if vectors is None:
            raise Unsupported("collections without a dense vector")
        if "size" not in vectors:
            raise Unsupported("named vectors")
        with self.lock:
            if name in self.collections:
                status = 409 if self.version >= V_CONFLICT_409 else 400
                raise ApiError(status, f"Wrong input: Collection `{name}` already exists!")
            self.collections[name] = Collection(vectors)
        return 200, True

    def delete_collection(self, req, params):
        with self.lock:
            return 200, self.collections.pop(params["collection_name"], None) is not None

    def collection_exists(self, req, params):
        with self.lock:
            return 200, {"exists": params["collection_name"] in self.collections}

    def update_result(self, req, coll):
        wait = dict(req.query).get("wait") == "true"
        return {"operation_id": coll.operation(),
                "status": "completed" if wait else "acknowledged"}

    def create_field_index(self, req, params):
        field = req.json["field_name"]
        parse_json_path(field)
        schema = req.json.get("field_schema")
        if schema is None:
            raise Unsupported("index type inference (pass field_schema)")
        with self.lock:
            coll = self.collection(params["collection_name"])
            coll.indexes[field] = schema
            return 200, self.update_result(req, coll)

    def upsert_points(self, req, params):
        body = req.json
        for key in ("update_filter", "update_mode", "shard_key"):
            if body.get(key) is not None:
                raise Unsupported(f"`{key}` in upserts")
        with self.lock:
            coll = self.collection(params["collection_name"])
            if "batch" in body:
                batch = body["batch"]
                ids, vectors, payloads = batch["ids"], batch["vectors"], batch.get("payloads")
                if isinstance(vectors, dict):
                    if set(vectors) - {""}:
                        name = min(set(vectors) - {""})
                        raise ApiError(400, f"Wrong input: Not existing vector name error: {name}")
                    vectors = vectors.get("", [])
                for what, items in (("vectors", vectors), ("payloads", payloads)):
                    if items is not None and len(items) != len(ids):
                        raise Violation("Validation error in JSON body: [batch: number of ids and "
                                        f"{what} must be equal ({len(ids)} != {len(items)})]")
                points = [(pid, coll.vector(v), (payloads[i] if payloads else None))
                          for i, (pid, v) in enumerate(zip(ids, vectors))]
            else:
                points = [(p["id"], coll.named_vector(p["vector"]), p.get("payload"))
                          for p in body["points"]]
            parsed = [(parse_point_id(pid), vector, payload or {})
                      for pid, vector, payload in points]
            result = self.update_result(req, coll)
            for pid, vector, payload in parsed:
                coll.points[pid] = Point(vector, payload, result["operation_id"])
            return 200, result

    def get_points(self, req, params):
        body = req.json
        ids = [parse_point_id(i) for i in body["ids"]]
        payload_sel = payload_selector(body.get("with_payload"), default=False)
        with_vector = vector_selected(body.get("with_vector"))
        with self.lock:
            coll = self.collection(params["collection_name"])
            out, seen = [], set()
            for pid in ids:  # request order, each point once
                if pid in coll.points and pid not in seen:
                    seen.add(pid)
                    out.append(self.record_of(pid, coll.points[pid], payload_sel, with_vector))
            return 200, out

    def delete_points(self, req, params):
        body = req.json
        if body.get("shard_key") is not None:
            raise Unsupported("`shard_key`")
        with self.lock:
            coll = self.collection(params["collection_name"])
            if "points" in body:
                doomed = [parse_point_id(i) for i in body["points"]]
            else:
                check = self.filters.compile(body["filter"])
                doomed = [pid for pid, p in coll.points.items() if check(pid, p.payload)]
            result = self.update_result(req, coll)
            for pid in doomed:
                coll.points.pop(pid, None)
            return 200, result

    def matching(self, coll, body):
        """(id, Point) pairs passing the body's filter, in no particular order."""
        flt = body.get("filter")
        if flt is None:
            return list(coll.points.items())
        check = self.filters.compile(flt)
        return [(pid, p) for pid, p in coll.points.items() if check(pid, p.payload)]

    def scroll_points(self, req, params):
        body = req.json
        for key in ("order_by", "shard_key"):
            if body.get(key) is not None:
                raise Unsupported(f"`{key}` in scroll")
        limit = body.get("limit") or 10
        offset = body.get("offset")
        start = id_order(parse_point_id(offset)) if offset is not None else None
        payload_sel = payload_selector(body.get("with_payload"), default=True)
        with_vector = vector_selected(body.get("with_vector"))
        with self.lock:
            coll = self.collection(params["collection_name"])
            page = sorted(((pid, p) for pid, p in self.matching(coll, body)
                           if start is None or id_order(pid) >= start),
                          key=lambda item: id_order(item[0]))[:limit + 1]
            next_offset = page.pop()[0] if len(page) > limit else None
            points = [self.record_of(pid, p, payload_sel, with_vector) for pid, p in page]
            return 200, {"points": points, "next_page_offset": next_offset}

    def count_points(self, req, params):
        if req.json.get("shard_key") is not None:
            raise Unsupported("`shard_key`")
        with self.lock:
            coll = self.collection(params["collection_name"])
            return 200, {"count": len(self.matching(coll, req.json))}

    def query_points(self, req, params):
        body = req.json
        for key in ("prefetch", "lookup_from", "shard_key"):
            if body.get(key) is not None:
                raise Unsupported(f"`{key}` in queries")
        query = body.get("query")
        if isinstance(query, dict) and "nearest" in query:
            if query.get("mmr") is not None:
                raise Unsupported("MMR queries")
            query = query["nearest"]
        if not isinstance(query, list):
            raise Unsupported("queries other than a dense vector or {\"nearest\": vector}")
        if body.get("using"):
            raise ApiError(400, f"Wrong input: Not existing vector name error: {body['using']}")
        return 200, {"points": self.nearest(req, params, body, query)}

    def search_points(self, req, params):
        body = req.json
        if body.get("shard_key") is not None:
            raise Unsupported("`shard_key`")
        vector = body["vector"]
        if isinstance(vector, dict) and "indices" not in vector:
            if vector["name"]:
                raise ApiError(400, f"Wrong input: Not existing vector name error: "
                                    f"{vector['name']}")
            vector = vector["vector"]
        return 200, self.nearest(req, params, body, vector)

    def nearest(self, req, params, body, raw_query):
        """Exact nearest-neighbour search for query and search: best first,
        ties by id; score_threshold is strict (Distance::check_threshold)."""
        limit = body.get("limit") or 10
        offset = body.get("offset") or 0
        threshold = body.get("score_threshold")
        payload_sel = payload_selector(body.get("with_payload"), default=False)
        with_vector = vector_selected(body.get("with_vector"))
        with self.lock:
            coll = self.collection(params["collection_name"])
            query = coll.vector(raw_query)
            larger_better = DISTANCES[coll.distance][1]
            scored = [(f32(coll.score(query, p.vector)), pid, p)
                      for pid, p in self.matching(coll, body)]
            if threshold is not None:
                try:
                    threshold = f32(threshold)
                except OverflowError:  # serde reads it as an infinite f32
                    threshold = math.copysign(math.inf, threshold)
                scored = [s for s in scored
                          if (s[0] > threshold if larger_better else s[0] < threshold)]
            scored.sort(key=lambda s: ((-s[0] if larger_better else s[0]), id_order(s[1])))
            return [self.record_of(pid, p, payload_sel, with_vector, score=score)
                    for score, pid, p in scored[offset:offset + limit]]

    def record_of(self, pid, point, payload_sel, with_vector, score=None):
        """A Record, or a ScoredPoint when score is given, in Qdrant's field order."""
        out = {"id": pid}
        if score is not None:
            out["version"] = point.version
            out["score"] = score
        if payload_sel is not None:
            out["payload"] = (point.payload if payload_sel is True
                              else select_payload(point.payload, payload_sel))
        elif self.explicit_nulls:
            out["payload"] = None
        if with_vector:
            out["vector"] = point.printed_vector()
        elif self.explicit_nulls:
            out["vector"] = None
        return out


def payload_selector(value, default):
    """WithPayloadInterface -> None (no payload), True (all) or (kind, paths)."""
    if value is None:
        value = default
    if isinstance(value, bool):
        return True if value else None
    if isinstance(value, list):
        return "include", [parse_json_path(p) for p in value]
    kind = "include" if "include" in value else "exclude"
    return kind, [parse_json_path(p) for p in value[kind]]


def vector_selected(value):
    """WithVector: a bool, or vector names (the unnamed vector is "")."""
    if isinstance(value, list):
        return "" in value
    return bool(value)


class Bare:
    """A result sent without the {"result": ...} envelope (GET /)."""

    def __init__(self, value):
        self.value = value


class PlainText:
    def __init__(self, text):
        self.text = text


class Request:
    def __init__(self, method, path, raw_query, query, headers, body):
        self.method = method
        self.path = path
        self.raw_query = raw_query
        self.query = query
        self.headers = headers
        self.body = body
        self.json, self.json_error = None, None
        try:
            self.json = parse_json(body)
        except ValueError as e:
            self.json_error = str(e)

    def log_entry(self):
        if not self.body:
            body = None
        elif self.json_error is None:
            body = self.json
        else:
            body = self.body.decode("utf-8", "replace")
        return {"method": self.method, "path": self.path, "query": dict(self.query),
                "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body}


_FAULT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "status": {"type": "integer", "minimum": 100, "maximum": 599},
        "body": {},
        "content_type": {"type": "string"},
        "delay_ms": {"type": "number", "minimum": 0},
        "count": {"type": "integer", "minimum": 1},
        "path_regex": {"type": "string"},
        "method": {"type": "string"},
        "close": {"type": "boolean"},
    },
}


def make_fault(spec):
    error = best_match(Validator(_FAULT_SCHEMA).iter_errors(spec))
    if error is not None:
        raise ValueError(error.message)
    if not any(k in spec for k in ("status", "delay_ms", "close")):
        raise ValueError("a fault needs status, delay_ms or close")
    if "status" in spec and spec.get("close"):
        raise ValueError("status and close exclude each other")
    if "path_regex" in spec:
        try:
            re.compile(spec["path_regex"])
        except re.error as e:
            raise ValueError(f"path_regex: {e}") from None
    fault = dict(spec, count=spec.get("count", 1))
    if "status" in fault:
        body = fault.get("body", {"status": {"error": "injected fault"}, "time": 0.0})
        fault["body"] = body.encode() if isinstance(body, str) else dump_json(body)
        fault.setdefault("content_type", "application/json")
    return fault


def read_body(h):
    """The request body, by Content-Length or chunked transfer coding."""
    if "chunked" in (h.headers.get("Transfer-Encoding") or "").lower():
        chunks = []
        while True:
            size = int(h.rfile.readline().split(b";")[0], 16)
            if size == 0:
                while h.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailer fields
                return b"".join(chunks)
            chunks.append(h.rfile.read(size))
            h.rfile.readline()
    length = int(h.headers.get("Content-Length") or 0)
    return h.rfile.read(length) if length else b""


def send(h, status, body, content_type):
    h.send_response(status)
    if content_type:
        h.send_header("Content-Type", content_type)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


class Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 keeps libcurl's connections alive (every answer has a
    # Content-Length) and makes http.server answer `Expect: 100-continue`.
    protocol_version = "HTTP/1.1"
    # Headers and body are separate writes; without this Nagle's algorithm
    # and delayed ACKs add ~40 ms to every answer on a kept-alive connection.
    disable_nagle_algorithm = True

    def version_string(self):
        return "qdrant-contract-stand-in"

    def handle_request(self):
        try:
            self.server.standin.handle(self)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (e.g. its timeout)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = handle_request

    def log_message(self, format, *args):
        self.server.standin.log(f"{self.address_string()} {format % args}")


class Server(ThreadingHTTPServer):  # a thread per connection, daemon threads
    def __init__(self, address, standin):
        super().__init__(address, Handler)
        self.standin = standin


def serve(standin, host, port, banner):
    """Serves standin on host:port until SIGTERM: logs banner (with the
    address), prints `PORT <n>` once listening. Every stand-in's main
    ends here."""
    server = Server((host, port), standin)
    # SIGTERM ends serve_forever like Ctrl-C, so the socket is closed.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    standin.log(f"{banner} on {host}:{server.server_address[1]}")
    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--version", default=DEFAULT_VERSION, type=version_argument,
                        help="Qdrant version to pose as; below 1.10 there is no "
                             "/points/query but /points/search")
    parser.add_argument("--api-key", help="require this key (api-key or Authorization: Bearer)")
    parser.add_argument("--spec-dir", default=DEFAULT_SPEC_DIR,
                        help="directory with openapi-v1.19.json and openapi-v1.10.json")
    parser.add_argument("--log", help="log file (default: stderr)")
    args = parser.parse_args(argv)

    log = open(args.log, "a", encoding="utf-8") if args.log else sys.stderr
    standin = StandIn(args.spec_dir, args.version, args.api_key, log)
    return serve(standin, args.host, args.port,
                 f"Qdrant contract stand-in posing as {args.version} ({standin.spec.name})")


if __name__ == "__main__":
    sys.exit(main())
