#!/usr/bin/python3
"""bench/embed_direct.py: the direct side of bench/embedder.sh: one
embeddings request (one text) after another to an OpenAI-compatible
endpoint, over one kept-alive HTTP/1.1 connection per thread, for
--duration seconds after --warmup; prints one JSON line shaped like
bench/loadgen's (label, qps, p50_us, p99_us, errors).

Usage: embed_direct.py --url http://host:port/v1 --model M --text T
       [--duration 5] [--warmup 1] [--threads 1] [--label direct-embed]
"""

import argparse
import http.client
import json
import threading
import time
import urllib.parse


def worker(url, body, deadline_warm, deadline, out, errors):
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    path = u.path.rstrip("/") + "/embeddings"
    headers = {"Content-Type": "application/json"}
    while True:
        t0 = time.monotonic()
        if t0 >= deadline:
            break
        try:
            conn.request("POST", path, body=body, headers=headers)
            r = conn.getresponse()
            r.read()
            ok = r.status == 200
        except OSError:
            conn.close()
            ok = False
        t1 = time.monotonic()
        if t0 < deadline_warm:
            continue
        if ok:
            out.append(t1 - t0)
        else:
            errors.append(1)
    conn.close()


def percentile(sorted_values, p):
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(p * len(sorted_values)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--label", default="direct-embed")
    a = ap.parse_args()
    body = json.dumps({"model": a.model, "input": [a.text], "encoding_format": "float"}).encode()
    start = time.monotonic()
    warm, end = start + a.warmup, start + a.warmup + a.duration
    lat, errors = [], []
    threads = [threading.Thread(target=worker, args=(a.url, body, warm, end, lat, errors))
               for _ in range(a.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lat.sort()
    # Compact, as loadgen prints it (bench/lib.sh's field() matches that).
    print(json.dumps({"label": a.label, "qps": round(len(lat) / a.duration, 1),
                      "p50_us": round(percentile(lat, 0.5) * 1e6, 1),
                      "p99_us": round(percentile(lat, 0.99) * 1e6, 1), "errors": len(errors)},
                     separators=(",", ":")))


if __name__ == "__main__":
    main()
