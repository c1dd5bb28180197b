#!/usr/bin/python3
"""Embedder contract stand-in: an HTTP server for memoryd's tests. It is a
contract stand-in, not an embedding model.

No embeddings provider can run on the test machines, so memoryd's embedder
client (--embedder-url) is tested against this server. It has two jobs.

1. Contract check. Every request is checked against the OpenAI embeddings
   API, the shape Ollama, vLLM, text-embeddings-inference and hosted
   providers serve: `POST /v1/embeddings` with `Content-Type:
   application/json` and a body valid against CreateEmbeddingRequest
   (REQUEST_SCHEMA below, transcribed from OpenAI's published OpenAPI
   document: `model` and `input` required, `input` a string or an array of
   1 to 2048 non-empty strings or token arrays, `encoding_format` float or
   base64, `dimensions` >= 1, `user`; no other property). A violation is
   recorded (GET /__standin/violations) and answered with HTTP 400 and the
   API's error shape
   `{"error": {"message": ..., "type": "invalid_request_error", "param":
   ..., "code": ...}}`. The stand-in checks its own answers against
   CreateEmbeddingResponse and ErrorResponse too (violation kind
   "response": a bug here).

2. The API's behaviour, for what memoryd uses: each model (--models
   name=dims,...) turns a text into a deterministic unit vector, a hashed
   bag of its lower-cased words (so texts that share words are near each
   other, and the same text always gives the same vector); an unknown model
   is 404 `model_not_found`; a missing or wrong Bearer key (with --api-key)
   is 401 `invalid_api_key`; an input longer than --max-input-chars is 400
   `context_length_exceeded`; token arrays and base64 answers are 501 (not
   implemented here, recorded as kind "unsupported").

Control endpoints, outside the API, never validated, never faulted, no API
key needed (the same as the Qdrant stand-in's):
  POST   /__standin/faults      inject a fault, JSON object:
           status, body (string or JSON; default the API's error shape),
           content_type, delay_ms, close, count (default 1), path_regex
           (re.search on the path), method.
  DELETE /__standin/faults      forget all faults
  GET    /__standin/violations  recorded violations, a JSON list
  DELETE /__standin/violations  forget them
  GET    /__standin/requests    the last 1000 requests (method, path, query,
                                headers with lower-case names, body)
  DELETE /__standin/requests    forget them
  DELETE /__standin/state       nothing to drop (it keeps no state)

Usage: embedder_contract_server.py [--host 127.0.0.1] [--port 0]
       [--models standin-embed-16=16] [--api-key KEY] [--max-input-chars N]
       [--log FILE]
Once listening it prints `PORT <n>` as its first line on stdout. Run it with
Debian's /usr/bin/python3 (needs python3-jsonschema).
"""

import argparse
import collections
import hashlib
import math
import os
import re
import struct
import sys
import threading
import time
import urllib.parse

from jsonschema import Draft202012Validator as Validator
from jsonschema.exceptions import best_match

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The HTTP plumbing both stand-ins share: request bodies, answers, the
# fault records, the threaded server.
from qdrant_contract_server import Request, dump_json, make_fault, serve  # noqa: E402
from qdrant_contract_server import StandIn as QdrantStandIn  # noqa: E402
from qdrant_contract_server import read_body, send  # noqa: E402

# ---- the API's shapes (OpenAI's OpenAPI document, components/schemas) ----

REQUEST_SCHEMA = {  # CreateEmbeddingRequest
    "type": "object",
    "additionalProperties": False,
    "required": ["model", "input"],
    "properties": {
        "input": {"anyOf": [
            {"type": "string", "minLength": 1},
            {"type": "array", "minItems": 1, "maxItems": 2048,
             "items": {"type": "string", "minLength": 1}},
            {"type": "array", "minItems": 1, "maxItems": 2048, "items": {"type": "integer"}},
            {"type": "array", "minItems": 1, "maxItems": 2048,
             "items": {"type": "array", "minItems": 1, "items": {"type": "integer"}}},
        ]},
        "model": {"type": "string"},
        "encoding_format": {"type": "string", "enum": ["float", "base64"]},
        "dimensions": {"type": "integer", "minimum": 1},
        "user": {"type": "string"},
    },
}

