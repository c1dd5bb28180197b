"""A minimal Python agent of memoryd: checks the server's health, then asks
global memory for one entity through MemorydClient.

    bazel build //clients/python:stubs
    PYTHONPATH=bazel-bin/clients/python:clients/python \
        /usr/bin/python3 clients/python/example.py [ADDRESS]   # default localhost:50051

Exits 1 when memoryd cannot be reached (UNAVAILABLE, DEADLINE_EXCEEDED, or
any failed health check), 0 when the calls went through, whatever
GetEntity's status: until the global tier lands it answers UNIMPLEMENTED.
"""

import os
import sys

import grpc

import health_v1_pb2
from memory.v1 import global_memory_pb2
from memoryd_client import MemorydClient

UNREACHABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def main(argv):
    target = argv[1] if len(argv) > 1 else "localhost:50051"
    # MEMORYD_TOKEN: a capability token, once memoryd checks them.
    with MemorydClient(target, token=os.environ.get("MEMORYD_TOKEN") or None,
                       timeout=5.0) as client:
        # 1. Is memoryd there and serving? ("" = the server as a whole.)
        try:
            status = client.check_health()
        except grpc.RpcError as e:
            print(f"cannot reach memoryd at {target}: {e.code().name}: {e.details()}",
                  file=sys.stderr)
            return 1
        print("health:", health_v1_pb2.HealthCheckResponse.ServingStatus.Name(status))

        # 2. Read one entity of the knowledge graph.
        #
        # A real agent would look up what it knows before acting (GetEntity /
        # QueryEntities / Traverse, or router.Query across all tiers), record
        # what it learned with PutEntity and PutRelationship and log the task
        # with RecordTask -- treating NOT_FOUND as "not known yet" and
        # retrying UNAVAILABLE with backoff.
        try:
            reply = client.global_memory.GetEntity(
                global_memory_pb2.GetEntityRequest(id="example-entity"))
        except grpc.RpcError as e:
            print(f"GetEntity: {e.code().name}: {e.details()}")
            return 1 if e.code() in UNREACHABLE else 0
        print("GetEntity: OK:", reply.entity)
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
