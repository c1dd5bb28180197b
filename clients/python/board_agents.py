"""Two (or more) agents sharing one task's work through a memoryd
blackboard: run this program once per agent, at the same time, on the same
task. Each agent walks the sub-tasks, claims a free one with a lease
(`subtask/<i>`, expected_version 0), does it (renewing the lease while it
works), posts `result/<i>` and releases the claim. A claim whose agent died
frees itself when its lease runs out, and another agent takes it over. Every
agent ends when each sub-task has a result; each prints what it did.

    bazel build //clients/python:stubs
    export MEMORYD_TOKEN=$(cat .local/dev-token)   # blackboard:read:all + write
    export PYTHONPATH=bazel-bin/clients/python:clients/python
    /usr/bin/python3 clients/python/board_agents.py ADDRESS TASK agent-1 &
    /usr/bin/python3 clients/python/board_agents.py ADDRESS TASK agent-2

Arguments: ADDRESS TASK AGENT [SUBTASKS (default 8)] [WORK_SECONDS (0.2)].
The token needs blackboard:read:all (to see the others' claims and
results) and blackboard:write. Exit 0 when every sub-task has a result, 1
otherwise.
"""

import os
import sys
import time

import grpc

from memoryd_client import MemorydClient, from_value

LEASE = 3.0  # seconds a claim lives unless renewed


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    target, task, me = argv[1], argv[2], argv[3]
    subtasks = int(argv[4]) if len(argv) > 4 else 8
    work = float(argv[5]) if len(argv) > 5 else 0.2
    with MemorydClient(target, token=os.environ.get("MEMORYD_TOKEN"), timeout=5.0) as client:
        board = client.board(task)
        done = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            items, _, _ = board.read()
            todo = [i for i in range(subtasks) if f"result/{i}" not in items]
            if not todo:
                break
            progressed = False
            for i in todo:
                if f"subtask/{i}" in items or not board.claim(f"subtask/{i}", me, lease=LEASE):
                    continue  # another agent holds it
                # Ours: check nobody finished it meanwhile, then work,
                # renewing the lease halfway through.
                if board.get(f"result/{i}") is None:
                    time.sleep(work / 2)
                    if not board.claim(f"subtask/{i}", me, lease=LEASE, renew=True):
                        continue  # our lease lapsed and another took it over
                    time.sleep(work / 2)
                    board.post(f"result/{i}", {"by": me, "value": i * i})
                    done.append(i)
                try:
                    board.delete(f"subtask/{i}")
                except grpc.RpcError as e:
                    if e.code() != grpc.StatusCode.NOT_FOUND:
                        raise
                progressed = True
            if not progressed:
                time.sleep(0.1)  # the rest are claimed: wait for results or lapsed leases
        items, _, _ = board.read()
        results = {k: from_value(v.value) for k, v in items.items() if k.startswith("result/")}
        print(f"{me}: did {sorted(done)}; the board has {len(results)} of {subtasks} results")
        return 0 if len(results) == subtasks else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
