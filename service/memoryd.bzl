"""What the memoryd binary is built from: service/BUILD's memoryd, and test
binaries that add a tier of their own to its table (main.c's
MEMORYD_TEST_TIER, tests/server/stub_tier)."""

# main.c's libraries: every tier of its table and what start-up uses.
MEMORYD_MAIN_DEPS = [
    "//bazel/system:jansson",
    "//bazel/system:openssl",
    "//protos:descriptor_set_embedded",
    "//service/access",
    "//service/audit",
    "//service/audit_service",
    "//service/auth",
    "//service/auth:authn",
    "//service/blackboard",
    "//service/cache",
    "//service/cache_service",
    "//service/core",
    "//service/entries",
    "//service/episodic",
    "//service/global",
    "//service/health",
    "//service/metrics",
    "//service/metrics:calls",
    "//service/metrics:http",
    "//service/pb",
    "//service/pii",
    "//service/privacy:receipt",
    "//service/privacy",
    "//service/reflection",
    "//service/router",
    "//service/rpc",
    "//service/session",
    "//service/store",
    "//service/tier",
    "//service/working",
]