RESPONSE_SCHEMA = {  # CreateEmbeddingResponse
    "type": "object",
    "required": ["data", "model", "object", "usage"],
    "properties": {
        "data": {"type": "array", "items": {  # Embedding
            "type": "object",
            "required": ["index", "embedding", "object"],
            "properties": {
                "index": {"type": "integer"},
                "embedding": {"type": "array", "items": {"type": "number"}},
                "object": {"enum": ["embedding"]},
            },
        }},
        "model": {"type": "string"},
        "object": {"enum": ["list"]},
        "usage": {"type": "object", "required": ["prompt_tokens", "total_tokens"],
                  "properties": {"prompt_tokens": {"type": "integer"},
                                 "total_tokens": {"type": "integer"}}},
    },
}

ERROR_SCHEMA = {  # ErrorResponse
    "type": "object",
    "required": ["error"],
    "properties": {"error": {
        "type": "object",
        "required": ["type", "message", "param", "code"],
        "properties": {"code": {"type": ["string", "null"]}, "message": {"type": "string"},
                       "param": {"type": ["string", "null"]}, "type": {"type": "string"}},
    }},
}

PATH = "/v1/embeddings"
WORD = re.compile(r"[a-z0-9]+")


def error_body(message, type_="invalid_request_error", param=None, code=None):
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def embed(model, dims, text):
    """A unit vector of dims float32s: each word adds +-1 at a position its
    hash (with the model's name) picks."""
    v = [0.0] * dims
    words = WORD.findall(text.lower()) or [text]
    for w in words:
        h = hashlib.sha256(f"{model}\0{w}".encode()).digest()
        v[int.from_bytes(h[:4], "big") % dims] += 1.0 if h[4] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    # Through float32, as a model's output would be.
    return [struct.unpack("f", struct.pack("f", x / norm))[0] for x in v], len(words)


class ApiError(Exception):
    def __init__(self, status, message, type_="invalid_request_error", param=None, code=None):
        super().__init__(message)
        self.status, self.body = status, error_body(message, type_, param, code)


