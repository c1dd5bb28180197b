"""A minimal Python agent of memoryd: checks the server's health, records one
entity in global memory and reads it back through MemorydClient.

    bazel build //clients/python:stubs
    MEMORYD_TOKEN=$(cat .local/dev-token) PYTHONPATH=bazel-bin/clients/python:clients/python \
        /usr/bin/python3 clients/python/example.py [ADDRESS]   # default localhost:50051

MEMORYD_TOKEN is a capability token with global:read and global:write;
without one the example only shows GetEntity answering UNAUTHENTICATED.
Exits 1 when memoryd cannot be reached (UNAVAILABLE, DEADLINE_EXCEEDED, or
any failed health check), 0 when the calls went through, whatever their
status.
"""

import os
import sys

import grpc
from google.protobuf import struct_pb2

import health_v1_pb2
from memory.v1 import global_memory_pb2
from memoryd_client import MemorydClient

UNREACHABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def main(argv):
    target = argv[1] if len(argv) > 1 else "localhost:50051"
    token = os.environ.get("MEMORYD_TOKEN") or None
    with MemorydClient(target, token=token, timeout=5.0) as client:
        # 1. Is memoryd there and serving? ("" = the server as a whole.)
        try:
            status = client.check_health()
        except grpc.RpcError as e:
            print(f"cannot reach memoryd at {target}: {e.code().name}: {e.details()}",
                  file=sys.stderr)
            return 1
        print("health:", health_v1_pb2.HealthCheckResponse.ServingStatus.Name(status))

        # 2. Record one entity of the knowledge graph, then read it back.
        #
        # A real agent sends its capability token with every call (here
        # MemorydClient does), looks up what it knows before acting
        # (GetEntity / QueryEntities / Traverse, or router.Query across all
        # tiers), records what it learned with PutEntity and PutRelationship
        # and logs the task with RecordTask -- treating NOT_FOUND as "not
        # known yet" and retrying UNAVAILABLE with backoff.
        lost = False
        if token:
            properties = struct_pb2.Struct()
            properties.update({"written_in": "Python"})
            try:
                put = client.global_memory.PutEntity(global_memory_pb2.PutEntityRequest(
                    id="example-entity", type="example", name="written by the Python example",
                    properties=properties))
                print(f"PutEntity: OK: {'created' if put.created else 'replaced'} "
                      f"version={put.entity.meta.version}")
            except grpc.RpcError as e:
                # GetEntity below still runs: it shows what the token may read.
                print(f"PutEntity: {e.code().name}: {e.details()}")
                lost = e.code() in UNREACHABLE
        try:
            reply = client.global_memory.GetEntity(
                global_memory_pb2.GetEntityRequest(id="example-entity"))
        except grpc.RpcError as e:
            print(f"GetEntity: {e.code().name}: {e.details()}")
            return 1 if lost or e.code() in UNREACHABLE else 0
        entity = reply.entity
        print(f'GetEntity: OK: id={entity.id} name="{entity.name}" '
              f'version={entity.meta.version}')
        return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
