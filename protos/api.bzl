"""The memory.v1 .proto files, by base name: the one list every generator uses."""

API_PROTOS = [
    "common",
    "global_memory",
    "episodic_memory",
    "cache",
    "entries",
    "blackboard",
    "router",
    "audit",
    "access",
    "privacy",
    "working_memory",
    "session",
]