class StandIn:
    def __init__(self, models, api_key, max_input_chars, log):
        self.models = models
        self.api_key = api_key
        self.max_input_chars = max_input_chars
        self.log_file = log
        self.lock = threading.Lock()
        self.faults = []
        self.violations = []
        self.requests = collections.deque(maxlen=1000)
        self.request_validator = Validator(REQUEST_SCHEMA)
        self.response_validator = Validator(RESPONSE_SCHEMA)
        self.error_validator = Validator(ERROR_SCHEMA)

    log = QdrantStandIn.log

    def record(self, kind, req, error):
        entry = {"kind": kind, "method": req.method, "path": req.path, "error": error,
                 "body_excerpt": req.body[:300].decode("utf-8", "replace")}
        with self.lock:
            self.violations.append(entry)
        self.log(f"VIOLATION {kind} {req.method} {req.path}: {error}")

    def answer(self, h, req, status, value):
        """Send a JSON answer, checked against the API's shapes first."""
        validator = self.response_validator if status == 200 else self.error_validator
        error = best_match(validator.iter_errors(value))
        if error is not None:
            self.record("response", req, f"{status} answer does not match the API: "
                                         f"{error.message}")
        send(h, status, dump_json(value), "application/json")

    def handle(self, h):
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
        query = urllib.parse.parse_qsl(url.query, keep_blank_values=True)
        req = Request(h.command, url.path, url.query, query, h.headers, body)
        with self.lock:
            self.requests.append(req.log_entry())

        fault = self.take_fault(req)
        if fault is not None:
            if fault.get("delay_ms"):
                time.sleep(fault["delay_ms"] / 1000)
            if fault.get("close"):
                h.close_connection = True
                self.log(f"{req.method} {req.path} -> connection dropped (fault)")
                return
            if "status" in fault:
                send(h, fault["status"], fault["body"], fault["content_type"])
                return
        try:
            status, value = self.embeddings(req)
        except ApiError as e:
            status, value = e.status, e.body
        self.answer(h, req, status, value)

    def check(self, req):
        """The contract: raises ApiError (recorded) for a request outside it."""
        def violation(status, message, param=None):
            self.record("request", req, message)
            raise ApiError(status, f"contract violation: {message}", param=param)

        if (req.method, req.path) != ("POST", PATH):
            violation(404, f"{req.method} {req.path} is not an operation of the embeddings API "
                           f"(POST {PATH})")
        content_type = (req.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            violation(400, f"Content-Type must be application/json, not {content_type!r}")
        if req.query:
            violation(400, f"POST {PATH} takes no query parameters")
        if req.json_error is not None:
            violation(400, f"the body is not JSON: {req.json_error}")
        error = best_match(self.request_validator.iter_errors(req.json))
        if error is not None:
            at = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}"
                               for p in error.absolute_path)
            violation(400, f"{at}: {error.message}", param=at)

    def embeddings(self, req):
        self.check(req)
        if self.api_key is not None:
            auth = req.headers.get("Authorization") or ""
            if auth != f"Bearer {self.api_key}":
                raise ApiError(401, "Incorrect API key provided.", param=None,
                               code="invalid_api_key")
        body = req.json
        model = body["model"]
        if model not in self.models:
            raise ApiError(404, f"The model `{model}` does not exist or you do not have access "
                                f"to it.", code="model_not_found")
        if body.get("encoding_format", "float") != "float" or "dimensions" in body:
            message = "base64 answers and `dimensions`"
            self.record("unsupported", req, message)
            raise ApiError(501, f"the embedder stand-in does not implement {message}",
                           type_="server_error")
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if not all(isinstance(t, str) for t in inputs):
            self.record("unsupported", req, "token arrays")
            raise ApiError(501, "the embedder stand-in does not implement token arrays",
                           type_="server_error")
        data, tokens = [], 0
        for i, text in enumerate(inputs):
            if len(text) > self.max_input_chars:
                raise ApiError(400, f"This model's maximum context length is "
                                    f"{self.max_input_chars} characters; input {i} has "
                                    f"{len(text)}.", param="input",
                               code="context_length_exceeded")
            vector, n = embed(model, self.models[model], text)
            tokens += n
            data.append({"object": "embedding", "index": i, "embedding": vector})
        return 200, {"object": "list", "data": data, "model": model,
                     "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    # Faults are matched as the Qdrant stand-in matches them.
    take_fault = QdrantStandIn.take_fault

    # The control endpoints are the Qdrant stand-in's.
    control = QdrantStandIn.control

    def new_fault(self, spec):
        """A fault; a faulted answer's default body is the API's error shape."""
        if isinstance(spec, dict) and "status" in spec and "body" not in spec:
            spec = dict(spec, body=error_body("injected fault", "server_error"))
        return make_fault(spec)

    def reset_state(self):
        """DELETE /__standin/state: the stand-in keeps no state."""
        return {}


def models_argument(text):
    models = {}
    for part in text.split(","):
        name, _, dims = part.partition("=")
        if not name or not dims.isdigit() or not 1 <= int(dims) <= 65536:
            raise argparse.ArgumentTypeError(f"not name=dims: {part!r}")
        models[name] = int(dims)
    return models


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--models", type=models_argument, default={"standin-embed-16": 16},
                        help="the models served and their vector lengths: name=dims,...")
    parser.add_argument("--api-key", help="require Authorization: Bearer KEY")
    parser.add_argument("--max-input-chars", type=int, default=32768,
                        help="longer inputs are refused (context_length_exceeded)")
    parser.add_argument("--log", help="log file (default: stderr)")
    args = parser.parse_args(argv)

    log = open(args.log, "a", encoding="utf-8") if args.log else sys.stderr
    standin = StandIn(args.models, args.api_key, args.max_input_chars, log)
    return serve(standin, args.host, args.port,
                 f"embedder contract stand-in serving {sorted(args.models)}")


if __name__ == "__main__":
    sys.exit(main())
